//! OpenCode: its model sees mekara's tools as `mekara_NAME`; `--client opencode` adds the
//! `mekara` server to `opencode.json` (`~/.config/opencode/opencode.json` with `--user`) and
//! writes its command files. It has no headless adapter.
//!
//! OpenCode has no hooks to send a compiled script to `start`, so `--client opencode` writes
//! a command of its own for each compiled script into OpenCode's commands folder
//! (`.opencode/commands/NAME.md`), marked as install's other command files are
//! ([`crate::install::commands`]), saying to call `mekara_start` with the name and what was
//! typed (`$ARGUMENTS`, which OpenCode fills in). Each install writes the files of the
//! compiled scripts there are then and removes those of scripts that went.

use std::path::{Path, PathBuf};

use serde_json::json;

use super::clients::{Client, Served};
use super::reply::AFTER_START;
use super::tools::{AgentTool, SERVER_NAME};
use crate::install::commands::{self, CommandFile};
use crate::install::{
    Action, Change, Direction, InstallError, Plan, Setup, display, generated_files,
};
use crate::paths::Locations;
use crate::script::nl::GENERATED_KEY;
use crate::script::{Listing, Resolver};

/// OpenCode.
pub(crate) const CLIENT: Client = Client {
    name: "opencode",
    help: "OpenCode (`opencode.json`)",
    is_client_info: |name| name.starts_with("opencode"),
    tool_name,
    fills_only_required_arguments: false,
    always: false,
    install,
    left_for_you: |user| Some(left_for_you(user)),
    note_rank: 4,
    headless: None,
};

/// `mekara_start`.
fn tool_name(tool: AgentTool, _: Served) -> String {
    format!("{SERVER_NAME}_{}", tool.name())
}

fn install(setup: &mut Setup<'_>) -> Result<(), InstallError> {
    let base = setup.base();
    let (path, commands) = if setup.user() {
        (
            base.join(".config/opencode/opencode.json"),
            base.join(".config/opencode/commands"),
        )
    } else {
        (base.join("opencode.json"), base.join(".opencode/commands"))
    };
    let direction = setup.direction();
    let entry = json!({"type": "local", "command": ["mekara", "mcp"], "enabled": true});
    setup.server_entry(&path, "mcp", &entry)?;
    plan_commands(setup.plan(), &commands, direction)
}

fn left_for_you(user: bool) -> String {
    let again = if user {
        "mekara install --user --client opencode"
    } else {
        "mekara install --client opencode"
    };
    format!(
        "run `{again}` again after adding or removing a compiled script: OpenCode's \
         `/NAME` commands are files install writes, one for each compiled script"
    )
}

/// Plans OpenCode's command files for the compiled scripts: written or refreshed, those of
/// scripts that are gone removed (uninstall removes them all), never one of the person's.
fn plan_commands(plan: &mut Plan, dir: &Path, direction: Direction) -> Result<(), InstallError> {
    let base = plan.scope.base().to_path_buf();
    let current = match direction {
        Direction::Install => command_files(&base),
        Direction::Uninstall => Vec::new(),
    };
    for path in generated_files(dir)? {
        if !current.iter().any(|f| dir.join(&f.rel) == path) {
            let why = match direction {
                Direction::Install => "its compiled script is gone",
                Direction::Uninstall => "the OpenCode command for a compiled script",
            };
            plan.changes.push(Change {
                path,
                action: Action::RemoveGenerated,
                details: vec![why.to_string()],
            });
        }
    }
    for file in current {
        let path = dir.join(&file.rel);
        let name = file.rel.with_extension("");
        if path.exists() && !commands::is_ours(&path) {
            plan.kept.push(format!(
                "`{}` is your own OpenCode command: left as is, so `/{}` does not run the \
                 compiled script through mekara",
                display(&base, &path),
                name.display()
            ));
            continue;
        }
        if std::fs::read_to_string(&path).is_ok_and(|t| t == file.text) {
            continue;
        }
        plan.changes.push(Change {
            action: Action::Write {
                text: file.text,
                created: !path.exists(),
            },
            path,
            details: vec![format!(
                "the OpenCode command `/{}` for the compiled script",
                name.display()
            )],
        });
    }
    if direction == Direction::Uninstall {
        // The folders go too when nothing else is in them.
        for folder in [dir, dir.parent().unwrap_or(dir)] {
            if folder != base && folder.is_dir() {
                plan.changes.push(Change {
                    path: folder.to_path_buf(),
                    action: Action::RemoveDir,
                    details: Vec::new(),
                });
            }
        }
    }
    Ok(())
}

/// OpenCode's command files for the compiled scripts a session in `base` can start (the
/// project's, the user's and the bundled ones, not the demos).
fn command_files(base: &Path) -> Vec<CommandFile> {
    let start = tool_name(AgentTool::Start, Served::Configured);
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
