//! mekara: workflows as code for coding agents.
//!
//! The library holds everything; `main.rs` only calls [`run`]. The layers, from the
//! bottom up:
//!
//! - [`script`] finds scripts by name (project, user, bundled) and reads their files;
//! - [`engine`] runs them: the Starlark step builtins, the shell runner, the journal, and the
//!   executor that holds the stack of frames;
//! - [`mcp`] serves the engine to agents; [`serve`] serves Starlark functions as MCP tools;
//! - [`cli`] is the command line: `mekara run`, `scripts`, `check`, `runs`, `mcp`, `serve`.
//!
//! The engine knows nothing about terminals or MCP; those are adapters on top of it.

pub mod cli;
pub mod client;
pub mod engine;
pub mod exit;
pub mod hooks;
pub mod install;
pub mod mcp;
pub mod paths;
pub mod script;
pub mod serve;

pub use cli::run;
