//! The entries mekara adds to each client's configuration file, and their removal.
//!
//! JSON files are edited as `serde_json` values with `preserve_order`, so every key stays
//! where it was; TOML with `toml_edit`, so comments and layout stay too. An edit that finds
//! its entry already there changes nothing; one that finds an entry of the same name with
//! other settings leaves it and says so. Removal takes out only entries equal to what is
//! added, then the containers that became empty.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json, json};

use super::{Action, Change, Direction};
use crate::agents::tools;
use crate::display::json_type;
use crate::hooks::Hook;

/// A configuration file that cannot be edited safely. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EditError {
    /// The file does not parse.
    #[error(
        "cannot parse `{}`: {reason}; fix it (or move it away), then run the command again",
        .path.display()
    )]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        reason: String,
    },
    /// The file has comments (Gemini CLI allows them in its settings), which a rewrite would
    /// lose.
    #[error(
        "`{}` has a comment (line {line}), which mekara cannot keep when it rewrites the file; \
         remove the comments and run the command again, or add mekara's entries by hand",
        .path.display()
    )]
    Comments {
        /// The file.
        path: PathBuf,
        /// The line of the first comment.
        line: usize,
    },
    /// A key mekara edits holds something else than expected.
    #[error(
        "`{}`: `{key}` is {found}, expected {expected}; fix it, then run the command again",
        .path.display()
    )]
    Shape {
        /// The file.
        path: PathBuf,
        /// The key, dotted (`hooks.PreToolUse`).
        key: String,
        /// What it should be (`an object`).
        expected: &'static str,
        /// What it is (`an array`).
        found: String,
    },
    /// The file exists but cannot be read.
    #[error("cannot read `{}`: {source}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
}

/// What editing one file came to.
pub(super) struct Edit {
    /// The change to make, if any.
    pub change: Option<Change>,
    /// Entries left alone, in words.
    pub kept: Vec<String>,
}

fn read_optional(path: &Path) -> Result<Option<String>, EditError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(EditError::Read {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// What a JSON edit gets: the file's top-level object, and where to say what it did.
struct JsonEdit<'a> {
    path: &'a Path,
    details: Vec<String>,
    kept: Vec<String>,
}

impl JsonEdit<'_> {
    fn shape(&self, key: &str, expected: &'static str, found: &Json) -> EditError {
        EditError::Shape {
            path: self.path.to_path_buf(),
            key: key.to_string(),
            expected,
            found: json_type(found).to_string(),
        }
    }

    /// The object at `map[key]`, created when missing.
    fn object<'m>(
        &self,
        map: &'m mut Map<String, Json>,
        key: &str,
        dotted: &str,
    ) -> Result<&'m mut Map<String, Json>, EditError> {
        let value = map.entry(key).or_insert_with(|| Json::Object(Map::new()));
        let found = value.clone();
        value
            .as_object_mut()
            .ok_or_else(|| self.shape(dotted, "an object", &found))
    }

    /// The array at `map[key]`, created when missing.
    fn array<'m>(
        &self,
        map: &'m mut Map<String, Json>,
        key: &str,
        dotted: &str,
    ) -> Result<&'m mut Vec<Json>, EditError> {
        let value = map.entry(key).or_insert_with(|| Json::Array(Vec::new()));
        let found = value.clone();
        value
            .as_array_mut()
            .ok_or_else(|| self.shape(dotted, "an array", &found))
    }
}

/// Reads `path` (missing: `{}`), lets `edit` change its object, and turns the difference
/// into a change.
fn edit_json(
    path: &Path,
    direction: Direction,
    edit: impl FnOnce(&mut JsonEdit, &mut Map<String, Json>) -> Result<(), EditError>,
) -> Result<Edit, EditError> {
    let existing = read_optional(path)?;
    let mut root = match existing.as_deref() {
        None => Map::new(),
        Some(text) if text.trim().is_empty() => Map::new(),
        Some(text) => match serde_json::from_str::<Json>(text) {
            Ok(Json::Object(map)) => map,
            Ok(other) => {
                return Err(EditError::Parse {
                    path: path.to_path_buf(),
                    reason: format!("the file holds {}, not an object", json_type(&other)),
                });
            }
            Err(e) => {
                if at_comment(text, &e) {
                    return Err(EditError::Comments {
                        path: path.to_path_buf(),
                        line: e.line(),
                    });
                }
                return Err(EditError::Parse {
                    path: path.to_path_buf(),
                    reason: e.to_string(),
                });
            }
        },
    };
    let before = root.clone();
    let mut state = JsonEdit {
        path,
        details: Vec::new(),
        kept: Vec::new(),
    };
    edit(&mut state, &mut root)?;
    let change = if root == before {
        None
    } else if root.is_empty() && direction == Direction::Uninstall {
        Some(Action::Remove)
    } else {
        let mut text = serde_json::to_string_pretty(&Json::Object(root))
            .expect("a JSON value always serializes");
        text.push('\n');
        Some(Action::Write {
            text,
            created: existing.is_none(),
        })
    };
    Ok(Edit {
        change: change.map(|action| Change {
            path: path.to_path_buf(),
            action,
            details: state.details,
        }),
        kept: state.kept,
    })
}

/// Whether the JSON syntax error `e` is where a `//` or `/*` comment starts.
fn at_comment(text: &str, e: &serde_json::Error) -> bool {
    let Some(line) = text.lines().nth(e.line().saturating_sub(1)) else {
        return false;
    };
    let column = e.column().saturating_sub(1);
    line.get(column..)
        .is_some_and(|rest| rest.starts_with("//") || rest.starts_with("/*"))
}

/// Adds or removes the server entry `container.mekara = entry`.
fn server_entry(
    path: &Path,
    direction: Direction,
    container: &'static str,
    entry: &Json,
) -> Result<Edit, EditError> {
    let name = tools::SERVER_NAME;
    edit_json(path, direction, |state, root| {
        let file = path.display().to_string();
        match direction {
            Direction::Install => {
                let servers = state.object(root, container, container)?;
                match servers.get(name) {
                    None => {
                        servers.insert(name.to_string(), entry.clone());
                        state
                            .details
                            .push(format!("+ MCP server `{name}` (runs `mekara mcp`)"));
                    }
                    Some(existing) if existing == entry => {}
                    Some(_) => state.kept.push(format!(
                        "`{file}` already has a server `{name}` with other settings: left as is"
                    )),
                }
            }
            Direction::Uninstall => {
                if let Some(Json::Object(servers)) = root.get_mut(container) {
                    match servers.get(name) {
                        Some(existing) if existing == entry => {
                            servers.shift_remove(name);
                            state.details.push(format!("- MCP server `{name}`"));
                            if servers.is_empty() {
                                root.shift_remove(container);
                            }
                        }
                        Some(_) => state.kept.push(format!(
                            "`{file}` has a server `{name}` that install did not write: left as is"
                        )),
                        None => {}
                    }
                }
            }
        }
        Ok(())
    })
}

/// The entry that registers `mekara mcp` with Claude Code.
pub(super) fn claude_server_entry() -> Json {
    json!({"type": "stdio", "command": "mekara", "args": ["mcp"]})
}

/// `.mcp.json` (or `~/.claude.json`): the `mekara` server.
pub(super) fn claude_server(path: &Path, direction: Direction) -> Result<Edit, EditError> {
    server_entry(path, direction, "mcpServers", &claude_server_entry())
}

/// OpenCode's `opencode.json`: the `mekara` server.
pub(super) fn opencode(path: &Path, direction: Direction) -> Result<Edit, EditError> {
    let entry = json!({"type": "local", "command": ["mekara", "mcp"], "enabled": true});
    server_entry(path, direction, "mcp", &entry)
}

/// Gemini CLI's `settings.json`: the `mekara` server, trusted. Gemini asks before every call
/// of an untrusted server's tools, and without a person to ask (`gemini -p`) it does not offer
/// them to the model at all; `trust` is its one switch for a server's tools.
pub(super) fn gemini(path: &Path, direction: Direction) -> Result<Edit, EditError> {
    let entry = json!({"command": "mekara", "args": ["mcp"], "trust": true});
    server_entry(path, direction, "mcpServers", &entry)
}

/// Qwen Code's `settings.json`: the `mekara` server, trusted, with its tools always loaded.
/// Qwen Code is a fork of Gemini CLI and keeps its `trust` switch (without it, every call of
/// the server's tools asks for a confirmation, which `qwen -p` cannot get). It also hides an
/// MCP server's tools behind a `tool_search` bridge unless `alwaysLoadTools` is set: the
/// model would first have to search for `start`, and the tools mekara's replies name would
/// not be among those it was offered.
pub(super) fn qwen(path: &Path, direction: Direction) -> Result<Edit, EditError> {
    let entry =
        json!({"command": "mekara", "args": ["mcp"], "trust": true, "alwaysLoadTools": true});
    server_entry(path, direction, "mcpServers", &entry)
}

/// Copilot CLI's own `mcp-config.json` (`--user`; in a project it reads `.mcp.json`): the
/// `mekara` server with all its tools enabled. Copilot CLI keeps tool approvals only for a
/// session (`--allow-tool mekara`), so there is no permission entry to write.
pub(super) fn copilot(path: &Path, direction: Direction) -> Result<Edit, EditError> {
    let entry = json!({"type": "local", "command": "mekara", "args": ["mcp"], "tools": ["*"]});
    server_entry(path, direction, "mcpServers", &entry)
}

/// The hook entry `install` adds for `hook`.
fn hook_entry(hook: Hook) -> Json {
    let command = json!({"type": "command", "command": hook.command()});
    match hook.matcher() {
        Some(matcher) => json!({"matcher": matcher, "hooks": [command]}),
        None => json!({"hooks": [command]}),
    }
}

/// Whether a hook entry (`{matcher?, hooks: [...]}`) runs `hook`'s command for its matcher.
fn runs_hook(entry: &Json, hook: Hook) -> bool {
    let matcher = entry.get("matcher").and_then(Json::as_str);
    matcher == hook.matcher()
        && entry
            .get("hooks")
            .and_then(Json::as_array)
            .is_some_and(|hs| hs.iter().any(|h| is_hook_command(h, hook)))
}

fn is_hook_command(h: &Json, hook: Hook) -> bool {
    h.get("command").and_then(Json::as_str) == Some(hook.command().as_str())
}

/// `.claude/settings.json`: both hooks, and every mekara tool allowed.
pub(super) fn claude_settings(path: &Path, direction: Direction) -> Result<Edit, EditError> {
    let allowed: Vec<String> = tools::ALL
        .into_iter()
        .map(|tool| tools::AgentClient::ClaudeCode.tool_name(tool))
        .collect();
    edit_json(path, direction, |state, root| {
        match direction {
            Direction::Install => {
                let hooks_map = state.object(root, "hooks", "hooks")?;
                let mut added = Vec::new();
                for hook in Hook::ALL {
                    let dotted = format!("hooks.{}", hook.event());
                    let entries = state.array(hooks_map, hook.event(), &dotted)?;
                    for earlier in hook.earlier_matchers() {
                        if remove_hook(entries, hook, Some(earlier)) {
                            added.push(format!(
                                "- hook {} (matcher `{earlier}`, from an earlier mekara): `{}`",
                                hook.event(),
                                hook.command()
                            ));
                        }
                    }
                    if !entries.iter().any(|e| runs_hook(e, hook)) {
                        entries.push(hook_entry(hook));
                        added.push(format!("+ hook {}: `{}`", describe(hook), hook.command()));
                    }
                }
                let permissions = state.object(root, "permissions", "permissions")?;
                let allow = state.array(permissions, "allow", "permissions.allow")?;
                for name in &allowed {
                    if !allow.iter().any(|a| a.as_str() == Some(name)) {
                        allow.push(Json::String(name.clone()));
                        added.push(format!("+ allow `{name}`"));
                    }
                }
                state.details.extend(added);
            }
            Direction::Uninstall => {
                if let Some(Json::Object(hooks_map)) = root.get_mut("hooks") {
                    for hook in Hook::ALL {
                        let Some(Json::Array(entries)) = hooks_map.get_mut(hook.event()) else {
                            continue;
                        };
                        let matchers = std::iter::once(hook.matcher())
                            .chain(hook.earlier_matchers().iter().copied().map(Some));
                        for matcher in matchers {
                            if remove_hook(entries, hook, matcher) {
                                let shown = match matcher {
                                    Some(m) => format!("{} (matcher `{m}`)", hook.event()),
                                    None => hook.event().to_string(),
                                };
                                state
                                    .details
                                    .push(format!("- hook {shown}: `{}`", hook.command()));
                            }
                        }
                        if entries.is_empty() {
                            hooks_map.shift_remove(hook.event());
                        }
                    }
                    if hooks_map.is_empty() {
                        root.shift_remove("hooks");
                    }
                }
                if let Some(Json::Object(permissions)) = root.get_mut("permissions") {
                    if let Some(Json::Array(allow)) = permissions.get_mut("allow") {
                        for name in &allowed {
                            let before = allow.len();
                            allow.retain(|a| a.as_str() != Some(name));
                            if allow.len() != before {
                                state.details.push(format!("- allow `{name}`"));
                            }
                        }
                        if allow.is_empty() {
                            permissions.shift_remove("allow");
                        }
                    }
                    if permissions.is_empty() {
                        root.shift_remove("permissions");
                    }
                }
            }
        }
        Ok(())
    })
}

/// Takes `hook`'s command out of the entries for `matcher`, and entries it leaves empty.
/// Returns whether there was one to take.
fn remove_hook(entries: &mut Vec<Json>, hook: Hook, matcher: Option<&str>) -> bool {
    let mut removed = false;
    for entry in entries.iter_mut() {
        if entry.get("matcher").and_then(Json::as_str) != matcher {
            continue;
        }
        if let Some(Json::Array(hs)) = entry.get_mut("hooks") {
            let before = hs.len();
            hs.retain(|h| !is_hook_command(h, hook));
            removed |= hs.len() != before;
        }
    }
    entries.retain(|e| {
        e.get("hooks")
            .and_then(Json::as_array)
            .is_none_or(|hs| !hs.is_empty())
    });
    removed
}

fn describe(hook: Hook) -> String {
    match hook.matcher() {
        Some(m) => format!("{} (matcher `{m}`)", hook.event()),
        None => hook.event().to_string(),
    }
}

/// The setting of a Codex MCP server that lets its tools run without asking: Codex refuses a
/// tool call that needs approval when nobody can give it (`codex exec` runs with the approval
/// policy `never`), and asks for each call in the TUI. mekara's tools only run the person's
/// own scripts, as Claude Code's `permissions.allow` entries say too.
const CODEX_APPROVAL: (&str, &str) = ("default_tools_approval_mode", "approve");

/// Codex's `config.toml`: `[mcp_servers.mekara]`, with its tools approved.
pub(super) fn codex(path: &Path, direction: Direction) -> Result<Edit, EditError> {
    use toml_edit::{DocumentMut, Item, Table, value};
    let existing = read_optional(path)?;
    let text = existing.clone().unwrap_or_default();
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let line = e.span().map_or(1, |span| {
            text[..span.start.min(text.len())].matches('\n').count() + 1
        });
        EditError::Parse {
            path: path.to_path_buf(),
            reason: format!("{} (line {line})", e.message().trim_end()),
        }
    })?;
    let name = tools::SERVER_NAME;
    let (approval_key, approval) = CODEX_APPROVAL;
    let approved = |item: &Item| item.get(approval_key).and_then(Item::as_str) == Some(approval);
    // What install writes; without the approval setting, what installs before it wrote.
    let is_ours = |item: &Item| {
        item.get("command").and_then(Item::as_str) == Some("mekara")
            && item
                .get("args")
                .and_then(Item::as_array)
                .is_some_and(|a| a.len() == 1 && a.get(0).and_then(|v| v.as_str()) == Some("mcp"))
            && item
                .as_table_like()
                .is_some_and(|t| t.len() == 2 || (t.len() == 3 && approved(item)))
    };
    let approval_detail =
        format!("+ its tools run without an approval prompt (`{approval_key} = \"{approval}\"`)");
    let mut details = Vec::new();
    let mut kept = Vec::new();
    let shape = |found: &Item| EditError::Shape {
        path: path.to_path_buf(),
        key: "mcp_servers".to_string(),
        expected: "a table",
        found: format!("a value of type {}", found.type_name()),
    };
    match direction {
        Direction::Install => {
            let item = doc.entry("mcp_servers").or_insert_with(|| {
                let mut t = Table::new();
                t.set_implicit(true);
                Item::Table(t)
            });
            if !item.is_table_like() {
                return Err(shape(item));
            }
            let servers = item
                .as_table_like_mut()
                .expect("checked to be table-like just above");
            match servers.get(name) {
                None => {
                    let mut t = Table::new();
                    t.insert("command", value("mekara"));
                    t.insert("args", value(toml_edit::Array::from_iter(["mcp"])));
                    t.insert(approval_key, value(approval));
                    servers.insert(name, Item::Table(t));
                    details.push(format!("+ MCP server `{name}` (runs `mekara mcp`)"));
                    details.push(approval_detail);
                }
                Some(item) if is_ours(item) => {
                    if !approved(item) {
                        let server = servers
                            .get_mut(name)
                            .and_then(Item::as_table_like_mut)
                            .expect("checked to be ours, a table, just above");
                        server.insert(approval_key, value(approval));
                        details.push(approval_detail);
                    }
                }
                Some(_) => kept.push(format!(
                    "`{}` already has a server `{name}` with other settings: left as is",
                    path.display()
                )),
            }
        }
        Direction::Uninstall => {
            if let Some(servers) = doc.get_mut("mcp_servers").and_then(Item::as_table_like_mut) {
                match servers.get(name) {
                    Some(item) if is_ours(item) => {
                        servers.remove(name);
                        details.push(format!("- MCP server `{name}`"));
                    }
                    Some(_) => kept.push(format!(
                        "`{}` has a server `{name}` that install did not write: left as is",
                        path.display()
                    )),
                    None => {}
                }
                if servers.is_empty() {
                    doc.remove("mcp_servers");
                }
            }
        }
    }
    let new_text = doc.to_string();
    let action = if new_text == text {
        None
    } else if doc.as_table().is_empty() && direction == Direction::Uninstall {
        Some(Action::Remove)
    } else {
        Some(Action::Write {
            text: new_text,
            created: existing.is_none(),
        })
    };
    Ok(Edit {
        change: action.map(|action| Change {
            path: path.to_path_buf(),
            action,
            details,
        }),
        kept,
    })
}
