//! `Observer`: how the engine tells its caller what is happening while it works.

use super::step::{ParallelMember, StepInput, StepRecord};

/// Receives steps as they run: the terminal prints them live, the MCP server turns them
/// into progress notifications and into the "steps executed" part of its reply.
///
/// Replayed steps (answered from the journal) are not reported: they ran before.
pub(crate) trait Observer {
    /// A new step of frame `frame` (a stack path such as `test:nested[0] > test:random`)
    /// starts; `recorded` is what its record will say besides its input and context (the
    /// evaluator child tells it its parent, which journals the step itself should the child
    /// die before it does).
    fn step_started(
        &self,
        _frame: &str,
        _index: usize,
        _input: &StepInput,
        _context: Option<&str>,
        _recorded: Recorded,
    ) {
    }

    /// The running step wrote `chunk`.
    fn output(&self, _chunk: &[u8]) {}

    /// The script of frame `frame` printed `text` outside a function step (where a print is
    /// the step's output). Only new prints are reported: a print a replayed part of the
    /// script makes again was reported when that part first ran. By default it goes to the
    /// log: stdout may belong to a protocol.
    fn print(&self, frame: &str, text: &str) {
        tracing::info!(target: "mekara::print", "{frame}: {text}");
    }

    /// The step finished and was journaled.
    fn step_finished(&self, _frame: &str, _record: &StepRecord) {}

    /// A frame was pushed (`call`) or ended (`end`), for the history of a reply.
    fn frame_event(&self, _event: FrameEvent<'_>) {}
}

/// What a step's record says besides its input, context and result, told as it starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Recorded {
    /// The script said `allow_failure = True`.
    pub allow_failure: bool,
    /// The `parallel` member whose step it is.
    pub parallel: Option<ParallelMember>,
}

/// A change of the stack worth showing.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FrameEvent<'a> {
    /// A script was pushed.
    Pushed {
        /// Its stack path.
        path: &'a str,
    },
    /// A script ended.
    Ended {
        /// Its stack path.
        path: &'a str,
        /// Whether it succeeded.
        success: bool,
        /// It was called with `allow_failure = True`: a failure goes to its caller, which
        /// goes on.
        allow_failure: bool,
    },
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Quiet;

impl Observer for Quiet {}
