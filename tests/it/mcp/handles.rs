//! Runs as handles (MCP `2026-07-28`): `start` gives `<run id>.<token>`, the other tools
//! take it as `run_id`; one server holds many runs, and any server process takes a run up
//! by its handle.

use serde_json::json;

use super::client::{Client, Conversation, handle};
use crate::common::Project;

/// A script `two` with two llm steps, each writing what it got to `out-<request>`.
pub(crate) fn two_steps(project: &Project) {
    project.script(
        "two",
        "---\ndescription: Two llm steps\n---\n1. Ask twice.\n",
        Some(
            "def execute(request):\n    a = llm(\"first word\", expects = {\"word\": \"a word\"})\n    auto(\"echo \" + a.outputs[\"word\"] + \" >> out-\" + request)\n    b = llm(\"second word\", expects = {\"word\": \"a word\"})\n    auto(\"echo \" + b.outputs[\"word\"] + \" >> out-\" + request)\n",
        ),
    );
}

/// Checks that runs `a`, `b` and `c` of [`two_steps`], given `a1`, `a2` and so on, each
/// wrote only their own words.
pub(crate) fn each_run_got_its_own_outputs(project: &Project) {
    for (name, words) in [("a", "a1\na2\n"), ("b", "b1\nb2\n"), ("c", "c1\nc2\n")] {
        let out =
            std::fs::read_to_string(project.root().join(format!("out-{name}"))).expect("output");
        assert_eq!(out, words, "run {name} got only its own outputs");
    }
}

/// Gives run `handle` the word its pending llm step expects, through `client`.
async fn give(talk: &mut Conversation, client: &Client, handle: &str, word: &str) -> String {
    talk.call(
        client,
        "continue_compiled_script",
        json!({"run_id": handle, "outputs": {"word": word}}),
    )
    .await
    .ok()
}

#[tokio::test]
async fn two_runs_interleaved_on_one_server_and_a_third_from_another_process() {
    let project = Project::new();
    two_steps(&project);
    let client = Client::start(&project, &[]).await;
    let other = Client::start(&project, &[]).await;
    let mut talk = Conversation::default();
    let a = talk
        .call(&client, "start", json!({"name": "two", "arguments": "a"}))
        .await;
    // The handle is in the text, and there is no structured content: Claude Code gives the
    // model a result's structured content instead of its text.
    assert!(
        a.structured.is_none(),
        "start has structuredContent:\n{a:?}"
    );
    let a = handle(&a.ok());
    // Without `parent`, a start while `a` waits is a run of its own, not nested.
    let b = handle(
        &talk
            .call(&client, "start", json!({"name": "two", "arguments": "b"}))
            .await
            .ok(),
    );
    assert_ne!(a, b);
    let c = handle(
        &talk
            .call(&other, "start", json!({"name": "two", "arguments": "c"}))
            .await
            .ok(),
    );
    for (server, run, word) in [(&client, &a, "a1"), (&other, &c, "c1"), (&client, &b, "b1")] {
        give(&mut talk, server, run, word).await;
    }
    // Each run shows its own pending step.
    let status = talk
        .call(&client, "status", json!({"run_id": a}))
        .await
        .ok();
    assert!(status.contains(&a), "the status of another run:\n{status}");
    for (server, run, word) in [(&client, &b, "b2"), (&other, &c, "c2"), (&client, &a, "a2")] {
        give(&mut talk, server, run, word).await;
    }
    insta::assert_snapshot!(talk.text(&project));
    each_run_got_its_own_outputs(&project);
}

#[tokio::test]
async fn a_guessed_wrong_or_finished_handle_is_refused_and_changes_nothing() {
    let project = Project::new();
    two_steps(&project);
    let client = Client::start(&project, &[]).await;
    let real = handle(
        &client
            .call("start", json!({"name": "two", "arguments": "x"}))
            .await
            .ok(),
    );
    let (id, token) = real.split_once('.').expect("a handle");
    let journal = project.journal(id);
    let other = Client::start(&project, &[]).await;
    let wrong_token = format!("{id}.{}", "0".repeat(32));
    let short = format!("{id}.{}", &token[..31]);
    let mut talk = Conversation::default();
    let driver = (&client, "the server that drives it");
    let another = (&other, "another server");
    // The id alone opens a run only for the connection that drives it (`other` does not).
    for (guess, what, clients) in [
        (wrong_token.as_str(), "a wrong token", vec![driver, another]),
        (
            short.as_str(),
            "a token one digit short",
            vec![driver, another],
        ),
        (id, "the id alone", vec![another]),
    ] {
        for (c, by) in clients {
            let refused = c
                .call(
                    "continue_compiled_script",
                    json!({"run_id": guess, "outputs": {"word": "w"}}),
                )
                .await;
            talk.record(
                &format!("continue_compiled_script with {what}, to {by}"),
                &refused,
            );
            refused.err();
        }
    }
    talk.call(
        &other,
        "status",
        json!({"run_id": format!("20200101-000000-0000.{token}")}),
    )
    .await
    .err();
    assert_eq!(project.journal(id), journal, "nothing was written");
    // Another process holds the run right now: the second server reads it without taking
    // it (issue 28: `status` was refused as "in use").
    talk.call(&other, "status", json!({"run_id": real}))
        .await
        .ok();

    give(&mut talk, &client, &real, "one").await;
    give(&mut talk, &client, &real, "two").await;
    let before = project.runs_snapshot();
    talk.call(
        &other,
        "continue_compiled_script",
        json!({"run_id": real, "outputs": {"word": "w"}}),
    )
    .await
    .err();
    assert!(
        project.runs_snapshot() == before,
        "a call on the finished run changed the run store"
    );
    insta::assert_snapshot!(talk.text(&project));
}

/// The MCP Inspector's `--cli` way: a new server process per call, the handle carrying the
/// run from one to the next.
#[tokio::test]
async fn separate_processes_carry_a_run_to_its_end_by_its_handle() {
    let project = Project::new();
    two_steps(&project);
    let once = |args: serde_json::Value, tool: &'static str| {
        let project = &project;
        async move {
            let client = Client::start(project, &[]).await;
            let reply = client.call(tool, args.clone()).await;
            client.service.cancel().await.expect("close");
            (format!("{tool} {args}"), reply)
        }
    };
    let mut talk = Conversation::default();
    let mut call = async |args, tool| {
        let (call, reply) = once(args, tool).await;
        talk.record(&call, &reply);
        reply.ok()
    };
    let h = handle(&call(json!({"name": "two", "arguments": "p"}), "start").await);
    call(json!({"run_id": h}), "status").await;
    call(
        json!({"run_id": h, "outputs": {"word": "one"}}),
        "continue_compiled_script",
    )
    .await;
    call(
        json!({"run_id": h, "outputs": {"word": "two"}}),
        "continue_compiled_script",
    )
    .await;
    insta::assert_snapshot!(talk.text(&project));
    let out = std::fs::read_to_string(project.root().join("out-p")).expect("output");
    assert_eq!(out, "one\ntwo\n");
}

/// Found by a model playing the agent (issue 28): with two runs waiting on one server,
/// `resume {}` said no run was waiting. It names both, by id, as live (their handles go on
/// with them; no `resume` is needed), and no handle's token.
#[tokio::test]
async fn resume_without_a_handle_names_the_runs_this_server_holds() {
    let project = Project::new();
    two_steps(&project);
    let client = Client::start(&project, &[]).await;
    let a = handle(
        &client
            .call("start", json!({"name": "two", "arguments": "a"}))
            .await
            .ok(),
    );
    let b = handle(
        &client
            .call("start", json!({"name": "two", "arguments": "b"}))
            .await
            .ok(),
    );
    let listed = client.call("resume", json!({})).await.ok();
    for handle in [&a, &b] {
        let (_, token) = handle.split_once('.').expect("a handle");
        assert!(!listed.contains(token), "a token was listed:\n{listed}");
    }
    insta::assert_snapshot!(project.scrub(&listed));
}

/// Found by a model playing the agent (issue 28): with two runs of one script waiting on one
/// connection, a call without `run_id` was taken silently by the newer run; with a run of
/// another script, it reached that one and was refused without naming either. It is
/// refused naming each run (id, script, what it waits for), changing nothing; `status`
/// without `run_id` lists them; each goes on with its `run_id`.
#[tokio::test]
async fn a_call_without_run_id_while_two_runs_wait_is_refused_naming_each() {
    let project = Project::new();
    two_steps(&project);
    project.script(
        "by-hand",
        "---\ndescription: NL only\n---\n1. Say hello.\n",
        None,
    );
    let client = Client::start(&project, &[]).await;
    let mut talk = Conversation::default();
    let a = handle(
        &talk
            .call(&client, "start", json!({"name": "two", "arguments": "a"}))
            .await
            .ok(),
    );
    let b = handle(
        &talk
            .call(&client, "start", json!({"name": "two", "arguments": "b"}))
            .await
            .ok(),
    );
    let before = project.runs_snapshot();
    let refused = talk
        .call(
            &client,
            "continue_compiled_script",
            json!({"outputs": {"word": "meant-for-a"}}),
        )
        .await
        .err();
    // What it says (each run named, and `run_id`) is in the conversation's snapshot.
    assert!(
        refused.starts_with("Refused: `continue_compiled_script` needs `run_id`"),
        "{refused}"
    );
    assert!(
        project.runs_snapshot() == before,
        "the refused call changed a run"
    );
    assert!(
        !project.root().join("out-b").exists(),
        "run b took the call"
    );
    talk.call(&client, "status", json!({})).await.ok();
    // A run of another script, waiting for something else: still not guessed.
    let n = handle(
        &talk
            .call(&client, "start", json!({"name": "by-hand"}))
            .await
            .ok(),
    );
    let refused = talk
        .call(&client, "finish_nl_script", json!({}))
        .await
        .err();
    assert!(refused.starts_with("Refused: "), "{refused}");
    talk.call(&client, "finish_nl_script", json!({"run_id": n}))
        .await
        .ok();
    give(&mut talk, &client, &a, "a1").await;
    give(&mut talk, &client, &b, "b1").await;
    insta::assert_snapshot!(talk.text(&project));
    assert_eq!(
        std::fs::read_to_string(project.root().join("out-a")).expect("out-a"),
        "a1\n"
    );
}

/// A script whose one auto step fails: the run falls back and waits to be finished by hand.
fn failing(project: &Project) {
    project.script(
        "fails",
        "---\ndescription: Fails\n---\n1. Check the build. If it fails, stop.\n",
        Some(
            "def execute(request):\n    auto(\"echo the build is broken >&2; exit 3\", context = \"Check the build\")\n",
        ),
    );
}

/// Found by a model playing the agent (issue 28): `status`, which only reads, was refused as
/// "in use" from a second server process while the first drove the run. It reads the
/// journal without taking the run: it says the run is driven elsewhere and that it failed
/// and waits to be finished by hand, or which llm step it waits on, with the first lines of
/// its prompt (as `mekara runs show` does), and the first server goes on with it after.
#[tokio::test]
async fn status_from_another_server_reads_a_driven_run_without_taking_it() {
    let project = Project::new();
    failing(&project);
    two_steps(&project);
    let driver = Client::start(&project, &[]).await;
    let other = Client::start(&project, &[]).await;
    let mut talk = Conversation::default();
    let failed = handle(
        &talk
            .call(&driver, "start", json!({"name": "fails"}))
            .await
            .ok(),
    );
    let waiting = handle(
        &talk
            .call(&driver, "start", json!({"name": "two", "arguments": "w"}))
            .await
            .ok(),
    );
    // What the other server reads of each (in the conversation's snapshot).
    talk.call(&other, "status", json!({"run_id": failed}))
        .await
        .ok();
    talk.call(&other, "status", json!({"run_id": waiting}))
        .await
        .ok();
    let id = waiting
        .split('.')
        .next()
        .expect("a handle starts with the run id");
    let shown = project.run(&["runs", "show", id], "");
    // The driver still holds both.
    give(&mut talk, &driver, &waiting, "one").await;
    talk.call(&driver, "finish_nl_script", json!({"run_id": failed}))
        .await
        .ok();
    insta::assert_snapshot!(talk.text(&project));
    mekara_snapshot!(project, shown).expect_code(0);
}

/// Found by a model playing the agent (issue 28): `status` from another server process of a
/// run that failed and waits, once its server was gone, did not say that it failed (it took
/// the run up and said only to call `resume`), and kept the run from everyone else. It says
/// the run failed and waits to be finished by hand, and a third server takes the run up.
#[tokio::test]
async fn status_from_another_server_says_a_run_failed_and_waits() {
    let project = Project::new();
    failing(&project);
    let (h, read) = status_once_its_server_is_gone(&project, "fails").await;
    insta::assert_snapshot!(project.scrub(&read));
    let third = Client::start(&project, &[]).await;
    let resumed = third.call("resume", json!({"run_id": h})).await.ok();
    insta::assert_snapshot!(project.scrub(&resumed));
}

/// Found by a model playing the agent (issue 40's triage trial): `status` from another server
/// of a run that waits for the user's answer, once its server was gone, said to call `resume`,
/// while the reply that asked said to pass the answer with `continue_compiled_script`: two
/// calls for one answer. It now gives the question's choices and the one call that passes the
/// answer on, and that call takes the run up and goes on.
#[tokio::test]
async fn status_from_another_server_of_a_waiting_question_says_how_to_pass_the_answer() {
    let project = Project::new();
    project.script(
        "asks",
        "---\ndescription: Asks\n---\n1. Ask the user whether to go on.\n",
        Some(
            "def execute(request):\n    a = ask(\"Go on?\", choices = [\"yes\", \"no\"])\n    auto(\"echo answered \" + a.answer, context = \"Say it\")\n",
        ),
    );
    let (h, read) = status_once_its_server_is_gone(&project, "asks").await;
    // The handle it names is this run's (the snapshot shows it redacted).
    assert!(read.contains(&format!("\"run_id\": \"{h}\"")), "{read}");
    insta::assert_snapshot!(project.scrub(&read));
    assert!(
        !read.contains("`resume`"),
        "one call for the answer:\n{read}"
    );
    let third = Client::start(&project, &[]).await;
    let went_on = third
        .call(
            "continue_compiled_script",
            json!({"run_id": h, "outputs": {"answer": "yes"}}),
        )
        .await
        .ok();
    insta::assert_snapshot!(project.scrub(&went_on));
}

/// Starts script `name` on one server, closes that server and waits until its process is
/// gone, then reads the run's `status` from a second server. The run's handle and the status.
async fn status_once_its_server_is_gone(project: &Project, name: &str) -> (String, String) {
    let driver = Client::start(project, &[]).await;
    let h = handle(&driver.call("start", json!({"name": name})).await.ok());
    let pid = driver.pid;
    driver.service.cancel().await.expect("close");
    while super::client::alive(pid) {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let other = Client::start(project, &[]).await;
    let read = other.call("status", json!({"run_id": h})).await.ok();
    (h, read)
}

/// Found trying `flow/release` on psf/requests (issue 39): a script that stopped on a failed
/// check within its `start` call said to `resume` "with the run's handle as `run_id`", which
/// no reply had given (it named the run's id, and `resume` refuses the id alone). It gives
/// the call with the handle, and that call runs the step again once the cause is fixed.
#[tokio::test]
async fn a_run_stopped_in_its_start_call_gives_the_resume_call_with_its_handle() {
    let project = Project::new();
    project.script(
        "gate",
        "---\ndescription: Gate\n---\n1. Check that the build is ready; stop if not.\n",
        Some(
            "def execute(request):\n    if not auto(\"test -f ready\", context = \"Check the build\", allow_failure = True).success:\n        fail(\"the build is not ready: create `ready`\")\n    auto(\"echo released > out\", context = \"Release\")\n",
        ),
    );
    let client = Client::start(&project, &[]).await;
    let stopped = client.call("start", json!({"name": "gate"})).await.ok();
    let line = stopped
        .lines()
        .find(|l| l.starts_with("It stopped on a step that failed"))
        .unwrap_or_else(|| panic!("no retry line:\n{stopped}"));
    let arguments = line
        .split_once("`resume` with `")
        .and_then(|(_, rest)| rest.split_once('`'))
        .map_or_else(
            || panic!("no call with the handle: {line}"),
            |(call, _)| call,
        );
    project.write("ready", "");
    let resumed = client
        .call("resume", serde_json::from_str(arguments).expect("JSON"))
        .await
        .ok();
    insta::assert_snapshot!(project.scrub(&resumed));
    assert_eq!(
        std::fs::read_to_string(project.root().join("out")).expect("out"),
        "released\n"
    );
}
