//! Copilot CLI: its model sees mekara's tools as `mekara-NAME`; `--client copilot` adds the
//! `mekara` server to `~/.copilot/mcp-config.json` with `--user` (in a project it reads the
//! `.mcp.json` written for Claude Code). It has no headless adapter.

use serde_json::json;

use super::clients::{Client, Served};
use super::tools::{AgentTool, SERVER_NAME};
use crate::install::{InstallError, Setup};

/// Copilot CLI.
pub(crate) const CLIENT: Client = Client {
    name: "copilot",
    help: "Copilot CLI (`.mcp.json`; `~/.copilot/mcp-config.json` with `--user`)",
    is_client_info: |name| name == "copilot-cli",
    tool_name,
    fills_only_required_arguments: false,
    always: false,
    install,
    left_for_you: |user| Some(left_for_you(user)),
    note_rank: 3,
    headless: None,
};

/// `mekara-start`.
fn tool_name(tool: AgentTool, _: Served) -> String {
    format!("{SERVER_NAME}-{}", tool.name())
}

/// Copilot CLI's own `mcp-config.json` (`--user`; in a project it reads `.mcp.json`): the
/// `mekara` server with all its tools enabled. Copilot CLI keeps tool approvals only for a
/// session (`--allow-tool mekara`), so there is no permission entry to write.
fn install(setup: &mut Setup<'_>) -> Result<(), InstallError> {
    if !setup.user() {
        return Ok(());
    }
    let path = setup.base().join(".copilot/mcp-config.json");
    let entry = json!({"type": "local", "command": "mekara", "args": ["mcp"], "tools": ["*"]});
    setup.server_entry(&path, "mcpServers", &entry)
}

fn left_for_you(user: bool) -> String {
    let trust = if user {
        ""
    } else {
        "start `copilot` in this folder once and trust it (Copilot CLI reads no \
         `.mcp.json` of an untrusted folder); "
    };
    format!(
        "{trust}allow mekara's tools when you start Copilot CLI: `copilot --allow-tool \
         mekara` (it keeps no tool approvals in a file: without the option it asks at \
         each call, and `copilot -p` refuses them)"
    )
}
