//! Traces: runs exported over OTLP/HTTP to a real receiver, checked span by span.
//!
//! The receiver: no OpenTelemetry Collector or Jaeger build is published on PyPI, npm or in
//! Debian (the registries reachable here); the Collector and Jaeger are Go binaries. So the
//! receiver is `tests/otel/receiver.py`, a small `http.server` that decodes every request
//! with the official `opentelemetry-proto` package's `ExportTraceServiceRequest` (protobuf,
//! or OTLP JSON), as a collector does, and keeps the raw bodies too, to check that no byte
//! holds a secret. `tests/otel/install.sh` installs it under `target/test-clients/otel`.

use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use crate::common::{Project, Run, everything, run_with_stdin, servers};
use crate::unattended::{AGENT_COMMAND, answers};

/// The receiver, running; killed when dropped.
struct Receiver {
    child: Child,
    dir: tempfile::TempDir,
    port: u16,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Receiver {
    fn start() -> Receiver {
        let python = crate::common::outside_client(
            "otel/bin/python",
            "the OTLP receiver",
            "tests/otel/install.sh",
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = Command::new(python)
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/otel/receiver.py"))
            .arg(dir.path())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the receiver");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("the receiver's port");
        let port = line.trim().parse().expect("a port");
        Receiver { child, dir, port }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The spans received so far.
    fn spans(&self) -> Vec<Json> {
        std::fs::read_to_string(self.dir.path().join("spans.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).expect("a span"))
            .collect()
    }

    /// Every byte received.
    fn raw(&self) -> String {
        String::from_utf8_lossy(&std::fs::read(self.dir.path().join("raw.bin")).unwrap_or_default())
            .into_owned()
    }

    /// The spans, once one named `name` has come (the MCP server sends on its own time).
    fn spans_with(&self, name: &str) -> Vec<Json> {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let spans = self.spans();
            if spans.iter().any(|s| s["name"] == name) || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// `mekara ARGS` in `project` with `env` on top of the hermetic environment.
fn run(project: &Project, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = project.command(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_with_stdin(cmd, "")
}

/// `outer` calls the compiled `inner` (which calls `leaf`), then runs a step that fails but
/// is allowed to.
fn nested(project: &Project) {
    project.script(
        "outer",
        "Outer.\n",
        Some(
            r#"
def execute(request):
    auto("echo hello", context = "say hello")
    call_script("inner")
    auto("exit 3", allow_failure = True)
"#,
        ),
    );
    project.script(
        "inner",
        "Inner.\n",
        Some("def execute(request):\n    auto(\"echo inner\")\n    call_script(\"leaf\")\n"),
    );
    project.script(
        "leaf",
        "Leaf.\n",
        Some("def execute(request):\n    auto(\"echo leaf\")\n"),
    );
}

fn named<'a>(spans: &'a [Json], name: &str) -> Vec<&'a Json> {
    spans.iter().filter(|s| s["name"] == name).collect()
}

fn one<'a>(spans: &'a [Json], name: &str) -> &'a Json {
    let found = named(spans, name);
    assert_eq!(found.len(), 1, "one `{name}` span expected in {spans:#?}");
    found[0]
}

/// The step span of `script`'s step `index`.
fn step<'a>(spans: &'a [Json], script: &str, index: u64) -> &'a Json {
    spans
        .iter()
        .find(|s| {
            s["name"].as_str().is_some_and(|n| n.starts_with("step "))
                && s["attributes"]["mekara.script"] == script
                && s["attributes"]["mekara.step.index"] == index
        })
        .unwrap_or_else(|| panic!("no step {index} of `{script}` in {spans:#?}"))
}

fn parent_of<'a>(spans: &'a [Json], span: &Json) -> &'a Json {
    spans
        .iter()
        .find(|s| s["span_id"] == span["parent_span_id"])
        .unwrap_or_else(|| panic!("the parent of {span} was not received"))
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the OTLP receiver")]
fn a_run_is_one_trace_of_run_script_and_step_spans_linked_by_the_stack() {
    for protocol in ["http/protobuf", "http/json"] {
        let receiver = Receiver::start();
        let project = Project::new();
        nested(&project);
        let out = run(
            &project,
            &["run", "outer"],
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol),
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-team=blue"),
            ],
        );
        out.expect_code(0);
        assert!(!out.stderr.contains("traces"), "{}", out.stderr);
        let spans = receiver.spans();
        let kind = if protocol == "http/json" {
            "json"
        } else {
            "protobuf"
        };
        assert!(
            spans.iter().all(|s| s["content_type"] == kind),
            "{spans:#?}"
        );
        assert!(spans.iter().all(|s| s["headers"]["x-team"] == "blue"));
        assert!(
            spans
                .iter()
                .all(|s| s["resource"]["service.name"] == "mekara")
        );
        assert_eq!(spans.len(), 10, "a run, 3 scripts, 6 steps: {spans:#?}");
        let trace = &spans[0]["trace_id"];
        assert!(spans.iter().all(|s| &s["trace_id"] == trace), "one trace");

        let run_span = one(&spans, "run outer");
        assert_eq!(run_span["parent_span_id"], "", "the run is the root");
        let id = project.run_ids().pop().expect("a run");
        assert_eq!(run_span["attributes"]["mekara.run.id"], id.as_str());
        assert_eq!(run_span["attributes"]["mekara.run.state"], "completed");
        assert!(run_span["attributes"]["mekara.host"].is_string());
        assert!(run_span["attributes"]["mekara.user"].is_string());

        // run > script outer > call step > script inner > call step > script leaf > step
        let outer = one(&spans, "script outer");
        assert_eq!(parent_of(&spans, outer), run_span);
        let call_inner = step(&spans, "outer", 1);
        assert_eq!(call_inner["name"], "step call");
        assert_eq!(parent_of(&spans, call_inner), outer);
        let inner = one(&spans, "script inner");
        assert_eq!(parent_of(&spans, inner), call_inner);
        assert_eq!(inner["attributes"]["mekara.frame.path"], "outer > inner");
        assert_eq!(inner["attributes"]["mekara.frame.origin"], "call");
        let call_leaf = step(&spans, "inner", 1);
        assert_eq!(parent_of(&spans, call_leaf), inner);
        let leaf = one(&spans, "script leaf");
        assert_eq!(parent_of(&spans, leaf), call_leaf);
        let echo_leaf = step(&spans, "leaf", 0);
        assert_eq!(parent_of(&spans, echo_leaf), leaf);
        assert!(call_inner["start_ns"].as_u64() <= inner["start_ns"].as_u64());
        assert!(inner["end_ns"].as_u64() <= call_inner["end_ns"].as_u64());

        let hello = step(&spans, "outer", 0);
        assert_eq!(hello["name"], "step shell");
        assert_eq!(hello["attributes"]["mekara.step.kind"], "shell");
        assert_eq!(hello["attributes"]["mekara.step.label"], "say hello");
        assert_eq!(hello["attributes"]["mekara.step.exit_code"], 0);
        assert_eq!(hello["status"]["code"], 0, "unset");
        assert!(
            hello["attributes"]["mekara.step.output"].is_null(),
            "no text"
        );

        let failed = step(&spans, "outer", 2);
        assert_eq!(failed["attributes"]["mekara.step.exit_code"], 3);
        assert_eq!(failed["attributes"]["mekara.step.allow_failure"], true);
        assert_eq!(failed["status"]["code"], 2, "error: {failed}");
        assert_eq!(failed["status"]["message"], "exited with code 3");
        assert_eq!(failed["events"][0]["name"], "exception");
        assert_eq!(
            failed["events"][0]["attributes"]["exception.message"],
            "exited with code 3"
        );
    }
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the OTLP receiver")]
fn a_failed_step_that_falls_back_marks_its_step_and_script() {
    let receiver = Receiver::start();
    let project = Project::new();
    project.script(
        "broken",
        "Do it by hand.\n",
        Some("def execute(request):\n    auto(\"echo no >&2; exit 4\")\n"),
    );
    let env = [
        (
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
            format!("{}/v1/traces", receiver.endpoint()),
        ),
        ("OTEL_SERVICE_NAME", "ci-workflows".to_string()),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let out = run(&project, &["run", "broken"], &env);
    // The person finishes the NL instructions at the terminal (stdin ends: the run stays).
    let spans = receiver.spans();
    let failed = step(&spans, "broken", 0);
    assert_eq!(failed["attributes"]["mekara.step.exit_code"], 4, "{out:?}");
    assert_eq!(failed["status"]["code"], 2);
    assert_eq!(failed["resource"]["service.name"], "ci-workflows");
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the OTLP receiver")]
fn an_agent_step_carries_its_session_and_cost_and_text_only_when_asked() {
    for include in [false, true] {
        let receiver = Receiver::start();
        let project = crate::unattended::project();
        if include {
            project.write(".mekara/config.toml", "[traces]\ninclude_text = true\n");
        }
        let out = run(
            &project,
            &["run", "--agent-command", AGENT_COMMAND, "colour"],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint())],
        );
        out.expect_code(0);
        let spans = receiver.spans();
        let llm = step(&spans, "colour", 1);
        assert_eq!(llm["name"], "step llm");
        assert_eq!(llm["attributes"]["mekara.agent.session"], "sess-colour[1]");
        assert_eq!(llm["attributes"]["mekara.agent.cost_usd"], 0.25);
        assert_eq!(llm["attributes"]["gen_ai.usage.input_tokens"], 100);
        assert_eq!(llm["attributes"]["gen_ai.usage.output_tokens"], 7);
        // The NL script the agent finished: its frame carries the agent's report.
        let plain = one(&spans, "script plain");
        assert_eq!(
            plain["attributes"]["mekara.frame.outcome"],
            "finished_by_agent"
        );
        assert_eq!(plain["attributes"]["mekara.agent.cost_usd"], 0.25);
        let raw = receiver.raw();
        if include {
            assert_eq!(
                llm["attributes"]["mekara.step.prompt"],
                "Step 2: name a colour."
            );
            assert_eq!(
                llm["attributes"]["mekara.step.outputs"],
                r#"{"colour":"red"}"#
            );
            assert_eq!(
                step(&spans, "colour", 0)["attributes"]["mekara.step.output"],
                "hello\n"
            );
        } else {
            assert_eq!(llm["attributes"]["mekara.step.label"], "llm");
            for text in ["name a colour", "count its letters", "hello\n", "\"red\""] {
                assert!(
                    !raw.contains(text),
                    "`{text}` was exported without include_text"
                );
            }
        }
    }
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs OTLP and the MCP servers")]
fn a_secret_from_a_variable_is_never_exported_even_with_text() {
    let receiver = Receiver::start();
    let dir = servers();
    let project = Project::new();
    project.write(
        ".mcp.json",
        &format!(
            r#"{{"mcpServers": {{"envy": {{"command": "node", "args": ["{}", "stdio"], "env": {{"API_KEY": "${{MY_API_KEY}}"}}}}}}}}"#,
            everything(&dir)
        ),
    );
    project.script(
        "envy",
        "Show the server's environment.\n",
        Some(
            "def execute(request):\n    r = mcp(\"envy\", \"get-env\", {})\n    print(r.content)\n",
        ),
    );
    let secret = "sk-live-0123456789";
    let out = run(
        &project,
        &["run", "envy"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
            ("MEKARA_TRACES_INCLUDE_TEXT", "1"),
            ("MY_API_KEY", secret),
        ],
    );
    out.expect_code(0);
    let spans = receiver.spans();
    let mcp = step(&spans, "envy", 0);
    assert_eq!(mcp["name"], "step mcp");
    let output = mcp["attributes"]["mekara.step.output"]
        .as_str()
        .expect("text asked for");
    assert!(output.contains("${MY_API_KEY}"), "{output}");
    assert!(!receiver.raw().contains(secret), "the secret was exported");
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the OTLP receiver")]
fn a_resumed_run_joins_its_trace_and_replayed_steps_are_not_sent_again() {
    let receiver = Receiver::start();
    let project = crate::unattended::project();
    answers(&project, &json!({"nl:1": {"error": "no cubes"}}));
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint())];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let first = run(
        &project,
        &["run", "--agent-command", AGENT_COMMAND, "colour"],
        &env,
    );
    first.expect_code(1);
    let before = receiver.spans();
    assert!(
        named(&before, "run colour").is_empty(),
        "the run has not ended"
    );
    let id = project.run_ids().pop().expect("a run");
    answers(&project, &json!({}));
    let second = run(
        &project,
        &["run", "--resume", &id, "--agent-command", AGENT_COMMAND],
        &env,
    );
    second.expect_code(0);
    let spans = receiver.spans();
    let trace = &spans[0]["trace_id"];
    assert!(
        spans.iter().all(|s| &s["trace_id"] == trace),
        "one trace: {spans:#?}"
    );
    let mut ids: Vec<&str> = spans
        .iter()
        .map(|s| s["span_id"].as_str().expect("id"))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), spans.len(), "no span sent twice");
    // Every journaled step once, whichever process ran it.
    let journaled = project
        .journal(&id)
        .lines()
        .filter(|l| l.contains(r#""event":"step""#))
        .count();
    let steps = spans
        .iter()
        .filter(|s| s["name"].as_str().is_some_and(|n| n.starts_with("step ")))
        .count();
    assert_eq!(steps, journaled);
    // The second process ended the frames the first opened, under the same parents.
    let run_span = one(&spans, "run colour");
    let colour = one(&spans, "script colour");
    assert_eq!(parent_of(&spans, colour), run_span);
    let plain = one(&spans, "script plain");
    assert_eq!(parent_of(&spans, plain), step(&spans, "colour", 4));
    assert_eq!(parent_of(&spans, step(&spans, "colour", 0)), colour);
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the OTLP receiver")]
fn a_run_driven_over_mcp_is_traced() {
    let receiver = Receiver::start();
    let project = Project::new();
    nested(&project);
    let endpoint = PathBuf::from(receiver.endpoint());
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async {
        let client = crate::mcp::client::Client::start(
            &project,
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_path())],
        )
        .await;
        let reply = client.call("start", json!({"name": "outer"})).await;
        assert!(!reply.is_error, "{}", reply.text);
        client.service.cancel().await.expect("close");
    });
    let spans = receiver.spans_with("run outer");
    let run_span = one(&spans, "run outer");
    assert_eq!(parent_of(&spans, one(&spans, "script outer")), run_span);
    assert_eq!(spans.len(), 10, "{spans:#?}");
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port()
}

#[test]
fn a_collector_that_is_down_or_silent_changes_nothing_and_exit_stays_prompt() {
    let project = Project::new();
    nested(&project);
    let plain = run(&project, &["run", "outer"], &[]);
    plain.expect_code(0);
    // Accepts connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let silent_port = silent.local_addr().expect("addr").port();
    // Refused at once: said once. Silent: the export's timeout outlasts the run, and exit
    // does not wait for it.
    for (endpoint, warnings) in [
        (format!("http://127.0.0.1:{}", closed_port()), 1),
        (format!("http://127.0.0.1:{silent_port}"), 0),
    ] {
        let started = Instant::now();
        let out = run(
            &project,
            &["run", "outer"],
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)],
        );
        let took = started.elapsed();
        out.expect_code(0);
        assert_eq!(
            project.scrub(&out.stdout),
            project.scrub(&plain.stdout),
            "the run's output is the same"
        );
        // The exporter's timeout is 10 s; exit waits for it at most 2 s.
        assert!(took < Duration::from_secs(8), "{endpoint}: took {took:?}");
        assert_eq!(
            out.stderr.matches("traces: cannot export to").count(),
            warnings,
            "{}",
            out.stderr
        );
        if warnings == 1 {
            assert!(
                out.stderr.contains("Connection refused (os error 111); check that the collector is running and that `OTEL_EXPORTER_OTLP_ENDPOINT` is right; runs go on"),
                "{}",
                out.stderr
            );
        }
    }
    drop(silent);
}

#[test]
fn wrong_trace_settings_are_warnings_and_the_run_goes_on() {
    let project = Project::new();
    nested(&project);
    let cases: [(&[(&str, &str)], &str); 5] = [
        (
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url")],
            "traces are off: `OTEL_EXPORTER_OTLP_ENDPOINT` is not a URL",
        ),
        (
            &[("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://collector:4318")],
            "traces are off: `OTEL_EXPORTER_OTLP_ENDPOINT` is `ftp://collector:4318`, not an `http://` or `https://` URL",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ],
            "traces are off: `OTEL_EXPORTER_OTLP_PROTOCOL` is `grpc`; mekara exports over OTLP/HTTP only",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "x-ok=1,broken,bad name=tok-secret-value",
                ),
            ],
            "traces: entry 2 of `OTEL_EXPORTER_OTLP_HEADERS` is not `name=value`",
        ),
        (
            &[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon"),
            ],
            "traces: `OTEL_EXPORTER_OTLP_TIMEOUT` is `soon`, not a number of milliseconds above 0",
        ),
    ];
    for (env, warning) in cases {
        let out = run(&project, &["run", "outer"], env);
        out.expect_code(0);
        assert!(out.stderr.contains(warning), "{env:?}:\n{}", out.stderr);
        assert!(!out.stderr.contains("tok-secret-value"), "{}", out.stderr);
    }
    // Entry 3 too: each bad entry is named, by position only.
    let out = run(
        &project,
        &["run", "outer"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "x-ok=1,broken,bad name=tok-secret-value",
            ),
        ],
    );
    assert!(out.stderr.contains("entry 3 of"), "{}", out.stderr);
    // Switched off: nothing is said at all.
    let out = run(
        &project,
        &["run", "outer"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "not a url"),
            ("OTEL_SDK_DISABLED", "true"),
        ],
    );
    out.expect_code(0);
    assert!(!out.stderr.contains("traces"), "{}", out.stderr);
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the OTLP receiver")]
fn a_retried_step_is_a_new_span_and_the_reopened_script_a_new_attempt() {
    let receiver = Receiver::start();
    let project = Project::new();
    project.script(
        "parent",
        "Call the child.\n",
        Some("def execute(request):\n    auto(\"echo p\")\n    call_script(\"child\")\n"),
    );
    project.script(
        "child",
        "Read the file.\n",
        Some("def execute(request):\n    auto(\"echo k\")\n    auto(\"cat needed.txt\")\n"),
    );
    let endpoint = receiver.endpoint();
    let env = [("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str())];
    run(&project, &["run", "parent"], &env).expect_code(1);
    let id = project.run_ids().pop().expect("a run");
    project.write("needed.txt", "here\n");
    run(&project, &["run", "--resume", &id, "--retry"], &env).expect_code(0);
    let spans = receiver.spans();
    // The child failed, so it ended, and its call step with it; the retry opened it again:
    // a second attempt, each a span of its own, never one span id sent twice.
    let mut ids: Vec<&str> = spans
        .iter()
        .map(|s| s["span_id"].as_str().expect("id"))
        .collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), spans.len(), "no span id sent twice: {spans:#?}");
    let children = named(&spans, "script child");
    assert_eq!(children.len(), 2, "{spans:#?}");
    let (failed, retried) = (children[0], children[1]);
    assert_eq!(failed["status"]["code"], 2);
    assert_eq!(retried["status"]["code"], 0);
    assert_eq!(retried["attributes"]["mekara.frame.outcome"], "completed");
    let attempts: Vec<&Json> = spans
        .iter()
        .filter(|s| {
            s["attributes"]["mekara.script"] == "child" && s["attributes"]["mekara.step.index"] == 1
        })
        .collect();
    assert_eq!(attempts.len(), 2, "{spans:#?}");
    assert_eq!(attempts[0]["status"]["code"], 2);
    assert_eq!(parent_of(&spans, attempts[0]), failed);
    assert_eq!(attempts[1]["status"]["code"], 0);
    assert_eq!(parent_of(&spans, attempts[1]), retried);
    // Each attempt under its own call step, both under the one parent frame.
    let parent = one(&spans, "script parent");
    assert_ne!(failed["parent_span_id"], retried["parent_span_id"]);
    for child in [failed, retried] {
        let call = parent_of(&spans, child);
        assert_eq!(call["name"], "step call");
        assert_eq!(parent_of(&spans, call), parent);
    }
    let run_span = one(&spans, "run parent");
    assert_eq!(run_span["attributes"]["mekara.run.state"], "completed");
    assert_eq!(parent_of(&spans, parent), run_span);
}

/// Regression (issue 31): a redacted `${VAR}` that a script passed to `auto()` was expanded
/// by the shell and journaled, and an agent's answer (or a script's arguments) holding a
/// secret was journaled as given. A secret the project's `.mcp.json` takes from the environment (known from the
/// start, before any server is called) is in none of the journal, the trace, the log and,
/// over MCP, the cassette: each holds `${VAR}` instead.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the OTLP receiver")]
fn a_secret_a_step_prints_or_an_agent_answers_is_kept_nowhere() {
    let secret = "sk-live-9876543210";
    let project = Project::new();
    project.write(
        ".mcp.json",
        r#"{"mcpServers": {"api": {"command": "true", "env": {"API_KEY": "${MY_API_KEY}"}}}}"#,
    );
    project.script(
        "leak",
        "Leak the key.\n",
        Some(
            "def execute(request):\n    auto(\"echo key=${MY_API_KEY}\")\n    llm(\"Say the key.\", expects = [\"said\"])\n",
        ),
    );
    let agent = "python3 -c 'import json, os, sys; sys.stdin.read(); print(json.dumps({\"outputs\": {\"said\": \"the key is \" + os.environ[\"MY_API_KEY\"]}, \"error\": None}))'";
    let receiver = Receiver::start();
    let log = project.dir.path().join("mekara.log");
    let out = run(
        &project,
        &[
            "run",
            "--agent-command",
            agent,
            "leak",
            &format!("use {secret}"),
        ],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
            ("MEKARA_TRACES_INCLUDE_TEXT", "1"),
            ("MY_API_KEY", secret),
            ("MEKARA_LOG", "debug"),
            ("MEKARA_LOG_FILE", log.to_str().expect("utf-8")),
        ],
    );
    out.expect_code(0);
    let id = project.run_ids().pop().expect("a run");
    let journal = project.journal(&id);
    assert!(
        journal.contains("key=${MY_API_KEY}")
            && journal.contains("the key is ${MY_API_KEY}")
            && journal.contains("use ${MY_API_KEY}"),
        "{journal}"
    );
    let spans = receiver.spans_with("run leak");
    assert!(!spans.is_empty(), "the run was traced");
    for (what, text) in [
        ("journal", journal),
        ("trace", receiver.raw()),
        ("log", std::fs::read_to_string(&log).unwrap_or_default()),
        ("stdout", out.stdout),
    ] {
        assert!(
            !text.contains(secret),
            "the secret is in the {what}:\n{text}"
        );
    }

    // Over MCP, the agent's outputs are recorded in the cassette as the journal has them.
    let cassette = project.dir.path().join("leak.toml");
    let replies = mcp_session(&project, &cassette, secret);
    let recorded = std::fs::read_to_string(&cassette).expect("cassette");
    assert!(recorded.contains("${MY_API_KEY}"), "{recorded}");
    let ids = project.run_ids();
    let journals: String = ids.iter().map(|id| project.journal(id)).collect();
    for (what, text) in [
        ("cassette", recorded),
        ("journals", journals),
        ("replies", replies),
    ] {
        assert!(
            !text.contains(secret),
            "the secret is in the {what}:\n{text}"
        );
    }
}

/// `leak` driven over MCP, recorded into `cassette`, with the agent answering `secret`; the
/// replies it read.
fn mcp_session(project: &Project, cassette: &Path, secret: &str) -> String {
    use crate::mcp::client::Client;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let client = Client::start(
            project,
            &[
                ("MEKARA_VCR_CASSETTE", cassette),
                ("MY_API_KEY", Path::new(secret)),
            ],
        )
        .await;
        let started = client.call("start", json!({"name": "leak"})).await.ok();
        let done = client
            .call(
                "continue_compiled_script",
                json!({"outputs": {"said": format!("the key is {secret}")}}),
            )
            .await
            .ok();
        client.service.cancel().await.expect("close");
        format!("{started}\n{done}")
    })
}

/// A wait for a rate limit is a `wait rate-limit` span under its script's, as long as the wait.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs the OTLP receiver")]
fn a_wait_for_a_rate_limit_is_a_span_under_its_script() {
    let receiver = Receiver::start();
    let project = crate::unattended::project();
    answers(
        &project,
        &json!({"colour[1]#1": {"error": "429 Too Many Requests", "rate_limited": true, "retry_after": 30}}),
    );
    let out = run(
        &project,
        &["run", "--agent-command", AGENT_COMMAND, "colour"],
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint()),
            ("MEKARA_BACKOFF_SCALE", "0.001"),
        ],
    );
    out.expect_code(0);
    let spans = receiver.spans();
    let wait = one(&spans, "wait rate-limit");
    assert_eq!(wait["attributes"]["mekara.wait.step"], "colour[1]");
    assert_eq!(wait["attributes"]["mekara.wait.attempt"], 2);
    assert_eq!(wait["attributes"]["mekara.wait.duration_ms"], 30);
    assert_eq!(parent_of(&spans, wait)["name"], "script colour");
}
