//! mekara: workflows as code for coding agents.
//!
//! The library holds everything; `main.rs` only calls [`run`]. The layers, from the
//! bottom up:
//!
//! - [`script`] finds scripts by name (project, user, bundled) and reads their files;
//! - [`engine`] runs them: the Starlark step builtins, the shell runner, the journal, and the
//!   executor that holds the stack of frames;
//! - [`agents`] is the agent layer: the session an agent drives, the calls it makes, every
//!   word said to it, and one file per agent client (its tool names, its install, its
//!   headless adapter);
//! - [`mcp`] serves the agent layer to agents over MCP, and unattended runs
//!   (`mekara run --agent …`, in [`cli`]) drive it with agent processes: both are adapters
//!   on [`agents`]; [`serve`] serves Starlark functions as MCP tools; both servers speak MCP
//!   through [`transport`] (stdio and Streamable HTTP);
//! - [`hooks`] and [`install`] set agent clients up, with what [`agents`] knows of them;
//! - [`cli`] is the command line: `mekara run`, `scripts`, `check`, `runs`, `mcp`, `serve`.
//! - [`display`] holds the few formatting helpers the command line and the servers share.
//!
//! The engine knows nothing about terminals or MCP; those are adapters on top of it.

// Crate-private items say so (`pub(crate)`), so the compiler reports what nothing uses.
// Set here, not in Cargo.toml: in the test and bench binaries nothing is reachable.
#![warn(unreachable_pub)]
// A dependency nothing uses fails the lint gate (tests and benches have their own).
#![cfg_attr(not(test), warn(unused_crate_dependencies))]

// Off Linux no process backend reads the boot clock: only the benches use `nix` then.
#[cfg(not(target_os = "linux"))]
use nix as _;

// Windows has no use for rustix (its process and poll calls are Unix's).
#[cfg(windows)]
use rustix as _;

// Everything is crate-private but what `main.rs` and the benches call, so the compiler
// reports what nothing uses; the tests go through the binary.
mod agents;
mod cases;
mod cli;
mod client;
mod config;
mod display;
mod engine;
mod eval;
mod exit;
#[cfg(test)]
mod fuzz;
mod hooks;
mod host;
mod install;
mod mcp;
mod memory;
mod notify;
mod paths;
mod script;
mod secrets;
mod serve;
mod store;
mod traces;
mod transport;
mod ui;

pub use cli::run;
pub use client::McpClient;
pub use engine::runner::CancelToken;
pub use memory::Allocator;
