//! The project a command works in, as every command finds it: its folders, its scripts'
//! resolver and run store, and a script as the command line names it.

use crate::engine::EngineError;
use crate::paths::Locations;
use crate::script::{Orphan, Resolver};

use super::usage::usage;

/// The script a command line names: `arg` itself, or, when `arg` is the path of a script's
/// file (`mekara run .mekara/scripts/nl/hello.md`), the name that resolves to that file.
/// A path that no name resolves to is a usage error that says what to type instead.
pub(crate) fn script_named(
    resolver: &Resolver,
    arg: &str,
    command: &str,
) -> anyhow::Result<String> {
    let path = std::path::Path::new(arg);
    let is_path = path.extension().is_some_and(|e| e == "md" || e == "star") || path.is_file();
    if !is_path {
        return Ok(arg.to_string());
    }
    let same = |origin: &str| {
        let canonical = |p: &std::path::Path| std::fs::canonicalize(p).ok();
        canonical(std::path::Path::new(origin)).is_some_and(|o| Some(o) == canonical(path))
    };
    let absolute = std::env::current_dir().map_or_else(|_| path.to_path_buf(), |d| d.join(path));
    if let Some(name) = Resolver::name_of_file(&absolute) {
        match resolver.resolve(name.as_path()) {
            Ok(script)
                if same(&script.nl.origin)
                    || script.compiled.as_ref().is_some_and(|c| same(&c.origin)) =>
            {
                return Ok(name.as_path().to_string());
            }
            Ok(script) => {
                return usage(format!(
                    "`{arg}` is a file of script `{name}`, but here `{name}` resolves to `{}`; `mekara {command}` takes a script's name: type `mekara {command} {name}` to use that one",
                    script.nl.origin
                ));
            }
            Err(_) => {}
        }
    }
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("NAME");
    let put = if path.is_file() {
        "move it"
    } else {
        "put the instructions"
    };
    usage(format!(
        "`mekara {command}` takes a script's name, not a file, and no script resolves to `{arg}`; {put} to `.mekara/scripts/nl/{stem}.md` (a compiled form goes to `.mekara/scripts/compiled/{stem}.star`), then type `mekara {command} {stem}`"
    ))
}

/// The project around the current directory, and its resolver.
pub(crate) fn locate() -> anyhow::Result<(Locations, Resolver)> {
    let locations = Locations::from_current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the current directory: {e}"))?;
    let resolver = Resolver::new(&locations);
    Ok((locations, resolver))
}

/// The run store of these locations.
pub(crate) fn run_store(
    locations: &Locations,
) -> Result<crate::engine::store::RunStore, EngineError> {
    crate::store::config::run_store(locations)
}

/// What to do about a compiled file without its NL file.
pub(crate) fn orphan_hint(orphan: &Orphan) -> String {
    format!(
        "write `{}` (the compiled script's instructions for the agent when a step fails); a compiled script runs only beside its NL file",
        orphan.nl.display()
    )
}
