//! How mekara adds entries to a client's configuration file, and removes them: the
//! primitives with which each client's file in [`crate::agents`] writes its own entries.
//!
//! JSON files are edited as `serde_json` values with `preserve_order`, so every key stays
//! where it was (TOML, with `toml_edit`, is Codex's alone: [`crate::agents::codex`]). An
//! edit that finds its entry already there changes nothing; one that finds an entry of the
//! same name with other settings leaves it and says so. Removal takes out only entries equal
//! to what is added, then the containers that became empty.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

use super::{Action, Change, Direction};
use crate::display::json_type;

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
pub(crate) struct Edit {
    /// The change to make, if any.
    pub change: Option<Change>,
    /// Entries left alone, in words.
    pub kept: Vec<String>,
}

/// The text of `path`, or `None` when there is no such file.
pub(crate) fn read_optional(path: &Path) -> Result<Option<String>, EditError> {
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
pub(crate) struct JsonEdit<'a> {
    path: &'a Path,
    /// The entries added or removed, in words.
    pub details: Vec<String>,
    /// Entries left alone, in words.
    pub kept: Vec<String>,
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
    pub(crate) fn object<'m>(
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
    pub(crate) fn array<'m>(
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
pub(crate) fn edit_json(
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

/// The name mekara's server is registered under in every client's configuration that
/// `mekara install` writes (`.mcp.json`, `opencode.json`, ...): clients build the names
/// their models see from it.
pub(crate) const SERVER_NAME: &str = "mekara";

/// Adds or removes the server entry `container.mekara = entry`.
pub(crate) fn server_entry(
    path: &Path,
    direction: Direction,
    container: &'static str,
    entry: &Json,
) -> Result<Edit, EditError> {
    let name = SERVER_NAME;
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
