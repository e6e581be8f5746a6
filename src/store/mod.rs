//! The run store's backends: where runs are kept. The engine owns the interface
//! (`crate::engine::store::{Store, RunLog}`) and the journal format; the backends live here,
//! beside it, and nothing in the engine names one:
//!
//! - [`file`]: journal files under `.mekara/runs/`, the default;
//! - [`postgres`]: PostgreSQL, shared by a team's hosts, with the queue `mekara worker`
//!   drains.
//!
//! [`config`] chooses one from the project's settings.

pub(crate) mod config;
pub(crate) mod file;
pub(crate) mod listed;
pub(crate) mod postgres;
pub(crate) mod runs_index;

use std::path::PathBuf;
use std::sync::Arc;

use crate::engine::runs::{RunState, RunSummary};
use crate::engine::store::RunStore;
use postgres::{JobState, QueueRow};

/// Runs as journal files under `dir` (created on first use).
pub(crate) fn files(dir: impl Into<PathBuf>) -> RunStore {
    RunStore::with(Arc::new(file::FileStore::new(dir.into())))
}

/// `runs` with what the shared store's queue knows: queued runs that have not started yet,
/// which worker runs a run, and which were cancelled. Oldest first, as runs are.
pub(crate) fn with_queue(runs: &mut Vec<RunSummary>, queue: Vec<QueueRow>) {
    for row in queue {
        let live_worker = (row.state == JobState::Claimed && row.live)
            .then(|| row.worker_host.clone())
            .flatten();
        if let Some(run) = runs.iter_mut().find(|r| r.id == row.run_id) {
            run.queue = Some(row.queue);
            run.worker = live_worker;
            if row.state == JobState::Cancelled && run.state == RunState::Interrupted {
                run.state = RunState::Cancelled;
            }
            continue;
        }
        let state = match row.state {
            JobState::Claimed if row.live => RunState::Active,
            JobState::Queued | JobState::Claimed => RunState::Queued,
            JobState::Cancelled => RunState::Cancelled,
            JobState::Done | JobState::Failed => RunState::NotStarted,
        };
        runs.push(RunSummary {
            id: row.run_id,
            script: row.script,
            state,
            started_at: row.submitted_at,
            steps: 0,
            last_at: row.submitted_at,
            bytes: 0,
            problem: None,
            host: Some(row.submitted_host),
            user: Some(row.submitted_user),
            queue: Some(row.queue),
            worker: live_worker,
            now: None,
        });
    }
    crate::engine::store::oldest_first(runs);
}
