//! End to end with the real Qwen Code: `mekara install --client qwen` in a temporary project,
//! then `qwen PROMPT` (one-shot) with `HOME` in a temporary folder and `OPENAI_BASE_URL` at a
//! scripted stand-in model speaking the Chat Completions API ([`crate::chat_completions`]),
//! which records every request Qwen Code makes. The checks are on those requests (what the
//! model was really shown) and on mekara's journal.
//!
//! Qwen Code is installed by `tests/qwen/install.sh` into `target/test-clients/qwen/`. The
//! tests are ignored unless the `clients` feature is on (as in CI); with it on, a missing
//! client is a failure.

use std::path::PathBuf;
use std::process::Command;

use serde_json::Value as Json;

use crate::chat_completions::{self as standin, Session, Turn, call, say};
use crate::common::{Project, journal_events, path_with_mekara};

/// The installed `qwen`.
fn qwen() -> PathBuf {
    crate::common::outside_client(
        "qwen/node_modules/.bin/qwen",
        "Qwen Code",
        "tests/qwen/install.sh",
    )
}

/// A project with `mekara install --client qwen` run in it, and the `mekara` server approved
/// as install's output tells the person to do once (`qwen mcp approve mekara`: Qwen Code
/// starts no server of a project's configuration before it is approved).
fn installed_project() -> Project {
    let (project, stdout) = crate::common::installed_for("qwen");
    assert!(stdout.contains("qwen mcp approve mekara"), "{stdout}");
    let approved = qwen_command(&project)
        .args(["mcp", "approve", "mekara"])
        .output()
        .expect("run qwen mcp approve");
    assert!(
        approved.status.success(),
        "qwen mcp approve failed: {approved:?}"
    );
    project
}

/// `qwen` in the project, with `HOME` in the test's folder.
fn qwen_command(project: &Project) -> Command {
    let mut command = Command::new(qwen());
    command
        .current_dir(project.root())
        .env_clear()
        .env("PATH", path_with_mekara())
        .env("HOME", project.home());
    command
}

/// Runs `qwen PROMPT` in the project against a stand-in scripted with `turns`.
fn qwen_p(project: &Project, prompt: &str, turns: Vec<Turn>) -> Session {
    let standin = standin::start(turns);
    let mut command = qwen_command(project);
    command
        .args(["--auth-type", "openai", prompt])
        .env("OPENAI_BASE_URL", format!("{}/v1", standin.url()))
        .env("OPENAI_API_KEY", "sk-stand-in")
        .env("OPENAI_MODEL", "stand-in")
        .env("MEKARA_LOG_FILE", project.home().join("mekara.log"));
    Session::run(command, standin)
}

/// One scripted turn calling mekara's `tool`, by the name Qwen Code gives it.
fn mekara_call(tool: &str, args: Json) -> Turn {
    call(&format!("mcp__mekara__{tool}"), args)
}

/// The tool results the model got, from the last request that offered tools (it carries the
/// whole conversation).
fn tool_results(session: &Session) -> Vec<(String, String)> {
    session
        .standin
        .recorded()
        .iter()
        .rev()
        .find(|r| !r.chat_tool_names().is_empty())
        .unwrap_or_else(|| panic!("no request reached the model\n{session}"))
        .chat_tool_results()
}

#[cfg_attr(
    not(feature = "clients"),
    ignore = "needs Qwen Code (bash tests/qwen/install.sh) and --features clients"
)]
#[test]
fn a_scripted_run_of_test_nested_completes_through_qwen_code_without_a_prompt() {
    let project = installed_project();
    let calls = crate::standin::nested_calls();
    let turns = calls
        .iter()
        .map(|(tool, args)| mekara_call(tool, args.clone()))
        .chain([say("All done.")])
        .collect();
    let session = qwen_p(&project, "Run the nested test script.", turns);
    assert_eq!(
        session.standin.turns_left(),
        0,
        "not every turn was asked for\n{session}"
    );
    let offered = session
        .standin
        .recorded()
        .iter()
        .find(|r| !r.chat_tool_names().is_empty())
        .map(crate::standin::Recorded::chat_tool_names)
        .unwrap_or_default();
    assert!(
        offered.iter().any(|n| n == "mcp__mekara__start"),
        "mekara's tools were not offered: {offered:?}\n{session}"
    );

    let results = tool_results(&session);
    assert_eq!(results.len(), calls.len(), "{results:#?}\n{session}");
    for (((tool, _), want), (name, output)) in calls
        .iter()
        .zip(crate::standin::NESTED_REPLIES)
        .zip(&results)
    {
        assert_eq!(name, &format!("mcp__mekara__{tool}"));
        assert!(
            output.contains(want),
            "`{tool}` did not reply `{want}`:\n{output}\n{session}"
        );
        crate::standin::assert_names_offered_tools(output, &offered);
    }
    crate::standin::assert_completed(&journal_events(&project));
}

/// `/name text` on one of mekara's prompts reaches the script with the text as typed.
#[cfg_attr(
    not(feature = "clients"),
    ignore = "needs Qwen Code (bash tests/qwen/install.sh) and --features clients"
)]
#[test]
fn a_typed_prompt_command_passes_its_text_to_the_script() {
    let project = installed_project();
    project.write(
        ".mekara/scripts/nl/greet.md",
        "---\ndescription: Greet someone\n---\n\nSay hi to <<$ARGUMENTS>>.\n",
    );
    for (typed, want) in [
        ("/greet the whole team", "Say hi to <<the whole team>>."),
        ("/greet Ada", "Say hi to <<Ada>>."),
        ("/greet", "Say hi to <<>>."),
    ] {
        let session = qwen_p(&project, typed, Vec::new());
        let shown = session
            .standin
            .recorded()
            .first()
            .unwrap_or_else(|| panic!("`{typed}`: no request\n{session}"))
            .chat_text();
        assert!(
            shown.contains(want),
            "`{typed}`: {want} is missing:\n{shown}\n{session}"
        );
    }
}
