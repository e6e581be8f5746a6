//! End to end with the real Codex CLI: `mekara install --client codex` in a temporary project,
//! then `codex exec` with `HOME` in a temporary folder whose `~/.codex/config.toml` points
//! Codex at a scripted stand-in model ([`standin`]), which records every request. The checks
//! are on those requests (what the model was really given back) and on mekara's journal.
//!
//! Codex is installed by `tests/codex/install.sh` into `target/test-clients/codex/`. The tests
//! are ignored unless the `clients` feature is on (as in CI); with it on, a missing binary is
//! a failure.

mod standin;

use std::path::{Path, PathBuf};

use serde_json::{Value as Json, json};

use crate::common::{Project, path_with_mekara, run_handle};
use standin::{StandIn, Turn, call, say};

/// The namespace Codex gives the model for the tools of the MCP server `mekara`.
const MEKARA: &str = "mcp__mekara";

/// The installed `codex`.
fn codex() -> PathBuf {
    crate::common::outside_client(
        "codex/node_modules/.bin/codex",
        "Codex",
        "tests/codex/install.sh",
    )
}

/// A project with `mekara install --client codex` run in it.
fn installed_project() -> Project {
    crate::common::installed_for("codex").0
}

/// What one `codex exec` run left behind.
type Session = crate::standin::Session<Turn>;

/// Runs `codex exec --trust PROMPT` in the project against a stand-in scripted with `turns`.
/// The person's own `~/.codex/config.toml` selects the stand-in as the model provider (a
/// project's config may not); `--trust` is what install's output tells the person to do once.
fn codex_exec(codex: &Path, project: &Project, prompt: &str, turns: Vec<Turn>) -> Session {
    let standin = StandIn::start(turns);
    use_standin(project, &standin);
    let mut command = project.client_command(codex);
    command
        .args(["exec", "--skip-git-repo-check", "--trust", prompt])
        .env("STANDIN_API_KEY", "sk-stand-in");
    Session::run(command, standin)
}

/// The person's `~/.codex/config.toml`, selecting `standin` as the model provider.
fn use_standin(project: &Project, standin: &StandIn) {
    crate::common::write_file(
        &project.home().join(".codex/config.toml"),
        &format!(
            "model = \"stand-in\"\nmodel_provider = \"stand-in\"\n\n\
             [model_providers.stand-in]\nname = \"stand-in\"\nbase_url = \"{}\"\n\
             wire_api = \"responses\"\nenv_key = \"STANDIN_API_KEY\"\n",
            standin.base_url()
        ),
    );
}

/// The tool result the model got for `call_id`.
fn output(session: &Session, call_id: &str) -> String {
    session
        .standin
        .responses()
        .iter()
        .find_map(|r| r.function_output(call_id))
        .unwrap_or_else(|| panic!("no tool result for `{call_id}` reached the model\n{session}"))
}

/// A turn calling mekara's `tool` with `arguments` and the handle of the run the last tool
/// result named, as an agent reads it from mekara's reply.
fn continue_run(call_id: &str, tool: &str, arguments: Json) -> Turn {
    call(call_id, MEKARA, tool, move |request| {
        // Without one (the last call failed), a handle that cannot match: the checks of
        // the tool results say what went wrong, not a panic in the stand-in's thread.
        let last = request.last_function_output().unwrap_or_default();
        let handle = run_handle(&last).unwrap_or_else(|| "no run handle".to_string());
        let mut arguments = arguments;
        arguments["run_id"] = json!(handle);
        arguments
    })
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Codex")]
#[test]
fn codex_runs_a_compiled_script_to_the_end_without_an_approval_prompt() {
    let codex = codex();
    let project = installed_project();
    let turns = vec![
        call(
            "call_start",
            MEKARA,
            "start",
            |_| json!({"name": "test/random", "arguments": "7"}),
        ),
        continue_run(
            "call_guess",
            "continue_compiled_script",
            json!({"outputs": {"guess": "50"}}),
        ),
        continue_run(
            "call_react",
            "continue_compiled_script",
            json!({"outputs": {}}),
        ),
        say("All done."),
    ];
    let session = codex_exec(&codex, &project, "Play test/random.", turns);
    assert_eq!(
        session.standin.turns_left(),
        0,
        "not every turn was asked for\n{session}"
    );

    // Codex offers mekara's tools in a namespace named after the server.
    let offered = session.standin.responses()[0].functions();
    assert!(
        offered.contains(&(Some(MEKARA.to_string()), "start".to_string())),
        "mekara's `start` is not offered as `{MEKARA}` `start`: {offered:?}"
    );

    // Every call reached `mekara mcp` (no approval refused it) and its reply came back.
    // mekara's texts name its tools as Codex offers them (`continue_compiled_script` in the
    // namespace), never by Claude Code's flat `mcp__mekara__<tool>`: Codex answers a call of
    // that name with "unsupported call".
    let tools = session.standin.responses()[0].body["tools"].to_string();
    assert!(!tools.contains("mcp__mekara__"), "{tools}");
    for (call_id, want) in [
        ("call_start", "## Your turn: llm step `test:random[1]`"),
        ("call_guess", "## Your turn: llm step `test:random[3]`"),
        ("call_react", "## Done"),
    ] {
        let output = output(&session, call_id);
        assert!(
            output.contains(want),
            "`{call_id}` did not reply `{want}`:\n{output}\n{session}"
        );
        assert!(!output.contains("mcp__mekara__"), "{output}");
        // Codex offers the tools under their own names, in the `mcp__mekara` namespace.
        let names: Vec<String> = offered
            .iter()
            .filter(|(namespace, _)| namespace.as_deref() == Some(MEKARA))
            .map(|(_, name)| name.clone())
            .collect();
        crate::standin::assert_names_offered_tools(&output, &names);
    }
    assert!(
        output(&session, "call_start").contains("`continue_compiled_script`"),
        "the reply does not name the next call as Codex offers it"
    );
    assert!(
        output(&session, "call_start").contains("`$ shuf -i 1-100 -n 1`"),
        "the auto step did not run"
    );

    // The journal says the same: the run was started with the arguments, took the guess,
    // and ended (its root frame popped).
    let ids = project.run_ids();
    assert_eq!(ids.len(), 1, "expected one run, found {ids:?}");
    let events: Vec<Json> = project
        .journal(&ids[0])
        .lines()
        .map(|l| serde_json::from_str(l).expect("a journal line is JSON"))
        .collect();
    assert_eq!(events[1]["event"], "push");
    assert_eq!(events[1]["script"], "test/random");
    assert_eq!(events[1]["request"], "7");
    assert!(
        events
            .iter()
            .any(|e| e["result"]["outputs"]["guess"] == "50"),
        "the guess is not journaled: {events:#?}"
    );
    let last = events.last().expect("events");
    assert_eq!(
        (last["event"].as_str(), last["depth"].as_u64()),
        (Some("pop"), Some(0)),
        "the run did not end: {events:#?}"
    );
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Codex")]
#[test]
fn without_the_installed_approval_mode_codex_refuses_the_call() {
    // The control for the test above: it is install's `default_tools_approval_mode` that lets
    // the call through in `codex exec`, where nobody can answer a prompt.
    let codex = codex();
    let project = installed_project();
    let config = project.root().join(".codex/config.toml");
    let text = std::fs::read_to_string(&config).expect("read the config");
    let without: String = text
        .split_inclusive('\n')
        .filter(|l| !l.starts_with("default_tools_approval_mode"))
        .collect();
    assert_ne!(without, text, "install wrote no approval mode:\n{text}");
    std::fs::write(&config, without).expect("write the config");
    let turns = vec![call(
        "call_start",
        MEKARA,
        "start",
        |_| json!({"name": "test/random", "arguments": "7"}),
    )];
    let session = codex_exec(&codex, &project, "Play test/random.", turns);
    let output = output(&session, "call_start");
    assert!(
        output.contains("requires approval"),
        "not refused:\n{output}\n{session}"
    );
    assert!(project.run_ids().is_empty(), "mekara ran the script anyway");
}

/// `mekara run --agent codex`: each llm step is one `codex exec --json --output-schema`, the
/// second resuming the first's thread; the outputs, the thread and the tokens are journaled.
#[cfg_attr(not(feature = "clients"), ignore = "needs Codex")]
#[test]
fn an_unattended_run_with_codex_answers_each_llm_step_in_one_thread() {
    let codex = codex();
    let project = Project::new();
    crate::standin::colour_script(&project);
    let standin = StandIn::start(vec![
        say(r#"{"colour": "red"}"#),
        say(r#"{"letters": "3"}"#),
    ]);
    use_standin(&project, &standin);
    let bin = codex.parent().expect("the folder of codex");
    let run = project
        .command(&["run", "--agent", "codex", "--json", "colour"])
        .env("PATH", format!("{}:{}", bin.display(), path_with_mekara()))
        .env("HOME", project.home())
        .env("STANDIN_API_KEY", "sk-stand-in")
        .output()
        .expect("run mekara");
    let run = crate::common::Run::from_output(run);
    let requests = standin.responses();
    assert_eq!(
        run.code,
        Some(0),
        "{}\n{}\nrequests: {}",
        run.stdout,
        run.stderr,
        requests.len()
    );
    let summary: Json = serde_json::from_str(&run.stdout).expect("a JSON summary");
    assert_eq!(summary["state"], "completed", "{summary}");
    // Codex asked for the schema's outputs, and the second question carried the first.
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let second = requests[1].body.to_string();
    assert!(
        second.contains("Name a colour.") && second.contains("Count the letters of red."),
        "{second}"
    );
    assert!(
        requests[0].body["text"]["format"]["type"] == "json_schema",
        "{}",
        requests[0].body
    );
    let steps: Vec<Json> = crate::common::journal_events(&project)
        .into_iter()
        .filter(|e| e["event"] == "step" && e["input"]["kind"] == "llm")
        .collect();
    assert_eq!(steps.len(), 2);
    let thread = steps[0]["result"]["agent"]["session"].clone();
    assert!(thread.is_string(), "{steps:#?}");
    assert_eq!(
        steps[1]["result"]["agent"]["session"], thread,
        "one thread for the run"
    );
    assert_eq!(steps[0]["result"]["outputs"]["colour"], "red");
    let echoed = crate::common::journal_events(&project)
        .into_iter()
        .find(|e| e["event"] == "step" && e["input"]["kind"] == "shell")
        .expect("the shell step");
    assert_eq!(echoed["result"]["output"], "red has 3\n", "{echoed}");
}

/// A rate limit (429) of the model, after Codex's own retries (`request_max_retries` and
/// `stream_max_retries` of the provider at 0 make it give up at once), is waited out: the run
/// completes, the wait is in the journal, the step is journaled once, and it is asked again
/// in the run's Codex thread.
#[cfg_attr(not(feature = "clients"), ignore = "needs Codex")]
#[test]
fn an_unattended_run_with_codex_waits_out_a_rate_limit_in_the_same_thread() {
    let codex = codex();
    let project = Project::new();
    crate::standin::colour_script(&project);
    let standin = StandIn::start(vec![
        say(r#"{"colour": "red"}"#),
        standin::http_error(429),
        standin::http_error(429),
        say(r#"{"letters": "3"}"#),
    ]);
    use_standin(&project, &standin);
    let config = project.home().join(".codex/config.toml");
    let mut text = std::fs::read_to_string(&config).expect("the config");
    text.push_str("request_max_retries = 0\nstream_max_retries = 0\n");
    crate::common::write_file(&config, &text);
    let bin = codex.parent().expect("the folder of codex");
    let run = project
        .command(&["run", "--agent", "codex", "--json", "colour"])
        .env("PATH", format!("{}:{}", bin.display(), path_with_mekara()))
        .env("HOME", project.home())
        .env("STANDIN_API_KEY", "sk-stand-in")
        .env("MEKARA_BACKOFF_SCALE", "0.001")
        .output()
        .expect("run mekara");
    let run = crate::common::Run::from_output(run);
    let requests = standin.responses();
    assert_eq!(
        run.code,
        Some(0),
        "{}\n{}\nrequests: {}",
        run.stdout,
        run.stderr,
        requests.len()
    );
    assert!(
        run.stderr
            .contains("`colour[1]`: rate-limited by the model; waiting")
            && run.stderr.contains("(attempt 3)"),
        "{}",
        run.stderr
    );
    let events = crate::common::journal_events(&project);
    let waits: Vec<&Json> = events.iter().filter(|e| e["event"] == "wait").collect();
    assert_eq!(waits.len(), 2, "{events:#?}");
    assert_eq!(waits[0]["step"], "colour[1]");
    assert!(
        waits[0]["said"]
            .as_str()
            .is_some_and(|s| s.starts_with("Codex: ") && s.contains("429")),
        "{}",
        waits[0]
    );
    let steps: Vec<&Json> = events
        .iter()
        .filter(|e| e["event"] == "step" && e["input"]["kind"] == "llm")
        .collect();
    assert_eq!(steps.len(), 2, "each llm step is journaled once");
    assert_eq!(
        steps[1]["result"]["agent"]["session"], steps[0]["result"]["agent"]["session"],
        "one thread for the run"
    );
    assert_eq!(steps[1]["result"]["outputs"]["letters"], "3");
    assert_eq!(requests.len(), 4, "{requests:#?}");
    let last = requests[3].body.to_string();
    assert!(
        last.contains("Name a colour.") && last.contains("Count the letters of red."),
        "{last}"
    );
}
