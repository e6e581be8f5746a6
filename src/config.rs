//! `.mekara/config.toml`, the project's settings: one file, found and read here. Each of its
//! sections is owned, typed and checked by the subsystem it sets, which parses it from the
//! text read here:
//!
//! - `[servers.NAME]`: what scripts may call on each MCP server (`crate::client::policy`,
//!   which also refuses a section no one owns);
//! - `[store]` and `[queue.NAME]`: the shared run store and its queues' limits
//!   (`crate::store::config`);
//! - `[traces]`: what exported traces carry (`crate::traces`);
//! - `[limits]`: the limits and spend caps of unattended runs (`crate::cli::unattended`);
//! - `[prices."MODEL"]`: what a model's tokens cost (`crate::agents::prices`).
//!
//! The person's own `~/.mekara/config.toml` is read for `[store] url` only (by
//! `crate::store::config`): a project's file is a cloned repository's word, so the
//! environment is never expanded into it, and the person's settings come first.

use std::path::{Path, PathBuf};

/// The file, relative to the project root.
pub(crate) const FILE: &str = ".mekara/config.toml";

/// The settings file of the project at `root`; `None` outside a project.
pub(crate) fn path(root: Option<&Path>) -> Option<PathBuf> {
    root.map(|r| r.join(FILE))
}

/// The text of the settings file `file`: `None` when there is none (every setting then has
/// its default); the error says why it cannot be read.
pub(crate) fn read(file: &Path) -> Result<Option<String>, String> {
    match std::fs::read_to_string(file) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read it: {e}")),
    }
}

/// What the TOML parser says of `e`, without its trailing newline.
pub(crate) fn reason(e: &toml::de::Error) -> String {
    e.to_string().trim_end().to_string()
}

/// Section `name` of the project's settings file (of the project at `root`), read as `T`:
/// `None` when there is no file or no such section; the error names the file and the
/// section and says what is wrong.
pub(crate) fn section<T: serde::de::DeserializeOwned>(
    root: Option<&Path>,
    name: &str,
) -> Result<Option<T>, String> {
    let Some(file) = path(root) else {
        return Ok(None);
    };
    section_of(&file, name).map_err(|reason| format!("`{}`: {reason}", file.display()))
}

/// Section `name` of settings file `file` (the project's or the person's), read as `T`:
/// `None` when there is no file or no such section. The error says what is wrong (and in
/// which section), for the caller to say in which file. The rest of the file is other
/// sections', read and checked by their owners.
pub(crate) fn section_of<T: serde::de::DeserializeOwned>(
    file: &Path,
    name: &str,
) -> Result<Option<T>, String> {
    let Some(text) = read(file)? else {
        return Ok(None);
    };
    let mut table: toml::Table = toml::from_str(&text).map_err(|e| reason(&e))?;
    let Some(value) = table.remove(name) else {
        return Ok(None);
    };
    value
        .try_into()
        .map(Some)
        .map_err(|e: toml::de::Error| format!("`[{name}]`: {}", reason(&e)))
}
