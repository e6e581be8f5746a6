//! The command files `mekara install` writes so that every bundled script (not the demos)
//! is typeable as `/name` in Claude Code (their text is Claude Code's:
//! [`crate::agents::claude`]), and what the command files of other clients (OpenCode's:
//! [`crate::agents::opencode`]) share with them.
//!
//! Claude Code only offers a command it has a file for, and install makes `.claude/commands`
//! a link to the NL scripts folder, so the files go there, marked with
//! [`GENERATED_KEY`](crate::script::nl::GENERATED_KEY): the resolver reads past a marked file
//! to the bundled script, eject replaces it, install refreshes it when mekara's version of it
//! changed, and uninstall removes it. A file of that name without the mark is the person's
//! own script and is never touched.

use std::path::PathBuf;

use crate::script::nl::is_generated;

/// One generated command file: its path under its folder, and its text.
pub(crate) struct CommandFile {
    /// `compile.md`.
    pub rel: PathBuf,
    /// The whole file.
    pub text: String,
}

/// Whether the file at `path` is one install generated (and may refresh or remove).
pub(crate) fn is_ours(path: &std::path::Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| is_generated(&t))
}
