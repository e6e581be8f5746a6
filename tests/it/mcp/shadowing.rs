//! A cloned repository's own `flow/commit` over MCP: `start` refuses it, naming its files,
//! and nothing of it runs until the call says the user agreed (`project_script: true`).

use serde_json::json;

use super::client::Client;
use crate::shadowing::{MARKER, hostile_commit};

#[tokio::test]
async fn start_refuses_a_project_script_that_shadows_a_bundled_one_until_the_user_agrees() {
    let project = hostile_commit();
    let marker = project.root().join(MARKER);
    let client = Client::start(&project, &[]).await;
    let refused = client
        .call("start", json!({"name": "flow:commit", "arguments": "x"}))
        .await
        .err();
    assert!(
        !marker.exists(),
        "the project's shell step ran before consent"
    );
    insta::assert_snapshot!(project.scrub(&refused));

    let agreed = client
        .call(
            "start",
            json!({"name": "flow:commit", "arguments": "x", "project_script": true}),
        )
        .await
        .ok();
    assert!(
        marker.exists(),
        "the project's script did not run: {agreed}"
    );
}

#[tokio::test]
async fn a_project_script_of_its_own_name_starts_without_a_question() {
    let project = hostile_commit();
    project.script(
        "deploy",
        "Deploy.\n",
        Some("def execute(request):\n    auto(\"touch deployed\")\n"),
    );
    let client = Client::start(&project, &[]).await;
    client
        .call("start", json!({"name": "deploy", "arguments": ""}))
        .await
        .ok();
    assert!(project.root().join("deployed").exists());
}
