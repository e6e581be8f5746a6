//! mekara's integration tests: one binary with a module per area (as uv's `tests/it`), so a
//! library edit relinks one test binary. Every test spawns the real `mekara` binary in a
//! temporary project ([`common`]) and talks to it the way its users do: the terminal, the
//! hooks Claude Code runs, and MCP clients (`rmcp`, the official Python SDK, the conformance
//! suite, the real Claude Code, Codex, Gemini CLI, Qwen Code, OpenCode and Copilot CLI).
//!
//! A test that needs an outside client or server runs with `--features clients`; without
//! it the test is listed as ignored, saying what it needs, by one line above it:
//! `#[cfg_attr(not(feature = "clients"), ignore = "needs Codex")]`. With the feature on, a
//! missing install fails the test, saying how to install it ([`common::outside_client`]).

// These tests drive Unix tools (bash, process groups, signals, strace). On Windows the
// smoke suite of `tests/windows/` (run under Wine from Linux) stands in for them.
#![cfg(unix)]

#[macro_use]
mod common;

mod architecture;
mod ask;
mod builtins;
mod bundled;
mod chat_completions;
mod claude_code;
mod codex;
mod conformance;
mod copilot;
mod durability;
mod eval;
mod exit_codes;
mod gemini;
mod helpers;
mod hooks;
mod inspector;
mod install;
mod library;
mod library_hostile;
mod library_trials;
mod mcp;
mod mcp_client;
mod mcp_protocol;
mod mekara_test;
mod memory;
mod notify;
mod opencode;
mod otel;
mod packaging;
mod parallel;
mod parallel_agents;
mod plugin;
mod postgres;
mod prune;
mod python_client;
mod queue;
mod qwen;
mod release;
mod resolution;
mod rewind;
mod runs_index;
mod serve;
mod shadowing;
mod shell;
mod spend;
mod stack;
mod standin;
mod stops;
mod terminal;
mod transcripts;
mod trust;
mod tutorial;
mod ui;
mod unattended;
mod values;
mod workflows;
