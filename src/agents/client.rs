//! What mekara knows of an agent client, as one value per client ([`Client`]): how its model
//! sees mekara's tools, its part of `mekara install` (the [`ClientSetup`] install is given),
//! and its headless adapter. Each client's value is in its own file; [`super::CLIENTS`]
//! lists them.

use std::fmt;

use super::headless::Agent;
use super::tools::AgentTool;
use crate::install::{ClientSetup, InstallError, Setup};

/// An agent client mekara knows.
pub(crate) struct Client {
    /// Its value of `--client` and `--agent`: `claude`.
    pub name: &'static str,
    /// What `mekara install --help` says of it: ``OpenCode (`opencode.json`)``.
    pub help: &'static str,
    /// Whether `name`, the `clientInfo.name` of an MCP `initialize`, is this client's.
    pub is_client_info: fn(name: &str) -> bool,
    /// The name its model sees a tool of mekara's under, when it was given mekara's server
    /// the way [`Served`] says.
    pub tool_name: fn(AgentTool, Served) -> String,
    /// Whether it passes what is typed after `/name` only to an MCP prompt's required
    /// arguments, so that a prompt's `arguments` must be required there.
    pub fills_only_required_arguments: bool,
    /// Whether every install sets it up, `--client` or not (Claude Code).
    pub always: bool,
    /// Its part of `mekara install` and `mekara uninstall`: the edits of its configuration
    /// files, and the command files it reads.
    pub install: fn(&mut Setup<'_>) -> Result<(), InstallError>,
    /// What an install leaves for the person to do for it, if anything (`user`: installed
    /// for every project, with `--user`).
    pub left_for_you: fn(user: bool) -> Option<String>,
    /// Where its note goes among the clients' notes under `Left for you:` (lowest first),
    /// which is not the order `--client` lists the clients in.
    pub note_rank: u8,
    /// Its adapter for unattended runs (`mekara run --agent NAME`), if it has one.
    pub headless: Option<fn() -> Box<dyn Agent>>,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.name)
    }
}

impl PartialEq for Client {
    fn eq(&self, other: &Client) -> bool {
        self.name == other.name
    }
}

impl Eq for Client {}

/// `mekara install` knows a client by what it does at install only.
impl ClientSetup for Client {
    fn always(&self) -> bool {
        self.always
    }

    fn set_up(&self, setup: &mut Setup<'_>) -> Result<(), InstallError> {
        (self.install)(setup)
    }

    fn left_for_you(&self, user: bool) -> Option<String> {
        (self.left_for_you)(user)
    }

    fn note_rank(&self) -> u8 {
        self.note_rank
    }
}

/// How a client was given mekara's server, which decides the names its model sees mekara's
/// tools under.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Served {
    /// As the server `mekara` of the client's own configuration: what `mekara install`
    /// writes, or a person by hand.
    #[default]
    Configured,
    /// By mekara's Claude Code plugin (`mekara mcp --plugin`): Claude Code names a plugin's
    /// server after the plugin too (`mcp__plugin_mekara_mekara__start`).
    ClaudePlugin,
}

/// The client on the other end of an MCP connection, as far as mekara knows it: it decides
/// how the client's model sees mekara's tools, so that every text mekara gives an agent names
/// the tool it can actually call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AgentClient(Option<&'static Client>, Served);

impl AgentClient {
    /// A client mekara does not know, best told the names `tools/list` gives.
    pub(crate) const OTHER: AgentClient = AgentClient(None, Served::Configured);

    /// `client` (`None`: one mekara does not know), given mekara's server as `served` says.
    pub(super) fn new(client: Option<&'static Client>, served: Served) -> AgentClient {
        AgentClient(client, served)
    }

    /// Whether mekara does not know the client: it names the tools as `tools/list` does.
    pub(crate) fn is_other(self) -> bool {
        self.0.is_none()
    }

    /// Whether it passes what is typed after `/name` only to a prompt's required arguments
    /// ([`Client::fills_only_required_arguments`]).
    pub(crate) fn fills_only_required_arguments(self) -> bool {
        self.0.is_some_and(|c| c.fills_only_required_arguments)
    }

    /// The name this client's model sees `tool` under.
    pub(crate) fn tool_name(self, tool: AgentTool) -> String {
        match self.0 {
            Some(client) => (client.tool_name)(tool, self.1),
            None => tool.name().to_string(),
        }
    }
}
