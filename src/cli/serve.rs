//! `mekara serve`: serve the functions of Starlark tool modules as MCP tools (stdio, or
//! Streamable HTTP).

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Args;

use crate::display::quoted;
use crate::engine::compiled::Limits;
use crate::exit::Exit;
use crate::paths::Locations;
use crate::serve::{self, Config, EnvRunner, ToolServer, ToolSet};
use crate::transport;

#[derive(Debug, Args)]
pub(super) struct ServeArgs {
    /// `.star` modules to serve: files, folders (searched recursively) or globs. Default:
    /// the project's `.mekara/tools/`.
    #[arg(value_name = "PATH")]
    paths: Vec<String>,
    /// Serve only these tools (function names or their snake_case tool names).
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    tools: Option<Vec<String>>,
    /// A TOML file with `tools = [...]` and an `[env]` table; flags win over it.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// An environment variable for the tools' shell steps; only `MEKARA_...` names are
    /// applied. Repeatable.
    #[arg(long = "env", value_name = "KEY=VAL")]
    env: Vec<String>,
    #[command(flatten)]
    http: super::mcp::HttpArgs,
    /// Default timeout of shell steps, in seconds (a step's own `timeout` wins).
    #[arg(long, value_name = "SECONDS", default_value = "600")]
    timeout: super::Seconds,
    /// Interpreter ticks one call may take before it is stopped (a runaway function).
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_ticks)]
    max_ticks: u64,
}

pub(super) fn run(args: ServeArgs) -> anyhow::Result<Exit> {
    let default_timeout = super::timeout_arg("--timeout", &args.timeout)?;
    let http = args.http.options()?;
    let config = match &args.config {
        Some(path) => Config::read(path)?,
        None => Config::default(),
    };
    let mut env: BTreeMap<String, String> = config.env;
    for pair in &args.env {
        let Some((key, value)) = pair.split_once('=').filter(|(k, _)| !k.is_empty()) else {
            return super::usage(format!(
                "`--env {pair}` is not `KEY=VALUE`; for example `--env MEKARA_TOKEN=abc`"
            ));
        };
        env.insert(key.to_string(), value.to_string());
    }
    let (env, refused) = serve::gate_env(env);
    if !refused.is_empty() {
        eprintln!(
            "warning: not applying {}: served tools only get variables whose names start with `{}`",
            quoted(&refused),
            serve::ENV_PREFIX
        );
    }

    let cwd = std::env::current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the current directory: {e}"))?;
    let locations = Locations::discover(&cwd);
    let given_paths = !args.paths.is_empty();
    let paths = if args.paths.is_empty() {
        let root = locations
            .project_root
            .clone()
            .unwrap_or_else(|| cwd.clone());
        vec![root.join(".mekara/tools").display().to_string()]
    } else {
        args.paths
    };
    let limits = Limits {
        max_ticks: args.max_ticks,
        ..Limits::default()
    };
    let mut tools = ToolSet::load(&paths, &cwd, &limits)?;
    if let Some(names) = args.tools.or(config.tools) {
        let unknown = tools.keep(&names)?;
        if !unknown.is_empty() {
            eprintln!(
                "warning: no tool is called {}; serving {}",
                quoted(&unknown),
                quoted(tools.names())
            );
        }
    }
    tracing::info!("serving {}", quoted(tools.names()));
    if http.is_none() {
        super::mcp::tell_a_person_at_the_terminal(
            if given_paths {
                "mekara serve PATH..."
            } else {
                "mekara serve"
            },
            &format!(
                "It serves {}. An MCP client starts it: for Claude Code, add it to the \
                 project's `.mcp.json` (`\"command\": \"mekara\", \"args\": [\"serve\", ...]`).",
                quoted(tools.names())
            ),
        );
    }
    let server = ToolServer::new(
        tools,
        EnvRunner::new(env, crate::client::McpClient::for_locations(&locations)),
        cwd,
        default_timeout,
        limits,
        crate::engine::compiled::child::evaluator(),
    );

    super::mcp::serve_until_done(http.is_some(), async move {
        match http {
            Some(options) => {
                transport::serve_http("mekara serve", options, move || server.clone()).await
            }
            None => transport::serve_stdio(server).await,
        }
    })
}
