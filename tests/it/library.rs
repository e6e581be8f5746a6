//! The workflow library (`flow/*`) end to end: each test makes a real project (Rust, Python
//! or JavaScript, a git repository with history), runs one workflow to its end with `mekara
//! run --agent-command`, where a scripted agent plays the agent (it follows a plan of rules,
//! each matching the text of an llm step, running a shell command and giving outputs), answers
//! the workflow's questions with `mekara answer`, and checks what the workflow changed.
//!
//! Each workflow's fixture, plan, answers and checks are one [`Case`], which
//! `tests/it/mcp/vcr.rs` also plays over MCP, records and replays from the cassette.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value as Json, json};

use crate::common::{Project, Run};

/// The scripted agent: logs each request to `calls.jsonl`, then takes the first rule of
/// `plan.json` whose `when` is in the item's instructions, runs its `run` (a shell command, in
/// the project) and answers its `outputs`; with no rule, it says it cannot.
pub(crate) const AGENT: &str = r###"
import json, os, subprocess, sys
req = json.load(sys.stdin)
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "calls.jsonl"), "a") as log:
    log.write(json.dumps({"step": req["step"], "kind": req["kind"], "prompt": req["prompt"]}) + "\n")
turn = req["prompt"].split("## Your turn")[-1]
for rule in json.load(open(os.path.join(here, "plan.json"))):
    if req["kind"] == "llm" and rule["when"] in turn:
        if rule.get("run"):
            subprocess.run(rule["run"], shell=True, check=True, stdout=sys.stderr)
        print(json.dumps({"outputs": rule.get("outputs", {})}))
        sys.exit(0)
print(json.dumps({"error": "the scripted agent has no rule for this %s item: %s" % (req["kind"], turn[:400])}))
"###;

pub(crate) const AGENT_COMMAND: &str = "python3 agent/agent.py";

/// What every fixture repository leaves out of git: mekara's runs, the scripted agent, builds.
const GITIGNORE: &str = ".mekara/\nagent/\ntarget/\n__pycache__/\nnode_modules/\n";

/// A project that is a git repository holding `files`, committed as `Initial commit`.
pub(crate) fn repository(files: &[(&str, &str)]) -> Project {
    let project = Project::new();
    std::fs::write(
        project.home().join(".gitconfig"),
        "[user]\n\tname = Test Person\n\temail = person@example.com\n[init]\n\tdefaultBranch = main\n",
    )
    .expect("gitconfig");
    project.write(".gitignore", GITIGNORE);
    project.write("agent/agent.py", AGENT);
    for (path, text) in files {
        project.write(path, text);
    }
    git(&project, &["init", "-q"]);
    commit_all(&project, "Initial commit");
    project
}

/// `git ARGS` in the project, as the person (the test's home); its stdout, trimmed.
pub(crate) fn git(project: &Project, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(project.root())
        .env("HOME", project.home())
        .env_remove("GIT_DIR")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

pub(crate) fn commit_all(project: &Project, message: &str) -> String {
    git(project, &["add", "-A"]);
    git(project, &["commit", "-q", "-m", message]);
    git(project, &["rev-parse", "HEAD"])
}

/// The person's cargo (its registry cache, offline) for the Rust projects' checks.
pub(crate) fn with_tools(mut cmd: Command) -> Command {
    let home = PathBuf::from(std::env::var_os("HOME").expect("HOME"));
    let cargo_home = std::env::var_os("CARGO_HOME").map_or(home.join(".cargo"), PathBuf::from);
    let rustup_home = std::env::var_os("RUSTUP_HOME").map_or(home.join(".rustup"), PathBuf::from);
    cmd.env("CARGO_HOME", cargo_home)
        .env("RUSTUP_HOME", rustup_home)
        .env("CARGO_NET_OFFLINE", "true")
        .env("CARGO_TERM_COLOR", "never");
    cmd
}

/// `mekara ARGS` with the tools the checks need.
pub(crate) fn mekara(project: &Project, args: &[&str]) -> Run {
    mekara_on(project, args, None)
}

/// `mekara ARGS` with the tools the checks need, and `path` as `PATH` when given.
pub(crate) fn mekara_on(project: &Project, args: &[&str], path: Option<&str>) -> Run {
    let mut cmd = with_tools(project.command(args));
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    crate::common::run_with_stdin(cmd, "")
}

/// Runs workflow `name` unattended with the scripted agent following `plan`.
pub(crate) fn flow(project: &Project, plan: &Json, name: &str, arguments: &[&str]) -> Run {
    flow_on(project, plan, name, arguments, None)
}

/// [`flow`], with `path` as `PATH` when given.
pub(crate) fn flow_on(
    project: &Project,
    plan: &Json,
    name: &str,
    arguments: &[&str],
    path: Option<&str>,
) -> Run {
    project.write("agent/plan.json", &plan.to_string());
    let mut args = vec!["run", "--agent-command", AGENT_COMMAND, "--json", name];
    args.extend_from_slice(arguments);
    mekara_on(project, &args, path)
}

/// Resumes the project's last run after answering its question with `answer`.
pub(crate) fn answer_and_resume(project: &Project, answer: &str) -> Run {
    let id = last_run(project);
    project.run(&["answer", &id, answer], "").expect_code(0);
    mekara(project, &resume(&id))
}

/// The arguments that resume run `id` with the scripted agent.
pub(crate) fn resume(id: &str) -> [&str; 6] {
    [
        "run",
        "--resume",
        id,
        "--agent-command",
        AGENT_COMMAND,
        "--json",
    ]
}

/// A check of what a workflow did, given the project.
type Check = Box<dyn Fn(&Project)>;

/// A check of what must not have happened yet, given the project and the index of the
/// question about to be answered.
type BeforeAnswer = Box<dyn Fn(&Project, usize)>;

/// One workflow of the library on its fixture, as both drivers play it: unattended here
/// ([`Case::unattended`]), and over MCP as an agent in a client does, recorded and replayed
/// from the cassette (`tests/it/mcp/vcr.rs`).
pub(crate) struct Case {
    pub(crate) project: Project,
    /// The workflow (`flow/commit`).
    pub(crate) name: &'static str,
    pub(crate) arguments: Vec<String>,
    /// The agent's part: rules of `when` (a text of the llm step's instructions), `run` (a
    /// shell command the agent runs in the project) and `outputs`, the first that matches.
    pub(crate) plan: Json,
    /// The person's answers to the workflow's questions, in order.
    pub(crate) answers: Vec<&'static str>,
    /// The `PATH` mekara runs with, when it must not be the test's (to leave out `gh`).
    pub(crate) path: Option<&'static str>,
    /// Called with the index of each question before it is answered: what must not have
    /// happened yet.
    asked: BeforeAnswer,
    /// What the workflow must have done once it ended.
    effects: Check,
}

impl Case {
    fn new(project: Project, name: &'static str, plan: Json, effects: Check) -> Case {
        Case {
            project,
            name,
            arguments: Vec::new(),
            plan,
            answers: Vec::new(),
            path: None,
            asked: Box::new(|_, _| {}),
            effects,
        }
    }

    /// The person gives `answers`, in order; `asked` checks the project before each.
    fn answering(
        mut self,
        answers: &[&'static str],
        asked: impl Fn(&Project, usize) + 'static,
    ) -> Case {
        self.answers = answers.to_vec();
        self.asked = Box::new(asked);
        self
    }

    /// Checks the project before the question with index `index` is answered.
    pub(crate) fn before_answer(&self, index: usize) {
        (self.asked)(&self.project, index);
    }

    /// Checks what the workflow changed, once it has ended.
    pub(crate) fn check_effects(&self) {
        (self.effects)(&self.project);
    }

    /// `mekara ARGS` with the tools the checks need and the case's `PATH`.
    fn mekara(&self, args: &[&str]) -> Run {
        mekara_on(&self.project, args, self.path)
    }

    /// Starts the workflow with `mekara run --agent-command`, the scripted agent following the
    /// plan; the run goes on until it ends or asks a question.
    fn started(&self) -> Run {
        self.project
            .write("agent/plan.json", &self.plan.to_string());
        let mut args = vec!["run", "--agent-command", AGENT_COMMAND, "--json", self.name];
        args.extend(self.arguments.iter().map(String::as_str));
        self.mekara(&args)
    }

    /// Runs the workflow with `mekara run --agent-command` (the scripted agent following the
    /// plan), answers each question with `mekara answer` and resumes, then checks the effects.
    fn unattended(&self) {
        let mut run = self.started();
        for (index, answer) in self.answers.iter().enumerate() {
            assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
            self.before_answer(index);
            let id = last_run(&self.project);
            self.project
                .run(&["answer", &id, answer], "")
                .expect_code(0);
            run = self.mekara(&resume(&id));
        }
        completed(&run);
        self.check_effects();
    }
}

pub(crate) fn last_run(project: &Project) -> String {
    project.run_ids().pop().expect("a run")
}

/// The run's summary state (`completed`, `waiting`, ...).
pub(crate) fn state(run: &Run) -> String {
    let summary: Json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{}\n{}", run.stdout, run.stderr));
    summary["state"].as_str().unwrap_or_default().to_string()
}

/// Panics with the run's streams unless it completed.
pub(crate) fn completed(run: &Run) {
    assert_eq!(state(run), "completed", "{}\n{}", run.stdout, run.stderr);
}

/// The steps of the project's one run, as JSON.
pub(crate) fn steps(project: &Project) -> Vec<Json> {
    crate::common::journal_events(project)
        .into_iter()
        .filter(|e| e["event"] == "step")
        .collect()
}

/// The output of every shell or function step of the last run, joined.
pub(crate) fn outputs(project: &Project) -> String {
    steps(project)
        .iter()
        .filter_map(|s| s["result"]["output"].as_str().map(str::to_string))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The requests the scripted agent got.
pub(crate) fn calls(project: &Project) -> Vec<Json> {
    std::fs::read_to_string(project.root().join("agent/calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a logged request"))
        .collect()
}

pub(crate) fn read(project: &Project, path: &str) -> String {
    std::fs::read_to_string(project.root().join(path))
        .unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

// ---- the fixture projects ----

const RUST_TOML: &str =
    "[package]\nname = \"adder\"\nversion = \"0.4.1\"\nedition = \"2021\"\n\n[dependencies]\n";

const RUST_LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 3), 5);\n    }\n}\n";

const PY_PROJECT: &str = "[project]\nname = \"stats\"\nversion = \"0.1.0\"\n";

pub(crate) const PY_STATS: &str = "def mean(xs):\n    return sum(xs) / len(xs)\n\n\ndef spread(xs):\n    return max(xs) - min(xs)\n";

const PY_TEST: &str = "import unittest\n\nfrom stats import mean, spread\n\n\nclass StatsTest(unittest.TestCase):\n    def test_mean(self):\n        self.assertEqual(mean([1, 2, 3]), 2)\n\n    def test_spread(self):\n        self.assertEqual(spread([1, 5, 3]), 4)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

const JS_PACKAGE: &str = "{\n  \"name\": \"greet\",\n  \"version\": \"1.2.3\",\n  \"private\": true,\n  \"scripts\": {\n    \"test\": \"node test.js\"\n  }\n}\n";

pub(crate) const JS_CLI: &str = "const loud = process.argv.includes(\"--loud\");\nfunction greet(name, loud) {\n  const text = \"Hello, \" + name + \"!\";\n  return loud ? text.toUpperCase() : text;\n}\nmodule.exports = { greet };\nif (require.main === module) console.log(greet(process.argv[2] || \"world\", loud));\n";

const JS_TEST: &str = "const assert = require(\"assert\");\nconst { greet } = require(\"./cli.js\");\nassert.strictEqual(greet(\"Ada\", false), \"Hello, Ada!\");\nassert.strictEqual(greet(\"Ada\", true), \"HELLO, ADA!\");\nconsole.log(\"ok\");\n";

fn rust_project() -> Project {
    let project = repository(&[("Cargo.toml", RUST_TOML), ("src/lib.rs", RUST_LIB)]);
    lock(&project);
    project
}

/// Writes and commits the Rust project's `Cargo.lock`, from the registry cache.
pub(crate) fn lock(project: &Project) {
    let lock = with_tools(project.shell("cargo generate-lockfile --offline"))
        .output()
        .expect("cargo");
    assert!(
        lock.status.success(),
        "{}",
        String::from_utf8_lossy(&lock.stderr)
    );
    commit_all(project, "Lock the dependencies");
}

pub(crate) fn python_project() -> Project {
    repository(&[
        ("pyproject.toml", PY_PROJECT),
        ("stats.py", PY_STATS),
        ("test_stats.py", PY_TEST),
    ])
}

pub(crate) fn js_project() -> Project {
    repository(&[
        ("package.json", JS_PACKAGE),
        ("cli.js", JS_CLI),
        ("test.js", JS_TEST),
        (
            "README.md",
            "# greet\n\nGreets someone.\n\n    node cli.js NAME\n\n`--loud` shouts the greeting.\n",
        ),
    ])
}

/// A `package-lock.json` of `lines` lines (a multiple of 4), as npm writes one: a change of
/// the dependencies that is long and nobody reads.
pub(crate) fn package_lock(lines: usize) -> String {
    use std::fmt::Write as _;
    // 5 lines of head, 4 a package, 3 of tail.
    let mut lock = String::from(
        "{\n  \"name\": \"fixture\",\n  \"lockfileVersion\": 3,\n  \"requires\": true,\n  \"packages\": {\n",
    );
    for n in 0..(lines - 8) / 4 {
        let _ = write!(
            lock,
            "    \"node_modules/dep-{n}\": {{\n      \"version\": \"1.{n}.0\",\n      \"integrity\": \"sha512-{n:0>40}\"\n    }},\n"
        );
    }
    lock.push_str("    \"\": {}\n  }\n}\n");
    lock
}

// ---- project detection ----

/// A project script that runs the library's detection (the helper, ejected with a workflow)
/// and writes what it found to `facts.json`.
const DETECT: &str = r#"
load("//lib/project.star", "detect", "quote")

def execute(request):
    facts = detect()
    auto("printf '%s' " + quote(json.encode(facts)) + " > facts.json")
"#;

pub(crate) fn detected(project: &Project) -> Json {
    project
        .run(&["scripts", "eject", "flow:fix-ci"], "")
        .expect_code(0);
    project.script("detect", "Detect the project's checks.\n", Some(DETECT));
    mekara(project, &["run", "detect"]).expect_code(0);
    serde_json::from_str(&read(project, "facts.json")).expect("facts")
}

/// The checks the detection gives a Python project on this machine.
pub(crate) fn python_check() -> &'static str {
    let pytest = Command::new("python3")
        .args(["-c", "import pytest"])
        .output()
        .is_ok_and(|o| o.status.success());
    if pytest {
        "python3 -m pytest"
    } else {
        "python3 -m unittest discover"
    }
}

#[test]
fn detection_finds_the_checks_of_rust_python_javascript_make_and_ci_projects() {
    let rust = detected(&rust_project());
    assert_eq!(rust["ecosystems"], json!(["cargo"]));
    assert_eq!(rust["checks"], json!(["cargo test", "cargo fmt --check"]));
    assert_eq!(rust["build"], json!(["cargo build"]));

    let python = detected(&python_project());
    assert_eq!(python["ecosystems"], json!(["python"]));
    assert_eq!(python["checks"], json!([python_check()]));

    // pnpm by its lock file; the package's own lint and test scripts, and its build.
    let js = repository(&[
        (
            "package.json",
            r#"{"name": "x", "scripts": {"lint": "eslint .", "test": "vitest", "build": "tsc"}}"#,
        ),
        ("pnpm-lock.yaml", "lockfileVersion: '9.0'\n"),
    ]);
    let js = detected(&js);
    assert_eq!(js["runner"], "pnpm");
    if on_path("pnpm", None) {
        assert_eq!(js["checks"], json!(["pnpm run lint", "pnpm test"]));
    } else {
        let not_installed = "`pnpm` not installed";
        assert_eq!(
            js["skipped"],
            json!([{"check": "pnpm run lint", "why": not_installed}, {"check": "pnpm test", "why": not_installed}])
        );
    }
    assert_eq!(js["build"], json!(["pnpm run build"]));

    // A Makefile's own check targets win over the ecosystem's defaults.
    let made = repository(&[
        ("Cargo.toml", RUST_TOML),
        ("src/lib.rs", RUST_LIB),
        (
            "Makefile",
            "build:\n\tcargo build\ncheck: lint\n\ttrue\nlint:\n\tcargo clippy\ntest:\n\tcargo test\n",
        ),
    ]);
    let made = detected(&made);
    assert_eq!(made["ecosystems"], json!(["cargo", "make"]));
    assert_eq!(
        made["checks"],
        json!(["make check", "make lint", "make test"])
    );
    assert_eq!(made["build"], json!(["make build"]));

    // Nothing but a CI file: its `run:` lines that check, not the ones that set up.
    let ci = repository(&[(
        ".github/workflows/ci.yml",
        "jobs:\n  test:\n    steps:\n      - uses: actions/checkout@v4\n      - run: sudo apt-get install -y shellcheck\n      - run: ./scripts/test.sh --all\n      - name: lint\n        run: shellcheck scripts/*.sh\n      - run: |\n          echo multi-line\n",
    )]);
    let ci = detected(&ci);
    assert_eq!(ci["ecosystems"], json!([]));
    assert_eq!(
        ci["ci"],
        json!(["./scripts/test.sh --all", "shellcheck scripts/*.sh"])
    );
    if on_path("shellcheck", None) {
        assert_eq!(
            ci["checks"],
            json!(["./scripts/test.sh --all", "shellcheck scripts/*.sh"])
        );
    } else {
        assert_eq!(ci["checks"], json!(["./scripts/test.sh --all"]));
        assert_eq!(
            ci["skipped"],
            json!([{"check": "shellcheck scripts/*.sh", "why": "`shellcheck` not installed"}])
        );
    }
}

// ---- the project's checks are what its CI runs (issue 39) ----

/// Whether `tool` is on `path` (the test's `PATH` when `None`).
pub(crate) fn on_path(tool: &str, path: Option<&str>) -> bool {
    let mut cmd = Command::new("sh");
    cmd.args(["-c", &format!("command -v {tool}")]);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    cmd.output().is_ok_and(|o| o.status.success())
}

/// A stand-in for `ruff`, written where the test's `PATH` finds it first (this machine has no
/// ruff, and a test must not depend on one): `ruff check` fails on an unused `import os`, as
/// ruff's F401 does; `ruff format --check` passes.
const FAKE_RUFF: &str = "#!/bin/sh\n[ \"$1\" = check ] || exit 0\nif grep -n '^import os$' $(git ls-files '*.py') /dev/null; then echo 'F401 `os` imported but unused'; exit 1; fi\necho 'All checks passed!'\n";

/// The `PATH` with the project's `fake-bin` (under its home, out of the repository) first,
/// holding `tools` (name and script).
pub(crate) fn fake_tools(project: &Project, tools: &[(&str, &str)]) -> String {
    let bin = project.home().join("fake-bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for (name, script) in tools {
        executable(&crate::common::write_file(&bin.join(name), script));
    }
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// Makes the file at `path` executable (a fixture's script or tool).
pub(crate) fn executable(path: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Runs `flow/fix-ci` unattended, the scripted agent following `plan`, with `PATH` set to
/// `path`.
fn fix_ci_on(project: &Project, plan: &Json, path: &str) -> Run {
    flow_on(project, plan, "flow/fix-ci", &[], Some(path))
}

/// What the detection finds, run with `PATH` set to `path`.
pub(crate) fn detected_on(project: &Project, path: &str) -> Json {
    project
        .run(&["scripts", "eject", "flow:fix-ci"], "")
        .expect_code(0);
    project.script("detect", "Detect the project's checks.\n", Some(DETECT));
    mekara_on(project, &["run", "detect"], Some(path)).expect_code(0);
    serde_json::from_str(&read(project, "facts.json")).expect("facts")
}

const LINTED_PYPROJECT: &str = "[project]\nname = \"stats\"\nversion = \"0.1.0\"\n\n[tool.ruff]\nline-length = 100\n\n[tool.ruff.lint]\nselect = [\"F\"]\n\n[tool.mypy]\nstrict = true\n";

const PRE_COMMIT: &str = "repos:\n  - repo: https://github.com/astral-sh/ruff-pre-commit\n    rev: v0.6.0\n    hooks:\n      - id: ruff\n      - id: ruff-format\n  - repo: https://github.com/pre-commit/pre-commit-hooks\n    rev: v4.6.0\n    hooks:\n      - id: trailing-whitespace\n";

const TOX_INI: &str = "[tox]\nenvlist = py3, lint\n\n[testenv]\ndeps = pytest\ncommands = python3 -m unittest discover {posargs}\n\n[testenv:lint]\ncommands =\n    ruff check {toxinidir}\n    mypy stats.py\n";

/// A GitHub workflow whose lint job runs ruff and mypy in `run: |` and `run: >-` blocks, a
/// test job that needs a database service, and a publish job.
const PY_CI: &str = "name: CI\non: [push]\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - run: pip install ruff mypy\n      - name: lint\n        run: |\n          ruff check .\n          ruff format --check .\n      - run: >-\n          mypy\n          stats.py\n  test:\n    runs-on: ubuntu-latest\n    services:\n      postgres:\n        image: postgres\n    steps:\n      - run: python -m pytest -x\n  publish:\n    runs-on: ubuntu-latest\n    steps:\n      - run: twine upload dist/*\n";

/// The Python project of the issue, without `uv.lock`: ruff and mypy configured, pre-commit,
/// tox, and a CI that lints.
fn linted_python_project() -> Project {
    repository(&[
        ("pyproject.toml", LINTED_PYPROJECT),
        (".pre-commit-config.yaml", PRE_COMMIT),
        ("tox.ini", TOX_INI),
        (".github/workflows/ci.yml", PY_CI),
        ("stats.py", PY_STATS),
        ("test_stats.py", PY_TEST),
    ])
}

/// Regression: the probe kept only the tests of a Python project whose CI, pre-commit and
/// config run ruff and mypy; nothing said what was left out.
#[test]
fn detection_reads_the_ci_jobs_pre_commit_tox_and_linter_configuration_of_a_python_project() {
    let project = linted_python_project();
    let path = fake_tools(&project, &[("ruff", FAKE_RUFF)]);
    let facts = detected_on(&project, &path);
    assert_eq!(
        facts["ci"],
        json!([
            "ruff check .",
            "ruff format --check .",
            "mypy stats.py",
            "python -m pytest -x"
        ]),
        "the `run: |` and `run: >-` blocks, not the install"
    );
    let mut checks = vec!["ruff check .", "ruff format --check ."];
    if on_path("mypy", Some(&path)) {
        checks.push("mypy stats.py");
    }
    checks.push(python_check());
    assert_eq!(facts["checks"], json!(checks), "{facts:#}");
    let skipped: Vec<(String, String)> = facts["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|s| {
            (
                s["check"].as_str().unwrap_or_default().to_string(),
                s["why"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let why = |check: &str| {
        skipped
            .iter()
            .find(|(c, _)| c == check)
            .map(|(_, w)| w.as_str())
    };
    if !on_path("mypy", Some(&path)) {
        assert_eq!(
            why("mypy stats.py"),
            Some("`mypy` not installed"),
            "{skipped:?}"
        );
    }
    assert_eq!(
        why("python -m pytest -x"),
        Some("needs the services its CI job starts")
    );
    assert_eq!(why("twine upload dist/*"), Some("a deploy/publish step"));
    if !on_path("pre-commit", Some(&path)) {
        assert_eq!(
            why("pre-commit run --all-files"),
            Some("`pre-commit` not installed (its hooks trailing-whitespace did not run)")
        );
    }
    // A check that cannot run is never also a check that runs.
    for (check, _) in &skipped {
        assert!(!checks.contains(&check.as_str()), "{check}");
    }
    // One line per check, shown once, in the detection's step.
    let out = outputs(&project);
    assert!(
        out.contains("check: ruff check . (.github/workflows/ci.yml job lint)"),
        "{out}"
    );
    assert!(out.contains("skipped: twine upload dist/* (.github/workflows/ci.yml job publish): a deploy/publish step"), "{out}");
}

/// Regression: `fix-ci` ended "green" on an unused import that the CI's linter fails on.
#[test]
fn fix_ci_hands_the_ci_linters_failure_to_the_agent() {
    let project = linted_python_project();
    project.write("stats.py", &format!("import os\n\n\n{PY_STATS}"));
    commit_all(&project, "Import os");
    let path = fake_tools(&project, &[("ruff", FAKE_RUFF)]);
    let plan = json!([{
        "when": "Step 3: `ruff check .` fails",
        "run": "sed -i '1,3d' stats.py",
        "outputs": {"fix": "removed the unused import"},
    }]);
    let run = fix_ci_on(&project, &plan, &path);
    completed(&run);
    assert_eq!(read(&project, "stats.py"), PY_STATS);
    assert_eq!(calls(&project).len(), 1, "{:#?}", calls(&project));
    let ruff: Vec<bool> = steps(&project)
        .iter()
        .filter(|s| {
            s["result"]["exit_code"].is_i64()
                && s["context"]
                    .as_str()
                    .is_some_and(|c| c.contains("`ruff check .`"))
        })
        .map(|s| s["result"]["exit_code"] == 0)
        .collect();
    assert_eq!(
        ruff,
        [false, true, true],
        "failed, passed again, passed with the rest"
    );
}

/// A check whose tool is missing is listed as skipped when it is found (a Makefile target's
/// recipe's tool too: its first lines never run), said not to have run when it is found
/// missing only at run time (exit 127), and never shown as passed; the agent is not asked to fix it. Nor is a check whose container cannot
/// start (cobra's CI runs its license check with `docker run`; here no Docker daemon runs:
/// a stand-in `docker` says so, as the real one does).
#[test]
fn a_check_whose_tool_is_missing_is_not_run_and_never_shown_as_passed() {
    let project = repository(&[
        ("check.sh", "#!/bin/sh\necho checked\n"),
        ("Makefile", "lint:\n\tno-such-linter-xyz src\n"),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  check:\n    steps:\n      - run: sh ./check.sh\n      - run: no-such-typechecker-xyz --strict src\n  licenses:\n    steps:\n      - run: docker run --rm -v $(pwd):/src addlicense -check .\n",
        ),
    ]);
    let docker = "#!/bin/sh\necho 'docker: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?' >&2\nexit 125\n";
    let path = fake_tools(&project, &[("docker", docker)]);
    let run = fix_ci_on(&project, &json!([]), &path);
    completed(&run);
    assert!(calls(&project).is_empty(), "nothing for the agent to fix");
    told(
        &project,
        &run,
        &[
            "skipped: no-such-typechecker-xyz --strict src (.github/workflows/ci.yml job check): `no-such-typechecker-xyz` not installed",
            "skipped: make lint (Makefile): `no-such-linter-xyz` not installed",
        ],
        "The checks that ran pass: sh ./check.sh (not run: `no-such-typechecker-xyz --strict src`: `no-such-typechecker-xyz` not installed; `docker run --rm -v $(pwd):/src addlicense -check .`: needs a running Docker daemon; `make lint`: `no-such-linter-xyz` not installed)",
    );
}

/// Found trying `flow/commit` on real projects (issue 39): where no check could run (the
/// tools missing), it committed without a word to the person. It asks, naming what did not
/// run, and `stop` leaves the change uncommitted.
#[test]
fn commit_asks_before_committing_when_no_check_could_run() {
    let project = repository(&[("Makefile", "lint:\n\tno-such-linter-xyz src\n")]);
    project.write("src.txt", "changed\n");
    let plan = json!([{"when": "Steps 4 and 5", "outputs": {"files": "src.txt", "message": "Change src"}}]);
    let run = flow(&project, &plan, "flow/commit", &[]);
    assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
    let question = project
        .run(&["runs", "show", &last_run(&project)], "")
        .stdout;
    assert!(
        question.contains("No check could run here (not run: `make lint`: `no-such-linter-xyz` not installed). Commit anyway?"),
        "{question}"
    );
    let stopped = answer_and_resume(&project, "stop");
    assert_ne!(state(&stopped), "completed", "{}", stopped.stdout);
    assert_eq!(
        git(&project, &["log", "--format=%s"]).lines().count(),
        1,
        "no commit"
    );
    assert!(
        calls(&project).is_empty(),
        "the agent wrote nothing before the person's word"
    );
}

/// Checks that the run's steps printed each of `lines` and that its last words were `last`,
/// never that every check passes.
pub(crate) fn told(project: &Project, run: &Run, lines: &[&str], last: &str) {
    let out = outputs(project);
    for line in lines {
        assert!(out.contains(line), "{line}\n{out}");
    }
    // The last words are a step's output, so an MCP reply shows them too.
    assert!(out.contains(last), "{out}");
    let said = format!("{}\n{}\n{out}", run.stdout, run.stderr);
    assert!(!said.contains("Every check passes"), "{said}");
}

#[test]
fn detection_reads_a_gitlab_ci_file() {
    let project = repository(&[(
        ".gitlab-ci.yml",
        "stages: [test, deploy]\n\nlint:\n  stage: test\n  before_script:\n    - pip install ruff\n  script:\n    - ./lint.sh --strict\n    - sh -c 'test -d .'\n    - $LINTER check .\n\ntest:\n  script: |\n    ./run-tests.sh\n    ./check-docs.sh\n\ndeploy:\n  stage: deploy\n  script:\n  - ./deploy.sh production\n",
    )]);
    let facts = detected(&project);
    assert_eq!(
        facts["checks"],
        json!([
            "./lint.sh --strict",
            "sh -c 'test -d .'",
            "./run-tests.sh",
            "./check-docs.sh"
        ])
    );
    assert_eq!(
        facts["skipped"],
        json!([
            {"check": "$LINTER check .", "why": "needs the CI's variables (`$LINTER`)"},
            {"check": "./deploy.sh production", "why": "a deploy/publish step"},
        ])
    );
}

#[test]
fn detection_takes_clippy_and_rustfmt_as_the_ci_runs_them() {
    let project = repository(&[
        ("Cargo.toml", RUST_TOML),
        ("src/lib.rs", RUST_LIB),
        (
            ".github/workflows/rust.yml",
            "jobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: dtolnay/rust-toolchain@stable\n      - run: cargo clippy --all-targets -- -D warnings\n      - run: cargo fmt --all -- --check\n  test:\n    steps:\n      - run: cargo test --workspace\n      - run: cargo publish --dry-run\n  msrv:\n    steps:\n      - run: CARGO_TERM_COLOR=always cargo test --workspace\n      - run: cargo test --locked \"${MSRV_FEATURES}\"\n",
        ),
    ]);
    let facts = detected(&project);
    assert_eq!(
        facts["checks"],
        json!([
            "cargo clippy --all-targets -- -D warnings",
            "cargo fmt --all -- --check",
            "cargo test --workspace"
        ]),
        "the CI's own commands stand for `cargo test` and `cargo fmt --check`"
    );
    assert_eq!(
        facts["skipped"],
        json!([{"check": "cargo publish --dry-run", "why": "a deploy/publish step"}]),
        "the same command with other settings, and a test run `cargo test --workspace` covers, \
         are left out"
    );
}

#[test]
fn detection_finds_eslint_and_tsc_of_a_javascript_project() {
    let project = repository(&[
        (
            "package.json",
            r#"{"name": "x", "scripts": {"test": "node test.js"}, "devDependencies": {"typescript": "^5.4.0", "eslint": "^9.0.0"}}"#,
        ),
        ("eslint.config.js", "export default [];\n"),
        (
            "tsconfig.json",
            "{\"compilerOptions\": {\"strict\": true}}\n",
        ),
    ]);
    // eslint is installed in the project and runs as its own program; tsc is not (npx would
    // download it).
    let eslint = project.write("node_modules/.bin/eslint", "#!/bin/sh\necho linted\n");
    executable(&eslint);
    let facts = detected(&project);
    assert_eq!(
        facts["checks"],
        json!(["npm test", "node_modules/.bin/eslint ."])
    );
    assert_eq!(
        facts["skipped"],
        json!([{"check": "npx tsc --noEmit", "why": "needs the network (`tsc` is not in `node_modules`: install the dependencies first)"}])
    );
}

// ---- the workflows, one end-to-end run each ----

/// What the agent is told to do in an llm step's `prompt`: its `<instructions>`.
pub(crate) fn instructions(prompt: &str) -> &str {
    prompt
        .rsplit_once("<instructions>\n")
        .and_then(|(_, rest)| rest.split_once("</instructions>"))
        .map_or("", |(text, _)| text)
}

/// The text of the first llm step the agent got.
pub(crate) fn first_prompt(project: &Project) -> String {
    calls(project)[0]["prompt"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// `flow/commit` in a Rust project with a `fix:`-style history, a change and a stray file.
pub(crate) fn commit() -> Case {
    let project = rust_project();
    project.write(
        "src/lib.rs",
        &RUST_LIB.replace("a + b", "a.wrapping_add(b)"),
    );
    commit_all(&project, "fix: add without overflow panics");
    project.write(
        "src/lib.rs",
        &format!("{RUST_LIB}\npub fn sub(a: i32, b: i32) -> i32 {{\n    a - b\n}}\n"),
    );
    project.write("scratch.txt", "not part of the change\n");
    let message = "feat: add sub\n\nSubtraction, for the calculator's minus key.";
    let plan = json!([{
        "when": "Steps 4 and 5",
        "outputs": {"files": "src/lib.rs\n", "message": message},
    }]);
    Case::new(
        project,
        "flow/commit",
        plan,
        Box::new(move |project| {
            assert_eq!(
                git(project, &["log", "-1", "--format=%B"]),
                message,
                "the message is the agent's"
            );
            assert_eq!(
                git(project, &["show", "--name-only", "--format=", "HEAD"]),
                "src/lib.rs"
            );
            assert_eq!(read(project, ".git/MEKARA_COMMIT_MSG").trim(), message);
            assert_eq!(git(project, &["status", "--porcelain"]), "?? scratch.txt");
            // The checks ran before, and the agent saw the convention in the log.
            assert!(
                outputs(project).contains("test tests::adds ... ok"),
                "{}",
                outputs(project)
            );
            let prompt = first_prompt(project);
            assert!(
                prompt.contains("fix: add without overflow panics"),
                "{prompt}"
            );
        }),
    )
}

#[test]
fn commit_runs_the_checks_and_commits_the_chosen_files_in_the_projects_convention() {
    commit().unattended();
}

/// `flow/release` of a JavaScript project tagged `v1.2.3` with a changelog: the person bumps
/// the minor version and says yes.
pub(crate) fn release() -> Case {
    let project = js_project();
    project.write(
        "CHANGELOG.md",
        "# Changelog\n\n## v1.2.3\n\n- First release.\n",
    );
    commit_all(&project, "Add a changelog");
    git(&project, &["tag", "v1.2.3"]);
    project.write("cli.js", &format!("{JS_CLI}// a comment\n"));
    commit_all(&project, "Explain the greeting");
    let entry = "## v1.3.0\n\n### Changed\n\n- The greeting is explained.";
    let plan = json!([{"when": "Step 5: draft the changelog entry for v1.3.0", "outputs": {"entry": entry}}]);
    Case::new(
        project,
        "flow/release",
        plan,
        Box::new(move |project| {
            assert_eq!(git(project, &["tag", "--points-at", "HEAD"]), "v1.3.0");
            assert_eq!(
                git(project, &["log", "-1", "--format=%s"]),
                "Release v1.3.0"
            );
            assert!(read(project, "package.json").contains("\"version\": \"1.3.0\""));
            assert_eq!(
                read(project, "CHANGELOG.md"),
                format!("# Changelog\n\n{entry}\n\n## v1.2.3\n\n- First release.\n")
            );
            // The log since the last tag went to the agent, and only that.
            let prompt = first_prompt(project);
            assert!(
                prompt.contains("Explain the greeting") && !prompt.contains("Add a changelog"),
                "{prompt}"
            );
        }),
    )
    .answering(&["minor", "yes"], |project, index| {
        if index == 0 {
            assert!(
                calls(project).is_empty(),
                "the bump is the person's, not the agent's"
            );
        }
        assert_eq!(
            git(project, &["tag", "--list"]),
            "v1.2.3",
            "nothing is tagged before yes"
        );
    })
}

#[test]
fn release_asks_the_bump_and_the_confirmation_then_writes_the_version_changelog_commit_and_tag() {
    release().unattended();
}

#[test]
fn release_declined_changes_nothing() {
    let project = js_project();
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "## v2.0.0\n\n- Everything."}}]);
    flow(&project, &plan, "flow/release", &[]);
    answer_and_resume(&project, "major");
    let head = git(&project, &["rev-parse", "HEAD"]);
    completed(&answer_and_resume(&project, "no"));
    assert_eq!(git(&project, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(&project, &["tag", "--list"]), "");
    assert_eq!(git(&project, &["status", "--porcelain"]), "");
}

/// `flow/fix-ci` in a Python project whose `spread` adds where it should subtract.
pub(crate) fn fix_ci() -> Case {
    let project = python_project();
    project.write(
        "stats.py",
        &PY_STATS.replace("max(xs) - min(xs)", "max(xs) + min(xs)"),
    );
    commit_all(&project, "Break spread");
    let plan = json!([{
        "when": "Step 3:",
        // A fix of another length: Python trusts a cached `.pyc` of a source that has the
        // same size and was changed within the same second.
        "run": "sed -i 's/max(xs) + min(xs)/max(xs) - min(xs)  /' stats.py",
        "outputs": {"fix": "spread added the minimum instead of subtracting it"},
    }]);
    Case::new(
        project,
        "flow/fix-ci",
        plan,
        Box::new(|project| {
            assert!(read(project, "stats.py").contains("max(xs) - min(xs)"));
            assert_eq!(calls(project).len(), 1, "{:#?}", calls(project));
            let checks: Vec<bool> = steps(project)
                .iter()
                .filter(|s| {
                    s["result"]["exit_code"].is_i64()
                        && s["context"]
                            .as_str()
                            .is_some_and(|c| c.contains(python_check()))
                })
                .map(|s| s["result"]["exit_code"] == 0)
                .collect();
            assert_eq!(
                checks,
                [false, true, true],
                "failed, passed again, passed with the rest"
            );
        }),
    )
}

#[test]
fn fix_ci_hands_the_failing_test_to_the_agent_and_runs_it_again_until_it_passes() {
    fix_ci().unattended();
}

#[test]
fn fix_ci_stops_after_its_attempts_and_says_what_still_fails() {
    let project = python_project();
    project.write("stats.py", &PY_STATS.replace("max(xs) - min(xs)", "0"));
    commit_all(&project, "Break spread");
    let plan = json!([{"when": "Step 3:", "outputs": {"fix": "I could not find it"}}]);
    let run = flow(&project, &plan, "flow/fix-ci", &[]);
    assert_ne!(state(&run), "completed");
    assert_eq!(
        calls(&project)
            .iter()
            .filter(|c| c["kind"] == "llm")
            .count(),
        3,
        "one try per attempt"
    );
    let journal = project.journal(&last_run(&project));
    assert!(
        journal.contains(&format!(
            "still failing after 3 attempts: `{}`",
            python_check()
        )),
        "{journal}"
    );
}

/// `flow/bisect` from the first commit of a Python project, four commits later, one of which
/// broke `mean`.
pub(crate) fn bisect() -> Case {
    let project = python_project();
    let good = git(&project, &["rev-parse", "HEAD"]);
    project.write("notes.md", "one\n");
    commit_all(&project, "Notes");
    project.write(
        "stats.py",
        &PY_STATS.replace("sum(xs) / len(xs)", "sum(xs) // len(xs) + 1"),
    );
    let bad = commit_all(&project, "Faster mean");
    project.write("notes.md", "one\ntwo\n");
    commit_all(&project, "More notes");
    project.write("README.md", "# stats\n");
    commit_all(&project, "Readme");
    let plan = json!([{
        "when": "Step 5:",
        "outputs": {"explanation": "stats.py:2: mean rounds down and adds one"},
    }]);
    let mut case = Case::new(
        project,
        "flow/bisect",
        plan,
        Box::new(move |project| {
            // In the run's steps, so an MCP reply shows it too (a `print` was at a terminal only).
            assert!(
                outputs(project).contains(&format!("first bad commit: {bad}")),
                "{}",
                outputs(project)
            );
            // Bisect ends where it started.
            assert_eq!(git(project, &["branch", "--show-current"]), "main");
            assert_eq!(git(project, &["log", "-1", "--format=%s"]), "Readme");
        }),
    );
    case.arguments = vec![good];
    case
}

#[test]
fn bisect_finds_the_commit_that_broke_the_check() {
    bisect().unattended();
}

/// Issue 39: `bisect` given the symptom in words failed ("`URLSafeSerializer` is not a
/// commit"). Now it asks for the good commit, asks again for an answer that names none, and
/// takes the project's checks as the command.
#[test]
fn bisect_given_the_symptom_in_words_asks_for_the_good_commit_and_goes_on() {
    let mut case = bisect();
    git(&case.project, &["tag", "v1.0", &case.arguments[0]]);
    case.arguments = vec!["the signer breaks on URLSafeSerializer".to_string()];
    case.answering(&["yesterday", "v1.0"], |project, index| {
        let journal = project.journal(&last_run(project));
        let asked = [
            "`the signer breaks on URLSafeSerializer` names no commit. Which commit was last good",
            "`yesterday` names no commit. Which commit was last good",
        ];
        assert!(journal.contains(asked[index]), "{journal}");
    })
    .unattended();
}

/// A Rust project that pins two dependencies from the registry cache below their newest
/// version: the newer `strsim` keeps the API, the newer `bitflags` (2.x) drops
/// `from_bits_unchecked`, so the crate no longer builds.
fn outdated_rust_project() -> Project {
    let lib = "bitflags::bitflags! {\n    pub struct Mode: u32 {\n        const READ = 1;\n    }\n}\n\npub fn mode() -> u32 {\n    unsafe { Mode::from_bits_unchecked(1) }.bits()\n}\n\npub fn distance(a: &str, b: &str) -> usize {\n    strsim::levenshtein(a, b)\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn works() {\n        assert_eq!(super::distance(\"kitten\", \"sitting\"), 3);\n        assert_eq!(super::mode(), 1);\n    }\n}\n";
    let project = repository(&[
        (
            "Cargo.toml",
            &format!("{RUST_TOML}bitflags = \"1\"\nstrsim = \"0.10\"\n"),
        ),
        ("src/lib.rs", lib),
    ]);
    lock(&project);
    project
}

/// `flow/upgrade-deps` in [`outdated_rust_project`].
pub(crate) fn upgrade_deps() -> Case {
    let project = outdated_rust_project();
    let before = git(&project, &["rev-parse", "HEAD"]);
    Case::new(
        project,
        "flow/upgrade-deps",
        json!([]),
        Box::new(move |project| {
            let toml = read(project, "Cargo.toml");
            assert!(toml.contains("bitflags = \"1\""), "reverted: {toml}");
            assert!(toml.contains("strsim = \"0.11.1\""), "upgraded: {toml}");
            assert_eq!(
                git(project, &["log", "--format=%s", &format!("{before}..HEAD")]),
                "Upgrade strsim from 0.10.0 to 0.11.1"
            );
            assert_eq!(git(project, &["status", "--porcelain"]), "");
            let out = outputs(project);
            assert!(
                out.contains("Upgraded: strsim 0.10.0 → 0.11.1")
                    && out.contains("Reverted: bitflags 1.3.2 → 2.13.2 (cargo test failed)"),
                "{out}"
            );
        }),
    )
}

#[test]
fn upgrade_deps_keeps_the_upgrade_that_passes_and_reverts_the_one_that_breaks() {
    upgrade_deps().unattended();
}

/// `flow/docs-sync` in a JavaScript project whose README still names `--loud`, renamed
/// `--shout` in the code.
pub(crate) fn docs_sync() -> Case {
    let project = js_project();
    project.write("cli.js", &JS_CLI.replace("--loud", "--shout"));
    commit_all(&project, "Rename --loud to --shout");
    let drift = "README.md:7: says `--loud`; cli.js takes `--shout`";
    let plan = json!([
        {"when": "Step 3: compare", "outputs": {"drifts": drift}},
        {
            "when": "Step 4: fix these drifts",
            "run": "sed -i 's/--loud/--shout/' README.md",
            "outputs": {"fixed": "README.md names --shout"},
        },
    ]);
    Case::new(
        project,
        "flow/docs-sync",
        plan,
        Box::new(move |project| {
            assert!(read(project, "README.md").contains("`--shout` shouts"));
            let calls = calls(project);
            // The agent compared with what the docs say in front of it, and got the drift to
            // fix.
            let compare = calls[0]["prompt"].as_str().unwrap_or_default();
            assert!(
                compare.contains("README.md:7:`--loud` shouts the greeting."),
                "{compare}"
            );
            assert!(
                calls[1]["prompt"]
                    .as_str()
                    .unwrap_or_default()
                    .contains(drift)
            );
        }),
    )
}

#[test]
fn docs_sync_finds_the_option_the_readme_names_that_the_code_no_longer_has_and_fixes_it() {
    docs_sync().unattended();
}

/// A Python library documented with Sphinx: `docs/conf.py` and `.rst` pages that name a class's
/// method with a `:meth:` role, as libraries on Read the Docs do.
const PY_SERIALIZER: &str = "class Serializer:\n    def __init__(self, indent=2):\n        self.indent = indent\n\n    def dumps_old(self, value):\n        return repr(value)\n";

/// `flow/docs-sync` in a Python project whose Sphinx docs name `Serializer.dumps_old`, which
/// the code renamed to `dumps`.
fn docs_sync_sphinx() -> Case {
    let project = repository(&[
        ("pyproject.toml", PY_PROJECT),
        ("serializer.py", PY_SERIALIZER),
        (
            "docs/conf.py",
            "project = \"serializer\"\nextensions = [\"sphinx.ext.autodoc\"]\n",
        ),
        (
            "docs/index.rst",
            "Serializer\n==========\n\n.. autoclass:: serializer.Serializer\n\nCall :meth:`Serializer.dumps_old` to turn a value into text.\n",
        ),
    ]);
    project.write(
        "serializer.py",
        &PY_SERIALIZER.replace("dumps_old", "dumps"),
    );
    commit_all(&project, "Rename Serializer.dumps_old to dumps");
    let drift =
        "docs/index.rst:6: names `Serializer.dumps_old`; serializer.py has `Serializer.dumps`";
    let plan = json!([
        {"when": "Step 3: compare", "outputs": {"drifts": drift}},
        {
            "when": "Step 4: fix these drifts",
            "run": "sed -i 's/dumps_old/dumps/' docs/index.rst",
            "outputs": {"fixed": "docs/index.rst names Serializer.dumps"},
        },
    ]);
    Case::new(
        project,
        "flow/docs-sync",
        plan,
        Box::new(|project| {
            assert!(read(project, "docs/index.rst").contains(":meth:`Serializer.dumps`"));
            let out = outputs(project);
            // The rst line with the role and the directive, and the class with its method.
            for seen in [
                "docs/index.rst:6:Call :meth:`Serializer.dumps_old` to turn a value into text.",
                "docs/index.rst:4:.. autoclass:: serializer.Serializer",
                "serializer.py:1:class Serializer:",
                "serializer.py:5:    def dumps(self, value):",
            ] {
                assert!(out.contains(seen), "{seen} not in:\n{out}");
            }
            let has_sphinx = Command::new("sh")
                .args(["-c", "command -v sphinx-build"])
                .output()
                .is_ok_and(|o| o.status.success());
            if has_sphinx {
                assert!(
                    out.contains("docs build: Sphinx (`sphinx-build -W -b html docs`)"),
                    "{out}"
                );
            } else {
                assert!(
                    out.contains(
                        "docs build: Sphinx (docs/conf.py) not run: `sphinx-build` is not installed"
                    ),
                    "{out}"
                );
                assert!(!out.contains("passed"), "{out}");
            }
        }),
    )
}

#[test]
fn docs_sync_reads_sphinx_rst_and_class_methods_and_says_the_docs_build_did_not_run() {
    docs_sync_sphinx().unattended();
}

#[test]
fn docs_sync_runs_the_makefile_docs_build_and_hands_its_failure_to_the_agent() {
    let project = js_project();
    project.write(
        "Makefile",
        "docs:\n\t@echo 'README.md:7: unknown option --loud' >&2; exit 1\n",
    );
    commit_all(&project, "A docs build");
    let plan = json!([{"when": "Step 3: compare", "outputs": {"drifts": ""}}]);
    Case::new(
        project,
        "flow/docs-sync",
        plan,
        Box::new(|project| {
            let out = outputs(project);
            assert!(
                out.contains("docs build: Makefile (`make docs`) failed"),
                "{out}"
            );
            assert!(!out.contains("passed"), "{out}");
            let compare = first_prompt(project);
            assert!(
                compare.contains("README.md:7: unknown option --loud"),
                "{compare}"
            );
        }),
    )
    .unattended();
}

/// `flow/triage` of "the mean of an empty list crashes" in a Python project: the person
/// accepts the fix.
pub(crate) fn triage() -> Case {
    let project = python_project();
    let test = "import unittest\nfrom stats import mean\n\n\nclass Empty(unittest.TestCase):\n    def test_empty(self):\n        self.assertEqual(mean([]), 0)\n";
    let plan = json!([
        {
            "when": "Step 3: write a test",
            "run": format!("printf '%s' '{test}' > test_empty.py"),
            "outputs": {"test_file": "test_empty.py", "test_command": "python3 -m unittest test_empty"},
        },
        {
            "when": "Steps 4 and 5",
            "outputs": {"cause": "stats.py:2: divides by len(xs), zero for an empty list", "fix": "return 0 for an empty list"},
        },
        {
            "when": "Step 6: apply",
            "run": "sed -i 's|    return sum(xs) / len(xs)|    return sum(xs) / len(xs) if xs else 0|' stats.py",
            "outputs": {"changed": "stats.py"},
        },
    ]);
    let mut case = Case::new(
        project,
        "flow/triage",
        plan,
        Box::new(|project| {
            assert!(read(project, "stats.py").contains("if xs else 0"));
            let results: Vec<i64> = steps(project)
                .iter()
                .filter(|s| {
                    s["context"]
                        .as_str()
                        .is_some_and(|c| c.contains("the new test"))
                })
                .filter_map(|s| s["result"]["exit_code"].as_i64())
                .collect();
            assert_eq!(results.len(), 2);
            assert!(
                results[0] != 0 && results[1] == 0,
                "failed before the fix, passed after: {results:?}"
            );
        }),
    )
    .answering(&["run", "apply"], |project, index| {
        assert!(
            read(project, "stats.py").contains("return sum(xs) / len(xs)\n"),
            "not applied before the answer"
        );
        if index == 0 {
            // The agent's command is shown to the person, and not run before the yes.
            assert!(steps(project).iter().all(|s| {
                !s["context"]
                    .as_str()
                    .is_some_and(|c| c.contains("the new test"))
            }));
        }
    });
    case.arguments = vec!["mean of an empty list crashes".to_string()];
    case
}

#[test]
fn triage_reproduces_the_bug_with_a_failing_test_and_applies_the_fix_the_person_accepts() {
    triage().unattended();
}

/// Declined, the fix is not applied, and where the failing test is was a `print`, shown at a
/// terminal only: now it is a step's output, which an MCP reply shows.
#[test]
fn triage_declined_leaves_the_code_and_says_where_the_failing_test_is() {
    let mut case = triage().answering(&["run", "leave it"], |_, _| {});
    case.effects = Box::new(|project| {
        assert!(!read(project, "stats.py").contains("if xs else 0"));
        let out = outputs(project);
        assert!(
            out.contains("Fix not applied. The failing test is in test_empty.py."),
            "{out}"
        );
    });
    case.unattended();
}

/// `flow/test-gaps` in a Python project with an uncommitted new function.
pub(crate) fn test_gaps() -> Case {
    let project = python_project();
    project.write(
        "stats.py",
        &format!("{PY_STATS}\n\ndef middle(xs):\n    ordered = sorted(xs)\n    return ordered[len(ordered) // 2]\n"),
    );
    let test = "import unittest\nfrom stats import middle\n\n\nclass Middle(unittest.TestCase):\n    def test_middle(self):\n        self.assertEqual(middle([3, 1, 2]), 2)\n";
    let plan = json!([{
        "when": "Step 3: write tests",
        "run": format!("printf '%s' '{test}' > test_middle.py"),
        "outputs": {"tests": "test_middle.py checks middle"},
    }]);
    Case::new(
        project,
        "flow/test-gaps",
        plan,
        Box::new(|project| {
            let prompt = first_prompt(project);
            assert!(prompt.contains("stats.py: lines 9-11"), "{prompt}");
            assert!(!prompt.contains("test_stats.py"), "{prompt}");
            let ran = outputs(project);
            assert!(
                ran.contains("Ran 3 tests") || ran.contains("3 passed"),
                "{ran}"
            );
            // Its last words say the checks pass (it ended with no word at all).
            assert!(ran.contains("Every check passes: "), "{ran}");
        }),
    )
}

#[test]
fn test_gaps_hands_the_agent_the_changed_lines_and_runs_the_tests_it_writes() {
    test_gaps().unattended();
}

/// Regression (issue 39): with a clean tree and no argument, `flow/test-gaps` ended with `{}`
/// and no word.
#[test]
fn test_gaps_on_a_clean_tree_says_nothing_changed_and_what_to_give() {
    let project = python_project();
    let run = flow(&project, &json!([]), "flow/test-gaps", &[]);
    completed(&run);
    assert!(calls(&project).is_empty());
    let out = outputs(&project);
    assert!(
        out.contains("Nothing changed since HEAD: give a base ref or commit something."),
        "{out}"
    );
}

/// A `PATH` whose `python3` has pytest and coverage: the virtualenv `tests/python/install.sh`
/// makes in `target/test-clients/py`.
pub(crate) fn python_with_coverage() -> String {
    let python = crate::common::outside_client(
        "py/bin/python3",
        "the Python virtualenv with pytest and coverage",
        "tests/python/install.sh",
    );
    let bin = python.parent().expect("bin").display().to_string();
    format!("{bin}:{}", std::env::var("PATH").unwrap_or_default())
}

/// A Python project checked with pytest, with an uncommitted change: a tested function, an
/// untested one, and lines that are not code to test (an import, a docstring, a comment, an
/// `if TYPE_CHECKING:` block, `docs/conf.py`, `conftest.py`).
fn python_change(conftest: &str) -> Case {
    let project = repository(&[
        ("pyproject.toml", PY_PROJECT),
        ("stats.py", PY_STATS),
        (
            "test_stats.py",
            "from stats import mean\n\n\ndef test_mean():\n    assert mean([1, 2, 3]) == 2\n",
        ),
        ("docs/conf.py", "project = \"stats\"\n"),
    ]);
    project.write(
        "stats.py",
        &format!(
            "from typing import TYPE_CHECKING\nimport math\n\nif TYPE_CHECKING:\n    from collections.abc import Sequence\n\n{PY_STATS}\n\ndef root(x):\n    \"\"\"The square root of `x`,\n    or nothing.\n    \"\"\"\n    # for negative numbers\n    if x < 0:\n        return None\n    return math.sqrt(x)\n"
        ),
    );
    project.write("docs/conf.py", "project = \"stats\"\nextensions = []\n");
    project.write("conftest.py", conftest);
    let plan = json!([{"when": "Step 3: write tests", "outputs": {"tests": "none"}}]);
    let mut case = Case::new(project, "flow/test-gaps", plan, Box::new(|_| {}));
    case.path = Some(Box::leak(python_with_coverage().into_boxed_str()));
    case
}

/// Regression (issue 39): `flow/test-gaps` measured coverage with another interpreter than the
/// checks, and counted `docs/conf.py`, docstrings and imports. Measured with pytest's own
/// interpreter, only the untested function's code lines are gaps.
#[cfg_attr(not(feature = "clients"), ignore = "needs pytest and coverage")]
#[test]
fn test_gaps_measures_coverage_with_the_checks_python_and_counts_only_source_lines() {
    let case = python_change("");
    let run = case.started();
    completed(&run);
    let prompt = first_prompt(&case.project);
    let asked = instructions(&prompt);
    // `def root(x):` is run at import; its body (after the docstring and the comment) is not.
    assert!(
        asked.ends_with(
            "Measured with `python3 -m coverage`: no test runs these lines.\n\nstats.py: lines 20-22\n"
        ),
        "{prompt}"
    );
}

/// Regression (issue 39): in a project that keeps its environment with uv (`uv.lock`, checked
/// with `uv run pytest`), coverage ran with the `python3` on `PATH` instead of in uv's
/// environment. The `uv` here stands in for the real one: it logs each call and runs the
/// command in the test's virtualenv.
#[cfg_attr(not(feature = "clients"), ignore = "needs pytest and coverage")]
#[test]
fn test_gaps_measures_coverage_in_uvs_environment_in_a_uv_project() {
    let mut case = python_change("");
    case.project.write("uv.lock", "version = 1\n");
    let bin = case.project.dir.path().join("uv-bin");
    let log = case.project.dir.path().join("uv.log");
    let uv = crate::common::write_file(
        &bin.join("uv"),
        &format!(
            "#!/bin/sh\necho \"uv $*\" >> '{}'\n[ \"$1\" = run ] && shift\n[ \"$1\" = --with ] && shift 2\nexec \"$@\"\n",
            log.display()
        ),
    );
    std::fs::set_permissions(&uv, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let path = format!("{}:{}", bin.display(), python_with_coverage());
    case.path = Some(Box::leak(path.into_boxed_str()));
    completed(&case.started());
    let prompt = first_prompt(&case.project);
    assert!(
        instructions(&prompt).ends_with(
            "Measured with `uv run --with coverage coverage`: no test runs these lines.\n\nstats.py: lines 20-22\n"
        ),
        "{prompt}"
    );
    let calls = std::fs::read_to_string(&log).expect("uv ran");
    assert!(
        calls.contains("uv run --with coverage coverage run --source=. -m pytest\n"),
        "{calls}"
    );
}

/// Regression (issue 39): pytest's crash was hidden and every changed line was reported as
/// "no test runs these lines".
#[cfg_attr(not(feature = "clients"), ignore = "needs pytest and coverage")]
#[test]
fn test_gaps_says_a_crashed_measurement_failed_rather_than_that_no_test_runs_the_lines() {
    let case = python_change("raise RuntimeError(\"the fixture is broken\")\n");
    case.started();
    let prompt = first_prompt(&case.project);
    let asked = instructions(&prompt);
    assert!(
        asked.contains("Coverage could not be measured (`python3 -m coverage run -m pytest` failed, exit code 4"),
        "{prompt}"
    );
    assert!(!asked.contains("no test runs these lines"), "{prompt}");
    // The crash itself is in the reply, for the agent to tell.
    assert!(prompt.contains("the fixture is broken"), "{prompt}");
}

/// `flow/review` of an uncommitted change that breaks the JavaScript project's test; the
/// agent's first findings name no place.
pub(crate) fn review() -> Case {
    let project = js_project();
    project.write("cli.js", &JS_CLI.replace("\"Hello, \"", "\"Hi, \""));
    let plan = json!([
        {"when": "do not name a `path:line`", "outputs": {"findings": "cli.js:3: the greeting changed but test.js still expects `Hello`"}},
        {"when": "Step 4: review", "outputs": {"findings": "the greeting changed"}},
    ]);
    Case::new(
        project,
        "flow/review",
        plan,
        Box::new(|project| {
            assert_eq!(calls(project).len(), 2);
            let out = outputs(project);
            assert!(
                out.contains("cli.js:3: the greeting changed but test.js still expects `Hello`"),
                "{out}"
            );
            // The failing check went into the review, and the review changed nothing.
            assert!(first_prompt(project).contains("these checks fail: npm test"));
            assert_eq!(git(project, &["status", "--porcelain"]), "M cli.js");
        }),
    )
}

#[test]
fn review_asks_again_for_findings_without_a_place_and_reports_them() {
    review().unattended();
}

/// Regression (issue 39): `flow/review` got the diff cut in the middle of the code change (a
/// lock file filled the rest), and took findings in files and lines that do not exist. The
/// lock file and a file `.gitattributes` marks generated are left out of the diff.
#[test]
fn review_reads_the_whole_change_without_the_lock_file_and_sends_back_findings_that_name_no_real_place()
 {
    let project = js_project();
    project.write("package-lock.json", "{}\n");
    project.write(".gitattributes", "api.js linguist-generated=true\n");
    project.write("api.js", "// generated\n");
    commit_all(&project, "Lock the dependencies");
    project.write("package-lock.json", &package_lock(3000));
    project.write("api.js", "// generated again\n");
    let many = (0..150).fold(String::new(), |all, n| {
        all + &format!("const c{n} = {n};\n")
    });
    project.write("cli.js", &format!("{JS_CLI}{many}"));
    let plan = json!([
        {"when": "do not name a `path:line`", "outputs": {"findings": "cli.js:157: c149 is unused\nnowhere.js:1: still made up"}},
        {"when": "Step 4: review", "outputs": {"findings": "cli.js:400: past the end\nnowhere.js:1: made up\ncli.js:8: c0 is unused"}},
    ]);
    let run = flow(&project, &plan, "flow/review", &[]);
    completed(&run);
    let prompt = first_prompt(&project);
    assert!(
        prompt.contains("read all of it with `cat .git/mekara/review.diff`"),
        "{prompt}"
    );
    let diff = read(&project, ".git/mekara/review.diff");
    assert!(
        diff.contains("+const c149 = 149;"),
        "the whole code change: {diff}"
    );
    assert!(!diff.contains("package-lock.json"), "no lock file");
    assert!(!diff.contains("api.js"), "no generated file");
    let retry = instructions(calls(&project)[1]["prompt"].as_str().unwrap_or_default()).to_string();
    assert!(
        retry.contains("cli.js:400: past the end (`cli.js` has 157 lines)"),
        "{retry}"
    );
    assert!(
        retry.contains("nowhere.js:1: made up (no file `nowhere.js`"),
        "{retry}"
    );
    assert!(!retry.contains("cli.js:8:"), "{retry}");
    let out = outputs(&project);
    assert!(
        out.contains("cli.js:157: c149 is unused\n\nUnverified"),
        "{out}"
    );
    assert!(out.contains("Unverified (the file or line does not exist, or is outside the change; check them by hand):\nnowhere.js:1: still made up (no file `nowhere.js`"), "{out}");
}

/// A bare repository beside the project, its remote `origin`, with `main` pushed to it.
pub(crate) fn with_remote(project: &Project) -> PathBuf {
    let remote = project.dir.path().join("remote.git");
    let init = Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&remote)
        .output()
        .expect("git");
    assert!(init.status.success());
    git(
        project,
        &["remote", "add", "origin", remote.to_str().expect("utf-8")],
    );
    git(project, &["push", "-q", "origin", "main"]);
    remote
}

/// `flow/pr` of a commit on `main` of a Rust project with a remote (a bare repository beside
/// it) and no `gh`: the person says yes.
pub(crate) fn pr() -> Case {
    let project = rust_project();
    let remote = with_remote(&project);
    project.write(
        "src/lib.rs",
        &RUST_LIB.replace("a + b", "a.saturating_add(b)"),
    );
    commit_all(&project, "Saturate instead of overflowing");
    let plan = json!([
        {"when": "Choose a short branch name", "outputs": {"branch": "saturating-add"}},
        {"when": "Step 4: write the pull request", "outputs": {"title": "Saturating add", "body": "Adds without overflow.\n\nTested with cargo test."}},
    ]);
    let remote_branches = move || branches(&remote);
    let pushed = remote_branches.clone();
    let mut case = Case::new(
        project,
        "flow/pr",
        plan,
        Box::new(move |project| {
            assert!(pushed().contains("saturating-add"));
            // Without gh on PATH, the description is printed for the person to paste.
            let out = outputs(project);
            assert!(
                out.contains("`gh` is not installed") && out.contains("Tested with cargo test."),
                "{out}"
            );
        }),
    )
    .answering(&["yes"], move |project, _| {
        assert_eq!(
            git(project, &["branch", "--show-current"]),
            "saturating-add"
        );
        assert!(
            !remote_branches().contains("saturating-add"),
            "nothing pushed before yes"
        );
    });
    case.path = Some("/usr/bin:/bin");
    case
}

#[test]
fn pr_makes_a_branch_pushes_it_after_yes_and_prints_the_description_without_gh() {
    pr().unattended();
}

#[test]
fn release_of_a_rust_crate_writes_the_packages_version_in_cargo_toml_and_cargo_lock() {
    let project = rust_project();
    let plan = json!([{"when": "Step 5", "outputs": {"entry": "## v0.4.2\n\n### Fixed\n\n- Nothing yet."}}]);
    let first = flow(&project, &plan, "flow/release", &[]);
    assert_eq!(state(&first), "waiting", "{}", first.stderr);
    answer_and_resume(&project, "patch");
    completed(&answer_and_resume(&project, "yes"));
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v0.4.2");
    assert!(
        read(&project, "Cargo.toml").contains("[package]\nname = \"adder\"\nversion = \"0.4.2\"")
    );
    assert!(
        read(&project, "Cargo.lock").contains("name = \"adder\"\nversion = \"0.4.2\""),
        "{}",
        read(&project, "Cargo.lock")
    );
    assert_eq!(
        git(&project, &["status", "--porcelain"]),
        "",
        "the lock file is in the commit"
    );
    assert_eq!(
        git(&project, &["show", "--name-only", "--format=", "HEAD"]),
        "CHANGELOG.md\nCargo.lock\nCargo.toml"
    );
}

#[test]
fn upgrade_deps_refuses_a_pnpm_project_rather_than_writing_an_npm_lock_file_beside_its_own() {
    let project = repository(&[
        ("package.json", JS_PACKAGE),
        ("pnpm-lock.yaml", "lockfileVersion: '9.0'\n"),
    ]);
    let run = flow(&project, &json!([]), "flow/upgrade-deps", &[]);
    assert_ne!(state(&run), "completed");
    let journal = project.journal(&last_run(&project));
    assert!(
        journal.contains("no cargo, npm, Go or uv project here (found: pnpm)"),
        "{journal}"
    );
    assert!(!project.root().join("package-lock.json").exists());
}

/// `pr` ran no checks: it proposed a change its CI fails on.
#[test]
fn pr_runs_the_checks_and_a_failing_one_stops_it_before_anything_is_pushed() {
    let project = repository(&[
        ("check.sh", "#!/bin/sh\necho 'lint: 1 problem'\nexit 1\n"),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  lint:\n    steps:\n      - run: sh ./check.sh\n",
        ),
    ]);
    let remote = with_remote(&project);
    git(&project, &["switch", "-q", "-c", "feature"]);
    project.write("notes.md", "one\n");
    commit_all(&project, "Notes");
    let run = flow(&project, &json!([]), "flow/pr", &[]);
    assert_eq!(state(&run), "waiting", "{}\n{}", run.stdout, run.stderr);
    let id = last_run(&project);
    assert!(
        project
            .journal(&id)
            .contains("These checks fail: `sh ./check.sh`. Propose the change anyway?"),
        "{}",
        project.journal(&id)
    );
    let run = answer_and_resume(&project, "stop");
    assert_ne!(state(&run), "completed");
    assert!(
        project
            .journal(&id)
            .contains("stopped before proposing: the checks fail (`sh ./check.sh`)")
    );
    assert!(calls(&project).is_empty(), "the agent wrote nothing");
    assert!(!branches(&remote).contains("feature"));
}

/// Issue 39: with no remote `origin`, `pr` created and switched to a branch, named by the agent,
/// before it found that nothing could be proposed; on a feature branch it asked "Push?" first.
/// Now it stops before any question, agent turn or branch.
#[test]
fn pr_without_a_remote_stops_before_asking_or_creating_anything() {
    for on_feature in [false, true] {
        let project = repository(&[("notes.md", "one\n")]);
        if on_feature {
            git(&project, &["switch", "-q", "-c", "feature"]);
        }
        project.write("notes.md", "two\n");
        commit_all(&project, "Notes");
        let before = git(&project, &["branch", "--list"]);
        let run = flow(&project, &json!([]), "flow/pr", &[]);
        assert_ne!(state(&run), "waiting", "no question: {}", run.stdout);
        assert_ne!(state(&run), "completed", "{}", run.stdout);
        let journal = project.journal(&last_run(&project));
        assert!(
            journal.contains(
                "no remote `origin`: add one with `git remote add origin URL`, then run again"
            ),
            "{journal}"
        );
        assert!(calls(&project).is_empty(), "the agent was not asked");
        assert_eq!(git(&project, &["branch", "--list"]), before);
    }
}

/// Issue 39: on `main` with nothing beyond the remote's `main`, `pr` created a branch before it
/// found nothing to propose. Now nothing is created.
#[test]
fn pr_with_nothing_to_propose_on_main_creates_no_branch() {
    let project = repository(&[("notes.md", "one\n")]);
    with_remote(&project);
    let run = flow(&project, &json!([]), "flow/pr", &[]);
    assert_ne!(state(&run), "completed", "{}", run.stdout);
    let journal = project.journal(&last_run(&project));
    assert!(
        journal
            .contains("no commits between `origin/main` and `main`: there is nothing to propose"),
        "{journal}"
    );
    assert!(calls(&project).is_empty(), "the agent was not asked");
    assert_eq!(git(&project, &["branch", "--list"]), "* main");
}

/// The branches of the bare repository `remote`, as `git branch --list` shows them.
fn branches(remote: &std::path::Path) -> String {
    let out = Command::new("git")
        .args(["branch", "--list"])
        .current_dir(remote)
        .output()
        .expect("git");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A project that keeps its tox environments in `pyproject.toml` (TOML lists of commands, a
/// `{replace = "posargs"}` table, a watching docs server) and gives mypy its `files`: mypy runs
/// as configured (`mypy`, not `mypy .`, which would check the tests too), the environments'
/// commands run directly without tox's substitutions, and a server that never ends is no check.
#[test]
fn detection_reads_tox_environments_in_pyproject_and_mypys_files() {
    let project = repository(&[(
        "pyproject.toml",
        "[project]\nname = \"pkg\"\nversion = \"1.0.0\"\n\n[tool.mypy]\nfiles = [\"src\"]\nstrict = true\n\n[tool.tox]\nenv_list = [\"py3\", \"typing\"]\n\n[tool.tox.env_run_base]\ncommands = [[\n    \"pytest\", \"-v\", \"--basetemp={env_tmp_dir}\",\n    {replace = \"posargs\", default = [], extend = true},\n]]\n\n[tool.tox.env.typing]\ncommands = [\n    [\"mypy\"],\n    [\"pyright\", \"--verifytypes\", \"pkg\"],\n]\n\n[tool.tox.env.docs-auto]\ncommands = [[\"sphinx-autobuild\", \"--watch\", \"src\", \"docs\", \"docs/_build\"]]\n",
    )]);
    let path = fake_tools(
        &project,
        &[("mypy", "#!/bin/sh\necho 'Success: no issues found'\n")],
    );
    let facts = detected_on(&project, &path);
    let checks = facts["checks"].as_array().expect("checks").clone();
    let skipped: Vec<Json> = facts["skipped"]
        .as_array()
        .expect("skipped")
        .iter()
        .map(|s| s["check"].clone())
        .collect();
    assert!(checks.contains(&json!("mypy")), "{facts:#}");
    let pyright = json!("pyright --verifytypes pkg");
    assert!(
        checks.contains(&pyright) || skipped.contains(&pyright),
        "{facts:#}"
    );
    let all = format!("{checks:?} {skipped:?}");
    assert!(!all.contains("mypy ."), "{all}");
    assert!(
        !all.contains('{'),
        "tox's substitutions are not commands: {all}"
    );
    assert!(!all.contains("sphinx-autobuild"), "{all}");
    if on_path("pytest", Some(&path)) || python_check() == "python3 -m pytest" {
        assert!(all.contains("pytest"), "{all}");
    } else {
        assert!(
            facts["skipped"]
                .as_array()
                .expect("skipped")
                .contains(&json!({"check": "python3 -m pytest", "why": "`pytest` not installed"})),
            "a project that names pytest is not run with unittest: {facts:#}"
        );
    }
}

/// requests' CI runs `make ci` (a target whose name says nothing; its recipe runs pytest):
/// that is the check, and `python -m MODULE` without the module is a check that did not run,
/// while a test's own failed import is a failure the agent gets.
#[test]
fn a_ci_make_target_is_the_check_and_a_missing_python_module_is_not_run() {
    let project = repository(&[
        (
            "Makefile",
            "init:\n\tpip install -r requirements.txt\nci:\n\tpython3 -m no_such_module_xyz tests\n",
        ),
        (
            "test.sh",
            "echo \"ModuleNotFoundError: No module named 'stats'\"\nexit 1\n",
        ),
        (
            ".github/workflows/ci.yml",
            "jobs:\n  build:\n    steps:\n      - run: |\n          make\n          make ci\n          sh ./test.sh\n",
        ),
    ]);
    let plan = json!([{
        "when": "Step 3: `sh ./test.sh` fails",
        "run": "printf 'echo ok\\n' > test.sh",
        "outputs": {"fix": "the module is back"},
    }]);
    let run = flow(&project, &plan, "flow/fix-ci", &[]);
    completed(&run);
    assert_eq!(
        calls(&project).len(),
        1,
        "only the real failure goes to the agent"
    );
    told(
        &project,
        &run,
        &[
            "check: make ci (.github/workflows/ci.yml job build)",
            "not run: make ci: `no_such_module_xyz` not installed",
        ],
        "The checks that ran pass: sh ./test.sh (not run: `make ci`: `no_such_module_xyz` not installed)",
    );
}

/// The gofmt check of a Go module: fails on a file gofmt would change and names it.
const GOFMT: &str = "test -z \"$(gofmt -l . | tee /dev/stderr)\"";

/// A Go module with golangci-lint configured: go vet, go test, gofmt and golangci-lint, each
/// run when its tool is here and listed with why when it is not.
#[test]
fn detection_finds_the_go_checks_and_golangci_lint() {
    let project = repository(&[
        ("go.mod", "module example.com/x\n\ngo 1.22\n"),
        (".golangci.yml", "linters:\n  enable:\n    - errcheck\n"),
    ]);
    let facts = detected(&project);
    let expected = [
        ("go vet ./...", "go"),
        ("go test ./...", "go"),
        (GOFMT, "gofmt"),
        ("golangci-lint run", "golangci-lint"),
    ];
    for (check, tool) in expected {
        let skipped = json!({"check": check, "why": format!("`{tool}` not installed")});
        if on_path(tool, None) {
            assert!(
                facts["checks"]
                    .as_array()
                    .expect("checks")
                    .contains(&json!(check)),
                "{facts:#}"
            );
        } else {
            assert!(
                facts["skipped"]
                    .as_array()
                    .expect("skipped")
                    .contains(&skipped),
                "{facts:#}"
            );
        }
    }
}
