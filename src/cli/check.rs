//! `mekara check`: load compiled scripts and report their errors without running them.

use super::output::outln;
use clap::Args;

use crate::engine::compiled::{
    CodeError, FindModule, Limits, Program, child, person_warnings, target_problems, typecheck,
};
use crate::exit::Exit;
use crate::script::{Level, Listing, Orphan, Resolver, Script, ScriptName};

#[derive(Debug, Args)]
pub(super) struct CheckArgs {
    /// Scripts to check (names or `.star` files); all compiled scripts when none is given.
    names: Vec<String>,
    /// With no names: also check the bundled demo scripts (`test:*`).
    #[arg(long, conflicts_with = "names")]
    all: bool,
}

pub(super) fn run(args: CheckArgs) -> anyhow::Result<Exit> {
    let (locations, resolver) = super::locate()?;
    // The servers `mcp()` steps may name (none read when `.mcp.json` does not load).
    let servers = crate::client::McpClient::for_locations(&locations)
        .servers()
        .ok();
    let servers = servers.as_deref();
    let mut targets = Vec::new();
    if args.names.is_empty() {
        // A compiled file that no name resolves to would never run: that is an error too.
        // Its code is checked as well, so that writing the NL file is the only fix left.
        targets.extend(resolver.orphans().into_iter().map(Target::Orphan));
        for entry in resolver.list(Listing::all_if(args.all)) {
            if entry.compiled {
                targets.push(Target::Script(resolver.resolve(entry.name.as_path())?));
            }
        }
        // One list by name, orphans among the scripts, as `mekara scripts` orders them.
        targets.sort_by(|a, b| a.name().cmp(&b.name()));
    } else {
        // A name that resolves to no script is a mistake on the command line, as it is for
        // `mekara run`: the same error and hint on stderr, the same exit code (2), before
        // anything is checked. A `.star` file is checked as it is, wherever it is.
        for arg in &args.names {
            let path = std::path::Path::new(arg);
            if path.extension().is_some_and(|e| e == "star") && path.is_file() {
                targets.push(Target::File(arg));
            } else {
                let name = super::script_named(&resolver, arg, "check")?;
                targets.push(Target::Script(resolver.resolve(&name)?));
            }
        }
    }
    let mut failed = 0;
    let checked = targets.len();
    for target in targets {
        // What the script's steps hand the agent that is the person's to decide: said, but
        // the script still passes.
        let warnings;
        // The line for a file that passes, the header above the problems of one that does
        // not, and its problems.
        let (ok, header, problems) = match target {
            Target::File(arg) => {
                let text = std::fs::read_to_string(arg)?;
                let level = resolver.level_of_file(std::path::Path::new(arg));
                warnings = person_warnings(arg, &text);
                (
                    format!("{arg}: ok"),
                    format!("{arg}:"),
                    problems(&resolver, servers, level, arg, &text),
                )
            }
            Target::Script(script) => {
                let Some(compiled) = &script.compiled else {
                    outln!("{}: NL only, nothing to check", script.name)?;
                    continue;
                };
                warnings = person_warnings(&compiled.origin, &compiled.text);
                (
                    format!("{}: ok ({})", script.name, compiled.origin),
                    format!("{}: {}", script.name, compiled.origin),
                    problems(
                        &resolver,
                        servers,
                        compiled.level,
                        &compiled.origin,
                        &compiled.text,
                    ),
                )
            }
            Target::Orphan(orphan) => {
                outln!(
                    "{}: {}\nerror: {orphan}\nhint: {}\n",
                    orphan.name,
                    orphan.compiled.display(),
                    super::orphan_hint(&orphan)
                )?;
                let origin = orphan.compiled.display().to_string();
                match std::fs::read_to_string(&orphan.compiled) {
                    Ok(text) => {
                        let level = resolver.level_of_file(&orphan.compiled);
                        print_problems(&problems(&resolver, servers, level, &origin, &text))?;
                    }
                    Err(e) => outln!("error: cannot read `{origin}`: {e}\n")?,
                }
                failed += 1;
                continue;
            }
        };
        if problems.is_empty() {
            outln!("{ok}")?;
        } else {
            outln!("{header}")?;
            print_problems(&problems)?;
            failed += 1;
        }
        for warning in &warnings {
            outln!("{warning}\n")?;
        }
    }
    if failed > 0 {
        let verb = if failed == 1 { "has" } else { "have" };
        outln!("{failed} of {checked} scripts {verb} errors")?;
        Ok(Exit::Failure)
    } else {
        Ok(Exit::Success)
    }
}

/// Each problem's message, with a blank line after it.
fn print_problems(problems: &[CodeError]) -> std::io::Result<()> {
    problems
        .iter()
        .try_for_each(|problem| outln!("{}\n", problem.message))
}

/// What `mekara check` was asked to check.
enum Target<'a> {
    /// A `.star` file given by its path.
    File(&'a str),
    /// A script given by its name, or listed.
    Script(Script),
    /// A compiled file no NL file pairs with.
    Orphan(Orphan),
}

impl Target<'_> {
    /// The script's name, for ordering the listed targets.
    fn name(&self) -> Option<&ScriptName> {
        match self {
            Target::File(_) => None,
            Target::Script(script) => Some(&script.name),
            Target::Orphan(orphan) => Some(&orphan.name),
        }
    }
}

/// Loads the compiled script `text` as a run would, to find what stops it before it starts:
/// its top level runs in an evaluator process, under the memory cap, so that a statement
/// past the cap is the script's error with its line, not the end of `mekara check`.
fn load(origin: &str, text: &str, find: &FindModule<'_>) -> Result<(), CodeError> {
    let limits = Limits::default();
    match child::evaluator() {
        Some(exe) => child::load(
            &exe,
            &child::Sources::collect(origin, text, find)?,
            &limits,
            true,
        ),
        None => Program::load(origin, text, find, &limits).map(drop),
    }
}

/// What is wrong with the compiled script `text`, whose helper modules are those of
/// `level`. Loading finds what stops a script before it starts; only a script that loads is
/// worth typechecking (its errors would repeat the same problem), and checking the scripts
/// and servers its steps name.
fn problems(
    resolver: &Resolver,
    servers: Option<&[String]>,
    level: Level,
    origin: &str,
    text: &str,
) -> Vec<CodeError> {
    let find = |path: &str| resolver.helper(level, path);
    match load(origin, text, &find) {
        Ok(()) => {
            let mut found = typecheck(origin, text, &find);
            let script_error = |name: &str| resolver.resolve(name).err().map(|e| e.to_string());
            let server_error = |name: &str| match servers {
                Some(known) if known.iter().any(|s| s == name) => None,
                Some([]) => Some(format!("no MCP server `{name}`: `.mcp.json` declares none")),
                Some(known) => Some(format!(
                    "no MCP server `{name}` in `.mcp.json`; it declares {}",
                    crate::display::quoted(known)
                )),
                // A `.mcp.json` that does not load is `mekara tools`' to report.
                None => None,
            };
            found.extend(target_problems(origin, text, &script_error, &server_error));
            found
        }
        Err(e) => vec![e],
    }
}
