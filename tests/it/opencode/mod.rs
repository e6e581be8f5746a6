//! End to end with the real OpenCode: `mekara install --client opencode` in a temporary
//! project, then `opencode run MESSAGE` with `HOME` in a temporary folder whose
//! `~/.config/opencode/opencode.json` adds a provider at a scripted stand-in model speaking the
//! Chat Completions API ([`crate::chat_completions`]), which records every request OpenCode
//! makes. The checks are on those requests (what the model was really shown) and on mekara's
//! journal.
//!
//! OpenCode is installed by `tests/opencode/install.sh` into `target/test-clients/opencode/`.
//! The tests are ignored unless the `clients` feature is on (as in CI); with it on, a missing
//! client is a failure.

use std::path::PathBuf;

use serde_json::{Value as Json, json};

use crate::chat_completions::{self as standin, Session, Turn, call, say};
use crate::common::{Project, journal_events, path_with_mekara};

/// The installed `opencode`.
fn opencode() -> PathBuf {
    crate::common::outside_client(
        "opencode/node_modules/.bin/opencode",
        "OpenCode",
        "tests/opencode/install.sh",
    )
}

/// Runs `opencode run ARGS...` in the project against a stand-in scripted with `turns`.
fn opencode_run(project: &Project, args: &[&str], turns: Vec<Turn>) -> Session {
    let standin = standin::start(turns);
    crate::common::write_file(
        &project.home().join(".config/opencode/opencode.json"),
        &json!({
            "$schema": "https://opencode.ai/config.json",
            "model": "standin/stand-in",
            "provider": {"standin": {
                "npm": "@ai-sdk/openai-compatible",
                "name": "stand-in",
                "options": {"baseURL": format!("{}/v1", standin.url()), "apiKey": "sk-stand-in"},
                "models": {"stand-in": {"name": "stand-in", "tool_call": true}},
            }},
            "autoupdate": false,
            "share": "disabled",
        })
        .to_string(),
    );
    let mut command = project.client_command(&opencode());
    command
        .arg("run")
        .args(args)
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1");
    Session::run(command, standin)
}

/// One scripted turn calling mekara's `tool`, by the name OpenCode gives it.
fn mekara_call(tool: &str, args: Json) -> Turn {
    call(&format!("mekara_{tool}"), args)
}

/// The first request that offered tools (its tool names and text), and the tool results of
/// the last one.
fn main_requests(session: &Session) -> (Vec<String>, String, Vec<(String, String)>) {
    let recorded = session.standin.recorded();
    let main: Vec<_> = recorded
        .iter()
        .filter(|r| !r.chat_tool_names().is_empty())
        .collect();
    let (Some(first), Some(last)) = (main.first(), main.last()) else {
        panic!("no request offered tools\n{session}");
    };
    (
        first.chat_tool_names(),
        first.chat_text(),
        last.chat_tool_results(),
    )
}

#[cfg_attr(not(feature = "clients"), ignore = "needs OpenCode")]
#[test]
fn a_typed_command_runs_a_compiled_script_to_the_end_through_opencode() {
    let (project, _) = crate::common::installed_for("opencode");
    // The model does what the command says: `start` with the name and the typed words.
    let mut calls = crate::standin::nested_calls();
    calls[0].1 = json!({"name": "nest", "arguments": "with some words"});
    let turns = calls
        .iter()
        .map(|(tool, args)| mekara_call(tool, args.clone()))
        .chain([say("All done.")])
        .collect();
    // `test:nested` is a demo, which install writes no command for: the project's own
    // compiled script runs it.
    project.script(
        "nest",
        "---\ndescription: Run the nested demo\n---\nRun the nested demo.\n",
        Some("def execute(request):\n    call_script(\"test/nested\")\n"),
    );
    let again = project
        .command(&["install", "--client", "opencode"])
        .env("PATH", path_with_mekara())
        .output()
        .expect("run mekara install");
    assert!(again.status.success(), "{again:?}");
    let session = opencode_run(
        &project,
        &["--command", "nest", "with", "some", "words"],
        turns,
    );
    let (offered, first, results) = main_requests(&session);
    assert!(
        offered.iter().any(|n| n == "mekara_start"),
        "mekara's tools were not offered: {offered:?}\n{session}"
    );
    assert!(
        first.contains("`mekara_start`") && first.contains("<arguments>\nwith some words\n"),
        "the command's text did not reach the model:\n{first}\n{session}"
    );
    assert_eq!(results.len(), calls.len(), "{results:#?}\n{session}");
    for (name, output) in &results {
        assert!(name.starts_with("mekara_"), "{name}");
        crate::standin::assert_names_offered_tools(output, &offered);
    }
    let events = journal_events(&project);
    assert_eq!(
        (events[1]["script"].as_str(), events[1]["request"].as_str()),
        (Some("nest"), Some("with some words")),
        "{events:#?}"
    );
    crate::standin::assert_completed(&events);
}
