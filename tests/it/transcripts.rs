//! What a user reads in the terminal, pinned whole with [`mekara_snapshot!`] (exit code,
//! stdout and stderr): `mekara run` transcripts of a passing run, a failing run with its
//! fallback and an interrupted run; `mekara runs` and `mekara runs show` of them; `mekara
//! scripts`; `mekara check`; and the `--help` of every command, found by walking the help
//! itself so a new command is pinned the day it appears.

use crate::common::{Project, Run};

const GREET_NL: &str =
    "---\ndescription: Greet someone\n---\n1. Say hello.\n2. Ask for a name.\n3. Greet them.\n";

/// Shell output on both streams, an llm step, and a function step that prints.
const GREET: &str = r#"def execute(request):
    auto("echo hello from the shell; echo and from stderr >&2", context = "Say hello")
    name = llm("Ask the user for their name.", expects = {"name": "their name"})
    auto(shout, {"text": name.outputs["name"]}, context = "Greet them")

def shout(text):
    print("HELLO, " + text.upper())
"#;

const DEPLOY_NL: &str = "---\ndescription: Build and deploy\n---\n1. Build.\n2. Deploy.\n";

/// A step that fails, so the run falls back to the NL instructions.
const DEPLOY: &str = r#"def execute(request):
    auto("echo building", context = "Build")
    auto("echo no route to host >&2; exit 3", context = "Deploy")
"#;

/// A project with the `greet` and `deploy` scripts.
fn project() -> Project {
    let project = Project::new();
    project.script("greet", GREET_NL, Some(GREET));
    project.script("deploy", DEPLOY_NL, Some(DEPLOY));
    project
}

#[test]
fn run_that_passes() {
    let project = project();
    mekara_snapshot!(
        project,
        project.run(&["run", "greet", "for", "Ada"], "Ada\n")
    );
}

#[test]
fn run_that_fails_and_falls_back() {
    let project = project();
    mekara_snapshot!(project, project.run(&["run", "deploy"], "done\n"));
}

/// Regression: the fallback said "the steps above already ran" when none had, and the
/// closing line said "1 steps".
#[test]
fn run_whose_first_step_fails() {
    let project = project();
    project.script(
        "ship",
        "---\ndescription: Ship\n---\n1. Push.\n",
        Some("def execute(request):\n    auto(\"exit 4\", context = \"Push\")\n"),
    );
    mekara_snapshot!(project, project.run(&["run", "ship"], "done\n"));
    let [id] = project.run_ids().try_into().expect("one run");
    mekara_snapshot!(
        "runs_show_ship_failed",
        project,
        project.run(&["runs", "show", &id], "")
    );
}

/// Regression: `mekara run` counted the auto steps it ran, `mekara runs` every journaled
/// step, so the same run showed 2 steps in one and 3 in the other.
#[test]
fn run_and_runs_count_the_same_steps() {
    let project = project();
    let run = project.run(&["run", "greet"], "Ada\n");
    let [id] = project.run_ids().try_into().expect("one run");
    let listing = project.run(&["runs"], "").stdout;
    let steps = listing
        .lines()
        .find(|l| l.starts_with(&id))
        .and_then(|l| l.split_whitespace().last())
        .expect("the run is listed");
    assert!(
        run.stdout
            .contains(&format!("completed: {steps} steps in ")),
        "{}\n{listing}",
        run.stdout
    );
}

/// A step that fails with `allow_failure = True`, then one that runs because the script went
/// on.
pub(crate) const TOLERANT: &str = r#"def execute(request):
    auto("echo no cache >&2; exit 1", context = "Warm the cache", allow_failure = True)
    auto("echo built", context = "Build")
"#;

/// Regression: a failure the script allowed was shown as `✗ … error:`, exactly like one that
/// stopped it, in `mekara run` and in `mekara runs show`.
#[test]
fn run_with_an_allowed_failure() {
    let project = project();
    project.script(
        "tolerant",
        "---\ndescription: Tolerant\n---\n1. Warm the cache.\n2. Build.\n",
        Some(TOLERANT),
    );
    mekara_snapshot!(project, project.run(&["run", "tolerant"], ""));
    let [id] = project.run_ids().try_into().expect("one run");
    mekara_snapshot!(
        "runs_show_tolerant_completed",
        project,
        project.run(&["runs", "show", &id], "")
    );
}

pub(crate) const RELEASE_NL: &str =
    "---\ndescription: Release\n---\n1. Lint, if it can.\n2. Publish.\n3. Announce.\n";

/// A parent that calls the same child twice: the first failure is allowed, the second is not.
pub(crate) const RELEASE: &str = r#"def execute(request):
    call_script("publish", "lint", allow_failure = True)
    call_script("publish", "v2")
    auto("echo announced", context = "Announce")
"#;

pub(crate) const PUBLISH_NL: &str =
    "---\ndescription: Publish\n---\nUpload $ARGUMENTS to the registry, then tag it.\n";

pub(crate) const PUBLISH: &str = r#"def execute(request):
    auto("echo uploading " + request, context = "Upload")
    auto("echo registry down >&2; exit 7", context = "Tag")
"#;

/// A project with `release`, which calls `publish`.
pub(crate) fn release_project() -> Project {
    let project = project();
    project.script("release", RELEASE_NL, Some(RELEASE));
    project.script("publish", PUBLISH_NL, Some(PUBLISH));
    project
}

/// `ship` calls `release`, which calls `publish`, whose step fails; each has NL
/// instructions of its own.
pub(crate) fn chain_project() -> Project {
    let project = Project::new();
    project.script(
        "ship",
        "---\ndescription: Ship\n---\n1. Build.\n2. Release v3.\n3. Announce.\n",
        Some(
            "def execute(request):\n    \
             auto(\"echo built\", context = \"Build\")\n    \
             call_script(\"release\", \"v3\")\n    \
             auto(\"echo announced\", context = \"Announce\")\n",
        ),
    );
    project.script(
        "release",
        "---\ndescription: Release\n---\nPublish $ARGUMENTS, then write its release notes.\n",
        Some(
            "def execute(request):\n    \
             call_script(\"publish\", request)\n    \
             auto(\"echo notes\", context = \"Notes\")\n",
        ),
    );
    project.script(
        "publish",
        "---\ndescription: Publish\n---\nUpload $ARGUMENTS to the registry, then tag it. If the registry is down, stop and tell the user.\n",
        Some(
            "def execute(request):\n    \
             auto(\"echo uploading \" + request, context = \"Upload\")\n    \
             auto(\"echo registry down >&2; exit 7\", context = \"Tag\")\n",
        ),
    );
    project
}

/// Regression (issue 28): at the terminal too, a failure two calls down gives the
/// instructions of the script whose step failed, and names the chain.
#[test]
fn run_whose_failure_is_two_calls_down() {
    let project = chain_project();
    mekara_snapshot!(project, project.run(&["run", "ship"], "done\n"));
    // What `release` still had to do after its call (its release notes) is given too, and
    // the order to finish in.
}

/// Regressions: a called script that failed with `allow_failure = True` was shown as `✗`, as
/// a failure that stops the caller is; and the fallback of a caller whose called script
/// failed gave only the caller's instructions, not the called script's own.
#[test]
fn run_whose_called_script_fails() {
    let project = release_project();
    mekara_snapshot!(project, project.run(&["run", "release"], "done\n"));
    let [id] = project.run_ids().try_into().expect("one run");
    mekara_snapshot!(
        "runs_show_release_failed",
        project,
        project.run(&["runs", "show", &id], "")
    );
}

#[test]
fn run_interrupted_at_a_prompt_and_resumed() {
    let project = project();
    mekara_snapshot!(
        "run_interrupted_at_a_prompt",
        project,
        project.run(&["run", "greet"], "")
    );
    let [id] = project.run_ids().try_into().expect("one run");
    mekara_snapshot!(
        "run_resumed",
        project,
        project.run(&["run", "--resume", &id], "Grace\n")
    );
}

#[test]
fn runs_and_runs_show() {
    let project = project();
    project.run(&["run", "greet"], "Ada\n").expect_code(0);
    project.run(&["run", "deploy"], "done\n");
    project.run(&["run", "greet"], "");
    // Runs started in the same second list in the order of their random suffix: sort the
    // listing by script and state so the snapshot does not depend on it.
    let listing = project.run(&["runs"], "");
    let mut lines: Vec<&str> = listing.stdout.lines().collect();
    let table = lines
        .iter()
        .position(|l| l.is_empty())
        .expect("a blank line before the total");
    lines[1..table].sort_by_key(|line| line.split_whitespace().skip(1).collect::<Vec<_>>());
    // The total's size depends on how long the steps took (their durations are journaled).
    let total = lines[table + 1]
        .split_once(", ")
        .expect("count, size")
        .0
        .to_string();
    let total =
        format!("{total}, [SIZE] in [PROJECT]/.mekara/runs; `mekara runs prune` removes old ones");
    lines[table + 1] = &total;
    let sorted = Run {
        stdout: lines.iter().flat_map(|l| [l, "\n"]).collect(),
        ..listing
    };
    mekara_snapshot!("runs", project, sorted);
    for id in project.run_ids() {
        let journal = project.journal(&id);
        let script = if journal.contains("\"greet\"") {
            "greet"
        } else {
            "deploy"
        };
        let state = project.run(&["runs"], "").stdout;
        let state = state
            .lines()
            .find(|l| l.starts_with(&id))
            .and_then(|l| l.split_whitespace().nth(2))
            .map(|state| state.trim_end_matches(','))
            .expect("the run is listed")
            .to_string();
        let name = format!("runs_show_{script}_{state}");
        mekara_snapshot!(name, project, project.run(&["runs", "show", &id], ""));
    }
}

#[test]
fn runs_show_of_an_unknown_run() {
    let project = project();
    mekara_snapshot!(
        project,
        project.run(&["runs", "show", "20260101-000000-0000"], "")
    );
}

#[test]
fn scripts_listing() {
    let project = project();
    mekara_snapshot!(project, project.command(&["scripts"]));
}

#[test]
fn check_passing() {
    let project = project();
    mekara_snapshot!(project, project.command(&["check"]));
}

#[test]
fn check_with_errors() {
    let project = project();
    project.script(
        "broken",
        "---\ndescription: Broken\n---\n1. Do it.\n",
        Some("def execute(request):\n    llm(\n"),
    );
    project.script(
        "undefined",
        "---\ndescription: Undefined\n---\n1. Do it.\n",
        Some("def execute(request):\n    auto(helper, {})\n"),
    );
    mekara_snapshot!(project, project.command(&["check"]));
}

/// The subcommands a `--help` text lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_help() {
    let project = Project::new();
    let mut queue = vec![Vec::<String>::new()];
    let mut pinned = Vec::new();
    while let Some(path) = queue.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let name = if path.is_empty() {
            "help_mekara".to_string()
        } else {
            format!("help_{}", path.join("_"))
        };
        let run = mekara_snapshot!(name, project, project.command(&args));
        assert_eq!(run.code, Some(0), "{args:?}");
        for sub in subcommands(&run.stdout) {
            let mut next = path.clone();
            next.push(sub);
            queue.push(next);
        }
        pinned.push(path.join(" "));
    }
    // The walk must have found the commands; an empty walk would pin nothing.
    for command in [
        "run",
        "runs show",
        "scripts eject",
        "tools call",
        "vcr replay",
        "hook",
    ] {
        assert!(
            pinned.iter().any(|p| p == command),
            "{command} not reached: {pinned:?}"
        );
    }
}
