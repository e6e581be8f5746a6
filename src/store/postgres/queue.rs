//! The queue of unattended runs (schema version 2, `2_queue.sql`): `mekara submit` adds a
//! row, `mekara worker` claims rows and runs them, `mekara runs cancel` stops one.
//!
//! A claim is a session-level advisory lock on the row's key, held by the worker's own
//! connection for as long as it runs the run, and the row marked `claimed` with the worker's
//! name. The lock is what says the worker is alive: the server drops it when the worker's
//! connection ends (SIGKILL, a crashed host once TCP keepalives notice), so a `claimed` row
//! whose lock is free is a dead worker's, and the next claim takes it up, to resume the run
//! from its journal. Claims of one queue are made one at a time (a transaction-level
//! advisory lock on the queue), so the queue's concurrency limit holds across every worker;
//! the row itself is taken `FOR UPDATE SKIP LOCKED`, so a cancel or a listing never waits
//! for a claim. docs/design.md says why this is written here rather than taken from a
//! job-queue crate.

use std::collections::HashSet;

use sha2::Digest as _;

use super::{Db, Held, PgStore, StoreError};
use crate::engine::error::EngineError;

/// A run to queue.
#[derive(Debug, Clone)]
pub(crate) struct NewJob {
    /// The queue.
    pub queue: String,
    /// The script's name.
    pub script: String,
    /// Its arguments.
    pub arguments: String,
    /// The flags of `mekara run` that name the agent.
    pub agent: Vec<String>,
    /// The limits given to `mekara submit`, as flags of `mekara run`.
    pub limits: Vec<String>,
}

/// Where a queued run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobState {
    /// Waiting for a worker.
    Queued,
    /// A worker took it (alive or not: see [`QueueRow::live`]).
    Claimed,
    /// Its worker is done with it: its run ended and succeeded, or waits for a person (an
    /// answer to `ask`, a spend cap raised with `mekara answer`), whom a resume then follows.
    Done,
    /// Its run ended and failed (or stopped at a limit), or could not start.
    Failed,
    /// `mekara runs cancel` stopped it.
    Cancelled,
}

impl JobState {
    fn parse(text: &str) -> JobState {
        match text {
            "claimed" => JobState::Claimed,
            "done" => JobState::Done,
            "failed" => JobState::Failed,
            "cancelled" => JobState::Cancelled,
            _ => JobState::Queued,
        }
    }

    fn sql(self) -> &'static str {
        match self {
            JobState::Queued => "queued",
            JobState::Claimed => "claimed",
            JobState::Done => "done",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            JobState::Done => "completed",
            other => other.sql(),
        })
    }
}

/// One row of the queue, for `mekara runs`.
#[derive(Debug, Clone)]
pub(crate) struct QueueRow {
    pub run_id: String,
    pub queue: String,
    pub script: String,
    pub state: JobState,
    /// The host of the worker that claimed it.
    pub worker_host: Option<String>,
    /// Whether the worker that claimed it is alive (its lock is held).
    pub live: bool,
    pub submitted_host: String,
    pub submitted_user: String,
    /// When it was submitted (Unix ms).
    pub submitted_at: u64,
    /// Why it failed or was cancelled.
    pub note: Option<String>,
}

/// A run a worker claimed.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub run_id: String,
    pub queue: String,
    pub script: String,
    pub arguments: String,
    pub agent: Vec<String>,
    pub limits: Vec<String>,
    /// How many claims it has had, this one included.
    pub attempts: i32,
    /// Whether its run was started already (a worker died while running it): resume it.
    pub started: bool,
    /// Whether it was cancelled before this claim: end it without running.
    pub cancelled: bool,
}

/// What `mekara runs cancel` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Cancel {
    /// It had not started (or its worker is gone): it is cancelled and never runs.
    Dequeued,
    /// A worker on this host runs it: it was asked to stop.
    Asked { worker_host: String },
    /// It ended already, in this state: nothing changed.
    Ended(JobState),
    /// The run exists but was not submitted to a queue.
    NotQueued,
}

impl Db {
    /// The advisory lock key of the claim of queued run `id`.
    fn job_key(&self, id: &str) -> i64 {
        key_of("mekara-job", &self.project, id)
    }

    /// The transaction-level lock that makes claims of one queue one at a time.
    fn queue_key(&self, queue: &str) -> i64 {
        key_of("mekara-queue", &self.project, queue)
    }
}

fn key_of(kind: &str, project: &str, name: &str) -> i64 {
    let digest = sha2::Sha256::digest(format!("{kind}\0{project}\0{name}"));
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

impl PgStore {
    /// Queues a new run; returns its id.
    pub(crate) fn submit(&self, job: &NewJob) -> Result<String, EngineError> {
        let db = &self.db;
        let mut client = db.connect()?;
        for attempt in 0..16 {
            let id = crate::engine::runs::new_id(attempt);
            let added = client
                .execute(
                    "INSERT INTO mekara_queue (project, run_id, queue, script, arguments, agent, \
                     limits, submitted_host, submitted_user) \
                     SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9 WHERE NOT EXISTS \
                     (SELECT 1 FROM mekara_runs WHERE project = $1 AND id = $2) \
                     ON CONFLICT DO NOTHING",
                    &[
                        &db.project,
                        &id,
                        &job.queue,
                        &job.script,
                        &job.arguments,
                        &job.agent,
                        &job.limits,
                        &self.host,
                        &self.user,
                    ],
                )
                .map_err(|e| db.failed(&e))?;
            if added == 1 {
                return Ok(id);
            }
        }
        Err(StoreError::Query {
            url: db.shown.clone(),
            reason: "no free run id after 16 tries".to_string(),
        }
        .into())
    }

    /// The queue's rows (or only run `id`'s), oldest first.
    pub(crate) fn queue_rows(&self, id: Option<&str>) -> Result<Vec<QueueRow>, StoreError> {
        let db = &self.db;
        let mut client = db.connect()?;
        let held = db.held(&mut client)?;
        let rows = client
            .query(
                "SELECT run_id, queue, script, state, worker_host, submitted_host, \
                 submitted_user, (extract(epoch FROM submitted_at) * 1000)::bigint, note \
                 FROM mekara_queue WHERE project = $1 AND ($2::text IS NULL OR run_id = $2) \
                 ORDER BY submitted_at, run_id",
                &[&db.project, &id],
            )
            .map_err(|e| db.failed(&e))?;
        Ok(rows
            .iter()
            .filter(|r| db.listed(r.get(0)))
            .map(|r| {
                let run_id: String = r.get(0);
                let at: i64 = r.get(7);
                QueueRow {
                    live: held.contains(&db.job_key(&run_id)),
                    run_id,
                    queue: r.get(1),
                    script: r.get(2),
                    state: JobState::parse(r.get(3)),
                    worker_host: r.get(4),
                    submitted_host: r.get(5),
                    submitted_user: r.get(6),
                    submitted_at: u64::try_from(at).unwrap_or(0),
                    note: r.get(8),
                }
            })
            .collect())
    }

    /// Cancels queued run `id`: a run no worker runs is cancelled here; a running one's
    /// worker is asked to stop it (it looks every half second).
    pub(crate) fn cancel(&self, id: &str) -> Result<Cancel, EngineError> {
        if !crate::engine::runs::is_run_id(id) {
            return Err(EngineError::RunNotFound { id: id.to_string() });
        }
        let db = &self.db;
        let mut client = db.connect()?;
        let held = db.held(&mut client)?;
        let mut tx = client.transaction().map_err(|e| db.failed(&e))?;
        let row = tx
            .query_opt(
                "SELECT state, worker_host FROM mekara_queue WHERE project = $1 AND run_id = $2 \
                 FOR UPDATE",
                &[&db.project, &id],
            )
            .map_err(|e| db.failed(&e))?;
        let Some(row) = row else {
            let exists = tx
                .query_opt(
                    "SELECT 1 FROM mekara_runs WHERE project = $1 AND id = $2",
                    &[&db.project, &id],
                )
                .map_err(|e| db.failed(&e))?
                .is_some();
            return if exists {
                Ok(Cancel::NotQueued)
            } else {
                Err(EngineError::RunNotFound { id: id.to_string() })
            };
        };
        let state = JobState::parse(row.get(0));
        let worker_host: Option<String> = row.get(1);
        let live = held.contains(&db.job_key(id));
        let done = match state {
            JobState::Claimed if live => {
                tx.execute(
                    "UPDATE mekara_queue SET cancel_requested = true \
                     WHERE project = $1 AND run_id = $2",
                    &[&db.project, &id],
                )
                .map_err(|e| db.failed(&e))?;
                Cancel::Asked {
                    worker_host: worker_host.unwrap_or_default(),
                }
            }
            JobState::Queued | JobState::Claimed => {
                tx.execute(
                    "UPDATE mekara_queue SET state = 'cancelled', cancel_requested = true, \
                     finished_at = now(), note = 'cancelled before a worker ran it' \
                     WHERE project = $1 AND run_id = $2",
                    &[&db.project, &id],
                )
                .map_err(|e| db.failed(&e))?;
                Cancel::Dequeued
            }
            ended => Cancel::Ended(ended),
        };
        tx.commit().map_err(|e| db.failed(&e))?;
        Ok(done)
    }

    /// A worker's connection to the queue, named `name` (its host is this host).
    pub(crate) fn worker(&self, name: &str) -> Result<Worker, StoreError> {
        let db = &self.db;
        let mut client = db.connect()?;
        // The server drops a dead host's claims once its keepalives go unanswered (about
        // 25 s) rather than the system's default of hours.
        client
            .batch_execute(
                "SET tcp_keepalives_idle = 10; SET tcp_keepalives_interval = 5; \
                 SET tcp_keepalives_count = 3",
            )
            .map_err(|e| db.failed(&e))?;
        Ok(Worker {
            db: std::sync::Arc::clone(db),
            client: Held(Some(client)),
            name: name.to_string(),
            host: self.host.clone(),
        })
    }
}

/// A worker's connection: it holds the locks of the runs the worker claimed.
pub(crate) struct Worker {
    db: std::sync::Arc<Db>,
    client: Held,
    name: String,
    host: String,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// Claims the next run of `queues` (each with its concurrency limit across every
    /// worker), skipping the runs in `skip`: a dead worker's claim first, then the oldest
    /// queued run.
    pub(crate) fn claim(
        &mut self,
        queues: &[(String, Option<usize>)],
        skip: &HashSet<String>,
    ) -> Result<Option<Job>, StoreError> {
        let db = std::sync::Arc::clone(&self.db);
        let failed = |e: postgres::Error| db.failed(&e);
        let skip: Vec<String> = skip.iter().cloned().collect();
        for (queue, limit) in queues {
            let mut tx = self.client.get().transaction().map_err(failed)?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&db.queue_key(queue)])
                .map_err(failed)?;
            let held = db.held(&mut tx)?;
            let claimed: Vec<String> = tx
                .query(
                    "SELECT run_id FROM mekara_queue \
                     WHERE project = $1 AND queue = $2 AND state = 'claimed' \
                     ORDER BY submitted_at, run_id",
                    &[&db.project, queue],
                )
                .map_err(failed)?
                .iter()
                .map(|r| r.get(0))
                .collect();
            let live = claimed
                .iter()
                .filter(|id| held.contains(&db.job_key(id)))
                .count();
            if limit.is_some_and(|limit| live >= limit) {
                continue;
            }
            let dead = claimed
                .into_iter()
                .find(|id| !held.contains(&db.job_key(id)) && !skip.contains(id));
            let next = match dead {
                Some(id) => Some(id),
                None => tx
                    .query_opt(
                        "SELECT run_id FROM mekara_queue \
                         WHERE project = $1 AND queue = $2 AND state = 'queued' \
                         AND run_id <> ALL($3) \
                         ORDER BY submitted_at, run_id LIMIT 1 FOR UPDATE SKIP LOCKED",
                        &[&db.project, queue, &skip],
                    )
                    .map_err(failed)?
                    .map(|r| r.get(0)),
            };
            let Some(id) = next else {
                continue;
            };
            let locked: bool = tx
                .query_one("SELECT pg_try_advisory_lock($1)", &[&db.job_key(&id)])
                .map_err(failed)?
                .get(0);
            if !locked {
                continue;
            }
            let row = tx
                .query_one(
                    "UPDATE mekara_queue SET state = 'claimed', worker_host = $3, worker = $4, \
                     claimed_at = now(), heartbeat_at = now(), attempts = attempts + 1 \
                     WHERE project = $1 AND run_id = $2 \
                     RETURNING queue, script, arguments, agent, limits, attempts, \
                     cancel_requested, \
                     EXISTS (SELECT 1 FROM mekara_runs WHERE project = $1 AND id = $2)",
                    &[&db.project, &id, &self.host, &self.name],
                )
                .map_err(failed)?;
            tx.commit().map_err(failed)?;
            return Ok(Some(Job {
                run_id: id,
                queue: row.get(0),
                script: row.get(1),
                arguments: row.get(2),
                agent: row.get(3),
                limits: row.get(4),
                attempts: row.get(5),
                cancelled: row.get(6),
                started: row.get(7),
            }));
        }
        Ok(None)
    }

    /// Marks this worker's claims alive; returns those asked to stop (`mekara runs cancel`).
    pub(crate) fn beat(&mut self) -> Result<Vec<String>, StoreError> {
        let rows = self
            .client
            .get()
            .query(
                "UPDATE mekara_queue SET heartbeat_at = now() \
                 WHERE project = $1 AND worker = $2 AND state = 'claimed' \
                 RETURNING run_id, cancel_requested",
                &[&self.db.project, &self.name],
            )
            .map_err(|e| self.db.failed(&e))?;
        Ok(rows
            .iter()
            .filter(|r| r.get::<_, bool>(1))
            .map(|r| r.get(0))
            .collect())
    }

    /// Whether another process holds run `id` (its journal's lock): it cannot be resumed yet.
    pub(crate) fn run_busy(&mut self, id: &str) -> Result<bool, StoreError> {
        let key = self.db.key(id);
        Ok(self.db.held(self.client.get())?.contains(&key))
    }

    /// Gives claimed run `id` back untried, because its run is still held by a process
    /// (the last one letting go of it, often the child of a worker that died): back to
    /// `queued`, and the claim does not count as an attempt, so a run whose old process
    /// takes a while to stop is not given up as one that keeps dying.
    pub(crate) fn give_back(&mut self, id: &str) -> Result<(), StoreError> {
        let db = std::sync::Arc::clone(&self.db);
        let client = self.client.get();
        client
            .execute(
                "UPDATE mekara_queue SET state = 'queued', note = NULL, worker_host = NULL, \
                 worker = NULL, attempts = greatest(attempts - 1, 0) \
                 WHERE project = $1 AND run_id = $2",
                &[&db.project, &id],
            )
            .map_err(|e| db.failed(&e))?;
        client
            .execute("SELECT pg_advisory_unlock($1)", &[&db.job_key(id)])
            .map_err(|e| db.failed(&e))?;
        Ok(())
    }

    /// Ends this worker's claim of run `id`: the row goes to `state` (`Queued`: for another
    /// worker to take up) with `note`, and the lock is released.
    pub(crate) fn end(
        &mut self,
        id: &str,
        state: JobState,
        note: Option<&str>,
    ) -> Result<(), StoreError> {
        let db = std::sync::Arc::clone(&self.db);
        let client = self.client.get();
        let finished = matches!(
            state,
            JobState::Done | JobState::Failed | JobState::Cancelled
        );
        client
            .execute(
                "UPDATE mekara_queue SET state = $3, note = $4, \
                 finished_at = CASE WHEN $5 THEN now() END, \
                 worker_host = CASE WHEN $5 THEN worker_host END, \
                 worker = CASE WHEN $5 THEN worker END \
                 WHERE project = $1 AND run_id = $2",
                &[&db.project, &id, &state.sql(), &note, &finished],
            )
            .map_err(|e| db.failed(&e))?;
        client
            .execute("SELECT pg_advisory_unlock($1)", &[&db.job_key(id)])
            .map_err(|e| db.failed(&e))?;
        Ok(())
    }
}
