//! `FileStore`: runs as journal files in one folder, the default run store.
//!
//! A run is its journal file, `RUN_ID.jsonl` (the format is [`crate::engine::journal`]).
//! Every event is written with a single `write` on a file opened for appending, before the
//! script sees the result it records, so a crash loses at most the step in flight. A last
//! line without its newline, or that does not parse, is a torn write: it is reported and
//! cut off before the run is resumed, never trusted. The owning process holds an exclusive
//! lock on the file (`flock`), so two processes cannot drive one run.

use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::engine::error::EngineError;
use crate::engine::group_note::{self, GroupNote};
use crate::engine::journal::{Contents, Event, FORMAT, JournalError, RunEvent, now_ms, parse};
use crate::engine::runs::{RunState, RunSummary, is_run_id, summarize};
use crate::engine::store::{RunLog, Store, newest_of};
use crate::store::runs_index::{self, RunsIndex};

/// Reads the journal at `path` without taking it.
pub(crate) fn read(path: &Path) -> Result<Contents, JournalError> {
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

/// An open, locked journal that events are appended to.
#[derive(Debug)]
pub(crate) struct Journal {
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
    pub(crate) fn create(
        dir: &Path,
        id: &str,
        token_sha256: Option<String>,
    ) -> Result<Journal, JournalError> {
        let path = dir.join(format!("{id}.jsonl"));
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        // Marked before it exists: a run is never going on without its mark.
        RunsIndex::of(dir).going_on(id);
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
    pub(crate) fn open(dir: &Path, id: &str) -> Result<(Journal, Contents), JournalError> {
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
    pub(crate) fn remove(dir: &Path, id: &str) -> Result<u64, JournalError> {
        let note_bytes =
            std::fs::symlink_metadata(group_note::path(dir, id)).map_or(0, |m| m.len());
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
        RunsIndex::of(dir).forget(id);
        Ok(len + note_bytes)
    }

    /// Opens run `id`'s journal and group note in `dir` and takes the run's lock.
    fn take(dir: &Path, id: &str) -> Result<Journal, JournalError> {
        let path = dir.join(format!("{id}.jsonl"));
        let io = |source| JournalError::Io {
            path: path.clone(),
            source,
        };
        RunsIndex::of(dir).going_on(id);
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
        if removed(&journal.file, &journal.path) {
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
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    /// The file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Where the run's shell steps note their process group while they run.
    pub(crate) fn group_note(&self) -> &GroupNote {
        &self.group
    }

    /// Ends the run's files: makes the journal durable and drops the group note, which only
    /// matters while a step can still be running.
    pub(crate) fn close(mut self) -> Result<(), JournalError> {
        self.sync()?;
        self.group.remove();
        // The run's summary goes to the index once it ended (read here once, so that a
        // listing need not read the journal again).
        if let Some(dir) = self.path.parent() {
            let len = self.file.metadata().map_or(0, |m| m.len());
            let summary = summarize(
                self.id.clone(),
                &self.path,
                read(&self.path),
                &|| false,
                len,
            );
            RunsIndex::of(dir).ended(&summary, &self.path);
        }
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
    pub(crate) fn append(&mut self, event: &Event) -> Result<(), JournalError> {
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
    pub(crate) fn sync(&mut self) -> Result<(), JournalError> {
        self.file.sync_data().map_err(|source| JournalError::Io {
            path: self.path.clone(),
            source,
        })
    }
}

/// Whether another process holds the run at `path` (it is being driven right now).
pub(crate) fn is_busy(path: &Path) -> bool {
    File::open(path)
        .is_ok_and(|f| matches!(f.try_lock_shared(), Err(std::fs::TryLockError::WouldBlock)))
}

impl RunLog for Journal {
    fn id(&self) -> &str {
        Journal::id(self)
    }

    fn path(&self) -> &Path {
        Journal::path(self)
    }

    fn append(&mut self, event: &Event) -> Result<(), JournalError> {
        Journal::append(self, event)
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        Journal::sync(self)
    }

    fn read(&self) -> Result<Contents, JournalError> {
        read(Journal::path(self))
    }

    fn group_note(&self) -> &GroupNote {
        Journal::group_note(self)
    }

    fn close(self: Box<Self>) -> Result<(), JournalError> {
        Journal::close(*self)
    }
}

/// Runs as journal files in one folder, locked with `flock`.
#[derive(Debug)]
pub(crate) struct FileStore {
    dir: PathBuf,
}

impl FileStore {
    pub(crate) fn new(dir: PathBuf) -> FileStore {
        FileStore { dir }
    }

    /// The journal file of run `id`, when there is one.
    fn path(&self, id: &str) -> Result<PathBuf, EngineError> {
        let path = self.dir.join(format!("{id}.jsonl"));
        if path.is_file() {
            Ok(path)
        } else {
            Err(EngineError::RunNotFound { id: id.to_string() })
        }
    }

    fn summary(&self, id: String) -> RunSummary {
        let path = self.dir.join(format!("{id}.jsonl"));
        let size = |p: &Path| std::fs::symlink_metadata(p).map_or(0, |m| m.len());
        // One `stat` of the journal serves both its share of the bytes and, for a run going
        // on, the length its step note is compared with.
        let journal_len = size(&path);
        let bytes = journal_len + size(&group_note::path(&self.dir, &id));
        let mut summary = summarize(id, &path, read(&path), &|| is_busy(&path), bytes);
        if summary.state == RunState::Active {
            summary.now = group_note::doing(&self.dir, &summary.id, journal_len);
        }
        summary
    }

    /// The summaries of runs `ids`, from the index where it has them: an ended run's line
    /// when its journal has not changed since, the journal otherwise. `all` says `ids` are
    /// every run of the folder, so that a folder without an index gets one built from them.
    fn summaries(&self, ids: Vec<String>, all: bool) -> Vec<RunSummary> {
        let index = RunsIndex::of(&self.dir);
        let Some(going_on) = index.going_on_ids() else {
            let runs: Vec<RunSummary> = ids.into_iter().map(|id| self.summary(id)).collect();
            if all {
                index.build(&runs, &self.dir);
            }
            return runs;
        };
        let wanted: HashSet<&str> = ids.iter().map(String::as_str).collect();
        let mut ended = index.ended_summaries(if all { None } else { Some(&wanted) });
        ids.iter()
            .map(|id| {
                let journal = self.dir.join(format!("{id}.jsonl"));
                match ended.remove(id) {
                    Some((stamped, summary))
                        if !going_on.contains(id)
                            && runs_index::stamp(&journal) == Some(stamped) =>
                    {
                        summary
                    }
                    _ => {
                        let summary = self.summary(id.clone());
                        index.ended(&summary, &journal);
                        summary
                    }
                }
            })
            .collect()
    }
}

/// The ids of the journal files in `dir`, sorted (none when it cannot be read). A file
/// whose name is not a run id is skipped with a warning ([`crate::store::listed::listed_id`]).
pub(crate) fn journal_ids(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let place = format!("`{}`", dir.display());
    let mut ids: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            let name = e.file_name();
            let id = name.to_string_lossy();
            let id = id.strip_suffix(".jsonl")?;
            crate::store::listed::listed_id(id, &place).then(|| id.to_string())
        })
        .collect();
    ids.sort();
    ids
}

/// Makes `dir` for runs, with a `.gitignore` so that runs are never committed by accident.
pub(crate) fn make_runs_dir(dir: &Path) -> Result<(), EngineError> {
    let io = |source| {
        EngineError::Journal(JournalError::Io {
            path: dir.to_path_buf(),
            source,
        })
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let ignore = dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(
            &ignore,
            "# mekara's run journals: local state, not source\n*\n",
        )
        .map_err(io)?;
    }
    Ok(())
}

impl Store for FileStore {
    fn place(&self) -> String {
        self.dir.display().to_string()
    }

    fn create(
        &self,
        id: &str,
        token_sha256: Option<String>,
    ) -> Result<Box<dyn RunLog>, EngineError> {
        make_runs_dir(&self.dir)?;
        Ok(Box::new(Journal::create(&self.dir, id, token_sha256)?))
    }

    fn open(&self, id: &str) -> Result<(Box<dyn RunLog>, Contents), EngineError> {
        self.path(id)?;
        let (journal, contents) = Journal::open(&self.dir, id)?;
        Ok((Box::new(journal), contents))
    }

    fn read(&self, id: &str) -> Result<Contents, EngineError> {
        Ok(read(&self.path(id)?)?)
    }

    fn list(&self, id: Option<&str>) -> Result<Vec<RunSummary>, EngineError> {
        if let Some(id) = id {
            self.path(id)?;
            return Ok(vec![self.summary(id.to_string())]);
        }
        Ok(self.summaries(journal_ids(&self.dir), true))
    }

    /// Takes the newest journals from the folder's listing (ids begin with the time they
    /// were made), and summarizes only those.
    fn list_newest(&self, newest: usize) -> Result<(Vec<RunSummary>, usize), EngineError> {
        if RunsIndex::of(&self.dir).going_on_ids().is_none() {
            // No index yet: the first listing reads every journal once to build it.
            return Ok(newest_of(self.list(None)?, newest));
        }
        let mut ids = journal_ids(&self.dir);
        let all = ids.len();
        let mut from = all.saturating_sub(newest);
        // Runs made in the same second as the oldest one taken may be newer than it: they
        // are read too, and their start times decide.
        if let Some(second) = ids.get(from).and_then(|id| id.get(..15)).map(str::to_owned) {
            while from > 0 && ids[from - 1].starts_with(&second) {
                from -= 1;
            }
        }
        ids.drain(..from);
        let every = ids.len() == all;
        Ok((newest_of(self.summaries(ids, every), newest).0, all))
    }

    /// Reads only the runs the index marks as going on (all of them when it is not kept
    /// yet), and clears the marks of those that ended.
    fn list_open(&self) -> Result<Vec<RunSummary>, EngineError> {
        let index = RunsIndex::of(&self.dir);
        let Some(going_on) = index.going_on_ids() else {
            let mut runs = self.list(None)?;
            runs.retain(|r| !r.state.has_ended());
            return Ok(runs);
        };
        let mut ids: Vec<String> = going_on.into_iter().filter(|id| is_run_id(id)).collect();
        ids.sort();
        let mut runs = Vec::with_capacity(ids.len());
        for id in ids {
            if !self.dir.join(format!("{id}.jsonl")).is_file() {
                // Marked, then stopped before its journal was made, or removed.
                index.forget(&id);
                continue;
            }
            let journal = self.dir.join(format!("{id}.jsonl"));
            let summary = self.summary(id);
            if summary.state.has_ended() {
                index.ended(&summary, &journal);
            } else {
                runs.push(summary);
            }
        }
        Ok(runs)
    }

    fn remove(&self, id: &str) -> Result<u64, EngineError> {
        self.path(id)?;
        Ok(Journal::remove(&self.dir, id)?)
    }
}

/// Whether the journal open as `file` was removed from its path (`mekara runs prune`) while
/// it was being opened: on Unix it has no name left.
#[cfg(unix)]
fn removed(file: &File, _path: &Path) -> bool {
    file.metadata()
        .is_ok_and(|m| std::os::unix::fs::MetadataExt::nlink(&m) == 0)
}

/// On Windows a file being removed keeps its name until its last handle closes: the system
/// says it is pending deletion.
#[cfg(windows)]
fn removed(file: &File, _path: &Path) -> bool {
    crate::engine::process::delete_pending(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::journal::*;
    use crate::engine::step::StepRecord;
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
    fn the_newest_of_runs_made_in_one_second_is_the_one_started_last() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = FileStore::new(dir.path().to_path_buf());
        // Made in this order; the ids' random tails sort the other way.
        for id in [
            "20261126-235959-0000",
            "20261127-000000-ffff",
            "20261127-000000-0000",
        ] {
            let mut j = Journal::create(dir.path(), id, None).expect("create");
            j.append(&Event::Push(PushEvent {
                depth: 0,
                script: "s".into(),
                compiled: true,
                request: String::new(),
                working_dir: "/".into(),
                origin: Origin::Start,
                called_as: None,
                allow_failure: false,
                at: 0,
            }))
            .expect("append");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let ids = |runs: Vec<RunSummary>| runs.into_iter().map(|r| r.id).collect::<Vec<_>>();
        // Once without the runs index (every journal is read), once with it.
        for _ in 0..2 {
            let (runs, all) = store.list_newest(1).expect("list");
            assert_eq!(
                (ids(runs), all),
                (vec!["20261127-000000-0000".to_string()], 3)
            );
            let (runs, _) = store.list_newest(2).expect("list");
            assert_eq!(ids(runs), ["20261127-000000-ffff", "20261127-000000-0000"]);
        }
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
        // Windows keeps the name of a file being removed until its last handle closes.
        #[cfg(unix)]
        assert!(!dir.path().join("r6.jsonl").exists());
        assert!(!dir.path().join("r6.group").exists());
        // Wine does not report a removal pending on another handle (`DeletePending`), so
        // under Wine this is checked on Unix only; Windows documents that it does.
        #[cfg(unix)]
        assert!(removed(&early, &dir.path().join("r6.jsonl")));
        #[cfg(windows)]
        drop(early);
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
