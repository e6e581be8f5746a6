//! Fix and go on: `mekara run --resume ID --retry` runs a failed step again once its cause
//! is fixed, or rewinds a run to its edited script; `--from STEP` runs again from a chosen
//! step. Side-effect files count how often each step ran, so "not run again" is proven, not
//! read off the output.

use crate::common::{Project, lines, wait_for};

/// How often each step that appends a line to its counter file in the project ran.
pub fn counts(project: &Project, names: &[&str]) -> Vec<usize> {
    names
        .iter()
        .map(|name| lines(&project.root().join(name)))
        .collect()
}

const SIX: [&str; 6] = ["c0", "c1", "c2", "c3", "c4", "c5"];

/// Six shell steps, each appending to its counter `c<i>`; step `fix[2]` needs `needed.txt`.
fn six_steps(project: &Project) {
    project.script(
        "fix",
        "Six steps; the third needs `needed.txt`.\n",
        Some(
            r#"def execute(request):
    auto("echo a >> c0", context = "one")
    auto("echo a >> c1", context = "two")
    auto("cat needed.txt && echo a >> c2", context = "three")
    auto("echo a >> c3", context = "four")
    auto("echo a >> c4", context = "five")
    auto("echo a >> c5", context = "six")
"#,
        ),
    );
}

/// A project whose run of `fix` completed, and the run's id.
fn six_steps_done() -> (Project, String) {
    let project = Project::new();
    six_steps(&project);
    project.write("needed.txt", "here\n");
    project.run(&["run", "fix"], "").expect_code(0);
    let id = only_run(&project);
    (project, id)
}

fn only_run(project: &Project) -> String {
    let ids = project.run_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

/// Replaces `from` with `to` in the compiled file of project script `name`.
fn edit(project: &Project, name: &str, from: &str, to: &str) {
    let path = project
        .root()
        .join(format!(".mekara/scripts/compiled/{name}.star"));
    let text = std::fs::read_to_string(&path).expect("script");
    assert!(text.contains(from), "{from} not in {text}");
    std::fs::write(&path, text.replace(from, to)).expect("write");
}

/// The state column of `mekara runs` for the one run.
fn state(project: &Project) -> String {
    let listed = project.run(&["runs"], "");
    let row = listed.stdout.lines().nth(1).unwrap_or_default().to_string();
    row.split("  ")
        .map(str::trim)
        .filter(|column| !column.is_empty())
        .nth(2)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_failed_shell_step_is_retried_after_the_environment_was_fixed() {
    let project = Project::new();
    six_steps(&project);
    project.run(&["run", "fix"], "").expect_code(1);
    let id = only_run(&project);
    assert_eq!(counts(&project, &SIX), [1, 1, 0, 0, 0, 0]);
    assert_eq!(state(&project), "interrupted");

    // Not fixed yet: it fails again, and the run is where it was.
    mekara_snapshot!(
        "retry_not_fixed_yet",
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
    assert_eq!(counts(&project, &SIX), [1, 1, 0, 0, 0, 0]);

    project.write("needed.txt", "here\n");
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
    assert_eq!(counts(&project, &SIX), [1, 1, 1, 1, 1, 1]);
    assert_eq!(state(&project), "completed");
    // The journal keeps both failures, marked as superseded.
    mekara_snapshot!(
        "retried_run_shown",
        project,
        project.command(&["runs", "show", &id])
    );
}

#[test]
fn a_script_edited_at_step_3_of_6_runs_again_from_step_3() {
    let (project, id) = six_steps_done();
    edit(
        &project,
        "fix",
        "cat needed.txt && echo a >> c2",
        "echo b >> c2",
    );

    // Without `--retry` the run is finished; a run that has not ended is refused naming
    // `--retry` (see `without_retry_an_edited_script_is_refused_naming_retry`).
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
    assert_eq!(
        counts(&project, &SIX),
        [1, 1, 2, 2, 2, 2],
        "steps 1-2 answered from the journal, 3-6 ran again"
    );
    assert_eq!(
        std::fs::read_to_string(project.root().join("c2")).expect("c2"),
        "a\nb\n",
        "step 3 ran as edited"
    );
    // Nothing changed since: there is nothing left to retry.
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
}

#[test]
fn without_retry_an_edited_script_is_refused_naming_retry() {
    let project = Project::new();
    project.script(
        "ask",
        "Count, then ask.\n",
        Some(
            r#"def execute(request):
    auto("echo a >> c0")
    auto("echo a >> c1")
    llm("Say a word", expects = ["word"])
"#,
        ),
    );
    project.run(&["run", "ask"], "").expect_code(1);
    let id = only_run(&project);
    edit(&project, "ask", "echo a >> c1", "echo b >> c1");
    mekara_snapshot!(project, project.run(&["run", "--resume", &id], ""));
    let rewound = project.run(&["run", "--resume", &id, "--retry"], "word\n");
    rewound.expect_code(0);
    assert!(
        rewound
            .stdout
            .contains("kept, answered from the journal (1 step): ask[0]"),
        "{}",
        rewound.stdout
    );
    assert_eq!(counts(&project, &["c0", "c1"]), [1, 2]);
}

#[test]
fn a_script_that_failed_on_its_own_code_runs_on_once_the_code_is_fixed() {
    let project = Project::new();
    project.script(
        "bug",
        "Count, then count again.\n",
        Some(
            r#"def execute(request):
    auto("echo a >> c0")
    fail("a bug")
    auto("echo a >> c1")
"#,
        ),
    );
    project.run(&["run", "bug"], "").expect_code(1);
    let id = only_run(&project);
    // Unchanged, the script would stop again: the retry is refused.
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
    edit(&project, "bug", "    fail(\"a bug\")\n", "");
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
    assert_eq!(counts(&project, &["c0", "c1"]), [1, 1]);
}

#[test]
fn an_edit_that_removes_a_step_runs_on_from_where_it_was() {
    let (project, id) = six_steps_done();
    edit(
        &project,
        "fix",
        "    auto(\"cat needed.txt && echo a >> c2\", context = \"three\")\n",
        "",
    );
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
    assert_eq!(counts(&project, &SIX), [1, 1, 1, 2, 2, 2]);
    let shown = project.run(&["runs", "show", &id], "");
    let (_, after) = shown.stdout.split_once('↺').expect("a supersede event");
    assert!(
        after.contains("[4] $ echo a >> c5  # six") && !after.contains("[5]"),
        "the live run has five steps:\n{}",
        shown.stdout
    );

    // The last step removed: the run ends one step earlier.
    edit(
        &project,
        "fix",
        "    auto(\"echo a >> c5\", context = \"six\")\n",
        "",
    );
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
    assert_eq!(counts(&project, &SIX), [1, 1, 1, 2, 2, 2]);
}

/// A parent calls `child` between two steps of its own.
fn parent_and_child(project: &Project) {
    project.script(
        "parent",
        "Count, call the child, count.\n",
        Some(
            r#"def execute(request):
    auto("echo a >> p0")
    call_script("child")
    auto("echo a >> p2")
"#,
        ),
    );
    project.script(
        "child",
        "Count three times.\n",
        Some(
            r#"def execute(request):
    auto("echo a >> k0")
    auto("echo a >> k1")
    auto("echo a >> k2")
"#,
        ),
    );
}

#[test]
fn an_edit_inside_a_called_script_runs_again_from_the_changed_step_there() {
    let project = Project::new();
    parent_and_child(&project);
    project.run(&["run", "parent"], "").expect_code(0);
    let id = only_run(&project);
    edit(&project, "child", "echo a >> k1", "echo b >> k1");
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
    assert_eq!(
        counts(&project, &["p0", "k0", "k1", "k2", "p2"]),
        [1, 1, 2, 2, 2]
    );
}

#[test]
fn a_failed_step_inside_a_called_script_is_retried_there() {
    let project = Project::new();
    parent_and_child(&project);
    edit(
        &project,
        "child",
        "echo a >> k1",
        "cat needed.txt && echo a >> k1",
    );
    project.run(&["run", "parent"], "").expect_code(1);
    let id = only_run(&project);
    assert_eq!(counts(&project, &["p0", "k0", "k1"]), [1, 1, 0]);
    project.write("needed.txt", "here\n");
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--retry"], "")
    );
    assert_eq!(
        counts(&project, &["p0", "k0", "k1", "k2", "p2"]),
        [1, 1, 1, 1, 1]
    );
}

#[test]
fn from_on_a_completed_run_runs_again_from_that_step() {
    let (project, id) = six_steps_done();
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--from", "fix[4]"], "")
    );
    assert_eq!(counts(&project, &SIX), [1, 1, 1, 1, 2, 2]);
    // A step inside a called script, by its path or its own label.
    let nested = Project::new();
    parent_and_child(&nested);
    nested.run(&["run", "parent"], "").expect_code(0);
    let id = only_run(&nested);
    nested
        .run(
            &["run", "--resume", &id, "--from", "parent[1] > child[2]"],
            "",
        )
        .expect_code(0);
    nested
        .run(&["run", "--resume", &id, "--from", "child[1]"], "")
        .expect_code(0);
    assert_eq!(
        counts(&nested, &["p0", "k0", "k1", "k2", "p2"]),
        [1, 1, 2, 3, 3]
    );
}

#[test]
fn a_rewound_llm_step_is_asked_again() {
    let project = Project::new();
    project.script(
        "word",
        "Ask a word and write it.\n",
        Some(
            r#"def execute(request):
    w = llm("Say a word", expects = ["word"])
    auto("echo " + w.outputs["word"] + " >> words")
"#,
        ),
    );
    project.run(&["run", "word"], "first\n").expect_code(0);
    let id = only_run(&project);
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--from", "word[0]"], "second\n")
    );
    assert_eq!(
        std::fs::read_to_string(project.root().join("words")).expect("words"),
        "first\nsecond\n"
    );
}

#[test]
fn malformed_rewind_requests_are_refused_clearly() {
    let project = Project::new();
    parent_and_child(&project);
    project.script(
        "twice",
        "Call the child twice.\n",
        Some("def execute(request):\n    call_script(\"child\")\n    call_script(\"child\")\n"),
    );
    project.run(&["run", "twice"], "").expect_code(0);
    let id = only_run(&project);
    let show = |args: &[&str]| project.scrub(&project.run(args, "").stderr);
    insta::assert_snapshot!(
        "malformed_rewind_requests",
        [
            show(&["run", "--resume", &id, "--from", "deploy[4]"]),
            show(&["run", "--resume", &id, "--from", "child[0]"]),
            show(&["run", "--resume", &id, "--retry"]),
            show(&["run", "--resume", &id, "--retry", "--from", "twice[0]"]),
            show(&["run", "--retry", "twice"]),
        ]
        .join("---\n")
    );
}

#[test]
fn retry_on_a_run_another_process_holds_is_refused() {
    let project = Project::new();
    project.script(
        "hold",
        "Fail, or wait.\n",
        Some(
            r#"def execute(request):
    auto("echo a >> c0")
    auto("test -e fixed || exit 1; touch started; while [ ! -e go ]; do sleep 0.02; done")
"#,
        ),
    );
    project.run(&["run", "hold"], "").expect_code(1);
    let id = only_run(&project);
    project.write("fixed", "");
    let mut holder = project.spawn(&["run", "--resume", &id, "--retry"]);
    wait_for(&project.root().join("started"));
    let busy = project.run(&["run", "--resume", &id, "--retry"], "");
    busy.expect_code(1);
    assert!(
        busy.stderr
            .contains(&format!("run `{id}` is in use by another mekara process")),
        "{}",
        busy.stderr
    );
    project.write("go", "");
    assert!(holder.wait().expect("wait").success());
}

#[test]
fn a_kill_during_a_retried_run_then_a_resume_runs_no_step_twice() {
    let project = Project::new();
    project.script(
        "kill",
        "Steps with a failure.\n",
        Some(
            r#"def execute(request):
    auto("echo a >> c0")
    auto("test -e fixed && echo a >> c1")
    auto("echo a >> c2")
    auto("touch started; while [ ! -e go ]; do sleep 0.02; done; echo a >> c3")
    auto("echo a >> c4")
"#,
        ),
    );
    project.run(&["run", "kill"], "").expect_code(1);
    let id = only_run(&project);
    project.write("fixed", "");
    let mut retrying = project.spawn(&["run", "--resume", &id, "--retry"]);
    wait_for(&project.root().join("started"));
    retrying.kill().expect("SIGKILL");
    retrying.wait().expect("reap");
    assert_eq!(
        counts(&project, &["c0", "c1", "c2", "c3", "c4"]),
        [1, 1, 1, 0, 0]
    );
    // `go` is written only once the resume runs the step again: the resume kills the
    // killed run's step (still waiting for `go`) before it runs anything, so that one
    // must never see it.
    std::fs::remove_file(project.root().join("started")).expect("remove started");
    let resuming = project.spawn(&["run", "--resume", &id]);
    wait_for(&project.root().join("started"));
    project.write("go", "");
    let resumed = resuming.wait_with_output().expect("wait");
    let stdout = String::from_utf8_lossy(&resumed.stdout);
    assert!(resumed.status.success(), "{stdout}");
    assert_eq!(
        counts(&project, &["c0", "c1", "c2", "c3", "c4"]),
        [1, 1, 1, 1, 1],
        "{stdout}"
    );
    assert!(
        !stdout.contains("kill[2]"),
        "the retried steps that finished are answered from the journal:\n{stdout}"
    );
}

#[test]
fn a_resume_after_a_rewind_answers_the_same_as_the_live_run() {
    let project = Project::new();
    project.script(
        "nanos",
        "Time, then ask.\n",
        Some(
            r#"def execute(request):
    t = auto("date +%N")
    u = auto("date +%N")
    llm("Say a word about " + t.output.strip() + " and " + u.output.strip(), expects = ["word"])
"#,
        ),
    );
    project.run(&["run", "nanos"], "").expect_code(1);
    let id = only_run(&project);
    edit(
        &project,
        "nanos",
        "u = auto(\"date +%N\")",
        "u = auto(\"date +%N; true\")",
    );
    let rewound = project.run(&["run", "--resume", &id, "--retry"], "");
    rewound.expect_code(1);
    let prompt = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("Say a word about"))
            .unwrap_or_else(|| panic!("no prompt in:\n{text}"))
            .to_string()
    };
    let live = prompt(&rewound.stdout);
    let resumed = project.run(&["run", "--resume", &id], "");
    resumed.expect_code(1);
    assert_eq!(prompt(&resumed.stdout), live);
}
