//! `mekara mcp` driven by the official Rust SDK's client (`rmcp`) over stdio: the real
//! binary, real scripts, real shell steps. Every reply shape is pinned by snapshots.

mod bounded;
mod claude;
pub mod client;
mod flows;
pub(crate) mod handles;
mod replies;
mod rewind;
mod shadowing;
mod tool_names;
mod vcr;
pub(crate) mod warm;
