//! Scripts compiled into the binary: the `scripts/` folder of this repository.

/// A bundled file: its path under `scripts/` and its text.
pub(crate) struct BundledFile {
    /// `nl/<name>.md` or `compiled/<name>.star`.
    pub path: &'static str,
    /// The file's text.
    pub text: &'static str,
}

/// `"nl/x.md"` bundles `scripts/nl/x.md`; `"nl/x.md" + "docs/y.md"` appends the repository
/// file `docs/y.md` to it, so one source can serve both the docs and a script.
macro_rules! bundled {
    ($($path:literal $(+ $extra:literal)?),* $(,)?) => {
        &[$(BundledFile {
            path: $path,
            text: concat!(
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/", $path))
                $(, include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/", $extra)))?
            ),
        }),*]
    };
}

/// Every bundled file. Add a script here when you add it to `scripts/`.
pub(crate) static FILES: &[BundledFile] = bundled![
    // `/compile` ends with the script API, from the file the README's section is made of.
    "nl/compile.md" + "docs/script-api.md",
    "compiled/compile.star",
    "nl/systematize.md",
    // The workflow library: `flow/*`, and the helper module they load.
    "lib/project.star",
    "nl/flow/commit.md",
    "compiled/flow/commit.star",
    "nl/flow/pr.md",
    "compiled/flow/pr.star",
    "nl/flow/review.md",
    "compiled/flow/review.star",
    "nl/flow/fix-ci.md",
    "compiled/flow/fix-ci.star",
    "nl/flow/release.md",
    "compiled/flow/release.star",
    "nl/flow/upgrade-deps.md",
    "compiled/flow/upgrade-deps.star",
    "nl/flow/docs-sync.md",
    "compiled/flow/docs-sync.star",
    "nl/flow/triage.md",
    "compiled/flow/triage.star",
    "nl/flow/test-gaps.md",
    "compiled/flow/test-gaps.star",
    "nl/flow/bisect.md",
    "compiled/flow/bisect.star",
    "nl/test/random.md",
    "compiled/test/random.star",
    "nl/test/double-or-nothing.md",
    "compiled/test/double-or-nothing.star",
    "nl/test/imagine-object.md",
    "nl/test/nested.md",
    "compiled/test/nested.star",
    // Eval case sets: `mekara eval flow/fix-ci` without `--cases` runs these.
    "evals/flow/fix-ci.toml",
];

/// The folder of the bundled demo scripts (`test/random`, ...): they exist for mekara's own
/// tests and its quick start, run by name like any script, and are listed only when asked.
const DEMO_FOLDER: &str = "test/";

/// Whether `name` (`test/random`) is the name of a bundled demo script's folder.
pub(crate) fn is_demo(name: &str) -> bool {
    name.starts_with(DEMO_FOLDER)
}

/// The bundled file at `path` (`nl/test/random.md`), if there is one.
pub(crate) fn file(path: &str) -> Option<&'static BundledFile> {
    FILES.iter().find(|f| f.path == path)
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_compiled_script_has_its_nl_file() {
        for f in super::FILES {
            if let Some(name) = f.path.strip_prefix("compiled/") {
                let nl = format!("nl/{}.md", name.trim_end_matches(".star"));
                assert!(super::file(&nl).is_some(), "{} has no {nl}", f.path);
            }
        }
    }
}
