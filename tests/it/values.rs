//! Values that could poison a run (issue 14): numbers no script can hold (`1e400`) and values
//! nested too deep, at every door they come in by: `json.decode`, `json.encode`, a function
//! step's arguments and value, an MCP tool's structured content, a served tool's argument,
//! a timeout in a script, on the command line or in `.mekara/config.toml`. Each is refused
//! with a clear error before it reaches the journal, and the process (or the MCP session)
//! goes on. Also: big integers come back exactly when a run is resumed, and a panic ends
//! with exit code 2 and a message, never 101.

use serde_json::{Value as Json, json};

use crate::common::{Project, outside_client};
use crate::mcp::client::Client;

const NL: &str = "---\ndescription: Hostile values\n---\n1. Do it by hand.\n";

/// Helpers every hostile script shares: `f` returns its argument, `deep_list(n)` is a list
/// nested `n` deep, `deep_dict(n)` a dict nested `n` deep.
const HELPERS: &str = "
def f(v):
    return v

def deep_list(n):
    l = []
    for i in range(n - 1):
        l = [l]
    return l

def deep_dict(n):
    d = {}
    for i in range(n - 1):
        d = {\"a\": d}
    return d
";

/// A project with script `h` whose `execute` body is `body` (indented by 4).
fn hostile(body: &str) -> Project {
    let project = Project::new();
    project.script(
        "h",
        NL,
        Some(&format!("{HELPERS}\ndef execute(request):\n    {body}\n")),
    );
    project
}

/// Runs `h` in the terminal and returns stdout and stderr together, checking that it
/// failed (exit 1) with a Starlark error or failed step, not a crash.
fn run_fails(project: &Project) -> String {
    let run = project.run(&["run", "h"], "");
    run.expect_code(1);
    format!("{}{}", run.stdout, run.stderr)
}

/// Regression: `json.decode` of `1e400` panicked inside starlark (exit 101), and one that
/// reached a step was journaled and broke the run for good. It is a Starlark error with
/// its line; a whole number of any size decodes exactly (it used to become a float).
#[test]
fn json_decode_refuses_a_number_no_script_can_hold_and_keeps_big_integers_exact() {
    for text in [r#""1e400""#, r#""[1, {\"a\": -2.5E+999}]""#] {
        let project = hostile(&format!("auto(f, {{\"v\": json.decode({text})}})"));
        let out = run_fails(&project);
        // The number and the line it is on.
        insta::assert_snapshot!(project.scrub(&out));
        let [id] = project.run_ids().try_into().expect("one run");
        assert!(
            !project.journal(&id).contains(r#""event":"step""#),
            "no step was journaled"
        );
    }
    let big = "1234567890123456789012345678901234567890";
    let project = hostile(&format!(
        "x = json.decode(\"[{big}]\")[0]\n    print(type(x), x == {big}, x)"
    ));
    mekara_snapshot!(
        "big_integers_from_json_decode",
        project,
        project.command(&["run", "h"])
    )
    .expect_code(0);
}

/// The deep-nesting variants of one check: each fails naming the limit and where: the line
/// in `execute`, or the function step whose value it was.
const DEEP: &[(&str, &str, &str)] = &[
    (
        "print(len(json.encode(deep_list(150))))",
        "the value given to `json.encode` is nested more than 100 levels deep",
        "h.star:18:",
    ),
    (
        "auto(deep_dict, {\"n\": 300})",
        "the value a function step returns is nested more than 100 levels deep",
        "h[0]",
    ),
    (
        "auto(f, {\"v\": deep_list(100)})",
        "the dict of keyword arguments of a function step is nested more than 100 levels deep",
        "h.star:18:",
    ),
    (
        "json.decode(\"[\" * 101 + \"]\" * 101)",
        "the JSON given to `json.decode` is nested more than 100 levels deep",
        "h.star:18:",
    ),
    (
        "json.decode(\"[\" * 10000 + \"]\" * 10000)",
        "the JSON given to `json.decode` is nested too deep to read",
        "h.star:18:",
    ),
];

/// Regression: a value nested a few hundred levels deep overflowed the stack and aborted
/// the process (a function step returning a 300-deep dict in `mekara run`).
#[test]
fn values_nested_too_deep_are_script_errors_in_the_terminal() {
    for (i, (body, _, _)) in DEEP.iter().enumerate() {
        let project = hostile(body);
        let out = run_fails(&project);
        // The whole of what the person reads (the limit, and the line or step), pinned.
        insta::assert_snapshot!(format!("too_deep_in_the_terminal_{i}"), project.scrub(&out));
    }
    // Exactly at the limit goes through, and comes back whole.
    let project = hostile(
        "r = auto(f, {\"v\": deep_list(99)})\n    print(json.encode(r.value) == json.encode(deep_list(99)))",
    );
    mekara_snapshot!(
        "nested_at_the_limit",
        project,
        project.command(&["run", "h"])
    )
    .expect_code(0);
}

/// Regression: in `mekara mcp` a 150-deep `json.encode` overflowed the stack of the thread
/// that evaluates scripts, which took the whole server (and every session) down.
#[tokio::test]
async fn values_nested_too_deep_are_script_errors_and_the_server_keeps_answering() {
    let mut statuses = String::new();
    for (i, (body, _, _)) in DEEP.iter().enumerate() {
        let project = hostile(body);
        let client = Client::start(&project, &[]).await;
        let text = client.call("start", json!({"name": "h"})).await.ok();
        insta::assert_snapshot!(format!("too_deep_over_mcp_{i}"), project.scrub(&text));
        let status = client.call("status", json!({})).await.ok();
        statuses.push_str(&format!("{body}\n{}\n", project.scrub(&status)));
    }
    // The server answers after each.
    insta::assert_snapshot!("status_after_values_nested_too_deep", statuses);
}

/// Regression: an llm output nested too deep was journaled (or crashed the server); it is
/// refused like an unrepresentable number, and the step stays pending.
#[tokio::test]
async fn an_llm_output_nested_too_deep_is_refused_before_the_journal() {
    let project = hostile("r = llm(\"Give n\", expects = [\"n\"])\n    print(r.outputs)");
    let client = Client::start(&project, &[]).await;
    client.call("start", json!({"name": "h"})).await.ok();
    let deep: Json = serde_json::from_str(&format!("{}{}", "[".repeat(101), "]".repeat(101)))
        .expect("101 deep parses");
    let text = client
        .call("continue_compiled_script", json!({"outputs": {"n": deep}}))
        .await
        .err();
    insta::assert_snapshot!(project.scrub(&text));
    let [id] = project.run_ids().try_into().expect("one run");
    assert!(
        !project.journal(&id).contains("[[[["),
        "nothing was journaled"
    );
    let done = client
        .call("continue_compiled_script", json!({"outputs": {"n": [[1]]}}))
        .await
        .ok();
    insta::assert_snapshot!("done_after_an_output_nested_too_deep", project.scrub(&done));
}

/// Regression: a served tool's argument holding `1e400` reached the function (as text,
/// silently); it is a tool error naming the argument, and the server goes on.
#[tokio::test]
async fn a_served_tool_refuses_an_argument_no_script_can_hold() {
    let project = Project::new();
    project.write("tools.star", "def echo(v):\n    return v\n");
    let client =
        Client::start_command(&project, &project.root(), &["serve", "tools.star"], &[]).await;
    let mut seen = String::new();
    for raw in [
        r#"{"v": 1e400}"#,
        r#"{"v": {"a": [2, -1E+999]}}"#,
        &format!(r#"{{"v": {}{}}}"#, "[".repeat(101), "]".repeat(101)),
    ] {
        let arguments: Json = serde_json::from_str(raw).expect("json");
        let text = client.call("echo", arguments).await.err();
        seen.push_str(&format!("{}\n{text}\n\n", &raw[..raw.len().min(20)]));
    }
    insta::assert_snapshot!(seen);
    let big = "1234567890123456789012345678901234567890";
    let arguments: Json = serde_json::from_str(&format!(r#"{{"v": {big}}}"#)).expect("json");
    let text = client.call("echo", arguments).await.ok();
    insta::assert_snapshot!("a_big_integer_served", text);
}

/// A project whose `.mcp.json` declares `raw`, a server whose tool `emit` sends `structured`
/// (raw JSON text) as its structured content.
fn raw_server_project(structured: &str) -> Project {
    let python = outside_client(
        "py/bin/python",
        "the Python MCP SDK's virtualenv",
        "tests/python/install.sh",
    );
    let server = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python/raw_structured_server.py");
    let project = hostile(
        "r = mcp(\"raw\", \"emit\", {}, allow_failure = True)\n    print(\"success:\", r.success, \"structured:\", r.structured)\n    print(\"error:\", r.error)",
    );
    project.write(
        ".mcp.json",
        &json!({"mcpServers": {"raw": {"command": python, "args": [server, structured]}}})
            .to_string(),
    );
    project
}

/// Regression: an MCP tool's structured content holding `1e400` was journaled, then broke
/// every later evaluation of the run. The step fails, saying why, and nothing of the value
/// is journaled; a big whole number goes through exactly.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the Python virtualenv")]
fn structured_content_no_script_can_hold_is_refused_before_the_journal() {
    let mut seen = String::new();
    for structured in [
        r#"{"n": 1e400}"#,
        r#"{"a": [1, {"b": -3e999}]}"#,
        &format!(r#"{{"n": {}{}}}"#, "[".repeat(100), "]".repeat(100)),
    ] {
        let project = raw_server_project(structured);
        let run = project.run(&["run", "h"], "");
        run.expect_code(0);
        seen.push_str(&format!(
            "{}\n{}\n",
            &structured[..structured.len().min(30)],
            project.scrub(&run.stdout)
        ));
        let [id] = project.run_ids().try_into().expect("one run");
        let journal = project.journal_events_text(&id);
        assert!(
            !journal.contains("e999") && !journal.contains("e400") && !journal.contains("[[[["),
            "{journal}"
        );
    }
    insta::assert_snapshot!(seen);
    let big = "1234567890123456789012345678901234567890";
    let project = raw_server_project(&format!(r#"{{"n": {big}}}"#));
    let run = project.run(&["run", "h"], "");
    run.expect_code(0);
    insta::assert_snapshot!("a_big_integer_structured", project.scrub(&run.stdout));
}

/// Regression (issue 31): an MCP tool's structured content was kept however big. Past the
/// cap every value has (8 MiB of JSON) the step fails with the cap's message, and nothing
/// of the value is journaled.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the Python virtualenv")]
fn structured_content_past_the_cap_is_refused_before_the_journal() {
    let project = Project::new();
    let file = project.root().join("big.json");
    std::fs::write(&file, json!({"big": "y".repeat(9 << 20)}).to_string()).expect("written");
    let project = raw_server_project(&format!("@{}", file.display()));
    let run = project.run(&["run", "h"], "");
    run.expect_code(0);
    assert!(run.stdout.len() < 3000, "{}", &run.stdout[..3000]);
    insta::assert_snapshot!(
        "structured_content_past_the_cap",
        project.scrub(&run.stdout)
    );
    let [id] = project.run_ids().try_into().expect("one run");
    let journal = project.journal(&id);
    assert!(journal.len() < 100_000, "{} bytes", journal.len());
}

/// Regression (issue 31): llm outputs and answers to `ask` given over MCP were journaled
/// however big (12 MB). Past the cap they are refused with the cap's message, nothing is
/// journaled, and the step waits for a good submission, which goes through.
#[tokio::test]
async fn a_huge_llm_output_or_answer_is_refused_and_the_step_stays_pending() {
    let project = hostile("r = llm(\"Give n\", expects = [\"n\"])\n    ask(\"Say something\")");
    let client = Client::start(&project, &[]).await;
    client.call("start", json!({"name": "h"})).await.ok();
    let huge = "z".repeat(9 << 20);
    let text = client
        .call("continue_compiled_script", json!({"outputs": {"n": huge}}))
        .await
        .err();
    assert!(text.len() < 4000, "{}", &text[..4000]);
    // Regression (issue 40): the refusal ended with a hint about numbers.
    assert!(!text.contains("number"), "{text}");
    insta::assert_snapshot!("a_huge_llm_output_refused", project.scrub(&text));
    let asked = client
        .call(
            "continue_compiled_script",
            json!({"outputs": {"n": "small"}}),
        )
        .await
        .ok();
    insta::assert_snapshot!("asked_after_a_huge_output", project.scrub(&asked));
    let text = client
        .call(
            "continue_compiled_script",
            json!({"outputs": {"answer": huge}}),
        )
        .await
        .err();
    assert!(text.len() < 4000, "{}", &text[..4000]);
    insta::assert_snapshot!("a_huge_answer_refused", project.scrub(&text));
    let done = client
        .call(
            "continue_compiled_script",
            json!({"outputs": {"answer": "hi"}}),
        )
        .await
        .ok();
    insta::assert_snapshot!("done_after_a_huge_answer", project.scrub(&done));
    let [id] = project.run_ids().try_into().expect("one run");
    let journal = project.journal(&id);
    assert!(journal.len() < 100_000, "{} bytes", journal.len());
    assert!(journal.contains("\"small\"") && journal.contains("\"hi\""));
}

/// Regression: a tool's answer nested deeper than serde_json's 128 levels was dropped by
/// the MCP client, and the call failed only at its timeout as "did not answer". It fails at
/// once, naming the server and tool and saying why, and the server stays usable.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the Python virtualenv")]
fn a_tool_answer_nested_too_deep_fails_at_once_saying_why() {
    let deep = format!(r#"{{"n": {}{}}}"#, "[".repeat(200), "]".repeat(200));
    let project = raw_server_project(&deep);
    project.write(".mekara/config.toml", "[servers.raw]\ntimeout = 60\n");
    let started = std::time::Instant::now();
    let run = project.run(&["run", "h"], "");
    run.expect_code(0);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(30),
        "the call waited for its timeout"
    );
    insta::assert_snapshot!(project.scrub(&run.stdout));
    let error_line = |stdout: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with("error:"))
            .unwrap_or_default()
            .to_string()
    };
    let error = error_line(&run.stdout);

    // The same over HTTP: an answer with a JSON body, and one in an event stream (it was
    // dropped from the stream, and the call failed as "the connection closed").
    for mode in ["--http", "--http-events"] {
        let mut server = std::process::Command::new("python3")
            .arg(
                std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("tests/python/raw_structured_server.py"),
            )
            .arg(&deep)
            .arg(mode)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let mut port = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(server.stdout.take().expect("stdout")),
            &mut port,
        )
        .expect("the server's port");
        let _server = crate::mcp_client::Guard(server);
        project.write(
            ".mcp.json",
            &json!({"mcpServers": {"raw": {"type": "http", "url": format!("http://127.0.0.1:{}/mcp", port.trim())}}})
                .to_string(),
        );
        let started = std::time::Instant::now();
        let run = project.run(&["run", "h"], "");
        run.expect_code(0);
        assert!(
            started.elapsed() < std::time::Duration::from_secs(30),
            "{mode}: the call waited for its timeout"
        );
        assert_eq!(
            error_line(&run.stdout),
            error,
            "{mode}: {}\nnot the same error as over stdio",
            run.stdout
        );
    }
}

/// Regression: a timeout beyond what the clock can add (`1e300` seconds) panicked (exit
/// 101) in a script, on the command line and in `.mekara/config.toml`.
#[test]
fn timeouts_too_long_are_refused_with_the_rule() {
    let project = hostile("auto(\"true\", timeout = 1e300)");
    insta::assert_snapshot!(
        "timeouts_in_a_script_and_on_the_command_line",
        project.session(&[
            &["run", "h"],
            &["run", "--timeout=1e300", "h"],
            &["run", "--timeout=1e400", "h"],
            &["run", "--timeout=inf", "h"],
            &["run", "--timeout=-1", "h"],
            &["run", "--timeout=31536001", "h"],
        ])
    );
    project.write(".mcp.json", r#"{"mcpServers": {"x": {"command": "true"}}}"#);
    project.write(".mekara/config.toml", "[servers.x]\ntimeout = 1e300\n");
    mekara_snapshot!(
        "a_timeout_in_the_config",
        project,
        project.command(&["tools", "list"])
    );
}

/// Integers beyond 128 bits from a function step, a shell step's JSON and an llm output
/// must come back exactly when the run is resumed, so the resumed run takes the branch the
/// live one would have taken.
#[tokio::test]
async fn big_integers_round_trip_exactly_across_a_resume() {
    let big = "1234567890123456789012345678901234567890";
    let project = hostile(&format!(
        "a = auto(f, {{\"v\": [{big}, {{\"x\": -{big}}}]}}).value\n    s = json.decode(auto(\"echo '[{big}]'\").output)\n    g = llm(\"Give n\", expects = [\"n\"]).outputs[\"n\"]\n    llm(\"Stop here\")\n    same = a == [{big}, {{\"x\": -{big}}}] and s == [{big}] and g == {big}\n    auto(\"echo \" + (\"same branch\" if same else \"OTHER branch\") + \" \" + str(g) + \" \" + str(a[1][\"x\"]))"
    ));
    let first = Client::start(&project, &[]).await;
    let handle = crate::mcp::client::handle(&first.call("start", json!({"name": "h"})).await.ok());
    let n: Json = serde_json::from_str(big).expect("big");
    let text = first
        .call("continue_compiled_script", json!({"outputs": {"n": n}}))
        .await
        .ok();
    assert!(text.contains("Stop here"), "{text}");
    drop(first);

    // A new server resumes the run from its journal alone, by its handle.
    let second = Client::start(&project, &[]).await;
    second.call("resume", json!({"run_id": handle})).await.ok();
    let text = second
        .call("continue_compiled_script", json!({"outputs": {}}))
        .await
        .ok();
    assert!(
        text.contains(&format!("same branch {big} -{big}")),
        "{text}"
    );
}

/// Regression: a round integer past 64 bits (`10**40`) that a function step returned came
/// back from the journal as a float on resume, and one past `u64` within 128 bits (`2**64`)
/// made its journal line unreadable, so the step ran again. Every integer comes back
/// exactly, whatever its size, round or not, and the step is not run again.
#[test]
fn integers_of_any_size_come_back_exactly_on_resume() {
    let numbers = [
        "18446744073709551616",
        "10000000000000000000000000000000000000000",
        "-10000000000000000000000000000000000000000",
        "184467440737095516160",
        "340282366920938463463374607431768211456",
        "-9223372036854775809",
        "123456789012345678901234567890123456789000000000000000000000000000",
        "1000000",
        "-1",
    ];
    let list = numbers.join(", ");
    let project = hostile(&format!(
        "v = auto(f, {{\"v\": [{list}]}}).value\n    llm(\"Stop here\")\n    print(repr(v), [type(n) for n in v] == [\"int\"] * {})",
        numbers.len()
    ));
    project.run(&["run", "h"], "").expect_code(1);
    let [id] = project.run_ids().try_into().expect("one run");
    // The snapshot pins the list printed whole and `True`.
    mekara_snapshot!(project, project.run(&["run", "--resume", &id], "\n"));
}

/// A panic is a bug, but it must still end like an internal error: exit 2 and a message,
/// not Rust's 101. `MEKARA_DEBUG_PANIC` makes one on purpose.
#[test]
fn a_panic_exits_2_with_a_message() {
    let project = Project::new();
    let run = crate::common::run_with_stdin(
        {
            let mut cmd = project.command(&["scripts"]);
            cmd.env("MEKARA_DEBUG_PANIC", "1");
            cmd
        },
        "",
    );
    run.expect_code(2);
    // Rust's own panic message above it names a thread id and a source line: not pinned.
    insta::assert_snapshot!(run.stderr.lines().last().unwrap_or_default());
}

// ── caps ────────────────────────────────────────────────────────────────────────────────

/// 1 MiB of `x`, built without a single huge repetition.
const MIB: &str = "(\"x\" * 1024) * 1024";

/// Regression: a function step's prints were journaled whole (shell output is cut at
/// 8 MiB). They are cut the same way, head and tail kept, with a note of how much was cut.
#[test]
fn a_function_steps_prints_are_cut_like_shell_output() {
    assert_cut(
        &format!(
            "def p():\n    s = {MIB}\n    print(\"first line\")\n    for i in range(12):\n        print(s)\n    print(\"last line\")\n\ndef execute(request):\n    auto(p, {{}})\n"
        ),
        ("first line", "last line"),
    );
}

/// Runs script `star` to its end (Enter for each llm step) and checks that its journal kept
/// less than 9 MiB: the text from `ends.0` to `ends.1`, cut in the middle with a note.
fn assert_cut(star: &str, ends: (&str, &str)) {
    let project = Project::new();
    project.script("h", NL, Some(star));
    let run = project.run(&["run", "h"], "\n");
    run.expect_code(0);
    let [id] = project.run_ids().try_into().expect("one run");
    let journal = project.journal(&id);
    assert!(journal.len() < 9 * 1024 * 1024, "{} bytes", journal.len());
    assert!(journal.contains(ends.0) && journal.contains(ends.1));
    assert!(
        journal.contains("bytes not kept ..."),
        "the note says what was cut"
    );
}

/// Regression: a function step's value and an llm prompt were journaled and echoed whole,
/// however big. A value is refused past 8 MiB (it cannot be cut and stay a value); a
/// prompt is cut like an output.
#[test]
fn a_huge_function_value_is_refused_and_a_huge_prompt_is_cut() {
    for (i, body) in [
        format!("auto(f, {{\"v\": 9 * [{MIB}]}})"),
        format!("auto(lambda: 9 * [{MIB}], {{}})"),
    ]
    .iter()
    .enumerate()
    {
        let project = hostile(body);
        let out = run_fails(&project);
        assert!(out.len() < 4000, "{}", &out[out.len() - 3000..]);
        insta::assert_snapshot!(format!("a_huge_function_value_{i}"), project.scrub(&out));
        if let [id] = &project.run_ids()[..] {
            let journal = project.journal(id);
            assert!(journal.len() < 10_000, "{} bytes", journal.len());
        }
    }
    assert_cut(
        &format!(
            "def execute(request):\n    llm(\"start of the prompt\" + 9 * {MIB} + \"end of the prompt\")\n"
        ),
        ("start of the prompt", "end of the prompt"),
    );
}

/// Regression: a refusal over MCP repeated a 120 KB input whole (a name, a run id, an output
/// key, an unknown argument or tool). Each echo is clipped, saying how much it left out.
#[tokio::test]
async fn a_refusal_over_mcp_echoes_a_huge_input_clipped() {
    let project = hostile("llm(\"wait\")");
    let client = Client::start(&project, &[]).await;
    let big = "q".repeat(120_000);
    let calls = [
        ("start", json!({"name": big})),
        ("resume", json!({"run_id": big})),
        ("status", json!({"run_id": big})),
        ("start", json!({"name": "h", "parent": big})),
        ("start", json!({"name": "h", big.clone(): 1})),
        (
            "continue_compiled_script",
            json!({"run_id": big, "outputs": {}}),
        ),
    ];
    let mut refusals = String::new();
    for (tool, arguments) in calls {
        let text = client.call(tool, arguments).await.err();
        assert!(text.len() < 4_000, "{tool}: {} bytes", text.len());
        refusals.push_str(&format!("{tool}: {}\n", squeezed(&text, 'q')));
    }
    client.call("start", json!({"name": "h"})).await.ok();
    let text = client
        .call(
            "continue_compiled_script",
            json!({"outputs": {big.clone(): 1}}),
        )
        .await
        .err();
    assert!(text.len() < 4_000, "{} bytes", text.len());
    refusals.push_str(&format!("an output key: {}\n", squeezed(&text, 'q')));
    let unknown = client
        .service
        .call_tool(crate::mcp::client::params(&big, json!({})))
        .await
        .expect_err("an unknown tool is a protocol error")
        .to_string();
    assert!(unknown.len() < 4_000, "{} bytes", unknown.len());
    refusals.push_str(&format!("a tool: {}\n", squeezed(&unknown, 'q')));
    insta::assert_snapshot!(project.scrub(&refusals));
}

/// `text` with each run of more than 16 `c` written `[c × N]`: a snapshot of a clipped echo
/// says how much of the input it kept without repeating it.
fn squeezed(text: &str, c: char) -> String {
    let mut out = String::new();
    let mut run = 0;
    let flush = |out: &mut String, run: usize| {
        if run > 16 {
            out.push_str(&format!("[{c} × {run}]"));
        } else {
            out.extend(std::iter::repeat_n(c, run));
        }
    };
    for ch in text.chars() {
        if ch == c {
            run += 1;
        } else {
            flush(&mut out, run);
            run = 0;
            out.push(ch);
        }
    }
    flush(&mut out, run);
    out
}

/// Regression: 15 MiB of arguments were journaled and repeated whole by `status` and by
/// the hooks. `start` refuses arguments past 8 MiB; `status` and the hooks repeat at most
/// 4 KiB of them, saying how much they left out.
#[tokio::test]
async fn long_arguments_are_refused_or_not_repeated() {
    let project = hostile("llm(\"wait\")");
    let client = Client::start(&project, &[]).await;
    let huge = "y".repeat(9 * 1024 * 1024);
    let text = client
        .call("start", json!({"name": "h", "arguments": huge}))
        .await
        .err();
    assert!(text.len() < 4_000, "{} bytes", text.len());
    insta::assert_snapshot!("arguments_past_the_cap", project.scrub(&text));
    assert!(project.run_ids().is_empty(), "no run was started");
    let long = "z".repeat(100_000);
    client
        .call("start", json!({"name": "h", "arguments": long}))
        .await
        .ok();
    let status = client.call("status", json!({})).await.ok();
    assert!(status.len() < 10_000, "{} bytes", status.len());
    insta::assert_snapshot!(
        "long_arguments_in_status",
        project.scrub(&squeezed(&status, 'z'))
    );

    // The hooks: the model has the arguments already; the answer names where.
    let input = json!({
        "session_id": "s", "cwd": project.root(), "hook_event_name": "UserPromptSubmit",
        "prompt": format!("/h {long}"),
    });
    let run = project.run(&["hook", "reroute-user-commands"], &input.to_string());
    run.expect_code(0);
    assert!(run.stdout.len() < 10_000, "{} bytes", run.stdout.len());
    insta::assert_snapshot!(
        "long_arguments_in_a_typed_command",
        project.scrub(&squeezed(&run.stdout, 'z'))
    );
    let input = json!({
        "session_id": "s", "cwd": project.root(), "hook_event_name": "PreToolUse",
        "tool_name": "Skill", "tool_input": {"skill": "h", "args": long}, "tool_use_id": "t",
    });
    let run = project.run(&["hook", "reroute-agent-commands"], &input.to_string());
    run.expect_code(0);
    assert!(run.stdout.len() < 10_000, "{} bytes", run.stdout.len());
    insta::assert_snapshot!(
        "long_arguments_in_a_skill_call",
        project.scrub(&squeezed(&run.stdout, 'z'))
    );
}
