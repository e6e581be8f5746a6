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

use crate::chat_completions::{self as standin, Session, Turn};
use crate::common::Project;

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
    project.client_command(&qwen())
}

/// Runs `qwen PROMPT` in the project against a stand-in scripted with `turns`.
fn qwen_p(project: &Project, prompt: &str, turns: Vec<Turn>) -> Session {
    let standin = standin::start(turns);
    let mut command = qwen_command(project);
    command
        .args(["--auth-type", "openai", prompt])
        .env("OPENAI_BASE_URL", format!("{}/v1", standin.url()))
        .env("OPENAI_API_KEY", "sk-stand-in")
        .env("OPENAI_MODEL", "stand-in");
    Session::run(command, standin)
}

/// The name Qwen Code gives one of mekara's tools.
fn qwen_name(tool: &str) -> String {
    format!("mcp__mekara__{tool}")
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Qwen Code")]
#[test]
fn a_scripted_run_of_test_nested_completes_through_qwen_code_without_a_prompt() {
    let project = installed_project();
    let session = qwen_p(
        &project,
        "Run the nested test script.",
        standin::nested_turns(qwen_name),
    );
    session.assert_nested_run(&project, qwen_name);
}

/// `/name text` on one of mekara's prompts reaches the script with the text as typed.
#[cfg_attr(not(feature = "clients"), ignore = "needs Qwen Code")]
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
