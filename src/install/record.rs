//! `.mekara/install.json`: what `mekara install` created or moved, so that `mekara uninstall`
//! takes out only that. A file or folder that was there before install is never removed by
//! uninstall, and the files install moved out of a real `.claude/commands` folder go back.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::edits::EditError;

/// The record, paths relative to the scope's folder.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// Files and folders install created.
    #[serde(default)]
    pub created: BTreeSet<PathBuf>,
    /// Files install moved from `.claude/commands` into the NL scripts folder.
    #[serde(default)]
    pub moved_commands: BTreeSet<PathBuf>,
    /// Files of `.claude/commands` install dropped, because the NL scripts folder had the
    /// same file.
    #[serde(default)]
    pub dropped_commands: BTreeSet<PathBuf>,
}

/// Where the record lives under `base`.
pub(crate) fn path(base: &Path) -> PathBuf {
    base.join(".mekara/install.json")
}

impl Record {
    /// The record under `base`, if install left one.
    pub(crate) fn read(base: &Path) -> Result<Option<Record>, EditError> {
        let path = path(base);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| EditError::Parse {
                    path,
                    reason: e.to_string(),
                }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(EditError::Read { path, source }),
        }
    }

    /// The record as written to disk.
    pub(crate) fn text(&self) -> String {
        let mut text =
            serde_json::to_string_pretty(self).expect("a record of paths always serializes");
        text.push('\n');
        text
    }

    /// Notes `path` as created, with each of its folders up to `base` that does not exist.
    pub(crate) fn note_created(&mut self, base: &Path, path: &Path) {
        let mut missing = Some(path);
        while let Some(p) = missing.filter(|p| *p != base && !p.exists()) {
            if let Ok(rel) = p.strip_prefix(base) {
                self.created.insert(rel.to_path_buf());
            }
            missing = p.parent();
        }
    }

    /// Whether install created `path`.
    pub(crate) fn created(&self, base: &Path, path: &Path) -> bool {
        path.strip_prefix(base)
            .is_ok_and(|rel| self.created.contains(rel))
    }
}
