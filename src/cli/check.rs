//! `mekara check`: load compiled scripts and report their errors without running them.

use super::output::outln;
use clap::Args;

use crate::engine::compiled::{Limits, Program};
use crate::exit::Exit;

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// Scripts to check; all compiled scripts when none is given.
    names: Vec<String>,
}

pub(super) fn run(args: CheckArgs) -> anyhow::Result<Exit> {
    let (_, resolver) = super::locate()?;
    let names: Vec<String> = if args.names.is_empty() {
        resolver
            .list()
            .into_iter()
            .filter(|e| e.compiled)
            .map(|e| e.name.to_string())
            .collect()
    } else {
        args.names
    };
    // A name that resolves to no script is a mistake on the command line, as it is for
    // `mekara run`: the same error, the same exit code (2), before anything is checked.
    let scripts = names
        .iter()
        .map(|name| resolver.resolve(name))
        .collect::<Result<Vec<_>, _>>()?;
    let mut failed = 0;
    for script in &scripts {
        let Some(compiled) = &script.compiled else {
            outln!("{}: NL only, nothing to check", script.name)?;
            continue;
        };
        match Program::load(&compiled.origin, &compiled.text, &Limits::default()) {
            Ok(_) => outln!("{}: ok ({})", script.name, compiled.origin)?,
            Err(e) => {
                outln!("{}: {}\n{}\n", script.name, compiled.origin, e.message)?;
                failed += 1;
            }
        }
    }
    if failed > 0 {
        outln!("{failed} of {} scripts have errors", names.len())?;
        Ok(Exit::Failure)
    } else {
        Ok(Exit::Success)
    }
}
