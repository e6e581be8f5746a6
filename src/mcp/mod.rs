//! `mekara mcp`: the MCP server agents drive (DESIGN §5, §7), an adapter on the agent layer
//! ([`crate::agents`]: the session, the calls, the replies).
//!
//! - [`registry`]: the runs a server holds, and which one each call goes to;
//! - [`server`]: the rmcp handler (progress, cancellation, prompts);
//! - [`vcr`]: cassettes, recording and replay;
//! - this file: [`SessionPlan`], and serving sessions over the transports of
//!   [`crate::transport`].

pub(crate) mod registry;
pub(crate) mod server;
pub(crate) mod vcr;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::agents::clients::Served;
use crate::agents::session::Session;
use crate::engine::store::RunStore;
use crate::engine::{EngineError, Settings, ShellRunner, StepRunner};
use crate::paths::Locations;
use crate::script::Resolver;
use crate::transport::{self, HttpOptions};
pub(crate) use registry::Registry;
pub(crate) use server::Server;

/// Where a session's scripts, runs and default folder come from.
#[derive(Clone)]
pub(crate) struct SessionPlan {
    /// Finds scripts.
    pub resolver: Resolver,
    /// Keeps runs.
    pub store: RunStore,
    /// Knobs of runs.
    pub settings: Settings,
    /// The folder scripts run in when a call names none.
    pub cwd: PathBuf,
    /// How the client was given this server (`mekara mcp --plugin`: by mekara's Claude Code
    /// plugin), which decides the names its model sees the tools under.
    pub served: Served,
    /// Set when the server stands down: mekara's plugin in a project that sets its own
    /// `mekara` server up in this file ([`crate::agents::claude::configured_server`]). It
    /// then offers no tools, and says why.
    pub stood_down: Option<PathBuf>,
}

impl SessionPlan {
    /// The plan for a server started in `cwd`.
    pub(crate) fn discover(cwd: &Path, settings: Settings) -> Result<SessionPlan, EngineError> {
        SessionPlan::at(&Locations::discover(cwd), settings)
    }

    /// The plan for a server with these locations.
    pub(crate) fn at(
        locations: &Locations,
        settings: Settings,
    ) -> Result<SessionPlan, EngineError> {
        let cwd = &locations.cwd;
        let store = crate::store::config::run_store_or_refusal(locations)?;
        Ok(SessionPlan {
            resolver: Resolver::new(locations),
            store,
            settings,
            cwd: cwd.clone(),
            served: Served::Configured,
            stood_down: None,
        })
    }

    /// The real effect runner of a session: shell steps, and tool calls through an MCP
    /// client of its own (connections live as long as the session).
    pub(crate) fn runner(&self) -> Box<dyn StepRunner> {
        let client = crate::client::McpClient::for_locations(&Locations::discover(&self.cwd));
        Box::new(crate::client::ClientRunner::new(ShellRunner::new(), client))
    }

    /// A new session that runs effects with `runner`.
    pub(crate) fn session(&self, runner: Box<dyn StepRunner>) -> Session {
        Session::new(
            self.resolver.clone(),
            self.store.clone(),
            runner,
            self.settings.clone(),
            self.cwd.clone(),
        )
    }

    /// The runs of a server with this plan, each running effects with its own real runner.
    pub(crate) fn registry(self) -> Registry {
        let runner = self.clone();
        Registry::new(self, Box::new(move || runner.runner()))
    }
}

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
