//! `mekara check`: load compiled scripts and report their errors without running them.

use super::output::outln;
use clap::Args;

use crate::engine::compiled::{CodeError, Limits, Program, typecheck};
use crate::exit::Exit;
use crate::script::{Listing, Script};

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// Scripts to check (names or `.star` files); all compiled scripts when none is given.
    names: Vec<String>,
    /// With no names: also check the bundled demo scripts (`test:*`).
    #[arg(long, conflicts_with = "names")]
    all: bool,
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
            .list(Listing::all_if(args.all))
            .into_iter()
            .filter(|e| e.compiled)
            .map(|e| e.name.to_string())
            .collect()
    } else {
        args.names
    };
    // A name that resolves to no script is a mistake on the command line, as it is for
    // `mekara run`: the same error and hint on stderr, the same exit code (2), before
    // anything is checked. A `.star` file is checked as it is, wherever it is.
    let mut targets = Vec::new();
    for arg in &names {
        let path = std::path::Path::new(arg);
        if path.extension().is_some_and(|e| e == "star") && path.is_file() {
            targets.push(Target::File(arg));
        } else {
            let name = super::script_named(&resolver, arg, "check")?;
            targets.push(Target::Script(resolver.resolve(&name)?));
        }
    }
    checked += targets.len();
    for target in targets {
        let script = match target {
            Target::File(arg) => {
                let text = std::fs::read_to_string(arg)?;
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
            Target::Script(script) => script,
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

/// What `mekara check` was asked to check.
enum Target<'a> {
    /// A `.star` file given by its path.
    File(&'a str),
    /// A script given by its name.
    Script(Script),
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
