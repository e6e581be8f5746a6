//! Runs as handles (MCP `2026-07-28`): `start` gives `<run id>.<token>`, the other tools
//! take it as `run_id`; one server holds many runs, and any server process takes a run up
//! by its handle.

use serde_json::json;

use super::client::{Client, handle};
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

async fn give(client: &Client, handle: &str, word: &str) -> String {
    client
        .call(
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
    let a = client
        .call("start", json!({"name": "two", "arguments": "a"}))
        .await;
    // The handle is in the text, and there is no structured content: Claude Code gives the
    // model a result's structured content instead of its text.
    assert!(
        a.structured.is_none(),
        "start has structuredContent:\n{a:?}"
    );
    let a = handle(&a.ok());
    // Without `parent`, a start while `a` waits is a run of its own, not nested.
    let b = client
        .call("start", json!({"name": "two", "arguments": "b"}))
        .await
        .ok();
    assert!(b.contains("llm step `two[0]`"), "not nested:\n{b}");
    let b = handle(&b);
    assert_ne!(a, b);
    let other = Client::start(&project, &[]).await;
    let c = handle(
        &other
            .call("start", json!({"name": "two", "arguments": "c"}))
            .await
            .ok(),
    );

    assert!(give(&client, &a, "a1").await.contains("second word"));
    assert!(give(&other, &c, "c1").await.contains("second word"));
    assert!(give(&client, &b, "b1").await.contains("second word"));
    // Each run shows its own pending step.
    let status = client.call("status", json!({"run_id": a})).await.ok();
    assert!(
        status.contains("second word") && status.contains(&a),
        "{status}"
    );
    assert!(give(&client, &b, "b2").await.contains("## Done"));
    assert!(give(&other, &c, "c2").await.contains("## Done"));
    let last = give(&client, &a, "a2").await;
    assert!(last.contains("## Done"), "{last}");
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
    // The id alone opens a run only for the connection that drives it (`other` does not).
    for (guess, clients) in [
        (wrong_token.as_str(), vec![&client, &other]),
        (short.as_str(), vec![&client, &other]),
        (id, vec![&other]),
    ] {
        for c in clients {
            let refused = c
                .call(
                    "continue_compiled_script",
                    json!({"run_id": guess, "outputs": {"word": "w"}}),
                )
                .await
                .err();
            assert!(
                refused.contains("Refused:") && refused.contains("`status` without `run_id`"),
                "{guess}:\n{refused}"
            );
        }
    }
    let unknown = other
        .call(
            "status",
            json!({"run_id": format!("20200101-000000-0000.{token}")}),
        )
        .await
        .err();
    assert!(unknown.contains("not found"), "{unknown}");
    assert_eq!(project.journal(id), journal, "nothing was written");
    // Another process holds the run right now: the second server cannot take it.
    let busy = other.call("status", json!({"run_id": real})).await.err();
    assert!(busy.contains("in use"), "{busy}");

    give(&client, &real, "one").await;
    assert!(give(&client, &real, "two").await.contains("## Done"));
    let before = project.runs_snapshot();
    let finished = other
        .call(
            "continue_compiled_script",
            json!({"run_id": real, "outputs": {"word": "w"}}),
        )
        .await
        .err();
    assert!(finished.contains("already finished"), "{finished}");
    assert!(
        project.runs_snapshot() == before,
        "a call on the finished run changed the run store"
    );
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
            let reply = client.call(tool, args).await.ok();
            client.service.cancel().await.expect("close");
            reply
        }
    };
    let h = handle(&once(json!({"name": "two", "arguments": "p"}), "start").await);
    let status = once(json!({"run_id": h}), "status").await;
    assert!(
        status.contains(&format!("handle `{h}`")) && status.contains("1. `two`"),
        "{status}"
    );
    let second = once(
        json!({"run_id": h, "outputs": {"word": "one"}}),
        "continue_compiled_script",
    )
    .await;
    assert!(second.contains("second word"), "{second}");
    let done = once(
        json!({"run_id": h, "outputs": {"word": "two"}}),
        "continue_compiled_script",
    )
    .await;
    assert!(done.contains("## Done"), "{done}");
    let out = std::fs::read_to_string(project.root().join("out-p")).expect("output");
    assert_eq!(out, "one\ntwo\n");
}
