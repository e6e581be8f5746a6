//! `EngineError`: why the engine refused or could not go on.
//!
//! A failing *step* is not an error: it is a result, and the frame falls back to its NL
//! instructions. These are the cases where the caller asked for something the run cannot do,
//! or the run's files cannot be trusted.

use super::journal::{JournalError, StoreFailure};
use crate::exit::Exit;
use crate::script::ScriptError;

/// What the engine is waiting for, named in errors about wrong calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waiting {
    /// Outputs of an llm step.
    LlmStep,
    /// The agent to finish an NL script by hand.
    NlScript,
    /// The agent to finish a failed compiled script by hand.
    Fallback,
    /// The person's answer to a question (`ask`).
    Answer,
    /// Nothing: no script is running.
    Nothing,
}

/// Why the engine refused or could not go on.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineError {
    /// The script could not be found or read.
    #[error(transparent)]
    Script(#[from] ScriptError),
    /// The run's journal could not be read or written.
    #[error(transparent)]
    Journal(#[from] JournalError),
    /// Replaying the journal, a step asked for something other than what was recorded.
    #[error(
        "script `{script}` changed since this run recorded its step {index}: {detail}; restore the script and the helper modules it loads as they were, go on from the change with `--retry` (`mekara run --resume ID --retry`; MCP: `resume` with `retry: true`), or start a new run"
    )]
    Diverged {
        /// The frame's stack path.
        script: String,
        /// The step index in that frame.
        index: usize,
        /// What differs.
        detail: String,
    },
    /// The process that evaluated a script stopped before the evaluation ended, for a
    /// reason that is not the script's (see `compiled::child`); the run is left as it was.
    #[error(
        "the evaluation of `{script}` stopped: {detail}; the run is kept as it was, and can be resumed"
    )]
    Evaluation {
        /// The frame's stack path.
        script: String,
        /// What happened.
        detail: String,
    },
    /// A running step was cancelled; the run is left as it was before the step.
    #[error("cancelled while step {index} of `{script}` was running; the run can be resumed")]
    Cancelled {
        /// The frame's stack path.
        script: String,
        /// The step index in that frame.
        index: usize,
    },
    /// The call does not fit what the run is waiting for.
    #[error("{}", wrong_call(*.expected, *.waiting))]
    WrongCall {
        /// What the call would have finished.
        expected: Waiting,
        /// What the run is waiting for.
        waiting: Waiting,
    },
    /// An llm step's outputs do not match its `expects`.
    #[error("{}", outputs_message(.missing, .unexpected, .expected))]
    Outputs {
        /// Expected names that were not given.
        missing: Vec<String>,
        /// Given names that were not expected.
        unexpected: Vec<String>,
        /// Every expected name.
        expected: Vec<String>,
    },
    /// A value from outside cannot be given to a script (a number no script can hold, or
    /// nesting too deep); it was not journaled.
    #[error("{detail}; the step is still pending")]
    Unfit {
        /// What is wrong, e.g. "output `n` at `.a[2]` is the number `1e400`, ...".
        detail: String,
    },
    /// A value from outside is larger than a step keeps
    /// ([`MAX_KEPT`](super::step::MAX_KEPT)); it was not journaled.
    #[error("{detail}; the step is still pending")]
    Oversize {
        /// What is too large, and the limit ([`super::step::too_large`]).
        detail: String,
    },
    /// A script's arguments are longer than a run keeps.
    #[error(
        "the script's arguments are {bytes} bytes, more than the {limit} bytes a run keeps; pass a file's path instead of its text"
    )]
    ArgumentsTooLong {
        /// Their length.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// Starting another script would nest scripts deeper than the limit.
    #[error(
        "scripts are nested {limit} deep ({path}); the limit is {limit}: finish a script before starting another"
    )]
    TooDeep {
        /// The stack path.
        path: String,
        /// The limit.
        limit: usize,
    },
    /// No run has this id.
    #[error("run `{id}` not found")]
    RunNotFound {
        /// The id asked for.
        id: String,
    },
    /// The run has ended; there is nothing to resume.
    #[error("{}", run_finished(.id, .stopped.as_ref()))]
    RunFinished {
        /// The id.
        id: String,
        /// What its script gave `fail()` and what can go on, when the script stopped itself.
        stopped: Option<StopAdvice>,
    },
    /// The handle given does not open the run.
    #[error("{}", handle_refused(.id, *.problem))]
    Handle {
        /// The run named.
        id: String,
        /// What is wrong with the handle.
        problem: super::handle::HandleProblem,
    },
    /// A run id from outside (a cassette) that is not a plain file name.
    #[error(
        "`{id}` is not a run id (ASCII letters, digits, `-` and `_`, at most 64); no run was created"
    )]
    BadRunId {
        /// The id.
        id: String,
    },
    /// The run was stopped before its script started, so which script it was is unknown.
    #[error(
        "run `{id}` was stopped before its script started: nothing of it ran, so there is nothing to resume; start the script again"
    )]
    RunNotStarted {
        /// The id.
        id: String,
    },
    /// The folder a script should run in is not there.
    #[error("working_dir `{}` is not a folder", .path.display())]
    BadWorkingDir {
        /// The folder.
        path: std::path::PathBuf,
    },
    /// `--retry` on a run where no step failed and no script changed.
    #[error(
        "run `{id}` has nothing to retry: no step failed, and its scripts ask for the steps it recorded; to run steps again anyway, name the first with `--from STEP` (MCP: `from`), as `mekara runs show {id}` lists them"
    )]
    NothingToRetry {
        /// The run.
        id: String,
    },
    /// `--retry` on a run that its script stopped on a decision (`fail()` after a person's
    /// "no"), not on a failed step: a retry would stop again.
    #[error(
        "run `{id}` was stopped by its script `{script}` ({message}), not by a failed step, so a retry would only stop again; to give a different answer, run again from that step with `--from STEP` (MCP: `from`), as `mekara runs show {id}` lists them, or start a new run"
    )]
    StoppedByScript {
        /// The run.
        id: String,
        /// The script that stopped itself.
        script: String,
        /// What it gave `fail()`.
        message: String,
    },
    /// `--from` names no recorded step of the run.
    #[error("run `{id}` has no recorded step `{step}`; its steps are {steps}")]
    NoSuchStep {
        /// The run.
        id: String,
        /// The label given.
        step: String,
        /// The run's steps, as runs of labels.
        steps: String,
    },
    /// `--from` names a step by a label more than one frame has.
    #[error("more than one frame has a step `{step}`: name it with its callers, as one of {}", .paths.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", "))]
    AmbiguousStep {
        /// The label given.
        step: String,
        /// The whole labels it could mean.
        paths: Vec<String>,
    },
    /// `mekara answer` for a run that is not waiting for an answer.
    #[error(
        "run `{id}` is not waiting for an answer: no question of it is pending; `mekara runs show {id}` shows where it stands"
    )]
    NotWaitingForAnswer {
        /// The run.
        id: String,
    },
    /// An answer that is not one of the question's choices.
    #[error(
        "`{given}` is not one of the choices ({}); answer with one of them, as written or by its number; the question is still pending",
        crate::display::quoted(.choices)
    )]
    NotAChoice {
        /// The answer given.
        given: String,
        /// The choices.
        choices: Vec<String>,
    },
    /// There is no folder to keep runs in.
    #[error(
        "no folder for runs: not inside a project (a folder with `.mekara/` or `.claude/`) and `HOME` is not set"
    )]
    NoRunsDir,
}

impl EngineError {
    /// How a command that ends with this error exits: the caller asked for something that
    /// is not there ([`Exit::Usage`]), the run could not go on ([`Exit::Failure`]), or it
    /// was cut short and resumes ([`Exit::Interrupted`]).
    pub(crate) fn exit_code(&self) -> Exit {
        match self {
            EngineError::Script(e) => e.exit_code(),
            EngineError::RunNotFound { .. }
            | EngineError::RunFinished { .. }
            | EngineError::Handle { .. }
            | EngineError::RunNotStarted { .. }
            | EngineError::BadRunId { .. }
            | EngineError::BadWorkingDir { .. }
            | EngineError::NothingToRetry { .. }
            | EngineError::StoppedByScript { .. }
            | EngineError::NoSuchStep { .. }
            | EngineError::AmbiguousStep { .. }
            | EngineError::NotWaitingForAnswer { .. }
            | EngineError::NoRunsDir
            | EngineError::Journal(JournalError::Store(StoreFailure { usage: true, .. })) => {
                Exit::Usage
            }
            EngineError::Journal(_)
            | EngineError::Diverged { .. }
            | EngineError::Cancelled { .. }
            | EngineError::WrongCall { .. }
            | EngineError::Outputs { .. }
            | EngineError::Unfit { .. }
            | EngineError::Oversize { .. }
            | EngineError::NotAChoice { .. }
            | EngineError::ArgumentsTooLong { .. }
            | EngineError::TooDeep { .. } => Exit::Failure,
            // The run was cut short, not refused (an evaluator child killed, say by the
            // OOM killer): it resumes, as after Ctrl-C.
            EngineError::Evaluation { .. } => Exit::Interrupted,
        }
    }
}

fn handle_refused(id: &str, problem: super::handle::HandleProblem) -> String {
    match problem {
        super::handle::HandleProblem::Missing => {
            format!(
                "run `{id}` is driven through its whole handle (`{id}.<token>`), not its id alone"
            )
        }
        super::handle::HandleProblem::Wrong => {
            format!("the handle given for run `{id}` is not that run's")
        }
    }
}

impl Waiting {
    /// What is waited for, in words: "the outputs of an llm step".
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Waiting::LlmStep => "the outputs of an llm step",
            Waiting::NlScript => "the agent to finish an NL script",
            Waiting::Fallback => "the agent to finish a failed script by hand",
            Waiting::Answer => "the person's answer to a question",
            Waiting::Nothing => "nothing: no script is running",
        }
    }
}

fn wrong_call(expected: Waiting, waiting: Waiting) -> String {
    let what = Waiting::describe;
    format!(
        "this call gives {}, but the run is waiting for {}",
        what(expected),
        what(waiting)
    )
}

fn outputs_message(missing: &[String], unexpected: &[String], expected: &[String]) -> String {
    let list = |names: &[String]| {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("missing outputs: {}", list(missing)));
    }
    if !unexpected.is_empty() {
        parts.push(format!("unexpected outputs: {}", list(unexpected)));
    }
    let expected = if expected.is_empty() {
        "no outputs (pass an empty object)".to_string()
    } else {
        list(expected)
    };
    format!(
        "{}; the step expects {expected}; the step is still pending",
        parts.join("; ")
    )
}

/// What a person can do with a run that its script stopped (`fail()`), for the refusal of a
/// plain resume, which has nothing to go on with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StopAdvice {
    /// The script that stopped itself.
    pub script: String,
    /// What it gave `fail()`.
    pub message: String,
    /// What can go on from the stop.
    pub next: AfterStop,
}

/// How a stopped run can go on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AfterStop {
    /// It stopped right after a step whose failure it allowed: `--retry` runs that step
    /// again (or, when a script changed, goes on from the first changed step).
    Retry {
        /// The step that runs again.
        step: String,
    },
    /// It stopped on a decision: only `--from` a recorded step makes it go on differently.
    From {
        /// The last step recorded before the stop, when there is one.
        last: Option<String>,
    },
}

/// The refusal to resume run `id`, which has ended: a run its script stopped says so, with
/// the script's message and what can still go on from there.
fn run_finished(id: &str, stopped: Option<&StopAdvice>) -> String {
    let Some(stop) = stopped else {
        return format!("run `{id}` has already finished; there is nothing to resume");
    };
    let (script, message) = (&stop.script, stop.message.trim_end());
    let next = match &stop.next {
        AfterStop::Retry { step } => format!(
            "it stopped after a failure it read, so once the cause is fixed, `mekara run --resume {id} --retry` (MCP: `retry`) runs step `{step}` again"
        ),
        AfterStop::From { last: Some(last) } => format!(
            "it stopped on a decision, so a retry would only stop again; to go on differently, run it again from a step with `mekara run --resume {id} --from STEP` (MCP: `from`), e.g. `--from {last}` for its last step before the stop, or start a new run"
        ),
        AfterStop::From { last: None } => {
            "it stopped before it recorded a step, so start a new run".to_string()
        }
    };
    format!(
        "run `{id}` was stopped by its script `{script}`: {message}; there is nothing to resume as it is: {next}"
    )
}
