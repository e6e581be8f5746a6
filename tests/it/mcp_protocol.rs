//! `mekara mcp` fed malformed input and protocol errors, spoken to by hand: raw
//! newline-delimited JSON-RPC on the real binary's stdin and stdout, and raw HTTP/1.1 on a
//! `TcpStream` for `--http`. After every bad message the server must answer the next good
//! one, and its stdout must carry nothing but protocol.

use std::collections::VecDeque;
use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::common::Project;
use serde_json::{Value as Json, json};

/// How long to wait for a message before declaring the server stuck. A guard against a
/// hung test, not a timing assertion: a healthy server answers in milliseconds.
const STUCK: Duration = Duration::from_secs(60);

pub(crate) const INIT: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"mcp-protocol-tests","version":"0"}}}"#;

// ---------------------------------------------------------------------------------------
// A hand-driven stdio session
// ---------------------------------------------------------------------------------------

/// `mekara mcp` over stdio, read line by line. Every stdout line is kept, so a test can
/// check that all of them are protocol.
struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every line the server wrote to stdout, as written.
    stdout: Vec<String>,
    /// Messages read while waiting for another one.
    pending: VecDeque<Json>,
    stderr: Arc<Mutex<String>>,
    next_id: u64,
}

impl Session {
    /// Spawns `cmd` (a `mekara mcp` command) and does the MCP handshake.
    fn start(cmd: Command) -> Session {
        Session::start_as(cmd, "mcp-protocol-tests")
    }

    /// [`Session::start`], introducing itself as the client `name`.
    fn start_as(cmd: Command, name: &str) -> Session {
        let mut server = Session::spawn(cmd);
        server.send_line(&INIT.replace("\"mcp-protocol-tests\"", &format!("{name:?}")));
        let init = server.response(&json!(0));
        assert_eq!(
            init["result"]["serverInfo"]["name"], "mekara",
            "initialize: {init}"
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    /// Spawns `cmd` (a `mekara mcp` command), without a handshake.
    fn spawn(mut cmd: Command) -> Session {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mekara mcp");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Drained all along: a server logging at `debug` would block on a full pipe.
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let mut err = child.stderr.take().expect("stderr");
        thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = err.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .expect("stderr lock")
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdin = child.stdin.take();
        Session {
            child,
            stdin,
            lines,
            stdout: Vec::new(),
            pending: VecDeque::new(),
            stderr,
            next_id: 1,
        }
    }

    /// `mekara mcp` in `project`.
    fn in_project(project: &Project) -> Session {
        Session::start(project.command(&["mcp"]))
    }

    fn stderr(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }

    /// Writes `line` and a newline to the server's stdin.
    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).expect("write stdin");
        stdin.write_all(b"\n").expect("write stdin");
        stdin.flush().expect("flush stdin");
    }

    fn send(&mut self, message: &Json) {
        self.send_line(&message.to_string());
    }

    /// The next message from stdout, or `None` at end of file. Panics on a line that is
    /// not a JSON-RPC message: stdout belongs to the protocol.
    fn recv(&mut self) -> Option<Json> {
        match self.lines.recv_timeout(STUCK) {
            Ok(line) => {
                self.stdout.push(line.clone());
                if let Err(e) = check_protocol_line(&line) {
                    panic!(
                        "stdout carried a line that is not a JSON-RPC message ({e}):\n{line}\nstderr:\n{}",
                        self.stderr()
                    );
                }
                Some(serde_json::from_str(&line).expect("checked above"))
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!(
                "no message from the server in {STUCK:?}; stdout so far:\n{}\nstderr:\n{}",
                self.stdout.join("\n"),
                self.stderr()
            ),
        }
    }

    /// The response to request `id`; other messages read meanwhile are kept for later.
    fn response(&mut self, id: &Json) -> Json {
        if let Some(at) = self
            .pending
            .iter()
            .position(|m| is_response(m) && &m["id"] == id)
        {
            return self.pending.remove(at).expect("position is in range");
        }
        loop {
            let Some(message) = self.recv() else {
                panic!(
                    "the server closed stdout before answering request {id}; stderr:\n{}",
                    self.stderr()
                );
            };
            if is_response(&message) && &message["id"] == id {
                return message;
            }
            self.pending.push_back(message);
        }
    }

    /// Sends request `method` with `params` and returns its response.
    fn request(&mut self, method: &str, params: Option<Json>) -> Json {
        let id = json!(self.next_id);
        self.next_id += 1;
        let mut message = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if let Some(params) = params {
            message["params"] = params;
        }
        self.send(&message);
        self.response(&id)
    }

    /// Sends `ping` and checks that it is answered: the server is still serving.
    fn ping(&mut self) {
        let reply = self.request("ping", None);
        assert_eq!(reply["result"], json!({}), "ping: {reply}");
    }

    /// Sends the raw `line`, then a `ping`, and returns what the server wrote in reply to
    /// `line` (every message that came before the ping's answer). Panics if the ping is
    /// not answered.
    fn bad_then_ping(&mut self, line: &str) -> Vec<Json> {
        self.pending.clear();
        self.send_line(line);
        self.ping();
        self.pending.drain(..).collect()
    }

    /// Sends request `method` (raw `params`) and returns its JSON-RPC error, then pings.
    fn rpc_error(&mut self, method: &str, params: Option<Json>) -> Json {
        let reply = self.request(method, params.clone());
        let Some(error) = reply.get("error") else {
            panic!("{method} {params:?}: expected a JSON-RPC error, got {reply}");
        };
        let error = error.clone();
        self.ping();
        error
    }

    /// Calls tool `name` with `arguments` and returns the whole `result`.
    fn call(&mut self, name: &str, arguments: Json) -> Json {
        let reply = self.request(
            "tools/call",
            Some(json!({"name": name, "arguments": arguments})),
        );
        let Some(result) = reply.get("result") else {
            panic!("tools/call {name} {arguments}: expected a result, got {reply}");
        };
        result.clone()
    }

    /// Calls tool `name`, expects a tool result with `isError: true`, pings, and returns
    /// the result's text.
    fn tool_error(&mut self, name: &str, arguments: Json) -> String {
        let result = self.call(name, arguments.clone());
        assert_eq!(
            result["isError"], true,
            "tools/call {name} {arguments}: expected isError, got {result}"
        );
        self.ping();
        result_text(&result)
    }

    /// The names `tools/list` gives.
    fn tool_names(&mut self) -> Vec<String> {
        let reply = self.request("tools/list", None);
        reply["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("tools/list: {reply}"))
            .iter()
            .map(|t| t["name"].as_str().expect("tool name").to_string())
            .collect()
    }

    /// Closes stdin, reads stdout to its end and waits for the server to exit. Returns
    /// the exit status and every stdout line of the session.
    fn close(mut self) -> (ExitStatus, Vec<String>) {
        drop(self.stdin.take());
        while self.recv().is_some() {}
        let status = self.child.wait().expect("wait for mekara mcp");
        (status, std::mem::take(&mut self.stdout))
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Whether `message` is a response (it has `result` or `error`).
fn is_response(message: &Json) -> bool {
    message.get("result").is_some() || message.get("error").is_some()
}

/// The text of a tool result's content.
fn result_text(result: &Json) -> String {
    result["content"]
        .as_array()
        .unwrap_or_else(|| panic!("a tool result without content: {result}"))
        .iter()
        .filter_map(|c| c["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Checks that `line` is one JSON-RPC 2.0 message: a request, a notification, or a
/// response with an `id` and exactly one of `result` and `error`.
fn check_protocol_line(line: &str) -> Result<(), String> {
    let value: Json = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let object = value.as_object().ok_or("not a JSON object")?;
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err("no `\"jsonrpc\": \"2.0\"`".into());
    }
    let id_ok = |id: &Json| id.is_string() || id.is_i64() || id.is_u64() || id.is_null();
    if let Some(method) = object.get("method") {
        if !method.is_string() {
            return Err("`method` is not a string".into());
        }
        if object.contains_key("result") || object.contains_key("error") {
            return Err("a request with `result` or `error`".into());
        }
        if let Some(id) = object.get("id")
            && !(id.is_string() || id.is_i64() || id.is_u64())
        {
            return Err("a request whose `id` is not a string or an integer".into());
        }
        return Ok(());
    }
    let Some(id) = object.get("id") else {
        return Err("a response without `id`".into());
    };
    if !id_ok(id) {
        return Err("a response whose `id` is not a string, an integer or null".into());
    }
    match (object.get("result"), object.get("error")) {
        (Some(_), None) => Ok(()),
        (None, Some(error)) => {
            if error["code"].is_i64() && error["message"].is_string() {
                Ok(())
            } else {
                Err("an `error` without an integer `code` and a string `message`".into())
            }
        }
        _ => Err("a response needs exactly one of `result` and `error`".into()),
    }
}

/// The `error` members of the error responses among `messages`.
fn errors(messages: &[Json]) -> Vec<&Json> {
    messages
        .iter()
        .filter_map(|m| m.get("error").filter(|_| m.get("method").is_none()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Malformed JSON-RPC on stdio
// ---------------------------------------------------------------------------------------

#[test]
fn a_line_that_is_not_json_does_not_stop_the_server() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    for line in [
        "this is not json",
        "{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"ping\"",
        "{'single': 'quotes'}",
        "\u{1b}[31mred\u{1b}[0m",
    ] {
        let replies = server.bad_then_ping(line);
        // Nothing but (at most) error responses may come back for it.
        assert!(
            replies.iter().all(|m| m.get("error").is_some()),
            "{line:?} drew {replies:?}"
        );
    }
    server.ping();
}

#[test]
fn a_request_before_initialize_on_stdio_is_told_to_initialize_first() {
    // Regression: rmcp took it for a session-less request and answered about a missing
    // `_meta`, then ended the session.
    let project = Project::new();
    let input = [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
    ]
    .join("\n");
    let run = project.run(&["mcp"], &format!("{input}\n"));
    run.expect_code(0);
    let replies: Vec<Json> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON-RPC line"))
        .collect();
    let by_id = |id: u64| {
        replies
            .iter()
            .find(|r| r["id"] == id)
            .unwrap_or_else(|| panic!("no reply {id} in {replies:?}"))
    };
    assert_eq!(by_id(2)["result"]["serverInfo"]["name"], "mekara");
    assert_eq!(by_id(3)["result"], serde_json::json!({}));
    assert_eq!(by_id(1)["error"]["code"], -32600);
    insta::assert_snapshot!(by_id(1)["error"]["message"].as_str().unwrap_or_default());
}

#[test]
fn a_line_that_is_not_json_gets_a_parse_error() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let mut seen = String::new();
    for line in [
        "this is not json",
        "{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"ping\"",
        "{'single': 'quotes'}",
    ] {
        let replies = server.bad_then_ping(line);
        assert_eq!(replies.len(), 1, "{line:?}: replies {replies:?}");
        assert_eq!(replies[0]["error"]["code"], -32700, "{line:?}: {replies:?}");
        assert_eq!(
            replies[0].get("id"),
            Some(&Json::Null),
            "{line:?}: {replies:?}"
        );
        let message = replies[0]["error"]["message"].as_str().unwrap_or_default();
        seen.push_str(&format!("{line}\n{message}\n\n"));
    }
    insta::assert_snapshot!(seen);
}

#[test]
fn json_that_is_not_a_jsonrpc_message_is_an_invalid_request() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let mut seen = String::new();
    for line in [
        "[]",
        "42",
        "\"ping\"",
        "null",
        "true",
        r#"{"foo":1}"#,
        r#"{"jsonrpc":"2.0"}"#,
        r#"{"jsonrpc":"2.0","id":1}"#,
        r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
        r#"{"jsonrpc":"2.0","id":{"an":"object"},"method":"ping"}"#,
        r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
    ] {
        let replies = server.bad_then_ping(line);
        let errors = errors(&replies);
        assert_eq!(errors.len(), 1, "{line}: replies {replies:?}");
        assert_eq!(errors[0]["code"], -32600, "{line}: replies {replies:?}");
        let message = errors[0]["message"].as_str().unwrap_or_default();
        seen.push_str(&format!("{line}\n{message}\n\n"));
        assert!(
            replies.iter().all(|m| m.get("result").is_none()),
            "{line} drew a result: {replies:?}"
        );
    }
    insta::assert_snapshot!(seen);
    server.ping();
}

#[test]
fn invalid_request_errors_carry_an_id() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    for line in ["[]", "42", r#"{"foo":1}"#] {
        let replies = server.bad_then_ping(line);
        assert_eq!(replies.len(), 1, "{line}: replies {replies:?}");
        assert_eq!(
            replies[0].get("id"),
            Some(&Json::Null),
            "{line}: replies {replies:?}"
        );
    }
}

#[test]
fn stray_responses_blank_lines_and_unknown_notifications_are_ignored_quietly() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    for line in [
        "",
        "   ",
        r#"{"jsonrpc":"2.0","id":4242,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":4243,"error":{"code":-1,"message":"no"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/no-such-thing","params":{}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":999}}"#,
    ] {
        let replies = server.bad_then_ping(line);
        assert!(replies.is_empty(), "{line:?} drew {replies:?}");
    }
}

#[test]
fn a_line_over_the_size_limit_is_dropped_and_the_server_keeps_serving() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    // The stdio transport refuses messages over 16 MiB; this one is a little over.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":77,"method":"ping","params":{{"pad":"{}"}}}}"#,
        "x".repeat(17 * 1024 * 1024)
    );
    let replies = server.bad_then_ping(&huge);
    assert!(
        replies.iter().all(|m| m.get("error").is_some()),
        "the oversized request was served: {replies:?}"
    );
    server.ping();
}

#[test]
fn an_unknown_method_is_method_not_found() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let mut seen = String::new();
    for method in ["no/such-method", "tools/explode", "Ping", ""] {
        let error = server.rpc_error(method, None);
        assert_eq!(error["code"], -32601, "{method:?}: {error}");
        let message = error["message"].as_str().expect("message");
        seen.push_str(&format!("{method:?}: {message}\n"));
    }
    insta::assert_snapshot!(seen);
    let error = server.rpc_error("no/such-method", Some(json!({"with": ["params"]})));
    assert_eq!(error["code"], -32601, "{error}");
}

#[test]
fn calling_an_unknown_tool_is_invalid_params_naming_it_and_the_real_ones() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let tools = server.tool_names();
    assert_eq!(
        tools,
        [
            "start",
            "continue_compiled_script",
            "finish_nl_script",
            "status",
            "list_scripts",
            "resume",
            "eject_script"
        ]
    );
    let mut seen = String::new();
    for unknown in ["bogus", "mcp__mekara__start", "Start", "continue"] {
        let error = server.rpc_error(
            "tools/call",
            Some(json!({"name": unknown, "arguments": {}})),
        );
        assert_eq!(error["code"], -32602, "{unknown}: {error}");
        let message = error["message"].as_str().expect("message");
        seen.push_str(&format!("{unknown}: {message}\n"));
    }
    insta::assert_snapshot!(seen);
    assert!(project.run_ids().is_empty(), "a run was started");
}

#[test]
fn wrong_argument_types_are_tool_errors_naming_the_argument() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let cases = [
        ("start", json!({"name": 5})),
        ("start", json!({"name": ["test/random"]})),
        (
            "start",
            json!({"name": "test/random", "arguments": {"a": 1}}),
        ),
        ("start", json!({"name": "test/random", "working_dir": true})),
        ("continue_compiled_script", json!({"outputs": "x"})),
        ("continue_compiled_script", json!({"outputs": [1, 2]})),
        ("resume", json!({"run_id": 20_261_122})),
    ];
    let mut seen = String::new();
    for (tool, arguments) in cases {
        let text = server.tool_error(tool, arguments.clone());
        seen.push_str(&format!("{tool} {arguments}\n{text}\n\n"));
    }
    insta::assert_snapshot!(seen);
    assert!(project.run_ids().is_empty(), "a bad call started a run");
}

#[test]
fn missing_required_arguments_are_tool_errors_naming_the_argument() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let mut seen = String::new();
    for (tool, arguments) in [
        ("start", json!({})),
        ("start", json!({"arguments": "x"})),
        ("start", json!({"name": null})),
        ("continue_compiled_script", json!({})),
    ] {
        let text = server.tool_error(tool, arguments.clone());
        seen.push_str(&format!("{tool} {arguments}\n{text}\n\n"));
    }

    // `arguments` left out of the call altogether.
    let reply = server.request("tools/call", Some(json!({"name": "start"})));
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    let text = result_text(&reply["result"]);
    seen.push_str(&format!("start without arguments\n{text}\n"));
    insta::assert_snapshot!(seen);
    server.ping();
    assert!(project.run_ids().is_empty(), "a bad call started a run");
}

#[test]
fn unknown_arguments_are_tool_errors_naming_them() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let mut seen = String::new();
    for (tool, arguments) in [
        ("start", json!({"name": "test/random", "bogus": 1})),
        ("status", json!({"verbose": true})),
        (
            "continue_compiled_script",
            json!({"outputs": {}, "guess": 5}),
        ),
    ] {
        let text = server.tool_error(tool, arguments.clone());
        seen.push_str(&format!("{tool} {arguments}\n{text}\n\n"));
    }
    insta::assert_snapshot!(seen);
    assert!(project.run_ids().is_empty(), "a bad call started a run");

    // The refused `start` changed nothing: the same call without the stray argument works.
    let result = server.call("start", json!({"name": "test/random"}));
    assert_eq!(result["isError"], false, "{result}");
    insta::assert_snapshot!(
        "started_after_the_refused_calls",
        crate::common::reply_shown(&project, &result_text(&result))
    );
    assert_eq!(project.run_ids().len(), 1);
}

#[test]
fn malformed_params_of_a_known_method_are_invalid_params() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let mut seen = String::new();
    for (method, params) in [
        ("tools/call", None),
        ("tools/call", Some(json!({"name": 5}))),
        (
            "tools/call",
            Some(json!({"name": "status", "arguments": [1]})),
        ),
        ("prompts/get", Some(json!({}))),
        (
            "prompts/get",
            Some(json!({"name": "test/random", "arguments": "x"})),
        ),
    ] {
        let error = server.rpc_error(method, params.clone());
        assert_eq!(error["code"], -32602, "{method} {params:?}: {error}");
        let message = error["message"].as_str().expect("message");
        let params = params.map_or_else(|| "no params".to_string(), |p| p.to_string());
        seen.push_str(&format!("{method} {params}\n{message}\n\n"));
    }
    insta::assert_snapshot!(seen);
}

/// `arguments` is optional (Claude Code refuses a command missing a required argument)
/// except for Gemini CLI, which passes the text typed after `/name` only to required ones.
#[test]
fn prompts_argument_is_required_only_for_gemini_cli() {
    let project = Project::new();
    project.write(".mekara/scripts/nl/greet.md", "Say hi to $ARGUMENTS.\n");
    for (client, required) in [
        ("mcp-protocol-tests", false),
        ("claude-code", false),
        ("gemini-cli-mcp-client", true),
    ] {
        let mut server = Session::start_as(project.command(&["mcp"]), client);
        let reply = server.request("prompts/list", None);
        let prompts = reply["result"]["prompts"].as_array().expect("prompts");
        let greet = prompts
            .iter()
            .find(|p| p["name"] == "greet")
            .unwrap_or_else(|| panic!("no `greet` prompt: {reply}"));
        assert_eq!(
            greet["arguments"],
            json!([{"name": "arguments", "description": "Replaces `$ARGUMENTS` in the script's instructions.", "required": required}]),
            "{client}"
        );
    }
}

#[test]
fn prompts_get_of_an_unknown_prompt_is_an_error_naming_it() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let error = server.rpc_error("prompts/get", Some(json!({"name": "no-such-prompt"})));
    assert_eq!(error["code"], -32602, "{error}");
    insta::assert_snapshot!(error["message"].as_str().expect("message"));

    // A real one works afterwards.
    let reply = server.request("prompts/get", Some(json!({"name": "test/random"})));
    assert!(reply["result"]["messages"].is_array(), "{reply}");
}

#[test]
fn prompts_get_with_a_non_string_arguments_argument_is_invalid_params() {
    let project = Project::new();
    let mut server = Session::in_project(&project);
    let mut seen = String::new();
    for arguments in [
        json!({"arguments": 5}),
        json!({"arguments": ["a"]}),
        json!({"arguments": {"a": "b"}}),
        json!({"arguments": true}),
        json!({"argumnets": "typo"}),
    ] {
        let error = server.rpc_error(
            "prompts/get",
            Some(json!({"name": "test/random", "arguments": arguments})),
        );
        assert_eq!(error["code"], -32602, "{arguments}: {error}");
        let message = error["message"].as_str().expect("message");
        seen.push_str(&format!("{arguments}: {message}\n"));
    }
    insta::assert_snapshot!(seen);

    let reply = server.request(
        "prompts/get",
        Some(json!({"name": "test/random", "arguments": {"arguments": "hello"}})),
    );
    assert!(reply["result"]["messages"].is_array(), "{reply}");
}

// ---------------------------------------------------------------------------------------
// stdout carries only protocol
// ---------------------------------------------------------------------------------------

/// Regression: an llm output holding a number no script can hold (`1e400`) was journaled,
/// then panicked every evaluation of the run: the call failed, the session stopped answering
/// and the run could never be resumed. It is refused before it reaches the journal, naming
/// where it is, and the step is still pending.
#[test]
fn an_output_number_no_script_can_hold_is_refused_before_the_journal() {
    let project = Project::new();
    project.script(
        "number",
        "---\ndescription: A number\n---\n1. Ask for a number.\n2. Show it.\n",
        Some(
            "def execute(request):\n    r = llm(\"Give a number\", expects = {\"n\": \"a number\"})\n    auto(\"echo got \" + str(r.outputs[\"n\"]))\n",
        ),
    );
    let mut session = Session::in_project(&project);
    session.call("start", json!({"name": "number"}));
    let mut seen = String::new();
    for (id, outputs) in [
        (100, r#"{"n": 1e400}"#),
        (101, r#"{"n": -2.5E+999}"#),
        (102, r#"{"n": [1, {"x": 1e400}]}"#),
    ] {
        session.send_line(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"continue_compiled_script","arguments":{{"outputs":{outputs}}}}}}}"#
        ));
        let reply = session.response(&json!(id));
        let result = &reply["result"];
        assert_eq!(result["isError"], true, "{reply}");
        let text = result_text(result);
        seen.push_str(&format!("{outputs}\n{text}\n\n"));
    }
    let [id] = project.run_ids().try_into().expect("one run");
    assert!(
        !project.journal_events_text(&id).contains("e400"),
        "nothing was journaled"
    );
    // The session still answers, and a whole number of any size goes through exactly.
    let big = "123456789012345678901234567890";
    session.send_line(&format!(
        r#"{{"jsonrpc":"2.0","id":103,"method":"tools/call","params":{{"name":"continue_compiled_script","arguments":{{"outputs":{{"n":{big}}}}}}}}}"#
    ));
    let done = session.response(&json!(103));
    let text = result_text(&done["result"]);
    seen.push_str(&format!("{{\"n\": {big}}}\n{text}\n"));
    insta::assert_snapshot!(project.scrub(&seen));
}

/// Regression: the only check that a call without a progress token gets no notifications
/// used rmcp's client, which gives every request a token, and called `status`, which runs no
/// step; it could not fail.
#[test]
fn progress_goes_only_to_a_call_that_asked_for_it() {
    let project = Project::new();
    project.script(
        "count",
        "---\ndescription: Count\n---\n1. Count.\n",
        Some(
            "def execute(request):\n    auto(\"echo one; sleep 0.3; echo two\")\n    llm(\"say done\")\n    auto(\"echo three; sleep 0.3; echo four\")\n",
        ),
    );
    let mut session = Session::in_project(&project);
    let progress_of = |messages: &[Json], step: &str| -> Vec<Json> {
        messages
            .iter()
            .filter(|m| m["method"] == "notifications/progress")
            .filter(|m| {
                m["params"]["message"]
                    .as_str()
                    .is_some_and(|t| t.starts_with(step))
            })
            .cloned()
            .collect()
    };
    session.pending.clear();
    session.request(
        "tools/call",
        Some(json!({
            "name": "start",
            "arguments": {"name": "count"},
            "_meta": {"progressToken": "asked"}
        })),
    );
    let asked: Vec<Json> = session.pending.drain(..).collect();
    let reported = progress_of(&asked, "count[0]");
    assert!(
        !reported.is_empty(),
        "a call with a token hears of its step: {asked:?}"
    );
    assert!(
        reported
            .iter()
            .all(|m| m["params"]["progressToken"] == "asked"),
        "{reported:?}"
    );
    let done = session.call("continue_compiled_script", json!({"outputs": {}}));
    insta::assert_snapshot!(
        "done_after_the_progress",
        project.scrub(&result_text(&done))
    );
    session.ping();
    let unasked: Vec<Json> = session.pending.drain(..).collect();
    assert_eq!(
        progress_of(&unasked, "count[2]"),
        Vec::<Json>::new(),
        "a call without a token hears nothing of its step"
    );
}

/// A project whose script `noisy` writes a lot to its own stdout and stderr, reads its
/// stdin, leaves a process behind that writes later, and prints from `execute` (which the
/// terminal shows, and `mekara mcp` logs) and from a function step.
fn noisy_project() -> Project {
    let project = Project::new();
    project.script(
        "noisy",
        "---\ndescription: Make noise\n---\n1. Make noise.\n2. Say done.\n",
        Some(concat!(
            "def execute(request):\n",
            "    print(\"EXECUTE-PRINT\")\n",
            "    auto(\"for i in $(seq 1 20000); do echo STEP-STDOUT line $i; done; ",
            "seq 1 5000 | sed 's/^/STEP-STDERR /' >&2; cat; ",
            "(sleep 0.2; echo STEP-LATE) &\")\n",
            "    auto(say, {\"message\": \"STEP-PRINT\"})\n",
            "    llm(\"Step 2: say done\")\n",
            "\n",
            "def say(message):\n",
            "    for i in range(100):\n",
            "        print(message, i)\n",
        )),
    );
    project
}

/// Drives `noisy` to its end on `cmd` and checks that every stdout line is protocol.
/// Returns the server's stderr.
fn drive_noisy(project: &Project, cmd: Command) -> String {
    let mut server = Session::start(cmd);
    let reply = server.request(
        "tools/call",
        Some(json!({
            "name": "start",
            "arguments": {"name": "noisy"},
            "_meta": {"progressToken": "noisy-progress"},
        })),
    );
    let result = &reply["result"];
    assert_eq!(result["isError"], false, "{reply}");
    let text = result_text(result);
    // The step did run and write: its output is in the reply, not on stdout. Pinned
    // without the lines of the step's own output after its first: its stdout and stderr
    // come through two pipes, read as they come.
    let reply: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with("  STEP-STD") || *l == "  STEP-STDOUT line 1")
        .collect();
    insta::assert_snapshot!("noisy_started", project.scrub(&reply.join("\n")));
    // The step's `cat` got no protocol bytes to eat: the server still answers.
    server.ping();
    let tools = server.tool_names();
    for tool in [
        "start",
        "continue_compiled_script",
        "finish_nl_script",
        "status",
    ] {
        assert!(tools.iter().any(|t| t == tool), "{tool} in {tools:?}");
    }
    let done = server.call("continue_compiled_script", json!({"outputs": {}}));
    assert_eq!(done["isError"], false, "{done}");
    insta::assert_snapshot!("noisy_done", project.scrub(&result_text(&done)));
    assert_eq!(project.run_ids().len(), 1);

    let stderr = server.stderr.clone();
    let (status, stdout) = server.close();
    let stderr = stderr.lock().expect("stderr lock").clone();
    assert!(
        status.success(),
        "mekara mcp exited with {status}; stderr:\n{stderr}"
    );
    for line in &stdout {
        if let Err(e) = check_protocol_line(line) {
            panic!("stdout line is not JSON-RPC ({e}): {line}");
        }
        for raw in ["STEP-STDOUT", "STEP-STDERR", "STEP-LATE", "STEP-PRINT"] {
            assert!(
                !line.starts_with(raw),
                "a step's output reached stdout: {line}"
            );
        }
    }
    // Replies to initialize, start, ping, tools/list, continue at the least.
    assert!(stdout.len() >= 5, "stdout:\n{}", stdout.join("\n"));
    stderr
}

#[test]
fn stdout_carries_only_protocol_while_a_step_floods_its_own_output() {
    let project = noisy_project();
    let stderr = drive_noisy(&project, project.command(&["mcp"]));
    assert!(
        !stderr.contains("STEP-STDOUT"),
        "step output leaked to stderr:\n{stderr}"
    );
}

#[test]
fn stdout_carries_only_protocol_with_debug_logging() {
    let project = noisy_project();
    let mut cmd = project.command(&["mcp"]);
    // A bare level raises mekara's own logs; naming rmcp makes the protocol layer speak too.
    cmd.env("MEKARA_LOG", "debug,rmcp=debug");
    let stderr = drive_noisy(&project, cmd);
    // The logs are there, on stderr.
    assert!(
        stderr.contains("DEBUG"),
        "no debug logs on stderr:\n{stderr}"
    );
}

// ---------------------------------------------------------------------------------------
// Streamable HTTP
// ---------------------------------------------------------------------------------------

/// `mekara mcp --http 127.0.0.1:0`, with the port it printed.
pub(crate) struct HttpServer {
    child: Child,
    pub(crate) port: u16,
    stderr: Arc<Mutex<String>>,
}

impl HttpServer {
    fn start(project: &Project) -> HttpServer {
        HttpServer::start_with(project, &["mcp"], &[])
    }

    /// `mekara ARGS --http 127.0.0.1:0` (`mcp` or `serve ...`) with `env` set.
    pub(crate) fn start_with(project: &Project, args: &[&str], env: &[(&str, &str)]) -> HttpServer {
        let mut command = project.command(args);
        command.args(["--http", "127.0.0.1:0"]);
        for (name, value) in env {
            command.env(name, value);
        }
        HttpServer::spawn(command, &format!("mekara {}", args[0]))
    }

    /// Runs `command`, which starts a server whose `listening on` line starts with `label`.
    fn spawn(mut command: Command, label: &str) -> HttpServer {
        let label = format!("{label}: listening on http://");
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mekara mcp --http");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = stderr.clone();
        let err = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                sink.lock()
                    .expect("stderr lock")
                    .push_str(&format!("{line}\n"));
                if let Some(rest) = line.strip_prefix(&label) {
                    let _ = tx.send(rest.to_string());
                }
            }
        });
        let address = match rx.recv_timeout(STUCK) {
            Ok(address) => address,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "no `listening on` line ({e}); stderr:\n{}",
                    stderr.lock().expect("stderr lock")
                );
            }
        };
        let port = address
            .strip_prefix("127.0.0.1:")
            .and_then(|rest| rest.strip_suffix("/mcp"))
            .and_then(|port| port.parse().ok())
            .unwrap_or_else(|| panic!("unexpected address `{address}`"));
        HttpServer {
            child,
            port,
            stderr,
        }
    }

    /// `POST path` with `body`, the `Host` header `host` (None: `127.0.0.1:PORT`) and
    /// `extra` headers.
    fn post(&self, path: &str, host: Option<&str>, extra: &[(&str, &str)], body: &str) -> Response {
        let host = host.map_or_else(|| format!("127.0.0.1:{}", self.port), str::to_string);
        let mut request = format!(
            "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\
             Connection: close\r\n",
            body.len()
        );
        for (name, value) in extra {
            request.push_str(&format!("{name}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(body);
        self.exchange(&request)
    }

    /// `POST /mcp` of `initialize` with `extra` headers.
    fn initialize(&self, host: Option<&str>, extra: &[(&str, &str)]) -> Response {
        self.post("/mcp", host, extra, INIT)
    }

    /// Sends the raw `request` and reads the whole response (the server closes the
    /// connection after it, as asked).
    fn exchange(&self, request: &str) -> Response {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream.set_read_timeout(Some(STUCK)).expect("read timeout");
        stream.write_all(request.as_bytes()).expect("send request");
        let mut raw = Vec::new();
        if let Err(e) = stream.read_to_end(&mut raw) {
            panic!(
                "reading the response failed ({e}); got so far:\n{}\nserver stderr:\n{}",
                String::from_utf8_lossy(&raw),
                self.stderr.lock().expect("stderr lock")
            );
        }
        Response::parse(&raw)
    }

    /// Checks that a plain `initialize` still works.
    fn assert_serving(&self) {
        let response = self.initialize(None, &[]);
        response.assert_initialized();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An HTTP response.
#[derive(Debug)]
struct Response {
    status: u16,
    /// Header names in lower case.
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn parse(raw: &[u8]) -> Response {
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| panic!("no end of headers in {:?}", String::from_utf8_lossy(raw)));
        let head = String::from_utf8_lossy(&raw[..split]).into_owned();
        let mut lines = head.split("\r\n");
        let status_line = lines.next().expect("status line");
        let status = status_line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("bad status line `{status_line}`"));
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        let rest = &raw[split + 4..];
        let chunked = headers
            .iter()
            .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
        let body = if chunked {
            dechunk(rest)
        } else {
            rest.to_vec()
        };
        Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC messages in the body: the `data:` lines of an event stream, or the
    /// body itself when it is JSON.
    fn messages(&self) -> Vec<Json> {
        if self
            .header("content-type")
            .is_some_and(|t| t.starts_with("application/json"))
        {
            return vec![serde_json::from_str(&self.body).expect("JSON body")];
        }
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("bad event data {d}: {e}")))
            .collect()
    }

    /// Panics unless this is a successful answer to `initialize` that opened a session.
    fn assert_initialized(&self) {
        assert_eq!(self.status, 200, "{self:#?}");
        assert!(
            self.header("mcp-session-id")
                .is_some_and(|id| !id.is_empty()),
            "no mcp-session-id: {self:#?}"
        );
        let messages = self.messages();
        let answer = messages
            .iter()
            .find(|m| m["id"] == 0)
            .unwrap_or_else(|| panic!("no answer to initialize: {self:#?}"));
        assert_eq!(answer["result"]["serverInfo"]["name"], "mekara", "{answer}");
    }

    /// Panics unless this is a 4xx refusal.
    fn assert_refused(&self) {
        assert!(
            (400..500).contains(&self.status),
            "expected a 4xx refusal: {self:#?}"
        );
        assert!(self.header("mcp-session-id").is_none(), "{self:#?}");
        assert!(!self.body.contains("serverInfo"), "{self:#?}");
    }
}

/// Decodes a chunked body.
fn dechunk(mut raw: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(end) = raw.windows(2).position(|w| w == b"\r\n") {
        let size_text = String::from_utf8_lossy(&raw[..end]);
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .unwrap_or_else(|_| panic!("bad chunk size `{size_text}`"));
        if size == 0 {
            break;
        }
        let start = end + 2;
        let chunk = raw
            .get(start..start + size)
            .unwrap_or_else(|| panic!("a chunk cut short: {:?}", String::from_utf8_lossy(raw)));
        body.extend_from_slice(chunk);
        raw = raw.get(start + size + 2..).unwrap_or_default();
    }
    body
}

#[test]
fn http_initialize_with_a_loopback_host_opens_a_session() {
    let project = Project::new();
    let server = HttpServer::start(&project);
    server.initialize(None, &[]).assert_initialized();
    let host = format!("localhost:{}", server.port);
    server.initialize(Some(&host), &[]).assert_initialized();
}

#[test]
fn http_refuses_a_foreign_host_header() {
    let project = Project::new();
    let server = HttpServer::start(&project);
    let with_port = format!("evil.example:{}", server.port);
    let mut seen = String::new();
    for host in ["evil.example", with_port.as_str(), "127.0.0.1.evil.example"] {
        let response = server.initialize(Some(host), &[]);
        response.assert_refused();
        seen.push_str(&format!("{host}: {}\n", response.body));
    }
    insta::assert_snapshot!(seen.replace(&server.port.to_string(), "[PORT]"));
    server.assert_serving();
}

#[test]
fn http_refuses_a_foreign_origin() {
    let project = Project::new();
    let server = HttpServer::start(&project);
    let mut seen = String::new();
    for origin in [
        "http://evil.example",
        "http://localhost.evil.example",
        "null",
    ] {
        let response = server.initialize(None, &[("Origin", origin)]);
        response.assert_refused();
        seen.push_str(&format!("{origin}: {}\n", response.body));
    }
    insta::assert_snapshot!(seen);
    server.assert_serving();
}

#[test]
fn http_accepts_a_loopback_origin() {
    let project = Project::new();
    let server = HttpServer::start(&project);
    for origin in [
        "http://localhost:1234",
        "http://127.0.0.1:1234",
        "http://localhost",
    ] {
        server
            .initialize(None, &[("Origin", origin)])
            .assert_initialized();
    }
}

#[test]
fn http_other_paths_are_not_found() {
    let project = Project::new();
    let server = HttpServer::start(&project);
    for path in ["/other", "/", "/mcp/more", "/MCP"] {
        let response = server.post(path, None, &[], INIT);
        assert_eq!(response.status, 404, "{path}: {response:#?}");
        assert!(response.header("mcp-session-id").is_none(), "{response:#?}");
    }
    let get = server.exchange(&format!(
        "GET /other HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
        server.port
    ));
    assert_eq!(get.status, 404, "{get:#?}");
    server.assert_serving();
}

/// Runs `mekara mcp --http ADDR`, which must refuse to start, and returns what it printed.
fn refused_start(project: &Project, addr: &str) -> std::process::Output {
    let child = project
        .command(&["mcp", "--http", addr])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn mekara mcp --http");
    // Had it started listening instead of refusing, it would never exit: wait in a
    // thread, and kill it (our own child, by its pid) if it is still there much later.
    let id = child.id();
    let (tx, rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        let output = child.wait_with_output().expect("wait");
        let _ = tx.send(());
        output
    });
    if rx.recv_timeout(STUCK).is_err() {
        let _ = Command::new("kill").arg(id.to_string()).status();
        panic!("`mekara mcp --http {addr}` did not refuse to start");
    }
    waiter.join().expect("waiter")
}

#[test]
fn http_on_a_non_loopback_address_needs_allow_host() {
    let project = Project::new();
    for addr in ["0.0.0.0:0", "[::]:0"] {
        let output = refused_start(&project, addr);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !output.status.success() && output.status.code().is_some(),
            "{addr}: {:?}\nstderr:\n{stderr}",
            output.status
        );
        insta::assert_snapshot!(stderr);
        assert!(
            output.stdout.is_empty(),
            "{addr}: stdout {:?}",
            output.stdout
        );
    }
}

#[test]
fn http_on_a_non_loopback_address_without_allow_host_is_a_usage_error() {
    let project = Project::new();
    let output = refused_start(&project, "0.0.0.0:0");
    assert_eq!(
        output.status.code(),
        Some(2),
        "stderr:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The check the stdout tests rely on, on lines it must refuse and lines it must accept.
#[test]
fn the_protocol_line_check_tells_protocol_from_noise() {
    for bad in [
        "STEP-STDOUT line 1",
        "",
        "42",
        r#"{"id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid request"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"error":{"message":"no code"}}"#,
        r#"{"jsonrpc":"2.0","method":7}"#,
    ] {
        assert!(check_protocol_line(bad).is_err(), "accepted {bad:?}");
    }
    for good in [
        r#"{"jsonrpc":"2.0","id":1,"result":{}}"#,
        r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
    ] {
        assert!(check_protocol_line(good).is_ok(), "refused {good:?}");
    }
}

/// Calls tool `name` in HTTP session `session` and returns the tool result's text.
fn http_call(server: &HttpServer, session: &str, id: u64, name: &str, arguments: Json) -> String {
    result_text(&http_tool(server, Some(session), id, name, &arguments))
}

/// Calls tool `name` over HTTP and returns the tool result: in `session` (protocol
/// `2025-06-18`), or, without one, as MCP `2026-07-28` sends it: no `initialize`, no
/// session, the protocol version in a header and in the request's `_meta`, the method and
/// tool named in headers.
fn http_tool(
    server: &HttpServer,
    session: Option<&str>,
    id: u64,
    name: &str,
    arguments: &Json,
) -> Json {
    let mut params = json!({"name": name, "arguments": arguments});
    let headers = if let Some(session) = session {
        vec![
            ("mcp-session-id", session),
            ("mcp-protocol-version", "2025-06-18"),
        ]
    } else {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "stateless-test", "version": "0"}
        });
        vec![
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", name),
        ]
    };
    let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params});
    let response = server.post("/mcp", None, &headers, &body.to_string());
    assert_eq!(response.status, 200, "{response:#?}");
    let messages = response.messages();
    let answer = messages
        .iter()
        .find(|m| m["id"] == id)
        .unwrap_or_else(|| panic!("no answer to {name}: {response:#?}"));
    assert!(answer.get("result").is_some(), "{answer}");
    answer["result"].clone()
}

/// Opens an HTTP session: `initialize`, then `notifications/initialized`.
fn http_session(server: &HttpServer) -> String {
    let response = server.initialize(None, &[]);
    response.assert_initialized();
    let session = response
        .header("mcp-session-id")
        .expect("session")
        .to_string();
    let note = server.post(
        "/mcp",
        None,
        &[
            ("mcp-session-id", &session),
            ("mcp-protocol-version", "2025-06-18"),
        ],
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    );
    assert!((200..300).contains(&note.status), "{note:#?}");
    session
}

#[test]
fn http_sessions_each_have_their_own_run() {
    let project = Project::new();
    let server = HttpServer::start(&project);
    let first = http_session(&server);
    let second = http_session(&server);
    assert_ne!(first, second);
    let started = http_call(&server, &first, 1, "start", json!({"name": "test/random"}));
    // The second session drives no run: it is shown the open runs, by id only (a handle is
    // a capability: it is never listed).
    let other = http_call(&server, &second, 1, "status", json!({}));
    assert!(!other.contains("llm step"), "{other}");
    let wrong = http_call(
        &server,
        &second,
        2,
        "continue_compiled_script",
        json!({"outputs": {"guess": 1}}),
    );
    let mine = http_call(&server, &first, 2, "status", json!({}));
    // `test:random` shows the number it picked, a line of digits alone.
    let started: String = started
        .lines()
        .map(|l| {
            if l.trim().parse::<u32>().is_ok() {
                "  [NUMBER]\n".to_string()
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    insta::assert_snapshot!(project.scrub(&format!(
        "first session, start:\n{started}\n\nsecond session, status:\n{other}\n\n\
         second session, continue:\n{wrong}\n\nfirst session, status:\n{mine}\n"
    )));
}

#[test]
fn http_a_script_past_the_heap_limit_falls_back_and_other_sessions_go_on() {
    // Regression: forty doublings of a string reached 4 GiB in the server's process, and a
    // "len overflow" panic, before the heap limit was checked.
    let project = Project::new();
    project.script(
        "grow",
        "Grow a string.\n",
        Some("def execute(request):\n    s = \"x\"\n    for i in range(40):\n        s = s + s\n"),
    );
    let server = HttpServer::start(&project);
    let hostile = http_session(&server);
    let other = http_session(&server);
    let started = http_call(&server, &other, 1, "start", json!({"name": "test/random"}));
    insta::assert_snapshot!(
        "the_other_sessions_start",
        crate::common::reply_shown(&project, &started)
    );
    let failed = http_call(&server, &hostile, 1, "start", json!({"name": "grow"}));
    // The script falls back, naming the limit and the line.
    insta::assert_snapshot!("past_the_heap_limit", project.scrub(&failed));
    let mine = http_call(&server, &other, 2, "status", json!({}));
    insta::assert_snapshot!(
        "the_other_sessions_status",
        crate::common::reply_shown(&project, &mine)
    );
    let finished = http_call(&server, &hostile, 2, "finish_nl_script", json!({}));
    assert!(!finished.contains("bug in mekara"), "{finished}");
    server.assert_serving();
}

#[test]
fn http_a_script_asking_for_gigabytes_at_once_fails_alone_and_other_sessions_go_on() {
    // Regression: one allocation past the memory cap stopped the whole server (exit 134),
    // and every session with it. Scripts are now evaluated in a child process.
    let project = Project::new();
    let server = HttpServer::start(&project);
    let other = http_session(&server);
    let started = http_call(&server, &other, 1, "start", json!({"name": "test/random"}));
    insta::assert_snapshot!(
        "the_other_sessions_start",
        crate::common::reply_shown(&project, &started)
    );
    for (k, (body, _)) in crate::memory::AT_ONCE.iter().enumerate() {
        crate::memory::grow_at_once(&project, body);
        let hostile = http_session(&server);
        let failed = http_call(&server, &hostile, 1, "start", json!({"name": "grow"}));
        // The script falls back, naming the cap and the line.
        insta::assert_snapshot!(
            format!("asking_for_gigabytes_at_once_{k}"),
            project.scrub(&failed)
        );
        let finished = http_call(&server, &hostile, 2, "finish_nl_script", json!({}));
        assert!(!finished.contains("bug in mekara"), "{finished}");
        let mine = http_call(&server, &other, 2 + k as u64, "status", json!({}));
        insta::assert_snapshot!(
            "the_other_sessions_status",
            crate::common::reply_shown(&project, &mine)
        );
    }
    server.assert_serving();
}

// ---------------------------------------------------------------------------------------
// Streamable HTTP under abuse: bounded sessions, connections and waits
// ---------------------------------------------------------------------------------------

impl HttpServer {
    /// A connection that has sent `bytes` and nothing more.
    fn open(&self, bytes: &str) -> TcpStream {
        let mut stream = TcpStream::connect(("127.0.0.1", self.port)).expect("connect");
        stream.set_read_timeout(Some(STUCK)).expect("read timeout");
        stream.write_all(bytes.as_bytes()).expect("send");
        stream
    }

    /// The text the server has logged so far.
    pub(crate) fn log(&self) -> String {
        self.stderr.lock().expect("stderr lock").clone()
    }
}

/// Reads what the server sends on `stream` until it closes it.
fn until_closed(mut stream: TcpStream) -> String {
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    String::from_utf8_lossy(&raw).into_owned()
}

#[test]
fn http_initialize_over_the_session_cap_is_answered_503_and_a_closed_session_frees_a_place() {
    // Regression: sessions were never capped (20,000 `initialize` calls exhausted the
    // server's file descriptors).
    let project = Project::new();
    let server = HttpServer::start_with(&project, &["mcp", "--max-sessions", "2"], &[]);
    let first = server.initialize(None, &[]);
    first.assert_initialized();
    server.initialize(None, &[]).assert_initialized();
    let refused = server.initialize(None, &[]);
    assert_eq!(refused.status, 503, "{refused:#?}");
    assert_eq!(refused.header("retry-after"), Some("5"), "{refused:#?}");
    insta::assert_snapshot!(refused.body);
    // Ending a session frees its place.
    let session = first.header("mcp-session-id").expect("session");
    let ended = server.exchange(&format!(
        "DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nMcp-Session-Id: {session}\r\n\
         Connection: close\r\n\r\n",
        server.port
    ));
    assert!((200..300).contains(&ended.status), "{ended:#?}");
    server.assert_serving();
}

#[test]
fn http_two_thousand_initializes_hold_sessions_at_the_cap_and_the_server_goes_on() {
    // The bounded load test: 2,000 `initialize` calls, never used again, against a cap of 50
    // set through the environment. Exactly 50 sessions open, every other call is refused at
    // once, the sessions open keep working, and the log does not flood.
    let project = Project::new();
    let server = HttpServer::start_with(&project, &["mcp"], &[("MEKARA_HTTP_MAX_SESSIONS", "50")]);
    let kept = http_session(&server);
    let started = std::time::Instant::now();
    let (mut opened, mut refused) = (1, 0);
    for _ in 1..2_000 {
        match server.initialize(None, &[]).status {
            200 => opened += 1,
            503 => refused += 1,
            other => panic!("status {other}"),
        }
    }
    eprintln!(
        "2,000 initializes against a cap of 50 took {:?}: {opened} opened, {refused} refused",
        started.elapsed()
    );
    assert_eq!((opened, refused), (50, 1_950));
    assert_eq!(server.initialize(None, &[]).status, 503);
    let listed = server.post(
        "/mcp",
        None,
        &[
            ("mcp-session-id", &kept),
            ("mcp-protocol-version", "2025-06-18"),
        ],
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    );
    assert_eq!(listed.status, 200, "{listed:#?}");
    let answer = listed.messages().into_iter().find(|m| m["id"] == 1);
    assert!(
        answer.is_some_and(|a| a["result"]["tools"].is_array()),
        "{listed:#?}"
    );
    let log = server.log();
    assert!(
        log.len() < 10_000,
        "the log grew to {} bytes:\n{log}",
        log.len()
    );
}

#[test]
fn http_idle_sessions_expire_and_free_their_place() {
    // Regression: an abandoned session was held for minutes.
    let project = Project::new();
    let server = HttpServer::start_with(
        &project,
        &["mcp", "--max-sessions", "2", "--session-idle", "1s"],
        &[],
    );
    server.assert_serving();
    server.assert_serving();
    assert_eq!(server.initialize(None, &[]).status, 503);
    thread::sleep(Duration::from_secs(3));
    server.assert_serving();
    server.assert_serving();
}

#[test]
fn http_connections_over_the_cap_are_answered_503_and_idle_ones_are_closed() {
    // Regression: a connection that never sent a request was kept open forever, and there
    // was no cap on connections.
    let project = Project::new();
    let server = HttpServer::start_with(
        &project,
        &["mcp", "--max-connections", "3", "--read-timeout", "1s"],
        &[],
    );
    let idle: Vec<TcpStream> = (0..3).map(|_| server.open("")).collect();
    // The server takes the idle connections in turn; a fourth is over the cap.
    thread::sleep(Duration::from_millis(300));
    let over = until_closed(server.open(""));
    assert!(over.starts_with("HTTP/1.1 503"), "{over}");
    insta::assert_snapshot!(
        "over_the_connection_cap",
        crate::common::lines_with(&over, &["--max-connections"])
    );
    // The idle connections are closed by the server after the read timeout...
    for stream in idle {
        assert_eq!(until_closed(stream), "", "an idle connection got an answer");
    }
    // ... and a new client is served.
    server.assert_serving();
}

#[test]
fn http_slow_headers_and_slow_bodies_are_timed_out() {
    // Regression: a client that sent its request slowly, or never finished it, held its
    // connection forever.
    let project = Project::new();
    let server = HttpServer::start_with(&project, &["mcp", "--read-timeout", "1s"], &[]);
    let started = std::time::Instant::now();
    // Headers never finished.
    let slow_headers = server.open("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    let answer = until_closed(slow_headers);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
    // A body shorter than its Content-Length.
    let slow_body = server.open(&format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\n\r\n{}",
        server.port,
        INIT.len(),
        &INIT[..10]
    ));
    let answer = until_closed(slow_body);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    insta::assert_snapshot!(
        "a_slow_body",
        crate::common::lines_with(&answer, &["--read-timeout"])
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    server.assert_serving();
}

#[test]
fn http_repeated_host_origin_or_session_headers_are_refused() {
    // Regression: with two `Host` or two `Origin` headers only the first was checked.
    let project = Project::new();
    let server = HttpServer::start(&project);
    let loopback = format!("127.0.0.1:{}", server.port);
    let mut seen = String::new();
    for extra in [
        vec![("Host", "evil.example")],
        vec![("Host", loopback.as_str())],
        vec![
            ("Origin", "http://localhost"),
            ("Origin", "http://evil.example"),
        ],
        vec![("Mcp-Session-Id", "a"), ("Mcp-Session-Id", "b")],
    ] {
        let response = server.initialize(None, &extra);
        response.assert_refused();
        assert_eq!(response.status, 400, "{response:#?}");
        seen.push_str(&response.body);
    }
    insta::assert_snapshot!(seen);
    server.assert_serving();
}

#[test]
fn http_requests_before_initialize_are_told_to_initialize_first() {
    // Regression: a request without a session got an obscure error about `_meta`.
    let project = Project::new();
    let server = HttpServer::start(&project);
    let mut seen = String::new();
    for body in [
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        r#"{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"status","arguments":{}}}"#,
    ] {
        let response = server.post("/mcp", None, &[], body);
        assert_eq!(response.status, 400, "{response:#?}");
        let messages = response.messages();
        seen.push_str(&format!("{}\n", messages[0]));
    }
    insta::assert_snapshot!(seen);
    server.assert_serving();
}

#[test]
fn http_an_oversize_body_is_answered_413_saying_the_limit() {
    // Regression: a client that wrote a body over the limit before reading met a closed
    // connection (reset under its write) instead of the answer.
    let project = Project::new();
    project.write("tools.star", "def hello():\n    return \"hi\"\n");
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{{"a":"{}"}}}}"#,
        "x".repeat(40 << 20)
    );
    let mut seen = String::new();
    for args in [&["mcp"][..], &["serve", "tools.star"]] {
        let server = HttpServer::start_with(&project, args, &[]);
        let response = server.post("/mcp", None, &[], &body);
        assert_eq!(response.status, 413, "{}: {}", args[0], response.body);
        seen.push_str(&response.body);
        server.assert_serving();
    }
    insta::assert_snapshot!(seen);
}

#[test]
fn serve_http_has_the_same_session_cap() {
    let project = Project::new();
    project.write("tools.star", "def hello():\n    return \"hi\"\n");
    let server = HttpServer::start_with(
        &project,
        &["serve", "tools.star"],
        &[("MEKARA_HTTP_MAX_SESSIONS", "1")],
    );
    let first = server.initialize(None, &[]);
    assert_eq!(first.status, 200, "{first:#?}");
    let refused = server.initialize(None, &[]);
    assert_eq!(refused.status, 503, "{refused:#?}");
    insta::assert_snapshot!("over_the_session_cap", refused.body);
}

#[test]
fn http_out_of_file_descriptors_the_server_backs_off_logs_once_and_recovers() {
    // Regression: once the file descriptors ran out, the accept loop spun and wrote 80 MB
    // of warnings in seconds. Here the server may hold 40 descriptors, fewer than its
    // default connection cap, so `accept` fails for want of descriptors.
    let project = Project::new();
    let args = ["mcp", "--http", "127.0.0.1:0"];
    let mekara = project.command(&args);
    let mut limited = Command::new("sh");
    limited.env_clear().current_dir(project.root());
    for (name, value) in mekara.get_envs() {
        if let Some(value) = value {
            limited.env(name, value);
        }
    }
    limited
        .args(["-c", r#"ulimit -n 40 && exec "$0" "$@""#])
        .arg(mekara.get_program())
        .args(args);
    let server = HttpServer::spawn(limited, "mekara mcp");
    let held: Vec<TcpStream> = (0..60)
        .filter_map(|_| TcpStream::connect(("127.0.0.1", server.port)).ok())
        .collect();
    thread::sleep(Duration::from_secs(2));
    let log = server.log();
    assert_eq!(log.matches("accept failed").count(), 1, "{log}");
    assert!(log.len() < 10_000, "the log grew to {} bytes", log.len());
    drop(held);
    thread::sleep(Duration::from_secs(2));
    server.assert_serving();
    assert!(
        server.log().contains("accepting again after"),
        "{}",
        server.log()
    );
}

/// A `tools/call` as MCP `2026-07-28` sends it (see [`http_tool`]).
fn stateless_call(
    server: &HttpServer,
    id: u32,
    tool: &str,
    arguments: &serde_json::Value,
) -> serde_json::Value {
    http_tool(server, None, id.into(), tool, arguments)
}

/// Regression (issue 19): over `2026-07-28` every request reached a fresh executor, so the
/// call after `start` was refused with "Nothing is pending". With the handle in the
/// arguments, stateless requests, each on a new connection, drive a run to its end.
#[test]
fn stateless_2026_07_28_requests_drive_a_run_by_its_handle() {
    let project = Project::new();
    crate::mcp::handles::two_steps(&project);
    let server = HttpServer::start(&project);
    let started = stateless_call(
        &server,
        1,
        "start",
        &serde_json::json!({"name": "two", "arguments": "s"}),
    );
    let handle = crate::mcp::client::handle(&result_text(&started));
    // A call without the handle reaches no run, and says what to pass.
    let lost = stateless_call(
        &server,
        2,
        "continue_compiled_script",
        &serde_json::json!({"outputs": {"word": "x"}}),
    );
    assert_eq!(lost["isError"], true, "{lost}");
    let second = stateless_call(
        &server,
        3,
        "continue_compiled_script",
        &serde_json::json!({"run_id": handle, "outputs": {"word": "one"}}),
    );
    let done = stateless_call(
        &server,
        4,
        "continue_compiled_script",
        &serde_json::json!({"run_id": handle, "outputs": {"word": "two"}}),
    );
    let replies = [started, lost, second, done].map(|r| result_text(&r));
    insta::assert_snapshot!(project.scrub(&replies.join("\n\n----------\n\n")));
    let out = std::fs::read_to_string(project.root().join("out-s")).expect("output");
    assert_eq!(out, "one\ntwo\n");
}

/// The descriptors process `pid` has open.
fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// Issue 31: every `start` a stateless client left held the run's files (and now its
/// evaluator child) for the whole idle time, so a few thousand exhausted the process's
/// descriptors. Past `MEKARA_MAX_HELD_RUNS` sessions the least recently used go, and a run
/// dropped so is taken up from its journal by the next call that names it.
#[test]
fn runs_left_by_stateless_clients_are_bounded_and_taken_up_again_by_their_handle() {
    let project = Project::new();
    crate::mcp::handles::two_steps(&project);
    let server = HttpServer::start_with(&project, &["mcp"], &[("MEKARA_MAX_HELD_RUNS", "8")]);
    let pid = server.child.id();
    let mut handles = Vec::new();
    for id in 0..40u32 {
        let started = stateless_call(
            &server,
            id,
            "start",
            &serde_json::json!({"name": "two", "arguments": format!("r{id}")}),
        );
        handles.push(crate::mcp::client::handle(&result_text(&started)));
    }
    let held = open_descriptors(pid);
    let evaluators = crate::mcp::warm::evaluators(pid).len();
    assert!(
        evaluators <= 9,
        "{evaluators} evaluator children for 8 held runs"
    );
    // Forty runs left, eight held: each held run costs a few descriptors, not forty of them.
    assert!(
        held < 120,
        "{held} descriptors open after 40 runs were left"
    );
    // The first run was dropped long ago; its handle takes it up from its journal.
    for (n, word) in [(100u32, "one"), (101, "two")] {
        let reply = stateless_call(
            &server,
            n,
            "continue_compiled_script",
            &serde_json::json!({"run_id": handles[0], "outputs": {"word": word}}),
        );
        assert_ne!(reply["isError"], true, "{reply}");
    }
    let out = std::fs::read_to_string(project.root().join("out-r0")).expect("output");
    assert_eq!(out, "one\ntwo\n");
}

/// Issue 31: scripts evaluated at once by one server are bounded (`MEKARA_MAX_EVALUATIONS`),
/// each able to take its memory cap: past the bound, an evaluation waits for one to end.
#[test]
fn a_server_evaluates_at_most_max_evaluations_scripts_at_once() {
    let project = Project::new();
    let log = project.root().join("spans");
    project.script(
        "slow",
        "Work a while.\n",
        Some(&format!(
            "def execute(request):\n    auto(\"echo start $(date +%s%N) >> {0}; sleep 0.4; echo end $(date +%s%N) >> {0}\")\n",
            log.display()
        )),
    );
    let server = HttpServer::start_with(&project, &["mcp"], &[("MEKARA_MAX_EVALUATIONS", "2")]);
    std::thread::scope(|scope| {
        for id in 0..5u32 {
            let server = &server;
            scope.spawn(move || {
                let done =
                    stateless_call(server, id, "start", &serde_json::json!({"name": "slow"}));
                assert!(result_text(&done).contains("## Done"), "{done}");
            });
        }
    });
    // The most steps running at once, from their starts and ends in time order.
    let text = std::fs::read_to_string(&log).expect("spans");
    let mut marks: Vec<(u128, i32)> = text
        .lines()
        .map(|line| {
            let (kind, at) = line.split_once(' ').expect("a mark");
            (
                at.parse().expect("a time"),
                if kind == "start" { 1 } else { -1 },
            )
        })
        .collect();
    marks.sort_unstable();
    let (mut now, mut most) = (0, 0);
    for (_, change) in &marks {
        now += change;
        most = most.max(now);
    }
    assert_eq!(marks.len(), 10, "{text}");
    assert!(most <= 2, "{most} scripts evaluated at once:\n{text}");
}

/// Two runs interleaved on one HTTP server, one driven in a sessionful `2025-06-18` session
/// (its calls after `start` name no run), the other by stateless `2026-07-28` requests, and
/// a third by another `mekara mcp` process on the same project: each gets its own outputs.
#[test]
fn two_runs_interleaved_on_one_http_server_and_a_third_from_another_process() {
    let project = Project::new();
    crate::mcp::handles::two_steps(&project);
    let server = HttpServer::start(&project);
    let session = http_session(&server);
    let mut other = Session::in_project(&project);
    let a = http_call(
        &server,
        &session,
        1,
        "start",
        json!({"name": "two", "arguments": "a"}),
    );
    let b = result_text(&stateless_call(
        &server,
        1,
        "start",
        &json!({"name": "two", "arguments": "b"}),
    ));
    let c = result_text(&other.call("start", json!({"name": "two", "arguments": "c"})));
    let [a, b, c] = [a, b, c].map(|t| crate::mcp::client::handle(&t));
    assert!(a != b && b != c && a != c);

    let word = |word: &str| json!({"outputs": {"word": word}});
    let by = |handle: &str, word: &str| json!({"run_id": handle, "outputs": {"word": word}});
    let step = "continue_compiled_script";
    let replies = [
        http_call(&server, &session, 2, step, word("a1")),
        result_text(&stateless_call(&server, 2, step, &by(&b, "b1"))),
        result_text(&other.call(step, by(&c, "c1"))),
        result_text(&stateless_call(&server, 3, step, &by(&b, "b2"))),
        result_text(&other.call(step, word("c2"))),
        http_call(&server, &session, 3, step, by(&a, "a2")),
    ];
    insta::assert_snapshot!(project.scrub(&replies.join("\n\n----------\n\n")));
    crate::mcp::handles::each_run_got_its_own_outputs(&project);
}

/// Over HTTP, sessionful and stateless alike, a guessed or wrong handle, a bare run id and
/// a finished run's handle are refused, saying what to do, and the run store is the same
/// byte for byte afterwards.
#[test]
fn over_http_a_guessed_wrong_or_finished_handle_is_refused_and_changes_nothing() {
    let project = Project::new();
    crate::mcp::handles::two_steps(&project);
    let server = HttpServer::start(&project);
    let session = http_session(&server);
    let real = crate::mcp::client::handle(&result_text(&stateless_call(
        &server,
        1,
        "start",
        &json!({"name": "two", "arguments": "x"}),
    )));
    let (id, token) = real.split_once('.').expect("a handle");
    let guesses = [
        format!("{id}.{}", "0".repeat(32)),
        format!("{id}.{}", &token[..31]),
        format!("{id}.{token}0"),
        format!("{id}.{}", token.to_uppercase()),
        id.to_string(),
        format!("20200101-000000-0000.{token}"),
    ];
    let refused = |what: &str| {
        let before = project.runs_snapshot();
        let mut n = 10;
        for guess in &guesses {
            for session in [None, Some(session.as_str())] {
                n += 1;
                for (tool, arguments) in [
                    (
                        "continue_compiled_script",
                        json!({"run_id": guess, "outputs": {"word": "w"}}),
                    ),
                    ("finish_nl_script", json!({"run_id": guess})),
                    ("status", json!({"run_id": guess})),
                ] {
                    let result = http_tool(&server, session, n, tool, &arguments);
                    assert_eq!(result["isError"], true, "{what} `{guess}` {tool}: {result}");
                    let text = result_text(&result);
                    assert!(
                        text.contains("Refused:") || text.contains("not found"),
                        "{what} `{guess}` {tool}:\n{text}"
                    );
                }
            }
        }
        assert!(
            project.runs_snapshot() == before,
            "{what}: a refused call changed the run store"
        );
    };
    refused("waiting run");
    let by = |word: &str| json!({"run_id": real, "outputs": {"word": word}});
    stateless_call(&server, 2, "continue_compiled_script", &by("one"));
    let done = stateless_call(&server, 3, "continue_compiled_script", &by("two"));
    insta::assert_snapshot!("done_by_its_handle", project.scrub(&result_text(&done)));
    refused("finished run");
    let before = project.runs_snapshot();
    for session in [None, Some(session.as_str())] {
        let finished = http_tool(&server, session, 40, "continue_compiled_script", &by("w"));
        assert_eq!(finished["isError"], true, "{finished}");
        insta::assert_snapshot!("already_finished", project.scrub(&result_text(&finished)));
    }
    // Regression: taking the finished run up left a `.group` note beside its journal.
    assert!(
        project.runs_snapshot() == before,
        "a call on the finished run changed the run store"
    );
    assert_eq!(
        std::fs::read_to_string(project.root().join("out-x")).expect("output"),
        "one\ntwo\n"
    );
}

/// The versions with an `initialize` handshake that rmcp knows (`ProtocolVersion::
/// KNOWN_VERSIONS` before `2026-07-28`), all served as the README says.
const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// `initialize` asking for protocol `version`.
fn initialize_asking(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "mcp-protocol-tests", "version": "0"},
    }})
    .to_string()
}

/// The README's promise: every protocol version rmcp knows is served, over stdio and HTTP.
/// An `initialize` is answered with the version it asks for, and one asking for
/// `2026-07-28` (which has no handshake) with the newest that has one.
#[test]
fn every_protocol_version_is_served_over_stdio_and_http() {
    let project = Project::new();
    let server = HttpServer::start(&project);
    for (asked, answered) in HANDSHAKE_VERSIONS
        .iter()
        .map(|v| (*v, *v))
        .chain([("2026-07-28", "2025-11-25")])
    {
        let mut stdio = Session::spawn(project.command(&["mcp"]));
        stdio.send_line(&initialize_asking(asked));
        let init = stdio.response(&json!(0));
        assert_eq!(init["result"]["protocolVersion"], answered, "stdio: {init}");
        let response = server.post("/mcp", None, &[], &initialize_asking(asked));
        response.assert_initialized();
        let init = &response.messages()[0];
        assert_eq!(init["result"]["protocolVersion"], answered, "http: {init}");
    }
}

/// `2026-07-28` has no `initialize`: the client names itself in each request's `_meta`, and
/// mekara's texts name its tools as that client shows them (Copilot CLI speaks it so).
#[test]
fn over_2026_07_28_the_client_named_in_meta_gets_its_tool_names() {
    let project = Project::new();
    crate::mcp::handles::two_steps(&project);
    let mut seen = String::new();
    for client in ["copilot-cli", "claude-code", "stateless-test"] {
        let mut stdio = Session::spawn(project.command(&["mcp"]));
        let meta = json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": client, "version": "0"}
        });
        let reply = stdio.request(
            "tools/call",
            Some(json!({
                "name": "start",
                "arguments": {"name": "two", "arguments": "s"},
                "_meta": meta,
            })),
        );
        let text = result_text(&reply["result"]);
        seen.push_str(&format!("{client}:\n{text}\n\n"));
    }
    insta::assert_snapshot!(project.scrub(&seen));
}

/// Over stdio, `2026-07-28` (no `initialize`, the version in each request's `_meta`, as
/// Claude Code 2.1 speaks it) still has one connection: a call without `run_id` goes to the
/// run the connection drives, as in the versions before.
#[test]
fn over_stdio_2026_07_28_a_call_without_run_id_goes_to_the_run_the_connection_drives() {
    let project = Project::new();
    crate::mcp::handles::two_steps(&project);
    let mut stdio = Session::spawn(project.command(&["mcp"]));
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "stateless-test", "version": "0"}
    });
    let mut call = |name: &str, arguments: Json| {
        let reply = stdio.request(
            "tools/call",
            Some(json!({"name": name, "arguments": arguments, "_meta": meta})),
        );
        assert!(reply["result"]["isError"] != true, "{reply}");
        result_text(&reply["result"])
    };
    let started = call("start", json!({"name": "two", "arguments": "s"}));
    let word = |w: &str| json!({"outputs": {"word": w}});
    let second = call("continue_compiled_script", word("one"));
    let done = call("continue_compiled_script", word("two"));
    insta::assert_snapshot!(project.scrub(&format!(
        "{started}\n\n----------\n\n{second}\n\n----------\n\n{done}"
    )));
    let out = std::fs::read_to_string(project.root().join("out-s")).expect("output");
    assert_eq!(out, "one\ntwo\n");
}

/// Regression: `--http localhost:0` was refused with clap's "invalid socket address syntax".
#[test]
fn http_listens_on_localhost_by_name_and_a_bad_address_says_what_to_write() {
    let project = Project::new();
    let server = HttpServer::spawn(
        project.command(&["mcp", "--http", "localhost:0"]),
        "mekara mcp",
    );
    server.assert_serving();
    let mut seen = String::new();
    for addr in ["example.org:80", "localhost", "127.0.0.1"] {
        let out = refused_start(&project, addr);
        assert_eq!(out.status.code(), Some(2), "{addr}");
        seen.push_str(&format!(
            "$ mekara mcp --http {addr}\n{}\n",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    insta::assert_snapshot!(seen);
}
