//! `mekara serve`: the public functions of Starlark tool modules served as MCP tools, with
//! JSON Schemas derived from their signatures (DESIGN §8).
//!
//! - [`error`]: why tools cannot be served;
//! - [`module`]: finding and loading modules, turning functions into [`ServedFunction`]s;
//! - [`schema`]: the JSON shapes of parameters and results (schemas and argument checks);
//! - [`server`]: the rmcp handler that lists and calls tools;
//! - this file: the set of tools with its load-time rules, the config file, the environment
//!   shell steps get.
//!
//! A call runs the function through the engine's ordinary step builtins
//! ([`crate::engine::compiled::call_directly`]) over a journal that lives only as long as the
//! call; this subsystem adds no builtins of its own. The transports are shared with
//! `mekara mcp` ([`crate::transport`]).

mod error;
pub(crate) mod module;
pub(crate) mod schema;
pub(crate) mod server;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub(crate) use error::ServeError;
pub(crate) use module::ServedFunction;
pub(crate) use server::ToolServer;

use crate::client::{ClientRunner, McpClient};
use crate::display::quoted;
use crate::engine::compiled::Limits;
use crate::engine::runner::{Ran, ShellStep};
use crate::engine::{CancelToken, ShellRunner, StepRunner};

/// The tools being served, in the order of their modules and definitions.
pub(crate) struct ToolSet {
    tools: Vec<ServedFunction>,
}

impl ToolSet {
    /// Loads every module of `paths` (relative to `base`). Fails on the first module that
    /// does not load, and on two functions that give the same tool name.
    pub(crate) fn load(
        paths: &[String],
        base: &Path,
        limits: &Limits,
    ) -> Result<ToolSet, ServeError> {
        let mut tools: Vec<ServedFunction> = Vec::new();
        for path in module::find_modules(paths, base)? {
            for tool in module::load(base, &path, limits)? {
                if let Some(taken) = tools.iter().find(|t| t.name == tool.name) {
                    return Err(ServeError::Duplicate {
                        name: tool.name.clone(),
                        first: taken.function.clone(),
                        first_module: taken.module.path.display().to_string(),
                        second: tool.function.clone(),
                        second_module: tool.module.path.display().to_string(),
                    });
                }
                tools.push(tool);
            }
        }
        Ok(ToolSet { tools })
    }

    /// Keeps the tools named in `names` (by function name or tool name). Returns the names
    /// that match no tool; keeping nothing is an error.
    pub(crate) fn keep(&mut self, names: &[String]) -> Result<Vec<String>, ServeError> {
        let matches =
            |tool: &ServedFunction, name: &str| tool.name == name || tool.function == name;
        let unknown: Vec<String> = names
            .iter()
            .filter(|n| !self.tools.iter().any(|t| matches(t, n)))
            .cloned()
            .collect();
        let available = self.names();
        self.tools.retain(|t| names.iter().any(|n| matches(t, n)));
        if self.tools.is_empty() {
            return Err(ServeError::Nothing(format!(
                "none of {} is a tool; the modules define {}",
                quoted(names),
                if available.is_empty() {
                    "none".to_string()
                } else {
                    quoted(&available)
                }
            )));
        }
        Ok(unknown)
    }

    /// The tools.
    pub(crate) fn tools(&self) -> &[ServedFunction] {
        &self.tools
    }

    /// The tool called `name`.
    pub(crate) fn get(&self, name: &str) -> Option<&ServedFunction> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The tool names.
    pub(crate) fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.clone()).collect()
    }
}

/// `--config FILE`: which tools to serve and the environment of their shell steps.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Config {
    /// Tool names to serve (as `--tools`).
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// Environment variables for shell steps (as `--env`).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
}

impl Config {
    /// Reads a TOML config file.
    pub(crate) fn read(path: &Path) -> Result<Config, ServeError> {
        let text = std::fs::read_to_string(path).map_err(|e| ServeError::Config {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        toml::from_str(&text).map_err(|e| ServeError::Config {
            path: path.to_path_buf(),
            reason: e.message().to_string(),
        })
    }
}

/// The prefix of the environment variables `--env` and the config may set.
pub(crate) const ENV_PREFIX: &str = "MEKARA_";

/// Splits variables into those applied (named `MEKARA_...`) and the names refused: a tool
/// server's configuration must not be able to change `PATH`, `LD_PRELOAD` and the like of
/// the commands its tools run.
pub(crate) fn gate_env(vars: BTreeMap<String, String>) -> (BTreeMap<String, String>, Vec<String>) {
    let (applied, refused): (BTreeMap<_, _>, BTreeMap<_, _>) = vars
        .into_iter()
        .partition(|(k, _)| k.starts_with(ENV_PREFIX));
    (applied, refused.into_keys().collect())
}

/// The served tools' effect runner: shell steps get the served environment added (a step's
/// own `env` wins); `mcp()` steps reach the servers of the project's `.mcp.json` under its
/// policy, as in `mekara run`. One client (one connection per server) serves every session.
#[derive(Clone)]
pub(crate) struct EnvRunner {
    env: BTreeMap<String, String>,
    inner: Arc<ClientRunner>,
}

impl EnvRunner {
    /// Runs real processes with `env` added, and tool calls with `client`.
    pub(crate) fn new(env: BTreeMap<String, String>, client: McpClient) -> EnvRunner {
        EnvRunner {
            env,
            inner: Arc::new(ClientRunner::new(ShellRunner::new(), client)),
        }
    }
}

impl EnvRunner {
    /// `step` with the served environment added (its own `env` wins).
    fn with_env(&self, step: &ShellStep) -> ShellStep {
        let mut step = step.clone();
        for (key, value) in &self.env {
            step.env.entry(key.clone()).or_insert_with(|| value.clone());
        }
        step
    }
}

impl StepRunner for EnvRunner {
    fn inner(&self) -> Option<&dyn StepRunner> {
        Some(self.inner.as_ref())
    }

    fn run_shell(
        &self,
        step: &ShellStep,
        on_output: &mut dyn FnMut(&[u8]),
        cancel: &CancelToken,
    ) -> Ran {
        if self.env.is_empty() {
            return self.inner.run_shell(step, on_output, cancel);
        }
        self.inner
            .run_shell(&self.with_env(step), on_output, cancel)
    }

    fn run_shells(
        &self,
        steps: &[ShellStep],
        max: usize,
        cancel: &CancelToken,
        on_done: &mut dyn FnMut(usize, Ran),
    ) {
        if self.env.is_empty() {
            return self.inner.run_shells(steps, max, cancel, on_done);
        }
        let steps: Vec<ShellStep> = steps.iter().map(|step| self.with_env(step)).collect();
        self.inner.run_shells(&steps, max, cancel, on_done);
    }
}
