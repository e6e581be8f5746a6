//! The MCP Inspector's one-shot `--cli` (`mcp-inspector --cli TARGET --method tools/call …`):
//! every call is a new client process (and, over stdio, a new `mekara mcp` too), so the run
//! goes from one call to the next by its handle alone, as the handles design promises.
//!
//! The Inspector is installed by `tests/inspector/install.sh` into
//! `target/test-clients/inspector/`. The tests are ignored unless the `clients` feature is on
//! (as in CI); with it on, a missing install is a failure.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value as Json, json};

use crate::common::Project;
use crate::mcp::client::handle;
use crate::mcp_protocol::HttpServer;

/// The installed `mcp-inspector`.
fn inspector() -> PathBuf {
    crate::common::outside_client(
        "inspector/node_modules/.bin/mcp-inspector",
        "the MCP Inspector",
        "tests/inspector/install.sh",
    )
}

/// One `tools/call` of `tool` by a new Inspector process against `target` (a command, or
/// an URL), with `args` as its `--tool-arg key=value` pairs (a value that is JSON is sent
/// as that JSON): the tool result's text, which must not be an error.
fn call(project: &Project, target: &[String], tool: &str, args: &[(&str, String)]) -> String {
    let out = Command::new(inspector())
        .arg("--cli")
        .args(target)
        .args(["--cwd".into(), project.root().display().to_string()])
        .args(["--method", "tools/call", "--tool-name", tool, "--tool-arg"])
        .args(args.iter().map(|(key, value)| format!("{key}={value}")))
        .current_dir(project.root())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", project.home())
        .env("NO_COLOR", "1")
        .output()
        .expect("run mcp-inspector");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "mcp-inspector {tool} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let result: Json = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("mcp-inspector printed no JSON result ({e}):\n{stdout}"));
    assert_ne!(result["isError"], true, "{tool}: {result}");
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {result}"))
        .to_string()
}

/// `two` (two llm steps) carried to its end by one-shot calls against `target`.
fn carry_a_run_by_its_handle(project: &Project, target: &[String]) {
    let started = call(
        project,
        target,
        "start",
        &[("name", "two".into()), ("arguments", "p".into())],
    );
    let h = handle(&started);
    let status = call(project, target, "status", &[("run_id", h.clone())]);
    assert!(
        status.contains(&format!("handle `{h}`")) && status.contains("1. `two`"),
        "{status}"
    );
    let word = |w: &str| json!({"word": w}).to_string();
    let second = call(
        project,
        target,
        "continue_compiled_script",
        &[("run_id", h.clone()), ("outputs", word("one"))],
    );
    assert!(second.contains("second word"), "{second}");
    let done = call(
        project,
        target,
        "continue_compiled_script",
        &[("run_id", h.clone()), ("outputs", word("two"))],
    );
    assert!(done.contains("## Done"), "{done}");
    let out = std::fs::read_to_string(project.root().join("out-p")).expect("output");
    assert_eq!(out, "one\ntwo\n");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP Inspector")]
#[test]
fn one_shot_calls_over_stdio_carry_a_run_to_its_end_by_its_handle() {
    let project = Project::new();
    crate::mcp::handles::two_steps(&project);
    let log = project.home().join("mekara.log");
    let target = [
        env!("CARGO_BIN_EXE_mekara").to_string(),
        "mcp".into(),
        "-e".into(),
        "MEKARA_LOG=debug".into(),
        "-e".into(),
        format!("MEKARA_LOG_FILE={}", log.display()),
    ];
    carry_a_run_by_its_handle(&project, &target);
    assert_four_sessions_of_2025_11_25(&std::fs::read_to_string(&log).expect("mekara's log"));
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP Inspector")]
#[test]
fn one_shot_calls_over_http_carry_a_run_to_its_end_by_its_handle() {
    let project = Project::new();
    crate::mcp::handles::two_steps(&project);
    let server = HttpServer::start_with(&project, &["mcp"], &[("MEKARA_LOG", "debug")]);
    let target = [format!("http://127.0.0.1:{}/mcp", server.port)];
    carry_a_run_by_its_handle(&project, &target);
    // What the Inspector speaks: a sessionful `2025-11-25`, a new session for each call.
    assert_four_sessions_of_2025_11_25(&server.log());
}

/// Checks that `log` (`MEKARA_LOG=debug`) shows what the Inspector speaks: `2025-11-25`
/// with its handshake, a new session (`initialize`) for each of the four calls.
fn assert_four_sessions_of_2025_11_25(log: &str) {
    let requests = crate::common::logged_requests(log);
    let count = |what: &str| requests.iter().filter(|r| r.starts_with(what)).count();
    assert!(
        count("`initialize`, asking for protocol `2025-11-25`") == 4
            && count("`initialize`") == 4
            && count("`tools/call`") == 4,
        "{log}"
    );
}
