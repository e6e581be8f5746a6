//! What the parent and the child say to each other, one line of JSON each: the job
//! ([`Start`]), what the child asks or tells ([`Ask`]), the parent's answers ([`Answer`]),
//! and how an evaluation ended ([`Outcome`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::sources::Sources;
use crate::engine::compiled::{Called, Evaluation, FrameRun, Limits};
use crate::engine::error::EngineError;
use crate::engine::journal::JournalError;
use crate::engine::observer::Recorded;
use crate::engine::runner::{Ran, ShellStep, ToolCall};
use crate::engine::step::{StepInput, StepRecord};

/// The version of what the parent and the child say to each other. Raise it with any change
/// to these messages that an older or newer mekara would misread: a child is started by path
/// where the running binary cannot be kept open (the portable backend), so an upgrade under
/// a long-running server can start a child of another version, and then both must say so
/// rather than misunderstand each other.
pub(super) const PROTOCOL: u32 = 1;

/// The parent's first line: the protocol it speaks, its version (for the message a child of
/// another protocol gives), and the job.
#[derive(Serialize, Deserialize)]
pub(super) struct Opening<J> {
    pub(super) protocol: u32,
    pub(super) mekara: String,
    pub(super) job: J,
}

impl<J> Opening<J> {
    /// `job`, as this mekara opens it.
    pub(super) fn new(job: J) -> Opening<J> {
        Opening {
            protocol: PROTOCOL,
            mekara: env!("CARGO_PKG_VERSION").to_string(),
            job,
        }
    }
}

/// The head of a parent's first line: what a child reads before the job, so that a line
/// of another protocol is refused before its job is misread. (Read from the line itself,
/// not through a `serde_json::Value`, which cannot hold the job's integers past 64 bits.)
#[derive(Deserialize)]
pub(super) struct Heading {
    #[serde(default)]
    protocol: Option<u64>,
    #[serde(default)]
    mekara: Option<String>,
}

impl Heading {
    /// Why a child does not take the job up: it was started by a mekara of another
    /// protocol. `None` when the protocols are the same (the job itself is read after).
    pub(super) fn other_protocol(&self) -> Option<String> {
        if self.protocol == Some(u64::from(PROTOCOL)) {
            return None;
        }
        let mine = env!("CARGO_PKG_VERSION");
        let parent = match (self.protocol, &self.mekara) {
            (Some(protocol), Some(version)) => format!("mekara {version} (protocol {protocol})"),
            (Some(protocol), None) => format!("a mekara of protocol {protocol}"),
            (None, _) => "an older mekara, without a protocol version".to_string(),
        };
        Some(format!(
            "this evaluator is mekara {mine} (protocol {PROTOCOL}) and was started by {parent}: \
             mekara was upgraded or replaced under a server that is still running; restart the \
             server (`mekara mcp`, `mekara serve` or `mekara ui`: restart your agent's session) so \
             that it and its evaluator are the same mekara"
        ))
    }
}

/// What the parent sends first, inside an [`Opening`]: the job.
#[derive(Serialize, Deserialize)]
pub(super) enum Start {
    /// Evaluate a frame of a run.
    Frame(FrameJob),
    /// Call a function of a tool module (`mekara serve`).
    Call(CallJob),
    /// Run a module's top level only, under the memory cap, and say whether it loads
    /// (`mekara check`, and `mekara serve` before it loads its modules itself).
    Load(LoadJob),
}

/// A module to load: a compiled script with its helpers (`script`), or a tool module.
#[derive(Serialize, Deserialize)]
pub(super) struct LoadJob {
    pub(super) sources: Sources,
    pub(super) limits: Limits,
    pub(super) script: bool,
}

/// A frame to evaluate: its script, and its journal.
#[derive(Serialize, Deserialize)]
pub(super) struct FrameJob {
    pub(super) sources: Sources,
    pub(super) path: String,
    pub(super) request: String,
    pub(super) working_dir: PathBuf,
    pub(super) steps: Vec<StepRecord>,
    pub(super) printed: usize,
    pub(super) default_timeout: Duration,
    pub(super) limits: Limits,
    /// Whether the child, when the frame suspends, stays alive holding the evaluation
    /// ([`Ask::Suspended`]) for the steps that answer it ([`Answer::Resume`]), instead of
    /// ending. A job without it (a parent from before it) is not held.
    #[serde(default)]
    pub(super) warm: bool,
}

/// A function of a tool module to call.
#[derive(Serialize, Deserialize)]
pub(super) struct CallJob {
    pub(super) origin: String,
    pub(super) source: String,
    pub(super) function: String,
    pub(super) kwargs: Map<String, Json>,
    pub(super) working_dir: PathBuf,
    pub(super) default_timeout: Duration,
    pub(super) limits: Limits,
}

/// A shell step as the child asks for it; the parent adds where its group is noted.
#[derive(Serialize, Deserialize)]
pub(super) struct Shell {
    pub(super) command: String,
    pub(super) working_dir: PathBuf,
    pub(super) env: BTreeMap<String, String>,
    pub(super) timeout: Duration,
    /// Its number in the frame, for a step of a `parallel` group (see [`ShellStep`]).
    pub(super) number: Option<usize>,
    /// The shell it named (see [`ShellStep`]).
    #[serde(default)]
    pub(super) shell: Option<String>,
}

impl Shell {
    pub(super) fn of(step: &ShellStep) -> Shell {
        Shell {
            command: step.command.clone(),
            working_dir: step.working_dir.clone(),
            env: step.env.clone(),
            timeout: step.timeout,
            number: step.number,
            shell: step.shell.clone(),
        }
    }

    pub(super) fn into_step(self, run: &FrameRun<'_>) -> ShellStep {
        ShellStep {
            command: self.command,
            working_dir: self.working_dir,
            env: self.env,
            timeout: self.timeout,
            group_note: run.group_note.cloned(),
            number: self.number,
            shell: self.shell,
        }
    }
}

/// What the child asks of the parent, or tells it.
#[derive(Serialize, Deserialize)]
pub(super) enum Ask {
    /// Run a shell step; the answer is [`Answer::Ran`]. Its output goes to the parent's
    /// observer as it comes, which is all the step builtins do with it.
    Shell(Shell),
    /// Run the shell steps of a round of a `parallel` group, at most `max` at once; the
    /// answers are an [`Answer::Done`] for each as it ends, then [`Answer::AllDone`]. The
    /// child journals each (which the parent answers while the others run) and says
    /// [`Ask::Next`] before the next one comes.
    Shells {
        steps: Vec<Shell>,
        max: usize,
    },
    /// The child is ready for the next [`Answer::Done`].
    Next,
    /// Call a tool; the answer is [`Answer::Ran`].
    Tool(ToolCall),
    /// Journal a step; the answer is [`Answer::Journaled`].
    Journal(StepRecord),
    /// The observer's calls, which take no answer. A step started outside a `parallel`
    /// round is the one the next [`Ask::Shell`] or [`Ask::Tool`] runs: should the child be
    /// gone before it journals that step's result, the parent journals it (see
    /// `parent_side`), so the rest of its record comes along.
    StepStarted {
        frame: String,
        index: usize,
        input: StepInput,
        context: Option<String>,
        #[serde(default)]
        recorded: Recorded,
    },
    /// Output for the observer, as text (what it shows of it).
    Output(String),
    Print {
        frame: String,
        text: String,
    },
    StepFinished {
        frame: String,
        record: StepRecord,
    },
    /// The evaluation suspended (a job with `warm`): the child holds it, and goes on with the
    /// steps of [`Answer::Resume`], or ends when its stdin closes or stays silent for
    /// [`IDLE`](super::link::IDLE).
    Suspended {
        evaluation: Evaluation,
        cursor: usize,
        printed: usize,
    },
    /// The evaluation ended; the child says nothing more.
    Finished {
        outcome: Outcome,
        cursor: usize,
        printed: usize,
    },
}

/// The parent's answers.
#[derive(Serialize, Deserialize)]
pub(super) enum Answer {
    Ran(Ran),
    Done {
        at: usize,
        ran: Ran,
    },
    AllDone,
    /// Whether the step was journaled (when not, the parent keeps why).
    Journaled(bool),
    /// The steps journaled in the frame since the child suspended, the first of them the
    /// answer to the step it suspended at: it goes on as a fresh evaluation over the whole
    /// journal would.
    Resume(Vec<StepRecord>),
}

/// How an evaluation ended, as the child tells it: the errors an evaluation can end with
/// (see `evaluate_counted`).
#[derive(Serialize, Deserialize)]
pub(super) enum Outcome {
    Evaluated(Evaluation),
    Called(Called),
    /// A module loaded (`None`), or why it did not.
    Loaded(Option<String>),
    Diverged {
        script: String,
        index: usize,
        detail: String,
    },
    Cancelled {
        script: String,
        index: usize,
    },
    /// The journal could not be written: the parent knows why.
    Journal,
    /// Any other error, as its message.
    Other(String),
}

impl Outcome {
    pub(super) fn of<T>(result: Result<T, EngineError>, ok: impl FnOnce(T) -> Outcome) -> Outcome {
        match result {
            Ok(value) => ok(value),
            Err(EngineError::Diverged {
                script,
                index,
                detail,
            }) => Outcome::Diverged {
                script,
                index,
                detail,
            },
            Err(EngineError::Cancelled { script, index }) => Outcome::Cancelled { script, index },
            Err(EngineError::Journal(_)) => Outcome::Journal,
            Err(e) => Outcome::Other(e.to_string()),
        }
    }

    /// The error of an outcome that is one, or that is not the job's (for frame `path`).
    pub(super) fn into_error(self, path: &str, journal_error: Option<JournalError>) -> EngineError {
        match self {
            Outcome::Diverged {
                script,
                index,
                detail,
            } => EngineError::Diverged {
                script,
                index,
                detail,
            },
            Outcome::Cancelled { script, index } => EngineError::Cancelled { script, index },
            Outcome::Journal => journal_error.map_or_else(
                || stopped(path, "the journal could not be written"),
                EngineError::Journal,
            ),
            Outcome::Other(message) => stopped(path, &message),
            Outcome::Evaluated(_) | Outcome::Called(_) | Outcome::Loaded(_) => {
                stopped(path, "the child answered another job than it was given")
            }
        }
    }
}

/// The error of an evaluation that stopped in the child for a reason that is not the
/// script's.
pub(super) fn stopped(path: &str, detail: &str) -> EngineError {
    EngineError::Evaluation {
        script: path.to_string(),
        detail: detail.to_string(),
    }
}

/// Writes `message` as one line of JSON.
pub(super) fn write_line(out: &mut impl Write, message: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}
