//! `mekara check`: load compiled scripts and report their errors without running them.

use super::output::outln;
use clap::Args;

use crate::engine::compiled::{Limits, Program};
use crate::exit::Exit;
use crate::script::Listing;

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// Scripts to check; all compiled scripts when none is given.
    names: Vec<String>,
    /// With no names: also check the bundled demo scripts (`test:*`).
    #[arg(long, conflicts_with = "names")]
    all: bool,
}

pub(super) fn run(args: CheckArgs) -> anyhow::Result<Exit> {
    let (_, resolver) = super::locate()?;
    let names: Vec<String> = if args.names.is_empty() {
        resolver
            .list(Listing::all_if(args.all))
            .into_iter()
            .filter(|e| e.compiled)
            .map(|e| e.name.to_string())
            .collect()
    } else {
        args.names
    };
    let mut failed = 0;
    for name in &names {
        let script = match resolver.resolve(name) {
            Ok(script) => script,
            Err(e) => {
                let hint = super::script_hint(&e)
                    .map(|h| format!("; {h}"))
                    .unwrap_or_default();
                outln!("error: {e}{hint}")?;
                failed += 1;
                continue;
            }
        };
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
