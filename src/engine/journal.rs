//! `Journal`: the append-only file of one run.
//!
//! A run is one JSON object per line. The events replay into the stack of frames: `push`
//! opens a frame, `step` appends a step result to the top frame, `fail` marks the top frame
//! as fallen back to its NL instructions, `pop` closes it, `supersede` takes the events from
//! one of its lines on out of the live history (a retry or a rewind; they stay in the file),
//! `ask` says the top frame's question was put to the person (when, and what it takes).
//! Nothing else is stored: the pending step is derived from the frames by evaluating them.
//!
//! Every event is written with a single `write` on a file opened for appending, before the
//! script sees the result it records, so a crash loses at most the step in flight. A last
//! line without its newline, or that does not parse, is a torn write: it is reported and
//! cut off before the run is resumed, never trusted. The owning process holds an exclusive
//! lock on the file, so two processes cannot drive one run.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::group_note::GroupNote;
use super::step::StepRecord;

/// The first line of every journal: which format and which mekara wrote it.
pub const FORMAT: &str = "mekara-journal/1";

/// How a frame came onto the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Started by the person or agent (`start`, `mekara run`).
    Start,
    /// Pushed by a `call_script` step of the frame below.
    Call,
}

/// How a frame left the stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A compiled frame ran to its end.
    Completed,
    /// The agent finished an NL script, or an NL fallback, by hand.
    FinishedByAgent,
    /// A called frame failed; the failure went to its caller.
    Failed,
}

/// The run's header.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEvent {
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
pub struct PushEvent {
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
pub struct StepEvent {
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
pub struct FailEvent {
    /// Depth of the frame.
    pub depth: usize,
    /// What failed, for the agent.
    pub error: String,
    /// Unix time in milliseconds.
    pub at: u64,
}

/// The top frame left the stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PopEvent {
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
pub enum Reason {
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
pub struct SupersedeEvent {
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
pub struct AskEvent {
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

/// One line of a journal. Steps are the big variant and the common one, so boxing them
/// would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
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
}

impl Event {
    /// When it was journaled (Unix ms).
    pub fn at(&self) -> u64 {
        match self {
            Event::Run(e) => e.at,
            Event::Push(e) => e.at,
            Event::Step(e) => e.at,
            Event::Fail(e) => e.at,
            Event::Pop(e) => e.at,
            Event::Supersede(e) => e.at,
            Event::Ask(e) => e.at,
        }
    }

    /// The event's name, as the journal writes it.
    pub fn kind(&self) -> &'static str {
        match self {
            Event::Run(_) => "run",
            Event::Push(_) => "push",
            Event::Step(_) => "step",
            Event::Fail(_) => "fail",
            Event::Pop(_) => "pop",
            Event::Supersede(_) => "supersede",
            Event::Ask(_) => "ask",
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
            _ => Err(format!("unknown event {kind}")),
        }
    }
}

/// The current time as Unix milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Why a journal could not be used.
#[derive(Debug, thiserror::Error)]
pub enum JournalError {
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
    /// The shared run store failed.
    #[error(transparent)]
    Store(#[from] super::postgres::StoreError),
}

/// A torn last record, found when reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Byte offset where the torn record starts.
    pub offset: u64,
    /// Its length in bytes.
    pub len: u64,
}

/// What a journal file holds.
#[derive(Debug, Clone)]
pub struct Contents {
    /// The events that were fully written.
    pub events: Vec<Event>,
    /// A torn last record, if the writer died in the middle of one.
    pub torn: Option<TornTail>,
}

/// Reads the journal at `path` without taking it.
pub fn read(path: &Path) -> Result<Contents, JournalError> {
    let io = |source| JournalError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut bytes = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(io)?;
    parse(path, &bytes)
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

/// An open, locked journal that events are appended to.
#[derive(Debug)]
pub struct Journal {
    id: String,
    path: PathBuf,
    file: File,
    /// Also keeps the journal's length, which it notes with each step's group.
    group: GroupNote,
    /// The header of a new run, written with its first event so that no journal holds a
    /// header alone (a run killed in between could not be resumed: its script would be
    /// unknown).
    header: Option<Vec<u8>>,
}

impl Journal {
    /// Creates the journal of a new run `id` in `dir`, with the digest of the run's handle
    /// token. Its header is written with the first event appended, in the same write.
    pub fn create(
        dir: &Path,
        id: &str,
        token_sha256: Option<String>,
    ) -> Result<Journal, JournalError> {
        let path = dir.join(format!("{id}.jsonl"));
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&path)
            .map_err(io)?;
        let group = GroupNote::open(dir, id).map_err(io)?;
        let mut journal = Journal {
            id: id.to_string(),
            path: path.clone(),
            file,
            group,
            header: None,
        };
        journal.lock()?;
        journal.header = Some(journal.line(&Event::Run(RunEvent {
            format: FORMAT.to_string(),
            mekara: env!("CARGO_PKG_VERSION").to_string(),
            id: id.to_string(),
            token_sha256,
            at: now_ms(),
        }))?);
        Ok(journal)
    }

    /// Opens run `id` in `dir` to continue it: takes the lock, reads the events, and cuts
    /// off a torn last record so that new events follow complete ones.
    pub fn open(dir: &Path, id: &str) -> Result<(Journal, Contents), JournalError> {
        let journal = Journal::take(dir, id)?;
        let io = |source| JournalError::Io {
            path: journal.path.clone(),
            source,
        };
        let contents = read(&journal.path)?;
        if let Some(torn) = &contents.torn {
            journal.file.set_len(torn.offset).map_err(io)?;
        }
        let len = journal.file.metadata().map_err(io)?.len();
        journal.group.set_journal_len(len);
        Ok((journal, contents))
    }

    /// Removes run `id`'s journal and group note from `dir`, holding the run's lock while
    /// it does, so that a run another process drives is refused, not lost. A step a killed
    /// mekara left running is killed first. Returns the bytes freed.
    pub fn remove(dir: &Path, id: &str) -> Result<u64, JournalError> {
        let note_bytes =
            std::fs::symlink_metadata(super::group_note::path(dir, id)).map_or(0, |m| m.len());
        let journal = Journal::take(dir, id)?;
        let io = |source| JournalError::Io {
            path: journal.path.clone(),
            source,
        };
        let len = journal.file.metadata().map_err(io)?.len();
        journal.group.set_journal_len(len);
        let _ = journal.group.kill_leftover();
        std::fs::remove_file(&journal.path).map_err(io)?;
        journal.group.remove();
        Ok(len + note_bytes)
    }

    /// Opens run `id`'s journal and group note in `dir` and takes the run's lock.
    fn take(dir: &Path, id: &str) -> Result<Journal, JournalError> {
        let path = dir.join(format!("{id}.jsonl"));
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        let group = GroupNote::open(dir, id).map_err(io)?;
        let journal = Journal {
            id: id.to_string(),
            path: path.clone(),
            file,
            group,
            header: None,
        };
        journal.lock()?;
        // `mekara runs prune` removes a run while holding its lock: a process that opened the
        // file just before would otherwise go on writing to a file that no longer exists.
        if std::os::unix::fs::MetadataExt::nlink(&journal.file.metadata().map_err(io)?) == 0 {
            return Err(io(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "the run was removed (`mekara runs prune`) while it was being opened",
            )));
        }
        Ok(journal)
    }

    fn lock(&self) -> Result<(), JournalError> {
        match self.file.try_lock() {
            Ok(()) => Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => Err(JournalError::Busy {
                id: self.id.clone(),
            }),
            Err(std::fs::TryLockError::Error(source)) => Err(JournalError::Io {
                path: self.path.clone(),
                source,
            }),
        }
    }

    /// The run's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Where the run's shell steps note their process group while they run.
    pub fn group_note(&self) -> &GroupNote {
        &self.group
    }

    /// Ends the run's files: makes the journal durable and drops the group note, which only
    /// matters while a step can still be running.
    pub fn close(mut self) -> Result<(), JournalError> {
        self.sync()?;
        self.group.remove();
        Ok(())
    }

    /// `event` as a journal line.
    fn line(&self, event: &Event) -> Result<Vec<u8>, JournalError> {
        let mut line = serde_json::to_vec(event).map_err(|e| JournalError::Io {
            path: self.path.clone(),
            source: e.into(),
        })?;
        line.push(b'\n');
        Ok(line)
    }

    /// Appends one event with a single write (together with the header, for the first).
    pub fn append(&mut self, event: &Event) -> Result<(), JournalError> {
        let line = self.line(event)?;
        let bytes = match self.header.take() {
            Some(mut header) => {
                header.extend_from_slice(&line);
                header
            }
            None => line,
        };
        self.file
            .write_all(&bytes)
            .map_err(|source| JournalError::Io {
                path: self.path.clone(),
                source,
            })?;
        self.group.journal_grew(bytes.len() as u64);
        Ok(())
    }

    /// Makes everything appended so far durable.
    pub fn sync(&mut self) -> Result<(), JournalError> {
        self.file.sync_data().map_err(|source| JournalError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// Whether another process holds the run at `path` (it is being driven right now).
pub fn is_busy(path: &Path) -> bool {
    File::open(path)
        .is_ok_and(|f| matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::step::{StepInput, StepResult};

    fn step_event() -> Event {
        let mut kwargs = serde_json::Map::new();
        kwargs.insert(
            "n".into(),
            serde_json::json!(12_345_678_901_234_567_890_u64),
        );
        kwargs.insert("f".into(), serde_json::json!(1.5));
        Event::Step(StepEvent {
            depth: 1,
            record: StepRecord {
                index: 3,
                input: StepInput::Function {
                    function: "f".into(),
                    kwargs,
                },
                context: Some("ctx".into()),
                result: StepResult {
                    success: false,
                    exit_code: Some(-3),
                    output: "a\nb".into(),
                    value: Some(serde_json::json!({"x": [1, 2.5, null]})),
                    duration_ms: Some(7),
                    ..StepResult::default()
                },
                allow_failure: true,
                parallel: Some(crate::engine::step::ParallelMember {
                    group: 2,
                    member: 1,
                }),
            },
            at: 99,
        })
    }

    #[test]
    fn events_round_trip_with_numbers() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = Journal::create(dir.path(), "r1", None).expect("create");
        let event = step_event();
        j.append(&event).expect("append");
        drop(j);
        let contents = read(&dir.path().join("r1.jsonl")).expect("read");
        assert_eq!(contents.events.len(), 2);
        assert_eq!(contents.events[1], event);
        assert!(contents.torn.is_none());
    }

    #[test]
    fn torn_last_record_is_reported_and_cut() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = Journal::create(dir.path(), "r2", None).expect("create");
        j.append(&step_event()).expect("append");
        drop(j);
        let path = dir.path().join("r2.jsonl");
        let whole = std::fs::read(&path).expect("read");
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(br#"{"event":"step","depth":1,"ind"#)
            .expect("write");
        drop(f);
        let contents = read(&path).expect("read");
        assert_eq!(contents.events.len(), 2);
        assert_eq!(
            contents.torn,
            Some(TornTail {
                offset: whole.len() as u64,
                len: 30
            })
        );
        let (_j, reopened) = Journal::open(dir.path(), "r2").expect("open");
        assert_eq!(reopened.events.len(), 2);
        assert_eq!(std::fs::read(&path).expect("read"), whole);
    }

    #[test]
    fn complete_json_without_newline_is_torn_too() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = Journal::create(dir.path(), "r3", None).expect("create");
        j.append(&step_event()).expect("append");
        drop(j);
        let path = dir.path().join("r3.jsonl");
        let mut f = OpenOptions::new().append(true).open(&path).expect("open");
        f.write_all(br#"{"event":"fail","depth":0,"error":"x","at":1}"#)
            .expect("write");
        drop(f);
        let contents = read(&path).expect("read");
        assert_eq!(contents.events.len(), 2);
        assert!(contents.torn.is_some());
    }

    #[test]
    fn damage_before_the_end_is_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = Journal::create(dir.path(), "r4", None).expect("create");
        j.append(&step_event()).expect("append");
        j.append(&step_event()).expect("append");
        drop(j);
        let path = dir.path().join("r4.jsonl");
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(
            &path,
            text.replacen("\"event\":\"step\"", "\"event\":\"stop\"", 1),
        )
        .expect("write");
        let err = read(&path).expect_err("corrupt");
        assert!(
            err.to_string()
                .contains("is damaged at line 2: unknown event \"stop\""),
            "{err}"
        );
    }

    #[test]
    fn a_held_run_is_not_removed_and_an_open_after_removal_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut j = Journal::create(dir.path(), "r6", None).expect("create");
        j.append(&step_event()).expect("append");
        let err = Journal::remove(dir.path(), "r6").expect_err("busy");
        assert!(matches!(err, JournalError::Busy { .. }), "{err}");
        assert!(j.path().exists());
        drop(j);
        // A process that opened the file before it was removed must not write to it after.
        let early = OpenOptions::new()
            .read(true)
            .open(dir.path().join("r6.jsonl"))
            .expect("open");
        let freed = Journal::remove(dir.path(), "r6").expect("remove");
        assert!(freed > 0);
        assert!(!dir.path().join("r6.jsonl").exists());
        assert!(!dir.path().join("r6.group").exists());
        assert_eq!(
            std::os::unix::fs::MetadataExt::nlink(&early.metadata().expect("metadata")),
            0
        );
        let err = Journal::open(dir.path(), "r6").expect_err("gone");
        assert!(matches!(err, JournalError::Io { .. }), "{err}");
    }

    #[test]
    fn a_second_open_is_refused_while_the_first_holds_the_run() {
        let dir = tempfile::tempdir().expect("tempdir");
        let j = Journal::create(dir.path(), "r5", None).expect("create");
        assert!(is_busy(j.path()));
        let err = Journal::open(dir.path(), "r5").expect_err("busy");
        assert_eq!(
            err.to_string(),
            "run `r5` is in use by another mekara process; stop that one first"
        );
        drop(j);
        assert!(!is_busy(&dir.path().join("r5.jsonl")));
    }
}
