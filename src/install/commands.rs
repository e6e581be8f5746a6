//! The command files `mekara install` writes so that every bundled script (not the demos)
//! is typeable as `/name` in Claude Code, and every compiled script in OpenCode.
//!
//! Claude Code only offers a command it has a file for, and install makes `.claude/commands`
//! a link to the NL scripts folder, so the files go there, marked with
//! [`GENERATED_KEY`](crate::script::nl::GENERATED_KEY): the resolver reads past a marked file
//! to the bundled script, eject replaces it, install refreshes it when mekara's version of it
//! changed, and uninstall removes it. A file of that name without the mark is the person's
//! own script and is never touched.
//!
//! OpenCode has no hooks to send a compiled script to `start`, so `--client opencode` writes
//! a command of its own for each compiled script into OpenCode's commands folder
//! (`.opencode/commands/NAME.md`), marked the same way, saying to call `mekara_start` with
//! the name and what was typed (`$ARGUMENTS`, which OpenCode fills in). Each install writes
//! the files of the compiled scripts there are then and removes those of scripts that went.

use std::path::{Path, PathBuf};

use crate::agents::reply::AFTER_START;
use crate::agents::tools::{AgentClient, AgentTool};
use crate::paths::Locations;
use crate::script::nl::{GENERATED_KEY, NlText, is_generated};
use crate::script::{Listing, Resolver, bundled};

/// One generated command file: its path under the NL scripts folder, and its text.
pub(crate) struct CommandFile {
    /// `compile.md`.
    pub rel: PathBuf,
    /// The whole file.
    pub text: String,
}

/// The command files for every bundled script that is not a demo.
pub(crate) fn bundled() -> Vec<CommandFile> {
    bundled::FILES
        .iter()
        .filter_map(|f| {
            let name = f.path.strip_prefix("nl/")?.strip_suffix(".md")?;
            (!bundled::is_demo(name)).then(|| {
                let compiled = bundled::file(&format!("compiled/{name}.star")).is_some();
                CommandFile {
                    rel: PathBuf::from(format!("{name}.md")),
                    text: text(name, f.text, compiled),
                }
            })
        })
        .collect()
}

/// OpenCode's command files for the compiled scripts a session in `base` can start (the
/// project's, the user's and the bundled ones, not the demos).
pub(crate) fn opencode(base: &Path) -> Vec<CommandFile> {
    let start = AgentClient::OpenCode.tool_name(AgentTool::Start);
    Resolver::new(&Locations::discover(base))
        .list(Listing::Usual)
        .into_iter()
        .filter(|entry| entry.compiled)
        .map(|entry| {
            let name = entry.name.to_string();
            let mut front = format!(
                "---\n# Written by `mekara install --client opencode`, which rewrites it (and\n\
                 # removes it when the script goes); the script is `{name}` in mekara\n"
            );
            if !entry.description.is_empty() {
                front.push_str(&format!(
                    "description: {}\n",
                    serde_json::Value::String(entry.description.clone())
                ));
            }
            front.push_str(&format!("{GENERATED_KEY}: {name}\n---\n\n"));
            CommandFile {
                rel: PathBuf::from(format!("{}.md", entry.name.as_path())),
                text: format!(
                    "{front}`{name}` is a compiled mekara script: mekara runs its automatic steps \
                     itself. Do not look for its instructions to follow by hand. Call the \
                     `{start}` tool with `name` `{name}` and, as `arguments`, exactly the text \
                     between these tags (an empty string when there is none):\n\n\
                     <arguments>\n$ARGUMENTS\n</arguments>\n\n{AFTER_START}\n"
                ),
            }
        })
        .collect()
}

/// Whether the file at `path` is one install generated (and may refresh or remove).
pub(crate) fn is_ours(path: &std::path::Path) -> bool {
    std::fs::read_to_string(path).is_ok_and(|t| is_generated(&t))
}

/// An NL-only script's file is its own text (Claude Code replaces `$ARGUMENTS`, as mekara
/// does); a compiled script's says to run it through mekara, which the hook says too.
fn text(name: &str, nl: &str, compiled: bool) -> String {
    let parsed = NlText::parse(nl);
    let body = if compiled {
        crate::hooks::bundled_command_body(name)
    } else {
        parsed.body.to_string()
    };
    let mut front = format!(
        "---\n# Written by `mekara install`, which rewrites it; to change the script, run\n\
         # `mekara scripts eject {name}` (it replaces this file with the script's own)\n"
    );
    // The script's own front matter lines, as written (quotes and all).
    if !parsed.front_matter.is_empty()
        && let Some(rest) = nl.strip_prefix("---\n")
        && let Some(end) = rest.find("\n---")
    {
        front.push_str(&rest[..=end]);
    }
    front.push_str(&format!("{GENERATED_KEY}: {name}\n---\n\n"));
    front + &body
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_generated_file_is_marked_and_no_demo_gets_one() {
        let files = super::bundled();
        let names: Vec<_> = files.iter().map(|f| f.rel.display().to_string()).collect();
        assert_eq!(names, ["compile.md", "systematize.md"]);
        assert!(files.iter().all(|f| super::is_generated(&f.text)));
    }
}
