//! mekara: workflows as code for coding agents.
//!
//! The library holds everything; `main.rs` only calls [`run`]. The layers, from the
//! bottom up:
//!
//! - [`script`] finds scripts by name (project, user, bundled) and reads their files;
//! - [`engine`] runs them: the Starlark step builtins, the shell runner, the journal, and the
//!   executor that holds the stack of frames;
//! - [`mcp`] serves the engine to agents; [`serve`] serves Starlark functions as MCP tools;
//!   both speak MCP through [`transport`] (stdio and Streamable HTTP);
//! - [`cli`] is the command line: `mekara run`, `scripts`, `check`, `runs`, `mcp`, `serve`.
//! - [`display`] holds the few formatting helpers the command line and the servers share.
//!
//! The engine knows nothing about terminals or MCP; those are adapters on top of it.

pub mod cli;
pub mod client;
pub mod display;
pub mod engine;
pub mod exit;
pub mod hooks;
pub mod install;
pub mod mcp;
pub mod paths;
pub mod script;
pub mod serve;
pub mod transport;

pub use cli::run;
