//! Where test cases are: a project's `.mekara/tests/<script name>/<case>.toml`, and the
//! cases bundled with mekara for its bundled scripts (`scripts/tests/` of its repository,
//! compiled into the binary as the scripts are).

use std::path::{Path, PathBuf};

use super::case::{Case, CaseError, Origin, parse};

/// A bundled case file: its path under `scripts/` and its text.
struct BundledCase {
    path: &'static str,
    text: &'static str,
}

/// `"tests/x/y.toml"` bundles `scripts/tests/x/y.toml`.
macro_rules! bundled {
    ($($path:literal),* $(,)?) => {
        &[$(BundledCase {
            path: $path,
            text: include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/", $path)),
        }),*]
    };
}

/// Every bundled case. Add a case here when you add it to `scripts/tests/` (a unit test
/// checks that none is left out).
static BUNDLED: &[BundledCase] = bundled![
    "tests/flow/bisect/finds-the-breaking-commit.toml",
    "tests/flow/commit/checks-then-commits.toml",
    "tests/flow/docs-sync/fixes-the-renamed-option.toml",
    "tests/flow/fix-ci/fixes-the-failing-test.toml",
    "tests/flow/pr/branches-and-pushes-after-yes.toml",
    "tests/flow/release/bumps-tags-and-writes-the-changelog.toml",
    "tests/flow/release/without-a-changelog.toml",
    "tests/flow/review/asks-again-for-findings-without-a-place.toml",
    "tests/flow/test-gaps/writes-the-missing-test.toml",
    "tests/flow/triage/a-check-that-failed-before-is-not-blamed.toml",
    "tests/flow/triage/reproduces-and-fixes.toml",
    "tests/flow/upgrade-deps/keeps-what-passes-reverts-what-breaks.toml",
];

/// The folder of a project's cases, under its `.mekara/`.
pub(crate) const PROJECT_FOLDER: &str = "tests";

/// The bundled cases, each read, or why it cannot be.
pub(crate) fn bundled() -> Vec<Result<Case, CaseError>> {
    BUNDLED
        .iter()
        .map(|c| {
            let relative = c.path.trim_start_matches("tests/");
            let (name, script) = names(relative);
            parse(&name, Origin::Bundled(c.path), &script, c.text)
        })
        .collect()
}

/// The cases of the project whose `.mekara/` is `dot_mekara`, in name order, each read, or
/// why it cannot be.
pub(crate) fn project(dot_mekara: &Path) -> Vec<Result<Case, CaseError>> {
    let root = dot_mekara.join(PROJECT_FOLDER);
    let mut cases = Vec::new();
    walk(&root, &root, &mut cases);
    cases
}

/// Reads the cases of `dir` (its `.toml` files), then those of its folders, leaving out the
/// folders a case of `dir` names as its fixture (a fixture may hold `.toml` files of its
/// own: `Cargo.toml`, `pyproject.toml`).
fn walk(root: &Path, dir: &Path, cases: &mut Vec<Result<Case, CaseError>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    let mut fixtures = Vec::new();
    for file in entries
        .iter()
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "toml"))
    {
        let relative = file
            .strip_prefix(root)
            .unwrap_or(file)
            .to_string_lossy()
            .replace('\\', "/");
        let (name, script) = names(&relative);
        let origin = Origin::Project(file.clone());
        let case = match std::fs::read_to_string(file) {
            Ok(text) => parse(&name, origin, &script, &text),
            Err(e) => Err(CaseError {
                name,
                file: origin.shown(),
                reason: format!("cannot read it: {e}"),
            }),
        };
        if let Ok(case) = &case
            && let Some(dir) = &case.fixture.dir
        {
            fixtures.extend(dir.canonicalize().ok());
        }
        cases.push(case);
    }
    for folder in entries.iter().filter(|p| p.is_dir()) {
        if !folder.canonicalize().is_ok_and(|f| fixtures.contains(&f)) {
            walk(root, folder, cases);
        }
    }
}

/// The case's name and the script it tests, from its path under the tests folder
/// (`flow/commit/basic.toml` is case `flow/commit/basic` of script `flow/commit`).
fn names(relative: &str) -> (String, String) {
    let name = relative.trim_end_matches(".toml").to_string();
    let script = name.rsplit_once('/').map_or("", |(s, _)| s).to_string();
    (name, script)
}

/// Whether case `case` is one `names` asks for: all when none is given, else one whose name
/// is the case's, its script's, or a folder of them (`flow`).
pub(crate) fn wanted(case: &str, script: &str, names: &[String]) -> bool {
    names.is_empty()
        || names.iter().any(|n| {
            let n = n.trim_end_matches('/').replace(':', "/");
            case == n || script == n || case.starts_with(&format!("{n}/"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_scripts_tests_is_bundled_and_reads() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts");
        let mut on_disk = Vec::new();
        let mut folders = vec![root.join("tests")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).expect("scripts/tests").flatten() {
                let path = entry.path();
                if path.is_dir() {
                    folders.push(path);
                } else {
                    let relative = path.strip_prefix(&root).expect("under scripts");
                    on_disk.push(relative.to_string_lossy().replace('\\', "/"));
                }
            }
        }
        on_disk.sort();
        let mut listed: Vec<String> = BUNDLED.iter().map(|c| c.path.to_string()).collect();
        listed.sort();
        assert_eq!(
            listed, on_disk,
            "list each file of scripts/tests in `BUNDLED`"
        );
        for case in bundled() {
            case.expect("a bundled case reads");
        }
    }

    #[test]
    fn cases_are_named_by_their_path_and_picked_by_name_script_or_folder() {
        assert_eq!(
            names("flow/commit/basic.toml"),
            ("flow/commit/basic".into(), "flow/commit".into())
        );
        let wanted = |names: &[&str]| {
            super::wanted(
                "flow/commit/basic",
                "flow/commit",
                &names.iter().map(ToString::to_string).collect::<Vec<_>>(),
            )
        };
        assert!(wanted(&[]));
        assert!(wanted(&["flow"]));
        assert!(wanted(&["flow:commit"]));
        assert!(wanted(&["flow/commit/basic"]));
        assert!(!wanted(&["flow/com"]));
        assert!(!wanted(&["flow/pr"]));
    }
}
