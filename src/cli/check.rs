//! `mekara check`: load compiled scripts and report their errors without running them.

use super::output::outln;
use clap::Args;

use crate::engine::compiled::{Limits, Program, typecheck};
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
    let mut failed = 0;
    for name in &names {
        let script = match resolver.resolve(name) {
            Ok(script) => script,
            Err(e) => {
                outln!("error: {e}")?;
                failed += 1;
                continue;
            }
        };
        let Some(compiled) = &script.compiled else {
            outln!("{}: NL only, nothing to check", script.name)?;
            continue;
        };
        // Loading finds what stops a script before it starts; only a script that loads is
        // worth typechecking (its errors would repeat the same problem).
        let problems = match Program::load(&compiled.origin, &compiled.text, &Limits::default()) {
            Ok(_) => typecheck(&compiled.origin, &compiled.text),
            Err(e) => vec![e],
        };
        if problems.is_empty() {
            outln!("{}: ok ({})", script.name, compiled.origin)?;
        } else {
            outln!("{}: {}", script.name, compiled.origin)?;
            for problem in problems {
                outln!("{}\n", problem.message)?;
            }
            failed += 1;
        }
    }
    if failed > 0 {
        outln!("{failed} of {} scripts have errors", names.len())?;
        Ok(Exit::Failure)
    } else {
        Ok(Exit::Success)
    }
}
