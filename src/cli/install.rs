//! `mekara install` and `mekara uninstall`.

use super::output::out;
use clap::{Args, ValueEnum};

use crate::exit::Exit;
pub(super) use crate::install::Direction;
use crate::install::{self, Client, Report, Scope};
use crate::paths::Locations;

#[derive(Debug, Args)]
pub(super) struct InstallArgs {
    /// For every project: `~/.mekara`, `~/.claude`, `~/.claude.json` instead of the project's
    /// `.mekara`, `.claude`, `.mcp.json`.
    #[arg(long)]
    user: bool,
    /// Also configure this client (repeatable); Claude Code is always configured.
    #[arg(long = "client", value_name = "CLIENT")]
    clients: Vec<ClientArg>,
    /// Show the changes without making them.
    #[arg(long)]
    dry_run: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ClientArg {
    /// Claude Code.
    Claude,
    /// OpenCode (`opencode.json`).
    Opencode,
    /// Codex (`.codex/config.toml`).
    Codex,
    /// Gemini CLI (`.gemini/settings.json`).
    Gemini,
    /// Qwen Code (`.qwen/settings.json`).
    Qwen,
    /// Copilot CLI (`.mcp.json`; `~/.copilot/mcp-config.json` with `--user`).
    Copilot,
}

pub(super) fn run(args: InstallArgs, direction: Direction) -> anyhow::Result<Exit> {
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the current directory: {e}"))?;
    let locations = Locations::discover(&cwd);
    let scope = if args.user {
        match locations.home {
            Some(home) => Scope::User(home),
            None => return super::usage("`--user` needs `HOME` to be set"),
        }
    } else {
        // Inside a project, install at its root; elsewhere the current folder becomes one.
        Scope::Project(locations.project_root.unwrap_or(cwd))
    };
    let clients: Vec<Client> = args
        .clients
        .iter()
        .map(|c| match c {
            ClientArg::Claude => Client::Claude,
            ClientArg::Opencode => Client::OpenCode,
            ClientArg::Codex => Client::Codex,
            ClientArg::Gemini => Client::Gemini,
            ClientArg::Qwen => Client::Qwen,
            ClientArg::Copilot => Client::Copilot,
        })
        .collect();
    let plan = install::plan(scope, &clients, direction)?;
    if !args.dry_run {
        install::apply(&plan)?;
    }
    out!(
        "{}",
        Report {
            plan: &plan,
            dry_run: args.dry_run
        }
    )?;
    Ok(Exit::Success)
}
