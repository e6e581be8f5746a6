//! The execution stack (DESIGN §4): automatic and manual nesting, NL children, failures
//! that halt the caller, the recursion limit, and the root frame popped at the end.

use serde_json::{Value as Json, json};

use crate::common::{Project, journal_events};
use crate::mcp::client::{Client, handle};

#[test]
fn automatic_nesting_returns_to_the_caller() {
    let project = Project::new();
    project.script(
        "parent",
        "Parent.",
        Some("def execute(request):\n    auto('echo before')\n    r = call_script('child', request = 'x')\n    auto('echo after ' + str(r.success))\n"),
    );
    project.script(
        "child",
        "Child.",
        Some("def execute(request):\n    a = llm('child asks ' + request, expects = ['answer'])\n    auto('echo got ' + a.outputs['answer'])\n"),
    );
    let run = project.run(&["run", "parent"], "42\n");
    run.expect_code(0);
    let out = &run.stdout;
    for needle in [
        "▶ parent[0] $ echo before",
        "→ parent[1] > child",
        "── llm step parent[1] > child[0] ──\nchild asks x",
        "▶ parent[1] > child[1] $ echo got 42",
        "← parent[1] > child ended",
        "▶ parent[2] $ echo after True",
    ] {
        assert!(out.contains(needle), "`{needle}` missing:\n{out}");
    }
    // The child's result is a step of the parent, and both frames were popped.
    let events = journal_events(&project);
    let of = |kind: &str| -> Vec<&Json> { events.iter().filter(|e| e["event"] == kind).collect() };
    let pops: Vec<(&Json, &Json)> = of("pop")
        .into_iter()
        .map(|p| (&p["depth"], &p["outcome"]))
        .collect();
    assert_eq!(
        pops,
        [
            (&json!(1), &json!("completed")),
            (&json!(0), &json!("completed"))
        ]
    );
    assert!(
        of("step")
            .iter()
            .any(|s| s["depth"] == 0 && s["index"] == 1 && s["result"]["success"] == true),
        "{events:#?}"
    );
}

/// A script started inside a run whose step is pending (`start` with `parent`) nests under
/// it; when it ends the parent's pending step comes back unchanged, and when the parent
/// ends its root frame is popped.
#[tokio::test]
async fn manual_nesting_shows_the_parent_step_again() {
    let project = Project::new();
    project.script(
        "outer",
        "Outer.",
        Some("def execute(request):\n    llm('outer step', expects = {'x': 'a value'})\n"),
    );
    project.script(
        "inner",
        "Inner.",
        Some("def execute(request):\n    llm('inner step')\n"),
    );
    let client = Client::start(&project, &[]).await;
    let first = client.call("start", json!({"name": "outer"})).await.ok();
    insta::assert_snapshot!("manual_nesting_outer", project.scrub(&first));
    let nested = client
        .call("start", json!({"name": "inner", "parent": handle(&first)}))
        .await
        .ok();
    insta::assert_snapshot!("manual_nesting_inner", project.scrub(&nested));
    let back = client.continue_with(json!({})).await.ok();
    insta::assert_snapshot!("manual_nesting_back", project.scrub(&back));
    let done = client.continue_with(json!({"x": 1})).await.ok();
    insta::assert_snapshot!("manual_nesting_done", project.scrub(&done));
    let events = journal_events(&project);
    let last = events.last().expect("events");
    assert_eq!(
        (&last["event"], &last["depth"], &last["outcome"]),
        (&json!("pop"), &json!(0), &json!("completed")),
        "the root frame is popped when it ends"
    );
}

/// An NL script called from a compiled one is pending as instructions; it is finished by
/// hand (`finish_nl_script`), not with outputs.
#[tokio::test]
async fn an_nl_child_is_finished_by_hand() {
    let project = Project::new();
    project.script("caller", "Caller.", Some("def execute(request):\n    call_script('notes', 'about cats')\n    auto('echo done')\n"));
    project.script("notes", "Write notes $ARGUMENTS.", None);
    let client = Client::start(&project, &[]).await;
    let pending = client.call("start", json!({"name": "caller"})).await.ok();
    insta::assert_snapshot!("nl_child_pending", project.scrub(&pending));
    let wrong = client.continue_with(json!({})).await.err();
    insta::assert_snapshot!("nl_child_wrong_call", project.scrub(&wrong));
    let done = client.call("finish_nl_script", json!({})).await.ok();
    insta::assert_snapshot!("nl_child_finished", project.scrub(&done));
}

#[test]
fn a_failing_child_halts_its_parent_with_the_failure_shown() {
    let project = Project::new();
    project.script(
        "boss",
        "Boss: do the work, then report.",
        Some("def execute(request):\n    call_script('worker')\n    auto('echo never')\n"),
    );
    project.script(
        "worker",
        "Worker.",
        Some("def execute(request):\n    auto('echo trying; exit 4')\n"),
    );
    let run = project.run(&["run", "boss"], "\n");
    run.expect_code(1);
    let out = &run.stdout;
    assert!(out.contains("✗ boss[0] > worker ended"), "{out}");
    assert!(
        out.contains("── boss failed; finish it by hand ──\nWhat failed:\nstep boss[0] `call worker` failed: step boss[0] > worker[0] `$ echo trying; exit 4` failed: exited with code 4"),
        "{out}"
    );
    assert!(out.contains("Boss: do the work, then report."), "{out}");
    assert!(!out.contains("echo never"), "{out}");
}

#[test]
fn allow_failure_hands_a_failed_child_to_the_parent() {
    let project = Project::new();
    project.script(
        "boss",
        "Boss.",
        Some("def execute(request):\n    r = call_script('worker', allow_failure = True)\n    auto('echo child success=' + str(r.success))\n"),
    );
    project.script(
        "worker",
        "Worker.",
        Some("def execute(request):\n    fail('no can do')\n"),
    );
    mekara_snapshot!(project, project.run(&["run", "boss"], ""));
}

#[test]
fn recursion_stops_at_the_depth_limit() {
    let project = Project::new();
    project.script(
        "loop",
        "Loop.",
        Some("def execute(request):\n    call_script('loop')\n"),
    );
    mekara_snapshot!(project, project.run(&["run", "loop"], "\n"));
}

#[test]
fn a_missing_child_fails_the_call_with_suggestions() {
    let project = Project::new();
    project.script(
        "caller",
        "Caller.",
        Some("def execute(request):\n    call_script('test/randon')\n"),
    );
    mekara_snapshot!(project, project.run(&["run", "caller"], "\n"));
}
