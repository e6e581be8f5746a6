//! The workflow library (`flow/*`) end to end: each test makes a real project (Rust, Python
//! or JavaScript, a git repository with history), runs one workflow to its end with `mekara
//! run --agent-command`, where a scripted agent plays the agent (it follows a plan of rules,
//! each matching the text of an llm step, running a shell command and giving outputs), answers
//! the workflow's questions with `mekara answer`, and checks what the workflow changed.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value as Json, json};

use crate::common::{Project, Run};

/// The scripted agent: logs each request to `calls.jsonl`, then takes the first rule of
/// `plan.json` whose `when` is in the item's instructions, runs its `run` (a shell command, in
/// the project) and answers its `outputs`; with no rule, it says it cannot.
const AGENT: &str = r###"
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

const AGENT_COMMAND: &str = "python3 agent/agent.py";

/// What every fixture repository leaves out of git: mekara's runs, the scripted agent, builds.
const GITIGNORE: &str = ".mekara/\nagent/\ntarget/\n__pycache__/\nnode_modules/\n";

/// A project that is a git repository holding `files`, committed as `Initial commit`.
fn repository(files: &[(&str, &str)]) -> Project {
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
fn git(project: &Project, args: &[&str]) -> String {
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

fn commit_all(project: &Project, message: &str) -> String {
    git(project, &["add", "-A"]);
    git(project, &["commit", "-q", "-m", message]);
    git(project, &["rev-parse", "HEAD"])
}

/// The person's cargo (its registry cache, offline) for the Rust projects' checks.
fn with_tools(mut cmd: Command) -> Command {
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
fn mekara(project: &Project, args: &[&str]) -> Run {
    crate::common::run_with_stdin(with_tools(project.command(args)), "")
}

/// Runs workflow `name` unattended with the scripted agent following `plan`.
fn flow(project: &Project, plan: &Json, name: &str, arguments: &[&str]) -> Run {
    project.write("agent/plan.json", &plan.to_string());
    let mut args = vec!["run", "--agent-command", AGENT_COMMAND, "--json", name];
    args.extend_from_slice(arguments);
    mekara(project, &args)
}

/// Resumes the project's last run after answering its question with `answer`.
fn answer_and_resume(project: &Project, answer: &str) -> Run {
    let id = last_run(project);
    project.run(&["answer", &id, answer], "").expect_code(0);
    mekara(
        project,
        &[
            "run",
            "--resume",
            &id,
            "--agent-command",
            AGENT_COMMAND,
            "--json",
        ],
    )
}

fn last_run(project: &Project) -> String {
    project.run_ids().pop().expect("a run")
}

/// The run's summary state (`completed`, `waiting`, ...).
fn state(run: &Run) -> String {
    let summary: Json = serde_json::from_str(&run.stdout)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}):\n{}\n{}", run.stdout, run.stderr));
    summary["state"].as_str().unwrap_or_default().to_string()
}

/// Panics with the run's streams unless it completed.
fn completed(run: &Run) {
    assert_eq!(state(run), "completed", "{}\n{}", run.stdout, run.stderr);
}

/// The step results of the project's last run, as JSON.
fn steps(project: &Project) -> Vec<Json> {
    project
        .journal(&last_run(project))
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).expect("json line"))
        .filter(|e| e["event"] == "step")
        .collect()
}

/// The output of every shell or function step of the last run, joined.
fn outputs(project: &Project) -> String {
    steps(project)
        .iter()
        .filter_map(|s| s["result"]["output"].as_str().map(str::to_string))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The requests the scripted agent got.
fn calls(project: &Project) -> Vec<Json> {
    std::fs::read_to_string(project.root().join("agent/calls.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a logged request"))
        .collect()
}

fn read(project: &Project, path: &str) -> String {
    std::fs::read_to_string(project.root().join(path))
        .unwrap_or_else(|e| panic!("cannot read {path}: {e}"))
}

// ---- the fixture projects ----

const RUST_TOML: &str =
    "[package]\nname = \"adder\"\nversion = \"0.4.1\"\nedition = \"2021\"\n\n[dependencies]\n";

const RUST_LIB: &str = "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(super::add(2, 3), 5);\n    }\n}\n";

const PY_PROJECT: &str = "[project]\nname = \"stats\"\nversion = \"0.1.0\"\n";

const PY_STATS: &str = "def mean(xs):\n    return sum(xs) / len(xs)\n\n\ndef spread(xs):\n    return max(xs) - min(xs)\n";

const PY_TEST: &str = "import unittest\n\nfrom stats import mean, spread\n\n\nclass StatsTest(unittest.TestCase):\n    def test_mean(self):\n        self.assertEqual(mean([1, 2, 3]), 2)\n\n    def test_spread(self):\n        self.assertEqual(spread([1, 5, 3]), 4)\n\n\nif __name__ == \"__main__\":\n    unittest.main()\n";

const JS_PACKAGE: &str = "{\n  \"name\": \"greet\",\n  \"version\": \"1.2.3\",\n  \"private\": true,\n  \"scripts\": {\n    \"test\": \"node test.js\"\n  }\n}\n";

const JS_CLI: &str = "const loud = process.argv.includes(\"--loud\");\nfunction greet(name, loud) {\n  const text = \"Hello, \" + name + \"!\";\n  return loud ? text.toUpperCase() : text;\n}\nmodule.exports = { greet };\nif (require.main === module) console.log(greet(process.argv[2] || \"world\", loud));\n";

const JS_TEST: &str = "const assert = require(\"assert\");\nconst { greet } = require(\"./cli.js\");\nassert.strictEqual(greet(\"Ada\", false), \"Hello, Ada!\");\nassert.strictEqual(greet(\"Ada\", true), \"HELLO, ADA!\");\nconsole.log(\"ok\");\n";

fn rust_project() -> Project {
    repository(&[("Cargo.toml", RUST_TOML), ("src/lib.rs", RUST_LIB)])
}

fn python_project() -> Project {
    repository(&[
        ("pyproject.toml", PY_PROJECT),
        ("stats.py", PY_STATS),
        ("test_stats.py", PY_TEST),
    ])
}

fn js_project() -> Project {
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

// ---- project detection ----

/// A project script that runs the library's detection (the helper, ejected with a workflow)
/// and writes what it found to `facts.json`.
const DETECT: &str = r#"
load("//lib/project.star", "detect", "quote")

def execute(request):
    facts = detect()
    auto("printf '%s' " + quote(json.encode(facts)) + " > facts.json")
"#;

fn detected(project: &Project) -> Json {
    project
        .run(&["scripts", "eject", "flow:fix-ci"], "")
        .expect_code(0);
    project.script("detect", "Detect the project's checks.\n", Some(DETECT));
    mekara(project, &["run", "detect"]).expect_code(0);
    serde_json::from_str(&read(project, "facts.json")).expect("facts")
}

/// The checks the detection gives a Python project on this machine.
fn python_check() -> &'static str {
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
    assert_eq!(rust["checks"], json!(["cargo test"]));
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
    assert_eq!(js["checks"], json!(["pnpm run lint", "pnpm test"]));
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
        ci["checks"],
        json!(["./scripts/test.sh --all", "shellcheck scripts/*.sh"])
    );
}
