//! The journal format: the append-only history of one run, whichever store keeps it.
//!
//! A run is one JSON object per line. The events replay into the stack of frames: `push`
//! opens a frame, `step` appends a step result to the top frame, `fail` marks the top frame
//! as fallen back to its NL instructions, `pop` closes it (with how it ended: `stopped`, with
//! the script's message, when the script stopped itself with `fail()`), `supersede` takes the events from
//! one of its lines on out of the live history (a retry or a rewind; they stay in the file),
//! `ask` says the top frame's question was put to the person (when, and what it takes),
//! `wait` says an unattended run waits out a rate limit of the model (a note replay skips).
//! `killed` that a resume killed a step left running by a mekara that stopped (the attempt
//! that never ended, shown beside the step's new one; replay passes over it).
//! Nothing else is stored: the pending step is derived from the frames by evaluating them.
//!
//! Every event is durable before the script sees the result it records, so a crash loses at
//! most the step in flight. A last line without its newline, or that does not parse, is a
//! torn write: [`parse`] reports it and it is cut off before the run is resumed, never
//! trusted. The stores that keep journals (files, PostgreSQL) are in `crate::store`.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::step::StepRecord;

/// The first line of every journal: which format and which mekara wrote it.
pub(crate) const FORMAT: &str = "mekara-journal/1";

/// How a frame came onto the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Origin {
    /// Started by the person or agent (`start`, `mekara run`).
    Start,
    /// Pushed by a `call_script` step of the frame below.
    Call,
}

/// How a frame left the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Outcome {
    /// A compiled frame ran to its end.
    Completed,
    /// The agent finished an NL script, or an NL fallback, by hand.
    FinishedByAgent,
    /// A called frame failed; the failure went to its caller.
    Failed,
    /// The script stopped itself with `fail(message)` (the pop's `error` holds the message):
    /// the frame ended there, and nobody finishes it by hand. A called frame's stop goes to
    /// its caller as a failed call, which stops the caller too unless it allowed the failure.
    Stopped,
}

/// The run's header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct RunEvent {
    /// [`FORMAT`].
    pub format: String,
    /// The mekara version that created the run.
    pub mekara: String,
    /// The run's id.
    pub id: String,
    /// The SHA-256 of the run's handle token ([`super::handle`]); absent in journals
    /// written before handles.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_sha256: Option<String>,
    /// Unix time in milliseconds.
    pub at: u64,
}

/// A frame was pushed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PushEvent {
    /// Stack depth of the new frame, the root being 0.
    pub depth: usize,
    /// The script's name, as resolved.
    pub script: String,
    /// Whether it ran as a compiled script.
    pub compiled: bool,
    /// Its arguments.
    pub request: String,
    /// The folder it runs in.
    pub working_dir: PathBuf,
    /// Who pushed it.
    pub origin: Origin,
    /// For a `call`, the script name as the calling script wrote it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub called_as: Option<String>,
    /// For a `call`, whether the caller said `allow_failure = True`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_failure: bool,
    /// Unix time in milliseconds.
    pub at: u64,
}

/// A step of the top frame finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StepEvent {
    /// Depth of the frame it belongs to.
    pub depth: usize,
    /// The step.
    #[serde(flatten)]
    pub record: StepRecord,
    /// Unix time in milliseconds.
    pub at: u64,
}

/// The top frame failed and fell back to its NL instructions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FailEvent {
    /// Depth of the frame.
    pub depth: usize,
    /// What failed, for the agent.
    pub error: String,
    /// Unix time in milliseconds.
    pub at: u64,
}

/// The top frame left the stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct PopEvent {
    /// Depth of the frame.
    pub depth: usize,
    /// How it ended.
    pub outcome: Outcome,
    /// Why, when it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// An NL frame finished by an agent process (`mekara run --agent …`): what it reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<super::step::AgentReport>,
    /// Unix time in milliseconds.
    pub at: u64,
}

/// Why part of a run's history was superseded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Reason {
    /// `--retry`: a failed step runs again.
    Retry,
    /// `--retry` on a run whose script changed since it recorded its steps: the run goes on
    /// live from the first step whose inputs changed.
    ScriptChanged,
    /// `--from STEP`: the person chose the step.
    From,
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Reason::Retry => "retry",
            Reason::ScriptChanged => "script-changed",
            Reason::From => "from",
        })
    }
}

/// The history from one step of one frame on no longer counts: the events from line
/// `line` up to this one stay in the file, and replay leaves them out of the live history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct SupersedeEvent {
    /// The 1-based line of the first superseded event.
    pub line: usize,
    /// Depth of the frame whose step is the first superseded.
    pub depth: usize,
    /// That frame's script, as resolved.
    pub script: String,
    /// That step's index in its frame.
    pub index: usize,
    /// Why.
    pub reason: Reason,
    /// The mekara version that superseded it.
    pub mekara: String,
    /// Unix time in milliseconds.
    pub at: u64,
}

/// An `ask` step of the top frame put its question to the person: the run waits for an
/// answer. Written once per question, when it is first asked, so that a timeout counts from
/// then and a run can be answered (`mekara answer`) without evaluating its script.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AskEvent {
    /// Depth of the frame.
    pub depth: usize,
    /// The index the `ask` step gets in its frame once answered.
    pub index: usize,
    /// The question.
    pub question: String,
    /// The answers it takes, when it takes only some.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choices: Option<Vec<String>>,
    /// How long after `at` an answer may come, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
    /// Whether the script takes a timed-out answer as a failed result (`allow_failure`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_failure: bool,
    /// Unix time in milliseconds: when the question was asked.
    pub at: u64,
}

/// Why an unattended run waited before asking its agent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum WaitReason {
    /// The model turned the agent away: a rate limit or an overload.
    RateLimit,
}

/// An unattended run's agent was turned away by the model (a rate limit or an overload), and
/// the run waits `wait_ms` before asking again. Written when the wait starts. It is not a
/// step result: replay skips it, so a run killed during the wait asks the same item again
/// on resume, and nothing runs twice. It says `"ignorable": true`, so a reader that does
/// not know it skips it (see [`IgnoredEvent`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct WaitEvent {
    /// Depth of the frame whose item waits.
    pub depth: usize,
    /// The item: `colour[1]`, or a task of a `parallel` group (`grove[1] task 2`).
    pub step: String,
    /// Why.
    pub reason: WaitReason,
    /// Which asking of the item comes after the wait: 2 after the first wait.
    pub attempt: u32,
    /// How long the run is to wait, in milliseconds: journaled before the wait, so a run
    /// stopped during it (Ctrl-C, a kill) waited less; the next event's time tells how long.
    pub wait_ms: u64,
    /// What the agent's client said.
    pub said: String,
    /// Always `true`: a reader that does not know the event may skip it.
    #[serde(default)]
    pub ignorable: bool,
    /// Unix time in milliseconds: when the wait started.
    pub at: u64,
}

/// An llm step of a compiled frame was handed to the agent: a note of which step the run
/// waits on and the first lines of its prompt, for whoever reads the run from its journal
/// while another process holds it or after that process exited (`status` from another
/// server, `mekara runs show`), which cannot evaluate the script to find out. Written once
/// per step, when it is first handed out. Replay passes over it (the step's result holds
/// the whole prompt once answered), and it says `"ignorable": true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct HandedEvent {
    /// Depth of the frame.
    pub depth: usize,
    /// The index the llm step gets in its frame once answered.
    pub index: usize,
    /// The first lines of its prompt ([`HandedEvent::GIST_LINES`] lines, at most
    /// [`HandedEvent::GIST_BYTES`] bytes).
    pub prompt: String,
    /// Always `true`: a reader that does not know the event may skip it.
    #[serde(default)]
    pub ignorable: bool,
    /// Unix time in milliseconds: when the step was handed out.
    pub at: u64,
}

impl HandedEvent {
    /// How many lines of the prompt it keeps.
    pub(crate) const GIST_LINES: usize = 2;
    /// How many bytes of the prompt it keeps at most.
    pub(crate) const GIST_BYTES: usize = 300;

    /// The note that llm step `index` of the frame at `depth` was handed out with `prompt`.
    pub(crate) fn new(depth: usize, index: usize, prompt: &str) -> HandedEvent {
        HandedEvent {
            depth,
            index,
            prompt: crate::display::first_lines(prompt, Self::GIST_LINES, Self::GIST_BYTES),
            ignorable: true,
            at: now_ms(),
        }
    }
}

/// Which agent drives an unattended run (`mekara run --agent NAME` or `--agent-command
/// CMD`): written once when such an invocation starts or resumes a run, so that whoever
/// shows the run later (the viewer, `mekara runs show`) can say the command that resumes it
/// with the same agent. Replay passes over it, and it says `"ignorable": true`. A note with
/// neither field (from a later mekara's kind of agent) says nothing this mekara can repeat.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct AgentEvent {
    /// The headless agent's name (`claude`, `codex`, `gemini`), for `--agent`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The command, for `--agent-command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Always `true`: a reader that does not know the event may skip it.
    #[serde(default)]
    pub ignorable: bool,
    /// Unix time in milliseconds: when the invocation took the run up.
    pub at: u64,
}

impl AgentEvent {
    /// The flags that name this agent on `mekara run`: ` --agent claude` or
    /// ` --agent-command 'CMD'` (with a leading space), or nothing.
    pub(crate) fn flags(&self) -> String {
        match (&self.agent, &self.command) {
            (_, Some(command)) => {
                format!(" --agent-command {}", crate::display::shell_quote(command))
            }
            (Some(agent), None) => format!(" --agent {agent}"),
            (None, None) => String::new(),
        }
    }
}

/// An event this mekara does not know that says `"ignorable": true`: an event a later mekara
/// added that changes nothing a reader derives (a note, such as `wait` is). It keeps its
/// place, so that line numbers still count every line, and every reader skips it. An unknown
/// event without the mark is still an error: it may change the history.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct IgnoredEvent {
    /// Its `event` name.
    pub kind: String,
    /// Its `at`, or 0.
    pub at: u64,
}

/// A resume found the step after the journal's last one still running, left by a mekara
/// that stopped (killed, crashed), and killed its process group. The attempt recorded no
/// result; the step runs again. Only read by the readers of a run's history (`runs show`,
/// the viewer): replay passes over it, and it says `"ignorable": true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct KilledEvent {
    /// Depth of the frame the step belongs to.
    pub depth: usize,
    /// The index the step has in its frame.
    pub index: usize,
    /// The process group that was killed.
    pub group: i32,
    /// Whether some of its processes had not ended a while after the kill.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lingered: bool,
    /// Always `true`: a reader that does not know the event may skip it (a note, as `wait`).
    #[serde(default)]
    pub ignorable: bool,
    /// Unix time in milliseconds: when it was killed.
    pub at: u64,
}

/// What a `cap` event says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum CapAction {
    /// A cap was reached before the run's next agent item: the run waits for a person.
    Paused,
    /// A person raised the caps (`mekara answer`, the viewer): a resume goes on.
    Raised,
    /// A person stopped the run at its cap: nothing is left to resume.
    Stopped,
}

/// The spend caps of an unattended run, as a `cap` event carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Caps {
    /// `--max-cost`, US dollars for the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
    /// `--max-tokens`, tokens (in and out) for the whole run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u64>,
    /// `--max-step-tokens`, tokens (in and out) for one agent item.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_step_tokens: Option<u64>,
}

/// A spend cap of an unattended run: reached (the run paused before `step`, a gate for a
/// person, as `ask` is), raised or stopped by a person. A note: replay and rewind pass over
/// it; the unattended driver reads the caps a person raised from it, and `mekara answer`
/// knows from it that a run waits at a cap. It says `"ignorable": true`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct CapEvent {
    /// What happened.
    pub action: CapAction,
    /// Paused: the item that waits (`colour[3]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Paused: which cap, and what was spent (`the run's agents spent $0.5000 (`--max-cost 0.5`)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
    /// Paused: the caps in force; raised: the new caps (an absent one is unchanged).
    #[serde(default)]
    pub caps: Caps,
    /// Raised or stopped: by whom.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<super::step::AnsweredBy>,
    /// Always `true`: a reader that does not know the event may skip it.
    #[serde(default)]
    pub ignorable: bool,
    /// Unix time in milliseconds.
    pub at: u64,
}

impl Caps {
    /// The caps set, as flags: `--max-cost 2, --max-tokens 50000`, or `no cap`.
    pub(crate) fn shown(&self) -> String {
        let mut parts = Vec::new();
        if let Some(cost) = self.max_cost {
            parts.push(format!("`--max-cost {cost}`"));
        }
        if let Some(tokens) = self.max_tokens {
            parts.push(format!("`--max-tokens {tokens}`"));
        }
        if let Some(tokens) = self.max_step_tokens {
            parts.push(format!("`--max-step-tokens {tokens}`"));
        }
        if parts.is_empty() {
            "no cap".to_string()
        } else {
            parts.join(", ")
        }
    }
}

impl CapEvent {
    /// What the event says, for `mekara runs show` and the viewer (without its time).
    pub(crate) fn said(&self) -> String {
        let by = self.by.map_or_else(String::new, |by| format!(" {by}"));
        match self.action {
            CapAction::Paused => format!(
                "⏸ paused at a cap before `{}`: {}",
                self.step.as_deref().unwrap_or("the next agent step"),
                self.why.as_deref().unwrap_or("a cap was reached")
            ),
            CapAction::Raised => format!("· caps raised{by} to {}", self.caps.shown()),
            CapAction::Stopped => format!("· stopped at its cap{by}"),
        }
    }
}

/// The `cap` event a run waits at: the journal's last event that is not a note of another
/// kind is a pause at a cap.
pub(crate) fn waiting_at_cap(events: &[Event]) -> Option<&CapEvent> {
    let last = events.iter().rev().find(|e| {
        !matches!(
            e,
            Event::Handed(_) | Event::Ignored(_) | Event::Agent(_) | Event::Wait(_)
        )
    })?;
    match last {
        Event::Cap(cap) if cap.action == CapAction::Paused => Some(cap),
        _ => None,
    }
}

/// Whether a person stopped the run at its cap, and nothing has happened since.
pub(crate) fn stopped_at_cap(events: &[Event]) -> bool {
    events
        .iter()
        .rev()
        .find(|e| !matches!(e, Event::Handed(_) | Event::Ignored(_) | Event::Agent(_)))
        .is_some_and(|e| matches!(e, Event::Cap(cap) if cap.action == CapAction::Stopped))
}

/// One line of a journal. Steps are the big variant and the common one, so boxing them
/// would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(crate) enum Event {
    /// The header.
    Run(RunEvent),
    /// A frame was pushed.
    Push(PushEvent),
    /// A step finished.
    Step(StepEvent),
    /// A frame fell back.
    Fail(FailEvent),
    /// A frame was popped.
    Pop(PopEvent),
    /// Part of the history was superseded (a retry or a rewind).
    Supersede(SupersedeEvent),
    /// A question was put to the person (`ask`).
    Ask(AskEvent),
    /// An unattended run waits out a rate limit before asking its agent again.
    Wait(WaitEvent),
    /// An llm step was handed to the agent.
    Handed(HandedEvent),
    /// An ignorable event this mekara does not know; never written.
    #[serde(skip)]
    Ignored(IgnoredEvent),
    /// A step left running by a mekara that stopped was killed.
    Killed(KilledEvent),
    /// Which agent drives an unattended run.
    Agent(AgentEvent),
    /// An unattended run paused at a spend cap, or a person raised its caps or stopped it.
    Cap(CapEvent),
}

impl Event {
    /// When it was journaled (Unix ms).
    pub(crate) fn at(&self) -> u64 {
        match self {
            Event::Run(e) => e.at,
            Event::Push(e) => e.at,
            Event::Step(e) => e.at,
            Event::Fail(e) => e.at,
            Event::Pop(e) => e.at,
            Event::Supersede(e) => e.at,
            Event::Ask(e) => e.at,
            Event::Wait(e) => e.at,
            Event::Ignored(e) => e.at,
            Event::Killed(e) => e.at,
            Event::Handed(e) => e.at,
            Event::Agent(e) => e.at,
            Event::Cap(e) => e.at,
        }
    }

    /// What the agent that answered reported: on a step an agent answered, or the pop of a
    /// frame an agent finished.
    pub(crate) fn agent_report(&self) -> Option<&super::step::AgentReport> {
        match self {
            Event::Step(step) => step.record.result.agent.as_ref(),
            Event::Pop(pop) => pop.agent.as_ref(),
            _ => None,
        }
    }

    /// The event's name, as the journal writes it.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Event::Run(_) => "run",
            Event::Push(_) => "push",
            Event::Step(_) => "step",
            Event::Fail(_) => "fail",
            Event::Pop(_) => "pop",
            Event::Supersede(_) => "supersede",
            Event::Ask(_) => "ask",
            Event::Wait(_) => "wait",
            Event::Ignored(_) => "ignored",
            Event::Killed(_) => "killed",
            Event::Handed(_) => "handed",
            Event::Agent(_) => "agent",
            Event::Cap(_) => "cap",
        }
    }

    /// Reads one event from a line: `line` parsed, and `text`, the line itself.
    ///
    /// Written by hand rather than derived, and read from the text rather than from the
    /// parsed line: serde buffers internally tagged enums and flattened structs (a step's
    /// record and input), and from a parsed value a number crosses that buffer as a `u64`,
    /// `i64`, `u128`, `i128` or `f64` under serde_json's `arbitrary_precision` (switched on
    /// by `starlark`), so `10**40` came back a float and `2**64` did not read at all. From
    /// the text every number crosses with its digits.
    fn from_json(mut line: Json, text: &[u8]) -> Result<Event, String> {
        fn read<T: serde::de::DeserializeOwned>(text: &[u8], line: Json) -> Result<T, String> {
            // A line that does not fit is named by the parsed line's error, without the
            // column the text's error adds, as it has always been.
            serde_json::from_slice(text)
                .or_else(|_| serde_json::from_value(line))
                .map_err(|e| e.to_string())
        }
        let kind = line
            .as_object_mut()
            .and_then(|o| o.remove("event"))
            .ok_or("no `event` field")?;
        match kind.as_str() {
            Some("run") => read(text, line).map(Event::Run),
            Some("push") => read(text, line).map(Event::Push),
            Some("step") => read(text, line).map(Event::Step),
            Some("fail") => read(text, line).map(Event::Fail),
            Some("pop") => read(text, line).map(Event::Pop),
            Some("supersede") => read(text, line).map(Event::Supersede),
            Some("ask") => read(text, line).map(Event::Ask),
            Some("wait") => read(text, line).map(Event::Wait),
            Some("killed") => read(text, line).map(Event::Killed),
            Some("handed") => read(text, line).map(Event::Handed),
            Some("agent") => read(text, line).map(Event::Agent),
            Some("cap") => read(text, line).map(Event::Cap),
            Some(other) if line.get("ignorable") == Some(&Json::Bool(true)) => {
                Ok(Event::Ignored(IgnoredEvent {
                    kind: other.to_string(),
                    at: line.get("at").and_then(Json::as_u64).unwrap_or(0),
                }))
            }
            _ => Err(format!("unknown event {kind}")),
        }
    }
}

/// The current time as Unix milliseconds.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Why a journal could not be used.
#[derive(Debug, thiserror::Error)]
pub(crate) enum JournalError {
    /// Reading or writing failed.
    #[error("journal `{}`: {source}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// A line other than the last does not parse: the file was edited or damaged.
    #[error("journal `{}` is damaged at line {line}: {reason}; it cannot be resumed", .path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// The header names a format this mekara does not read.
    #[error(
        "journal `{}` is in format `{found}` (written by mekara {by}), which this mekara ({}) cannot read; resume it with a mekara that reads `{found}`, or start the script again",
        .path.display(),
        env!("CARGO_PKG_VERSION")
    )]
    Format {
        /// The file.
        path: PathBuf,
        /// The format its header names.
        found: String,
        /// The mekara version that wrote it.
        by: String,
    },
    /// Another process holds the run.
    #[error("run `{id}` is in use by another mekara process; stop that one first")]
    Busy {
        /// The run id.
        id: String,
    },
    /// A new run could not take its id: a run of that id exists, or another process is
    /// creating it (for a queued run: the child of a worker that died).
    #[error(
        "run `{id}` exists already, or another mekara process is making it; take it up with `mekara run --resume {id}`"
    )]
    Taken {
        /// The run id.
        id: String,
    },
    /// A store that keeps journals elsewhere (the shared PostgreSQL store) failed.
    #[error(transparent)]
    Store(#[from] StoreFailure),
}

/// Why a store backend could not do what was asked: its own error, kept whole for its
/// message and source, and whether it was the user's setting that was wrong (exit 2) rather
/// than the store that failed (exit 1). The engine names no backend: each turns its own
/// error into this one.
#[derive(Debug)]
pub(crate) struct StoreFailure {
    /// The backend's error.
    pub error: Box<dyn std::error::Error + Send + Sync>,
    /// Whether it is a usage error: a setting the user must fix (a bad URL, a bad section).
    pub usage: bool,
}

impl std::fmt::Display for StoreFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for StoreFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// A torn last record, found when reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TornTail {
    /// Byte offset where the torn record starts.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// What a journal file holds.
#[derive(Debug, Clone)]
pub(crate) struct Contents {
    /// The events that were fully written.
    pub events: Vec<Event>,
    /// A torn last record, if the writer died in the middle of one.
    pub torn: Option<TornTail>,
}

/// Reads a journal's `bytes` (from the file at `path`, which errors name).
pub(crate) fn parse(path: &Path, bytes: &[u8]) -> Result<Contents, JournalError> {
    let mut events = Vec::new();
    let mut offset = 0usize;
    let mut line_no = 0;
    while offset < bytes.len() {
        line_no += 1;
        let rest = &bytes[offset..];
        let torn = |events: Vec<Event>, reason: Option<String>| {
            check_header(path, &events)?;
            if let Some(reason) = reason {
                tracing::warn!(
                    "journal `{}`: torn last record ignored: {reason}",
                    path.display()
                );
            }
            Ok(Contents {
                events,
                torn: Some(TornTail {
                    offset: offset as u64,
                    len: rest.len() as u64,
                }),
            })
        };
        // Only the last line can lack its newline: the writer died while writing it, so it
        // is torn even when it parses.
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            return torn(events, event_of(rest).err());
        };
        match event_of(&rest[..end]) {
            Ok(event) => events.push(event),
            Err(reason) if offset + end + 1 >= bytes.len() => {
                return torn(events, Some(reason));
            }
            Err(reason) => {
                return Err(JournalError::Corrupt {
                    path: path.to_path_buf(),
                    line: line_no,
                    reason,
                });
            }
        }
        offset += end + 1;
    }
    check_header(path, &events)?;
    Ok(Contents { events, torn: None })
}

/// The first event must be a header in the one format this mekara reads: a journal in
/// another is refused rather than misread.
fn check_header(path: &Path, events: &[Event]) -> Result<(), JournalError> {
    match events.first() {
        None => Ok(()),
        Some(Event::Run(header)) if header.format == FORMAT => Ok(()),
        Some(Event::Run(header)) => Err(JournalError::Format {
            path: path.to_path_buf(),
            found: header.format.clone(),
            by: header.mekara.clone(),
        }),
        Some(_) => Err(JournalError::Corrupt {
            path: path.to_path_buf(),
            line: 1,
            reason: "the first line is not a `run` header".into(),
        }),
    }
}

/// The event one line of a journal holds.
fn event_of(line: &[u8]) -> Result<Event, String> {
    serde_json::from_slice::<Json>(line)
        .map_err(|e| e.to_string())
        .and_then(|parsed| Event::from_json(parsed, line))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_note_from_a_later_mekara_still_reads_and_names_what_it_knows() {
        let flags = |line: &[u8]| match event_of(line) {
            Ok(Event::Agent(agent)) => Ok(agent.flags()),
            other => Err(format!("{other:?}")),
        };
        // Fields a later mekara added are passed over.
        let later = br#"{"event":"agent","agent":"codex","model":"o9","ignorable":true,"at":7}"#;
        assert_eq!(flags(later), Ok(" --agent codex".to_string()));
        let command =
            br#"{"event":"agent","command":"A='$x' sh agent.sh","ignorable":true,"at":7}"#;
        assert_eq!(
            flags(command),
            Ok(r" --agent-command 'A='\''$x'\'' sh agent.sh'".to_string())
        );
        // A kind of agent this mekara cannot name: the plain command.
        let unnamed =
            br#"{"event":"agent","endpoint":"http://127.0.0.1:9","ignorable":true,"at":7}"#;
        assert_eq!(flags(unnamed), Ok(String::new()));
    }

    #[test]
    fn an_unknown_event_is_skipped_only_when_it_says_it_is_ignorable() {
        let note = br#"{"event":"later","ignorable":true,"at":7}"#;
        assert_eq!(
            event_of(note),
            Ok(Event::Ignored(IgnoredEvent {
                kind: "later".into(),
                at: 7
            }))
        );
        let change = br#"{"event":"later","at":7}"#;
        assert_eq!(event_of(change), Err("unknown event \"later\"".into()));
        let wait = br#"{"event":"wait","depth":0,"step":"colour[0]","reason":"rate-limit","attempt":2,"wait_ms":8000,"said":"429","ignorable":true,"at":9}"#;
        assert!(
            matches!(event_of(wait), Ok(Event::Wait(w)) if w.attempt == 2 && w.wait_ms == 8000)
        );
    }
}
