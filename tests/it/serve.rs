//! `mekara serve` with real parts: the real binary serving the example modules of
//! `examples/tools/` (and modules written into a temporary project), spoken to by the `rmcp`
//! client over stdio, and by hand for malformed JSON-RPC. Schemas, replies and start-up
//! errors are pinned by snapshots.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use crate::common::{Project, Run};
use crate::mcp::client::{Client, Reply, params};
use serde_json::{Value as Json, json};

/// The example modules kept in the repository.
fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/tools")
}

fn examples_arg() -> String {
    examples().display().to_string()
}

/// `mekara serve ARGS` over stdio in the project root, connected with the rmcp client.
async fn serve(project: &Project, args: &[&str]) -> Client {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    Client::start_command(project, &project.root(), &all, &[]).await
}

/// `mekara serve ARGS` run to its end with nothing on stdin: for start-up errors.
fn serve_fails(project: &Project, args: &[&str]) -> Run {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    project.run(&all, "")
}

async fn tool_names(client: &Client) -> Vec<String> {
    client
        .service
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect()
}

#[tokio::test]
async fn the_example_tools_are_listed_with_schemas_from_their_signatures() {
    let project = Project::new();
    let client = serve(&project, &[&examples_arg()]).await;
    let tools = client.service.list_all_tools().await.expect("tools/list");
    let listing = serde_json::to_string_pretty(&tools).expect("json");
    insta::assert_snapshot!("example_tools", listing);
    // `exports` restricts `shell.star`; `_shared_helper` is private.
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert!(!names.contains(&"not_exported"), "{names:?}");
    assert!(!names.contains(&"_shared_helper"), "{names:?}");
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn calls_return_values_as_text_and_dicts_as_structured_content() {
    let project = Project::new();
    let client = serve(&project, &[&examples_arg()]).await;
    assert_eq!(
        client
            .call("greet", json!({"name": "Ann", "shout": true}))
            .await
            .ok(),
        "HELLO, ANN!"
    );
    assert_eq!(
        client
            .call("word_count", json!({"text": "one two  three"}))
            .await
            .ok(),
        "3"
    );
    // camelCase `tagLines` is served as `tag_lines`; optional dict given.
    assert_eq!(
        client
            .call("tag_lines", json!({"lines": ["a", "b"], "tags": {"b": 2}}))
            .await
            .ok(),
        r#"["a","[2] b"]"#
    );
    // Integers are accepted for `float` parameters; a dict result is structured.
    let stats = client
        .service
        .call_tool(params("stats", json!({"values": [1, 2, 6]})))
        .await
        .expect("tools/call");
    assert_eq!(stats.is_error, Some(false));
    assert_eq!(
        stats.structured_content,
        Some(json!({"min": 1.0, "max": 6.0, "mean": 3.0}))
    );
    // Parameters without annotations take their type from the default.
    assert_eq!(client.call("scale", json!({"value": 21})).await.ok(), "42");
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn served_functions_run_auto_steps() {
    let project = Project::new();
    project.write("files/a.txt", "a");
    project.write("files/sub/b.txt", "b");
    let client = serve(&project, &[&examples_arg()]).await;
    assert_eq!(
        client
            .call("count_files", json!({"folder": "files"}))
            .await
            .ok(),
        "2"
    );
    let expected = String::from_utf8(
        std::process::Command::new("uname")
            .arg("-s")
            .output()
            .expect("uname")
            .stdout,
    )
    .expect("utf-8");
    assert_eq!(
        client.call("system_name", json!({})).await.ok(),
        expected.trim()
    );
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn a_runtime_error_is_an_error_result_with_the_starlark_traceback() {
    let project = Project::new();
    let client = serve(&project, &[&examples_arg()]).await;
    let text = client.call("stats", json!({"values": []})).await.err();
    insta::assert_snapshot!("runtime_error", project.scrub(&text));
    // The server goes on serving.
    assert_eq!(
        client.call("greet", json!({"name": "Bo"})).await.ok(),
        "Hello, Bo!"
    );
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn an_unknown_tool_is_a_json_rpc_error_naming_the_tools() {
    let project = Project::new();
    let client = serve(&project, &[&examples_arg(), "--tools", "greet,word_count"]).await;
    let error = client
        .service
        .call_tool(params("gret", json!({})))
        .await
        .expect_err("an unknown tool is a protocol error");
    let rmcp::ServiceError::McpError(error) = error else {
        panic!("expected a JSON-RPC error, got {error:?}");
    };
    assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    insta::assert_snapshot!("unknown_tool", error.message);
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn arguments_are_checked_against_the_schema() {
    let project = Project::new();
    let client = serve(&project, &[&examples_arg()]).await;
    let mut all = String::new();
    for (tool, arguments) in [
        ("greet", json!({"name": "Ann", "nickname": "A"})),
        ("greet", json!({"greeting": "Hi"})),
        ("greet", json!({"name": 7})),
        ("greet", json!({"name": "Ann", "shout": "yes"})),
        ("word_count", json!({})),
        ("tag_lines", json!({"lines": ["a", 2]})),
        ("tag_lines", json!({"lines": [], "tags": {"a": "one"}})),
        ("stats", json!({"values": [1, "two"]})),
        ("system_name", json!({"x": 1})),
    ] {
        let reply: Reply = client.call(tool, arguments.clone()).await;
        all.push_str(&format!("{tool} {arguments}\n{}\n\n", reply.err()));
    }
    insta::assert_snapshot!("argument_errors", all);
    // `null` is a value of an optional parameter.
    assert_eq!(
        client
            .call("tag_lines", json!({"lines": ["a"], "tags": null}))
            .await
            .ok(),
        r#"["a"]"#
    );
    client.service.cancel().await.expect("close");
}

const AGENT_MODULE: &str = r#"
def ask(question: str) -> str:
    """Tries to hand a question to the agent."""
    return llm(question, expects = {"answer": "the answer"}).outputs["answer"]

def nested() -> str:
    """Tries to run a script."""
    call_script("test/random")
    return "ran"

def spin(n: int = 100000000) -> int:
    """Counts for a very long time."""
    total = 0
    for i in range(n):
        total += i
    return total

def shout(text: str) -> str:
    """Upper-cases through a function step."""
    return auto(_upper, {"text": text}).value

def _upper(text):
    return text.upper()
"#;

#[tokio::test]
async fn llm_steps_and_script_calls_are_refused_in_served_tools() {
    let project = Project::new();
    project.write(".mekara/tools/agent.star", AGENT_MODULE);
    // Default path: the project's `.mekara/tools/`.
    let client = serve(&project, &[]).await;
    let llm = client.call("ask", json!({"question": "why?"})).await.err();
    let call = client.call("nested", json!({})).await.err();
    insta::assert_snapshot!("agent_steps_refused", format!("{llm}\n\n{call}"));
    // Function steps work.
    assert_eq!(
        client.call("shout", json!({"text": "hey"})).await.ok(),
        "HEY"
    );
    client.service.cancel().await.expect("close");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs the MCP test servers")]
#[tokio::test]
async fn served_functions_call_tools_of_other_mcp_servers_under_the_policy() {
    let dir = crate::common::servers();
    let project = Project::new();
    project.write(
        ".mcp.json",
        &format!(
            r#"{{"mcpServers": {{"everything": {{"command": "node", "args": ["{}", "stdio"]}}}}}}"#,
            crate::common::everything(&dir)
        ),
    );
    project.write(
        "tools/relay.star",
        r#"
def relay(message: str) -> str:
    """Echoes a message through the `everything` server."""
    return mcp("everything", "echo", {"message": message}).content

def sum_and_zap(a: int, b: int) -> str:
    """Adds through the server, then asks for a tool the policy does not allow."""
    total = mcp("everything", "get-sum", {"a": a, "b": b}).content
    zapped = mcp("everything", "toggle-subscriber-updates", {}, allow_failure = True)
    return total + " | " + str(zapped.success) + ": " + (zapped.error or "")
"#,
    );
    let client = serve(&project, &["tools"]).await;
    let echoed = client
        .call("relay", json!({"message": "hi [there]"}))
        .await
        .ok();
    assert!(echoed.contains("hi [there]"), "{echoed}");
    let summed = client
        .call("sum_and_zap", json!({"a": 2, "b": 40}))
        .await
        .ok();
    assert!(
        summed.contains("42") && summed.contains("| False: "),
        "a call the read-only policy refuses is a failed step:\n{summed}"
    );
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn a_function_that_doubles_a_string_is_stopped_by_the_heap_limit_and_the_server_goes_on() {
    // Regression: forty doublings reached 4 GiB and a "len overflow" panic.
    let project = Project::new();
    project.write(
        "tools/grow.star",
        "def grow(times: int) -> int:\n    \"\"\"Doubles a string.\"\"\"\n    s = \"x\"\n    for i in range(times):\n        s = s + s\n    return len(s)\n",
    );
    let client = serve(&project, &["tools"]).await;
    let text = client.call("grow", json!({"times": 40})).await.err();
    assert!(
        text.contains("Heap memory limit of 268435456 bytes exceeded")
            && text.contains("grow.star:5:9"),
        "the limit is named with the statement that went past it:\n{text}"
    );
    assert_eq!(client.call("grow", json!({"times": 10})).await.ok(), "1024");
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn a_function_asking_for_gigabytes_at_once_fails_alone_and_the_server_goes_on() {
    // Regression: one allocation past the memory cap (1 GiB) stopped the server (exit 134)
    // with every session; tools are now called in a child process.
    let project = Project::new();
    project.write(
        "tools/grow.star",
        "def grow(n: int) -> int:\n    \"\"\"Makes a string of n bytes.\"\"\"\n    s = \"x\" * n\n    return len(s)\n\ndef join(n: int) -> int:\n    \"\"\"Joins n copies of a megabyte.\"\"\"\n    s = \"x\" * 1000000\n    return len(\"y\".join([s] * n))\n",
    );
    let client = serve(&project, &["tools"]).await;
    for (tool, at) in [("grow", "grow.star:3:5"), ("join", "grow.star:9:5")] {
        let text = client.call(tool, json!({"n": 2_000_000_000})).await.err();
        assert!(
            text.starts_with(&format!("tool `{tool}` failed:"))
                && text.contains("bytes at once, past the memory cap of an evaluation")
                && text.contains(at),
            "the cap is named with the statement that asked:\n{text}"
        );
        assert!(!text.contains("mekara stops"), "{text}");
    }
    assert_eq!(client.call("grow", json!({"n": 10})).await.ok(), "10");
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn a_runaway_function_is_stopped_by_the_tick_limit() {
    let project = Project::new();
    project.write("tools/agent.star", AGENT_MODULE);
    let client = serve(&project, &["tools", "--max-ticks", "100000"]).await;
    let text = client.call("spin", json!({})).await.err();
    assert!(
        text.starts_with("tool `spin` failed:")
            && text.contains("tick")
            && text.contains("agent.star:15:9"),
        "the limit is named with the statement it stopped:\n{text}"
    );
    // Within the limit the same function completes.
    assert_eq!(client.call("spin", json!({"n": 10})).await.ok(), "45");
    client.service.cancel().await.expect("close");
}

#[tokio::test]
async fn tools_and_config_filter_what_is_served() {
    let project = Project::new();
    let client = serve(
        &project,
        &[&examples_arg(), "--tools", "greet,tagLines,word_count"],
    )
    .await;
    assert_eq!(
        tool_names(&client).await,
        ["word_count", "greet", "tag_lines"]
    );
    client.service.cancel().await.expect("close");

    project.write(
        "serve.toml",
        "tools = [\"greeting_from_env\", \"system_name\"]\n\n[env]\nMEKARA_GREETING = \"from config\"\n",
    );
    let client = serve(&project, &[&examples_arg(), "--config", "serve.toml"]).await;
    assert_eq!(
        tool_names(&client).await,
        ["system_name", "greeting_from_env"]
    );
    assert_eq!(
        client.call("greeting_from_env", json!({})).await.ok(),
        "from config"
    );
    client.service.cancel().await.expect("close");

    // A flag wins over the config.
    let client = serve(
        &project,
        &[
            &examples_arg(),
            "--config",
            "serve.toml",
            "--env",
            "MEKARA_GREETING=from flag",
        ],
    )
    .await;
    assert_eq!(
        client.call("greeting_from_env", json!({})).await.ok(),
        "from flag"
    );
    client.service.cancel().await.expect("close");
}

/// Spawns `mekara serve ARGS`, does the handshake and `tools/list`, and returns what it
/// wrote on stderr by then (its start-up warnings).
fn startup_stderr(project: &Project, args: &[&str]) -> (Json, String) {
    let mut all = vec!["serve"];
    all.extend_from_slice(args);
    let mut session = RawSession::start(project, &all);
    let listed = session.request(1, "tools/list", json!({}));
    let stderr = session.close();
    (listed, stderr)
}

#[test]
fn only_mekara_variables_are_applied_and_the_others_are_named_in_a_warning() {
    let project = Project::new();
    let (_, stderr) = startup_stderr(
        &project,
        &[
            &examples_arg(),
            "--env",
            "PATH=/nowhere",
            "--env",
            "LD_PRELOAD=x.so",
            "--env",
            "MEKARA_GREETING=hi",
        ],
    );
    insta::assert_snapshot!("env_refused_warning", stderr);
    let mut session = RawSession::start(
        &project,
        &[
            "serve",
            &examples_arg(),
            "--env",
            "PATH=/nowhere",
            "--env",
            "MEKARA_GREETING=hi",
        ],
    );
    let greeting = session.request(
        2,
        "tools/call",
        json!({"name": "greeting_from_env", "arguments": {}}),
    );
    assert_eq!(greeting["result"]["content"][0]["text"], "hi", "{greeting}");
    // `PATH` was not replaced: `uname` is still found.
    let uname = session.request(
        3,
        "tools/call",
        json!({"name": "system_name", "arguments": {}}),
    );
    assert_eq!(uname["result"]["isError"], false, "{uname}");
    session.close();
}

#[test]
fn unknown_tool_names_are_warned_about() {
    let project = Project::new();
    let (listed, stderr) =
        startup_stderr(&project, &[&examples_arg(), "--tools", "greet,nope,Stats"]);
    insta::assert_snapshot!("unknown_tools_warning", stderr);
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["greet"]);
}

/// A start-up that fails: exit 1 (2 for usage errors), nothing on stdout, the error on
/// stderr pinned.
fn refused(project: &Project, name: &str, args: &[&str], code: i32) {
    let run = serve_fails(project, args);
    run.expect_code(code);
    assert_eq!(run.stdout, "", "stdout belongs to the protocol");
    insta::assert_snapshot!(name, project.scrub(&run.stderr));
}

#[test]
fn startup_errors_name_what_is_wrong() {
    let project = Project::new();
    let p = &project;
    p.write("bad/syntax.star", "def f(x: str) -> str:\n    return x +\n");
    refused(p, "parse_error", &["bad/syntax.star"], 1);

    p.write(
        "bad/work.star",
        "def f() -> int:\n    return 1\n\nprint(\"loading\")\n",
    );
    refused(p, "top_level_call", &["bad/work.star"], 1);
    p.write("bad/loop.star", "X = []\nfor i in [1, 2]:\n    pass\n");
    refused(p, "top_level_loop", &["bad/loop.star"], 1);
    p.write("bad/assign.star", "TOTAL = len([1, 2])\n");
    refused(p, "top_level_assign_call", &["bad/assign.star"], 1);

    p.write("dup/a.star", "def fooBar() -> int:\n    return 1\n");
    p.write("dup/b.star", "def foo_bar() -> int:\n    return 2\n");
    refused(p, "duplicate_names", &["dup"], 1);

    p.write(
        "bad/exports.star",
        "exports = [\"missing\"]\n\ndef here():\n    pass\n",
    );
    refused(p, "exports_unknown", &["bad/exports.star"], 1);
    p.write(
        "bad/types.star",
        "def f(pair: tuple[int, ...]) -> int:\n    return 1\n",
    );
    refused(p, "unsupported_type", &["bad/types.star"], 1);
    p.write("bad/varargs.star", "def f(*names) -> int:\n    return 1\n");
    refused(p, "varargs", &["bad/varargs.star"], 1);

    refused(p, "missing_path", &["nowhere"], 2);
    std::fs::create_dir_all(p.root().join("empty")).expect("mkdir");
    refused(p, "empty_folder", &["empty"], 2);
    refused(p, "default_path_missing", &[], 2);

    refused(
        p,
        "nothing_left",
        &[&examples_arg(), "--tools", "nope,nada"],
        1,
    );
    refused(
        p,
        "env_not_a_pair",
        &[&examples_arg(), "--env", "MEKARA_X"],
        2,
    );
    refused(
        p,
        "http_not_loopback",
        &[&examples_arg(), "--http", "0.0.0.0:0"],
        2,
    );
    p.write("bad.toml", "tools = [\"greet\"]\nenvironment = {}\n");
    refused(
        p,
        "config_unknown_key",
        &[&examples_arg(), "--config", "bad.toml"],
        1,
    );
}

#[test]
fn globs_pick_modules() {
    let project = Project::new();
    project.write("tools/one.star", "def one() -> int:\n    return 1\n");
    project.write("tools/two.star", "def two() -> int:\n    return 2\n");
    project.write("tools/notes.txt", "not a module");
    let (listed, _) = startup_stderr(&project, &["tools/t*.star"]);
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["two"]);
}

#[test]
fn malformed_json_rpc_gets_json_rpc_errors_and_the_server_goes_on() {
    let project = Project::new();
    let mut session = RawSession::start(&project, &["serve", &examples_arg()]);
    session.send("this is not json");
    let parse = session.next();
    assert_eq!(parse["error"]["code"], -32700, "{parse}");
    session.send(r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":5}}"#);
    let invalid = session.next();
    assert_eq!(invalid["id"], 5, "{invalid}");
    assert_eq!(invalid["error"]["code"], -32602, "{invalid}");
    let ping = session.request(6, "ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");
    session.close();
}

/// A stdio session by hand: lines in, lines out.
struct RawSession {
    child: std::process::Child,
    stdin: Option<std::process::ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
}

/// A guard against a hung test, not a timing assertion.
const STUCK: Duration = Duration::from_secs(60);

impl RawSession {
    fn start(project: &Project, args: &[&str]) -> RawSession {
        let mut child = project
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn mekara serve");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut err = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = std::io::Read::read_to_string(&mut err, &mut text);
            text
        });
        let mut session = RawSession {
            child,
            stdin: None,
            lines,
            stderr,
        };
        session.stdin = session.child.stdin.take();
        let init = session.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "serve-tests", "version": "0"}}),
        );
        assert!(init["result"]["serverInfo"]["name"] == "mekara", "{init}");
        // A version the server supports is agreed to as asked.
        assert_eq!(init["result"]["protocolVersion"], "2025-06-18", "{init}");
        session.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        session
    }

    fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .expect("write");
        stdin.flush().expect("flush");
    }

    fn next(&mut self) -> Json {
        let line = self.lines.recv_timeout(STUCK).expect("a reply in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
    }

    fn request(&mut self, id: u64, method: &str, params: Json) -> Json {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
        );
        loop {
            let message = self.next();
            if message["id"] == id {
                return message;
            }
        }
    }

    /// Closes stdin, waits for the exit, returns stderr.
    fn close(mut self) -> String {
        drop(self.stdin.take());
        let _ = self.child.wait();
        self.stderr.join().expect("stderr reader")
    }
}

#[test]
fn the_help_is_pinned() {
    let project = Project::new();
    let run = project.run(&["serve", "--help"], "");
    run.expect_code(0);
    insta::assert_snapshot!("help", run.stdout);
}

/// A constant that starlark computes as it compiles a module, past the memory cap, is the
/// module's error with its line, for `mekara serve` at start-up and for `mekara check`: not
/// an abort (exit 134) of the process. `mekara run` already refused it in its evaluator.
#[test]
fn a_constant_past_the_memory_cap_is_an_error_naming_its_line_not_an_abort() {
    let project = Project::new();
    project.write(
        "tools/big.star",
        "\"\"\"Tools.\"\"\"\n\nBIG = \"x\" * 2000000000\n\ndef add(a: int, b: int) -> int:\n    \"\"\"Adds.\"\"\"\n    return a + b\n",
    );
    let served = serve_fails(&project, &["tools/big.star"]);
    served.expect_code(1);
    for word in [
        "past the memory cap",
        "tools/big.star:3:7",
        "BIG = \"x\" * 2000000000",
    ] {
        assert!(served.stderr.contains(word), "{word}: {}", served.stderr);
    }
    project.script(
        "big",
        "Do it.",
        Some("def never():\n    return \"x\" * 2000000000\n\ndef execute(request):\n    auto(\"echo hi\")\n"),
    );
    let checked = project.run(&["check", "big"], "");
    checked.expect_code(1);
    for word in [
        "past the memory cap",
        "big.star:2:12",
        "return \"x\" * 2000000000",
    ] {
        assert!(
            checked.stdout.contains(word) || checked.stderr.contains(word),
            "{word}: {checked:?}"
        );
    }
}
