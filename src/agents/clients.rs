//! Every agent client mekara knows ([`CLIENTS`], each a [`Client`] in its own file). The
//! command line takes them as values of `--client` and `--agent` from that list (the
//! [`ValueEnum`] impls here), and an MCP connection's client is found in it
//! ([`AgentClient`]), so a new client is not enumerated anywhere else.

use std::sync::LazyLock;

use clap::ValueEnum;
use clap::builder::PossibleValue;

pub(crate) use super::client::{AgentClient, Client, Served};
use super::headless::Agent;
use super::{claude, codex, copilot, gemini, opencode, qwen};

/// Every agent client mekara knows, in the order `mekara install --help` lists them. A new
/// client is a file of its own (with its `mod` line in `agents/mod.rs`) and its line here.
pub(crate) static CLIENTS: [&Client; 6] = [
    &claude::CLIENT,
    &opencode::CLIENT,
    &codex::CLIENT,
    &gemini::CLIENT,
    &qwen::CLIENT,
    &copilot::CLIENT,
];

/// `--client`: every client, described.
impl ValueEnum for &'static Client {
    fn value_variants<'a>() -> &'a [Self] {
        &CLIENTS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.name).help(self.help))
    }
}

/// A client with a headless adapter, as `--agent` takes it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Headless {
    /// The client.
    pub client: &'static Client,
    /// Its adapter.
    pub start: fn() -> Box<dyn Agent>,
}

/// `--agent`: the clients with an adapter, by name only (a description of each would turn
/// `mekara run --help` into clap's long form).
impl ValueEnum for Headless {
    fn value_variants<'a>() -> &'a [Self] {
        static HEADLESS: LazyLock<Vec<Headless>> = LazyLock::new(|| {
            CLIENTS
                .into_iter()
                .filter_map(|client| {
                    let start = client.headless?;
                    Some(Headless { client, start })
                })
                .collect()
        });
        &HEADLESS
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.client.name))
    }
}

/// Found in [`CLIENTS`]; the rest of it is in [`super::client`].
impl AgentClient {
    /// The client that calls itself `name` in `initialize`, given mekara's server as
    /// `served` says.
    pub(crate) fn from_client_info(name: &str, served: Served) -> AgentClient {
        AgentClient::new(
            CLIENTS.into_iter().find(|c| (c.is_client_info)(name)),
            served,
        )
    }
}
