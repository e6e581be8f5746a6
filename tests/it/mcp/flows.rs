//! Whole scripts driven to their end: bundled and project scripts, nesting, failure,
//! cancellation, and resume after the server is killed.

use std::time::Duration;

use serde_json::json;

use super::client::{Client, Conversation, alive, fixed_shuf_path, handle, run_id};
use crate::common::Project;

#[tokio::test]
async fn server_info_tools_and_prompts() {
    let project = Project::new();
    let client = Client::start(&project, &[]).await;
    let info = client.service.peer_info().expect("server info");
    let server = info.server_info.clone().expect("serverInfo");
    assert_eq!(server.name, "mekara");
    assert_eq!(server.version, env!("CARGO_PKG_VERSION"));

    let tools = client.service.list_all_tools().await.expect("tools/list");
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(
        names,
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
    for tool in &tools {
        let read_only = tool
            .annotations
            .as_ref()
            .and_then(|a| a.read_only_hint)
            .unwrap_or(false);
        assert_eq!(
            read_only,
            matches!(tool.name.as_ref(), "status" | "list_scripts"),
            "readOnlyHint of {}",
            tool.name
        );
        assert_eq!(tool.input_schema.get("type"), Some(&json!("object")));
    }
    let listed = serde_json::to_value(&tools).expect("json");
    insta::assert_snapshot!(
        "tools_list",
        serde_json::to_string_pretty(&listed).expect("json")
    );

    let prompts = client
        .service
        .list_all_prompts()
        .await
        .expect("prompts/list");
    let names: Vec<&str> = prompts.iter().map(|p| p.name.as_str()).collect();
    // The bundled demos (`test:*`) are never offered as prompts, but can still be had.
    assert!(names.contains(&"systematize"), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("test:")), "{names:?}");
    let text = prompt_text(
        &client,
        "test:imagine-object",
        "a teapot, \"quoted\"\nand a second line",
    )
    .await;
    insta::assert_snapshot!("prompt_with_quotes_and_lines", project.scrub(&text));
    let unknown = client
        .service
        .get_prompt(rmcp::model::GetPromptRequestParams::new("test:nope"))
        .await;
    let rmcp::service::ServiceError::McpError(error) = unknown.expect_err("unknown prompt") else {
        panic!("not an error the server sent");
    };
    let message = error.message;
    insta::assert_snapshot!("prompt_unknown", project.scrub(&message));
}

/// `mekara mcp` with the `shuf` of [`fixed_shuf_path`].
async fn client_with_fixed_shuf(project: &Project) -> Client {
    Client::start(project, &[("PATH", &fixed_shuf_path(project))]).await
}

#[tokio::test]
async fn random_runs_to_the_end() {
    let project = Project::new();
    let client = client_with_fixed_shuf(&project).await;
    // The bundled demos are listed only when asked for, and run by name either way.
    let listed = client.call("list_scripts", json!({})).await.ok();
    insta::assert_snapshot!("list_scripts", project.scrub(&listed));
    let listed = client.call("list_scripts", json!({"all": true})).await.ok();
    insta::assert_snapshot!("list_scripts_all", project.scrub(&listed));
    let wrong = client
        .call("list_scripts", json!({"all": "yes"}))
        .await
        .err();
    insta::assert_snapshot!("list_scripts_wrong_argument", project.scrub(&wrong));

    // The NL source comes with the first llm step only; the fixed `shuf` picks 1.
    let mut talk = Conversation::default();
    talk.call(&client, "start", json!({"name": "test/random"}))
        .await
        .ok();
    talk.call(
        &client,
        "continue_compiled_script",
        json!({"outputs": {"guess": 1}}),
    )
    .await
    .ok();
    let done = talk
        .call(&client, "continue_compiled_script", json!({"outputs": {}}))
        .await
        .ok();
    let id = run_id(&done);
    let journal = project.journal(&id);
    assert_eq!(
        journal.matches("\"event\":\"step\"").count(),
        4,
        "{journal}"
    );
    talk.call(&client, "continue_compiled_script", json!({"outputs": {}}))
        .await
        .err();
    insta::assert_snapshot!(talk.text(&project));
}

#[tokio::test]
async fn nested_automatic_and_manual() {
    let project = Project::new();
    let client = client_with_fixed_shuf(&project).await;
    let mut talk = Conversation::default();
    // Automatic nesting: test:nested calls test:random first.
    let first = talk
        .call(&client, "start", json!({"name": "test:nested"}))
        .await
        .ok();
    // Manual nesting: another script started inside the run whose step is pending, named
    // as its parent.
    talk.call(
        &client,
        "start",
        json!({"name": "test:imagine-object", "arguments": " made of glass", "parent": handle(&first)}),
    )
    .await
    .ok();
    talk.call(&client, "continue_compiled_script", json!({"outputs": {}}))
        .await
        .err();
    // The outer pending step comes back.
    talk.call(&client, "finish_nl_script", json!({})).await.ok();
    talk.call(&client, "status", json!({})).await.ok();
    talk.call(
        &client,
        "continue_compiled_script",
        json!({"outputs": {"guess": 0}}),
    )
    .await
    .ok();
    // test:double-or-nothing runs in /tmp, then the NL child test:imagine-object is pending.
    talk.call(&client, "continue_compiled_script", json!({"outputs": {}}))
        .await
        .ok();
    talk.call(&client, "finish_nl_script", json!({})).await.ok();
    talk.call(&client, "continue_compiled_script", json!({"outputs": {}}))
        .await
        .ok();
    insta::assert_snapshot!(talk.text(&project));
}

#[tokio::test]
async fn failure_falls_back_to_the_nl_instructions() {
    let project = Project::new();
    project.script(
        "deploy",
        "---\ndescription: Deploy\n---\n1. Build.\n2. Ship.\n",
        Some(
            "def execute(request):\n    auto(\"echo building\")\n    auto(\"echo broken >&2; exit 3\", context = \"Step 2: ship\")\n    llm(\"never reached\")\n",
        ),
    );
    let client = Client::start(&project, &[]).await;
    let mut talk = Conversation::default();
    talk.call(&client, "start", json!({"name": "deploy"}))
        .await
        .ok();
    talk.call(&client, "continue_compiled_script", json!({"outputs": {}}))
        .await
        .err();
    talk.call(&client, "finish_nl_script", json!({})).await.ok();
    insta::assert_snapshot!(talk.text(&project));
}

/// A script whose first step records its shell's pid, then waits until a file appears.
fn waiting_script(project: &Project) {
    project.script(
        "wait",
        "---\ndescription: Wait for a file\n---\n1. Wait.\n2. Say done.\n",
        Some(
            "def execute(request):\n    auto(\"echo $$ > pid; echo started >> count; for i in $(seq 1 300); do echo tick $i; [ -f go ] && break; sleep 0.1; done; echo finished\")\n    llm(\"Step 2: say done\")\n",
        ),
    );
}

/// The pid the `wait` step writes once it runs.
async fn step_pid(project: &Project) -> u32 {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(text) = std::fs::read_to_string(project.root().join("pid"))
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the step never wrote its pid"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn cancelling_a_call_kills_the_step_and_the_run_resumes() {
    let project = Project::new();
    waiting_script(&project);
    let client = Client::start(&project, &[]).await;
    let call = client
        .service
        .call_tool_once(super::client::params("start", json!({"name": "wait"})));
    // The call is driven until its step runs (it has written its pid), then dropped: dropping
    // the request future sends `notifications/cancelled`.
    let mut call = Box::pin(call);
    let pid = tokio::select! {
        reply = &mut call => panic!("the call ended before it could be cancelled: {reply:?}"),
        pid = step_pid(&project) => pid,
    };
    drop(call);
    // Regression: a call made while the cancelled one still wound down was refused with
    // "wait for its reply", a reply that never comes. It now waits for the wind-down.
    let mut talk = Conversation::default();
    let status = talk.call(&client, "status", json!({})).await.ok();
    let mut dead = false;
    for _ in 0..100 {
        if !alive(pid) {
            dead = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        dead,
        "the step's shell {pid} should be killed by the cancellation"
    );

    let id = run_id(&status);
    let journal = project.journal(&id);
    assert!(
        !journal.contains("\"event\":\"step\""),
        "no step recorded:\n{journal}"
    );

    std::fs::write(project.root().join("go"), "").expect("write");
    // The step runs again, and the llm step after it is pending.
    talk.call(&client, "resume", json!({"run_id": id}))
        .await
        .ok();
    insta::assert_snapshot!(talk.text(&project));
    let count = std::fs::read_to_string(project.root().join("count")).expect("count");
    assert_eq!(
        count.lines().count(),
        2,
        "started once, cancelled, started again"
    );
}

/// The progress messages the client has received, once `done` holds for them (notifications
/// may reach the handler a moment after the reply).
async fn progress_until(client: &Client, done: impl Fn(&[String]) -> bool) -> Vec<String> {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let progress = client.handler.progress.lock().expect("lock").clone();
        if done(&progress) {
            return progress;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "progress never reached the expected point: {progress:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn progress_notifications_carry_the_step_and_its_output() {
    let project = Project::new();
    project.script(
        "slow",
        "---\ndescription: Slow\n---\n1. Count.\n",
        Some(
            "def execute(request):\n    auto(\"for i in 1 2 3 4 5; do echo line $i; sleep 0.25; done\")\n    llm(\"say done\")\n",
        ),
    );
    let client = Client::start(&project, &[]).await;
    let reply = client
        .call_with_progress("start", json!({"name": "slow"}))
        .await
        .ok();
    insta::assert_snapshot!(project.scrub(&reply));
    let progress = progress_until(&client, |p| p.iter().any(|m| m.contains(": line 5"))).await;
    assert!(
        progress.iter().any(|m| m.starts_with("slow[0] $ for i in")),
        "{progress:?}"
    );
    assert!(
        progress.iter().any(|m| m.contains(": line ")),
        "output lines are reported: {progress:?}"
    );
    // A call without a token gets none: see `mcp_protocol`, whose raw client can leave the
    // token out (rmcp's client gives every request one).
}

#[tokio::test]
async fn resume_after_the_server_is_killed() {
    let project = Project::new();
    project.script(
        "twice",
        "---\ndescription: Two halves\n---\n1. Count.\n2. Ask.\n3. Count again.\n",
        Some(
            "def execute(request):\n    auto(\"echo one >> count\")\n    answer = llm(\"Step 2: pick a word\", expects = {\"word\": \"any word\"})\n    auto(\"echo \" + answer.outputs[\"word\"] + \" >> count\")\n",
        ),
    );
    let client = Client::start(&project, &[]).await;
    let mut talk = Conversation::default();
    let first = talk
        .call(&client, "start", json!({"name": "twice"}))
        .await
        .ok();
    let id = run_id(&format!("`{}`", project.run_ids()[0]));
    let handle = handle(&first);
    assert!(handle.starts_with(&format!("{id}.")), "{handle}");
    // SIGKILL: no chance to clean up; waited for, or the run is still held, not interrupted
    // (the test failed so under load).
    super::client::kill_server(client).await;

    let client = Client::start(&project, &[]).await;
    talk.call(&client, "resume", json!({})).await.ok();
    // A restart loses no handle: the journal keeps what checks it. The id alone is not
    // enough for a run with a handle.
    talk.call(&client, "resume", json!({"run_id": id}))
        .await
        .err();
    // Nothing runs again: the reply has no steps executed.
    talk.call(&client, "resume", json!({"run_id": handle}))
        .await
        .ok();
    talk.call(
        &client,
        "continue_compiled_script",
        json!({"outputs": {"word": "two"}}),
    )
    .await
    .ok();
    let count = std::fs::read_to_string(project.root().join("count")).expect("count");
    assert_eq!(count, "one\ntwo\n", "the first step ran once");

    talk.call(&client, "resume", json!({"run_id": handle}))
        .await
        .err();
    talk.call(&client, "resume", json!({"run_id": "20200101-000000-0000"}))
        .await
        .err();
    insta::assert_snapshot!(talk.text(&project));
}

/// Regression: only the first `$ARGUMENTS` was replaced. Every one is, in the reply of
/// `start` for an NL script and in `prompts/get`, as Claude Code does for commands.
#[tokio::test]
async fn every_arguments_placeholder_is_replaced() {
    let project = Project::new();
    project.script(
        "twice",
        "---\ndescription: Greet twice\n---\nGreet $ARGUMENTS. Then say goodbye to $ARGUMENTS.\n",
        None,
    );
    let client = Client::start(&project, &[]).await;
    let mut talk = Conversation::default();
    talk.call(
        &client,
        "start",
        json!({"name": "twice", "arguments": "the \"team\""}),
    )
    .await
    .ok();
    insta::assert_snapshot!("every_arguments_placeholder_start", talk.text(&project));
    let text = prompt_text(&client, "twice", "the \"team\"").await;
    insta::assert_snapshot!("every_arguments_placeholder_prompt", project.scrub(&text));
}

/// The text of `prompts/get` of `name` with `arguments`.
pub(crate) async fn prompt_text(client: &Client, name: &str, arguments: &str) -> String {
    let prompt = client
        .service
        .get_prompt(
            rmcp::model::GetPromptRequestParams::new(name).with_arguments(
                json!({ "arguments": arguments })
                    .as_object()
                    .cloned()
                    .expect("object"),
            ),
        )
        .await
        .expect("prompts/get");
    let messages = serde_json::to_value(&prompt.messages).expect("json");
    messages[0]["content"]["text"]
        .as_str()
        .expect("a text message")
        .to_string()
}

#[tokio::test]
async fn a_server_whose_binary_is_replaced_by_an_upgrade_goes_on_evaluating_scripts() {
    // Scripts are evaluated in a child process of the server's own binary. An upgrade
    // (`cargo install`) replaces the file under a running `mekara mcp`; the child must still
    // be the binary that runs, not the file now at its path (here: not mekara at all).
    use rmcp::ServiceExt as _;
    let project = Project::new();
    project.script(
        "hello",
        "Say hello.\n",
        Some("def execute(request):\n    auto(\"echo hello-from-the-step\")\n    llm(\"Say hello back.\")\n"),
    );
    let copy = project.dir.path().join("bin/mekara");
    std::fs::create_dir_all(copy.parent().expect("a folder")).expect("bin");
    std::fs::copy(env!("CARGO_BIN_EXE_mekara"), &copy).expect("copy mekara");
    let command = project.shell(&format!("exec '{}' mcp", copy.display()));
    let (transport, _stderr) =
        rmcp::transport::TokioChildProcess::builder(tokio::process::Command::from(command))
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("spawn the copy");
    let handler = super::client::Handler::default();
    let client = Client {
        pid: transport.id().expect("pid"),
        service: handler.clone().serve(transport).await.expect("initialize"),
        handler,
    };
    // The upgrade: a new file at the path, as `install` writes one (a rename over it).
    let next = project.dir.path().join("bin/mekara.new");
    std::fs::write(
        &next,
        "#!/bin/sh\necho not the mekara that runs >&2\nexit 9\n",
    )
    .expect("write");
    std::fs::set_permissions(&next, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    std::fs::rename(&next, &copy).expect("replace the binary");
    let reply = client.call("start", json!({"name": "hello"})).await.ok();
    insta::assert_snapshot!(project.scrub(&reply));
    client.service.cancel().await.expect("close");
}
