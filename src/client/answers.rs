//! What the client gives back: a tool's answer ([`ToolOutput`]), and the listing of
//! `mekara tools list` ([`ServerListing`], [`ToolInfo`]).

use serde_json::Value as Json;

use super::error::ClientError;

/// What a tool answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Its content as text: text blocks joined by newlines, other blocks described.
    pub text: String,
    /// Its structured content.
    pub structured: Option<Json>,
    /// Whether the tool said it failed.
    pub is_error: bool,
}

/// A tool as `mekara tools list` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// Its name.
    pub name: String,
    /// Its description's first line.
    pub description: String,
    /// Whether it is annotated `readOnlyHint: true`.
    pub read_only: bool,
    /// Whether policy lets scripts call it; the setting that refuses it otherwise.
    pub allowed: Result<(), String>,
}

/// One server in a listing: its tools, or why they could not be had.
#[derive(Debug, Clone)]
pub struct ServerListing {
    /// The server.
    pub name: String,
    /// Its tools.
    pub tools: Result<Vec<ToolInfo>, ClientError>,
}
