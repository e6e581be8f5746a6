//! mekara's Claude Code plugin and the marketplace that lists it, as files: the repository
//! is a marketplace (`.claude-plugin/marketplace.json`) whose one plugin is the folder
//! `plugin/` (kept small: `claude plugin install` copies it into the user's plugin cache).
//! The same folder is mekara's Gemini CLI extension (`plugin/gemini-extension.json`, read by
//! `gemini extensions install`), and Codex and Copilot CLI install it from the marketplace.
//!
//! What the plugin holds that mekara decides (its manifest and version, its server, its
//! hooks, the command files of the bundled scripts) is generated here from the same values
//! `mekara install` uses, and committed; the test below fails when a committed file differs
//! from what mekara generates, and `MEKARA_BLESS=1` rewrites them. The launchers
//! (`plugin/bin/mekara` in `sh`, and `plugin/bin/mekara.cmd`, which Windows takes for the same
//! name; each finds the mekara binary or says how to install it) and the
//! extension's context file (`plugin/GEMINI.md`) are written by hand. Only the test needs the files made, so the module
//! is built for tests only.

use std::path::PathBuf;

use serde_json::{Value as Json, json};

use crate::agents::claude::{self, PLUGIN};
use crate::agents::clients::Served;
use crate::agents::tools::SERVER_NAME;
use crate::hooks::Hook;

/// The plugin's folder, from the repository's root.
pub(crate) const DIR: &str = "plugin";

/// The launcher every command of the plugin runs mekara through, as Claude Code expands it.
const LAUNCHER: &str = "${CLAUDE_PLUGIN_ROOT}/bin/mekara";

/// Every generated file, by its path from the repository's root, with its text.
pub(crate) fn files() -> Vec<(PathBuf, String)> {
    let mut files = vec![
        (
            PathBuf::from(".claude-plugin/marketplace.json"),
            pretty(&marketplace()),
        ),
        (
            PathBuf::from(DIR).join(".claude-plugin/plugin.json"),
            pretty(&manifest()),
        ),
        (PathBuf::from(DIR).join(".mcp.json"), pretty(&servers())),
        (
            PathBuf::from(DIR).join("gemini-extension.json"),
            pretty(&gemini_extension()),
        ),
        (PathBuf::from(DIR).join(HOOKS_FILE), pretty(&hooks())),
    ];
    for file in claude::command_files(Served::ClaudePlugin) {
        files.push((
            PathBuf::from(DIR).join("commands").join(file.rel),
            file.text,
        ));
    }
    files
}

fn pretty(value: &Json) -> String {
    let mut text = serde_json::to_string_pretty(value).expect("JSON values serialize");
    text.push('\n');
    text
}

const DESCRIPTION: &str = "Workflows as code: mekara runs a script's deterministic steps \
    itself and hands the agent one llm step at a time, every step journaled";

fn author() -> Json {
    json!({"name": "mekara", "url": env!("CARGO_PKG_REPOSITORY")})
}

/// `.claude-plugin/marketplace.json`: the repository as a marketplace of one plugin.
fn marketplace() -> Json {
    json!({
        "name": PLUGIN,
        "owner": author(),
        "metadata": {
            "description": "mekara's Claude Code plugin",
            "version": env!("CARGO_PKG_VERSION"),
        },
        "plugins": [{
            "name": PLUGIN,
            "source": format!("./{DIR}"),
            "description": DESCRIPTION,
            "version": env!("CARGO_PKG_VERSION"),
            "author": author(),
            "homepage": env!("CARGO_PKG_REPOSITORY"),
            "repository": env!("CARGO_PKG_REPOSITORY"),
            "license": env!("CARGO_PKG_LICENSE"),
            "keywords": ["workflow", "mcp", "starlark", "automation"],
            "category": "development",
        }],
    })
}

/// `plugin/.claude-plugin/plugin.json`.
fn manifest() -> Json {
    json!({
        "name": PLUGIN,
        "version": env!("CARGO_PKG_VERSION"),
        "description": DESCRIPTION,
        "author": author(),
        "homepage": env!("CARGO_PKG_REPOSITORY"),
        "repository": env!("CARGO_PKG_REPOSITORY"),
        "license": env!("CARGO_PKG_LICENSE"),
        "keywords": ["workflow", "mcp", "starlark", "automation"],
        "hooks": format!("./{HOOKS_FILE}"),
    })
}

/// `plugin/.mcp.json`: the server, through the launcher.
fn servers() -> Json {
    json!({
        "mcpServers": {
            SERVER_NAME: {"command": LAUNCHER, "args": ["mcp", "--plugin"]},
        }
    })
}

/// The launcher as Gemini CLI expands it in an extension's manifest.
const GEMINI_LAUNCHER: &str = "${extensionPath}/bin/mekara";

/// `plugin/gemini-extension.json`: the folder as a Gemini CLI extension. Its server is the
/// plain `mekara mcp`: Gemini CLI names an extension's tools as it names any server's
/// (`mcp_mekara_start`), and a project's own `mekara` server (`.gemini/settings.json`) takes
/// the extension's place, so there is never a second one. Gemini CLI drops `trust` from an
/// extension's servers: the person trusts the server in their own settings (docs/install.md).
/// The bundled scripts come as the server's MCP prompts (`/compile`), so the extension has
/// no commands of its own.
fn gemini_extension() -> Json {
    json!({
        "name": PLUGIN,
        "version": env!("CARGO_PKG_VERSION"),
        "description": DESCRIPTION,
        "contextFileName": "GEMINI.md",
        "mcpServers": {
            SERVER_NAME: {"command": GEMINI_LAUNCHER, "args": ["mcp"]},
        },
    })
}

/// The hooks the plugin registers, in that order.
const HOOKS: [Hook; 3] = [
    Hook::SessionStart,
    Hook::RerouteUserCommands,
    Hook::RerouteAgentCommands,
];

/// Where the plugin's hooks are, from its folder. Not `hooks/hooks.json`, where Claude Code
/// would find them unnamed: Gemini CLI reads that file of an extension as hooks of its own
/// (it warns about Claude Code's events and fails the `SessionStart` hook, whose
/// `${CLAUDE_PLUGIN_ROOT}` it does not expand), so the manifest names this one.
const HOOKS_FILE: &str = "hooks/claude-code.json";

/// `plugin/hooks/claude-code.json`: [`HOOKS`], through the launcher (quoted: the plugin's folder
/// may have a space in its path).
fn hooks() -> Json {
    let (_, tools) = claude::hook_names(Served::ClaudePlugin);
    let mut events = serde_json::Map::new();
    for hook in HOOKS {
        let command = json!({
            "type": "command",
            "command": format!("\"{LAUNCHER}\" hook {} --plugin", hook.name()),
        });
        let entry = match hook.matcher(tools.as_deref()) {
            Some(matcher) => json!({"matcher": matcher, "hooks": [command]}),
            None => json!({"hooks": [command]}),
        };
        events.insert(hook.event().to_string(), json!([entry]));
    }
    json!({
        "description": "mekara's hooks: send a compiled script typed as `/name` (or reached for \
            with the Skill tool) to mekara, let mekara's own tools run without a prompt, and \
            say how to install mekara when it is missing",
        "hooks": events,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The committed plugin and marketplace are what mekara generates (run the test with
    /// `MEKARA_BLESS=1` to rewrite them after changing what they are made from).
    #[test]
    fn the_committed_plugin_is_what_mekara_generates() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let bless = std::env::var_os("MEKARA_BLESS").is_some();
        let mut stale = Vec::new();
        for (path, text) in super::files() {
            let path = root.join(path);
            if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
                continue;
            }
            if bless {
                std::fs::create_dir_all(path.parent().expect("a folder")).expect("create");
                std::fs::write(&path, text).expect("write");
            } else {
                stale.push(path.display().to_string());
            }
        }
        assert!(
            stale.is_empty(),
            "not what mekara generates (rerun with MEKARA_BLESS=1 to rewrite them): {stale:?}"
        );
    }
}
