//! `mekara scripts`: what scripts there are, and where one resolves from.

use clap::{Args, Subcommand};

use crate::exit::Exit;

#[derive(Debug, Args)]
pub struct ScriptsArgs {
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
}

pub fn run(args: ScriptsArgs) -> anyhow::Result<Exit> {
    let (_, resolver) = super::locate()?;
    match args.command {
        None => {
            let entries = resolver.list();
            let width = entries
                .iter()
                .map(|e| e.name.to_string().len())
                .max()
                .unwrap_or(4)
                .max(4);
            println!(
                "{:width$}  {:8}  {:8}  DESCRIPTION",
                "NAME", "LEVEL", "KIND"
            );
            for e in entries {
                let kind = if e.compiled { "compiled" } else { "nl" };
                println!(
                    "{:width$}  {:8}  {:8}  {}",
                    e.name.to_string(),
                    e.level.to_string(),
                    kind,
                    e.description
                );
            }
        }
        Some(ScriptsCommand::Show { name }) => {
            let script = resolver.resolve(&name)?;
            println!("{}: {}", script.name, script.description());
            println!("  nl:       {} ({})", script.nl.origin, script.nl.level);
            match &script.compiled {
                Some(c) => println!("  compiled: {} ({})", c.origin, c.level),
                None => println!("  compiled: none (the agent follows the NL instructions)"),
            }
        }
    }
    Ok(Exit::Success)
}
