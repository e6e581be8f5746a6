//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, npm) against the
//! real `mekara mcp --http`, and against `mekara serve --http` serving the example tool
//! modules of `examples/tools/` (the protocol scenarios only: `serve_*` tests).
//!
//! Setup: `bash tests/conformance/install.sh` installs the suite, pinned by
//! `tests/conformance/package.json` and `package-lock.json`, into
//! `target/test-clients/conformance/`. These tests are ignored unless the `clients` feature
//! is on (as in CI); with it on, a missing suite fails them. The suite
//! needs Node; on Node 20 it is run with `--import tests/conformance/node20-globsync.mjs`,
//! which supplies the `fs.globSync` it imports (Node 22+ has it built in).
//!
//! Each test starts its own server on `127.0.0.1:0` in a fresh project and runs one server
//! scenario with `conformance server --url <url> --scenario <name>`. A scenario passes when
//! the suite exits 0 and its `checks.json` holds at least one SUCCESS and no FAILURE.
//!
//! Scenarios run (the ones that apply to a server with tools and prompts only):
//! - `server-initialize`: the initialize handshake.
//! - `ping`: `ping` answers `{}`.
//! - `tools-list`: every tool has a name, a description and an input schema.
//! - `prompts-list`: every prompt (every NL script) has a name and a description.
//! - `prompts-get-simple`: `prompts/get` of a prompt named `test_simple_prompt` returns
//!   messages with a role and content; the test project defines an NL script of that name.
//! - `server-sse-multiple-streams`: three concurrent POSTs in one session all succeed, and
//!   those answered as SSE streams deliver their event.
//! - `dns-rebinding-protection`: a request with `Host`/`Origin` of `evil.example.com` gets a
//!   4xx, one with the server's own `127.0.0.1:PORT` a 2xx.
//!
//! Against `mekara serve --http` (tests named `serve_*`): `server-initialize`, `ping`,
//! `tools-list` (the example tools' generated schemas), `server-sse-multiple-streams` and
//! `dns-rebinding-protection`. `mekara serve` has no prompts, so the `prompts-*` scenarios do
//! not apply; the `tools-call-*` ones need the suite's own test tools, as below.
//!
//! Scenarios not run, and why:
//! - `json-schema-2020-12`: despite its name it does not check a server's schemas in general;
//!   it needs a test tool named `json_schema_2020_12_tool` with a given input schema, and fails
//!   at "tool not found" on any server without that tool.
//! - `tools-call-simple-text`, `-image`, `-audio`, `-embedded-resource`, `-mixed-content`,
//!   `-with-logging`, `-with-progress`, `-error`, `-sampling`, `-elicitation`: each calls a
//!   test tool of the suite's own (`test_simple_text`, `test_error_handling`, ...) that mekara
//!   does not have and should not grow. (Some of them "pass" against a server that lacks the
//!   tool, since an error result also has text content, so running them would prove nothing.)
//! - `server-sse-polling`: needs the test tool `test_reconnection`, which closes its stream
//!   mid-call.
//! - `prompts-get-with-args`: needs a prompt taking arguments `arg1` and `arg2`; mekara's
//!   prompts take one argument, `arguments`.
//! - `prompts-get-embedded-resource`, `prompts-get-with-image`: need prompts that return
//!   resources and images; mekara's prompts are text.
//! - `resources-*`: mekara has no resources.
//! - `logging-set-level`: mekara declares no logging capability.
//! - `completion-complete`: mekara declares no completions capability.
//! - `elicitation-sep1034-defaults`, `elicitation-sep1330-enums`: mekara never asks the
//!   client for elicitation.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};

use crate::common::Project;

/// The installed suite's entry point.
fn suite() -> PathBuf {
    crate::common::outside_client(
        "conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js",
        "the MCP conformance suite",
        "tests/conformance/install.sh",
    )
}

/// A running `mekara mcp --http 127.0.0.1:0` (or another command that prints a `listening
/// on URL` line), killed on drop.
struct Server {
    child: Child,
    url: String,
    stderr: Arc<Mutex<String>>,
}

impl Server {
    fn start(project: &Project, args: &[&str]) -> Server {
        let mut child = project
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mekara");
        let stderr = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let pipe = child.stderr.take().expect("stderr");
        let log = Arc::clone(&stderr);
        // Keeps draining stderr for the server's whole life, so it never blocks on a full
        // pipe, and keeps the text for failure messages.
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                if let Some((_, url)) = line.split_once("listening on ") {
                    let _ = tx.send(url.trim().to_string());
                }
                let mut log = log.lock().expect("log lock");
                log.push_str(&line);
                log.push('\n');
            }
        });
        let Ok(url) = rx.recv() else {
            let status = child.wait().expect("wait mekara");
            panic!(
                "`mekara {}` exited ({status}) without a `listening on` line; stderr:\n{}",
                args.join(" "),
                stderr.lock().expect("log lock")
            );
        };
        Server { child, url, stderr }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("log lock").clone()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one server scenario against a fresh `mekara mcp --http` and asserts that it passes.
fn scenario(name: &str) {
    scenario_against(name, &["mcp", "--http", "127.0.0.1:0"]);
}

/// Runs one server scenario against `mekara serve --http` of the example tool modules.
fn serve_scenario(name: &str) {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tools");
    let examples = examples.to_str().expect("a UTF-8 path");
    scenario_against(name, &["serve", examples, "--http", "127.0.0.1:0"]);
}

/// Runs one server scenario against a fresh server started with `mekara ARGS` in a fresh
/// project, and asserts that it passes.
fn scenario_against(name: &str, args: &[&str]) {
    let suite = suite();
    let project = Project::new();
    // For `prompts-get-simple`, which gets the prompt of this name.
    project.script(
        "test_simple_prompt",
        "---\ndescription: A prompt for the conformance suite\n---\n\nSay hello.\n",
        None,
    );
    let server = Server::start(&project, args);
    let results = tempfile::tempdir().expect("tempdir");
    let hook = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/node20-globsync.mjs");
    let out = Command::new("node")
        .arg("--import")
        .arg(&hook)
        .arg(&suite)
        .args(["server", "--url", &server.url, "--scenario", name, "-o"])
        .arg(results.path())
        .current_dir(results.path())
        .stdin(Stdio::null())
        .output()
        .expect("run node (is Node.js installed?)");
    let output = strip_ansi(&format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ));
    let checks = read_checks(results.path());
    let count = |status: &str| {
        checks
            .iter()
            .filter(|c| c["status"].as_str() == Some(status))
            .count()
    };
    let (passed, failed) = (count("SUCCESS"), count("FAILURE"));
    let report = || {
        format!(
            "conformance scenario `{name}` against {}: suite {}, {passed} checks passed, {failed} failed\n\
             --- suite output:\n{output}\n--- checks.json:\n{}\n--- mekara stderr:\n{}",
            server.url,
            out.status,
            serde_json::to_string_pretty(&checks).expect("json"),
            server.stderr()
        )
    };
    assert!(
        out.status.success() && failed == 0 && passed > 0,
        "{}",
        report()
    );
    if count("WARNING") > 0 {
        eprintln!("warnings in a passing scenario:\n{}", report());
    }
}

/// The checks the suite saved under `dir` (`server-<scenario>-<time>/checks.json`).
fn read_checks(dir: &Path) -> Vec<serde_json::Value> {
    let mut checks = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read results").flatten() {
        let file = entry.path().join("checks.json");
        if let Ok(text) = std::fs::read_to_string(&file) {
            let list: Vec<serde_json::Value> = serde_json::from_str(&text).expect("checks.json");
            checks.extend(list);
        }
    }
    checks
}

/// The suite colours its output whether or not it goes to a terminal.
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // CSI sequence: ESC [ params... final letter
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn server_initialize() {
    scenario("server-initialize");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn ping() {
    scenario("ping");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn tools_list() {
    scenario("tools-list");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn prompts_list() {
    scenario("prompts-list");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn prompts_get_simple() {
    scenario("prompts-get-simple");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn server_sse_multiple_streams() {
    scenario("server-sse-multiple-streams");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn dns_rebinding_protection() {
    scenario("dns-rebinding-protection");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn serve_server_initialize() {
    serve_scenario("server-initialize");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn serve_ping() {
    serve_scenario("ping");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn serve_tools_list() {
    serve_scenario("tools-list");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn serve_server_sse_multiple_streams() {
    serve_scenario("server-sse-multiple-streams");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP conformance suite")]
#[test]
fn serve_dns_rebinding_protection() {
    serve_scenario("dns-rebinding-protection");
}
