//! The command files `mekara install` writes so that every bundled script (not the demos)
//! is typeable as `/name` in Claude Code, and what the command files of other clients
//! (OpenCode's: [`crate::agents::opencode`]) share with them.
//!
//! Claude Code only offers a command it has a file for, and install makes `.claude/commands`
//! a link to the NL scripts folder, so the files go there, marked with
//! [`GENERATED_KEY`](crate::script::nl::GENERATED_KEY): the resolver reads past a marked file
//! to the bundled script, eject replaces it, install refreshes it when mekara's version of it
//! changed, and uninstall removes it. A file of that name without the mark is the person's
//! own script and is never touched.

use std::path::PathBuf;

use crate::agents::claude;
use crate::agents::clients::Served;
use crate::agents::tools::AgentTool;
use crate::script::bundled;
use crate::script::nl::{GENERATED_KEY, NlText, is_generated};

/// One generated command file: its path under its folder, and its text.
pub(crate) struct CommandFile {
    /// `compile.md`.
    pub rel: PathBuf,
    /// The whole file.
    pub text: String,
}

/// The command files `mekara install` writes for every bundled script that is not a demo.
pub(crate) fn bundled() -> Vec<CommandFile> {
    commands(Served::Configured)
}

/// The command files of every bundled script that is not a demo, for Claude Code given
/// mekara's server as `served` says: `mekara install`'s (marked as generated), or the
/// commands of mekara's Claude Code plugin ([`super::plugin`]).
pub(crate) fn commands(served: Served) -> Vec<CommandFile> {
    bundled::FILES
        .iter()
        .filter_map(|f| {
            let name = f.path.strip_prefix("nl/")?.strip_suffix(".md")?;
            (!bundled::is_demo(name)).then(|| {
                let compiled = bundled::file(&format!("compiled/{name}.star")).is_some();
                CommandFile {
                    rel: PathBuf::from(format!("{name}.md")),
                    text: text(name, f.text, compiled, served),
                }
            })
        })
        .collect()
}

/// Whether the file at `path` is one install generated (and may refresh or remove).
pub(crate) fn is_ours(path: &std::path::Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| is_generated(&t))
}

/// An NL-only script's file is its own text (Claude Code replaces `$ARGUMENTS`, as mekara
/// does); a compiled script's says to run it through mekara, which the hook says too.
fn text(name: &str, nl: &str, compiled: bool, served: Served) -> String {
    let parsed = NlText::parse(nl);
    // Claude Code types a command in a folder (`flow/commit.md`) as `/flow:commit`.
    let typed = match served {
        Served::Configured => name.replace('/', ":"),
        Served::ClaudePlugin => format!("{}:{}", claude::PLUGIN, name.replace('/', ":")),
    };
    let body = if compiled {
        crate::hooks::bundled_command_body(
            &typed,
            name,
            &claude::tool_name(AgentTool::Start, served),
        )
    } else {
        parsed.body.to_string()
    };
    let mut front = match served {
        Served::Configured => format!(
            "---\n# Written by `mekara install`, which rewrites it; to change the script, run\n\
             # `mekara scripts eject {name}` (it replaces this file with the script's own)\n"
        ),
        Served::ClaudePlugin => format!(
            "---\n# mekara's bundled script `{name}`, generated from scripts/nl/{name}.md (the\n\
             # test `install::plugin` checks it and `MEKARA_BLESS=1` rewrites it)\n"
        ),
    };
    // The script's own front matter lines, as written (quotes and all).
    if !parsed.front_matter.is_empty()
        && let Some(rest) = nl.strip_prefix("---\n")
        && let Some(end) = rest.find("\n---")
    {
        front.push_str(&rest[..=end]);
    }
    if served == Served::Configured {
        front.push_str(&format!("{GENERATED_KEY}: {name}\n"));
    }
    front.push_str("---\n\n");
    front + &body
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_generated_file_is_marked_and_no_demo_gets_one() {
        let files = super::bundled();
        let names: Vec<_> = files.iter().map(|f| f.rel.display().to_string()).collect();
        assert_eq!(names[..2], ["compile.md", "systematize.md"]);
        assert_eq!(names.len(), 12, "{names:?}");
        assert!(
            names[2..].iter().all(|n| n.starts_with("flow/")),
            "{names:?}"
        );
        assert!(files.iter().all(|f| super::is_generated(&f.text)));
    }
}
