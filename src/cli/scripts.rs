//! `mekara scripts`: what scripts there are, and where one resolves from.

use super::output::outln;
use clap::{Args, Subcommand};

use crate::exit::Exit;
use crate::script::Listing;

#[derive(Debug, Args)]
pub(super) struct ScriptsArgs {
    /// Also list the bundled demo scripts (`test:*`), which exist for mekara's own tests.
    #[arg(long)]
    all: bool,
    #[command(subcommand)]
    command: Option<ScriptsCommand>,
}

#[derive(Debug, Subcommand)]
enum ScriptsCommand {
    /// Say where each file of a script resolves from.
    Show {
        /// The script's name (`test/random` or `test:random`).
        name: String,
    },
    /// Copy a bundled script into the project (`.mekara/scripts/`) to change it there.
    Eject {
        /// The bundled script's name (`compile`, `test:random`).
        name: String,
        /// Overwrite the project's files if they exist.
        #[arg(long)]
        force: bool,
    },
}

pub(super) fn run(args: ScriptsArgs) -> anyhow::Result<Exit> {
    let (locations, resolver) = super::locate()?;
    match args.command {
        None => {
            let entries = resolver.list(Listing::all_if(args.all));
            let width = entries
                .iter()
                .map(|e| e.name.to_string().len())
                .max()
                .unwrap_or(4)
                .max(4);
            outln!(
                "{:width$}  {:8}  {:8}  DESCRIPTION",
                "NAME",
                "LEVEL",
                "KIND"
            )?;
            let mut shadowing = Vec::new();
            for e in entries {
                if e.level == crate::script::Level::Project
                    && let Ok(script) = resolver.resolve(e.name.as_path())
                    && resolver.shadowing(e.name.as_path(), &script).is_some()
                {
                    shadowing.push(format!("`{}`", e.name));
                }
                let kind = if e.compiled { "compiled" } else { "nl" };
                outln!(
                    "{:width$}  {:8}  {:8}  {}",
                    e.name.to_string(),
                    e.level.to_string(),
                    kind,
                    e.description
                )?;
            }
            if !shadowing.is_empty() {
                eprintln!(
                    "Project scripts with the name of a bundled script run only once you agree: {} (`mekara scripts show NAME` names their files).",
                    shadowing.join(", ")
                );
            }
            if !args.all {
                eprintln!(
                    "The bundled demo scripts (`test:*`) are left out: `mekara scripts --all` lists them."
                );
            }
        }
        Some(ScriptsCommand::Show { name }) => {
            let script = resolver.resolve(&name)?;
            outln!("{}: {}", script.name, script.description())?;
            outln!("  nl:       {} ({})", script.nl.origin, script.nl.level)?;
            match &script.compiled {
                Some(c) => outln!("  compiled: {} ({})", c.origin, c.level)?,
                None => outln!("  compiled: none (the agent follows the NL instructions)")?,
            }
        }
        Some(ScriptsCommand::Eject { name, force }) => {
            // Outside a project, the current folder becomes one.
            let root = match locations.project_root {
                Some(root) => root,
                None => std::env::current_dir()?,
            };
            let ejected = crate::script::eject::eject(&name, &root.join(".mekara"), force)?;
            outln!("ejected `{}` into the project:", ejected.name)?;
            for file in &ejected.files {
                outln!("  {}", file.strip_prefix(&root).unwrap_or(file).display())?;
            }
            outln!("Change it there: the project's copy now wins over the bundled one.")?;
        }
    }
    Ok(Exit::Success)
}
