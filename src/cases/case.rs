//! A test case file: what it says (the script and its arguments, the fixture, the agent's and
//! the person's answers, the outcome expected), read and checked before anything runs.
//!
//! A case is TOML (`docs/testing.md` has the whole format):
//!
//! ```toml
//! arguments = "fix the typo"
//! [fixture]
//! git = true
//! files = { "README.md" = "teh\n" }
//! [[agent]]
//! prompt = "Step 3"            # a pattern of the step's instructions, or `step = "flow:x[2]"`
//! run = "sed -i s/teh/the/ README.md"
//! outputs = { fixed = "README.md" }
//! [[ask]]
//! answer = "yes"
//! [expect]
//! end = "completed"
//! files = { "README.md" = "the\n" }
//! ```
//!
//! Everything a case names is checked here, with errors that say which key of which file is
//! wrong and what to write instead: unknown keys, wrong types, patterns that do not compile,
//! a fixture folder outside the case's own folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::fixture::{Fixture, relative_path};

/// Where a case comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Origin {
    /// A file of the project's `.mekara/tests/`.
    Project(PathBuf),
    /// A case bundled with mekara (`scripts/tests/…` in its repository).
    Bundled(&'static str),
}

impl Origin {
    /// How the case file is named in messages: its path, or `bundled:PATH`.
    pub(crate) fn shown(&self) -> String {
        match self {
            Origin::Project(path) => path.display().to_string(),
            Origin::Bundled(path) => format!("bundled:{path}"),
        }
    }
}

/// A checked case.
#[derive(Debug, Clone)]
pub(crate) struct Case {
    /// Its name: the script's name and the file's stem (`flow/commit/basic`).
    pub name: String,
    pub origin: Origin,
    /// The script it runs (`flow/commit`).
    pub script: String,
    /// The script's arguments, as one string.
    pub arguments: String,
    pub fixture: Fixture,
    /// The agent's answers.
    pub agent: Vec<AgentAnswer>,
    /// The person's answers to `ask()`, in order.
    pub ask: Vec<AskAnswer>,
    pub expect: Expect,
}

/// The agent's answer to an llm step (or an NL script): for the steps whose label is `step`
/// or whose instructions match `prompt`; with neither, for the next step no other answer
/// matches, in the order such answers are written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AgentAnswer {
    /// The step's label (`flow:commit[3]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// A regular expression the step's instructions must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// A shell command run in the project first, as an agent editing files would.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The outputs given.
    #[serde(default)]
    pub outputs: Map<String, Json>,
    /// Instead of outputs: the agent says it cannot do the step, with this error.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The person's answer to a question (`ask()`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AskAnswer {
    /// A regular expression the question must match: a check that the case answers the
    /// question it means to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    pub answer: String,
}

/// What must come out of the run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Expect {
    /// The run's end state (`completed` when not given).
    pub end: Option<String>,
    /// The steps run, one line each (`flow:commit[0] $ git status`), in order.
    pub steps: Option<Vec<String>>,
    /// Files of the project, by path.
    pub files: BTreeMap<String, Text>,
    /// Steps, by label: their exit code and output.
    pub step: Vec<StepExpect>,
    /// Shell commands run in the project once the run ended: their exit code and output.
    pub command: Vec<CommandExpect>,
}

/// A command run in the project after the run (`git log -1 --format=%s`), and what it must
/// give.
#[derive(Debug, Clone)]
pub(crate) struct CommandExpect {
    pub run: String,
    /// Its exit code (0 when not given).
    pub exit_code: i32,
    /// Its output (stdout and stderr).
    pub output: Option<Text>,
}

/// An expected text: exactly this, or a pattern, or a part of it; or no such file.
#[derive(Debug, Clone)]
pub(crate) enum Text {
    Exact(String),
    Matches(regex::Regex),
    Contains(String),
    Absent,
}

/// What a step must have done.
#[derive(Debug, Clone)]
pub(crate) struct StepExpect {
    /// The step's label (`flow:fix-ci[4]`).
    pub step: String,
    pub exit_code: Option<i32>,
    pub output: Option<Text>,
}

/// The states a run can end in, as `expect.end` names them.
pub(crate) const END_STATES: [&str; 7] = [
    "completed",
    "fell_back",
    "stopped",
    "failed",
    "waiting",
    "stopped_by_script",
    "interrupted",
];

/// Why a case file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("test case `{file}`: {reason}")]
pub(crate) struct CaseError {
    /// The case's name (`flow/commit/basic`).
    pub name: String,
    /// The file, as [`Origin::shown`] names it.
    pub file: String,
    pub reason: String,
}

// ---- the file as written ----

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    script: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    arguments: Option<Arguments>,
    #[serde(default)]
    fixture: FixtureFile,
    #[serde(default)]
    agent: Vec<AgentAnswer>,
    #[serde(default)]
    ask: Vec<AskAnswer>,
    #[serde(default)]
    expect: ExpectFile,
}

/// `arguments = "a b"` or `arguments = ["a", "b"]`.
#[derive(Deserialize)]
#[serde(untagged)]
enum Arguments {
    One(String),
    Words(Vec<String>),
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FixtureFile {
    dir: Option<String>,
    #[serde(default)]
    files: BTreeMap<String, String>,
    #[serde(default)]
    git: bool,
    #[serde(default)]
    setup: Vec<String>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectFile {
    end: Option<String>,
    steps: Option<Vec<String>>,
    #[serde(default)]
    files: BTreeMap<String, TextFile>,
    #[serde(default)]
    step: Vec<StepExpectFile>,
    #[serde(default)]
    command: Vec<CommandExpectFile>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandExpectFile {
    run: String,
    #[serde(default)]
    exit_code: i32,
    output: Option<TextFile>,
}

/// `"exact text"`, or a table with one of `matches`, `contains`, `absent = true`.
#[derive(Deserialize)]
#[serde(untagged)]
enum TextFile {
    Exact(String),
    Table(TextTable),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TextTable {
    matches: Option<String>,
    contains: Option<String>,
    #[serde(default)]
    absent: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepExpectFile {
    step: String,
    exit_code: Option<i32>,
    output: Option<TextFile>,
}

/// Reads the case `name` from `text`. `folder` is the folder of a project case's file (its
/// fixture folder must be inside it); `script` is the script named by the case's place
/// (`.mekara/tests/flow/commit/x.toml` tests `flow/commit`).
pub(crate) fn parse(
    name: &str,
    origin: Origin,
    script: &str,
    text: &str,
) -> Result<Case, CaseError> {
    let error = |reason: String| CaseError {
        name: name.to_string(),
        file: origin.shown(),
        reason,
    };
    let file: CaseFile = toml::from_str(text).map_err(|e| {
        error(format!(
            "it is not a valid case: {}",
            e.to_string().trim_end()
        ))
    })?;
    let _ = file.description;
    let arguments = match file.arguments {
        None => String::new(),
        Some(Arguments::One(text)) => text,
        Some(Arguments::Words(words)) => words.join(" "),
    };
    let fixture = fixture(&origin, file.fixture).map_err(error)?;
    for (at, answer) in file.agent.iter().enumerate() {
        let n = at + 1;
        if let Some(pattern) = &answer.prompt {
            compile(pattern).map_err(|e| error(format!("`prompt` of `[[agent]]` {n}: {e}")))?;
        }
        if answer.error.is_some() && !answer.outputs.is_empty() {
            return Err(error(format!(
                "`[[agent]]` {n} gives both `outputs` and `error`; an answer either gives the outputs or says why it cannot"
            )));
        }
    }
    for (at, answer) in file.ask.iter().enumerate() {
        if let Some(pattern) = &answer.question {
            compile(pattern)
                .map_err(|e| error(format!("`question` of `[[ask]]` {}: {e}", at + 1)))?;
        }
    }
    let expect = expect(file.expect).map_err(error)?;
    Ok(Case {
        name: name.to_string(),
        origin,
        script: file.script.unwrap_or_else(|| script.to_string()),
        arguments,
        fixture,
        agent: file.agent,
        ask: file.ask,
        expect,
    })
}

/// A regular expression of a case, or why it does not compile.
pub(crate) fn compile(pattern: &str) -> Result<regex::Regex, String> {
    regex::RegexBuilder::new(pattern)
        .size_limit(1 << 20)
        .build()
        .map_err(|e| {
            format!(
                "`{pattern}` is not a regular expression: {}",
                e.to_string().lines().last().unwrap_or_default().trim()
            )
        })
}

fn fixture(origin: &Origin, file: FixtureFile) -> Result<Fixture, String> {
    for path in file.files.keys() {
        if relative_path(path).is_none() {
            return Err(format!(
                "`[fixture] files` names `{path}`, which is not a path inside the project; write it relative to the project, without `..`"
            ));
        }
    }
    let dir = match (&file.dir, origin) {
        (None, _) => None,
        (Some(dir), Origin::Bundled(_)) => {
            return Err(format!(
                "`[fixture] dir = \"{dir}\"`: a bundled case carries no folder; give its files in `[fixture] files`"
            ));
        }
        (Some(dir), Origin::Project(path)) => Some(fixture_dir(path, dir)?),
    };
    Ok(Fixture {
        dir,
        files: file.files,
        git: file.git,
        setup: file.setup,
    })
}

/// The fixture folder `dir` of the case file at `case`: an existing folder inside the case
/// file's own folder.
fn fixture_dir(case: &Path, dir: &str) -> Result<PathBuf, String> {
    let folder = case.parent().unwrap_or(Path::new("."));
    let outside = || {
        format!(
            "`[fixture] dir = \"{dir}\"` is not inside the case's folder `{}`; put the fixture folder next to the case and name it relative to it",
            folder.display()
        )
    };
    let relative = relative_path(dir).ok_or_else(outside)?;
    let path = folder.join(relative);
    let (Ok(real), Ok(real_folder)) = (path.canonicalize(), folder.canonicalize()) else {
        return Err(format!(
            "`[fixture] dir = \"{dir}\"`: there is no folder `{}`",
            path.display()
        ));
    };
    // A link inside the folder may still point out of it.
    if !real.starts_with(&real_folder) {
        return Err(outside());
    }
    if !real.is_dir() {
        return Err(format!(
            "`[fixture] dir = \"{dir}\"`: `{}` is not a folder",
            path.display()
        ));
    }
    Ok(path)
}

fn expect(file: ExpectFile) -> Result<Expect, String> {
    if let Some(end) = &file.end
        && !END_STATES.contains(&end.as_str())
    {
        return Err(format!(
            "`[expect] end = \"{end}\"` is not a state a run ends in; write one of {}",
            crate::display::quoted(END_STATES)
        ));
    }
    let mut files = BTreeMap::new();
    for (path, text) in file.files {
        if relative_path(&path).is_none() {
            return Err(format!(
                "`[expect] files` names `{path}`, which is not a path inside the project; write it relative to the project, without `..`"
            ));
        }
        let text = text_of(text).map_err(|e| format!("`[expect] files` `{path}`: {e}"))?;
        files.insert(path, text);
    }
    let mut step = Vec::new();
    for (at, s) in file.step.into_iter().enumerate() {
        let output = output_of(s.output, "[[expect.step]]", at)?;
        step.push(StepExpect {
            step: s.step,
            exit_code: s.exit_code,
            output,
        });
    }
    let mut command = Vec::new();
    for (at, c) in file.command.into_iter().enumerate() {
        let output = output_of(c.output, "[[expect.command]]", at)?;
        command.push(CommandExpect {
            run: c.run,
            exit_code: c.exit_code,
            output,
        });
    }
    Ok(Expect {
        end: file.end,
        steps: file.steps,
        files,
        step,
        command,
    })
}

/// The expected `output` of the `at`th table of `table` (`[[expect.step]]`): any text but
/// `absent`.
fn output_of(output: Option<TextFile>, table: &str, at: usize) -> Result<Option<Text>, String> {
    let n = at + 1;
    match output.map(text_of).transpose() {
        Err(e) => Err(format!("`output` of `{table}` {n}: {e}")),
        Ok(Some(Text::Absent)) => Err(format!(
            "`output` of `{table}` {n}: an output cannot be `absent`; expect an empty one with `output = \"\"`"
        )),
        Ok(output) => Ok(output),
    }
}

fn text_of(text: TextFile) -> Result<Text, String> {
    match text {
        TextFile::Exact(text) => Ok(Text::Exact(text)),
        TextFile::Table(TextTable {
            matches: Some(pattern),
            contains: None,
            absent: false,
        }) => compile(&pattern).map(Text::Matches),
        TextFile::Table(TextTable {
            matches: None,
            contains: Some(part),
            absent: false,
        }) => Ok(Text::Contains(part)),
        TextFile::Table(TextTable {
            matches: None,
            contains: None,
            absent: true,
        }) => Ok(Text::Absent),
        TextFile::Table(_) => Err(
            "give the text itself, or a table with exactly one of `matches = \"PATTERN\"`, `contains = \"TEXT\"` or `absent = true`"
                .to_string(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<Case, String> {
        parse("x/basic", Origin::Bundled("tests/x/basic.toml"), "x", text)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_whole_case_reads() {
        let case = parsed(
            r#"
arguments = ["a", "b c"]
[fixture]
git = true
files = { "a.txt" = "one\n" }
setup = ["echo two > b.txt"]
[[agent]]
prompt = "Step [0-9]"
run = "touch c"
outputs = { n = 3, text = "x" }
[[ask]]
question = "sure\\?"
answer = "yes"
[expect]
end = "waiting"
steps = ["x[0] $ true"]
files = { "a.txt" = "one\n", "b.txt" = { matches = "^t" }, "c" = { absent = true } }
[[expect.step]]
step = "x[0]"
exit_code = 0
output = { contains = "ok" }
"#,
        )
        .expect("parses");
        assert_eq!(case.script, "x");
        assert_eq!(case.arguments, "a b c");
        assert!(case.fixture.git);
        assert_eq!(case.agent[0].outputs["n"], 3);
        assert_eq!(case.expect.end.as_deref(), Some("waiting"));
        assert_eq!(case.expect.files.len(), 3);
        assert_eq!(case.expect.step[0].exit_code, Some(0));
    }

    #[test]
    fn malformed_and_hostile_cases_say_what_is_wrong() {
        let cases = [
            ("scrpit = \"x\"", "unknown field `scrpit`"),
            (
                "[fixture]\ngit = \"yes\"",
                "invalid type: string \"yes\", expected a boolean",
            ),
            (
                "[[agent]]\nprompt = \"(\"",
                "`prompt` of `[[agent]]` 1: `(` is not a regular expression",
            ),
            (
                "[[agent]]\noutputs = { a = 1 }\nerror = \"no\"",
                "gives both `outputs` and `error`",
            ),
            (
                "[expect]\nend = \"done\"",
                "`[expect] end = \"done\"` is not a state a run ends in",
            ),
            (
                "[expect]\nfiles = { \"../x\" = \"\" }",
                "`../x`, which is not a path inside the project",
            ),
            (
                "[fixture]\nfiles = { \"/etc/passwd\" = \"\" }",
                "`/etc/passwd`, which is not a path inside the project",
            ),
            (
                "[fixture]\ndir = \"../../etc\"",
                "a bundled case carries no folder",
            ),
            (
                "[expect]\nfiles = { a = { matches = \"x\", absent = true } }",
                "exactly one of",
            ),
            ("[[ask]]\nquestion = \"x\"", "missing field `answer`"),
            ("= broken", "it is not a valid case"),
        ];
        for (text, said) in cases {
            let error = parsed(text).expect_err(text);
            assert!(error.contains(said), "{text}: {error}");
            assert!(
                error.starts_with("test case `bundled:tests/x/basic.toml`: "),
                "{error}"
            );
        }
    }

    #[test]
    fn a_fixture_folder_must_be_inside_the_case_folder() {
        let root = tempfile::tempdir().expect("tempdir");
        let tests = root.path().join("tests/x");
        std::fs::create_dir_all(tests.join("fixture")).expect("mkdir");
        std::fs::create_dir_all(root.path().join("elsewhere")).expect("mkdir");
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.path().join("elsewhere"), tests.join("link"))
            .expect("link");
        let case = tests.join("basic.toml");
        let read = |dir: &str| {
            parse(
                "x/basic",
                Origin::Project(case.clone()),
                "x",
                &format!("[fixture]\ndir = \"{dir}\""),
            )
            .map_err(|e| e.to_string())
        };
        assert!(read("fixture").is_ok());
        for dir in ["../../etc", "/etc", "..", "fixture/../.."] {
            let error = read(dir).expect_err(dir);
            assert!(error.contains("is not inside the case's folder"), "{error}");
        }
        #[cfg(unix)]
        assert!(
            read("link")
                .expect_err("a link out")
                .contains("is not inside the case's folder")
        );
        assert!(
            read("nothing")
                .expect_err("missing")
                .contains("there is no folder")
        );
    }
}
