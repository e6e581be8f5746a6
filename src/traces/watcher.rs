//! [`Watcher`]: wraps the runs a store hands out for writing, so that the events appended
//! to them become spans.

use std::sync::Arc;

use super::exporter::Traces;
use super::run_trace::{Mark, RunTrace};
use crate::engine::journal::Event;
use crate::engine::store::{RunLog, Seer, Watch, Watched};

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
        Box::new(Watched {
            inner: log,
            seer: Traced {
                traces: self.0.clone(),
                run,
            },
        })
    }
}

/// A run held for writing, whose appended events become spans.
#[derive(Debug)]
struct Traced {
    traces: Arc<Traces>,
    run: RunTrace,
}

impl Seer for Traced {
    fn seen(&mut self, _: &str, event: &Event) {
        self.run.record(&self.traces, event);
    }
}
