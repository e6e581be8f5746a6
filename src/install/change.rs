//! What install plans, one change at a time: the way it goes ([`Direction`]) and each change
//! to the file system ([`Change`], [`Action`]). The edit primitives ([`super::edits`]) make
//! changes, and the plan ([`super::plan`]) collects them; both read these types from here.

use std::path::PathBuf;

/// Install or uninstall.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Direction {
    /// Add mekara.
    Install,
    /// Remove what install added.
    Uninstall,
}

/// One change to the file system.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Action {
    /// Create a folder (and its parents).
    CreateDir,
    /// Create a symlink at the path, pointing at `target` (relative to the link's folder).
    Symlink {
        /// What the link points at.
        target: PathBuf,
    },
    /// Move the files of a real commands folder into `into`, then remove it and link it.
    MoveAndLink {
        /// Files to move, relative to the folder.
        files: Vec<PathBuf>,
        /// Files already in `into` with the same content: dropped instead of moved.
        duplicates: Vec<PathBuf>,
        /// The NL scripts folder.
        into: PathBuf,
        /// The link's target.
        target: PathBuf,
    },
    /// Remove a symlink.
    RemoveSymlink,
    /// Replace the link by a folder again, moving back the files install moved out of it.
    RestoreCommands {
        /// Files to move back, relative to the folder.
        files: Vec<PathBuf>,
        /// Files install dropped as duplicates: copied back.
        dropped: Vec<PathBuf>,
        /// The NL scripts folder they are in.
        from: PathBuf,
    },
    /// Remove a folder install created, now empty.
    RemoveDir,
    /// Write a file with this text (`created`: it did not exist).
    Write {
        /// The whole new text.
        text: String,
        /// Whether the file is new.
        created: bool,
    },
    /// Remove a file that only held what install added.
    Remove,
    /// Remove a command file install generated for a bundled script.
    RemoveGenerated,
}

/// A change, with what it does in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Change {
    /// The absolute path.
    pub path: PathBuf,
    /// What happens to it.
    pub action: Action,
    /// The entries added or removed, in words (`+ server `mekara``).
    pub details: Vec<String>,
}
