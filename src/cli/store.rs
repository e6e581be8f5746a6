//! `mekara store`: the shared run store's schema, and moving runs between the files of this
//! checkout and the shared store.

use clap::{Args, Subcommand};

use super::output::outln;
use crate::display::count;
use crate::exit::Exit;
use crate::store::postgres::{Moved, PgStore};

#[derive(Debug, Args)]
pub(super) struct StoreArgs {
    #[command(subcommand)]
    command: StoreCommand,
}

#[derive(Debug, Subcommand)]
enum StoreCommand {
    /// Create the shared store's tables, or upgrade them to this mekara's schema.
    Migrate,
    /// Copy this checkout's run files into the shared store (runs already there are kept
    /// as they are, so importing twice copies nothing twice).
    Import,
    /// Write the project's runs in the shared store as run files of this checkout (runs
    /// that already have a file are left alone).
    Export,
}

pub(super) fn run(args: StoreArgs) -> anyhow::Result<Exit> {
    let (locations, _) = super::locate()?;
    let Some(store) = crate::store::config::shared(&locations)? else {
        return super::usage(
            "no shared run store is set, so runs are journal files; set `[store] url = \"postgres://USER:PASSWORD@HOST/DATABASE\"` in `.mekara/config.toml` or `MEKARA_STORE_URL`",
        );
    };
    let runs_dir = locations
        .runs_dir()
        .ok_or(crate::engine::EngineError::NoRunsDir)?;
    match args.command {
        StoreCommand::Migrate => {
            let (from, to) = store.migrate()?;
            if from == to {
                outln!(
                    "the run store {} is at schema version {to} already",
                    place(&store)
                )?;
            } else {
                outln!(
                    "migrated the run store {} from schema version {from} to {to}",
                    place(&store)
                )?;
            }
            Ok(Exit::Success)
        }
        StoreCommand::Import => {
            let report = store.import(&runs_dir)?;
            moved(&report, "imported", "already in the store")
        }
        StoreCommand::Export => {
            let report = store.export(&runs_dir)?;
            moved(&report, "exported", "already a file here")
        }
    }
}

fn place(store: &PgStore) -> String {
    crate::engine::store::Store::place(store)
}

/// Says what an import or export did: each run not copied and why, then the counts.
fn moved(report: &[(String, Moved)], done: &str, present: &str) -> anyhow::Result<Exit> {
    let mut copied = 0;
    let mut kept = 0;
    let mut trouble = 0;
    for (id, what) in report {
        match what {
            Moved::Copied => copied += 1,
            Moved::Present => kept += 1,
            Moved::Busy => {
                trouble += 1;
                outln!("left {id}: another mekara process drives it; try again when it stops")?;
            }
            Moved::Unreadable(why) => {
                trouble += 1;
                outln!("left {id}: {why}")?;
            }
        }
    }
    outln!(
        "{done} {}; {} {present}",
        count(copied, "run"),
        count(kept, "run")
    )?;
    Ok(if trouble > 0 {
        Exit::Failure
    } else {
        Exit::Success
    })
}
