//! The Starlark step builtins (`auto`, `llm`, `call_script`, and Starlark's own `fail`),
//! `print` and `json`, the evaluation limits, and how script errors are reported: through
//! the real binary (`mekara run`, `mekara check`) on compiled project scripts, and, where
//! the terminal cannot make the call, through `mekara mcp`.

use serde_json::json;

use crate::common::{Project, Run};
use crate::mcp::client::Client;

/// A project with one compiled script `name` (and its NL file `nl`).
fn project_with(name: &str, nl: &str, star: &str) -> Project {
    let project = Project::new();
    project.script(name, nl, Some(star));
    project
}

/// The "What failed" part of a fallback in `mekara run`'s transcript.
pub(crate) fn what_failed(stdout: &str) -> &str {
    let start = stdout
        .find("What failed:\n")
        .unwrap_or_else(|| panic!("no fallback in:\n{stdout}"))
        + "What failed:\n".len();
    let end = stdout[start..]
        .find("\n\nThe script's instructions")
        .map_or(stdout.len(), |e| start + e);
    &stdout[start..end]
}

// ── auto: function form ─────────────────────────────────────────────────────────────────

#[test]
fn auto_function_returns_its_value_output_and_success() {
    let project = project_with(
        "fn",
        "Call a function.\n",
        r#"
def f(a, b):
    print("f got", a, b)
    print("and a second line")
    return {"dict": {"k": "v"}, "list": [1, "two", [3.5]], "int": a, "float": 2.5, "str": b, "none": None}

def execute(request):
    r = auto(f, {"a": 1, "b": "x"})
    expected = {"dict": {"k": "v"}, "list": [1, "two", [3.5]], "int": 1, "float": 2.5, "str": "x", "none": None}
    if r.value != expected:
        fail("value is %r" % (r.value,))
    types = ",".join([type(r.value[k]) for k in ["dict", "list", "int", "float", "str", "none"]])
    llm("success=%s\ntypes=%s\noutput=%r" % (r.success, types, r.output))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "fn"], "\n"));
    // what `f` printed is streamed under its step, and is the step's `.output`
}

#[test]
fn auto_function_round_trips_each_json_type_through_kwargs_and_value() {
    let project = project_with(
        "echo",
        "Echo values.\n",
        r#"
def echo(v):
    return v

def execute(request):
    bad = []
    for v in [{"k": [1, None]}, [1, "two"], 7, -3, 2.5, 0.1, "s", "", None, True, 9223372036854775808]:
        r = auto(echo, {"v": v})
        if r.value != v or type(r.value) != type(v):
            bad.append("%r came back as %r" % (v, r.value))
    llm("round trip: " + ("; ".join(bad) or "ok"))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "echo"], "\n"));
}

#[test]
fn auto_function_that_fails_makes_the_script_fall_back_with_its_message() {
    let project = project_with(
        "boom",
        "Explode.\n",
        r#"
def boom():
    print("about to fail")
    fail("boom")

def execute(request):
    auto(boom)
    auto("echo never reached")
"#,
    );
    let run = mekara_snapshot!(project, project.run(&["run", "boom"], "\n"));
    let failed = what_failed(&run.stdout);
    assert!(
        failed.starts_with("step boom[0] `boom({})` failed:"),
        "{failed}"
    );
    assert!(!run.stdout.contains("never reached"), "{}", run.stdout);
}

#[test]
fn auto_function_failure_with_allow_failure_is_returned_to_the_script() {
    let project = project_with(
        "boom",
        "Explode gently.\n",
        r#"
def boom():
    print("about to fail")
    fail("boom")

def execute(request):
    r = auto(boom, allow_failure = True)
    llm("success=%s value=%s boom_in_error=%s output=%r" % (r.success, r.value, "boom" in r.error, r.output))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "boom"], "\n"));
}

#[test]
fn auto_inside_a_function_step_is_refused() {
    let project = project_with(
        "inner",
        "Nest steps.\n",
        r#"
def sneaky():
    auto("echo inner step ran")

def execute(request):
    auto(sneaky)
"#,
    );
    let run = mekara_snapshot!(project, project.run(&["run", "inner"], "\n"));
    assert!(!run.stdout.contains("│ inner step ran"), "{}", run.stdout);
}

#[test]
fn auto_function_kwargs_that_are_not_a_dict_are_refused() {
    let project = project_with(
        "kw",
        "Pass a list.\n",
        r"
def f(a):
    return a

def execute(request):
    auto(f, [1, 2])
",
    );
    let run = mekara_snapshot!(project, project.run(&["run", "kw"], "\n"));
    assert!(
        !run.stdout.contains("▶ kw[0]"),
        "no step may run: {}",
        run.stdout
    );
}

// ── auto: shell form ────────────────────────────────────────────────────────────────────

#[test]
fn auto_shell_returns_success_exit_code_and_output() {
    let project = project_with(
        "sh",
        "Run a command.\n",
        r#"
def execute(request):
    r = auto("echo out; echo err >&2; exit 3", allow_failure = True)
    llm("success=%s exit_code=%s output=%r" % (r.success, r.exit_code, r.output))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "sh"], "\n"));
}

// ── llm ─────────────────────────────────────────────────────────────────────────────────

#[test]
fn llm_expects_dict_asks_each_output_with_its_description() {
    let project = project_with(
        "ask",
        "Ask.\n",
        r#"
def execute(request):
    a = llm("Pick a colour\nand a size.", expects = {"colour": "the colour you pick", "size": "a number"})
    llm("outputs=%s types=%s,%s" % (json.encode(a.outputs), type(a.outputs["colour"]), type(a.outputs["size"])))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "ask"], "red\n42\n\n"));
    // piped answers are strings, even when they look like numbers
}

#[test]
fn llm_expects_list_asks_each_name() {
    let project = project_with(
        "ask",
        "Ask.\n",
        r#"
def execute(request):
    a = llm("Name two animals.", expects = ["first", "second"])
    llm("outputs=" + json.encode(a.outputs))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "ask"], "cat\ndog\n\n"));
}

#[test]
fn llm_asks_outputs_in_expects_order() {
    let project = project_with(
        "order",
        "Ask in order.\n",
        r#"
def execute(request):
    a = llm("Dict order.", expects = {"zeta": "", "alpha": ""})
    b = llm("List order.", expects = ["zz", "aa"])
    llm("outputs=" + json.encode([a.outputs, b.outputs]))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "order"], "1\n2\n3\n4\n\n"));
}

/// Answers may end in `\r\n`, and the last one may lack its line end.
#[test]
fn piped_answers_may_end_in_crlf_or_in_nothing() {
    let project = project_with(
        "ask",
        "Ask.\n",
        r#"
def show(outputs):
    print(json.encode(outputs))

def execute(request):
    a = llm("Three things.", expects = ["one", "two", "three"])
    auto(show, {"outputs": a.outputs})
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "ask"], "red\r\ngreen\nblue"));
}

#[test]
fn llm_without_expects_reads_one_enter_line() {
    let project = project_with(
        "enter",
        "Press on.\n",
        r#"
def execute(request):
    a = llm("Just press Enter.")
    b = llm("Then answer.", expects = ["x"])
    llm("outputs=" + json.encode([a.outputs, b.outputs]))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "enter"], "\nsecond\n\n"));
}

// ── call_script ─────────────────────────────────────────────────────────────────────────

#[test]
fn call_script_runs_a_compiled_child() {
    let project = project_with(
        "parent",
        "Call the child.\n",
        r#"
def execute(request):
    r = call_script("child", "one two")
    llm("child success=%s error=%s" % (r.success, r.error))
"#,
    );
    project.script(
        "child",
        "The child.\n",
        Some("def execute(request):\n    auto(\"echo child got \" + request)\n"),
    );
    mekara_snapshot!(project, project.run(&["run", "parent"], "\n"));
}

#[test]
fn call_script_hands_over_an_nl_child_with_its_arguments() {
    let project = project_with(
        "parent",
        "Call the child.\n",
        r#"
def execute(request):
    r = call_script("handwork", "the fern and the ivy")
    llm("child success=%s error=%s" % (r.success, r.error))
"#,
    );
    project.script(
        "handwork",
        "---\ndescription: water plants\n---\nWater $ARGUMENTS, then rest.\n",
        None,
    );
    mekara_snapshot!(project, project.run(&["run", "parent"], "\n\n"));
}

#[test]
fn call_script_working_dir_is_where_the_child_runs() {
    let project = project_with(
        "parent",
        "Call the child elsewhere.\n",
        r#"
def execute(request):
    call_script("child", working_dir = "sub/dir")
"#,
    );
    project.script(
        "child",
        "The child.\n",
        Some("def execute(request):\n    auto(\"pwd\")\n"),
    );
    project.write("sub/dir/.keep", "");
    let run = project.run(&["run", "parent"], "");
    run.expect_code(0);
    let pwd = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("  │ "))
        .unwrap_or_else(|| panic!("no output of pwd:\n{}", run.stdout));
    let expected = project
        .root()
        .join("sub/dir")
        .canonicalize()
        .expect("canonicalize");
    assert_eq!(
        std::path::Path::new(pwd)
            .canonicalize()
            .expect("canonicalize pwd"),
        expected
    );
}

// ── fail, json, print ───────────────────────────────────────────────────────────────────

/// `fail()` in `execute` is the script stopping itself (issue 28): the run ends as stopped
/// by the script, with the message, and does not fall back to the NL instructions.
#[test]
fn fail_in_execute_stops_the_run_with_its_message() {
    let project = project_with(
        "stop",
        "Stop early.\n",
        "def execute(request):\n    auto(\"echo before\")\n    fail(\"stop here:\", request)\n    auto(\"echo after\")\n",
    );
    let run = mekara_snapshot!(project, project.run(&["run", "stop", "now"], "\n"));
    assert!(!run.stdout.contains("finish it by hand"), "{}", run.stdout);
    assert!(!run.stdout.contains("  │ after\n"), "{}", run.stdout);
}

#[test]
fn json_encode_and_decode_are_available() {
    let project = project_with(
        "js",
        "Use json.\n",
        r#"
def execute(request):
    encoded = json.encode({"b": 1, "a": [1.5, None, True, "s"]})
    decoded = json.decode('{"x": [1, 2.5, null, "s"], "y": {"z": false}}')
    llm("encoded=%s\ndecoded=%r" % (encoded, decoded))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "js"], "\n"));
}

/// Regression (the first hour of a real user): `print()` in `execute` showed nothing in
/// `mekara run`; it went to a log nobody sees without `MEKARA_LOG=info`. It shows in the
/// transcript, once, though `execute` is evaluated again from the top after the llm step.
/// A print while the module loads still goes to the log, not to the transcript.
#[test]
fn print_in_execute_shows_in_the_terminal_once() {
    let project = project_with(
        "printer",
        "Print things.\n",
        r#"
print("printed while loading")

def execute(request):
    print("starting with " + request)
    auto("echo a step")
    print("before the question")
    g = llm("Say a word.", expects = ["word"])
    print("the word is " + g.outputs["word"])
"#,
    );
    let run = mekara_snapshot!(
        project,
        crate::common::run_with_stdin(project.command(&["run", "printer", "arg"]), "hello\n")
    );
    assert!(!run.stdout.contains("while loading"), "{}", run.stdout);
}

// ── errors at load and at run time ──────────────────────────────────────────────────────

#[test]
fn step_builtins_at_module_top_level_are_refused_by_check() {
    let project = Project::new();
    project.script(
        "top-auto",
        "Top.\n",
        Some("r = auto(\"echo at load\")\n\ndef execute(request):\n    pass\n"),
    );
    project.script(
        "top-llm",
        "Top.\n",
        Some("r = llm(\"hello\")\n\ndef execute(request):\n    pass\n"),
    );
    project.script(
        "top-call",
        "Top.\n",
        Some("r = call_script(\"top-llm\")\n\ndef execute(request):\n    pass\n"),
    );
    mekara_snapshot!(
        project,
        project.run(&["check", "top-auto", "top-llm", "top-call"], "")
    );
    // The snapshot pins each error with its file and line.
    let one = project.run(&["check", "top-auto"], "");
    one.expect_code(1);
    insta::assert_snapshot!("check_top_level_auto", project.scrub(&one.stdout));
}

#[test]
fn check_reports_a_syntax_error_with_its_location() {
    let project = project_with(
        "syn",
        "Broken.\n",
        "def execute(request):\n    x = = 1\n    auto(\"echo\")\n",
    );
    let run = project.run(&["check", "syn"], "");
    run.expect_code(1);
    insta::assert_snapshot!("check_syntax_error", project.scrub(&run.stdout));
}

#[test]
/// Regression: starlark 0.14 put this error at `1:1` with an empty snippet.
fn check_reports_an_unclosed_bracket_at_the_end_of_the_file() {
    let project = project_with("syn", "Broken.\n", "def execute(request):\n    x = [1,\n");
    let run = project.run(&["check", "syn"], "");
    run.expect_code(1);
    insta::assert_snapshot!("check_unclosed_at_end_of_file", project.scrub(&run.stdout));
}

#[test]
fn check_reports_an_undefined_name_with_its_location() {
    let project = project_with(
        "undef",
        "Broken.\n",
        "def execute(request):\n    auto(\"echo \" + nowhere)\n",
    );
    let run = project.run(&["check", "undef"], "");
    run.expect_code(1);
    insta::assert_snapshot!("check_undefined_name", project.scrub(&run.stdout));
}

#[test]
fn script_without_execute_is_reported_by_check_and_run() {
    let project = project_with(
        "noexec",
        "Nothing to execute.\n",
        "def run(request):\n    pass\n",
    );
    let check = project.run(&["check", "noexec"], "");
    check.expect_code(1);
    insta::assert_snapshot!("check_no_execute", project.scrub(&check.stdout));
    let run = project.run(&["run", "noexec"], "\n");
    run.expect_code(1);
    assert!(
        what_failed(&run.stdout).starts_with("error: the script defines no `execute` function\n"),
        "{}",
        run.stdout
    );
}

/// Regression (the first hour of a real user): `mekara check` passed a misspelled keyword,
/// which failed on the script's first run.
#[test]
fn check_finds_a_misspelled_keyword_and_names_the_one_meant() {
    let project = project_with(
        "typo",
        "Say hello.\n",
        "def execute(request):\n    auto(\"echo hi\", contxt = \"Say hello\")\n    say(mesage = \"hi\")\n\ndef say(message):\n    print(message)\n",
    );
    mekara_snapshot!(project, project.command(&["check", "typo"]));
    // Running it is still refused, by the call itself.
    mekara_snapshot!(project, project.run(&["run", "typo"], "\n"));
}

/// Regression (the first hour of a real user): `mekara check` passed arguments of the wrong
/// type to the step builtins.
#[test]
fn check_finds_arguments_of_the_wrong_type() {
    let project = project_with(
        "types",
        "Do it.\n",
        "def execute(request):\n    auto(42)\n    llm(\"x\", expects = 5)\n    auto(\"x\", timeout = \"5\")\n",
    );
    mekara_snapshot!(project, project.command(&["check", "types"]));
}

/// The typechecker refuses no correct call of the builtins.
#[test]
fn check_passes_every_form_of_the_builtins() {
    let project = project_with(
        "every",
        "Do it.\n",
        r#"def execute(request, extra = 1, *, flag = False, **rest):
    r = auto("echo 1", context = "c", working_dir = "sub", timeout = 5, env = {"A": "b"}, allow_failure = True)
    n = int(r.output.strip()) + r.exit_code
    auto("true", timeout = 2.5)
    auto(say, {"message": str(n)}, context = "say")
    auto(say, None, allow_failure = False)
    g = llm("x", expects = {"a": "the a"})
    llm("y", expects = ["a", "b"])
    llm("z", expects = None)
    print(g.outputs["a"])
    mcp("server", "tool", {"a": 1}, context = "c", timeout = 3, allow_failure = True)
    mcp("server", "tool")
    call_script("other", "args", working_dir = "/tmp", allow_failure = True)
    call_script("other", request = str(n))

def say(message = "hi"):
    print(message)
"#,
    );
    // The server and the script the steps name are there (`check` looks for both).
    project.write(
        ".mcp.json",
        r#"{"mcpServers": {"server": {"command": "true"}}}"#,
    );
    project.script("other", "Another.\n", None);
    let run = project.run(&["check", "every"], "");
    run.expect_code(0);
}

/// Regression (the first hour of a real user): `def execute():` and `def execute(a, b):`
/// passed `mekara check` and failed on the first run.
#[test]
fn check_and_run_refuse_an_execute_that_cannot_take_the_arguments() {
    let project = Project::new();
    project.script("none", "Do it.\n", Some("def execute():\n    pass\n"));
    project.script("two", "Do it.\n", Some("def execute(a, b):\n    pass\n"));
    mekara_snapshot!(project, project.command(&["check", "none", "two"]));
    let run = project.run(&["run", "two"], "\n");
    run.expect_code(1);
    assert!(
        what_failed(&run.stdout).starts_with(
            "error: `execute` has 2 required parameters (`a`, `b`), but mekara passes it one\n"
        ),
        "{}",
        run.stdout
    );
}

#[test]
fn arguments_of_the_wrong_type_are_named_with_their_type() {
    for call in ["auto(42)", "auto(\"true\", env = [\"A=1\"])"] {
        let project = project_with(
            "bad",
            "Do it.\n",
            &format!("def execute(request):\n    {call}\n"),
        );
        let run = mekara_snapshot!(project, project.run(&["run", "bad"], "\n"));
        let failed = what_failed(&run.stdout);
        assert!(!failed.contains("<builtin>"), "{call}:\n{failed}");
    }
}

#[test]
fn runtime_error_in_execute_falls_back_with_its_location() {
    let project = project_with(
        "rt",
        "Parse a number.\n",
        "def execute(request):\n    auto(\"echo first\")\n    n = int(\"x\")\n    auto(\"echo unreachable\")\n",
    );
    let run = project.run(&["run", "rt"], "\n");
    run.expect_code(1);
    assert!(!run.stdout.contains("unreachable"), "{}", run.stdout);
    insta::assert_snapshot!("run_runtime_error", project.scrub(what_failed(&run.stdout)));
}

// ── limits ──────────────────────────────────────────────────────────────────────────────

const RUNAWAY: &str = "def execute(request):\n    for i in range(1000000000):\n        x = i\n";

/// `mekara ARGS` with the tick limit at `ticks` (`MEKARA_MAX_TICKS`): a debug build takes
/// minutes to count to the default 50 million.
fn run_with_ticks(project: &Project, args: &[&str], ticks: &str) -> Run {
    let mut command = project.command(args);
    command.env("MEKARA_MAX_TICKS", ticks);
    crate::common::run_with_stdin(command, "\n")
}

#[test]
#[cfg_attr(
    debug_assertions,
    ignore = "50 million ticks take minutes in a debug build (.ci/run runs it in release)"
)]
fn runaway_loop_is_stopped_by_the_tick_limit() {
    let project = project_with("loop", "Loop forever.\n", RUNAWAY);
    let run = project.run(&["run", "loop"], "\n");
    run.expect_code(1);
    assert!(
        what_failed(&run.stdout)
            .contains("Execution duration limit of 50000000 ticks has been exceeded"),
        "{}",
        run.stdout
    );
}

#[test]
fn runaway_loop_error_names_the_script_location() {
    let project = project_with("loop", "Loop forever.\n", RUNAWAY);
    let run = run_with_ticks(&project, &["run", "loop"], "1000000");
    run.expect_code(1);
    insta::assert_snapshot!("runaway_loop", project.scrub(what_failed(&run.stdout)));
}

#[test]
fn runaway_function_step_error_names_the_line_in_the_function() {
    let project = project_with(
        "spin",
        "Spin.\n",
        "def spin(n):\n    total = 0\n    for i in range(n):\n        total += 1\n    return total\n\ndef execute(request):\n    auto(\"true\")\n    auto(spin, {\"n\": 1000000000})\n",
    );
    let run = run_with_ticks(&project, &["run", "spin"], "1000000");
    run.expect_code(1);
    let failed = what_failed(&run.stdout);
    assert!(
        failed.contains("1000000 ticks has been exceeded") && failed.contains("spin.star:4:9"),
        "the limit is named at the statement in the loop:\n{}",
        run.stdout
    );
}

#[test]
fn a_tick_limit_that_is_not_a_number_is_said_and_the_default_holds() {
    let project = project_with(
        "one",
        "One step.\n",
        "def execute(request):\n    auto(\"true\")\n",
    );
    for bad in ["lots", "0", "-5"] {
        let run = run_with_ticks(&project, &["run", "one"], bad);
        run.expect_code(0);
        let said: Vec<&str> = run
            .stderr
            .lines()
            .filter(|line| line.contains("MEKARA_MAX_TICKS"))
            .map(|line| &line[line.find("MEKARA_MAX_TICKS").unwrap_or(0)..])
            .collect();
        assert_eq!(
            said,
            [format!(
                "MEKARA_MAX_TICKS=\"{bad}\" is not a number of ticks above 0: the limit is 50000000"
            )],
            "{}",
            run.stderr
        );
    }
}

// ── JSON fidelity of function steps ─────────────────────────────────────────────────────

#[test]
fn auto_function_value_keeps_dict_key_order() {
    let project = project_with(
        "order",
        "Keep order.\n",
        r#"
def f():
    return {"b": 1, "a": 2}

def execute(request):
    llm("keys=" + json.encode(list(auto(f).value.keys())))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "order"], "\n"));
}

#[test]
fn auto_function_round_trips_big_ints() {
    let project = project_with(
        "big",
        "Big numbers.\n",
        r#"
def echo(v):
    return v

def execute(request):
    v = 123456789012345678901234567890
    r = auto(echo, {"v": v})
    llm("back=%r type=%s" % (r.value, type(r.value)))
"#,
    );
    mekara_snapshot!(project, project.run(&["run", "big"], "\n"));
}

// ── the engine enforces llm outputs (through MCP) ────────────────────────────────────────

const PICK: &str = r#"
def execute(request):
    auto("echo ready")
    r = llm("Pick.", expects = {"colour": "a colour", "size": "a size"})
    auto("echo picked " + r.outputs["colour"] + " " + r.outputs["size"])
"#;

/// `pick` started over MCP: the client, the reply naming its pending llm step, and the run's
/// id.
async fn pick_started(project: &Project) -> (Client, String, String) {
    let client = Client::start(project, &[]).await;
    let pending = client.call("start", json!({"name": "pick"})).await.ok();
    let [id] = project.run_ids().try_into().expect("one run");
    (client, pending, id)
}

/// Checks that nothing was recorded since `journal` and `pick`'s llm step is still pending
/// (working it out again does not run `echo ready` again).
async fn assert_pick_unchanged(project: &Project, client: &Client, id: &str, journal: &str) {
    assert_eq!(project.journal(id), journal);
    let status = client.call("status", json!({})).await.ok();
    assert!(status.contains("llm step `pick[1]`"), "{status}");
    assert_eq!(project.journal(id), journal);
}

#[tokio::test]
async fn llm_outputs_that_do_not_match_expects_are_refused_and_the_step_stays_pending() {
    let project = project_with("pick", "Pick.\n", PICK);
    let (client, pending, id) = pick_started(&project).await;
    insta::assert_snapshot!("llm_outputs_pending", project.scrub(&pending));
    let journal = project.journal(&id);

    let refused = client
        .continue_with(json!({"colour": "red", "shape": "round"}))
        .await
        .err();
    insta::assert_snapshot!("llm_outputs_refused", project.scrub(&refused));
    assert_pick_unchanged(&project, &client, &id, &journal).await;

    let finished = client
        .continue_with(json!({"colour": "red", "size": "9"}))
        .await
        .ok();
    assert!(finished.contains("The script completed"), "{finished}");
    assert!(
        project.journal(&id).contains("picked red 9"),
        "{}",
        project.journal(&id)
    );
}

#[tokio::test]
async fn finish_nl_while_an_llm_step_is_pending_is_a_wrong_call() {
    let project = project_with("pick", "Pick.\n", PICK);
    let (client, _, id) = pick_started(&project).await;
    let journal = project.journal(&id);
    let refused = client.call("finish_nl_script", json!({})).await.err();
    insta::assert_snapshot!("finish_nl_while_llm_pending", project.scrub(&refused));
    assert_pick_unchanged(&project, &client, &id, &journal).await;
}

// ── divergence on resume ────────────────────────────────────────────────────────────────

#[test]
fn resume_after_the_script_changed_reports_the_divergent_step() {
    let before = "def execute(request):\n    auto(\"echo first\")\n    llm(\"Now answer.\", expects = [\"answer\"])\n";
    let project = project_with("div", "Diverge.\n", before);
    let first = project.run(&["run", "div"], "");
    first.expect_code(1);
    assert!(
        first
            .stdout
            .contains("stdin closed before the run finished"),
        "{}",
        first.stdout
    );
    let ids = project.run_ids();
    let [id] = ids.as_slice() else {
        panic!("one run expected, got {ids:?}")
    };
    let journal = project.journal(id);

    project.script(
        "div",
        "Diverge.\n",
        Some(&before.replace("echo first", "echo changed")),
    );
    let resumed = project.run(&["run", "--resume", id], "yes\n");
    resumed.expect_code(1);
    assert!(
        !resumed.stdout.contains("│ changed"),
        "the changed step must not run: {}",
        resumed.stdout
    );
    assert_eq!(
        project.journal(id),
        journal,
        "a refused resume leaves the journal as it was"
    );
    insta::assert_snapshot!("resume_diverged", project.scrub(&resumed.stderr));
}
