//! Whether the person approved a server of the project's `.mcp.json`. A cloned repository
//! writes that file, and a server there is a command mekara would start (or a URL it would
//! send expanded environment variables to), so mekara contacts one only when the person
//! approved it: in Claude Code's record, which mekara reads, or on the command line
//! (`mekara tools --trust`). Servers of `~/.claude.json` are the person's own.
//!
//! Claude Code's record is `enableAllProjectMcpServers` and `enabledMcpjsonServers`, with
//! `disabledMcpjsonServers` winning, in the settings a repository does not commit: the
//! project's `.claude/settings.local.json`, the user's `~/.claude/settings.json`, and the
//! project's entry in `~/.claude.json`. The project's `.claude/settings.json` is the
//! repository's own, so it approves nothing.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

/// The settings that may hold the person's approval for the project at `root`.
fn records(root: &Path, home: Option<&Path>) -> Vec<Json> {
    let read = |file: PathBuf| -> Option<Json> {
        let text = std::fs::read_to_string(&file).ok()?;
        serde_json::from_str(&text)
            .inspect_err(|e| tracing::debug!("`{}` is not JSON: {e}", file.display()))
            .ok()
    };
    let mut found: Vec<Json> = read(root.join(".claude/settings.local.json"))
        .into_iter()
        .collect();
    if let Some(home) = home {
        found.extend(read(home.join(".claude/settings.json")));
        let project = read(home.join(".claude.json")).and_then(|json| {
            json.get("projects")?
                .get(root.to_string_lossy().as_ref())
                .cloned()
        });
        found.extend(project);
    }
    found
}

/// Whether the person approved server `name` of the `.mcp.json` of the project at `root`.
pub(super) fn approved(root: &Path, home: Option<&Path>, name: &str) -> bool {
    let records = records(root, home);
    let lists = |key: &str| {
        records.iter().any(|r| {
            r.get(key)
                .and_then(Json::as_array)
                .is_some_and(|names| names.iter().any(|n| n.as_str() == Some(name)))
        })
    };
    if lists("disabledMcpjsonServers") {
        return false;
    }
    lists("enabledMcpjsonServers")
        || records
            .iter()
            .any(|r| r.get("enableAllProjectMcpServers") == Some(&Json::Bool(true)))
}
