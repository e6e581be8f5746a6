//! The agent layer: what mekara says to an agent and what an agent may say back, whatever
//! carries it, and what mekara knows of each agent client. `mekara mcp` ([`crate::mcp`]) and
//! unattended runs (`crate::cli`'s `unattended`) are adapters on it; the hooks and the
//! installer use it too. It knows the engine; nothing here knows MCP's protocol or a
//! terminal.
//!
//! - [`session`]: one run as an agent drives it, the synchronous core every call on a run
//!   goes through;
//! - [`tools`]: the calls an agent makes, by name, with their argument checks;
//! - [`history`]: what happened during a call, collected for the reply;
//! - [`reply`]: every word said to the agent: replies, refusals, progress, prompts;
//! - [`headless`]: the request an agent process gets in an unattended run and the answer it
//!   gives back, and what every headless adapter shares;
//! - [`rate_limit`]: a rate limit or an overload of the model an agent process met, and the
//!   backoff an unattended run waits it out with;
//! - [`client`]: what mekara knows of a client ([`Client`]), and how `mekara install` is
//!   given it;
//! - [`clients`]: every client ([`CLIENTS`]), and the values of `--client` and `--agent`;
//! - one file per agent client ([`claude`], [`opencode`], [`codex`], [`gemini`], [`qwen`],
//!   [`copilot`]), listed in [`CLIENTS`]: its tool names, its part of `mekara install`, its
//!   headless adapter; and [`command`], the generic `--agent-command` contract.

pub(crate) mod claude;
pub(crate) mod client;
pub(crate) mod clients;
pub(crate) mod codex;
pub(crate) mod command;
pub(crate) mod copilot;
pub(crate) mod gemini;
pub(crate) mod headless;
pub(crate) mod history;
pub(crate) mod opencode;
pub(crate) mod prices;
pub(crate) mod qwen;
pub(crate) mod rate_limit;
pub(crate) mod reply;
pub(crate) mod session;
pub(crate) mod tools;

pub(crate) use client::Client;
pub(crate) use clients::CLIENTS;
