//! The "steps executed" part of a reply to a call that moved a run: each step with its result
//! and output, older outputs cut shorter when the part would pass [`STEPS_BUDGET`].

use std::fmt::Write as _;

use serde_json::{Map, Value as Json};

use super::clip::{HEAD_LINES, TAIL_LINES, clip_line, indent, shorten};
use super::{compact, quote, step_path};
use crate::agents::history::CallEvent;
use crate::engine::step::{StepInput, StepRecord};

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
