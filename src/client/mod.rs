//! mekara as an MCP client (DESIGN §8): the servers of `.mcp.json`, the policy of
//! `.mekara/config.toml`, and a pool of connections that `mcp()` steps, prompt tags and
//! `mekara tools` call tools through.
//!
//! - [`config`]: which servers exist, `${VAR}` expansion, what came from the environment;
//! - [`policy`]: allow, deny, read-only, timeouts, retries; [`approval`]: whether the person
//!   approved a server of the project's `.mcp.json`;
//! - [`schema`]: arguments checked against a tool's input schema before the call;
//! - [`stdio`]: a server as a child process, its answers screened for depth; [`http`]: the
//!   Streamable HTTP transport; [`tls`]: the certificates it trusts;
//! - [`mcp_client`]: [`McpClient`], what the rest of mekara calls, and [`answers`], what it
//!   gives back;
//! - [`pool`]: the servers and policy read once, and a connection per server, opened by
//!   [`connect`] and reused;
//! - [`calls`]: listing tools and calling one on an open connection; [`auth`]: what a
//!   refused token is told;
//! - [`runner`]: [`ClientRunner`], the engine's effect runner with tool calls.
//!
//! The engine never sees rmcp: it asks its [`StepRunner`](crate::engine::StepRunner) to
//! `call_tool`, and this module answers with a
//! [`StepResult`](crate::engine::step::StepResult). The dependency points one way,
//! client → engine.
//!
//! **Runtime.** The engine is synchronous (it runs on a blocking thread inside `mekara mcp`),
//! rmcp is async. The client owns a small tokio runtime of its own (one worker thread,
//! created on first use): connections live on it for as long as the client does, whichever
//! thread or runtime the caller is on. A sync call spawns its future there and waits on a
//! channel, checking the step's cancel token meanwhile; it never blocks inside the caller's
//! runtime, and dropping the client shuts its runtime down in the background.

mod answers;
mod approval;
mod auth;
mod calls;
pub(crate) mod config;
mod connect;
pub(crate) mod error;
pub(crate) mod http;
mod mcp_client;
pub(crate) mod policy;
mod pool;
mod runner;
pub(crate) mod schema;
mod stdio;
pub(crate) mod tls;

pub(crate) use config::Secrets;
pub(crate) use error::ClientError;
pub use mcp_client::McpClient;
pub(crate) use runner::ClientRunner;
