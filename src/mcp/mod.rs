//! `mekara mcp`: the MCP server agents drive (DESIGN §5, §7).
//!
//! - [`tools`]: the tool definitions and argument checks;
//! - [`session`]: one agent's session, the synchronous core every call goes through;
//! - [`history`]: what happened during a call, collected for the reply;
//! - [`reply`]: every word said to the agent: replies, refusals, the handler's messages;
//! - [`server`]: the rmcp handler (progress, cancellation, prompts);
//! - [`vcr`]: cassettes, recording and replay;
//! - this file: [`SessionPlan`], and serving sessions over the transports of
//!   [`crate::transport`].

pub(crate) mod history;
pub(crate) mod reply;
pub(crate) mod server;
pub(crate) mod session;
pub(crate) mod tools;
pub(crate) mod vcr;

use std::path::{Path, PathBuf};

use crate::engine::runs::RunStore;
use crate::engine::{EngineError, Settings, ShellRunner, StepRunner};
use crate::paths::Locations;
use crate::script::Resolver;
use crate::transport::{self, HttpOptions};
pub(crate) use server::Server;
pub(crate) use session::Session;

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
}

impl SessionPlan {
    /// The plan for a server started in `cwd`.
    pub(crate) fn discover(cwd: &Path, settings: Settings) -> Result<SessionPlan, EngineError> {
        let locations = Locations::discover(cwd);
        let store = locations
            .runs_dir()
            .map(RunStore::new)
            .ok_or(EngineError::NoRunsDir)?;
        Ok(SessionPlan {
            resolver: Resolver::new(&locations),
            store,
            settings,
            cwd: cwd.to_path_buf(),
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
}

/// Serves one session over stdin/stdout until the client goes away. With `cassette`, the
/// session is recorded there.
pub(crate) async fn serve_stdio(plan: SessionPlan, cassette: Option<&Path>) -> anyhow::Result<()> {
    let (runner, recorder) = match cassette {
        Some(path) => {
            let recorder = vcr::Recorder::create(path, &plan.cwd)?;
            (recorder.runner(plan.runner()), Some(recorder))
        }
        None => (plan.runner(), None),
    };
    let server = Server::new(plan.session(runner), recorder);
    let stopper = server.clone();
    transport::serve_stdio(server).await?;
    stopper.stop();
    Ok(())
}

/// Serves Streamable HTTP at `http://ADDR/mcp`, each MCP session with its own executor,
/// until the process is stopped.
pub(crate) async fn serve_http(plan: SessionPlan, options: HttpOptions) -> anyhow::Result<()> {
    transport::serve_http("mekara mcp", options, move || {
        Server::new(plan.session(plan.runner()), None)
    })
    .await
}
