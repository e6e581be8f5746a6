//! How an evaluation ends ([`Evaluation`]) or a direct call of a function ([`Called`]):
//! completed, failed, or suspended where the frame needs the agent, another script or a
//! person ([`Suspension`], [`Task`]). What the executor, the evaluator child's protocol and
//! the step context all speak.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use crate::engine::step::StepInput;

/// Where a suspended evaluation stopped: what the frame needs before it can go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Suspension {
    /// The agent must do an llm step.
    Llm {
        /// The instruction.
        prompt: String,
        /// The outputs it must give, with their descriptions.
        expects: Option<Map<String, Json>>,
    },
    /// Another script must run as a nested frame.
    Call {
        /// Its name as written.
        script: String,
        /// Its arguments.
        request: String,
        /// The folder it runs in.
        working_dir: std::path::PathBuf,
        /// Whether its failure goes to the caller, which goes on.
        allow_failure: bool,
    },
    /// The person must answer a question (`ask`).
    Ask {
        /// The question.
        question: String,
        /// The answers it takes, when it takes only some.
        choices: Option<Vec<String>>,
        /// How long after it is asked an answer may come.
        timeout: Option<Duration>,
        /// Whether a timed-out answer goes to the script as a failed result.
        allow_failure: bool,
    },
}

impl Suspension {
    /// What the journal records for this step once it is answered.
    pub(crate) fn input(&self) -> StepInput {
        match self {
            Suspension::Llm { prompt, expects } => StepInput::Llm {
                prompt: prompt.clone(),
                expects: expects.clone(),
            },
            Suspension::Call {
                script,
                request,
                working_dir,
                ..
            } => StepInput::Call {
                script: script.clone(),
                request: request.clone(),
                working_dir: working_dir.clone(),
            },
            Suspension::Ask {
                question, choices, ..
            } => StepInput::Ask {
                question: question.clone(),
                choices: choices.clone(),
            },
        }
    }
}

/// An llm step that a member of a `parallel` group stopped at: one of the independent
/// tasks the group waits for (see `parallel`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Task {
    /// The member that asks, from 0: its answer is journaled tagged with it.
    pub member: usize,
    /// The instruction.
    pub prompt: String,
    /// The outputs it must give, with their descriptions.
    pub expects: Option<Map<String, Json>>,
}

/// How an evaluation ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Evaluation {
    /// The frame waits for the agent or a nested script.
    Suspended(Suspension),
    /// The frame waits for the llm steps the members of the `parallel` group at step
    /// position `group` stopped at, in the members' order; `max` is the group's own bound
    /// on what runs at once.
    Tasks {
        group: usize,
        max: usize,
        tasks: Vec<Task>,
    },
    /// `execute` returned.
    Completed,
    /// A step failed without `allow_failure`, or the script raised an error.
    Failed(String),
    /// The script stopped itself: it called `fail(message)` outside a function step (after
    /// a person's "no", say). The run ends there; nobody finishes it by hand.
    Stopped(String),
}

/// How a [`DirectCall`] ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Called {
    /// The function returned this value (`None` as `null`).
    Returned(Json),
    /// A step asked for the agent or another script.
    Suspended(Suspension),
    /// A step failed without `allow_failure`, or the function raised an error (with its
    /// traceback).
    Failed(String),
}
