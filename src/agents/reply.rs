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

use std::fmt::{Display, Write as _};
use std::path::Path;

use serde_json::{Map, Value as Json};

use super::clients::AgentClient;
use super::history::{CallEvent, StepStarted};
use super::tools::{self, AgentTool, ArgumentError};
use crate::display::{count, format_time, quoted};
use crate::engine::executor::Frame;
use crate::engine::journal::{Outcome, TornTail};
use crate::engine::runs::{RunHistory, RunState, RunSummary};
use crate::engine::step::{StepInput, StepRecord};
use crate::engine::{EngineError, Pending, RewindPlan, Waiting};
use crate::script::ScriptError;
use crate::script::eject::{EjectError, Ejected};
use crate::script::{Listing, ScriptEntry};

/// The most lines of one step's output a reply shows; the rest stays in the journal.
const HEAD_LINES: usize = 40;
const TAIL_LINES: usize = 20;
/// How many lines of a long output are shown, first and last, where nothing else crowds
/// it: the newest steps of a reply, and the viewer.
pub(crate) const SHOWN_LINES: (usize, usize) = (HEAD_LINES, TAIL_LINES);
/// The most characters of one output line (or of a function step's echoed call) a reply
/// shows.
const MAX_LINE: usize = 400;
/// The most bytes of the "steps executed" part of a reply before older steps' outputs are
/// shortened further: Claude Code cuts a tool result at 25,000 tokens (about 100 KB), and a
/// reply must stay well under it however many steps ran since the last one.
const STEPS_BUDGET: usize = 64 * 1024;
/// The steps, counted from the last, whose outputs keep [`HEAD_LINES`] and [`TAIL_LINES`]
/// when the budget is passed: the ones the agent is about to act on.
const RECENT_STEPS: usize = 2;
/// The lines of an older step's output a reply over [`STEPS_BUDGET`] keeps (head, tail), and
/// then, if the reply is still over it, its first line only.
const OLDER_LINES: (usize, usize) = (6, 3);
const OLDEST_LINES: (usize, usize) = (1, 0);
/// The most lines that carry an error ([`crate::display::error_lines`]) a long output's cut
/// part keeps.
const KEPT_ERROR_LINES: usize = 30;

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

// ---------------------------------------------------------------------------------------
// Shared phrases

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

// ---------------------------------------------------------------------------------------
// A call that moved a run: the steps executed, then the pending item

/// Where a step's full output can be read, for the line that says some was cut.
pub(crate) struct JournalRef<'a> {
    /// The run's id.
    pub run: &'a str,
}

/// The "steps executed" part of a reply; empty when nothing ran. When it would pass
/// [`STEPS_BUDGET`], the outputs of all but the [`RECENT_STEPS`] last steps keep only
/// [`OLDER_LINES`], and if that is still too much, [`OLDEST_LINES`]: the journal has them all.
pub(crate) fn steps_executed(events: &[CallEvent], journal: Option<&JournalRef<'_>>) -> String {
    if events.is_empty() {
        return String::new();
    }
    let steps = events
        .iter()
        .filter(|e| matches!(e, CallEvent::Step { .. }))
        .count();
    let mut out = String::new();
    for older in [(HEAD_LINES, TAIL_LINES), OLDER_LINES, OLDEST_LINES] {
        out = steps_with(events, journal, steps.saturating_sub(RECENT_STEPS), older);
        if out.len() <= STEPS_BUDGET {
            break;
        }
    }
    out
}

/// [`steps_executed`] with the first `older_steps` steps' outputs cut to `older` lines (head,
/// tail).
fn steps_with(
    events: &[CallEvent],
    journal: Option<&JournalRef<'_>>,
    older_steps: usize,
    older: (usize, usize),
) -> String {
    let mut out = String::from("## Steps executed\n\n");
    let mut seen = 0;
    for event in events {
        match event {
            CallEvent::Called { path } => {
                let _ = writeln!(out, "- → `{path}` started");
            }
            CallEvent::Returned {
                path,
                success,
                allow_failure,
            } => {
                let _ = writeln!(
                    out,
                    "- {} `{path}` {}",
                    crate::display::return_mark(*success, *allow_failure),
                    match (success, allow_failure) {
                        (true, _) => "returned",
                        (false, true) =>
                            "failed, allowed by `allow_failure = True`: the calling script \
                             received this result and went on",
                        (false, false) => "failed",
                    }
                );
            }
            CallEvent::Step { frame, record } => {
                let lines = if seen < older_steps {
                    older
                } else {
                    (HEAD_LINES, TAIL_LINES)
                };
                seen += 1;
                step(
                    &mut out,
                    &step_path(frame, record.index),
                    record,
                    journal,
                    lines,
                );
            }
        }
    }
    out.push('\n');
    out
}

/// One step of the "steps executed" part, its output cut to `lines` (head, tail).
fn step(
    out: &mut String,
    path: &str,
    record: &StepRecord,
    journal: Option<&JournalRef<'_>>,
    lines: (usize, usize),
) {
    let _ = write!(out, "- {} `{path}` ", record.mark());
    match &record.input {
        StepInput::Shell { command, .. } if !command.contains('\n') => {
            let _ = write!(out, "`$ {command}`");
        }
        StepInput::Shell { command, .. } => {
            let _ = write!(
                out,
                "shell command:\n  ```sh\n{}  ```",
                indent(command, "  ")
            );
        }
        StepInput::Function { function, kwargs } => {
            // The arguments may be a whole diff: the journal keeps them, the reply a line.
            let _ = write!(out, "`{}`", clip_line(&function_call(function, kwargs)));
        }
        StepInput::Mcp { .. } => {
            let _ = write!(out, "`{}`", record.input.summary());
        }
        other => {
            let _ = write!(out, "{}", other.summary());
        }
    }
    if let Some(context) = &record.context {
        let _ = write!(out, " — {}", crate::display::first_line(context));
    }
    out.push('\n');
    if record.failure_allowed() {
        out.push_str(
            "  failed, allowed by `allow_failure = True`: the script received this result and \
             went on\n",
        );
    }
    match (&record.result.error, record.result.exit_code) {
        (Some(error), _) => {
            let _ = writeln!(out, "  error: {}", indent(error.trim_end(), "  ").trim());
        }
        (None, Some(code)) if code != 0 => {
            let _ = writeln!(out, "  exit code {code}");
        }
        _ => {}
    }
    if let Some(answer) = &record.result.answer {
        let label = record.result.answer_label();
        let _ = writeln!(out, "  {label}: {}", quote(answer));
    }
    let mut output = record.result.output.clone();
    if let Some(value) = &record.result.value
        && !value.is_null()
    {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        let _ = writeln!(output, "→ {}", compact(value));
    }
    if !output.trim().is_empty() {
        let shown = shorten(&output, journal.map(|j| (j.run, path)), lines);
        let _ = writeln!(out, "  <output>\n{}  </output>", indent(&shown, "  "));
    }
}

/// `verdict(guess="50", secret=57)`.
fn function_call(function: &str, kwargs: &Map<String, Json>) -> String {
    let args: Vec<String> = kwargs
        .iter()
        .map(|(k, v)| format!("{k}={}", compact(v)))
        .collect();
    format!("{function}({})", args.join(", "))
}

fn compact(value: &Json) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// `line` whole, or its first [`MAX_LINE`] characters and a note that it was cut.
fn clip_line(line: &str) -> String {
    if line.chars().count() <= MAX_LINE {
        line.to_string()
    } else {
        let kept: String = line.chars().take(MAX_LINE).collect();
        format!("{kept}… [line cut at {MAX_LINE} characters]")
    }
}

/// Keeps the head and tail of a long output (`lines`: how many of each), with a line saying
/// what was cut and where the whole of it is.
fn shorten(output: &str, source: Option<(&str, &str)>, lines: (usize, usize)) -> String {
    let whole = match source {
        Some((run, step)) => {
            format!("the whole output is in the journal: `mekara runs show {run}`, step {step}")
        }
        None => "the whole output is in the run's journal".to_string(),
    };
    head_and_tail(output, &whole, lines)
}

/// `output`'s first `head` and last `tail` lines (each line cut at [`MAX_LINE`] characters),
/// with a line saying what was cut and, in `whole`, where the whole of it is: what MCP
/// replies and the viewer show of a step's output.
pub(crate) fn head_and_tail(output: &str, whole: &str, (head, tail): (usize, usize)) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let mut shown = String::new();
    if lines.len() <= head + tail {
        for line in &lines {
            let _ = writeln!(shown, "{}", clip_line(line));
        }
        return shown;
    }
    for line in &lines[..head] {
        let _ = writeln!(shown, "{}", clip_line(line));
    }
    // The lines that carry an error are kept from the cut part: the error a check printed
    // after many lines of downloads is what the agent needs, not what clipping may hide. Not
    // where a reply over its budget shortens older outputs further.
    let end = lines.len() - tail;
    let most = if head >= HEAD_LINES {
        KEPT_ERROR_LINES
    } else {
        0
    };
    let kept = crate::display::error_lines(&lines[head..end], most);
    let mut from = head;
    for index in kept.iter().map(|k| k + head).chain([end]) {
        let cut = index - from;
        if cut > 0 && from == head {
            let _ = writeln!(
                shown,
                "… {cut} lines cut here (lines {}–{} of {}); {whole} …",
                from + 1,
                index,
                lines.len()
            );
        } else if cut > 0 {
            let _ = writeln!(
                shown,
                "… {cut} lines cut here (lines {}–{}) …",
                from + 1,
                index
            );
        }
        if index < end {
            let _ = writeln!(shown, "{}", clip_line(lines[index]));
        }
        from = index + 1;
    }
    for line in &lines[lines.len() - tail..] {
        let _ = writeln!(shown, "{}", clip_line(line));
    }
    shown
}

/// Indents every line of `text` by `by`; the result ends with a newline.
fn indent(text: &str, by: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{by}{line}");
        }
    }
    out
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

/// What to do once `start` is called, said wherever an agent is sent to `start` (the
/// hooks, the command files `mekara install` writes, the prompts of compiled scripts), after
/// "Call the `start` tool with …": follow the replies, passing the run's handle on.
pub(crate) const AFTER_START: &str = "then do what its reply says, step by step, passing the \
     run's handle that the reply gives (`<run id>.<token>`) as `run_id` in every later call for \
     that run.";

/// The question an agent asks the user before it runs a project's own script that has the
/// name of a bundled one: the refusal of `start` and the hooks' reroute put it the same way.
pub(crate) fn project_script_question(shadowing: &crate::script::Shadowing) -> String {
    format!(
        "\"This project has its own `{}` script ({}), which would run instead of mekara's \
         bundled `{}`. Run the project's script?\"",
        shadowing.name,
        shadowing.files_named(),
        shadowing.bundled
    )
}

/// The text of `prompts/get` for compiled script `name`: the call to `start`, not the NL
/// instructions (which the agent follows by hand only when a step fails, as the reply then
/// says).
pub(crate) fn compiled_prompt(name: &str, arguments: &str) -> String {
    let call = serde_json::json!({ "name": name, "arguments": arguments });
    format!(
        "`{name}` is a compiled mekara script: mekara runs its automatic steps itself. Do not \
         follow its Markdown instructions by hand. Call mekara's `start` tool with exactly \
         these arguments (JSON):\n\n{call}\n\n{AFTER_START}\n"
    )
}

/// The line that tells the agent the run's handle is the value to pass on.
fn handle_line(handle: &str) -> String {
    format!(
        "This run's handle is `{handle}`: pass it as `run_id` in every call for this run \
         (and as `parent` to `start` a script nested inside it).\n"
    )
}

/// The pending part of a reply. `nl_source` is the compiled script's NL text, given the
/// first time its frame needs the agent; `handle` is the run's handle, shown in the call to
/// make.
pub(crate) fn pending(
    pending: &Pending,
    nl_source: Option<(&str, &str)>,
    handle: Option<&str>,
) -> String {
    let mut out = String::new();
    let run = handle_argument(handle);
    match pending {
        Pending::Llm {
            path,
            prompt,
            expects,
        } => {
            let _ = writeln!(out, "## Your turn: llm step `{path}`\n");
            if let Some((name, source)) = nl_source {
                let _ = writeln!(
                    out,
                    "This step belongs to the compiled script `{name}`. Its NL source, for \
                     context only (mekara runs the other steps itself; do just this step):\n\n\
                     <nl-source>\n{}</nl-source>\n",
                    with_newline(source)
                );
            }
            let _ = writeln!(
                out,
                "<instructions>\n{}</instructions>\n",
                with_newline(prompt)
            );
            let expected: Vec<(&String, &Json)> = expects.iter().flat_map(|e| e.iter()).collect();
            if expected.is_empty() {
                let _ = writeln!(
                    out,
                    "No outputs are expected. When you have done this step, call \
                     `continue_compiled_script` with `{{{run}\"outputs\": {{}}}}`."
                );
            } else {
                let example = expected_outputs(&mut out, &expected);
                let _ = writeln!(
                    out,
                    "\nWhen you have done this step, call `continue_compiled_script` with \
                     `{{{run}\"outputs\": {{{}}}}}`, giving every expected output.",
                    example.join(", ")
                );
            }
            out.push_str(
                "Do only this step: mekara runs the rest. Do not call `finish_nl_script` here.\n",
            );
        }
        Pending::Nl { path, instructions } => {
            let _ = writeln!(
                out,
                "## Your turn: NL script `{path}`\n\nFollow all of these instructions \
                 yourself:\n\n<instructions>\n{}</instructions>\n\n\
                 Call `finish_nl_script`{} only when the whole script is done, not after each \
                 step.",
                with_newline(instructions),
                with_handle(handle)
            );
        }
        Pending::Fallback {
            path,
            error,
            instructions,
            failed_call,
        } => {
            // A failure in a called script is handled first by that script's own words.
            let whose_rules = match failed_call {
                Some(call) => {
                    // Those that called it, from the inside out.
                    let callers: Vec<String> = call
                        .inside_out(path)
                        .iter()
                        .skip(1)
                        .map(|name| format!("`{name}`"))
                        .collect();
                    format!(
                        "the instructions of `{}` (the script that failed, below) and of {} say \
                         to do when this fails: if they say to stop, stop the whole run, the \
                         rest of the scripts that called it too",
                        call.name,
                        crate::display::and_list(&callers)
                    )
                }
                None => "the script's instructions say to do when this fails: if they say to \
                         stop, stop"
                    .to_string(),
            };
            // A failure in a called script names it: its rule may be to stop.
            let title = match failed_call {
                Some(call) => format!(
                    "`{path}` failed in `{}`; stop or finish it by hand, as the instructions \
                     say",
                    call.name
                ),
                None => format!("`{path}` failed; finish it by hand"),
            };
            let _ = write!(
                out,
                "## Your turn: {title}\n\n\
                 What failed:\n\n<error>\n{}</error>\n\n\
                 First do what {whose_rules} (tell the user what failed; do not work around \
                 it). Otherwise, the steps listed as done above ran already: do not repeat \
                 them. Do what is left of the script's instructions yourself, fixing or working \
                 around what failed:\n\n<instructions>\n{}</instructions>\n\n",
                with_newline(error),
                with_newline(instructions),
            );
            if let Some(call) = failed_call {
                let whose = if call.chain.len() > 2 {
                    format!(
                        "The failure was in `{}`, whose own step failed, at the end of a chain of \
                         calls: {}; each script between failed because the one it called did. \
                         The instructions of `{}`",
                        call.name,
                        crate::display::call_chain(&call.chain),
                        call.name
                    )
                } else {
                    format!(
                        "The failure was in `{}`, which this script called. Its own instructions",
                        call.name
                    )
                };
                let _ = write!(
                    out,
                    "{whose}, for what is left of it, the step that failed and those after it (its \
                     steps listed as done above ran already):\n\n<called-script-instructions name=\"{}\">\n{}\
                     </called-script-instructions>\n\n",
                    call.name,
                    with_newline(&call.instructions)
                );
                // What the scripts between still had to do once their call returned.
                for (name, callee, instructions) in call.callers_between() {
                    let _ = write!(
                        out,
                        "Then the instructions of `{name}`, which called `{callee}`, for what is \
                         left of it after that call:\n\n<called-script-instructions \
                         name=\"{name}\">\n{}</called-script-instructions>\n\n",
                        with_newline(instructions)
                    );
                }
                if !call.between.is_empty() {
                    let order: Vec<String> = call
                        .inside_out(path)
                        .iter()
                        .map(|name| format!("`{name}`"))
                        .collect();
                    let _ = write!(
                        out,
                        "If you finish by hand, finish them from the inside out: what is left of \
                         {}.\n\n",
                        order.join(", then of ")
                    );
                }
                // A model that read "(the `release` script)" in the instructions wondered
                // whether to `start` it again.
                out.push_str(if call.between.is_empty() {
                    "Do the called script's part by hand from its instructions: do not `start` it \
                     again, which would run its done steps twice.\n\n"
                } else {
                    "Do the called scripts' part by hand from their instructions: do not `start` \
                     them again, which would run their done steps twice.\n\n"
                });
            }
            let _ = writeln!(
                out,
                "Call `finish_nl_script`{} when the whole script is done. If you stopped, or \
                 the user would rather fix the cause first, leave the run as it is (do not call \
                 `finish_nl_script`): once the cause is fixed, `resume` with the run's handle as \
                 `run_id` and `retry: true` runs the failed step again and goes on.",
                with_handle(handle)
            );
        }
        Pending::Tasks { path, tasks, .. } => {
            let _ = writeln!(
                out,
                "## Your turn: {} independent llm tasks `{path}`\n",
                tasks.len()
            );
            if let Some((name, source)) = nl_source {
                let _ = writeln!(
                    out,
                    "These tasks belong to the compiled script `{name}`. Its NL source, for \
                     context only (mekara runs the other steps itself; do just these tasks):\n\n\
                     <nl-source>\n{}</nl-source>\n",
                    with_newline(source)
                );
            }
            out.push_str(
                "They do not depend on each other: do each (at once, if you can hand them to \
                 subagents), then give all their outputs in one call.\n\n",
            );
            let mut example = Vec::new();
            for task in tasks {
                let _ = writeln!(
                    out,
                    "### Task `{}`\n\n<instructions>\n{}</instructions>\n",
                    task.member,
                    with_newline(&task.prompt)
                );
                let expected: Vec<(&String, &Json)> =
                    task.expects.iter().flat_map(|e| e.iter()).collect();
                let names = if expected.is_empty() {
                    out.push_str("No outputs are expected.\n\n");
                    Vec::new()
                } else {
                    let names = expected_outputs(&mut out, &expected);
                    out.push('\n');
                    names
                };
                example.push(format!("\"{}\": {{{}}}", task.member, names.join(", ")));
            }
            let _ = writeln!(
                out,
                "When every task is done, call `continue_compiled_script` once with \
                 `{{{run}\"outputs\": {{{}}}}}`: each task's outputs under its number.\n\
                 Do only these tasks: mekara runs the rest. Do not call `finish_nl_script` here.",
                example.join(", ")
            );
        }
        Pending::Ask {
            path,
            question,
            choices,
            timeout,
            ..
        } => ask(&mut out, path, question, choices.as_deref(), *timeout, &run),
        Pending::Finished {
            run,
            stop: Some(stop),
            ..
        } => {
            let _ = writeln!(
                out,
                "## Stopped by the script\n\nThe script `{}` stopped the run (run `{run}`) \
                 with this message:\n\n<message>\n{}</message>\n\n\
                 The script stops here on purpose. Tell the user that it stopped, and what it \
                 says. Do not work around it, and do not do the rest of the script's work by \
                 hand. Nothing is pending: do not call `continue_compiled_script` or \
                 `finish_nl_script` for it.",
                stop.script,
                with_newline(&stop.message)
            );
            if stop.retry {
                let _ = writeln!(
                    out,
                    "It stopped on a step that failed: once the user has fixed the cause, \
                     `resume` with the run's handle as `run_id` and `retry: true` runs that \
                     step again and goes on."
                );
            }
            return out;
        }
        Pending::Finished {
            run,
            outcome,
            fell_back,
            stop: None,
        } => {
            let how = match (outcome, fell_back) {
                (_, true) => "failed and was finished by hand",
                (Outcome::Completed, false) => "completed",
                _ => "was finished by hand",
            };
            let _ = writeln!(
                out,
                "## Done\n\nThe script {how} (run `{run}`). Nothing is pending: do not call \
                 `continue_compiled_script` or `finish_nl_script` for it again."
            );
            return out;
        }
    }
    if let Some(handle) = handle {
        out.push_str(&handle_line(handle));
    }
    out
}

/// The pending part of a reply for a question (`ask`): the agent passes it to the user word
/// for word, and passes the user's answer back; it never answers itself.
fn ask(
    out: &mut String,
    path: &str,
    question: &str,
    choices: Option<&[String]>,
    timeout: Option<std::time::Duration>,
    run: &str,
) {
    let _ = writeln!(
        out,
        "## Your turn: ask the user (`{path}`)\n\n\
         The script needs an answer from the user, not from you. Ask the user this question, \
         word for word, and wait for their reply:\n\n<question>\n{}</question>\n",
        with_newline(question)
    );
    if let Some(choices) = choices {
        let _ = writeln!(
            out,
            "The answer must be one of: {}. Show the user these choices.",
            choices
                .iter()
                .map(|c| quote(c))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if let Some(timeout) = timeout {
        let _ = writeln!(
            out,
            "An answer that comes later than {} after the question was asked fails the step.",
            humantime::format_duration(timeout)
        );
    }
    let _ = writeln!(
        out,
        "{}When the user has answered, call `continue_compiled_script` with \
         `{{{run}\"outputs\": {{\"answer\": \"<the user's answer>\"}}}}`. Never answer the question \
         yourself, guess, or choose for the user: if the user does not answer, leave it pending.",
        if choices.is_some() || timeout.is_some() {
            "\n"
        } else {
            ""
        }
    );
}

fn with_newline(text: &str) -> String {
    let mut text = text.trim_end().to_string();
    text.push('\n');
    text
}

// ---------------------------------------------------------------------------------------
// Unattended runs: the same text, to an agent process mekara starts (`mekara run --agent`)

/// What an agent process is told before the reply text: it has no mekara tools, and answers
/// by returning.
pub(crate) const UNATTENDED: &str = "mekara is running this workflow unattended and started \
     you for one item of it. You have no mekara tools: where the text below says to call \
     `continue_compiled_script`, end your turn giving the expected outputs as your \
     structured answer; where it says to call `finish_nl_script`, do the work, then end your \
     turn. Do not ask the user anything: nobody is watching.";

/// The prompt an agent's own CLI reads on stdin for `request`: the text of the step, told that
/// no one is there to answer, with why the previous answer was refused.
pub(crate) fn cli_prompt(request: &super::headless::Request) -> String {
    unattended_prompt(&request.prompt, request.previous_error.as_deref())
}

/// The whole prompt for an agent process: [`UNATTENDED`], why its last answer was refused
/// (when it was), then the reply text an agent over MCP would read.
pub(crate) fn unattended_prompt(reply: &str, previous_error: Option<&str>) -> String {
    let mut out = format!("{UNATTENDED}\n\n");
    if let Some(error) = previous_error {
        let _ = write!(
            out,
            "Your last answer for this item was refused:\n\n<error>\n{}</error>\n\n\
             Answer again, fixing that.\n\n",
            with_newline(error)
        );
    }
    out.push_str(reply);
    out
}

/// What an agent without a structured-output option (Gemini CLI) is told after the prompt:
/// end its answer with the outputs as one JSON object fitting `schema`.
pub(crate) fn json_answer_request(schema: &Json) -> String {
    let schema = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
    format!(
        "\n\nYour structured answer: end your reply with the expected outputs as one JSON \
         object, with nothing after it, that fits this JSON Schema:\n\n```json\n{schema}\n```\n"
    )
}

// ---------------------------------------------------------------------------------------
// Refusals

/// The refusal of a call whose arguments do not fit its tool.
pub(crate) fn argument_refusal(error: &ArgumentError) -> String {
    refused(&sentence(&argument_error(error)), Unchanged::Run)
}

fn argument_error(error: &ArgumentError) -> String {
    match error {
        ArgumentError::Unknown { tool, argument } => {
            let known = tool.argument_names();
            let expected = if known.is_empty() {
                "it takes no arguments".to_string()
            } else {
                format!("it takes {}", quoted(&known))
            };
            format!("`{}` has no argument `{argument}`: {expected}", tool.name())
        }
        ArgumentError::Missing { tool, argument } => {
            format!("`{}` needs the argument `{argument}` (a string)", tool.name())
        }
        ArgumentError::NotString {
            tool,
            argument,
            found,
        } => format!(
            "argument `{argument}` of `{}` must be a string, not {found}",
            tool.name()
        ),
        ArgumentError::EmptyName => {
            "argument `name` of `start` is empty: give a script's name (`list_scripts` lists them)"
                .to_string()
        }
        ArgumentError::NoOutputs => {
            "`continue_compiled_script` needs the argument `outputs` (an object; `{}` when no outputs are expected)"
                .to_string()
        }
        ArgumentError::OutputsNotObject { found } => format!(
            "argument `outputs` of `continue_compiled_script` must be an object of named outputs, not {found}"
        ),
        ArgumentError::RetryAndFrom => {
            "`resume` takes `retry` or `from`, not both: `retry: true` runs the failed (or changed) step again, `from` a step you name"
                .to_string()
        }
        ArgumentError::AnswerWithoutRun => {
            "`answer` of `resume` needs `run_id`, the handle of the run whose question the user answered. The way to answer is `continue_compiled_script` with `{\"run_id\": \"<run id>.<token>\", \"outputs\": {\"answer\": \"<the user's answer>\"}}`"
                .to_string()
        }
        ArgumentError::RewindWithoutRun => {
            "`retry` and `from` of `resume` need `run_id`, the handle of the run to go on with"
                .to_string()
        }
        ArgumentError::NotBoolean {
            tool,
            argument,
            found,
        } => format!(
            "argument `{argument}` of `{}` must be a boolean, not {found}",
            tool.name()
        ),
    }
}

/// Lists the expected outputs (`- \`name\`: description`) and returns each as `"name": …`,
/// for the call to make.
fn expected_outputs(out: &mut String, expected: &[(&String, &Json)]) -> Vec<String> {
    out.push_str("Expected outputs:\n");
    for (name, description) in expected {
        match description.as_str() {
            Some(d) if !d.trim().is_empty() => {
                let _ = writeln!(out, "- `{name}`: {}", d.trim());
            }
            _ => {
                let _ = writeln!(out, "- `{name}`");
            }
        }
    }
    expected
        .iter()
        .map(|(name, _)| format!("{}: …", compact(&Json::String((*name).clone()))))
        .collect()
}

/// What an agent process of an unattended run reads for `task`, one of the independent
/// tasks of a `parallel` group in frame `path`: the task as an llm step of its own, named
/// `PATH task MEMBER`. Each task's agent starts a session of its own, so each is given the
/// compiled script's NL source (`nl_source`: its name and text), as a single llm step is the
/// first time its frame needs the agent.
pub(crate) fn task_prompt(
    path: &str,
    task: &crate::engine::Task,
    nl_source: Option<(&str, &str)>,
) -> String {
    let step = Pending::Llm {
        path: task_label(path, task.member),
        prompt: task.prompt.clone(),
        expects: task.expects.clone(),
    };
    format!(
        "This is one of several independent tasks that run at once, each by an agent of its \
         own: do only this one.\n\n{}",
        pending(&step, nl_source, None)
    )
}

/// How a task of a `parallel` group is named in messages: `PATH task MEMBER`.
pub(crate) fn task_label(path: &str, member: usize) -> String {
    format!("{path} task {member}")
}

/// Says why `error` stopped a call of `tool`, and what to call instead. `last` is the
/// pending item the agent was last shown; `run` the session's run.
pub(crate) fn refusal(
    tool: AgentTool,
    error: &EngineError,
    last: Option<&Pending>,
    run: Option<&str>,
) -> String {
    let pending_path = match last {
        Some(
            Pending::Llm { path, .. } | Pending::Nl { path, .. } | Pending::Tasks { path, .. },
        ) => format!(" `{path}`"),
        Some(Pending::Fallback { path, .. } | Pending::Ask { path, .. }) => format!(" `{path}`"),
        _ => String::new(),
    };
    match error {
        EngineError::WrongCall { waiting, .. } => {
            let instead = match waiting {
                Waiting::LlmStep => format!(
                    "An llm step{pending_path} is pending, not an NL script: do that one \
                     step, then call `continue_compiled_script` with its outputs. \
                     `finish_nl_script` is only for NL scripts and failed scripts finished \
                     by hand."
                ),
                Waiting::NlScript => format!(
                    "An NL script{pending_path} is pending, not an llm step: follow all of \
                     its instructions, then call `finish_nl_script`."
                ),
                Waiting::Fallback => format!(
                    "A failed script{pending_path} is waiting to be finished by hand: do \
                     what is left of it, then call `finish_nl_script`."
                ),
                Waiting::Answer => format!(
                    "A question for the user{pending_path} is pending: ask the user, then call \
                     `continue_compiled_script` with `{{\"outputs\": {{\"answer\": \"<the user's \
                     answer>\"}}}}`."
                ),
                Waiting::Nothing => {
                    format!("Nothing is pending: no script is running. {START_A_SCRIPT}.")
                }
            };
            refused(
                &format!("`{}` does not fit now. {instead}", tool.name()),
                Unchanged::Run,
            )
        }
        EngineError::Unfit { .. } => refused(
            &format!(
                "{error}. Call `continue_compiled_script` again with a number a script can \
                 hold, or with the number as a string."
            ),
            Unchanged::Run,
        ),
        EngineError::Oversize { .. } => refused(
            &format!(
                "{error}. It is too large: call `continue_compiled_script` again with a \
                 smaller value, at most {} bytes of JSON in all.",
                crate::engine::step::MAX_KEPT
            ),
            Unchanged::Run,
        ),
        EngineError::NotAChoice { .. } => refused(
            &format!(
                "{error}. Ask the user again, showing the choices, and call \
                 `continue_compiled_script` with their answer; do not choose for them."
            ),
            Unchanged::Run,
        ),
        EngineError::Outputs { .. } => refused(
            &format!(
                "{error}. Call `continue_compiled_script` again with every expected output in \
                 `outputs`."
            ),
            Unchanged::Run,
        ),
        EngineError::Script(ScriptError::NotFound { searched, .. })
            if searched.is_outside_project() =>
        {
            refused(
                &format!(
                    "{error}. mekara's server runs in the folder its client started it in: \
                     ask the user to start you in their project's folder, or to run `mekara \
                     install` in this one. `list_scripts` lists the scripts there are here."
                ),
                Unchanged::Run,
            )
        }
        EngineError::Script(ScriptError::NotFound { suggestions, .. })
            if suggestions.is_empty() =>
        {
            refused(
                &format!("{error}. Call `list_scripts` to see the scripts there are."),
                Unchanged::Run,
            )
        }
        EngineError::Script(ScriptError::Shadows(shadowing)) => refused(
            &format!(
                "{error}. It runs this repository's own commands, so the user decides: ask \
                 them {} If they say yes, call `start` again with the same `name` and \
                 `arguments` plus `\"project_script\": true`. If they say no, tell them that \
                 mekara's bundled `{}` cannot run here while the project's files are there, \
                 and stop. Never set `project_script` without their yes.",
                project_script_question(shadowing),
                shadowing.bundled
            ),
            Unchanged::Run,
        ),
        EngineError::Script(_)
        | EngineError::BadWorkingDir { .. }
        | EngineError::TooDeep { .. } => refused(&sentence(&error.to_string()), Unchanged::Run),
        EngineError::Cancelled { .. } => format!(
            "Stopped: {error}. The step that was running left no record and runs again when \
             the run is resumed: call {}.",
            resume_call(run.unwrap_or_default())
        ),
        // Its evaluator child died (the OOM killer, say): the journal holds every step that
        // ended, and the run goes on from it with its handle.
        EngineError::Evaluation { .. } => format!(
            "Stopped: {error}. Call {} to go on from the run's journal.",
            resume_call(run.unwrap_or_default())
        ),
        _ => format!("Error: {error}."),
    }
}

/// The error of a call that failed inside mekara itself (a panic: a bug).
pub(crate) fn internal_error(message: &str) -> String {
    format!(
        "Error: mekara failed inside this call ({message}); this is a bug in mekara. Steps that \
         finished are in the run's journal: call `status` to see where the run stands."
    )
}

/// The refusal of a call that arrived while another call of the session runs (`what`: the
/// step it is running). It has no line on what is unchanged: the other call may change the
/// run yet.
pub(crate) fn busy(what: Option<&str>) -> String {
    format!(
        "{REFUSED}another call of this session is still running{}. Wait for its reply, then \
         call again.",
        what.map(|w| format!(" ({w})")).unwrap_or_default()
    )
}

// ---------------------------------------------------------------------------------------
// The tools that only read, and `eject_script`

/// `status`: the run's stack (outermost first, folders as seen from `cwd`) and the pending
/// item. `last` is the pending item the agent was last shown; `interrupted`, why it cannot
/// be trusted.
pub(crate) fn status(
    run: Option<&str>,
    handle: Option<&str>,
    frames: &[Frame],
    cwd: &Path,
    last: Option<&Pending>,
    interrupted: Option<&str>,
) -> String {
    let mut text = String::from("## Status\n\n");
    let Some(run) = run else {
        text.push_str("No script is running in this session.");
        match last {
            Some(Pending::Finished {
                run,
                stop: Some(stop),
                ..
            }) => {
                let _ = write!(
                    text,
                    " The last run, `{run}`, was stopped by the script `{}`: {} (tell the user; \
                     do not work around it).",
                    stop.script,
                    stop.message.trim_end()
                );
            }
            Some(Pending::Finished { run, .. }) => {
                let _ = write!(text, " The last run, `{run}`, has ended.");
            }
            _ => {}
        }
        let _ = writeln!(
            text,
            " {START_A_SCRIPT}, or `resume` to list runs that were interrupted."
        );
        return text;
    };
    match handle {
        Some(handle) => {
            let _ = writeln!(
                text,
                "Run `{run}`, handle `{handle}`. The stack, outermost first:\n"
            );
        }
        None => {
            let _ = writeln!(text, "Run `{run}`. The stack, outermost first:\n");
        }
    }
    for (depth, frame) in frames.iter().enumerate() {
        stack_line(
            &mut text,
            depth,
            &frame.script.name.to_string(),
            frame.is_compiled(),
            &frame.steps,
            &shown_dir(&frame.working_dir, cwd),
            &frame.request,
        );
    }
    text.push('\n');
    match (interrupted, last) {
        (Some(why), _) => {
            let _ = writeln!(
                text,
                "The last call was stopped: {why}. Call {} to go on.",
                resume_call(handle.unwrap_or(run))
            );
        }
        (None, Some(pending)) => {
            text.push_str("Pending now (repeated from the last reply):\n\n");
            text.push_str(&self::pending(pending, None, handle));
        }
        (None, None) => {
            let _ = writeln!(
                text,
                "Call {} to see what is pending.",
                resume_call(handle.unwrap_or(run))
            );
        }
    }
    text
}

/// One frame of a run's stack, for `status`: `1. \`name\` (compiled, 2 steps done, in
/// \`.\`) with arguments "…"`; the steps that failed are counted apart (`1 step done and 1
/// failed`), so that a failed step is not read as done.
fn stack_line(
    text: &mut String,
    depth: usize,
    name: &str,
    compiled: bool,
    steps: &[crate::engine::step::StepRecord],
    dir: &str,
    request: &str,
) {
    let kind = if compiled { "compiled" } else { "NL" };
    let failed = steps.iter().filter(|s| !s.result.success).count();
    let done = steps.len() - failed;
    let steps = match (done, failed) {
        (_, 0) => format!("{} done", count(done, "step")),
        (0, _) => format!("{} failed", count(failed, "step")),
        _ => format!("{} done and {failed} failed", count(done, "step")),
    };
    let _ = write!(
        text,
        "{}. `{name}` ({kind}, {steps}, in `{dir}`)",
        depth + 1,
    );
    if !request.is_empty() {
        let shown = crate::display::clipped(request, crate::display::SHOWN_ARGUMENTS);
        let _ = write!(text, " with arguments {}", quote(&shown));
    }
    text.push('\n');
}

/// `status` of run `id` (named by `handle`) that no session of this server holds, read from
/// its journal (`history`, in `state`) without taking it: the stack, and what the journal
/// says the run waits for.
pub(crate) fn read_status(
    id: &str,
    handle: &str,
    history: &RunHistory,
    state: RunState,
    cwd: &Path,
) -> String {
    let mut text = String::from("## Status\n\n");
    let Some(top) = history.frames.last() else {
        let _ = writeln!(
            text,
            "Run `{id}` has ended: {state}. Nothing is pending: do not call \
             `continue_compiled_script` or `finish_nl_script` for it again."
        );
        return text;
    };
    let driven = state == RunState::Active;
    let _ = writeln!(
        text,
        "Run `{id}`, handle `{handle}`, read from its journal: {}. The stack, outermost \
         first:\n",
        if driven {
            "another mekara process (another server, or `mekara run`) drives it now, and this \
             server only reads it"
        } else {
            "no process drives it now"
        }
    );
    for (depth, frame) in history.frames.iter().enumerate() {
        stack_line(
            &mut text,
            depth,
            &crate::script::name::shown(&frame.push.script),
            frame.push.compiled,
            &frame.steps,
            &shown_dir(&frame.push.working_dir, cwd),
            &frame.push.request,
        );
    }
    text.push('\n');
    let script = crate::script::name::shown(&top.push.script);
    if let Some(error) = &top.failure {
        let _ = writeln!(
            text,
            "The script `{script}` failed, and the run waits for it to be finished by hand:\n\n\
             <error>\n{}</error>\n",
            with_newline(error)
        );
    } else if let Some(ask) = top.waiting_question() {
        let _ = writeln!(
            text,
            "The run waits for the user's answer to a question of `{script}`:\n\n\
             <question>\n{}</question>\n",
            with_newline(&ask.question)
        );
    } else if !top.push.compiled {
        let _ = writeln!(
            text,
            "The run waits for the agent to follow the NL script `{script}` and call \
             `finish_nl_script`.\n"
        );
    } else if let Some(handed) = top.waiting_llm() {
        let _ = writeln!(
            text,
            "The run waits for the agent to do the llm step `{script}[{}]`, whose instructions \
             begin:\n\n<prompt>\n{}</prompt>\n",
            handed.index,
            with_newline(&handed.prompt)
        );
    } else {
        let _ = writeln!(
            text,
            "The journal does not say which step of `{script}` comes next (an llm step, or an \
             auto step that has not run yet).\n"
        );
    }
    if driven {
        let _ = writeln!(
            text,
            "Go on with it where it is driven: the last reply there shows its pending item and \
             the call to make. Calls here that go on with it are refused until that process \
             lets it go; then {} takes it up here.",
            resume_call(handle)
        );
    } else if let Some(ask) = top.waiting_question() {
        // The answer is passed on the way a live run's question takes it: one call, which
        // takes the run up here too (a `resume` first would only show the question again).
        let choices = ask.choices.as_deref().map_or(String::new(), |c| {
            format!(
                " (the answer must be one of: {})",
                c.iter().map(|c| quote(c)).collect::<Vec<_>>().join(", ")
            )
        });
        let _ = writeln!(
            text,
            "Ask the user this question, word for word{choices}. When the user has answered, \
             call `continue_compiled_script` with `{{\"run_id\": \"{handle}\", \"outputs\": \
             {{\"answer\": \"<the user's answer>\"}}}}`, which takes the run up here. Never \
             answer the question yourself."
        );
    } else {
        let _ = writeln!(
            text,
            "Call {} to take it up here and see its pending item{}.",
            resume_call(handle),
            if top.failure.is_some() {
                " (the NL instructions to finish by hand, or, once the cause is fixed, \
                 `retry: true` to run the failed step again)"
            } else {
                ""
            }
        );
    }
    text
}

/// `list_scripts`, which showed `listing`.
pub(crate) fn scripts(entries: &[ScriptEntry], listing: Listing) -> String {
    let demos = match listing {
        Listing::Usual => {
            "The bundled demo scripts (`test:*`) are left out: `list_scripts` with \
             `{\"all\": true}` lists them.\n"
        }
        Listing::All => "",
    };
    if entries.is_empty() {
        return format!("No scripts found.\n{demos}");
    }
    let mut text = String::from(
        "## Scripts\n\nStart one with `start` (`{\"name\": \"<name>\", \"arguments\": \
         \"...\"}`). Compiled scripts run their auto steps themselves; NL scripts are \
         followed by you.\n\n",
    );
    for entry in entries {
        let kind = if entry.compiled { "compiled" } else { "NL" };
        let _ = write!(text, "- `{}` ({kind}, {})", entry.name, entry.level);
        if !entry.description.is_empty() {
            let _ = write!(text, ": {}", entry.description);
        }
        text.push('\n');
    }
    if !demos.is_empty() {
        text.push('\n');
        text.push_str(demos);
    }
    text
}

/// A run a server holds that waits for a call.
pub(crate) struct LiveRun {
    /// Its id (not its handle: the agent that started it has that).
    pub id: String,
    /// Its root script.
    pub script: String,
    /// What it waits for, in words.
    pub waiting: &'static str,
}

/// `resume` without an id: the runs a restart interrupted, oldest first in `runs`, and the
/// runs this server holds that wait for a call, in `live`.
pub(crate) fn interrupted_runs(runs: &[RunSummary], live: &[LiveRun]) -> String {
    let mut text = String::new();
    if !live.is_empty() {
        text.push_str(
            "## Runs in progress\n\nThese runs are live in this server and need no `resume`: go \
             on with one by passing its handle (`<run id>.<token>`, as its `start` reply gave \
             it) as `run_id`; `status` with it shows its pending item again.\n\n",
        );
        text.push_str(&live_runs(live));
        text.push('\n');
    }
    if runs.is_empty() {
        text.push_str(if live.is_empty() {
            "## Interrupted runs\n\nNone: no run is waiting to be resumed. Call `start` to \
             run a script.\n"
        } else {
            "## Interrupted runs\n\nNone.\n"
        });
        return text;
    }
    let _ = write!(
        text,
        "## Interrupted runs\n\nNewest first. Call {} to take one up again, with the whole \
         handle the run's `start` reply gave (a run started over MCP is refused by its id \
         alone; one started in a terminal with `mekara run` is taken up by its id); auto \
         steps that finished do not run again.\n\n",
        resume_call("<run id>.<token>")
    );
    for run in runs.iter().rev() {
        let _ = writeln!(
            text,
            "- `{}`: `{}`, {} done, started {}",
            run.id,
            run.script,
            count(run.steps, "step"),
            format_time(run.started_at)
        );
    }
    text
}

/// The first lines of `resume(run_id)` when it took run `id` up from its journal; `torn`
/// is the record a crash left half-written.
pub(crate) fn resumed(id: &str, torn: Option<&TornTail>) -> String {
    let mut text = String::new();
    let _ = writeln!(text, "Resumed run `{id}`.");
    if let Some(torn) = torn {
        let _ = writeln!(
            text,
            "The run's last record was torn ({} bytes at byte {}): mekara stopped mid-write; \
             that step runs again.",
            torn.len, torn.offset
        );
    }
    text.push('\n');
    text
}

/// What a retry or rewind did to the run, before its reply goes on.
pub(crate) fn rewound(plan: &RewindPlan) -> String {
    format!("{}\n", plan.summary())
}

/// The first lines of `resume` with `answer`, which is kept for the agents that answer this
/// way: the one way to answer, named for next time.
pub(crate) const ANSWERED_BY_RESUME: &str = "Answer given. Next time, pass the user's answer \
     with `continue_compiled_script` and `{\"run_id\": …, \"outputs\": {\"answer\": …}}`, as \
     the question's reply says: it takes a run up too, and `answer` of `resume` is kept only for \
     agents that already use it.\n\n";

/// The first lines of `resume(run_id)` for a run this server holds already.
pub(crate) fn resumed_same(id: &str) -> String {
    format!("Run `{id}` is this session's run; going on.\n\n")
}

/// The refusal of `resume(run_id)` when the run cannot be taken up.
pub(crate) fn resume_refused(error: &EngineError) -> String {
    let hint = match error {
        EngineError::RunNotFound { .. } => {
            " Call `resume` without arguments to list the interrupted runs."
        }
        EngineError::Handle { .. } => HANDLE_HINT,
        _ => "",
    };
    refused(
        &format!("{}{hint}", sentence(&error.to_string())),
        Unchanged::Everything,
    )
}

/// What to do about a handle that does not open a run.
const HANDLE_HINT: &str = " Pass the run's whole handle as `run_id`, exactly as the reply of its \
     `start` gave it; `status` without `run_id` lists the open runs. A person can take any run \
     up in a terminal with `mekara run --resume <id>`.";

/// The refusal of a call whose `run_id` (or `parent`) names no run it can drive: not found,
/// finished, held elsewhere, or a handle that is not the run's.
pub(crate) fn handle_refused(tool: AgentTool, error: &EngineError) -> String {
    let hint = match error {
        EngineError::Handle { .. } | EngineError::RunNotFound { .. } => HANDLE_HINT,
        EngineError::RunFinished { .. } => {
            " Its last reply said how it ended; `status` without `run_id` lists the runs still \
             open. Call `start` to run a script again."
        }
        _ => "",
    };
    refused(
        &format!(
            "`{}` cannot go on with that run: {}{hint}",
            tool.name(),
            sentence(&error.to_string())
        ),
        Unchanged::Everything,
    )
}

/// `status` (or a call that needs a run) on a connection that drives none: the open runs of
/// the project, newest first, each with its state.
pub(crate) fn open_runs(runs: &[RunSummary]) -> String {
    let mut text = String::from(
        "## Status\n\nNo run is named and this connection drives none. The project's open \
         runs, newest first; pass a run's handle (from the reply of the `start` that began \
         it) as `run_id` to go on with it:\n\n",
    );
    for run in runs.iter().rev() {
        let _ = writeln!(
            text,
            "- `{}`: `{}`, {}, {} done, started {}",
            run.id,
            run.script,
            run.state,
            count(run.steps, "step"),
            format_time(run.started_at)
        );
    }
    let _ = writeln!(text, "\nOr: {START_A_SCRIPT}.");
    text
}

/// The refusal of `continue_compiled_script` or `finish_nl_script` without `run_id` on a
/// connection that drives no run, while the project has open runs.
pub(crate) fn no_run_named(tool: AgentTool, runs: &[RunSummary]) -> String {
    let mut reason = format!(
        "`{}` needs `run_id`: this connection drives no run. Pass the handle the reply of \
         `start` gave (`<run id>.<token>`). The project's open runs:\n",
        tool.name()
    );
    for run in runs.iter().rev() {
        let _ = writeln!(
            reason,
            "- `{}`: `{}`, {}, {} done",
            run.id,
            run.script,
            run.state,
            count(run.steps, "step")
        );
    }
    refused(reason.trim_end(), Unchanged::Everything)
}

/// The runs a connection drives that wait for a call (newest first), as a list: `- \`id\`:
/// \`script\`, waiting for …`.
fn live_runs(runs: &[LiveRun]) -> String {
    let mut text = String::new();
    for run in runs {
        let _ = writeln!(
            text,
            "- `{}`: `{}`, waiting for {}",
            run.id, run.script, run.waiting
        );
    }
    text
}

/// How to name one of the runs a connection drives.
const NAME_THE_RUN: &str = "pass the run's handle (`<run id>.<token>`, as the reply of its \
     `start` gave it; on this connection its id alone does too) as `run_id`";

/// `status` without `run_id` on a connection that drives several runs that wait (`runs`,
/// newest first): which they are.
pub(crate) fn driven_runs(runs: &[LiveRun]) -> String {
    format!(
        "## Status\n\nThis connection drives {} runs that wait for you. To see one's stack and \
         pending item, call `status` with its `run_id`; in every call for a run, {NAME_THE_RUN}. \
         The runs, newest first:\n\n{}",
        runs.len(),
        live_runs(runs)
    )
}

/// The refusal of a call without `run_id` on a connection that drives several runs that
/// wait (`runs`, newest first): mekara does not guess which one the agent means.
pub(crate) fn which_run(tool: AgentTool, runs: &[LiveRun]) -> String {
    let which = if runs.len() == 2 {
        "either"
    } else {
        "any of them"
    };
    let reason = format!(
        "`{}` needs `run_id`: this connection drives {} runs that wait for you, and the call \
         could be for {which}. Call it again and {NAME_THE_RUN}. The runs, newest first:\n{}",
        tool.name(),
        runs.len(),
        live_runs(runs)
    );
    refused(reason.trim_end(), Unchanged::Everything)
}

/// The note after a reply whose run ended while run `handle`, which this connection started
/// before it, still waits (for `pending`, shown again): later calls without `run_id` go to
/// that one again.
pub(crate) fn still_waiting(handle: &str, pending: Option<&Pending>) -> String {
    match pending {
        Some(pending) if !matches!(pending, Pending::Finished { .. }) => format!(
            "\nRun `{handle}`, started before this one, still waits for you. Go on with it: \
             its pending item, repeated from its last reply:\n\n{}",
            self::pending(pending, None, Some(handle))
        ),
        _ => format!(
            "\nRun `{handle}`, started before this one, still waits for you: call `status` with \
             `{{\"run_id\": {}}}` to see its pending step.\n",
            quote(handle)
        ),
    }
}

/// `eject_script`: the files written, relative to the project's `root`.
pub(crate) fn ejected(ejected: &Ejected, root: &Path) -> String {
    let mut text = format!(
        "Copied the bundled script `{}` into the project:\n\n",
        ejected.name
    );
    for file in &ejected.files {
        let _ = writeln!(
            text,
            "- `{}`",
            file.strip_prefix(root).unwrap_or(file).display()
        );
    }
    text.push_str("\nChange it there: the project's copy now wins over the bundled one.\n");
    text
}

/// The refusal of `eject_script`.
pub(crate) fn eject_refused(error: &EjectError) -> String {
    let hint = match error {
        EjectError::Exists { .. } => "; overwrite it with `force: true`, or edit it in place",
        _ => "",
    };
    refused(&format!("{error}{hint}."), Unchanged::Files)
}

// ---------------------------------------------------------------------------------------
// The handler's own words

/// The server's instructions, given at `initialize`.
pub(crate) const INSTRUCTIONS: &str = "mekara runs workflow scripts. When the user asks for a script \
     (`/name args`), call `start`; then do exactly the one pending item each reply names, and \
     make the call it names (`continue_compiled_script` for an llm step, `finish_nl_script` \
     only when a whole NL script is done). Each reply gives the run's handle \
     (`<run id>.<token>`): pass it as `run_id` in every call for that run.";

/// A step starting, for progress notifications: `test:random[0] $ shuf -i 1-100 -n 1`.
impl Display for StepStarted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let StepStarted {
            frame,
            index,
            input,
        } = *self;
        write!(f, "{} {}", step_path(frame, index), input.summary())
    }
}

/// A line the running step wrote, for progress notifications.
pub(crate) fn progress_line(step: &str, line: &str) -> String {
    format!("{step}: {line}")
}

/// The `tools/call` error for a tool mekara does not have.
pub(crate) fn unknown_tool(name: &str) -> String {
    format!(
        "unknown tool `{}`; mekara's tools are {}",
        crate::display::echoed(name),
        quoted(tools::ALL.map(AgentTool::name))
    )
}

/// The description of every prompt's one argument.
pub(crate) const PROMPT_ARGUMENT: &str = "Replaces `$ARGUMENTS` in the script's instructions.";

/// What mekara's plugin says, as its server's instructions and to any call, in a project
/// that sets its own `mekara` server up in `file`.
pub(crate) fn stood_down(file: &Path) -> String {
    format!(
        "mekara's Claude Code plugin offers no tools here: `{}` sets this project's own `mekara` \
         server up, so use that server's tools (`mcp__mekara__start` and the others). If they \
         are missing, approve the `mekara` server in `/mcp`.",
        file.display()
    )
}

/// The `prompts/get` error for a script that does not exist.
pub(crate) fn prompt_not_found(name: &str) -> String {
    format!("prompt `{name}` not found; `prompts/list` lists the prompts there are")
}

/// The `prompts/get` error for an `arguments` that is not a string.
pub(crate) const PROMPT_ARGUMENT_NOT_STRING: &str = "prompt argument `arguments` must be a string";

/// The `prompts/get` error for an argument other than `arguments`.
pub(crate) fn prompt_unknown_argument(prompt: impl Display, argument: &str) -> String {
    format!("prompt `{prompt}` has no argument `{argument}`: it takes `arguments`")
}

// ---------------------------------------------------------------------------------------
// Tool names as the client's model sees them

/// The blocks in which a text quotes scripts and steps (`<output>`, `<instructions>`, ...):
/// [`for_client`] leaves what is inside them as it is.
const QUOTED_BLOCKS: [&str; 5] = [
    "output",
    "nl-source",
    "instructions",
    "error",
    "called-script-instructions",
];

/// `text`, one of the texts above, with each mention of one of mekara's tools
/// (`` `start` ``) naming it as `client`'s model sees it (`` `mcp__mekara__start` `` in
/// Claude Code, `` `mekara_start` `` in OpenCode): a model that is told to call a tool
/// by a name it was not offered may not find it. The texts are written with the tools' own
/// names, so that every text, including one added later, goes through this one place;
/// what they quote from scripts and steps is left as it is.
pub(crate) fn for_client(text: &str, client: AgentClient) -> String {
    if client.is_other() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some((start, end)) = next_quoted_block(rest) {
        out.push_str(&name_tools(&rest[..start], client));
        out.push_str(&rest[start..end]);
        rest = &rest[end..];
    }
    out.push_str(&name_tools(rest, client));
    out
}

/// Where the first quoted block of `text` starts and ends (after its closing tag, or at the
/// end of the text when it has none).
fn next_quoted_block(text: &str) -> Option<(usize, usize)> {
    QUOTED_BLOCKS
        .iter()
        .filter_map(|tag| {
            let open = format!("<{tag}");
            let start = text
                .match_indices(&open)
                .map(|(i, _)| i)
                .find(|i| matches!(text[i + open.len()..].chars().next(), Some('>' | ' ')))?;
            let close = format!("</{tag}>");
            let end = text[start..]
                .find(&close)
                .map_or(text.len(), |i| start + i + close.len());
            Some((start, end))
        })
        .min_by_key(|(start, _)| *start)
}

/// `text` with each `` `tool` `` named as `client` names it.
fn name_tools(text: &str, client: AgentClient) -> String {
    let mut text = text.to_string();
    for tool in tools::ALL {
        let mention = format!("`{}`", tool.name());
        if text.contains(&mention) {
            text = text.replace(&mention, &format!("`{}`", client.tool_name(tool)));
        }
    }
    text
}
