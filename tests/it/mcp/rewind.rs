//! Fix and go on through MCP: `resume` with `retry: true` or `from`, on a run the server
//! holds and on one a new server takes up from its journal.

use serde_json::json;

use super::client::{Client, handle};
use crate::common::Project;

fn counts(project: &Project) -> Vec<usize> {
    crate::rewind::counts(project, &["c0", "c1", "c2", "c3"])
}

/// Four steps; the third needs `needed.txt`.
fn script(project: &Project) {
    project.script(
        "fix",
        "Four steps; the third needs `needed.txt`.\n",
        Some(
            r#"def execute(request):
    auto("echo a >> c0")
    auto("echo a >> c1")
    auto("cat needed.txt && echo a >> c2")
    auto("echo a >> c3")
"#,
        ),
    );
}

#[tokio::test]
async fn retry_true_runs_the_failed_step_again_on_the_run_the_server_holds() {
    let project = Project::new();
    script(&project);
    let client = Client::start(&project, &[]).await;
    let failed = client.call("start", json!({"name": "fix"})).await.ok();
    insta::assert_snapshot!("mcp_failed_at_the_third_step", project.scrub(&failed));
    let run = handle(&failed);
    assert_eq!(counts(&project), [1, 1, 0, 0]);

    project.write("needed.txt", "here\n");
    let retried = client
        .call("resume", json!({"run_id": run, "retry": true}))
        .await
        .ok();
    insta::assert_snapshot!("mcp_retry_held", project.scrub(&retried));
    assert_eq!(counts(&project), [1, 1, 1, 1]);
    let status = client.call("status", json!({})).await.ok();
    insta::assert_snapshot!("mcp_status_after_the_retry", project.scrub(&status));
}

#[tokio::test]
async fn a_new_server_rewinds_an_edited_script_and_refuses_bad_requests() {
    let project = Project::new();
    script(&project);
    let first = Client::start(&project, &[]).await;
    let failed = first.call("start", json!({"name": "fix"})).await.ok();
    let run = handle(&failed);
    drop(first);
    assert_eq!(counts(&project), [1, 1, 0, 0]);
    project.write("needed.txt", "here\n");

    let path = project.root().join(".mekara/scripts/compiled/fix.star");
    let text = std::fs::read_to_string(&path).expect("script");
    std::fs::write(&path, text.replace("echo a >> c1", "echo b >> c1")).expect("edit");

    let client = Client::start(&project, &[]).await;
    let refusals = [
        client
            .call(
                "resume",
                json!({"run_id": run, "retry": true, "from": "fix[0]"}),
            )
            .await
            .err(),
        client.call("resume", json!({"retry": true})).await.err(),
        client
            .call("resume", json!({"run_id": run, "from": "deploy[4]"}))
            .await
            .err(),
    ];
    insta::assert_snapshot!(
        "mcp_rewind_refusals",
        project.scrub(&refusals.join("\n---\n"))
    );
    assert_eq!(counts(&project), [1, 1, 0, 0], "a refusal runs nothing");

    let rewound = client
        .call("resume", json!({"run_id": run, "retry": true}))
        .await
        .ok();
    insta::assert_snapshot!("mcp_rewind_edited_script", project.scrub(&rewound));
    assert_eq!(counts(&project), [1, 2, 1, 1]);
    let from = client
        .call("resume", json!({"run_id": run, "from": "fix[3]"}))
        .await
        .ok();
    insta::assert_snapshot!("mcp_rewind_from_a_step", project.scrub(&from));
    assert_eq!(counts(&project), [1, 2, 1, 2]);
}

#[tokio::test]
async fn a_session_with_a_retry_replays_from_its_cassette() {
    let project = Project::new();
    script(&project);
    let cassette = project.dir.path().join("retry.toml");
    let client = Client::start(&project, &[("MEKARA_VCR_CASSETTE", &cassette)]).await;
    let failed = client.call("start", json!({"name": "fix"})).await.ok();
    project.write("needed.txt", "here\n");
    client
        .call("resume", json!({"run_id": handle(&failed), "retry": true}))
        .await
        .ok();
    client.service.cancel().await.expect("close");
    assert_eq!(counts(&project), [1, 1, 1, 1]);

    // Replayed, every reply (the retry's plan too) must match the recording, and nothing
    // runs: the counters stay as they are.
    let replay = project.run(&["vcr", "replay", cassette.to_str().expect("utf-8")], "");
    replay.expect_code(0);
    mekara_snapshot!("mcp_retry_replayed", project, replay);
    assert_eq!(counts(&project), [1, 1, 1, 1]);
}
