//! Qwen Code: its model sees mekara's tools as `mcp__mekara__NAME`, as Claude Code's does;
//! `--client qwen` adds the `mekara` server to `.qwen/settings.json`. It has no headless
//! adapter.

use serde_json::json;

use super::clients::{Client, Served};
use super::tools::{AgentTool, SERVER_NAME};
use crate::install::{InstallError, Setup};

/// Qwen Code.
pub(crate) const CLIENT: Client = Client {
    name: "qwen",
    help: "Qwen Code (`.qwen/settings.json`)",
    // Qwen Code names each connection after its server.
    is_client_info: |name| name.starts_with("qwen-cli-mcp-client"),
    tool_name,
    fills_only_required_arguments: false,
    always: false,
    install,
    left_for_you,
    note_rank: 1,
    headless: None,
};

/// `mcp__mekara__start`.
fn tool_name(tool: AgentTool, _: Served) -> String {
    format!("mcp__{SERVER_NAME}__{}", tool.name())
}

/// `settings.json`: the `mekara` server, trusted, with its tools always loaded. Qwen Code is
/// a fork of Gemini CLI and keeps its `trust` switch (without it, every call of the server's
/// tools asks for a confirmation, which `qwen -p` cannot get). It also hides an MCP server's
/// tools behind a `tool_search` bridge unless `alwaysLoadTools` is set: the model would first
/// have to search for `start`, and the tools mekara's replies name would not be among those
/// it was offered.
fn install(setup: &mut Setup<'_>) -> Result<(), InstallError> {
    let path = setup.base().join(".qwen/settings.json");
    let entry =
        json!({"command": "mekara", "args": ["mcp"], "trust": true, "alwaysLoadTools": true});
    setup.server_entry(&path, "mcpServers", &entry)
}

fn left_for_you(user: bool) -> Option<String> {
    (!user).then(|| {
        "approve the `mekara` server in Qwen Code once: run `qwen mcp approve \
         mekara` in this folder, or `/mcp` in `qwen` (until then Qwen Code starts \
         no server of the project's configuration)"
            .to_string()
    })
}
