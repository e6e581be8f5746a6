//! An eval's case file (`mekara eval NAME --cases FILE`): TOML, one `[[case]]` per case, each
//! with the script's arguments, the fixture its trials start from and how a trial is judged
//! (shell `checks` run in the resulting tree, a `judge` rubric, or both).
//!
//! The file is read once, when the eval is planned; the plan keeps the cases, so a resumed
//! eval judges its trials as it judged the first ones even if the file changed since.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The cases of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Cases {
    /// Where they were read from.
    pub file: PathBuf,
    pub cases: Vec<Case>,
}

/// One case: what a trial runs, in what, and how it is judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Case {
    /// Unique in its file: letters, digits, `-`, `_` and `.`.
    pub name: String,
    /// The script's arguments (`$ARGUMENTS`, `request`).
    #[serde(default)]
    pub arguments: String,
    /// What each trial's scratch folder starts as.
    #[serde(default)]
    pub fixture: Fixture,
    /// Shell commands run in the resulting tree; each must exit 0 for the trial to pass.
    #[serde(default)]
    pub checks: Vec<String>,
    /// A rubric an agent judges the resulting tree by, answering pass or fail and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<String>,
}

/// A trial's scratch project, made by [`crate::cases::fixture::prepare`] as `mekara test`
/// makes a case's: `dir` (relative to the case file) copied, `files` written, a git
/// repository with everything committed when `git` is set, then `setup` commands run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Fixture {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// Files to write, by their path relative to the project, with their text.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub files: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub git: bool,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup: Vec<String>,
}

impl Fixture {
    /// What the scratch project is made from.
    pub(crate) fn to_fixture(&self) -> crate::cases::fixture::Fixture {
        crate::cases::fixture::Fixture {
            dir: self.dir.clone(),
            files: self.files.clone(),
            git: self.git,
            setup: self.setup.clone(),
        }
    }
}

/// What is wrong with a case file.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CasesError {
    #[error("cannot read the case file `{file}`: {error}")]
    Read {
        file: PathBuf,
        error: std::io::Error,
    },
    #[error(
        "the case file `{file}` is not valid: {error}; a case file is TOML with one `[[case]]` table per case (`name`, `arguments`, `[case.fixture]`, `checks`, `judge`), see docs/evaluating.md"
    )]
    Toml { file: PathBuf, error: String },
    #[error("the case file `{file}` has no `[[case]]`; add at least one case")]
    Empty { file: PathBuf },
    #[error(
        "case `{name}` of `{file}`: a case's name is letters, digits, `-`, `_` and `.` (at most 64); rename it"
    )]
    BadName { file: PathBuf, name: String },
    #[error("case `{name}` of `{file}` is there twice; give each case a name of its own")]
    Duplicate { file: PathBuf, name: String },
    #[error(
        "case `{name}` of `{file}` says nothing about how a trial is judged; give it `checks` (shell commands run in the resulting tree) or a `judge` rubric"
    )]
    Unjudged { file: PathBuf, name: String },
    #[error(
        "case `{name}` of `{file}`: its fixture folder `{dir}` is not a folder; `dir` is relative to the case file"
    )]
    NoFixture {
        file: PathBuf,
        name: String,
        dir: PathBuf,
    },
    #[error(
        "case `{name}` of `{file}`: the fixture file path `{path}` must be relative and stay inside the project (no `..`)"
    )]
    BadFile {
        file: PathBuf,
        name: String,
        path: String,
    },
    #[error("case `{name}` of `{file}`: {what} is empty; remove it or write a command")]
    EmptyCommand {
        file: PathBuf,
        name: String,
        what: &'static str,
    },
}

/// The top of the file: only `[[case]]`s.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    case: Vec<Case>,
}

impl Cases {
    /// Reads and checks `file`; a fixture's `dir` comes back absolute.
    pub(crate) fn read(file: &Path) -> Result<Cases, CasesError> {
        let text = std::fs::read_to_string(file).map_err(|error| CasesError::Read {
            file: file.to_path_buf(),
            error,
        })?;
        Cases::parse(file, &text)
    }

    /// Parses and checks `text`, the contents of `file`.
    pub(crate) fn parse(file: &Path, text: &str) -> Result<Cases, CasesError> {
        let parsed: File = toml::from_str(text).map_err(|e| CasesError::Toml {
            file: file.to_path_buf(),
            error: toml_error(text, &e),
        })?;
        if parsed.case.is_empty() {
            return Err(CasesError::Empty {
                file: file.to_path_buf(),
            });
        }
        let base = file.parent().unwrap_or(Path::new("."));
        let mut cases: Vec<Case> = Vec::new();
        for mut case in parsed.case {
            let error = |make: fn(PathBuf, String) -> CasesError| {
                make(file.to_path_buf(), case.name.clone())
            };
            let named = !case.name.is_empty()
                && case.name.len() <= 64
                && case
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !named {
                return Err(error(|file, name| CasesError::BadName { file, name }));
            }
            if cases.iter().any(|c| c.name == case.name) {
                return Err(error(|file, name| CasesError::Duplicate { file, name }));
            }
            if case.checks.is_empty() && case.judge.as_deref().is_none_or(|j| j.trim().is_empty()) {
                return Err(error(|file, name| CasesError::Unjudged { file, name }));
            }
            for (what, commands) in [
                ("a command of `checks`", &case.checks),
                ("a command of `fixture.setup`", &case.fixture.setup),
            ] {
                if commands.iter().any(|c| c.trim().is_empty()) {
                    return Err(CasesError::EmptyCommand {
                        file: file.to_path_buf(),
                        name: case.name.clone(),
                        what,
                    });
                }
            }
            if let Some(path) = case
                .fixture
                .files
                .keys()
                .find(|p| crate::cases::fixture::relative_path(p).is_none())
            {
                return Err(CasesError::BadFile {
                    file: file.to_path_buf(),
                    name: case.name.clone(),
                    path: path.clone(),
                });
            }
            if let Some(dir) = &case.fixture.dir {
                let absolute = base.join(dir);
                if !absolute.is_dir() {
                    return Err(CasesError::NoFixture {
                        file: file.to_path_buf(),
                        name: case.name.clone(),
                        dir: dir.clone(),
                    });
                }
                case.fixture.dir = Some(std::path::absolute(&absolute).unwrap_or(absolute));
            }
            cases.push(case);
        }
        Ok(Cases {
            file: file.to_path_buf(),
            cases,
        })
    }
}

/// toml's error on one line: where (line and column, from 1) and what.
fn toml_error(text: &str, error: &toml::de::Error) -> String {
    let message = error.message().trim().replace('\n', " ");
    let Some(span) = error.span() else {
        return message;
    };
    let before = &text[..span.start.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.len() - before.rfind('\n').map_or(0, |at| at + 1) + 1;
    format!("line {line}, column {column}: {message}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Cases, String> {
        Cases::parse(Path::new("/nowhere/cases.toml"), text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_case_file_with_checks_and_a_judge_is_read() {
        let cases = parse(
            "[[case]]\nname = \"one\"\narguments = \"a b\"\nchecks = [\"test -f x\"]\n\n[[case]]\nname = \"two\"\njudge = \"it greets\"\n[case.fixture]\nsetup = [\"touch x\"]\ngit = true\n",
        )
        .expect("parses");
        assert_eq!(cases.cases.len(), 2);
        assert_eq!(cases.cases[0].arguments, "a b");
        assert_eq!(cases.cases[1].fixture.setup, ["touch x"]);
        assert!(cases.cases[1].fixture.git);
    }

    #[test]
    fn malformed_and_hostile_case_files_are_refused_with_what_to_do() {
        for (text, says) in [
            ("[[case]\nname=1", "is not valid"),
            ("", "has no `[[case]]`"),
            (
                "[[case]]\nname = \"a\"\nchecks = [\"true\"]\nchekcs = []",
                "unknown field `chekcs`",
            ),
            (
                "[[case]]\nname = \"../x\"\nchecks = [\"true\"]",
                "a case's name is",
            ),
            (
                "[[case]]\nname = \"\"\nchecks = [\"true\"]",
                "a case's name is",
            ),
            (
                "[[case]]\nname = \"a\"\nchecks = [\"true\"]\n[[case]]\nname = \"a\"\nchecks = [\"true\"]",
                "there twice",
            ),
            (
                "[[case]]\nname = \"a\"",
                "says nothing about how a trial is judged",
            ),
            (
                "[[case]]\nname = \"a\"\njudge = \"  \"",
                "says nothing about how",
            ),
            (
                "[[case]]\nname = \"a\"\nchecks = [\" \"]",
                "a command of `checks` is empty",
            ),
            (
                "[[case]]\nname = \"a\"\nchecks = [\"true\"]\n[case.fixture]\ndir = \"nope\"",
                "is not a folder",
            ),
            ("[[case]]\nname = \"a\"\nchecks = \"true\"", "is not valid"),
            ("cases = 1", "unknown field `cases`"),
            (
                "[[case]]\nname = \"a\"\nchecks = [\"true\"]\n[case.fixture.files]\n\"../x\" = \"\"",
                "must be relative",
            ),
            (
                "[[case]]\nname = \"a\"\nchecks = [\"true\"]\n[case.fixture.files]\n\"/etc/x\" = \"\"",
                "must be relative",
            ),
        ] {
            let error = parse(text).expect_err(text);
            assert!(error.contains(says), "{text:?} gave {error:?}");
            assert!(!error.ends_with('.'), "{error}");
        }
    }
}
