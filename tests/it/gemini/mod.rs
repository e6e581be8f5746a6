//! End to end with the real Gemini CLI: `mekara install --client gemini` in a temporary
//! project, then `gemini -p` with `HOME` in a temporary folder and `GOOGLE_GEMINI_BASE_URL` at
//! a scripted stand-in model ([`standin`]), which records every request Gemini CLI makes. The
//! checks are on those requests (what the model was really shown) and on mekara's journal.
//!
//! Gemini CLI is installed by `tests/gemini/install.sh` into `target/test-clients/gemini/`.
//! The tests are ignored unless the `clients` feature is on (as in CI); with it on, a missing
//! client is a failure.

mod standin;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value as Json, json};

use crate::common::{Project, journal_events, path_with_mekara};
use standin::{Session, function_call, text};

/// The installed `gemini`.
fn gemini() -> PathBuf {
    crate::common::outside_client(
        "gemini/node_modules/.bin/gemini",
        "Gemini CLI",
        "tests/gemini/install.sh",
    )
}

/// A project with `mekara install --client gemini` run in it, and what a person sets up on
/// the first interactive launch: the API key as the way to sign in, and trust in the folder
/// (Gemini CLI ignores an untrusted folder's settings, and `-p` refuses to run there).
fn installed_project() -> Project {
    let (project, _) = crate::common::installed_for("gemini");
    let root = project.root().canonicalize().expect("canonical root");
    let gemini_home = project.home().join(".gemini");
    crate::common::write_file(
        &gemini_home.join("settings.json"),
        &json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}).to_string(),
    );
    crate::common::write_file(
        &gemini_home.join("trustedFolders.json"),
        &json!({root.display().to_string(): "TRUST_FOLDER"}).to_string(),
    );
    project
}

/// Runs `gemini -p PROMPT` in the project against a stand-in scripted with `turns`.
fn gemini_p(project: &Project, prompt: &str, turns: Vec<standin::Turn>) -> Session {
    let standin = standin::start(turns);
    let mut command = Command::new(gemini());
    command
        .arg("-p")
        .arg(prompt)
        .current_dir(project.root())
        .env_clear()
        .env("PATH", path_with_mekara())
        .env("HOME", project.home())
        .env("GOOGLE_GEMINI_BASE_URL", standin.url())
        .env("GEMINI_API_KEY", "stand-in")
        // A fixed model: with the default ("auto") every prompt first goes to a routing
        // model, whose JSON answer the stand-in would have to play too.
        .env("GEMINI_MODEL", "gemini-2.5-flash")
        .env("MEKARA_LOG_FILE", project.home().join("mekara.log"));
    Session::run(command, standin)
}

impl Session {
    /// The tool results the model got, in order: (function name, `response` object), from
    /// the last main request (it carries the whole conversation).
    fn tool_results(&self) -> Vec<(String, Json)> {
        self.standin
            .main_requests()
            .last()
            .unwrap_or_else(|| panic!("no request reached the model\n{self}"))
            .function_responses()
    }
}

/// One scripted model turn that calls one of mekara's tools, by the name Gemini CLI gives it.
fn mekara_call(tool: &str, args: Json) -> standin::Turn {
    vec![function_call(&format!("mcp_mekara_{tool}"), args)]
}

#[cfg_attr(
    not(feature = "clients"),
    ignore = "needs Gemini CLI (bash tests/gemini/install.sh) and --features clients"
)]
#[test]
fn a_scripted_run_of_test_nested_completes_through_gemini_cli_without_a_prompt() {
    let project = installed_project();
    let calls = crate::standin::nested_calls();
    let turns = calls
        .iter()
        .map(|(tool, args)| mekara_call(tool, args.clone()))
        .chain([vec![text("All done.")]])
        .collect();
    let session = gemini_p(&project, "Run the nested test script.", turns);
    assert_eq!(
        session.standin.turns_left(),
        0,
        "not every turn was asked for\n{session}"
    );
    let offered = session.standin.main_requests()[0].function_names();
    assert!(
        offered.iter().any(|n| n == "mcp_mekara_start"),
        "mekara's tools were not offered: {offered:?}\n{session}"
    );

    let results = session.tool_results();
    assert_eq!(results.len(), calls.len(), "{results:#?}\n{session}");
    for (((tool, _), want), (name, response)) in calls
        .iter()
        .zip(crate::standin::NESTED_REPLIES)
        .zip(&results)
    {
        assert_eq!(name, &format!("mcp_mekara_{tool}"));
        let output = response["output"].as_str().unwrap_or_else(|| {
            panic!("`{tool}` got no output (refused or failed): {response}\n{session}")
        });
        assert!(
            output.contains(want),
            "`{tool}` did not reply `{want}`:\n{output}"
        );
        // The calls it names are named as Gemini CLI offers them (`mcp_mekara_...`).
        crate::standin::assert_names_offered_tools(output, &offered);
    }

    // The journal says the run completed.
    let events = journal_events(&project);
    crate::standin::assert_completed(&events);
}

#[cfg_attr(
    not(feature = "clients"),
    ignore = "needs Gemini CLI (bash tests/gemini/install.sh) and --features clients"
)]
#[test]
fn without_the_installed_trust_gemini_cli_does_not_offer_mekaras_tools() {
    // The control for the test above: it is install's `trust` that lets Gemini CLI use the
    // tools in `-p` mode, where nobody can answer its confirmation.
    let project = installed_project();
    let settings = project.root().join(".gemini/settings.json");
    let mut value: Json =
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("settings")).expect("json");
    value["mcpServers"]["mekara"]
        .as_object_mut()
        .expect("the server entry")
        .remove("trust");
    std::fs::write(&settings, value.to_string()).expect("write settings");
    let session = gemini_p(
        &project,
        "Start test/random.",
        vec![mekara_call(
            "start",
            json!({"name": "test/random", "arguments": "7"}),
        )],
    );
    let offered = session.standin.main_requests()[0].function_names();
    assert!(
        !offered.iter().any(|n| n.starts_with("mcp_mekara_")),
        "{offered:?}"
    );
    let results = session.tool_results();
    assert!(
        results[0].1.get("error").is_some(),
        "not refused: {results:?}"
    );
    assert!(project.run_ids().is_empty(), "mekara ran the script anyway");
}

/// The issue: Gemini CLI fills only required prompt arguments from what is typed after
/// `/name`, so with mekara's optional `arguments` the text was dropped (it reached the script
/// only as `/name --arguments="..."`).
#[cfg_attr(
    not(feature = "clients"),
    ignore = "needs Gemini CLI (bash tests/gemini/install.sh) and --features clients"
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
        (
            r#"/greet --arguments="Grace Hopper""#,
            "Say hi to <<Grace Hopper>>.",
        ),
        ("/greet", "Say hi to <<>>."),
    ] {
        let session = gemini_p(&project, typed, Vec::new());
        let shown = session
            .standin
            .main_requests()
            .first()
            .unwrap_or_else(|| panic!("`{typed}`: no request\n{session}"))
            .contents_text();
        assert!(
            shown.contains(want),
            "`{typed}`: {want} is missing:\n{shown}\n{session}"
        );
    }
}
