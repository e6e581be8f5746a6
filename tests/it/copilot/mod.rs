//! End to end with the real Copilot CLI: `mekara install --client copilot` in a temporary
//! project, then `copilot -p PROMPT` with `HOME` in a temporary folder, offline
//! (`COPILOT_OFFLINE`, no GitHub account) and with a provider of its own
//! (`COPILOT_PROVIDER_BASE_URL`) at a scripted stand-in model speaking the Chat Completions API
//! ([`crate::chat_completions`]), which records every request Copilot CLI makes. The checks are
//! on those requests (what the model was really shown) and on mekara's journal.
//!
//! Copilot CLI is installed by `tests/copilot/install.sh` into `target/test-clients/copilot/`.
//! The tests are ignored unless the `clients` feature is on (as in CI); with it on, a missing
//! client is a failure.

use std::path::PathBuf;

use crate::chat_completions::{self as standin, Session, Turn, call};
use crate::common::Project;

/// The installed `copilot`.
fn copilot() -> PathBuf {
    crate::common::outside_client(
        "copilot/node_modules/.bin/copilot",
        "Copilot CLI",
        "tests/copilot/install.sh",
    )
}

/// Where Copilot CLI's executable unpacks itself (`tests/copilot/install.sh` does it once).
fn copilot_cache() -> PathBuf {
    crate::common::outside_client("copilot/cache", "Copilot CLI", "tests/copilot/install.sh")
}

/// A project with `mekara install --client copilot` run in it, and the folder trusted in the
/// person's `~/.copilot/config.json`, as Copilot CLI saves it when asked on the first
/// interactive launch (until then it does not read the project's `.mcp.json`).
fn installed_project() -> Project {
    let (project, stdout) = crate::common::installed_for("copilot");
    assert!(stdout.contains("--allow-tool mekara"), "{stdout}");
    let root = project.root().canonicalize().expect("canonical root");
    crate::common::write_file(
        &project.home().join(".copilot/config.json"),
        &serde_json::json!({"trusted_folders": [root]}).to_string(),
    );
    project
}

/// Runs `copilot -p PROMPT ARGS...` in the project against a stand-in scripted with `turns`.
fn copilot_p(project: &Project, prompt: &str, args: &[&str], turns: Vec<Turn>) -> Session {
    let standin = standin::start(turns);
    let mut command = project.client_command(&copilot());
    command
        .args(["-p", prompt, "--no-auto-update", "--disable-builtin-mcps"])
        .args(args)
        // Unpacked there once by the install script, not into each test's home.
        .env("COPILOT_CACHE_HOME", copilot_cache())
        .env("COPILOT_OFFLINE", "true")
        .env("COPILOT_PROVIDER_BASE_URL", format!("{}/v1", standin.url()))
        .env("COPILOT_PROVIDER_API_KEY", "sk-stand-in")
        .env("COPILOT_MODEL", "stand-in");
    Session::run(command, standin)
}

/// The name Copilot CLI gives one of mekara's tools.
fn copilot_name(tool: &str) -> String {
    format!("mekara-{tool}")
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Copilot CLI")]
#[test]
fn a_scripted_run_of_test_nested_completes_through_copilot_cli() {
    let project = installed_project();
    let session = copilot_p(
        &project,
        "Run the nested test script.",
        &["--allow-tool", "mekara"],
        standin::nested_turns(copilot_name),
    );
    session.assert_nested_run(&project, copilot_name);
}

/// The control for the test above: without `--allow-tool mekara`, Copilot CLI does not run
/// mekara's `start` in `-p` mode, where nobody can approve it.
#[cfg_attr(not(feature = "clients"), ignore = "needs Copilot CLI")]
#[test]
fn without_allow_tool_copilot_cli_does_not_run_mekaras_tools() {
    let project = installed_project();
    let session = copilot_p(
        &project,
        "Start test/random.",
        &[],
        vec![call(
            &copilot_name("start"),
            serde_json::json!({"name": "test/random", "arguments": "7"}),
        )],
    );
    let offered = session.offered();
    assert!(
        offered.iter().any(|n| n == "mekara-start"),
        "the tool was not even offered: {offered:?}\n{session}"
    );
    assert!(
        project.run_ids().is_empty(),
        "mekara ran the script anyway\n{session}"
    );
}

/// Without the folder trusted, Copilot CLI does not read the project's `.mcp.json`: the
/// person trusts it once, as install's output says.
#[cfg_attr(not(feature = "clients"), ignore = "needs Copilot CLI")]
#[test]
fn in_an_untrusted_folder_copilot_cli_offers_no_mekara_tools() {
    let (project, _) = crate::common::installed_for("copilot");
    let session = copilot_p(&project, "Hello.", &["--allow-tool", "mekara"], Vec::new());
    let offered = session.offered();
    assert!(
        !offered.iter().any(|n| n.starts_with("mekara-")),
        "{offered:?}\n{session}"
    );
}

/// `copilot plugin marketplace add <checkout>` and `copilot plugin install mekara@mekara`
/// for the project's person (Copilot CLI reads the repository's Claude Code marketplace), and
/// the project's folder trusted, as on the first interactive launch.
fn plugin_installed(project: &Project) {
    let checkout = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for args in [
        vec![
            "plugin",
            "marketplace",
            "add",
            &checkout.display().to_string(),
        ],
        vec!["plugin", "install", "mekara@mekara"],
    ] {
        let out = project
            .client_command(&copilot())
            .args(&args)
            .env("COPILOT_CACHE_HOME", copilot_cache())
            .env("COPILOT_OFFLINE", "true")
            .output()
            .expect("run copilot plugin");
        assert!(
            out.status.success(),
            "copilot {args:?}: {out:?}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let root = project.root().canonicalize().expect("canonical root");
    let config = project.home().join(".copilot/config.json");
    let mut value: serde_json::Value = std::fs::read_to_string(&config)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_else(|| serde_json::json!({}));
    value["trusted_folders"] = serde_json::json!([root]);
    crate::common::write_file(&config, &value.to_string());
}

/// mekara's plugin, installed into Copilot CLI from the repository's marketplace, serves a
/// fresh project (no `mekara install`): its server, started through the plugin's launcher
/// and named as a configured one (`mekara-start`), runs the bundled compiled `test/nested`
/// to its end in `copilot -p`, every reply naming the tools as Copilot CLI offers them.
///
/// What does not work yet: Copilot CLI 1.0.102 starts a plugin's server in the plugin's own
/// folder (its working directory and `PWD` are the plugin root, and nothing in its
/// environment names the project), so `mekara mcp` finds no project there: the run is
/// journaled in `~/.mekara/runs`, and the project's own scripts are not offered.
#[cfg_attr(not(feature = "clients"), ignore = "needs Copilot CLI")]
#[test]
fn the_plugin_installed_from_the_marketplace_runs_a_compiled_script_through_copilot_cli() {
    let project = Project::new();
    plugin_installed(&project);
    let session = copilot_p(
        &project,
        "Run the nested test script.",
        &["--allow-tool", "mekara"],
        standin::nested_turns(copilot_name),
    );
    assert_eq!(
        session.standin.turns_left(),
        0,
        "not every turn was asked for\n{session}"
    );
    let offered = session.offered();
    assert!(
        offered.contains(&copilot_name("start")),
        "the plugin's tools were not offered: {offered:?}\n{session}"
    );
    let calls = crate::standin::nested_calls();
    let results = session.tool_results();
    assert_eq!(results.len(), calls.len(), "{results:#?}\n{session}");
    for (((tool, _), want), (name, output)) in calls
        .iter()
        .zip(crate::standin::NESTED_REPLIES)
        .zip(&results)
    {
        assert_eq!(name, &copilot_name(tool));
        assert!(
            output.contains(want),
            "`{tool}` did not reply `{want}`:\n{output}\n{session}"
        );
        crate::standin::assert_names_offered_tools(output, &offered);
    }
    // The server ran in the plugin's folder: the run is the person's, not the project's.
    assert!(project.run_ids().is_empty(), "{:?}", project.run_ids());
    let runs: Vec<PathBuf> = std::fs::read_dir(project.home().join(".mekara/runs"))
        .expect("the person's runs folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    let events: Vec<serde_json::Value> = std::fs::read_to_string(&runs[0])
        .expect("the journal")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a journal line is JSON"))
        .collect();
    crate::standin::assert_completed(&events);
}
