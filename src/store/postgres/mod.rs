//! `PgStore`: runs in PostgreSQL, shared by every host with a checkout of the project.
//!
//! It keeps the file store's promises ([`crate::engine::store`]):
//! - an event is one `INSERT` committed before [`RunLog::append`] returns, so before the
//!   script sees the result it records (the header goes in the same statement as the first
//!   event, as the file store writes them in one `write`);
//! - one writer per run: the holder keeps a session-level advisory lock
//!   (`pg_try_advisory_lock`) on a key derived from the project and the run id, on a
//!   connection of its own for as long as it holds the run. The server drops the lock when
//!   that connection ends, so a holder that died (SIGKILL, a crashed host) leaves the run
//!   to whoever takes it up next, from any host;
//! - the same events: each is the JSON line the journal file would hold, stored as text, so
//!   replay, new event kinds and `store export` need nothing of their own.
//!
//! The step group note stays a local file under the runs folder: a takeover on the same host
//! kills a step a killed mekara left running, as with files; a takeover on another host
//! cannot reach the first host's processes (see README, "Shared run store").
//!
//! Calls are synchronous (the `postgres` crate), as the executor's appends are; the MCP
//! server runs executors on blocking threads, where that is allowed.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::str::FromStr as _;
use std::sync::Arc;
use std::time::Duration;

use postgres::error::SqlState;
use postgres::{Client, GenericClient, NoTls};
use sha2::Digest as _;

use super::file::{self, journal_ids, make_runs_dir};
use crate::display::redact_url;
use crate::engine::error::EngineError;
use crate::engine::group_note::{self, GroupNote};
use crate::engine::journal::{self, Contents, Event, JournalError, StoreFailure};
use crate::engine::runs::{self, RunSummary, summarize};
use crate::engine::store::{RunLog, Store};
use crate::host::{this_host, this_user};

mod pgpass;
mod queue;
mod tls;

pub(crate) use queue::{Cancel, Job, JobState, NewJob, QueueRow, Worker};

/// The schema's migrations, in order: version N is `MIGRATIONS[..N]` applied.
const MIGRATIONS: &[&str] = &[
    include_str!("1_runs.sql"),
    include_str!("2_queue.sql"),
    include_str!("3_run_ids.sql"),
];

/// The schema version this mekara reads and writes.
pub(crate) const SCHEMA: i32 = 3;

/// How long a connection may take before the store is said to be unreachable, unless the
/// URL sets `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The advisory lock `mekara store migrate` holds, so two migrations never interleave.
const MIGRATE_KEY: i64 = 0x6d65_6b61_7261_0001;

/// Why the shared run store could not be used. Every message names the store with its
/// password hidden.
#[derive(Debug, thiserror::Error)]
pub(crate) enum StoreError {
    /// The setting is wrong.
    #[error(
        "the run store setting {from} is not a PostgreSQL URL: {reason}; write `postgres://USER:PASSWORD@HOST:PORT/DATABASE`"
    )]
    BadUrl {
        /// Where it was set.
        from: String,
        /// What is wrong.
        reason: String,
    },
    /// A store off this machine, with TLS turned off.
    #[error(
        "the run store `{url}` (from {from}) is not on this machine, and mekara sends its password and runs to such a store only over TLS; remove `sslmode=disable` (TLS is then required and the server's certificate checked, trusting the CA in `sslrootcert=FILE` too), or reach the store through a Unix socket, `localhost` or a loopback address"
    )]
    Plaintext {
        /// The URL, its password hidden.
        url: String,
        /// Where it was set.
        from: String,
    },
    /// `.mekara/config.toml` could not be read.
    #[error("`{}`: {reason}", .file.display())]
    Config {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The server could not be reached.
    #[error(
        "cannot reach the run store `{url}`: {reason}; check that the server is up and the URL in {from}"
    )]
    Connect {
        /// The URL, its password hidden.
        url: String,
        /// Where it was set.
        from: String,
        /// Why.
        reason: String,
    },
    /// TLS is needed and cannot be set up (`sslrootcert` unreadable, no trusted CA).
    #[error("the run store `{url}` (from {from}) needs TLS, and it cannot be set up: {reason}")]
    TlsSetup {
        /// The URL, its password hidden.
        url: String,
        /// Where it was set.
        from: String,
        /// Why, and what to do.
        reason: String,
    },
    /// The TLS handshake failed (an untrusted certificate, a name it does not cover).
    #[error("cannot use the run store `{url}` (from {from}): {reason}")]
    Handshake {
        /// The URL, its password hidden.
        url: String,
        /// Where it was set.
        from: String,
        /// Why, and what to do.
        reason: String,
    },
    /// The database has no mekara schema, or an older one.
    #[error(
        "the run store `{url}` has schema version {found} and this mekara needs version {SCHEMA}: run `mekara store migrate`"
    )]
    Older {
        /// The URL, its password hidden.
        url: String,
        /// Its version (0: no mekara tables yet).
        found: i32,
    },
    /// The database was migrated by a newer mekara.
    #[error(
        "the run store `{url}` has schema version {found}, newer than this mekara's ({SCHEMA}), so a newer mekara migrated it; upgrade mekara to use it"
    )]
    Newer {
        /// The URL, its password hidden.
        url: String,
        /// Its version.
        found: i32,
    },
    /// A query failed.
    #[error("run store `{url}`: {reason}")]
    Query {
        /// The URL, its password hidden.
        url: String,
        /// Why.
        reason: String,
    },
}

/// Where the shared store is and which project's runs are ours (read from the project's
/// settings by [`crate::store::config`]).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// The URL, expanded.
    pub url: String,
    /// Where it was set, for messages.
    pub from: String,
    /// The project id.
    pub project: String,
}

/// `text` with every password `url` holds (as written and decoded) shown as `***`.
pub(crate) fn redact(text: &str, url: &str) -> String {
    let mut text = text.replace(url, &redact_url(url));
    if let Ok(config) = postgres::Config::from_str(url)
        && let Some(password) = config.get_password()
        && password.len() >= 3
    {
        text = text.replace(&*String::from_utf8_lossy(password), "***");
    }
    text
}

/// The connection settings and the project: what every connection needs.
#[derive(Debug)]
struct Db {
    config: postgres::Config,
    /// The TLS connector; `None`: a store on this machine, reached without TLS.
    tls: Option<tls::Tls>,
    url: String,
    shown: String,
    from: String,
    project: String,
}

impl Db {
    fn failed_json(&self, e: &serde_json::Error) -> StoreError {
        StoreError::Query {
            url: self.shown.clone(),
            reason: e.to_string(),
        }
    }

    /// A connection whose schema is the one this mekara reads.
    fn connect(&self) -> Result<Client, StoreError> {
        let mut client = self.connect_any()?;
        match self.version(&mut client)? {
            SCHEMA => Ok(client),
            found if found < SCHEMA => Err(StoreError::Older {
                url: self.shown.clone(),
                found,
            }),
            found => Err(StoreError::Newer {
                url: self.shown.clone(),
                found,
            }),
        }
    }

    /// A connection, whatever its schema.
    fn connect_any(&self) -> Result<Client, StoreError> {
        let connected = match &self.tls {
            None => self.config.connect(NoTls),
            Some(tls) => self.config.connect(tls.0.clone()),
        };
        connected.map_err(|e| match tls::handshake_failure(&e, &self.config) {
            Some(reason) => StoreError::Handshake {
                url: self.shown.clone(),
                from: self.from.clone(),
                reason,
            },
            None => StoreError::Connect {
                url: self.shown.clone(),
                from: self.from.clone(),
                reason: redact(&reason(&e), &self.url),
            },
        })
    }

    /// The schema version (0 when mekara's tables are not there).
    fn version(&self, client: &mut Client) -> Result<i32, StoreError> {
        match client.query_opt("SELECT version FROM mekara_schema", &[]) {
            Ok(row) => Ok(row.map_or(0, |r| r.get(0))),
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => Ok(0),
            Err(e) => Err(self.failed(&e)),
        }
    }

    fn failed(&self, e: &postgres::Error) -> StoreError {
        StoreError::Query {
            url: self.shown.clone(),
            reason: redact(&reason(e), &self.url),
        }
    }

    /// The store and the project, for messages.
    fn place(&self) -> String {
        format!(
            "the run store `{}` (project `{}`)",
            self.shown, self.project
        )
    }

    /// Whether `id`, read from the database, can be a run's id; one that cannot (a row
    /// written by other means, before the schema's check) is skipped with a warning.
    fn listed(&self, id: &str) -> bool {
        crate::store::listed::listed_id(id, &self.place())
    }

    /// Where run `id` is, for messages.
    fn label(&self, id: &str) -> PathBuf {
        PathBuf::from(format!("{} run {id}", self.shown))
    }

    /// Run `id`'s events (`None`: no such run), as the lines of its journal.
    fn lines(&self, client: &mut Client, id: &str) -> Result<Option<Vec<String>>, StoreError> {
        let rows = client
            .query(
                "SELECT e.body FROM mekara_runs r LEFT JOIN mekara_events e \
                 ON e.project = r.project AND e.run_id = r.id \
                 WHERE r.project = $1 AND r.id = $2 ORDER BY e.line",
                &[&self.project, &id],
            )
            .map_err(|e| self.failed(&e))?;
        if rows.is_empty() {
            return Ok(None);
        }
        Ok(Some(
            rows.iter()
                .filter_map(|r| r.get::<_, Option<String>>(0))
                .collect(),
        ))
    }

    /// The keys of the advisory locks held now in this database: the runs being driven.
    fn held(&self, client: &mut impl GenericClient) -> Result<HashSet<i64>, StoreError> {
        let rows = client
            .query(
                "SELECT classid::bigint, objid::bigint FROM pg_locks \
                 WHERE locktype = 'advisory' AND objsubid = 1 AND granted \
                 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
                &[],
            )
            .map_err(|e| self.failed(&e))?;
        Ok(rows
            .iter()
            .map(|r| {
                let (high, low): (i64, i64) = (r.get(0), r.get(1));
                i64::from_ne_bytes(
                    ((u64::try_from(high).unwrap_or(0) << 32) | u64::try_from(low).unwrap_or(0))
                        .to_ne_bytes(),
                )
            })
            .collect())
    }

    /// The advisory lock key of run `id`.
    fn key(&self, id: &str) -> i64 {
        let digest = sha2::Sha256::digest(format!("mekara-run\0{}\0{id}", self.project));
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        i64::from_be_bytes(bytes)
    }
}

impl From<StoreError> for JournalError {
    fn from(e: StoreError) -> JournalError {
        let usage = matches!(
            e,
            StoreError::BadUrl { .. }
                | StoreError::Config { .. }
                | StoreError::Plaintext { .. }
                | StoreError::TlsSetup { .. }
        );
        JournalError::Store(StoreFailure {
            error: Box::new(e),
            usage,
        })
    }
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> EngineError {
        EngineError::Journal(e.into())
    }
}

/// What a PostgreSQL error says, without the crate's framing.
fn reason(e: &postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        return db.message().to_string();
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// The journal lines `lines` as the bytes of a journal file.
fn file_bytes(lines: &[String]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
    }
    bytes
}

/// Runs in PostgreSQL.
#[derive(Debug)]
pub(crate) struct PgStore {
    db: Arc<Db>,
    /// This host, as runs record it.
    host: String,
    /// This user, as runs record it.
    user: String,
    /// The local runs folder, for step group notes.
    notes: PathBuf,
}

impl PgStore {
    /// The store `settings` name; group notes go to the local `notes` folder.
    pub(crate) fn new(settings: Settings, notes: PathBuf) -> Result<PgStore, StoreError> {
        let shown = redact_url(&settings.url);
        let bad = |reason: &str| StoreError::BadUrl {
            from: settings.from.clone(),
            reason: redact(reason, &settings.url),
        };
        let (rest, params) = tls::take_params(&settings.url);
        let mut config = postgres::Config::from_str(&rest).map_err(|e| bad(&e.to_string()))?;
        let tls = tls::apply(&mut config, &params).map_err(|refusal| match refusal {
            tls::Refusal::UnknownMode(mode) => bad(&format!(
                "`sslmode={mode}` is not one of `disable`, `prefer`, `require`, `verify-ca` and `verify-full`"
            )),
            tls::Refusal::Setup(reason) => StoreError::TlsSetup {
                url: shown.clone(),
                from: settings.from.clone(),
                reason,
            },
            tls::Refusal::Plain => StoreError::Plaintext {
                url: shown.clone(),
                from: settings.from.clone(),
            },
        })?;
        // libpq's `~/.pgpass` (its `HOME` as `Locations` reads it): a password the person
        // wrote for this server, where the URL has none.
        let home = crate::paths::home_dir();
        if let Some(password) = pgpass::password(&config, home) {
            config.password(password);
        }
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        config.application_name("mekara");
        Ok(PgStore {
            db: Arc::new(Db {
                config,
                tls,
                url: settings.url,
                shown,
                from: settings.from,
                project: settings.project,
            }),
            host: this_host(),
            user: this_user(),
            notes,
        })
    }

    /// Takes run `id`: a connection of its own holding the run's advisory lock, and the
    /// run's local group note.
    fn take(&self, id: &str) -> Result<(Client, GroupNote, Vec<String>), EngineError> {
        let db = &self.db;
        let mut client = db.connect()?;
        let locked: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&db.key(id)])
            .map_err(|e| db.failed(&e))?
            .get(0);
        if !locked {
            return Err(JournalError::Busy { id: id.to_string() }.into());
        }
        // Read under the lock: a run removed meanwhile is not found, not written to.
        let lines = db
            .lines(&mut client, id)?
            .ok_or_else(|| EngineError::RunNotFound { id: id.to_string() })?;
        let group = self.note(id)?;
        group.set_journal_len(file_bytes(&lines).len() as u64);
        Ok((client, group, lines))
    }

    /// Adds run `id` of this host and user; `false` when the id is taken.
    fn add_run(&self, client: &mut impl GenericClient, id: &str) -> Result<bool, StoreError> {
        let added = client
            .execute(
                "INSERT INTO mekara_runs (project, id, host, os_user) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT DO NOTHING",
                &[&self.db.project, &id, &self.host, &self.user],
            )
            .map_err(|e| self.db.failed(&e))?;
        Ok(added == 1)
    }

    fn note(&self, id: &str) -> Result<GroupNote, EngineError> {
        make_runs_dir(&self.notes)?;
        GroupNote::open(&self.notes, id).map_err(|source| {
            JournalError::Io {
                path: group_note::path(&self.notes, id),
                source,
            }
            .into()
        })
    }

    /// Applies the migrations the database lacks; returns the versions before and after.
    pub(crate) fn migrate(&self) -> Result<(i32, i32), StoreError> {
        let db = &self.db;
        let mut client = db.connect_any()?;
        let mut tx = client.transaction().map_err(|e| db.failed(&e))?;
        let run = |tx: &mut postgres::Transaction<'_>, sql: &str| {
            tx.batch_execute(sql).map_err(|e| db.failed(&e))
        };
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATE_KEY])
            .map_err(|e| db.failed(&e))?;
        run(
            &mut tx,
            "CREATE TABLE IF NOT EXISTS mekara_schema (version integer NOT NULL)",
        )?;
        let found: Option<i32> = tx
            .query_opt("SELECT version FROM mekara_schema", &[])
            .map_err(|e| db.failed(&e))?
            .map(|r| r.get(0));
        let from = found.unwrap_or(0);
        if from > SCHEMA {
            return Err(StoreError::Newer {
                url: db.shown.clone(),
                found: from,
            });
        }
        for sql in &MIGRATIONS[usize::try_from(from).unwrap_or(0)..] {
            run(&mut tx, sql)?;
        }
        let set = if found.is_some() {
            "UPDATE mekara_schema SET version = $1"
        } else {
            "INSERT INTO mekara_schema (version) VALUES ($1)"
        };
        tx.execute(set, &[&SCHEMA]).map_err(|e| db.failed(&e))?;
        tx.commit().map_err(|e| db.failed(&e))?;
        Ok((from, SCHEMA))
    }

    /// Copies the journal files of `dir` that are not in the database yet; a run another
    /// process holds is left for later. Returns what happened to each run, in id order.
    pub(crate) fn import(&self, dir: &Path) -> Result<Vec<(String, Moved)>, EngineError> {
        let db = &self.db;
        let mut client = db.connect()?;
        let mut report = Vec::new();
        for id in journal_ids(dir) {
            let path = dir.join(format!("{id}.jsonl"));
            if file::is_busy(&path) {
                report.push((id, Moved::Busy));
                continue;
            }
            let bytes = std::fs::read(&path).map_err(|source| JournalError::Io {
                path: path.clone(),
                source,
            })?;
            let contents = match journal::parse(&path, &bytes) {
                Ok(contents) => contents,
                Err(e) => {
                    report.push((id, Moved::Unreadable(e.to_string())));
                    continue;
                }
            };
            let whole = contents
                .torn
                .map_or(bytes.len(), |t| usize::try_from(t.offset).unwrap_or(0));
            let text = String::from_utf8_lossy(&bytes[..whole]);
            let mut tx = client.transaction().map_err(|e| db.failed(&e))?;
            if !self.add_run(&mut tx, &id)? {
                report.push((id, Moved::Present));
                continue;
            }
            let insert = tx
                .prepare(
                    "INSERT INTO mekara_events (project, run_id, line, body) VALUES ($1, $2, $3, $4)",
                )
                .map_err(|e| db.failed(&e))?;
            for (n, line) in text.lines().enumerate() {
                let n = i32::try_from(n + 1).unwrap_or(i32::MAX);
                tx.execute(&insert, &[&db.project, &id, &n, &line])
                    .map_err(|e| db.failed(&e))?;
            }
            tx.commit().map_err(|e| db.failed(&e))?;
            report.push((id, Moved::Copied));
        }
        Ok(report)
    }

    /// Writes the project's runs that `dir` has no file of as journal files there; a run
    /// another process holds is left for later.
    pub(crate) fn export(&self, dir: &Path) -> Result<Vec<(String, Moved)>, EngineError> {
        let db = &self.db;
        let mut client = db.connect()?;
        let held = db.held(&mut client)?;
        let ids: Vec<String> = client
            .query(
                "SELECT id FROM mekara_runs WHERE project = $1 ORDER BY id",
                &[&db.project],
            )
            .map_err(|e| db.failed(&e))?
            .iter()
            .map(|r| r.get::<_, String>(0))
            // An id names the file written: one with a `/` or `..` would write elsewhere.
            .filter(|id| db.listed(id))
            .collect();
        make_runs_dir(dir)?;
        let mut report = Vec::new();
        for id in ids {
            let path = dir.join(format!("{id}.jsonl"));
            if held.contains(&db.key(&id)) {
                report.push((id, Moved::Busy));
                continue;
            }
            if path.exists() {
                report.push((id, Moved::Present));
                continue;
            }
            let lines = db.lines(&mut client, &id)?.unwrap_or_default();
            let io = |source| JournalError::Io {
                path: path.clone(),
                source,
            };
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(io)?;
            std::io::Write::write_all(&mut file, &file_bytes(&lines)).map_err(io)?;
            file.sync_data().map_err(io)?;
            report.push((id, Moved::Copied));
        }
        Ok(report)
    }

    /// The ids of the runs that may not have ended: all but those whose last event pops the
    /// root frame (a run ends with that event, and only an event after it, such as a retry's
    /// `supersede`, takes it up again). One index probe per run for its last line, instead
    /// of every event of every run: what `status` and `resume {}` pay in a long history.
    fn maybe_open(&self, client: &mut Client) -> Result<Vec<String>, EngineError> {
        /// What the last line tells: its kind, and a `pop`'s depth.
        #[derive(serde::Deserialize)]
        struct Last {
            event: String,
            depth: Option<u64>,
        }
        let db = &self.db;
        let rows = client
            .query(
                "SELECT r.id, (SELECT e.body FROM mekara_events e \
                      WHERE e.project = r.project AND e.run_id = r.id \
                      ORDER BY e.line DESC LIMIT 1) \
                 FROM mekara_runs r WHERE r.project = $1",
                &[&db.project],
            )
            .map_err(|e| db.failed(&e))?;
        Ok(rows
            .iter()
            .filter(|row| db.listed(row.get(0)))
            .filter(|row| {
                let last: Option<String> = row.get(1);
                let ended = last
                    .and_then(|body| serde_json::from_str::<Last>(&body).ok())
                    .is_some_and(|last| last.event == "pop" && last.depth == Some(0));
                !ended
            })
            .map(|row| row.get(0))
            .collect())
    }

    /// The summaries of the runs `which` names, oldest first.
    fn summaries(&self, client: &mut Client, which: Which) -> Result<Vec<RunSummary>, EngineError> {
        let db = &self.db;
        let held = db.held(client)?;
        let (id, newest, ids) = match which {
            Which::All => (None, None, None),
            Which::One(id) => (Some(id), None, None),
            Which::Newest(newest) => (None, Some(newest), None),
            Which::Among(ids) => (None, None, Some(ids)),
        };
        let rows = client
            .query(
                "SELECT r.id, r.host, r.os_user, e.body FROM mekara_runs r \
                 LEFT JOIN mekara_events e ON e.project = r.project AND e.run_id = r.id \
                 WHERE r.project = $1 AND ($2::text IS NULL OR r.id = $2) \
                 AND ($3::bigint IS NULL OR r.id IN (SELECT n.id FROM mekara_runs n \
                      WHERE n.project = $1 ORDER BY n.created_at DESC, n.id DESC LIMIT $3)) \
                 AND ($4::text[] IS NULL OR r.id = ANY($4)) \
                 ORDER BY r.id, e.line",
                &[&db.project, &id, &newest, &ids],
            )
            .map_err(|e| db.failed(&e))?;
        let mut runs: BTreeMap<String, (String, String, Vec<String>)> = BTreeMap::new();
        for row in rows.iter().filter(|row| db.listed(row.get(0))) {
            let entry = runs
                .entry(row.get(0))
                .or_insert_with(|| (row.get(1), row.get(2), Vec::new()));
            if let Some(body) = row.get::<_, Option<String>>(3) {
                entry.2.push(body);
            }
        }
        if let (Some(id), true) = (id, runs.is_empty()) {
            return Err(EngineError::RunNotFound { id: id.to_string() });
        }
        Ok(runs
            .into_iter()
            .map(|(id, (host, user, lines))| {
                let label = db.label(&id);
                let bytes = file_bytes(&lines);
                let busy = held.contains(&db.key(&id));
                let mut summary = summarize(
                    id,
                    &label,
                    journal::parse(&label, &bytes),
                    &|| busy,
                    bytes.len() as u64,
                );
                if summary.state == runs::RunState::Active {
                    summary.now = group_note::doing(&self.notes, &summary.id, bytes.len() as u64);
                }
                summary.host = Some(host);
                summary.user = Some(user);
                summary
            })
            .collect())
    }
}

/// Which runs [`PgStore::summaries`] reads.
enum Which<'a> {
    /// Every run of the project.
    All,
    /// Run `id` (an error when there is none).
    One(&'a str),
    /// The newest runs, by start.
    Newest(i64),
    /// These runs.
    Among(Vec<String>),
}

/// What `store import` or `store export` did with one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Moved {
    /// Copied.
    Copied,
    /// Already there: left as it is.
    Present,
    /// Another process holds it: left for later.
    Busy,
    /// Its journal cannot be read.
    Unreadable(String),
}

impl Store for PgStore {
    fn place(&self) -> String {
        format!("{} (project `{}`)", self.db.shown, self.db.project)
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn create(
        &self,
        id: &str,
        token_sha256: Option<String>,
    ) -> Result<Box<dyn RunLog>, EngineError> {
        let db = &self.db;
        let mut client = db.connect()?;
        let taken = || {
            JournalError::Io {
                path: db.label(id),
                source: std::io::ErrorKind::AlreadyExists.into(),
            }
            .into()
        };
        let locked: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&db.key(id)])
            .map_err(|e| db.failed(&e))?
            .get(0);
        if !locked {
            return Err(taken());
        }
        if !self.add_run(&mut client, id)? {
            return Err(taken());
        }
        let header = serde_json::to_string(&Event::Run(journal::RunEvent {
            format: journal::FORMAT.to_string(),
            mekara: env!("CARGO_PKG_VERSION").to_string(),
            id: id.to_string(),
            token_sha256,
            at: journal::now_ms(),
        }))
        .map_err(|e| db.failed_json(&e))?;
        Ok(Box::new(PgRun {
            id: id.to_string(),
            label: db.label(id),
            db: Arc::clone(db),
            lines: 0,
            header: Some(header),
            held: Vec::new(),
            group: self.note(id)?,
            inserts: Inserts::prepare(&mut client, db)?,
            client: Held(Some(client)),
        }))
    }

    fn open(&self, id: &str) -> Result<(Box<dyn RunLog>, Contents), EngineError> {
        let (mut client, group, lines) = self.take(id)?;
        let label = self.db.label(id);
        let contents = journal::parse(&label, &file_bytes(&lines))?;
        let run = PgRun {
            id: id.to_string(),
            label,
            inserts: Inserts::prepare(&mut client, &self.db)?,
            client: Held(Some(client)),
            db: Arc::clone(&self.db),
            lines: i32::try_from(lines.len()).unwrap_or(i32::MAX),
            header: None,
            held: Vec::new(),
            group,
        };
        Ok((Box::new(run), contents))
    }

    fn read(&self, id: &str) -> Result<Contents, EngineError> {
        let mut client = self.db.connect()?;
        let lines = self
            .db
            .lines(&mut client, id)?
            .ok_or_else(|| EngineError::RunNotFound { id: id.to_string() })?;
        Ok(journal::parse(&self.db.label(id), &file_bytes(&lines))?)
    }

    fn list(&self, id: Option<&str>) -> Result<Vec<RunSummary>, EngineError> {
        let which = id.map_or(Which::All, Which::One);
        self.summaries(&mut self.db.connect()?, which)
    }

    /// Reads the events of the runs whose last event does not end them, only.
    fn list_open(&self) -> Result<Vec<RunSummary>, EngineError> {
        let mut client = self.db.connect()?;
        let ids = self.maybe_open(&mut client)?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut runs = self.summaries(&mut client, Which::Among(ids))?;
        runs.retain(|r| !r.state.has_ended());
        Ok(runs)
    }

    /// Reads the events of the `newest` runs only, and counts the others.
    fn list_newest(&self, newest: usize) -> Result<(Vec<RunSummary>, usize), EngineError> {
        let db = &self.db;
        let mut client = db.connect()?;
        let all: i64 = client
            .query_one(
                "SELECT count(*) FROM mekara_runs WHERE project = $1",
                &[&db.project],
            )
            .map_err(|e| db.failed(&e))?
            .get(0);
        let newest = i64::try_from(newest).unwrap_or(i64::MAX);
        let runs = self.summaries(&mut client, Which::Newest(newest))?;
        Ok((runs, usize::try_from(all).unwrap_or(usize::MAX)))
    }

    fn remove(&self, id: &str) -> Result<u64, EngineError> {
        let (mut client, group, lines) = self.take(id)?;
        let _ = group.kill_leftover();
        client
            .execute(
                "DELETE FROM mekara_runs WHERE project = $1 AND id = $2",
                &[&self.db.project, &id],
            )
            .map_err(|e| self.db.failed(&e))?;
        group.remove();
        Ok(file_bytes(&lines).len() as u64)
    }
}

/// The appends of a held run, prepared once on its connection: one event, and the header
/// with the first event.
/// The one statement that writes a run's events: any number of lines at once, so that the
/// pure steps held back go to the store with the next event in one round trip.
struct Inserts {
    lines: postgres::Statement,
}

impl Inserts {
    fn prepare(client: &mut Client, db: &Db) -> Result<Inserts, StoreError> {
        let lines = client
            .prepare(
                "INSERT INTO mekara_events (project, run_id, line, body) \
                 SELECT $1, $2, line, body FROM UNNEST($3::int4[], $4::text[]) AS u(line, body)",
            )
            .map_err(|e| db.failed(&e))?;
        Ok(Inserts { lines })
    }
}

/// The connection that holds a run's advisory lock. The synchronous client blocks on a
/// runtime of its own even to close, which tokio forbids on a thread that drives async
/// tasks (`mekara mcp` drops sessions there when it stops), so there it is closed on a
/// thread of its own.
struct Held(Option<Client>);

impl Held {
    fn get(&mut self) -> &mut Client {
        self.0
            .as_mut()
            .expect("the connection is kept until the run is dropped")
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            if tokio::runtime::Handle::try_current().is_ok() {
                std::thread::spawn(move || drop(client));
            } else {
                drop(client);
            }
        }
    }
}

/// One run held in PostgreSQL: its connection holds the run's advisory lock.
struct PgRun {
    id: String,
    label: PathBuf,
    client: Held,
    inserts: Inserts,
    db: Arc<Db>,
    /// How many lines (events) the run has.
    lines: i32,
    /// The header of a new run, inserted with its first event.
    header: Option<String>,
    /// Lines appended and not written yet: pure steps held back for the next write.
    held: Vec<String>,
    group: GroupNote,
}

impl std::fmt::Debug for PgRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgRun")
            .field("id", &self.id)
            .field("store", &self.db.shown)
            .field("lines", &self.lines)
            .finish_non_exhaustive()
    }
}

impl RunLog for PgRun {
    fn id(&self) -> &str {
        &self.id
    }

    fn path(&self) -> &Path {
        &self.label
    }

    /// Writes the event, with the events held back before it, in one statement (one
    /// commit); a function step's event is held back until the next event or `sync`
    /// (docs/design.md, "Group commit"): it is pure, so one lost with a killed mekara is only
    /// computed again on resume, and nothing outside the run saw it.
    fn append(&mut self, event: &Event) -> Result<(), JournalError> {
        let line = serde_json::to_string(event).map_err(|e| self.db.failed_json(&e))?;
        let mut bytes = line.len() as u64 + 1;
        if let Some(header) = self.header.take() {
            bytes += header.len() as u64 + 1;
            self.held.push(header);
        }
        self.held.push(line);
        self.group.journal_grew(bytes);
        if is_pure(event) {
            return Ok(());
        }
        self.write_held()
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        // Every other append was committed before it returned.
        self.write_held()
    }

    fn read(&self) -> Result<Contents, JournalError> {
        let mut client = self.db.connect()?;
        let mut lines = self.db.lines(&mut client, &self.id)?.unwrap_or_default();
        lines.extend(self.held.iter().cloned());
        journal::parse(&self.label, &file_bytes(&lines))
    }

    fn group_note(&self) -> &GroupNote {
        &self.group
    }

    fn close(mut self: Box<Self>) -> Result<(), JournalError> {
        self.write_held()?;
        // Ending the connection releases the lock.
        self.group.remove();
        Ok(())
    }
}

impl PgRun {
    /// Writes the lines held back, in one statement.
    fn write_held(&mut self) -> Result<(), JournalError> {
        if self.held.is_empty() {
            return Ok(());
        }
        let first = self.lines + 1;
        let numbers: Vec<i32> = (first..).take(self.held.len()).collect();
        self.client
            .get()
            .execute(
                &self.inserts.lines,
                &[&self.db.project, &self.id, &numbers, &self.held],
            )
            .map_err(|e| self.db.failed(&e))?;
        self.lines += i32::try_from(self.held.len()).unwrap_or(i32::MAX);
        self.held.clear();
        Ok(())
    }
}

/// Whether `event` is a pure step's (a function step), which may wait for the next event to
/// be written.
fn is_pure(event: &Event) -> bool {
    matches!(event, Event::Step(step) if matches!(step.record.input, crate::engine::step::StepInput::Function { .. }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(
            redact_url("postgres://me:s3cret@db:5432/runs?sslmode=disable"),
            "postgres://me:***@db:5432/runs?sslmode=disable"
        );
        assert_eq!(
            redact_url("postgresql://db/runs?user=me&password=s3cret&x=1"),
            "postgresql://db/runs?user=me&password=***&x=1"
        );
        assert_eq!(
            redact_url("host=db password=s3cret user=me"),
            "host=db password=*** user=me"
        );
        assert_eq!(redact_url("postgres://me@db/runs"), "postgres://me@db/runs");
        assert_eq!(
            redact("cannot use s3cret", "postgres://me:s3cret@db/runs"),
            "cannot use ***"
        );
    }
}
