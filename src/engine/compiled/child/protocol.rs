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
/// another protocol gives), and the job. Its fields are written in this order, which
/// [`Opened`] relies on: the protocol comes before the job.
#[derive(Serialize)]
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

/// A parent's first line as a child reads it, in one pass over the line: the job, or why
/// the child does not take it up (it was started by a mekara of another protocol). The
/// protocol is read before the job, so the job of another protocol is skipped unread rather
/// than misread; the job is read straight from the line, never through a
/// `serde_json::Value`, which cannot hold its integers past 64 bits.
pub(super) enum Opened<J> {
    Job(J),
    Refused(String),
}

impl<'de, J: Deserialize<'de>> Deserialize<'de> for Opened<J> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(OpenedVisitor(std::marker::PhantomData))
    }
}

struct OpenedVisitor<J>(std::marker::PhantomData<J>);

impl<'de, J: Deserialize<'de>> serde::de::Visitor<'de> for OpenedVisitor<J> {
    type Value = Opened<J>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("an object with `protocol`, `mekara` and `job`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Opened<J>, A::Error> {
        let mut protocol: Option<u64> = None;
        let mut mekara: Option<String> = None;
        let mut job = None;
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "protocol" => protocol = Some(map.next_value()?),
                "mekara" => mekara = Some(map.next_value()?),
                // A job before its protocol, or of another one, is skipped: only a job of
                // this protocol is read.
                "job" if protocol == Some(u64::from(PROTOCOL)) => job = Some(map.next_value()?),
                _ => {
                    map.next_value::<serde::de::IgnoredAny>()?;
                }
            }
        }
        match (other_protocol(protocol, mekara.as_deref()), job) {
            (Some(refused), _) => Ok(Opened::Refused(refused)),
            (None, Some(job)) => Ok(Opened::Job(job)),
            (None, None) => Err(serde::de::Error::missing_field("job")),
        }
    }
}

/// Why a child does not take a job up: it was started by a mekara of `protocol` (none: an
/// older one), of version `mekara`. `None` when the protocol is this one.
fn other_protocol(protocol: Option<u64>, mekara: Option<&str>) -> Option<String> {
    if protocol == Some(u64::from(PROTOCOL)) {
        return None;
    }
    let mine = env!("CARGO_PKG_VERSION");
    let parent = match (protocol, mekara) {
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

#[cfg(test)]
mod tests {
    use super::{Opened, Opening, PROTOCOL};

    /// What a child makes of `line`: its job (a number, to see it read exactly), why it
    /// refuses it, or why it cannot read it.
    fn opened(line: &str) -> Result<Result<u128, String>, String> {
        match serde_json::from_str::<Opened<u128>>(line) {
            Ok(Opened::Job(job)) => Ok(Ok(job)),
            Ok(Opened::Refused(why)) => Ok(Err(why)),
            Err(e) => Err(e.to_string()),
        }
    }

    #[test]
    fn a_job_of_this_protocol_is_read_whole_with_integers_past_64_bits() {
        let line = serde_json::to_string(&Opening::new(u128::MAX)).expect("json");
        assert!(
            line.starts_with(&format!("{{\"protocol\":{PROTOCOL},")),
            "{line}"
        );
        assert_eq!(opened(&line), Ok(Ok(u128::MAX)));
    }

    #[test]
    fn a_job_of_another_protocol_or_none_is_refused_unread() {
        let refusal = |line: &str| match opened(line) {
            Ok(Err(why)) => why,
            other => panic!("not refused: {other:?}"),
        };
        // Its job would not even be read as this protocol's: it is skipped.
        assert!(
            refusal(r#"{"protocol": 999, "mekara": "9.9.9", "job": {"Frame": [1, 2]}}"#)
                .contains("started by mekara 9.9.9 (protocol 999)")
        );
        assert!(refusal(r#"{"protocol": 0, "job": 1}"#).contains("a mekara of protocol 0"));
        // A parent from before the protocol: its first line is the job itself.
        assert!(refusal(r#"{"Frame": {"path": "x"}}"#).contains("an older mekara"));
        assert!(refusal("{}").contains("an older mekara"));
    }

    #[test]
    fn a_malformed_opening_is_an_error_not_a_job() {
        for line in [
            "",
            "not json",
            "[1, 2, 3]",
            "42",
            r#"{"protocol": "1", "job": 1}"#,
            r#"{"protocol": -1, "job": 1}"#,
            r#"{"protocol": 1, "job": "1"}"#,
            r#"{"protocol": 1, "job": 1"#,
            r#"{"protocol": 1, "mekara": 7, "job": 1}"#,
            // Only a job after its protocol is read: one before it is not this mekara's.
            r#"{"job": 1, "protocol": 1}"#,
            r#"{"protocol": 1}"#,
        ] {
            assert!(
                opened(line).is_err(),
                "{line:?} was read: {:?}",
                opened(line)
            );
        }
        // Deeply nested junk in the job of another protocol is skipped (serde_json skips
        // without recursing) and the job refused: no stack overflow.
        let deep = format!(
            r#"{{"protocol": 2, "job": {}1{}}}"#,
            "[".repeat(10_000),
            "]".repeat(10_000)
        );
        assert!(
            matches!(opened(&deep), Ok(Err(_))),
            "{:?}",
            opened(&deep).map(|_| ())
        );
    }
}
