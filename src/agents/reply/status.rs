//! The tools that only read (`status`, `list_scripts`) and `eject_script`.

use std::fmt::Write as _;
use std::path::Path;

use super::pending::pending;
use super::{
    START_A_SCRIPT, Unchanged, question_block, quote, refused, resume_call, shown_dir, with_newline,
};
use crate::display::count;
use crate::engine::Pending;
use crate::engine::executor::Frame;
use crate::engine::runs::{RunHistory, RunState};
use crate::script::eject::{EjectError, Ejected};
use crate::script::{Listing, ScriptEntry};

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
            "The run waits for the user's answer to a question of `{script}`:\n\n{}",
            question_block(&ask.question, ask.choices.as_deref())
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
        let choices = if ask.choices.is_some() {
            " (the answer must be one of its choices, as written)"
        } else {
            ""
        };
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
