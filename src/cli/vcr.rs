//! `mekara vcr replay`: replay a recorded MCP session against the real server code.

use super::output::outln;
use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::engine::Settings;
use crate::exit::Exit;
use crate::mcp::{Registry, SessionPlan, vcr};

#[derive(Debug, Args)]
pub(super) struct VcrArgs {
    #[command(subcommand)]
    command: VcrCommand,
}

#[derive(Debug, Subcommand)]
enum VcrCommand {
    /// Feed a cassette's tool calls to a fresh session, answer its shell steps from the
    /// recording (nothing runs), and check every reply matches. Runs are journaled in a
    /// temporary folder.
    Replay {
        /// The cassette (recorded with `MEKARA_VCR_CASSETTE=FILE mekara mcp`).
        cassette: PathBuf,
        /// The folder the session runs in, as it did when recorded (default: the current
        /// one).
        #[arg(long, short = 'C', value_name = "DIR")]
        working_dir: Option<PathBuf>,
    },
}

pub(super) fn run(args: VcrArgs) -> anyhow::Result<Exit> {
    let VcrCommand::Replay {
        cassette,
        working_dir,
    } = args.command;
    let cwd = std::env::current_dir()?;
    let dir = working_dir.map_or_else(|| cwd.clone(), |d| cwd.join(d));
    let mut plan = SessionPlan::discover(&dir, Settings::default().evaluating_in_children())?;
    let runs = tempfile::Builder::new().prefix("mekara-vcr-").tempdir()?;
    plan.store = crate::store::files(runs.path());
    match vcr::replay(&cassette, &dir, |runner| Registry::new(plan, runner)) {
        Ok(done) => {
            outln!(
                "replayed {} calls and {} shell steps from {}: every reply matched",
                done.calls,
                done.steps,
                cassette.display()
            )?;
            Ok(Exit::Success)
        }
        Err(e @ vcr::VcrError::Mismatch { .. }) => {
            eprintln!("error: {e}");
            Ok(Exit::Failure)
        }
        Err(e) => Err(e.into()),
    }
}
