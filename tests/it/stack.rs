//! The execution stack (DESIGN §4): automatic and manual nesting, NL children, failures
//! that halt the caller, the recursion limit, and the root frame popped at the end.

use crate::common::Project;
use mekara::engine::journal::{self, Event, Outcome};
use mekara::engine::{EngineError, Pending, Quiet};
use serde_json::{Map, Value as Json};

fn events(project: &Project, id: &str) -> Vec<Event> {
    let path = project.root().join(format!(".mekara/runs/{id}.jsonl"));
    let bytes = std::fs::read(&path).expect("journal");
    journal::parse(&path, &bytes).expect("journal").events
}

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
    let id = &project.run_ids()[0];
    let events = events(&project, id);
    let pops: Vec<(usize, Outcome)> = events
        .iter()
        .filter_map(|e| match e {
            Event::Pop(p) => Some((p.depth, p.outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(pops, vec![(1, Outcome::Completed), (0, Outcome::Completed)]);
    assert!(events.iter().any(|e| matches!(e, Event::Step(s) if s.depth == 0 && s.record.index == 1 && s.record.result.success)));
}

#[test]
fn manual_nesting_shows_the_parent_step_again() {
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
    let mut ex = project.executor();
    let dir = project.root();
    let first = ex.start("outer", "", &dir, &Quiet).expect("start outer");
    assert!(
        matches!(&first, Pending::Llm { path, prompt, .. } if path == "outer[0]" && prompt == "outer step")
    );
    let nested = ex.start("inner", "", &dir, &Quiet).expect("start inner");
    assert!(
        matches!(&nested, Pending::Llm { path, prompt, .. } if path == "outer[0] > inner[0]" && prompt == "inner step")
    );
    let back = ex.continue_llm(Map::new(), &Quiet).expect("finish inner");
    assert_eq!(
        back, first,
        "the parent's pending step comes back unchanged"
    );
    let mut outputs = Map::new();
    outputs.insert("x".into(), Json::from(1));
    let done = ex.continue_llm(outputs, &Quiet).expect("finish outer");
    assert!(matches!(
        done,
        Pending::Finished {
            outcome: Outcome::Completed,
            fell_back: false,
            ..
        }
    ));
    assert!(
        ex.frames().is_empty(),
        "the root frame is popped when it ends"
    );
}

#[test]
fn an_nl_child_is_finished_by_hand() {
    let project = Project::new();
    project.script("caller", "Caller.", Some("def execute(request):\n    call_script('notes', 'about cats')\n    auto('echo done')\n"));
    project.script("notes", "Write notes $ARGUMENTS.", None);
    let mut ex = project.executor();
    let pending = ex
        .start("caller", "", &project.root(), &Quiet)
        .expect("start");
    assert_eq!(
        pending,
        Pending::Nl {
            path: "caller[0] > notes[0]".into(),
            instructions: "Write notes about cats.".into()
        }
    );
    let err = ex
        .continue_llm(Map::new(), &Quiet)
        .expect_err("an NL script is pending");
    assert!(matches!(err, EngineError::WrongCall { .. }), "{err}");
    let done = ex.finish_nl(&Quiet).expect("finish");
    assert!(
        matches!(
            done,
            Pending::Finished {
                outcome: Outcome::Completed,
                ..
            }
        ),
        "{done:?}"
    );
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
    let run = project.run(&["run", "boss"], "");
    run.expect_code(0);
    assert!(
        run.stdout.contains("$ echo child success=False"),
        "{}",
        run.stdout
    );
}

#[test]
fn recursion_stops_at_the_depth_limit() {
    let project = Project::new();
    project.script(
        "loop",
        "Loop.",
        Some("def execute(request):\n    call_script('loop')\n"),
    );
    let run = project.run(&["run", "loop"], "\n");
    run.expect_code(1);
    assert!(
        run.stdout.contains("scripts are nested 16 deep"),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("the limit is 16"), "{}", run.stdout);
}

#[test]
fn a_missing_child_fails_the_call_with_suggestions() {
    let project = Project::new();
    project.script(
        "caller",
        "Caller.",
        Some("def execute(request):\n    call_script('test/randon')\n"),
    );
    let run = project.run(&["run", "caller"], "\n");
    run.expect_code(1);
    assert!(
        run.stdout
            .contains("script `test/randon` not found; did you mean `test:random`?"),
        "{}",
        run.stdout
    );
}
