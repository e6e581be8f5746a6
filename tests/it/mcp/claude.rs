//! What the Claude Code integration names, checked against the real server: every
//! `mcp__mekara__<tool>` that `mekara install` allows or a hook tells the agent to call is a
//! tool `tools/list` gives; and `eject_script` copies a bundled script.

use std::collections::BTreeSet;

use serde_json::json;

use super::client::Client;
use crate::common::{Project, run_with_stdin};

/// Every `mcp__mekara__<name>` in `text`, as `<name>`.
fn mentioned_tools(text: &str) -> BTreeSet<String> {
    text.match_indices("mcp__mekara__")
        .map(|(at, prefix)| {
            text[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect()
}

#[tokio::test]
async fn every_tool_the_hooks_and_the_installer_name_exists_on_the_server() {
    let project = Project::new();
    project.script(
        "deploy",
        "Deploy.\n",
        Some("def execute(request):\n    auto(\"true\")\n"),
    );
    let client = Client::start(&project, &[]).await;
    let served: BTreeSet<String> = client
        .service
        .list_all_tools()
        .await
        .expect("tools/list")
        .iter()
        .map(|t| t.name.to_string())
        .collect();

    let install = project
        .command(&["install"])
        .output()
        .expect("mekara install");
    assert!(install.status.success(), "{install:?}");
    let settings =
        std::fs::read_to_string(project.root().join(".claude/settings.json")).expect("settings");
    let allowed = mentioned_tools(&settings);
    // The installer allows every tool, no more, no fewer.
    assert_eq!(allowed, served, "allowed by install vs served");

    for (hook, run) in reroutes_of_deploy(&project) {
        let named = mentioned_tools(&run.stdout);
        assert!(!named.is_empty(), "{hook} named no tool: {}", run.stdout);
        assert!(
            named.is_subset(&served),
            "{hook} names {named:?}; served: {served:?}"
        );
    }
}

/// What the two hooks say when `/deploy now` is typed and when the agent calls the Skill
/// `deploy`, by hook.
fn reroutes_of_deploy(project: &Project) -> [(&'static str, crate::common::Run); 2] {
    let prompt = json!({"prompt": "/deploy now", "cwd": project.root()}).to_string();
    let skill =
        json!({"tool_name": "Skill", "tool_input": {"skill": "deploy"}, "cwd": project.root()})
            .to_string();
    [
        ("reroute-user-commands", prompt),
        ("reroute-agent-commands", skill),
    ]
    .map(|(hook, input)| {
        let run = run_with_stdin(project.command(&["hook", hook]), &input);
        (hook, run)
    })
}

/// Issue 19: every text that sends an agent to `start` also says to pass the run's handle
/// as `run_id` (a stateless `2026-07-28` client reaches the run by nothing else): the two
/// hooks, the `/compile` command file `mekara install` writes, the server's instructions,
/// and the prompt of a compiled script, which is the call to `start`, not the Markdown to
/// follow by hand. An NL script's prompt stays its instructions.
#[tokio::test]
async fn every_text_that_sends_the_agent_to_start_says_to_pass_the_handle() {
    let project = Project::new();
    project.script(
        "deploy",
        "---\ndescription: Deploy\n---\nDeploy $ARGUMENTS from the console.\n",
        Some("def execute(request):\n    auto(\"true\")\n"),
    );
    project.script("notes", "Write notes on $ARGUMENTS.\n", None);
    let passes = "as `run_id` in every later call for that run";
    let mut seen = String::new();
    for (hook, run) in reroutes_of_deploy(&project) {
        seen.push_str(&format!("# hook {hook}\n{}\n", project.transcript(&run)));
    }
    let install = project
        .command(&["install"])
        .output()
        .expect("mekara install");
    assert!(install.status.success(), "{install:?}");
    let command = std::fs::read_to_string(project.root().join(".claude/commands/compile.md"))
        .expect("the /compile command file");
    assert!(command.contains(passes), "{command}");

    let client = Client::start(&project, &[]).await;
    let instructions = client
        .service
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .unwrap_or_default();
    let compiled = super::flows::prompt_text(&client, "deploy", "now").await;
    seen.push_str(&format!(
        "# the server's instructions\n{instructions}\n\n# prompts/get deploy now\n{compiled}"
    ));
    insta::assert_snapshot!(project.scrub(&seen));
    let nl = super::flows::prompt_text(&client, "notes", "x").await;
    assert_eq!(nl, "Write notes on x.\n");
}

#[tokio::test]
async fn eject_script_copies_a_bundled_script_and_refuses_to_overwrite() {
    let project = Project::new();
    let client = Client::start(&project, &[]).await;
    let copied = client
        .call("eject_script", json!({"name": "test:random"}))
        .await
        .ok();
    insta::assert_snapshot!("eject_script_copied", copied);
    let nl = project.root().join(".mekara/scripts/nl/test/random.md");
    let star = project
        .root()
        .join(".mekara/scripts/compiled/test/random.star");
    assert!(nl.is_file() && star.is_file());

    std::fs::write(&nl, "Mine.\n").expect("write");
    let refused = client
        .call("eject_script", json!({"name": "test:random"}))
        .await
        .err();
    insta::assert_snapshot!("eject_script_refused", project.scrub(&refused));
    assert_eq!(std::fs::read_to_string(&nl).expect("read"), "Mine.\n");

    client
        .call(
            "eject_script",
            json!({"name": "test:random", "force": true}),
        )
        .await
        .ok();
    assert_ne!(std::fs::read_to_string(&nl).expect("read"), "Mine.\n");

    let unknown = client
        .call("eject_script", json!({"name": "nope"}))
        .await
        .err();
    insta::assert_snapshot!("eject_script_unknown", unknown);
    let bad = client
        .call(
            "eject_script",
            json!({"name": "test:random", "force": "yes"}),
        )
        .await
        .err();
    insta::assert_snapshot!("eject_script_wrong_argument", project.scrub(&bad));
}
