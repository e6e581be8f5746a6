//! Traces: each run exported as an OpenTelemetry trace over OTLP/HTTP when the standard
//! variables (`OTEL_EXPORTER_OTLP_ENDPOINT` and its kin) name a collector (DESIGN §13).
//!
//! Spans are made from a run's journal events as they are appended (a [`Watch`] on the run
//! store), so every way of driving a run (the terminal, `--agent-command`, MCP, a worker) is
//! traced alike, and a replayed step, which appends nothing, is never exported again. Ids
//! come from the run: the trace id from the run id, a span id from the journal line that
//! opens the span. A run resumed by another process, on another host, lands in the same
//! trace under the same parents, with nothing kept beside the journal.
//!
//! A span is exported when it ends: a step when it is journaled, a frame when it is popped,
//! the run when its root frame is. The SDK batches them on its own thread, which posts them
//! with mekara's hyper client; an endpoint that is down, slow or refusing costs one warning
//! in the log and never a step's time, and exit waits for the last batch at most
//! [`EXIT_BUDGET`]. Prompt and output text are sent only when `[traces] include_text = true`
//! (or `MEKARA_TRACES_INCLUDE_TEXT=1`); the journal holds no `${VAR}` secret, and every text
//! is redacted again of the values this process took from the environment.
//!
//! - [`settings`]: what the environment and `[traces]` of `.mekara/config.toml` ask for;
//! - [`exporter`]: the exporter they make, [`otlp_http`] its HTTP client;
//! - [`watcher`]: the runs a store hands out, wrapped so that their events make spans;
//! - [`run_trace`]: a run's ids and open frames, followed from its journal;
//! - [`spans`]: the spans of steps, frames and runs, with their attributes.

mod exporter;
mod otlp_http;
mod run_trace;
mod settings;
mod spans;
mod watcher;

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::engine::store::Watch;
use crate::paths::Locations;
use exporter::Traces;
use watcher::Watcher;

/// The most exit waits for the last batch to be sent.
const EXIT_BUDGET: Duration = Duration::from_secs(2);

/// This process's exporter, set up by the first run store that asks (`None`: traces off).
static TRACES: OnceLock<Option<Arc<Traces>>> = OnceLock::new();

/// What watches the runs of `locations` to export them, when the environment names a
/// collector. Set up once per process; a setting that is wrong is a warning, never an error.
pub(crate) fn watch(locations: &Locations) -> Option<Arc<dyn Watch>> {
    let traces = TRACES.get_or_init(|| exporter::start(locations)).clone()?;
    Some(Arc::new(Watcher(traces)))
}

/// Sends what is left, waiting at most [`EXIT_BUDGET`]; at exit.
pub(crate) fn shutdown() {
    if let Some(Some(traces)) = TRACES.get() {
        let _ = traces.provider.shutdown_with_timeout(EXIT_BUDGET);
    }
}
