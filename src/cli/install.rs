//! `mekara install` and `mekara uninstall`.

use super::output::{out, outln};
use clap::Args;

use crate::agents::{CLIENTS, Client};
use crate::exit::Exit;
pub(super) use crate::install::Direction;
use crate::install::{self, Report, Scope};
use crate::paths::Locations;

#[derive(Debug, Args)]
pub(super) struct InstallArgs {
    /// For every project: `~/.mekara`, `~/.claude`, `~/.claude.json` instead of the project's
    /// `.mekara`, `.claude`, `.mcp.json`.
    #[arg(long)]
    user: bool,
    /// Also configure this client (repeatable); Claude Code is always configured.
    #[arg(long = "client", value_name = "CLIENT")]
    clients: Vec<&'static Client>,
    /// Show the changes without making them.
    #[arg(long)]
    dry_run: bool,
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
    let plan = install::plan(scope, &CLIENTS, &args.clients, direction)?;
    let notes = if args.dry_run {
        Vec::new()
    } else {
        install::apply(&plan)?
    };
    out!(
        "{}",
        Report {
            plan: &plan,
            dry_run: args.dry_run
        }
    )?;
    for note in notes {
        outln!("{note}")?;
    }
    Ok(Exit::Success)
}
