//! How an unattended run ended ([`End`]): its state in the summary, what it said, its exit
//! code, and whether it can be resumed.

use crate::exit::Exit;

/// How an unattended run ended, for the summary.
#[derive(Debug, Clone, PartialEq)]
pub(in crate::cli) enum End {
    Completed,
    /// A step failed and the script fell back; the agent finished it.
    FellBack,
    /// A limit stopped it before an agent step.
    Limit(String),
    /// A spend cap was reached before an agent step: the run waits for a person to raise
    /// it or stop the run (`mekara answer`).
    Paused(String),
    /// The agent could not finish an NL script or fallback, or mekara refused what came.
    Failed(String),
    /// A step failed, and the run stopped there (`--fallback stop`).
    StepFailed(String),
    /// The script asked the person a question (`ask`): the run waits for `mekara answer`.
    Waiting(String),
    /// The script stopped itself (`fail()`), and with it the run; `retry` when it stopped on
    /// a step that failed (a retry after the fix runs it again).
    Stopped {
        why: String,
        retry: bool,
    },
    Interrupted,
}

impl End {
    /// Its name in the JSON summary (`completed`, `waiting`, ...).
    pub(in crate::cli) fn state(&self) -> &'static str {
        match self {
            End::Completed => "completed",
            End::FellBack => "fell_back",
            End::Limit(_) => "stopped",
            End::Failed(_) | End::StepFailed(_) => "failed",
            End::Waiting(_) | End::Paused(_) => "waiting",
            End::Stopped { .. } => "stopped_by_script",
            End::Interrupted => "interrupted",
        }
    }

    /// What the run said when it did not end as asked: why it stopped, what it waits for.
    pub(in crate::cli) fn why(&self) -> Option<&str> {
        match self {
            End::Limit(why)
            | End::Paused(why)
            | End::Failed(why)
            | End::StepFailed(why)
            | End::Waiting(why)
            | End::Stopped { why, .. } => Some(why),
            End::Completed | End::FellBack | End::Interrupted => None,
        }
    }

    pub(super) fn exit(&self) -> Exit {
        match self {
            End::Completed => Exit::Success,
            End::Interrupted => Exit::Interrupted,
            End::FellBack
            | End::Limit(_)
            | End::Failed(_)
            | End::StepFailed(_)
            | End::Stopped { .. }
            | End::Waiting(_)
            | End::Paused(_) => Exit::Failure,
        }
    }

    pub(super) fn resumable(&self) -> bool {
        matches!(
            self,
            End::Limit(_)
                | End::Paused(_)
                | End::Failed(_)
                | End::StepFailed(_)
                | End::Waiting(_)
                | End::Interrupted
        )
    }
}
