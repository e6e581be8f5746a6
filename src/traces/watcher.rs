//! [`Watcher`]: wraps the runs a store hands out for writing, so that the events appended
//! to them become spans.

use std::path::Path;
use std::sync::Arc;

use super::exporter::Traces;
use super::run_trace::{Mark, RunTrace};
use crate::engine::journal::{Contents, Event, JournalError};
use crate::engine::store::{RunLog, Watch};

/// Wraps the runs a store hands out for writing.
#[derive(Debug)]
pub(super) struct Watcher(pub(super) Arc<Traces>);

impl Watch for Watcher {
    fn wrap(&self, log: Box<dyn RunLog>, history: &[Event]) -> Box<dyn RunLog> {
        let mut run = RunTrace {
            id: log.id().to_string(),
            marks: Vec::with_capacity(history.len() + 1),
            stack: Vec::new(),
        };
        if history.is_empty() {
            // A new run: its header is written with its first event.
            run.marks.push(Mark::Other);
        }
        for event in history {
            run.marks.push(Mark::of(event));
        }
        for index in 0..run.marks.len() {
            run.follow(index);
        }
        Box::new(TracedLog {
            inner: log,
            traces: self.0.clone(),
            run,
        })
    }
}

/// A run held for writing, whose appended events become spans.
#[derive(Debug)]
struct TracedLog {
    inner: Box<dyn RunLog>,
    traces: Arc<Traces>,
    run: RunTrace,
}

impl RunLog for TracedLog {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn path(&self) -> &Path {
        self.inner.path()
    }

    fn append(&mut self, event: &Event) -> Result<(), JournalError> {
        self.inner.append(event)?;
        self.run.record(&self.traces, event);
        Ok(())
    }

    fn sync(&mut self) -> Result<(), JournalError> {
        self.inner.sync()
    }

    fn read(&self) -> Result<Contents, JournalError> {
        self.inner.read()
    }

    fn group_note(&self) -> &crate::engine::group_note::GroupNote {
        self.inner.group_note()
    }

    fn close(self: Box<Self>) -> Result<(), JournalError> {
        self.inner.close()
    }
}
