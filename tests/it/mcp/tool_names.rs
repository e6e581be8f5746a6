//! The names of mekara's tools in what it tells an agent: each client shows them to its model
//! under a name of its own (Claude Code `mcp__mekara__start`, OpenCode `mekara_start`, ...),
//! and mekara, knowing the client from `initialize`'s `clientInfo.name`, uses that name in
//! its instructions, tool descriptions, replies and prompt texts.

use serde_json::json;

use super::client::Client;
use super::flows::prompt_text;
use crate::common::Project;

/// `clientInfo.name` → how its model sees `start`, `continue_compiled_script` and
/// `finish_nl_script`.
const CLIENTS: [(&str, [&str; 3]); 7] = [
    (
        "claude-code",
        [
            "mcp__mekara__start",
            "mcp__mekara__continue_compiled_script",
            "mcp__mekara__finish_nl_script",
        ],
    ),
    (
        "qwen-cli-mcp-client-mekara",
        [
            "mcp__mekara__start",
            "mcp__mekara__continue_compiled_script",
            "mcp__mekara__finish_nl_script",
        ],
    ),
    (
        "gemini-cli-mcp-client",
        [
            "mcp_mekara_start",
            "mcp_mekara_continue_compiled_script",
            "mcp_mekara_finish_nl_script",
        ],
    ),
    (
        "opencode",
        [
            "mekara_start",
            "mekara_continue_compiled_script",
            "mekara_finish_nl_script",
        ],
    ),
    (
        "copilot-cli",
        [
            "mekara-start",
            "mekara-continue_compiled_script",
            "mekara-finish_nl_script",
        ],
    ),
    // Codex offers the tools under their own names, in a namespace named after the server.
    (
        "codex-mcp-client",
        ["start", "continue_compiled_script", "finish_nl_script"],
    ),
    (
        "a-client-mekara-does-not-know",
        ["start", "continue_compiled_script", "finish_nl_script"],
    ),
];

#[tokio::test]
async fn every_text_names_the_tools_as_the_client_sees_them() {
    let project = Project::new();
    for (client_name, [start, cont, finish]) in CLIENTS {
        let renamed = start != "start";
        let client = Client::start_as(&project, client_name).await;
        let mention = |name: &str| format!("`{name}`");

        let instructions = client
            .service
            .peer_info()
            .and_then(|info| info.instructions.clone())
            .expect("instructions");
        assert!(
            instructions.contains(&mention(start)) && instructions.contains(&mention(cont)),
            "{client_name}: instructions:\n{instructions}"
        );

        let tools = client.service.list_all_tools().await.expect("tools/list");
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
        assert!(names.contains(&"start"), "the tools keep their own names");
        let finish_tool = tools
            .iter()
            .find(|t| t.name == "finish_nl_script")
            .expect("finish_nl_script");
        let described = finish_tool.description.as_deref().unwrap_or_default();
        assert!(
            described.contains(&mention(cont)),
            "{client_name}: description of finish_nl_script:\n{described}"
        );

        let reply = client
            .call("start", json!({"name": "test/random", "arguments": "7"}))
            .await
            .ok();
        assert!(
            reply.contains(&format!("call {} with", mention(cont))),
            "{client_name}: the reply does not name `{cont}`:\n{reply}"
        );
        assert!(
            reply.contains(&format!("Do not call {}", mention(finish))),
            "{client_name}: {reply}"
        );
        if renamed {
            assert!(
                !reply.contains("`continue_compiled_script`"),
                "{client_name}: a bare tool name is left:\n{reply}"
            );
        }

        let refused = client
            .call("continue_compiled_script", json!({"outputs": {}}))
            .await
            .err();
        assert!(
            refused.contains(&mention(start)) || refused.contains(&mention(cont)),
            "{client_name}: {refused}"
        );

        let prompt = prompt_text(&client, "test:random", "7").await;
        assert!(
            prompt.contains(&format!("Call mekara's {} tool", mention(start))),
            "{client_name}: prompts/get:\n{prompt}"
        );
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
    assert!(
        reply
            .contains("<instructions>\nRun `start` on the engine, then `status`.\n</instructions>"),
        "{reply}"
    );
    assert!(reply.contains("Call `mekara_finish_nl_script`"), "{reply}");
}
