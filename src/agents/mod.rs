//! The agent layer: what mekara says to an agent and what an agent may say back, whatever
//! carries it. `mekara mcp` ([`crate::mcp`]) and unattended runs (`crate::cli`'s
//! `unattended`) are adapters on it; the hooks and the installer use it too. It knows the
//! engine; nothing here knows MCP's protocol, a terminal or a client's process.
//!
//! - [`session`]: one run as an agent drives it, the synchronous core every call on a run
//!   goes through;
//! - [`tools`]: the calls an agent makes, by name, with their argument checks;
//! - [`history`]: what happened during a call, collected for the reply;
//! - [`reply`]: every word said to the agent: replies, refusals, progress, prompts;
//! - [`headless`]: the request an agent process gets in an unattended run and the answer it
//!   gives back, and what every headless adapter shares;
//! - one file per agent client: [`claude`], [`codex`], [`gemini`], and [`command`] for the
//!   generic `--agent-command` contract.

pub(crate) mod claude;
pub(crate) mod codex;
pub(crate) mod command;
pub(crate) mod gemini;
pub(crate) mod headless;
pub(crate) mod history;
pub(crate) mod reply;
pub(crate) mod session;
pub(crate) mod tools;
