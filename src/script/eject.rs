//! Ejecting: copying a bundled script into a project's `.mekara/scripts/` so it can be
//! changed there. The project's copy then wins over the bundled one (DESIGN §2).

use crate::exit::Exit;
use std::path::{Path, PathBuf};

use super::bundled;
use super::name::{NameError, ScriptName};

/// What an eject wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Ejected {
    /// The script's name, as bundled.
    pub name: ScriptName,
    /// The files written, NL file first.
    pub files: Vec<PathBuf>,
}

impl EjectError {
    /// Every refusal to eject names something the caller can change: [`Exit::Usage`].
    pub(crate) fn exit_code(&self) -> Exit {
        Exit::Usage
    }
}

/// Why a script could not be ejected. Nothing was written.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EjectError {
    /// The name itself is refused.
    #[error(transparent)]
    InvalidName(#[from] NameError),
    /// No bundled script has this name.
    #[error("`{name}` is not a bundled script; the bundled ones are {}", list(.bundled))]
    NotBundled {
        /// The name as asked for.
        name: String,
        /// The bundled scripts' names.
        bundled: Vec<String>,
    },
    /// A file it would write is there already.
    #[error("`{}` already exists", .path.display())]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// A file it would write, or a folder on the way, is a symbolic link: writing through it
    /// could change a file outside the project.
    #[error(
        "`{}` is a symbolic link; mekara does not write through links (it could change a file outside the project): remove the link, or eject in a project without it",
        .path.display()
    )]
    Symlink {
        /// The link.
        path: PathBuf,
    },
    /// A file could not be written.
    #[error("cannot write `{}`: {source}", .path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
}

fn list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The names of the bundled scripts, displayed with `:`.
pub(crate) fn bundled_names() -> Vec<String> {
    bundled::FILES
        .iter()
        .filter_map(|f| f.path.strip_prefix("nl/")?.strip_suffix(".md"))
        .filter_map(|n| ScriptName::parse(n).ok())
        .map(|n| n.to_string())
        .collect()
}

/// Copies the bundled script `raw` (its NL file, and its compiled file when it has one)
/// into `mekara_dir` (`<project>/.mekara`). Existing files are refused unless `force`.
pub(crate) fn eject(raw: &str, mekara_dir: &Path, force: bool) -> Result<Ejected, EjectError> {
    let name = ScriptName::parse(raw)?;
    let found = std::iter::once(name.clone())
        .chain(name.underscored())
        .find(|n| bundled::file(&format!("nl/{}.md", n.as_path())).is_some())
        .ok_or_else(|| EjectError::NotBundled {
            name: raw.to_string(),
            bundled: bundled_names(),
        })?;
    let copies: Vec<(PathBuf, &str)> = [
        format!("nl/{}.md", found.as_path()),
        format!("compiled/{}.star", found.as_path()),
    ]
    .iter()
    .filter_map(|path| bundled::file(path))
    .chain(
        bundled::file(&format!("compiled/{}.star", found.as_path()))
            .map(|compiled| helpers_loaded(compiled.text))
            .unwrap_or_default()
            .into_iter()
            // A helper another ejected script brought is the project's now: kept as it is.
            .filter(|helper| !mekara_dir.join("scripts").join(helper.path).exists()),
    )
    .map(|file| (mekara_dir.join("scripts").join(file.path), file.text))
    .collect();
    // Check every file before writing any, so a refusal leaves nothing half-copied.
    for (path, _) in &copies {
        if let Some(link) = first_link(mekara_dir, path) {
            return Err(EjectError::Symlink { path: link });
        }
    }
    if !force
        && let Some((path, _)) = copies.iter().find(|(p, _)| {
            // A command file install generated is mekara's, not the person's: eject replaces it.
            p.symlink_metadata().is_ok()
                && !std::fs::read_to_string(p).is_ok_and(|t| super::nl::is_generated(&t))
        })
    {
        return Err(EjectError::Exists { path: path.clone() });
    }
    for (path, text) in &copies {
        let write = || -> std::io::Result<()> {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(path, text)
        };
        write().map_err(|source| EjectError::Write {
            path: path.clone(),
            source,
        })?;
    }
    Ok(Ejected {
        name: found,
        files: copies.into_iter().map(|(p, _)| p).collect(),
    })
}

/// The bundled helper modules (`lib/...`) a bundled compiled script loads, and the ones those
/// load: an ejected script loads helpers from the project's level only, so they go with it.
fn helpers_loaded(text: &'static str) -> Vec<&'static bundled::BundledFile> {
    let mut found: Vec<&'static bundled::BundledFile> = Vec::new();
    let mut pending = vec![text];
    while let Some(text) = pending.pop() {
        let Ok(ast) = starlark::syntax::AstModule::parse(
            "bundled",
            text.to_string(),
            &super::dialect::dialect(),
        ) else {
            continue;
        };
        for load in ast.loads() {
            let helper = load
                .module_id
                .strip_prefix("//")
                .and_then(bundled::file)
                .filter(|f| !found.iter().any(|seen| seen.path == f.path));
            if let Some(helper) = helper {
                found.push(helper);
                pending.push(helper.text);
            }
        }
    }
    found
}

/// The first symbolic link among `dir` and the paths from it down to `file` (which is
/// inside it), if there is one. A dangling link counts: writing to it would create its
/// target, wherever that is.
fn first_link(dir: &Path, file: &Path) -> Option<PathBuf> {
    let rest = file.strip_prefix(dir).ok()?;
    let mut path = dir.to_path_buf();
    std::iter::once(None)
        .chain(rest.components().map(Some))
        .find_map(|part| {
            if let Some(part) = part {
                path.push(part);
            }
            path.symlink_metadata()
                .is_ok_and(|m| m.file_type().is_symlink())
                .then(|| path.clone())
        })
}
