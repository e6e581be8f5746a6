//! The heap limit of a script against values that grow faster than starlark checks it
//! (issue 14): each stops at the statement that went past the limit, with its line, falls
//! back as any script failure does, and leaves the run resumable.

use crate::builtins::what_failed;
use crate::common::Project;

const LIMIT: &str = "Heap memory limit of 268435456 bytes exceeded";

/// Runs `execute` (its body) as script `grow` and checks that it stops with the heap limit
/// at `grow.star:LINE`, as a script failure: the fallback, exit 1.
fn stops_at_the_limit(body: &str, line: &str) {
    let project = Project::new();
    let star = format!(
        "def double(s):\n    for i in range(40):\n        s = s + s\n    return len(s)\n\ndef execute(request):\n{body}"
    );
    project.script("grow", "Grow.\n", Some(&star));
    let run = project.run(&["run", "grow"], "\n");
    run.expect_code(1);
    let failed = what_failed(&run.stdout);
    assert!(
        failed.contains(LIMIT) && failed.contains(&format!("grow.star:{line}")),
        "`{body}` stops at the heap limit, at line {line}:\n{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(!run.stderr.contains("bug in mekara"), "{}", run.stderr);
    // Regression (issue 15): a traceback header with no frame under it.
    assert!(
        !failed.contains("Traceback (most recent call last):\nerror"),
        "`{body}`: an empty traceback:\n{failed}"
    );
}

/// Regression (issue 15): the limit comes with no traceback frame worth showing, and the
/// fallback said "Traceback (most recent call last):" right before the error.
#[test]
fn the_heap_limit_is_told_without_an_empty_traceback() {
    let project = Project::new();
    project.script(
        "grow",
        "Grow.\n",
        Some("def execute(request):\n    s = \"x\"\n    for i in range(40):\n        s = s + s\n"),
    );
    let run = project.run(&["run", "grow"], "\n");
    run.expect_code(1);
    let failed = what_failed(&run.stdout);
    assert!(failed.starts_with(&format!("error: {LIMIT}")), "{failed}");
    assert!(!failed.contains("Traceback"), "{failed}");
}

#[test]
fn a_string_doubled_forty_times_stops_at_the_heap_limit_with_its_line() {
    // Regression: starlark checks its heap limit every thousand ticks; forty doublings
    // reached 4 GiB and a "len overflow" panic, reported as a bug in mekara.
    stops_at_the_limit(
        "    s = \"x\"\n    for i in range(40):\n        s = s + s\n",
        "9:9",
    );
}

#[test]
fn lists_grown_by_doubling_stop_at_the_heap_limit_with_their_line() {
    stops_at_the_limit(
        "    l = [1]\n    for i in range(40):\n        l = l + l\n",
        "9:9",
    );
    stops_at_the_limit(
        "    l = [1]\n    for i in range(40):\n        l.extend(l)\n",
        "9:9",
    );
    stops_at_the_limit(
        "    l = [\"x\" * 1000]\n    for i in range(40):\n        l = l * 2\n",
        "9:9",
    );
}

#[test]
fn a_function_step_that_doubles_a_string_stops_at_the_line_in_the_function() {
    stops_at_the_limit(
        "    auto(\"true\")\n    auto(double, {\"s\": \"x\"})\n",
        "3:9",
    );
    // Called as a plain function, not as a step.
    stops_at_the_limit("    double(\"x\")\n", "3:9");
}

#[test]
fn a_list_of_four_gib_is_the_heap_limit_not_a_bug() {
    // Regression: starlark asserts that a value is under 4 GiB before allocating it; the
    // panic was reported as a bug in mekara.
    stops_at_the_limit(
        "    n = len(request) + 2147483647\n    l = list(range(n))\n",
        "8:5",
    );
}

#[test]
fn a_constant_too_large_for_starlark_is_the_heap_limit_naming_the_file() {
    // starlark computes `list(range(2147483647))` while it compiles the file.
    let project = Project::new();
    project.script(
        "grow",
        "Grow.\n",
        Some("def execute(request):\n    l = list(range(2147483647))\n"),
    );
    let run = project.run(&["run", "grow"], "\n");
    run.expect_code(1);
    let failed = what_failed(&run.stdout);
    assert!(
        failed.contains(LIMIT) && failed.contains("grow.star"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}

#[test]
fn a_run_stopped_at_the_heap_limit_can_be_resumed_and_finished_by_hand() {
    let project = Project::new();
    project.script(
        "grow",
        "Grow.\n",
        Some("def execute(request):\n    auto(\"echo before\")\n    s = \"x\"\n    for i in range(40):\n        s = s + s\n"),
    );
    // stdin closed at the fallback: the run is saved.
    let first = project.run(&["run", "grow"], "");
    assert!(
        what_failed(&first.stdout).contains(LIMIT),
        "{}",
        first.stdout
    );
    let ids = project.run_ids();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let resumed = project.run(&["run", "--resume", &ids[0]], "\n");
    assert!(
        what_failed(&resumed.stdout).contains(LIMIT),
        "the resumed run falls back again, with the same error:\n{}\n{}",
        resumed.stdout,
        resumed.stderr
    );
    assert!(
        !resumed.stdout.contains("before\n"),
        "the shell step is not run again:\n{}",
        resumed.stdout
    );
    assert!(
        resumed.stdout.contains("completed") || resumed.stdout.contains("finished"),
        "{}",
        resumed.stdout
    );
}

/// Bodies of `execute` in [`grow_at_once`] that ask for more than the memory cap of an
/// evaluation (1 GiB: four times the heap limit) in one allocation, with the line and
/// column of the statement that does.
pub(crate) const AT_ONCE: [(&str, &str); 4] = [
    (
        "    n = len(request) + 2147483647\n    s = \"x\" * n\n",
        "6:5",
    ),
    (
        "    n = len(request) + 2147483647\n    l = [1] * n\n",
        "6:5",
    ),
    (
        "    s = \"x\" * (1000000 + len(request))\n    t = \"y\".join([s] * 2000)\n",
        "6:5",
    ),
    // In a function step: its own evaluation, the same cap.
    (
        "    auto(\"echo before\")\n    auto(grow, {\"n\": 2000000000})\n",
        "2:5",
    ),
];

/// The script `grow` of one of [`AT_ONCE`]: `grow(n)` makes a string of `n` bytes (at line
/// 2), and `execute` holds the body (from line 5).
pub(crate) fn grow_at_once(project: &Project, body: &str) {
    project.script(
        "grow",
        "Grow.\n",
        Some(&format!(
            "def grow(n):\n    return len(\"x\" * n)\n\ndef execute(request):\n{body}"
        )),
    );
}

#[test]
fn one_allocation_past_four_times_the_limit_fails_the_script_at_its_line_and_mekara_goes_on() {
    // Regression: starlark 0.14 cannot recover from a refused allocation, so mekara stopped
    // (exit 134) with every session it served. Scripts are now evaluated in a child process
    // (docs/design.md, "Memory of a script"): the child stops, and the parent makes its
    // message the script's failure.
    for (body, at) in AT_ONCE {
        let project = Project::new();
        grow_at_once(&project, body);
        let run = project.run(&["run", "grow"], "\n");
        run.expect_code(1);
        let failed = what_failed(&run.stdout);
        let where_ = format!("grow.star:{at}");
        assert!(
            failed
                .contains("bytes at once, past the memory cap of an evaluation (1073741824 bytes")
                && failed.contains(&where_),
            "`{body}` fails at {where_}, naming the cap:\n{}\n{}",
            run.stdout,
            run.stderr
        );
        assert!(!failed.contains("mekara stops"), "{failed}");
        assert!(!run.stderr.contains("bug in mekara"), "{}", run.stderr);
        let ids = project.run_ids();
        assert_eq!(ids.len(), 1, "the run is kept");
    }
}

/// Where the system bounds the evaluator child below the cap (Windows: the child's Job
/// Object; here `ulimit -v`, which the child inherits), an allocation it refuses fails the
/// script at its line, as the cap does, instead of stopping the child with the standard
/// library's bare "memory allocation failed" (an evaluation that stopped, not the script's
/// failure).
#[test]
fn an_allocation_the_system_refuses_under_the_cap_fails_the_script_at_its_line() {
    let project = Project::new();
    // A 400 MB string, then its copy into starlark's heap: 800 MB, under the 1 GiB cap.
    project.script(
        "grow",
        "Grow.\n",
        Some("def execute(request):\n    s = \"x\" * (400000000 + len(request))\n"),
    );
    let run = crate::common::run_with_stdin(
        project.shell("ulimit -v 700000 && exec mekara run grow"),
        "\n",
    );
    run.expect_code(1);
    let failed = what_failed(&run.stdout);
    assert!(
        failed.starts_with("error: a statement of the Starlark script asked for ")
            && failed.contains("bytes at once, which the system refused: the evaluation held ")
            && failed.contains("under its memory cap (1073741824 bytes), and the system gives the evaluator no more")
            && failed.contains("grow.star:2:5"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
    assert!(!failed.contains("mekara stops"), "{failed}");
    assert_eq!(project.run_ids().len(), 1, "the run is kept");
}

#[test]
fn a_run_failed_at_the_memory_cap_is_retried_with_the_fixed_script() {
    let project = Project::new();
    grow_at_once(&project, AT_ONCE[3].0);
    let first = project.run(&["run", "grow"], "");
    assert!(
        what_failed(&first.stdout).contains("past the memory cap"),
        "{}\n{}",
        first.stdout,
        first.stderr
    );
    let ids = project.run_ids();
    project.script(
        "grow",
        "Grow.\n",
        Some("def grow(n):\n    return n\n\ndef execute(request):\n    auto(\"echo before\")\n    auto(grow, {\"n\": 2000000000})\n    auto(\"echo fixed\")\n"),
    );
    let retried = project.run(&["run", "--resume", &ids[0], "--retry"], "\n");
    retried.expect_code(0);
    assert!(
        retried.stdout.contains("fixed"),
        "{}\n{}",
        retried.stdout,
        retried.stderr
    );
    assert!(
        !retried.stdout.contains("$ echo before"),
        "the step before the failure is not run again:\n{}",
        retried.stdout
    );
}

/// A frame job for `mekara __evaluate` whose script is `execute`'s body `body`, opened as a
/// parent of protocol 1 opens it.
fn frame_job(body: &str) -> String {
    opening(1, frame(body)).to_string()
}

/// A parent's first line: the protocol it speaks and `job`.
fn opening(protocol: u32, job: serde_json::Value) -> serde_json::Value {
    serde_json::json!({"protocol": protocol, "mekara": "9.9.9", "job": job})
}

/// The job of a frame whose script is `execute`'s body `body`.
fn frame(body: &str) -> serde_json::Value {
    serde_json::json!({"Frame": {
        "sources": {
            "origin": "job.star",
            "text": format!("def execute(request):\n{body}"),
            "helpers": {},
            "authored": ""
        },
        "path": "job",
        "request": "",
        "working_dir": "/",
        "steps": [],
        "printed": 0,
        "default_timeout": {"secs": 10, "nanos": 0},
        "limits": {"max_ticks": 1_000_000, "max_heap_bytes": 268_435_456, "max_call_depth": 200}
    }})
}

#[test]
fn the_evaluating_child_answers_its_parent_and_refuses_what_is_not_its_protocol() {
    let project = Project::new();
    let child =
        |stdin: &str| crate::common::run_with_stdin(project.command(&["__evaluate"]), stdin);
    // A job it can finish alone: how it ended, on one line.
    let done = child(&format!("{}\n", frame_job("    x = 1\n")));
    done.expect_code(0);
    let said: serde_json::Value =
        serde_json::from_str(done.stdout.trim()).expect("one line of JSON");
    assert_eq!(
        said["Finished"]["outcome"]["Evaluated"], "Completed",
        "{said}"
    );
    // A step: it asks the parent to run it, and stops when nobody answers.
    let asked = child(&format!("{}\n", frame_job("    auto(\"echo hi\")\n")));
    asked.expect_code(2);
    assert!(
        asked.stdout.contains(r#"{"Shell":{"command":"echo hi""#),
        "{}",
        asked.stdout
    );
    // ... or when the answer is not one.
    let wrong = child(&format!(
        "{}\n{{\"Ran\": 5}}\n",
        frame_job("    auto(\"echo hi\")\n")
    ));
    wrong.expect_code(2);
    for (input, what) in [
        ("", "nothing"),
        ("not json\n", "not JSON"),
        (
            "{\"protocol\": 1, \"job\": {\"Frame\": {}}}\n",
            "a job without its fields",
        ),
        (
            "{\"protocol\": 1, \"job\": {\"Run\": \"rm -rf /\"}}\n",
            "an unknown job",
        ),
        (&"x".repeat(10 << 20), "ten megabytes of one line"),
    ] {
        let run = child(input);
        run.expect_code(2);
        assert!(
            run.stderr.contains("is mekara's own") && !run.stderr.contains("panicked"),
            "{what}: {}",
            run.stderr
        );
        assert!(run.stdout.is_empty(), "{what}: {}", run.stdout);
    }
}

#[test]
fn an_evaluating_child_started_by_a_mekara_of_another_protocol_says_to_restart_the_server() {
    let project = Project::new();
    let child = |opening: serde_json::Value| {
        let run = crate::common::run_with_stdin(
            project.command(&["__evaluate"]),
            &format!("{opening}\n"),
        );
        run.expect_code(2);
        assert!(run.stdout.is_empty(), "{}", run.stdout);
        run.stderr
            .replace(env!("CARGO_PKG_VERSION"), "[version]")
            .trim()
            .to_string()
    };
    // A newer parent (or an older child: the same mismatch).
    insta::assert_snapshot!(child(opening(999, frame("    x = 1\n"))), @"error: this evaluator is mekara [version] (protocol 1) and was started by mekara 9.9.9 (protocol 999): mekara was upgraded or replaced under a server that is still running; restart the server (`mekara mcp`, `mekara serve` or `mekara ui`: restart your agent's session) so that it and its evaluator are the same mekara");
    // A parent from before the protocol had a version: its first line is the job itself.
    insta::assert_snapshot!(child(frame("    x = 1\n")), @"error: this evaluator is mekara [version] (protocol 1) and was started by an older mekara, without a protocol version: mekara was upgraded or replaced under a server that is still running; restart the server (`mekara mcp`, `mekara serve` or `mekara ui`: restart your agent's session) so that it and its evaluator are the same mekara");
}
