//! `mekara mcp` driven by the official Rust SDK's client (`rmcp`) over stdio: the real
//! binary, real scripts, real shell steps. Every reply shape is pinned by snapshots.

#[path = "../common/mod.rs"]
mod common;

mod claude;
mod client;
mod flows;
mod replies;
mod vcr;
