//! The names of mekara's tools in what it tells an agent: each client shows them to its model
//! under a name of its own (Claude Code `mcp__mekara__start`, OpenCode `mekara_start`, ...),
//! and mekara, knowing the client from `initialize`'s `clientInfo.name`, uses that name in
//! its instructions, tool descriptions, replies and prompt texts.

use serde_json::json;

use super::client::{Client, Conversation, fixed_shuf_path};
use super::flows::prompt_text;
use crate::common::Project;

/// The `clientInfo.name` of each client, and how its model sees `start` (the snapshot of each
/// shows the other tools named the same way).
const CLIENTS: [&str; 7] = [
    "claude-code",                   // mcp__mekara__start
    "qwen-cli-mcp-client-mekara",    // mcp__mekara__start
    "gemini-cli-mcp-client",         // mcp_mekara_start
    "opencode",                      // mekara_start
    "copilot-cli",                   // mekara-start
    "codex-mcp-client",              // start, in a namespace named after the server
    "a-client-mekara-does-not-know", // start
];

#[tokio::test]
async fn every_text_names_the_tools_as_the_client_sees_them() {
    let project = Project::new();
    let path = fixed_shuf_path(&project);
    for client_name in CLIENTS {
        let client = Client::start_as_with(&project, client_name, &[("PATH", &path)]).await;
        let instructions = client
            .service
            .peer_info()
            .and_then(|info| info.instructions.clone())
            .expect("instructions");

        let tools = client.service.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert!(names.contains(&"start"), "the tools keep their own names");
        let finish_tool = tools
            .iter()
            .find(|t| t.name == "finish_nl_script")
            .expect("finish_nl_script");
        let described = finish_tool.description.as_deref().unwrap_or_default();

        let mut talk = Conversation::default();
        talk.call(
            &client,
            "start",
            json!({"name": "test/random", "arguments": "7"}),
        )
        .await
        .ok();
        talk.call(&client, "continue_compiled_script", json!({"outputs": {}}))
            .await
            .err();
        let prompt = prompt_text(&client, "test:random", "7").await;
        let seen = format!(
            "# instructions\n{instructions}\n\n# description of finish_nl_script\n{described}\n\n# replies\n{}\n# prompts/get test:random\n{prompt}",
            talk.text(&project)
        );
        insta::assert_snapshot!(format!("tool_names_{client_name}"), project.scrub(&seen));
    }
}

/// What a reply quotes from a script is the script's own text, even where it happens to
/// name one of mekara's tools.
#[tokio::test]
async fn quoted_script_text_keeps_its_words() {
    let project = Project::new();
    project.script(
        "engine",
        "---\ndescription: Engine check\n---\nRun `start` on the engine, then `status`.\n",
        None,
    );
    let client = Client::start_as(&project, "opencode").await;
    let reply = client
        .call("start", json!({"name": "engine", "arguments": ""}))
        .await
        .ok();
    insta::assert_snapshot!(project.scrub(&reply));
}
