//! `parallel([...])`: the shell steps of a group's members run at once, each journaled as it
//! finishes with its member; results come back in the members' order; Ctrl-C and SIGKILL
//! in the middle of a group; `runs show`; a VCR replay; arguments refused with clear errors.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crate::common::{Project, Run, journal_events, lines, wait_for};
use crate::durability::{
    alive, each_ran_once, ended_after_ctrl_c, pid_in, press_ctrl_c, wait_until_dead,
};

/// A shell loop that waits until the run's journal holds `text`: a member that waits so for
/// another's result can only end if both run at once, and always ends after it, so the
/// output is the same at every run, however loaded the machine.
fn after_journaled(text: &str) -> String {
    format!("while ! grep -qs '{text}' .mekara/runs/*.jsonl; do sleep 0.01; done")
}

/// Member 0 ends once member 1's result is journaled.
fn meet() -> String {
    format!(
        r#"
def execute(request):
    results = parallel([
        lambda: auto("{}; echo A", context = "Wait for B"),
        lambda: auto("echo B"),
    ])
    print([r.output.strip() for r in results])
    auto("echo after")
"#,
        after_journaled("echo B")
    )
}

#[test]
fn members_run_at_once_and_their_results_come_back_in_order() {
    let project = Project::new();
    project.script("meet", "Meet.", Some(&meet()));
    mekara_snapshot!(project, project.run(&["run", "meet"], ""));
    let id = project.run_ids().remove(0);
    mekara_snapshot!(
        "runs_show",
        project,
        project.run(&["runs", "show", &id], "")
    );
}

#[test]
fn members_with_several_steps_run_round_by_round_and_each_step_once() {
    let project = Project::new();
    project.script(
        "build",
        "Build.",
        Some(
            r#"
def part(name):
    auto("echo 1 >> " + name + ".count")
    print("built", name)
    return auto("echo " + name + "-done").output.strip()

def add(a, b):
    return a + b

def execute(request):
    results = parallel(
        [lambda: part("x"), lambda: part("y"), lambda: auto(add, {"a": 1, "b": 2}).value, lambda: "plain"],
        max = 2,
    )
    print(results)
"#,
        ),
    );
    let run = project.run(&["run", "build"], "");
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("[\"x-done\", \"y-done\", 3, \"plain\"]"),
        "{}",
        run.stdout
    );
    // A member's prints count once, though it is called once per round.
    assert_eq!(run.stdout.matches("built x").count(), 1, "{}", run.stdout);
    let root = project.root();
    assert_eq!(
        (lines(&root.join("x.count")), lines(&root.join("y.count"))),
        (1, 1)
    );
    let tags: Vec<_> = journal_events(&project)
        .into_iter()
        .filter(|e| e["event"] == "step")
        .map(|e| {
            (
                e["parallel"]["member"].as_u64(),
                e["parallel"]["group"].as_u64(),
            )
        })
        .collect();
    assert_eq!(tags.len(), 5, "{tags:?}");
    assert!(
        tags.iter().all(|(_, group)| *group == Some(0)),
        "every step is tagged with the group: {tags:?}"
    );
}

#[test]
fn a_failing_member_falls_back_unless_its_failure_is_allowed() {
    let project = Project::new();
    project.script(
        "checks",
        "Run the checks by hand.",
        Some(&format!(
            r#"
def execute(request):
    results = parallel([
        lambda: auto("echo lint failed; exit 3", allow_failure = True),
        lambda: auto("{}; echo tests pass"),
    ])
    print([(r.success, r.exit_code) for r in results])
    parallel([
        lambda: auto("echo fine"),
        lambda: auto("{}; echo broken; exit 4"),
    ])
    auto("echo 1 >> never.count")
"#,
            after_journaled("lint failed"),
            after_journaled("echo fine"),
        )),
    );
    mekara_snapshot!(project, project.run(&["run", "checks"], "done\n"));
    assert_eq!(lines(&project.root().join("never.count")), 0);
}

#[test]
fn outputs_of_members_that_run_at_once_are_kept_apart() {
    let project = Project::new();
    let chatty = |name: &str| {
        format!(
            "lambda: auto(\"touch {name}.on; while [ ! -e a.on ] || [ ! -e b.on ]; do sleep 0.01; done; for i in $(seq 1 40); do echo {name}$i; sleep 0.005; done\")"
        )
    };
    project.script(
        "chat",
        "Chat.",
        Some(&format!(
            "def execute(request):\n    parallel([{}, {}])\n",
            chatty("a"),
            chatty("b")
        )),
    );
    let run = project.run(&["run", "chat"], "");
    run.expect_code(0);
    let outputs: Vec<String> = journal_events(&project)
        .into_iter()
        .filter(|e| e["event"] == "step")
        .map(|e| {
            e["result"]["output"]
                .as_str()
                .unwrap_or_default()
                .to_string()
        })
        .collect();
    assert_eq!(outputs.len(), 2);
    for output in &outputs {
        let first = &output[..1];
        let expected = lines_of(first, "");
        assert_eq!(
            output, &expected,
            "one step's output holds only its own lines"
        );
    }
    // In the terminal, each step's lines follow its own header, all together.
    for name in ["a", "b"] {
        let block = lines_of(name, "  │ ");
        assert!(run.stdout.contains(&block), "{}", run.stdout);
    }
}

/// The 40 lines a chatty member writes (`NAME1` to `NAME40`), each after `prefix`.
fn lines_of(name: &str, prefix: &str) -> String {
    (1..=40).fold(String::new(), |mut text, i| {
        let _ = writeln!(text, "{prefix}{name}{i}");
        text
    })
}

/// A group of three: a quick member, and two that note their pids (and a background
/// child's) and wait for a `go` file; each member counts its runs.
const WAITING: &str = r#"
SLOW = 'echo $$ > {m}.pid; sleep 300 & echo $! > {m}.bg; touch {m}.started; while [ ! -e go ]; do sleep 0.02; done; echo 1 >> {m}.count'

def execute(request):
    parallel([
        lambda: auto("echo 1 >> quick.count"),
        lambda: auto(SLOW.format(m = "a")),
        lambda: auto(SLOW.format(m = "b")),
    ])
    auto("echo 1 >> after.count")
"#;

/// Starts `mekara run group` and waits until both slow members run and the quick one is
/// journaled; returns the child and the pids of the slow members' shells and background
/// children.
fn group_in_flight(project: &Project) -> (std::process::Child, Vec<String>) {
    project.script("group", "Run the group.", Some(WAITING));
    let root = project.root();
    let child = project.spawn(&["run", "group"]);
    wait_for(&root.join("a.started"));
    wait_for(&root.join("b.started"));
    let deadline = Instant::now() + Duration::from_secs(20);
    while !project
        .run_ids()
        .first()
        .is_some_and(|id| project.journal_events_text(id).contains("quick.count"))
    {
        assert!(
            Instant::now() < deadline,
            "the quick member was never journaled"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let pids = ["a.pid", "a.bg", "b.pid", "b.bg"]
        .iter()
        .map(|f| pid_in(&root.join(f)))
        .collect();
    (child, pids)
}

/// Every member and the step after the group ran once, and the resume did not run the
/// member that had finished before it.
fn each_member_ran_once(project: &Project, resumed: &Run) {
    resumed.expect_code(0);
    each_ran_once(
        &project.root(),
        &["quick", "a", "b", "after"],
        &resumed.stdout,
    );
    assert!(
        !resumed.stdout.contains("quick.count"),
        "the finished member is not run again:\n{}",
        resumed.stdout
    );
}

#[test]
fn ctrl_c_in_a_group_stops_every_running_member_and_the_run_resumes() {
    let project = Project::new();
    let (mut child, pids) = group_in_flight(&project);
    press_ctrl_c(&child);
    let status = ended_after_ctrl_c(&mut child, false, "mekara hung");
    assert_eq!(status.code(), Some(130));
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut stdout)
        .expect("read");
    let id = project.run_ids().remove(0);
    assert!(
        stdout.contains(&format!(
            "interrupted: step group[0] was stopped; resume with `mekara run --resume {id}`"
        )),
        "{stdout}"
    );
    for pid in &pids {
        assert!(
            wait_until_dead(pid),
            "process {pid} of a member survived Ctrl-C"
        );
    }
    std::fs::write(project.root().join("go"), "").expect("go");
    each_member_ran_once(&project, &project.run(&["run", "--resume", &id], ""));
}

#[test]
fn sigkill_in_a_group_then_resume_kills_the_orphaned_members_and_reruns_only_them() {
    let project = Project::new();
    let root = project.root();
    let (mut child, pids) = group_in_flight(&project);
    child.kill().expect("SIGKILL mekara");
    child.wait().expect("reap");
    assert!(
        pids.iter().all(|pid| alive(pid)),
        "the members' processes run on after mekara died"
    );
    let id = project.run_ids().remove(0);
    for started in ["a.started", "b.started"] {
        std::fs::remove_file(root.join(started)).expect("rm");
    }
    // The resume kills every orphaned member's group before it runs them again.
    let mut resuming = project.spawn(&["run", "--resume", &id]);
    wait_for(&root.join("a.started"));
    wait_for(&root.join("b.started"));
    for pid in &pids {
        assert!(
            wait_until_dead(pid),
            "the resume left process {pid} running"
        );
    }
    std::fs::write(root.join("go"), "").expect("go");
    drop(resuming.stdin.take());
    let resumed = Run::from_output(resuming.wait_with_output().expect("resume ends"));
    each_member_ran_once(&project, &resumed);
    let listed = project.run(&["runs", "show", &id], "");
    assert!(
        listed.stdout.contains("∥ parallel group [0], member 0"),
        "{}",
        listed.stdout
    );
    // The journal holds the quick member once, and each slow one once.
    let shells: Vec<_> = journal_events(&project)
        .into_iter()
        .filter(|e| e["event"] == "step")
        .filter_map(|e| e["parallel"]["member"].as_u64())
        .collect();
    let mut sorted = shells.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [0, 1, 2], "{shells:?}");
}

#[test]
fn bad_arguments_to_parallel_are_refused_with_what_to_write() {
    let project = Project::new();
    for (name, body) in [
        ("max-zero", r#"parallel([lambda: auto("true")], max = 0)"#),
        (
            "max-text",
            r#"parallel([lambda: auto("true")], max = "two")"#,
        ),
        ("not-a-list", r#"parallel(lambda: auto("true"))"#),
        (
            "a-command",
            r#"parallel(["make lint", lambda: auto("true")])"#,
        ),
        (
            "nested",
            r#"parallel([lambda: parallel([lambda: auto("true")])])"#,
        ),
        ("call", r#"parallel([lambda: call_script("other")])"#),
    ] {
        project.script(
            name,
            "By hand.",
            Some(&format!("def execute(request):\n    {body}\n")),
        );
        mekara_snapshot!(name, project, project.run(&["run", name], "done\n"));
    }
}

#[test]
fn a_script_edited_under_a_run_with_a_group_is_a_clear_divergence() {
    let with_llm = |group: &str| {
        format!(
            "def execute(request):\n    {group}\n    auto(\"echo after\")\n    llm(\"Say a word\", expects = [\"word\"])\n"
        )
    };
    // B ends after A, so A is always step 0.
    let b = format!("auto(\"{}; echo B\")", after_journaled("echo A"));
    let group = format!("parallel([lambda: auto(\"echo A\"), lambda: {b}])");
    for (name, edited) in [
        ("outside", r#"auto("echo A")"#.to_string()),
        (
            "changed",
            format!("parallel([lambda: auto(\"echo A2\"), lambda: {b}])"),
        ),
        (
            "longer",
            format!("parallel([lambda: auto(\"echo A\"), lambda: [{b}, auto(\"echo C\")]])"),
        ),
        (
            "shorter",
            r#"parallel([lambda: auto("echo A"), lambda: None])"#.to_string(),
        ),
    ] {
        // Stopped at the llm step after the group (stdin closed): resumable. A project of
        // its own, so the members wait for their own run's journal.
        let project = Project::new();
        project.script("edited", "By hand.", Some(&with_llm(&group)));
        project.run(&["run", "edited"], "").expect_code(1);
        let id = project.run_ids().remove(0);
        project.script("edited", "By hand.", Some(&with_llm(&edited)));
        mekara_snapshot!(
            name,
            project,
            project.run(&["run", "--resume", &id], "word\n")
        );
    }
}

/// An MCP session with a group whose members finish out of their order, recorded, then
/// replayed with nothing on `PATH`: the replay answers the group's steps in the order they
/// finished when it was recorded, so every reply is the same.
#[tokio::test]
async fn a_session_with_a_group_replays_from_its_cassette() {
    let project = Project::new();
    project.script(
        "meet",
        "Meet.",
        Some(&format!(
            "{}    llm(\"Say a word\", expects = [\"word\"])\n",
            meet()
        )),
    );
    let cassette = project.dir.path().join("meet.toml");
    let client =
        crate::mcp::client::Client::start(&project, &[("MEKARA_VCR_CASSETTE", cassette.as_path())])
            .await;
    let first = client
        .call("start", serde_json::json!({"name": "meet"}))
        .await
        .ok();
    assert!(
        first.contains("`meet[0]`") && first.contains("Say a word"),
        "{first}"
    );
    client
        .call(
            "continue_compiled_script",
            serde_json::json!({"outputs": {"word": "done"}}),
        )
        .await
        .ok();
    client.service.cancel().await.expect("close");

    let empty = project.dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let mut replay = project.command(&["vcr", "replay", cassette.to_str().expect("utf-8")]);
    replay.env("PATH", &empty);
    let run = crate::common::run_with_stdin(replay, "");
    run.expect_code(0);
    assert!(
        run.stdout.contains("replayed 2 calls and 3 shell steps"),
        "{}",
        run.stdout
    );
}

#[test]
fn each_member_keeps_its_own_timeout_and_max_bounds_how_many_run_at_once() {
    let project = Project::new();
    project.script(
        "bounded",
        "By hand.",
        Some(&format!(
            r#"
def execute(request):
    own = parallel([
        lambda: auto("sleep 30", timeout = 1, allow_failure = True),
        lambda: auto("sleep 0.2; echo done"),
    ])
    print("own timeout:", [(r.success, r.error) for r in own])
    one_at_a_time = parallel([
        lambda: auto("{}; echo A", timeout = 1, allow_failure = True),
        lambda: auto("echo B"),
    ], max = 1)
    print("max = 1:", [r.success for r in one_at_a_time])
"#,
            after_journaled("echo B")
        )),
    );
    let run = project.run(&["run", "bounded"], "");
    run.expect_code(0);
    assert!(
        run.stdout.contains(
            "own timeout: [(False, \"timed out after 1s; the command's process group was killed (a process it moved out of the group, with `setsid` or as a daemon, is not)\"), (True, None)]"
        ),
        "{}",
        run.stdout
    );
    // With one step at a time, A waits for B, which cannot start before A ends.
    assert!(
        run.stdout.contains("max = 1: [False, True]"),
        "{}",
        run.stdout
    );
}
