//! Every word mekara says to an agent, in one place: over MCP, and as the prompt of an
//! unattended run (which reads what an agent over MCP would). The session and the handler
//! decide *what* to say (which refusal, which pending item); this module decides how it
//! reads:
//!
//! - the Markdown reply to a call that moved a run: the steps executed since the last reply,
//!   then exactly one pending item with the exact next call to make;
//! - the refusals, with their shared phrases ([`Unchanged`], [`START_A_SCRIPT`],
//!   [`resume_call`]);
//! - the replies of the tools that only read (`status`, `list_scripts`, `resume` without an
//!   id) and of `eject_script`;
//! - the handler's own words: its instructions, progress messages, and the errors of
//!   `tools/call` and `prompts/get`.
//!
//! Not here: the tool catalogue (names, titles, descriptions, input schemas), which defines
//! the tools and lives beside their argument checks in [`super::tools`].
//!
//! Every shape here is pinned by the MCP snapshot tests; change them on purpose only.

mod client_names;
mod clip;
mod handler;
mod pending;
mod refusals;
mod runs;
mod start;
mod status;
mod steps;
mod unattended;

use std::path::Path;

use serde_json::Value as Json;

pub(crate) use client_names::for_client;
pub(crate) use clip::{SHOWN_LINES, head_and_tail};
pub(crate) use handler::{
    INSTRUCTIONS, PROMPT_ARGUMENT, PROMPT_ARGUMENT_NOT_STRING, progress_line, prompt_not_found,
    prompt_unknown_argument, stood_down, unknown_tool,
};
pub(crate) use pending::{pending, task_label, task_prompt};
pub(crate) use refusals::{argument_refusal, busy, internal_error, refusal};
pub(crate) use runs::{
    ANSWERED_BY_RESUME, LiveRun, driven_runs, handle_refused, interrupted_runs, no_run_named,
    open_runs, resume_refused, resumed, resumed_same, rewound, still_waiting, which_run,
};
pub(crate) use start::{AFTER_START, compiled_prompt, project_script_question};
pub(crate) use status::{eject_refused, ejected, read_status, scripts, status};
pub(crate) use steps::{JournalRef, steps_executed};
pub(crate) use unattended::{UNATTENDED, cli_prompt, json_answer_request};

/// What a tool call gives back: Markdown, and whether it is an error the agent must act on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reply {
    /// The text the agent reads.
    pub text: String,
    /// Whether the call was refused or failed (`isError`).
    pub is_error: bool,
}

impl Reply {
    /// A reply the agent goes on from.
    pub(crate) fn ok(text: String) -> Reply {
        Reply {
            text,
            is_error: false,
        }
    }

    /// A refusal or failure (`isError`).
    pub(crate) fn error(text: String) -> Reply {
        Reply {
            text,
            is_error: true,
        }
    }
}

/// How every refusal starts.
const REFUSED: &str = "Refused: ";

/// The way to begin, for an agent with nothing running.
pub(crate) const START_A_SCRIPT: &str = "Call `start` to run a script (`list_scripts` lists them)";

/// What a refused call left as it was: the last line of its refusal. The wordings differ on
/// purpose.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unchanged {
    /// "Nothing changed in the run.": a call on the session's run, refused before it did
    /// anything.
    Run,
    /// "Nothing changed.": `resume` of a run it could not take up. Two runs are in question
    /// there, the session's own and the one named, and neither changed, so "the run" would
    /// say too little.
    Everything,
    /// "Nothing was written.": `eject_script`, which writes files, not runs.
    Files,
}

impl Unchanged {
    fn line(self) -> &'static str {
        match self {
            Unchanged::Run => "Nothing changed in the run.",
            Unchanged::Everything => "Nothing changed.",
            Unchanged::Files => "Nothing was written.",
        }
    }
}

/// `Refused: <reason>` and, on its own line, what stayed as it was.
/// What the reason echoes in backticks is clipped ([`crate::display::clip_echoes`]): a
/// 120 KB name is not sent back whole.
fn refused(reason: &str, unchanged: Unchanged) -> String {
    let reason = crate::display::clip_echoes(reason);
    format!("{REFUSED}{reason}\n{}", unchanged.line())
}

/// `` `resume` with `{"run_id": "<run>"}` ``: the call that takes `run` up again.
pub(crate) fn resume_call(run: &str) -> String {
    format!("`resume` with `{{\"run_id\": \"{run}\"}}`")
}

/// `test:random[2]`: a step by its frame's stack label and its index.
fn step_path(frame: &str, index: usize) -> String {
    format!("{frame}[{index}]")
}

/// A folder as the agent sees it: relative to the session's folder when inside it. Cassettes
/// write folders the same way, so that they replay in any checkout.
pub(crate) fn shown_dir(dir: &Path, cwd: &Path) -> String {
    match dir.strip_prefix(cwd) {
        Ok(rest) if rest.as_os_str().is_empty() => ".".to_string(),
        Ok(rest) => rest.display().to_string(),
        Err(_) => dir.display().to_string(),
    }
}

/// `text` ending in a full stop, unless it ends in other punctuation.
fn sentence(text: &str) -> String {
    let text = text.trim_end();
    if text.ends_with(['.', '?', '!']) {
        text.to_string()
    } else {
        format!("{text}.")
    }
}

/// `"text"` with JSON escapes, so any arguments show unambiguously.
fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}

fn compact(value: &Json) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// `{"run_id": "<handle>", ` before the rest of a call's arguments, when the run has a
/// handle (runs journaled before handles have none, and their replies stay as they were).
fn handle_argument(handle: Option<&str>) -> String {
    handle.map_or_else(String::new, |h| format!("\"run_id\": {}, ", quote(h)))
}

/// `` with `{"run_id": "<handle>"}` ``: the argument of `finish_nl_script` and `status`.
fn with_handle(handle: Option<&str>) -> String {
    handle.map_or_else(String::new, |h| {
        format!(" with `{{\"run_id\": {}}}`", quote(h))
    })
}

/// A script's question as the agent shows it to the user word for word, in a `<question>`
/// block: its text, then its choices when it has some, so that a question whose text does not
/// name them ("Push?") still makes sense wherever the agent relays it.
fn question_block(question: &str, choices: Option<&[String]>) -> String {
    let listed = choices.map_or(String::new(), |choices| {
        let quoted = choices.iter().map(|c| quote(c)).collect::<Vec<_>>();
        format!("\nChoices: {}\n", quoted.join(", "))
    });
    format!(
        "<question>\n{}{listed}</question>\n",
        with_newline(question)
    )
}

fn with_newline(text: &str) -> String {
    let mut text = text.trim_end().to_string();
    text.push('\n');
    text
}
