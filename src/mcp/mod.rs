//! `mekara mcp`: the MCP server agents drive (DESIGN §5, §7), an adapter on the agent layer
//! ([`crate::agents`]: the session, the calls, the replies).
//!
//! - [`registry`]: the runs a server holds, and which one each call goes to;
//! - [`server`]: the rmcp handler (progress, cancellation, prompts);
//! - [`vcr`]: cassettes, recording and replay;
//! - [`session_plan`]: where a session's scripts, runs and folder come from;
//! - this file: serving sessions over the transports of [`crate::transport`].

pub(crate) mod registry;
pub(crate) mod server;
mod session_plan;
pub(crate) mod vcr;

use std::path::Path;
use std::sync::Arc;

use crate::transport::{self, HttpOptions};
pub(crate) use registry::Registry;
pub(crate) use server::Server;
pub(crate) use session_plan::SessionPlan;

/// Serves one connection over stdin/stdout until the client goes away. With `cassette`,
/// everything it does is recorded there.
pub(crate) async fn serve_stdio(plan: SessionPlan, cassette: Option<&Path>) -> anyhow::Result<()> {
    let (registry, recorder) = match cassette {
        Some(path) => {
            let recorder = vcr::Recorder::create(path, &plan.cwd)?;
            let recording = recorder.clone();
            let runner = plan.clone();
            let registry = Registry::new(plan, Box::new(move || recording.runner(runner.runner())));
            (registry, Some(recorder))
        }
        None => (plan.registry(), None),
    };
    let server = Server::new(Arc::new(registry), recorder);
    let stopper = server.clone();
    tokio::select! {
        served = transport::serve_stdio(server) => served?,
        () = interrupted() => {}
    }
    stopper.stop();
    Ok(())
}

/// Waits for a signal that interrupts a run ([`INTERRUPTING_SIGNALS`]): the server then stops
/// its running steps (their process groups are killed as their calls end) before it ends, as
/// when its client goes away, instead of dying with the steps left running. A signal that
/// cannot be watched is never waited for.
///
/// [`INTERRUPTING_SIGNALS`]: crate::exit::INTERRUPTING_SIGNALS
#[cfg(unix)]
async fn interrupted() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut watched: Vec<_> = crate::exit::INTERRUPTING_SIGNALS
        .into_iter()
        .filter_map(|s| signal(SignalKind::from_raw(s)).ok())
        .collect();
    if watched.is_empty() {
        return std::future::pending().await;
    }
    let any = watched.iter_mut().map(|s| Box::pin(s.recv()));
    let _ = futures::future::select_all(any).await;
    tracing::info!("stopped by a signal: stopping the running steps");
}

/// On Windows: the console's Ctrl-C, Ctrl-Break and close.
#[cfg(windows)]
async fn interrupted() {
    use tokio::signal::windows::{ctrl_break, ctrl_c, ctrl_close};
    let (Ok(mut c), Ok(mut b), Ok(mut x)) = (ctrl_c(), ctrl_break(), ctrl_close()) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = c.recv() => {}
        _ = b.recv() => {}
        _ = x.recv() => {}
    }
    tracing::info!("stopped by a console event: stopping the running steps");
}

/// Serves Streamable HTTP at `http://ADDR/mcp` until the process is stopped: every MCP
/// session and every stateless request is a connection to the same runs.
pub(crate) async fn serve_http(plan: SessionPlan, options: HttpOptions) -> anyhow::Result<()> {
    let registry = Arc::new(plan.registry());
    let sessions = registry.clone();
    tokio::select! {
        served = transport::serve_http("mekara mcp", options, move || {
            Server::new(sessions.clone(), None)
        }) => served?,
        () = interrupted() => {}
    }
    registry.stop();
    Ok(())
}
