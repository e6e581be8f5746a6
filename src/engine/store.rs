//! The run store behind one interface (DESIGN §13): [`Store`] keeps runs, [`RunLog`] is one
//! run held for writing. The implementations are backends outside the engine
//! (`crate::store`): the journal files under `.mekara/runs/` (the default) and PostgreSQL
//! (shared by a team's hosts), chosen by `crate::store::config` from `[store] url` in
//! `.mekara/config.toml` or `MEKARA_STORE_URL`.
//!
//! Both keep the same promises: an event is durable before the script sees its result, one
//! process holds a run at a time (and loses it when it dies), and a run reads back as the
//! same events, in the same JSON lines, that replay the same way. The step group note stays
//! a local file in either case: a process group only means something on its own host.

use std::path::Path;
use std::sync::Arc;

use super::error::EngineError;
use super::group_note::GroupNote;
use super::journal::{Contents, Event, JournalError};
use super::runs::{RunSummary, is_run_id};

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

    /// The `newest` newest runs, oldest first, and how many runs there are in all: what
    /// `mekara runs` shows by default. Stores that can read fewer runs override it.
    fn list_newest(&self, newest: usize) -> Result<(Vec<RunSummary>, usize), EngineError> {
        Ok(newest_of(self.list(None)?, newest))
    }

    /// The runs that have not ended (their root script's frame is still on the stack, or
    /// it never started), oldest first: what `status` and `resume {}` look at.
    fn list_open(&self) -> Result<Vec<RunSummary>, EngineError> {
        let mut runs = self.list(None)?;
        runs.retain(|r| !r.state.has_ended());
        Ok(runs)
    }

    /// Removes run `id` while holding it; a step a killed mekara left running on this host
    /// is killed first. Returns the bytes freed.
    fn remove(&self, id: &str) -> Result<u64, EngineError>;
}

/// The `newest` last of `runs` (oldest first), and how many `runs` there were.
pub(crate) fn newest_of(mut runs: Vec<RunSummary>, newest: usize) -> (Vec<RunSummary>, usize) {
    oldest_first(&mut runs);
    let all = runs.len();
    runs.drain(..all.saturating_sub(newest));
    (runs, all)
}

/// How long [`RunStore::open`] waits for a run another process holds before refusing it.
pub(crate) const BUSY_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Sorts `runs` by when they started. An id begins with the second its run was made, so
/// two runs of one second sort by their random tail unless their start times are looked at.
pub(crate) fn oldest_first(runs: &mut [RunSummary]) {
    runs.sort_by(|a, b| (a.started_at, &a.id).cmp(&(b.started_at, &b.id)));
}

/// Watches the runs a process holds: wraps each one taken for writing, with the events it
/// already has (none for a new run), to see every event appended after. How traces are
/// exported (`crate::traces`) without the engine knowing of them.
pub(crate) trait Watch: Send + Sync + std::fmt::Debug {
    /// `log`, wrapped.
    fn wrap(&self, log: Box<dyn RunLog>, history: &[Event]) -> Box<dyn RunLog>;
}

/// Sees each event appended to one run, once it is appended: what a [`Watch`] puts around
/// a run ([`Watched`]), so that a watch writes no `RunLog` of its own.
pub(crate) trait Seer: Send + std::fmt::Debug {
    /// `event` was appended to run `id`.
    fn seen(&mut self, id: &str, event: &Event);
}

/// A run held for writing whose appended events are shown to a [`Seer`].
#[derive(Debug)]
pub(crate) struct Watched<S> {
    /// The run.
    pub inner: Box<dyn RunLog>,
    /// What sees its events.
    pub seer: S,
}

impl<S: Seer + 'static> RunLog for Watched<S> {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn append(&mut self, event: &Event) -> Result<(), JournalError> {
        self.inner.append(event)?;
        self.seer.seen(self.inner.id(), event);
        Ok(())
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        self.inner.sync()
    }

    fn read(&self) -> Result<Contents, JournalError> {
        self.inner.read()
    }

    fn group_note(&self) -> &GroupNote {
        self.inner.group_note()
    }

    fn close(self: Box<Self>) -> Result<(), JournalError> {
        self.inner.close()
    }
}

/// One run, held by this process, that events are appended to.
pub(crate) trait RunLog: Send + std::fmt::Debug {
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

/// Where runs are kept: the folder of journal files (the default), or the shared
/// PostgreSQL store (the backends in `crate::store`). Every reader and writer goes through it.
#[derive(Debug, Clone)]
pub(crate) struct RunStore {
    store: Arc<dyn Store>,
    /// What watches each run taken for writing (traces, notifications), innermost first.
    watches: Vec<Arc<dyn Watch>>,
}

impl RunStore {
    /// [`super::runs::resume_command`] for run `id`, with the agent its journal names (the
    /// plain command when the journal does not read).
    pub(crate) fn resume_command(&self, id: &str, retry: bool) -> String {
        let events = self.read(id).map(|c| c.events).unwrap_or_default();
        super::runs::resume_command(id, super::runs::driven_by(&events), retry)
    }

    /// Runs kept by `store`.
    pub(crate) fn with(store: Arc<dyn Store>) -> RunStore {
        RunStore {
            store,
            watches: Vec::new(),
        }
    }

    /// The same runs, each run taken for writing wrapped by `watch` too (around the
    /// watches it already has).
    pub(crate) fn watched(mut self, watch: Arc<dyn Watch>) -> RunStore {
        self.watches.push(watch);
        self
    }

    /// Where the runs are, for people: the folder, or the database (its password hidden)
    /// and the project.
    pub(crate) fn place(&self) -> String {
        self.store.place()
    }

    /// Whether runs are in a store shared by several hosts (they then record their host
    /// and user).
    pub(crate) fn is_shared(&self) -> bool {
        self.store.is_shared()
    }

    /// Creates a new run, keeping `token_sha256` in its header, under the first id of
    /// `new_id(0)`, `new_id(1)`, ... that is free.
    pub(crate) fn create(
        &self,
        new_id: &dyn Fn(u32) -> String,
        token_sha256: Option<String>,
    ) -> Result<Box<dyn RunLog>, EngineError> {
        let mut attempt = 0u32;
        let mut id = new_id(attempt);
        loop {
            // An id can come from a cassette being replayed: it names files, so it is checked.
            if !is_run_id(&id) {
                return Err(EngineError::BadRunId { id });
            }
            match self
                .store
                .create(&id, token_sha256.clone())
                .map(|log| self.wrap(log, &[]))
            {
                Err(EngineError::Journal(JournalError::Io { source, .. }))
                    if source.kind() == std::io::ErrorKind::AlreadyExists && attempt < 16 =>
                {
                    attempt += 1;
                    let next = new_id(attempt);
                    // A runner that names the run (a queue worker's child, a replay) offers
                    // no other id: the run is another process's, made or in the making.
                    if next == id {
                        return Err(JournalError::Taken { id }.into());
                    }
                    id = next;
                }
                other => return other,
            }
        }
    }

    /// Takes run `id` to continue it: holds its lock and reads its events. A run held by
    /// another process is waited for up to [`BUSY_GRACE`] before it is refused: the holder
    /// may be a server on its way out (a client that restarts its MCP server starts the
    /// new one before the old one has exited).
    pub(crate) fn open(&self, id: &str) -> Result<(Box<dyn RunLog>, Contents), EngineError> {
        let id = checked(id)?;
        let deadline = std::time::Instant::now() + BUSY_GRACE;
        let (log, contents) = loop {
            match self.store.open(id) {
                Err(EngineError::Journal(JournalError::Busy { .. }))
                    if std::time::Instant::now() < deadline =>
                {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                }
                other => break other?,
            }
        };
        Ok((self.wrap(log, &contents.events), contents))
    }

    fn wrap(&self, log: Box<dyn RunLog>, history: &[Event]) -> Box<dyn RunLog> {
        self.watches
            .iter()
            .fold(log, |log, watch| watch.wrap(log, history))
    }

    /// Reads run `id` without taking it.
    pub(crate) fn read(&self, id: &str) -> Result<Contents, EngineError> {
        self.store.read(checked(id)?)
    }

    /// Every run, oldest first.
    pub(crate) fn list(&self) -> Result<Vec<RunSummary>, EngineError> {
        let mut runs = self.store.list(None)?;
        oldest_first(&mut runs);
        Ok(runs)
    }

    /// The `newest` newest runs, oldest first, and how many there are in all (see
    /// [`Store::list_newest`]).
    pub(crate) fn list_newest(
        &self,
        newest: usize,
    ) -> Result<(Vec<RunSummary>, usize), EngineError> {
        let (mut runs, all) = self.store.list_newest(newest)?;
        oldest_first(&mut runs);
        Ok((runs, all))
    }

    /// The runs that have not ended, oldest first (see [`Store::list_open`]).
    pub(crate) fn list_open(&self) -> Result<Vec<RunSummary>, EngineError> {
        let mut runs = self.store.list_open()?;
        oldest_first(&mut runs);
        Ok(runs)
    }

    /// What run `id` adds up to, as `mekara runs` lists it.
    pub(crate) fn summary(&self, id: &str) -> Result<RunSummary, EngineError> {
        self.store
            .list(Some(checked(id)?))?
            .pop()
            .ok_or_else(|| EngineError::RunNotFound { id: id.to_string() })
    }

    /// Removes run `id`, holding the run's lock while it does: a run another process
    /// drives is refused ([`JournalError::Busy`]). A step that a killed mekara left running
    /// on this host is killed first, as a resume would. Returns the bytes freed.
    pub(crate) fn remove(&self, id: &str) -> Result<u64, EngineError> {
        self.store.remove(checked(id)?)
    }
}

/// `id`, when it can be a run's id.
fn checked(id: &str) -> Result<&str, EngineError> {
    if is_run_id(id) {
        Ok(id)
    } else {
        Err(EngineError::RunNotFound { id: id.to_string() })
    }
}
