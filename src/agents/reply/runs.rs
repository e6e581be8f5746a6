//! Which run a call is for: `resume` (the runs a restart interrupted, resumed or rewound runs),
//! the handle a call must pass, and the runs a server holds.

use std::fmt::Write as _;

use super::pending::pending;
use super::{START_A_SCRIPT, Unchanged, quote, refused, resume_call, sentence};
use crate::agents::tools::AgentTool;
use crate::display::{count, format_time};
use crate::engine::journal::TornTail;
use crate::engine::runs::RunSummary;
use crate::engine::{EngineError, Pending, RewindPlan};

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
