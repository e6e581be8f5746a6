//! The run store behind one interface (DESIGN §13): [`Store`] keeps runs, [`RunLog`] is one
//! run held for writing. Two implementations: the journal files under `.mekara/runs/`
//! ([`FileStore`], the default) and PostgreSQL ([`super::postgres::PgStore`], shared by a
//! team's hosts), chosen by `crate::store_config` from `[store] url` in `.mekara/config.toml`
//! or `MEKARA_STORE_URL`.
//!
//! Both keep the same promises: an event is durable before the script sees its result, one
//! process holds a run at a time (and loses it when it dies), and a run reads back as the
//! same events, in the same JSON lines, that replay the same way. The step group note stays
//! a local file in either case: a process group only means something on its own host.

use std::path::{Path, PathBuf};

use super::error::EngineError;
use super::group_note::{self, GroupNote};
use super::journal::{self, Contents, Event, Journal, JournalError};
use super::runs::{RunSummary, summarize};

/// Where runs are kept.
pub(crate) trait Store: Send + Sync + std::fmt::Debug {
    /// Where the runs are, for people (never with a password).
    fn place(&self) -> String;

    /// Whether several hosts share it.
    fn is_shared(&self) -> bool {
        false
    }

    /// Creates run `id`, held by the caller, its header (with `token_sha256`) written with
    /// its first event. An id already taken is [`JournalError::Io`] with
    /// [`std::io::ErrorKind::AlreadyExists`].
    fn create(
        &self,
        id: &str,
        token_sha256: Option<String>,
    ) -> Result<Box<dyn RunLog>, EngineError>;

    /// Takes run `id` to continue it (refused while another process holds it) and reads
    /// its events; a torn last record is cut off.
    fn open(&self, id: &str) -> Result<(Box<dyn RunLog>, Contents), EngineError>;

    /// Reads run `id` without taking it.
    fn read(&self, id: &str) -> Result<Contents, EngineError>;

    /// Every run (or only run `id`), oldest first.
    fn list(&self, id: Option<&str>) -> Result<Vec<RunSummary>, EngineError>;

    /// Removes run `id` while holding it; a step a killed mekara left running on this host
    /// is killed first. Returns the bytes freed.
    fn remove(&self, id: &str) -> Result<u64, EngineError>;
}

/// Watches the runs a process holds: wraps each one taken for writing, with the events it
/// already has (none for a new run), to see every event appended after. How traces are
/// exported (`crate::traces`) without the engine knowing of them.
pub(crate) trait Watch: Send + Sync + std::fmt::Debug {
    /// `log`, wrapped.
    fn wrap(&self, log: Box<dyn RunLog>, history: &[Event]) -> Box<dyn RunLog>;
}

/// One run, held by this process, that events are appended to.
pub trait RunLog: Send + std::fmt::Debug {
    /// The run's id.
    fn id(&self) -> &str;

    /// Where the run is, for messages (a journal file, or the run in the database).
    fn path(&self) -> &Path;

    /// Appends one event; it is durable when this returns (PostgreSQL), or with the next
    /// [`RunLog::sync`] as the file store promises.
    fn append(&mut self, event: &Event) -> Result<(), JournalError>;

    /// Makes everything appended so far durable.
    fn sync(&mut self) -> Result<(), JournalError>;

    /// Reads the run's events again.
    fn read(&self) -> Result<Contents, JournalError>;

    /// Where the run's steps note their process group while they run (a local file).
    fn group_note(&self) -> &GroupNote;

    /// Ends the hold: makes the run durable, drops the group note, releases the lock.
    fn close(self: Box<Self>) -> Result<(), JournalError>;
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
        journal::read(Journal::path(self))
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
        let bytes = [path.clone(), group_note::path(&self.dir, &id)]
            .iter()
            .filter_map(|p| std::fs::symlink_metadata(p).ok())
            .map(|m| m.len())
            .sum();
        summarize(
            id,
            &path,
            journal::read(&path),
            &|| journal::is_busy(&path),
            bytes,
        )
    }
}

/// The ids of the journal files in `dir`, sorted (none when it cannot be read).
pub(crate) fn journal_ids(dir: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut ids: Vec<String> = entries
        .flatten()
        .filter_map(|e| {
            e.file_name()
                .to_str()?
                .strip_suffix(".jsonl")
                .map(str::to_string)
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
        Ok(journal::read(&self.path(id)?)?)
    }

    fn list(&self, id: Option<&str>) -> Result<Vec<RunSummary>, EngineError> {
        if let Some(id) = id {
            self.path(id)?;
            return Ok(vec![self.summary(id.to_string())]);
        }
        Ok(journal_ids(&self.dir)
            .into_iter()
            .map(|id| self.summary(id))
            .collect())
    }

    fn remove(&self, id: &str) -> Result<u64, EngineError> {
        self.path(id)?;
        Ok(Journal::remove(&self.dir, id)?)
    }
}
