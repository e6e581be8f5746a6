//! Where a session's scripts, runs and default folder come from ([`SessionPlan`]), which
//! both ways of serving (`mekara mcp` and `mekara vcr`) start from. The runs of a server
//! with a plan are its [`super::Registry`] (`SessionPlan::registry`, in that file).

use std::path::{Path, PathBuf};

use crate::agents::clients::Served;
use crate::agents::session::Session;
use crate::engine::store::RunStore;
use crate::engine::{EngineError, Settings, ShellRunner, StepRunner};
use crate::paths::Locations;
use crate::script::Resolver;

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
}
