//! Stops and failures handled as the script and the person mean them (issue 28): a script
//! that stops itself with `fail()` ends the run as "stopped by the script", at the terminal,
//! unattended and over MCP, and every reader says so.

use std::io::Write as _;

use serde_json::{Value as Json, json};

use crate::common::Project;
use crate::mcp::client::Client;

const NL: &str = "---\ndescription: Build, confirm, release\n---\n1. Build.\n2. Ask the user to confirm the release; if they say no, stop.\n3. Release.\n";

/// A build, the person's confirmation, and a `fail()` when they say no.
const RELEASE: &str = r#"
def execute(request):
    auto("echo built", context = "Step 1: build")
    r = ask("Release it?", choices = ["yes", "no"])
    if r.answer != "yes":
        fail("the user said no")
    auto("echo released", context = "Step 3: release")
"#;

fn project() -> Project {
    let project = Project::new();
    project.script("release", NL, Some(RELEASE));
    project
}

fn only_run(project: &Project) -> String {
    let ids = project.run_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    ids[0].clone()
}

/// The journal's events of run `id`, as JSON.
fn events(project: &Project, id: &str) -> Vec<Json> {
    project
        .journal(id)
        .lines()
        .map(|l| serde_json::from_str::<Json>(l).expect("json line"))
        .collect()
}

/// Regression (issue 28): a script that called `fail("the user said no")` after a person's
/// "no" got "failed; finish it by hand", the next line of input was taken as the work done
/// by hand, and a run left there stayed "interrupted" for good. It ends the run as stopped
/// by the script, with the script's message, journaled; `runs`, `runs show` and `--retry`
/// say so.
#[test]
fn a_script_that_stops_itself_at_the_terminal_ends_the_run_as_stopped_by_the_script() {
    let project = project();
    let run = project.run(&["run", "release"], "no\n");
    run.expect_code(1);
    // Stopped by the script, with its message: not "finish it by hand", not released.
    let run = mekara_snapshot!("stopped_at_the_terminal", project, run);
    let out = &run.stdout;
    assert!(!out.contains("finish it by hand"), "{out}");
    assert!(!out.contains("released"), "{out}");
    let id = only_run(&project);

    let last = events(&project, &id).pop().expect("an event");
    assert_eq!(
        (&last["event"], &last["outcome"], &last["error"]),
        (&json!("pop"), &json!("stopped"), &json!("the user said no")),
        "{last}"
    );

    // The runs folder's size follows the journal's timings.
    insta::with_settings!({filters => vec![(r"\d+ B in", "[SIZE] in")]}, {
        mekara_snapshot!("stopped_runs", project, project.command(&["runs"]));
    });
    mekara_snapshot!(
        "stopped_runs_show",
        project,
        project.command(&["runs", "show", &id])
    );
    // Not a run to finish: prune takes it as an ended run.
    // Not pinned: the dry run says how many bytes the run takes, which varies.
    let pruned = project.run(&["runs", "prune", "--state", "stopped", "--dry-run"], "");
    assert!(pruned.stdout.contains(&id), "{}", pruned.stdout);

    // A retry would stop again: it is refused, saying how to give another answer.
    let retried = project.run(&["run", "--resume", &id, "--retry"], "");
    retried.expect_code(2);
    mekara_snapshot!("stopped_retry_refused", project, retried);
    // Going on from the question asks it again.
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &id, "--from", "release[1]"], "yes\n")
    );
}

/// Regression (issue 28): `mekara run --resume ID` of a run its script stopped said only
/// "has already finished". It says that the script stopped it, with its message, and what
/// can go on: `--from` a step after a decision, `--retry` after a failure the script read.
#[test]
fn resuming_a_run_the_script_stopped_says_why_and_what_can_go_on() {
    let project = project();
    project.run(&["run", "release"], "no\n").expect_code(1);
    let id = only_run(&project);
    let resumed = project.run(&["run", "--resume", &id], "");
    resumed.expect_code(2);
    let resumed = mekara_snapshot!("stopped_on_a_decision_resume_refused", project, resumed);
    assert!(
        !resumed.stderr.contains("has already finished"),
        "{}",
        resumed.stderr
    );

    // A stop that read an allowed failure: once the cause is fixed, a retry runs that step.
    project.script(
        "ship",
        "---\ndescription: Test, then ship\n---\n1. Run the tests; if they fail, stop.\n2. Ship.\n",
        Some(
            "def execute(request):\n    \
             auto(\"echo built\", context = \"Step 0: build\")\n    \
             t = auto(\"test -f tests-pass\", allow_failure = True, context = \"Step 1: run the tests\")\n    \
             if not t.success:\n        \
             fail(\"the tests failed\")\n    \
             auto(\"echo shipped\", context = \"Step 2: ship\")\n",
        ),
    );
    project.run(&["run", "ship"], "").expect_code(1);
    let ship = project
        .run_ids()
        .into_iter()
        .find(|run| *run != id)
        .expect("the ship run");
    let resumed = project.run(&["run", "--resume", &ship], "");
    resumed.expect_code(2);
    mekara_snapshot!("stopped_after_a_failure_resume_refused", project, resumed);
    std::fs::write(project.root().join("tests-pass"), "").expect("write");
    mekara_snapshot!(
        project,
        project.run(&["run", "--resume", &ship, "--retry"], "")
    );
}

/// Unattended, the stop ends the run with exit 1 and the script's message on stderr, and
/// nothing to resume.
#[test]
fn unattended_a_script_that_stops_itself_exits_1_with_its_message() {
    let project = project();
    // The person said no, with `mekara answer`, while the run waited.
    let agent = ["--agent-command", "false", "--json"];
    let mut args = vec!["run"];
    args.extend_from_slice(&agent);
    args.push("release");
    let waiting = project.run(&args, "");
    waiting.expect_code(1);
    let id = only_run(&project);
    project.run(&["answer", &id, "no"], "").expect_code(0);
    let mut args = vec!["run", "--resume", &id];
    args.extend_from_slice(&agent);
    let stopped = project.run(&args, "");
    stopped.expect_code(1);
    let stopped = insta::with_settings!({filters => vec![(r#""duration_ms": \d+"#, r#""duration_ms": [MS]"#)]}, {
        mekara_snapshot!("stopped_unattended", project, stopped)
    });
    let summary: Json = serde_json::from_str(&stopped.stdout).expect("a JSON summary");
    assert_eq!(summary["state"], "stopped_by_script", "{summary}");
    assert_eq!(summary["resume"], Json::Null, "{summary}");
    assert_eq!(summary["run_id"], json!(id), "{summary}");
}

/// Over MCP, the agent is told that the script stopped, with its message, to tell the user
/// and not to work around it; `status` says the same.
#[tokio::test]
async fn over_mcp_the_agent_is_told_the_script_stopped_and_not_to_work_around_it() {
    let project = project();
    let client = Client::start(&project, &[]).await;
    let started = client.call("start", json!({"name": "release"})).await.ok();
    let handle = crate::mcp::client::handle(&started);
    let stopped = client
        .call(
            "continue_compiled_script",
            json!({"run_id": handle, "outputs": {"answer": "no"}}),
        )
        .await
        .ok();
    insta::assert_snapshot!("mcp_stopped_by_the_script", project.scrub(&stopped));
    assert!(!stopped.contains("finish it by hand"), "{stopped}");
    assert!(!stopped.contains("retry"), "{stopped}");
    let status = client.call("status", json!({})).await.ok();
    assert!(
        status.contains("was stopped by the script `release`: the user said no"),
        "{status}"
    );
}

/// Regression (issue 28): `fail()` in a script started on top of a pending step (`start`
/// with `parent`) ended only that script, as a failed one, and the parent's step came back
/// as if nothing had happened. It stops the run, as a top-level script's `fail()` does.
#[tokio::test]
async fn a_script_started_with_parent_that_stops_itself_stops_the_run() {
    let project = project();
    project.script(
        "outer",
        "Outer.",
        Some("def execute(request):\n    llm('outer step', expects = {'x': 'a value'})\n    auto('echo outer went on')\n"),
    );
    let client = Client::start(&project, &[]).await;
    let first = client.call("start", json!({"name": "outer"})).await.ok();
    let nested = client
        .call(
            "start",
            json!({"name": "release", "parent": crate::mcp::client::handle(&first)}),
        )
        .await
        .ok();
    let stopped = client
        .call(
            "continue_compiled_script",
            json!({"run_id": crate::mcp::client::handle(&nested), "outputs": {"answer": "no"}}),
        )
        .await
        .ok();
    insta::assert_snapshot!("stopped_nested_over_mcp", project.scrub(&stopped));
    assert!(!stopped.contains("outer step"), "{stopped}");
    let id = only_run(&project);
    let last = events(&project, &id).pop().expect("an event");
    assert_eq!(
        (&last["event"], &last["depth"], &last["outcome"]),
        (&json!("pop"), &json!(0), &json!("stopped")),
        "{last}"
    );
    mekara_snapshot!(project, project.run(&["runs"], ""));
}

/// Regression (issue 28): with stdin piped, the line after a failed step (written before
/// anyone knew a step would fail) was taken as "finished by hand", and the run ended as done.
/// The run stops at the failure, saved, and says how to retry; a line `done` is what says
/// the script was finished by hand.
#[test]
fn piped_input_after_a_failure_stops_the_run_resumable_unless_it_says_done() {
    let project = Project::new();
    project.script(
        "ship",
        "---\ndescription: Test, then ship\n---\n1. Run the tests.\n2. Ship.\n",
        Some(
            "def execute(request):\n    \
             auto(\"test -f tests-pass\", context = \"Step 1: run the tests\")\n    \
             n = llm(\"Step 2: name the version.\", expects = {\"version\": \"the version\"})\n    \
             auto(\"echo shipped \" + n.outputs[\"version\"], context = \"Step 3: ship\")\n",
        ),
    );
    let run = project.run(&["run", "ship"], "1.2.0\n");
    run.expect_code(1);
    let id = only_run(&project);
    let run = mekara_snapshot!("piped_line_after_a_failure", project, run);
    assert!(!run.stdout.contains("finished by hand:"), "{}", run.stdout);
    mekara_snapshot!(project, project.run(&["runs"], ""));
    assert!(
        !events(&project, &id).iter().any(|e| e["event"] == "pop"),
        "the run is not over"
    );

    // The cause fixed, the retry runs the step again and goes on.
    project.write("tests-pass", "");
    let retried = project.run(&["run", "--resume", &id, "--retry"], "1.2.0\n");
    retried.expect_code(0);
    mekara_snapshot!("piped_retry_after_the_fix", project, retried);

    // `done` says it was finished by hand.
    std::fs::remove_file(project.root().join("tests-pass")).expect("remove");
    let by_hand = project.run(&["run", "ship"], "done\n");
    by_hand.expect_code(1);
    mekara_snapshot!("piped_done_after_a_failure", project, by_hand);
}

/// Regression (issue 28): a resume that killed a step left running by a killed mekara
/// recorded nothing of that attempt, so `runs show` showed the step as if it had run once.
/// The killed attempt is journaled, and shown beside the new one.
#[test]
fn a_resume_that_kills_a_leftover_step_journals_the_killed_attempt() {
    let project = Project::new();
    project.script(
        "slow",
        "Run the slow step.",
        Some(
            "def execute(request):\n    \
             auto(\"if [ -f second ]; then echo again; else touch second started; sleep 300; fi\")\n",
        ),
    );
    let root = project.root();
    let mut child = project.spawn(&["run", "slow"]);
    crate::common::wait_for(&root.join("started"));
    child.kill().expect("SIGKILL mekara");
    child.wait().expect("reap");
    let id = only_run(&project);

    mekara_snapshot!(project, project.run(&["run", "--resume", &id], ""));
    let killed: Vec<Json> = events(&project, &id)
        .into_iter()
        .filter(|e| e["event"] == "killed")
        .collect();
    assert_eq!(killed.len(), 1, "{killed:?}");
    assert_eq!(
        (&killed[0]["depth"], &killed[0]["index"]),
        (&json!(0), &json!(0))
    );

    let shown = project.run(&["runs", "show", &id], "");
    let out = &shown.stdout;
    let killed_at = out
        .find("✗ [0] killed, ")
        .unwrap_or_else(|| panic!("no killed attempt:\n{out}"));
    let again_at = out
        .find("✓ [0] $ if [ -f second ]")
        .expect("the new attempt");
    assert!(killed_at < again_at, "{out}");
    assert!(
        out.contains("this attempt was still running from a mekara that stopped; the resume killed its process group"),
        "{out}"
    );
}

/// An llm step, then a `parallel` group of three: the first member ends at once, the other
/// two start a `sleep` (its pid in `a.pid`, `b.pid`) and wait for it, until `again` exists.
const SLEEPERS: &str = "def execute(request):\n    \
    llm(\"Step 1: say a word\", expects = {\"word\": \"any word\"})\n    \
    parallel([\n        \
    lambda: auto(\"echo quick\"),\n        \
    lambda: auto(\"if [ -e again ]; then echo again a; else sleep 300 & echo $! > a.pid; touch a.started; wait; fi\"),\n        \
    lambda: auto(\"if [ -e again ]; then echo again b; else sleep 300 & echo $! > b.pid; touch b.started; wait; fi\"),\n    \
    ])\n";

/// Whether the members of `SLEEPERS` that sleep both started, and the quick one's result
/// is journaled.
fn sleepers_started(project: &Project) -> bool {
    let root = project.root();
    root.join("a.started").exists()
        && root.join("b.started").exists()
        && project
            .run_ids()
            .first()
            .is_some_and(|id| project.journal(id).contains("echo quick"))
}

/// After the resume of a `SLEEPERS` run killed while its two members slept: each was
/// killed, and journaled as killed with its number (1 is the quick member's, which ended).
fn the_killed_members_are_journaled(project: &Project, id: &str, pids: &[String]) {
    for pid in pids {
        assert!(
            crate::durability::wait_until_dead(pid),
            "the `sleep` {pid} of a member the killed mekara left still runs"
        );
    }
    let killed: Vec<(Json, Json)> = events(project, id)
        .into_iter()
        .filter(|e| e["event"] == "killed")
        .map(|e| (e["depth"].clone(), e["index"].clone()))
        .collect();
    assert_eq!(
        killed,
        [(json!(0), json!(2)), (json!(0), json!(3))],
        "{}",
        project.journal(id)
    );
    let shown = project.run(&["runs", "show", id], "");
    let out = &shown.stdout;
    for member in ["a", "b"] {
        let number = if member == "a" { 2 } else { 3 };
        let killed_at = out
            .find(&format!("✗ [{number}] killed, "))
            .unwrap_or_else(|| panic!("no killed attempt of step {number}:\n{out}"));
        let again_at = out
            .find(&format!("✓ [{number}] $ if [ -e again ]"))
            .unwrap_or_else(|| panic!("no new attempt of step {number}:\n{out}"));
        assert!(killed_at < again_at, "{out}");
    }
    assert!(!out.contains("✗ [1] killed"), "{out}");
}

/// Regression (issue 28): a resume killed the members of a `parallel` group that a killed
/// mekara left running, but journaled nothing of them (as it did for a sequential step),
/// so `runs show` showed each as if it had run once. Each killed member is journaled with
/// its number, at the terminal.
#[test]
fn a_resume_that_kills_leftover_parallel_members_journals_each_at_the_terminal() {
    let project = Project::new();
    project.script("sleepers", "Sleep.", Some(SLEEPERS));
    let root = project.root();
    let mut child = project.spawn(&["run", "sleepers"]);
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(b"go\n")
        .expect("answer");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !sleepers_started(&project) {
        assert!(
            std::time::Instant::now() < deadline,
            "the members never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.kill().expect("SIGKILL mekara");
    child.wait().expect("reap");
    let id = only_run(&project);
    let pids = [
        crate::durability::pid_in(&root.join("a.pid")),
        crate::durability::pid_in(&root.join("b.pid")),
    ];
    assert!(
        pids.iter().all(|pid| crate::durability::alive(pid)),
        "the orphaned members run on"
    );
    project.write("again", "");
    let resumed = project.run(&["run", "--resume", &id], "");
    resumed.expect_code(0);
    assert!(
        resumed.stdout.contains("again a") && resumed.stdout.contains("again b"),
        "{}",
        resumed.stdout
    );
    the_killed_members_are_journaled(&project, &id, &pids);
}

/// [`a_resume_that_kills_leftover_parallel_members_journals_each_at_the_terminal`], over
/// MCP: the server is killed while the group runs, and a new one resumes the run.
#[tokio::test]
async fn a_resume_that_kills_leftover_parallel_members_journals_each_over_mcp() {
    let project = Project::new();
    project.script("sleepers", "Sleep.", Some(SLEEPERS));
    let root = project.root();
    let client = Client::start(&project, &[]).await;
    let started = client.call("start", json!({"name": "sleepers"})).await.ok();
    let handle = crate::mcp::client::handle(&started);
    tokio::select! {
        reply = client.continue_with(json!({"word": "go"})) => {
            panic!("the group ended before the server was killed: {}", reply.text)
        }
        () = async {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            while !sleepers_started(&project) {
                assert!(std::time::Instant::now() < deadline, "the members never started");
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        } => {}
    }
    crate::mcp::client::kill_server(client).await;
    let id = only_run(&project);
    let pids = [
        crate::durability::pid_in(&root.join("a.pid")),
        crate::durability::pid_in(&root.join("b.pid")),
    ];
    project.write("again", "");
    let client = Client::start(&project, &[]).await;
    let resumed = client.call("resume", json!({"run_id": handle})).await.ok();
    assert!(resumed.contains("again a"), "{resumed}");
    the_killed_members_are_journaled(&project, &id, &pids);
}

/// Regression (issue 28): the steps of a `parallel` group were numbered in the order they
/// finished, so the numbers (and `--from` with them) changed from run to run. They follow
/// the members' order, whichever finishes first.
#[test]
fn the_steps_of_a_parallel_group_are_numbered_in_the_members_order() {
    let project = Project::new();
    // Member 0 ends only once member 1's result is journaled: it always finishes last.
    project.script(
        "meet",
        "Meet.",
        Some(
            "def execute(request):\n    \
             auto(\"echo before\")\n    \
             parallel([\n        \
             lambda: auto(\"while ! grep -qs 'echo B' .mekara/runs/*.jsonl; do sleep 0.01; done; echo A\"),\n        \
             lambda: auto(\"echo B\"),\n    \
             ])\n    \
             auto(\"echo after\")\n",
        ),
    );
    let run = project.run(&["run", "meet"], "");
    run.expect_code(0);
    assert!(
        run.stdout.contains("▶ meet[2] $ echo B") && run.stdout.contains("✓ meet[2]"),
        "{}",
        run.stdout
    );
    let id = only_run(&project);
    let shown = project.run(&["runs", "show", &id], "");
    let out = &shown.stdout;
    let (b, a) = (
        out.find("[2] $ echo B").expect("B"),
        out.find("[1] $ while").expect("A"),
    );
    assert!(b < a, "journaled as they finished, B first:\n{out}");
    assert!(out.contains("[3] $ echo after"), "{out}");

    // `--from` takes the number shown.
    let again = project.run(&["run", "--resume", &id, "--from", "meet[2]"], "");
    again.expect_code(0);
    assert!(
        again.stdout.contains("rewind: from step meet[2], as asked"),
        "{}",
        again.stdout
    );
}
