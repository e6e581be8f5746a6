//! `mekara check`: load compiled scripts and report their errors without running them.

use super::output::outln;
use clap::Args;

use crate::engine::compiled::{CodeError, Limits, Program, typecheck};
use crate::exit::Exit;

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// Scripts to check (names or `.star` files); all compiled scripts when none is given.
    names: Vec<String>,
}

pub(super) fn run(args: CheckArgs) -> anyhow::Result<Exit> {
    let (_, resolver) = super::locate()?;
    let mut failed = 0;
    let mut checked = 0;
    let names: Vec<String> = if args.names.is_empty() {
        // A compiled file that no name resolves to would never run: that is an error too.
        // Its code is checked as well, so that writing the NL file is the only fix left.
        for orphan in resolver.orphans() {
            outln!(
                "{}: {}\nerror: {orphan}\nhint: {}\n",
                orphan.name,
                orphan.compiled.display(),
                super::orphan_hint(&orphan)
            )?;
            let origin = orphan.compiled.display().to_string();
            match std::fs::read_to_string(&orphan.compiled) {
                Ok(text) => {
                    for problem in problems(&origin, &text) {
                        outln!("{}\n", problem.message)?;
                    }
                }
                Err(e) => outln!("error: cannot read `{origin}`: {e}\n")?,
            }
            failed += 1;
            checked += 1;
        }
        resolver
            .list()
            .into_iter()
            .filter(|e| e.compiled)
            .map(|e| e.name.to_string())
            .collect()
    } else {
        args.names
    };
    checked += names.len();
    for arg in &names {
        // A `.star` file is checked as it is, wherever it is.
        let path = std::path::Path::new(arg);
        if path.extension().is_some_and(|e| e == "star") && path.is_file() {
            let text = std::fs::read_to_string(path)?;
            let problems = problems(arg, &text);
            if problems.is_empty() {
                outln!("{arg}: ok")?;
            } else {
                outln!("{arg}:")?;
                for problem in problems {
                    outln!("{}\n", problem.message)?;
                }
                failed += 1;
            }
            continue;
        }
        let name = match super::script_named(&resolver, arg, "check") {
            Ok(name) => name,
            Err(e) => {
                outln!("error: {e}")?;
                failed += 1;
                continue;
            }
        };
        let script = match resolver.resolve(&name) {
            Ok(script) => script,
            Err(e) => {
                match super::script_hint(&e) {
                    Some(hint) => outln!("error: {e}\nhint: {hint}")?,
                    None => outln!("error: {e}")?,
                }
                failed += 1;
                continue;
            }
        };
        let Some(compiled) = &script.compiled else {
            outln!("{}: NL only, nothing to check", script.name)?;
            continue;
        };
        let problems = problems(&compiled.origin, &compiled.text);
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
        outln!("{failed} of {checked} scripts have errors")?;
        Ok(Exit::Failure)
    } else {
        Ok(Exit::Success)
    }
}

/// What is wrong with the compiled script `text`. Loading finds what stops a script before it
/// starts; only a script that loads is worth typechecking (its errors would repeat the same
/// problem).
fn problems(origin: &str, text: &str) -> Vec<CodeError> {
    match Program::load(origin, text, &Limits::default()) {
        Ok(_) => typecheck(origin, text),
        Err(e) => vec![e],
    }
}
