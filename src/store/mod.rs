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
pub(crate) mod postgres;
pub(crate) mod runs_index;

use std::path::PathBuf;
use std::sync::Arc;

use crate::engine::store::RunStore;

/// Runs as journal files under `dir` (created on first use).
pub(crate) fn files(dir: impl Into<PathBuf>) -> RunStore {
    RunStore::with(Arc::new(file::FileStore::new(dir.into())))
}
