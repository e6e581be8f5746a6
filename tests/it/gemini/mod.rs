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
    signed_in(&project);
    trusted(&project);
    project
}

/// The person's Gemini CLI signs in with an API key.
fn signed_in(project: &Project) {
    crate::common::write_file(
        &project.home().join(".gemini/settings.json"),
        &json!({"security": {"auth": {"selectedType": "gemini-api-key"}}}).to_string(),
    );
}

/// The person told Gemini CLI to trust the project's folder.
fn trusted(project: &Project) {
    let root = project.root().canonicalize().expect("canonical root");
    crate::common::write_file(
        &project.home().join(".gemini/trustedFolders.json"),
        &json!({root.display().to_string(): "TRUST_FOLDER"}).to_string(),
    );
}

/// Runs `gemini -p PROMPT` in the project against a stand-in scripted with `turns`.
fn gemini_p(project: &Project, prompt: &str, turns: Vec<standin::Turn>) -> Session {
    let standin = standin::start(turns);
    let mut command = project.client_command(&gemini());
    command.arg("-p").arg(prompt);
    use_standin(&mut command, project, &standin);
    Session::run(command, standin)
}

/// Points Gemini CLI, started by `command`, at `standin`, with the project's `HOME`.
fn use_standin(command: &mut Command, project: &Project, standin: &standin::StandIn) {
    command
        .env("HOME", project.home())
        .env("GOOGLE_GEMINI_BASE_URL", standin.url())
        .env("GEMINI_API_KEY", "stand-in")
        // A fixed model: with the default ("auto") every prompt first goes to a routing
        // model, whose JSON answer the stand-in would have to play too.
        .env("GEMINI_MODEL", "gemini-2.5-flash");
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

#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
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
    for (i, ((tool, _), (name, response))) in calls.iter().zip(&results).enumerate() {
        assert_eq!(name, &format!("mcp_mekara_{tool}"));
        let output = response["output"].as_str().unwrap_or_else(|| {
            panic!("`{tool}` got no output (refused or failed): {response}\n{session}")
        });
        insta::assert_snapshot!(
            format!("test_nested_reply_{i}"),
            crate::common::reply_shown(&project, output)
        );
        // The calls it names are named as Gemini CLI offers them (`mcp_mekara_...`).
        crate::standin::assert_names_offered_tools(output, &offered);
    }

    // The journal says the run completed.
    let events = journal_events(&project);
    crate::standin::assert_completed(&events);
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
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
#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
#[test]
fn a_typed_prompt_command_passes_its_text_to_the_script() {
    let project = installed_project();
    project.write(
        ".mekara/scripts/nl/greet.md",
        "---\ndescription: Greet someone\n---\n\nSay hi to <<$ARGUMENTS>>.\n",
    );
    let mut greetings = String::new();
    for typed in [
        "/greet the whole team",
        "/greet Ada",
        r#"/greet --arguments="Grace Hopper""#,
        "/greet",
    ] {
        let session = gemini_p(&project, typed, Vec::new());
        let shown = session
            .standin
            .main_requests()
            .first()
            .unwrap_or_else(|| panic!("`{typed}`: no request\n{session}"))
            .contents_text();
        let said = crate::common::lines_with(&shown, &["Say hi to"]);
        greetings.push_str(&format!("{typed}\n{said}"));
    }
    insta::assert_snapshot!(greetings);
}

/// A project with a script of two llm steps, the second asking about the first's answer,
/// and Gemini CLI signed in.
fn colour_project() -> Project {
    let project = Project::new();
    signed_in(&project);
    crate::standin::colour_script(&project);
    project
}

/// `mekara run --agent gemini --json SCRIPT` against a stand-in scripted with `turns`: what
/// it printed, and every main request the stand-in got.
fn run_with_gemini(
    project: &Project,
    script: &str,
    turns: Vec<standin::Turn>,
) -> (crate::common::Run, Vec<standin::Recorded>) {
    let standin = standin::start(turns);
    let bin = gemini();
    let bin = bin.parent().expect("the folder of gemini");
    let mut command = project.command(&["run", "--agent", "gemini", "--json", script]);
    command.env("PATH", format!("{}:{}", bin.display(), path_with_mekara()));
    use_standin(&mut command, project, &standin);
    let run = crate::common::Run::from_output(command.output().expect("run mekara"));
    (run, standin.main_requests())
}

/// The journaled llm steps of the project's one run.
fn llm_steps(project: &Project) -> Vec<Json> {
    journal_events(project)
        .into_iter()
        .filter(|e| e["event"] == "step" && e["input"]["kind"] == "llm")
        .collect()
}

/// `mekara run --agent gemini`: each llm step is one `gemini -p`, the second resuming the
/// first's session; the outputs, the session and the tokens are journaled.
#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
#[test]
fn an_unattended_run_with_gemini_answers_each_llm_step_in_one_session() {
    let project = colour_project();
    trusted(&project);
    let (run, requests) = run_with_gemini(
        &project,
        "colour",
        vec![
            // The outputs may close a sentence in a fenced block, or stand alone.
            vec![text(
                "Red is a fine colour.\n```json\n{\"colour\": \"red\"}\n```",
            )],
            vec![text(r#"{"letters": "3"}"#)],
        ],
    );
    assert_eq!(
        run.code,
        Some(0),
        "{}\n{}\nrequests: {requests:#?}",
        run.stdout,
        run.stderr,
    );
    let summary: Json = serde_json::from_str(&run.stdout).expect("a JSON summary");
    assert_eq!(summary["state"], "completed", "{summary}");
    assert_eq!(requests.len(), 2, "{requests:#?}");
    // The outputs were asked for with their schema, in the prompt.
    let first = requests[0].contents_text();
    insta::assert_snapshot!(
        "the_first_question",
        project.scrub(&crate::common::lines_with(
            &first,
            &["Name a colour.", "\"colour\""]
        ))
    );
    // The second question carried the first, its answer included: one session.
    let second = requests[1].contents_text();
    insta::assert_snapshot!(
        "the_second_question",
        crate::common::lines_with(
            &second,
            &[
                "Name a colour.",
                "Red is a fine colour.",
                "Count the letters"
            ]
        )
    );
    let steps = llm_steps(&project);
    assert_eq!(steps.len(), 2);
    let session = steps[0]["result"]["agent"]["session"].clone();
    assert!(session.is_string(), "{steps:#?}");
    assert_eq!(
        steps[1]["result"]["agent"]["session"], session,
        "one session for the run"
    );
    assert_eq!(steps[0]["result"]["outputs"]["colour"], "red");
    assert_eq!(steps[1]["result"]["outputs"]["letters"], "3");
    // The stand-in counts 1 token in and 1 out per answer.
    for step in &steps {
        let agent = &step["result"]["agent"];
        assert_eq!(
            (
                agent["input_tokens"].as_u64(),
                agent["output_tokens"].as_u64()
            ),
            (Some(1), Some(1)),
            "{agent}"
        );
    }
    let id = project.run_ids().pop().expect("a run");
    let shown = project.run(&["runs", "show", &id], "");
    insta::assert_snapshot!(
        "what_gemini_spent_in_runs_show",
        project
            .scrub(&crate::common::lines_with(&shown.stdout, &["tokens in"]))
            .lines()
            .map(|l| l.split_once(", session ").map_or(l, |(spent, _)| spent))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let echoed = journal_events(&project)
        .into_iter()
        .find(|e| e["event"] == "step" && e["input"]["kind"] == "shell")
        .expect("the shell step");
    assert_eq!(echoed["result"]["output"], "red has 3\n", "{echoed}");
}

/// An answer without the outputs as JSON is refused, and Gemini is asked again once, in the
/// same session, told why.
#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
#[test]
fn a_gemini_answer_without_the_outputs_is_asked_again_once() {
    let project = colour_project();
    trusted(&project);
    let (run, requests) = run_with_gemini(
        &project,
        "colour",
        vec![
            vec![text("Red.")],
            vec![text(r#"{"colour": "blue"}"#)],
            vec![text(r#"{"letters": 4}"#)],
        ],
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(requests.len(), 3, "{requests:#?}");
    let again = requests[1].contents_text();
    insta::assert_snapshot!(
        "asked_again",
        crate::common::lines_with(&again, &["refused", "JSON object", "Red."])
    );
    let steps = llm_steps(&project);
    assert_eq!(steps[0]["result"]["outputs"]["colour"], "blue");
    assert_eq!(steps[0]["result"]["agent"]["attempts"], 2, "{steps:#?}");
}

/// In a folder Gemini CLI does not trust, `-p` will not run: the run fails saying how to
/// trust it, and asks the model nothing.
#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
#[test]
fn an_untrusted_folder_fails_the_run_saying_how_to_trust_it() {
    let project = colour_project();
    let (run, requests) =
        run_with_gemini(&project, "colour", vec![vec![text(r#"{"colour": "red"}"#)]]);
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(requests.is_empty(), "{requests:#?}");
    insta::assert_snapshot!(
        "an_untrusted_folder",
        project.scrub(&crate::common::lines_with(&run.stderr, &["trust"]))
    );
}

/// The bundled `test/nested` to its end with Gemini answering: an llm step with outputs, one
/// without, a called NL script and a last llm step, all in one session, each question
/// carrying the answers before it.
#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
#[test]
fn an_unattended_run_of_test_nested_with_gemini_completes() {
    let project = Project::new();
    signed_in(&project);
    trusted(&project);
    let answers = [
        r#"{"guess": "50"}"#,
        "So close!",
        "I imagined a small blue teapot.",
        "You owe me exactly one small blue teapot.",
    ];
    let (run, requests) = run_with_gemini(
        &project,
        "test/nested",
        answers.iter().map(|a| vec![text(a)]).collect(),
    );
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(requests.len(), answers.len(), "{requests:#?}");
    let last = requests[3].contents_text();
    let mut carried: Vec<&str> = answers[..3].to_vec();
    carried.push("Step 4: tell the user they owe you");
    insta::assert_snapshot!(
        "the_last_question_of_test_nested",
        crate::common::lines_with(&last, &carried)
    );
    let events = journal_events(&project);
    crate::standin::assert_completed(&events);
    let sessions: Vec<&Json> = events
        .iter()
        .filter_map(|e| match e["event"].as_str() {
            Some("step") => e["result"].get("agent"),
            Some("pop") => e.get("agent"),
            _ => None,
        })
        .map(|agent| &agent["session"])
        .collect();
    assert_eq!(sessions.len(), answers.len(), "{events:#?}");
    assert!(sessions[0].is_string(), "{events:#?}");
    assert!(sessions.iter().all(|s| *s == sessions[0]), "{sessions:?}");
    assert!(
        events
            .iter()
            .any(|e| e["result"]["outputs"]["guess"] == "50"),
        "{events:#?}"
    );
}

/// The repository's `plugin/` folder, mekara's Claude Code plugin and Gemini CLI extension.
fn plugin_folder() -> PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin")
}

/// `gemini extensions install <plugin/> --consent` for the project's person, as they run it
/// once: the person's settings sign in with the API key and, with `trust`, trust the
/// extension's `mekara` server (Gemini CLI drops `trust` from an extension's own manifest),
/// and both the project and the extension's source folder are trusted (Gemini CLI asks about
/// each).
fn extension_installed(project: &Project, trust: bool) {
    let mut settings = json!({"security": {"auth": {"selectedType": "gemini-api-key"}}});
    if trust {
        settings["mcpServers"] = json!({"mekara": {"trust": true}});
    }
    crate::common::write_file(
        &project.home().join(".gemini/settings.json"),
        &settings.to_string(),
    );
    let root = project.root().canonicalize().expect("canonical root");
    let source = plugin_folder()
        .canonicalize()
        .expect("canonical plugin folder");
    crate::common::write_file(
        &project.home().join(".gemini/trustedFolders.json"),
        &json!({
            root.display().to_string(): "TRUST_FOLDER",
            source.display().to_string(): "TRUST_FOLDER",
        })
        .to_string(),
    );
    let out = project
        .client_command(&gemini())
        .args(["extensions", "install"])
        .arg(&source)
        .arg("--consent")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run gemini extensions install");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.contains("\"mekara\" installed successfully"),
        "{out:?}\n{said}"
    );
    let installed = project.home().join(".gemini/extensions/mekara");
    assert!(
        installed.join("bin/mekara").exists() && installed.join("GEMINI.md").exists(),
        "the extension's folder was not copied: {}",
        installed.display()
    );
}

/// mekara's Gemini CLI extension, installed for the person with `gemini extensions install`,
/// serves a fresh project that holds a compiled script and nothing else of mekara's (no
/// `mekara install`): its server, started through the extension's launcher (which finds
/// mekara on the `PATH`), runs the script to its end in `gemini -p`, naming its tools as
/// Gemini CLI offers them; the extension's context file reaches the model.
#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
#[test]
fn the_gemini_extension_runs_a_compiled_script_to_its_end() {
    let project = Project::new();
    project.script(
        "greet",
        "---\ndescription: Greet someone\n---\n\nWrite down that you greet them, then say hi.\n",
        Some(
            "def execute(request):\n    \
             auto(\"echo \" + request + \" >> greeted.txt\")\n    \
             llm(\"Say hi to \" + request + \".\")\n",
        ),
    );
    extension_installed(&project, true);
    assert!(
        !project.root().join(".gemini").exists(),
        "the project must hold no Gemini set-up"
    );
    let calls = [
        ("start", json!({"name": "greet", "arguments": "Ada"})),
        (
            "continue_compiled_script",
            json!({"run_id": crate::standin::RUN_ID, "outputs": {}}),
        ),
    ];
    let turns = calls
        .iter()
        .map(|(tool, args)| mekara_call(tool, args.clone()))
        .chain([vec![text("Greeted.")]])
        .collect();
    let session = gemini_p(&project, "/greet Ada", turns);
    assert_eq!(
        session.standin.turns_left(),
        0,
        "not every turn was asked for\n{session}"
    );
    // The folder's Claude Code hooks are not Gemini CLI's: it finds none of them.
    assert!(
        !session.stderr.contains("hook") && !session.stderr.contains("Hook"),
        "Gemini CLI ran or refused hooks of the extension:\n{session}"
    );
    let first = &session.standin.main_requests()[0];
    let offered = first.function_names();
    assert!(
        offered.iter().any(|n| n == "mcp_mekara_start"),
        "the extension's tools were not offered: {offered:?}\n{session}"
    );
    let shown = first.contents_text();
    // The extension's GEMINI.md reached the model.
    insta::assert_snapshot!(
        "the_extensions_context",
        crate::common::lines_with(&shown, &["mcp_mekara_start"])
    );

    let results = session.tool_results();
    assert_eq!(results.len(), calls.len(), "{results:#?}\n{session}");
    for (i, ((tool, _), (name, response))) in calls.iter().zip(&results).enumerate() {
        assert_eq!(name, &format!("mcp_mekara_{tool}"));
        let output = response["output"].as_str().unwrap_or_else(|| {
            panic!("`{tool}` got no output (refused or failed): {response}\n{session}")
        });
        insta::assert_snapshot!(format!("the_extensions_reply_{i}"), project.scrub(output));
    }
    let first_reply = results[0].1["output"].as_str().unwrap_or_default();
    crate::standin::assert_names_offered_tools(first_reply, &offered);

    // mekara ran the script's auto step itself, in the project, and journaled the run there.
    assert_eq!(
        std::fs::read_to_string(project.root().join("greeted.txt")).ok(),
        Some("Ada\n".to_string())
    );
    let events = journal_events(&project);
    crate::standin::assert_completed(&events);
    assert_eq!(events[1]["script"], "greet", "{events:#?}");
}

/// The control for the test above: without the person's `trust` of the `mekara` server,
/// `gemini -p` does not offer the extension's tools, and nothing runs.
#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
#[test]
fn without_the_persons_trust_gemini_cli_does_not_offer_the_extensions_tools() {
    let project = Project::new();
    extension_installed(&project, false);
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
        "{offered:?}\n{session}"
    );
    assert!(project.run_ids().is_empty(), "mekara ran the script anyway");
}

/// Regression (issue 28): a 429 for a used-up daily quota was waited out 8 times (about 25
/// minutes) before the step failed, though the quota comes back only the next day. The step
/// fails at once with what Gemini CLI said, and nothing is waited.
#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
#[test]
fn an_unattended_run_with_gemini_fails_at_once_on_a_daily_quota() {
    let project = colour_project();
    trusted(&project);
    crate::common::write_file(
        &project.home().join(".gemini/settings.json"),
        &json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"maxAttempts": 1},
        })
        .to_string(),
    );
    let standin = standin::start(vec![
        vec![text(r#"{"colour": "red"}"#)],
        standin::daily_quota(),
        vec![text(r#"{"letters": "3"}"#)],
    ]);
    let bin = gemini();
    let bin = bin.parent().expect("the folder of gemini");
    let mut command = project.command(&["run", "--agent", "gemini", "--json", "colour"]);
    command
        .env("PATH", format!("{}:{}", bin.display(), path_with_mekara()))
        .env("MEKARA_BACKOFF_SCALE", "0.001");
    use_standin(&mut command, &project, &standin);
    let run = crate::common::Run::from_output(command.output().expect("run mekara"));
    assert_eq!(run.code, Some(1), "{}\n{}", run.stdout, run.stderr);
    assert!(!run.stderr.contains("rate-limited"), "{}", run.stderr);
    let waits = journal_events(&project)
        .into_iter()
        .filter(|e| e["event"] == "wait")
        .count();
    assert_eq!(waits, 0, "a daily quota is not waited out");
    insta::assert_snapshot!(
        "a_daily_quota",
        project.scrub(&crate::common::lines_with(
            &run.stderr,
            &["Gemini CLI failed"]
        ))
    );
    assert_eq!(standin.main_requests().len(), 2, "asked once, not again");
}

/// A rate limit (429) and an overload (503) of the model, after Gemini CLI's own retries
/// (`general.maxAttempts: 1` in its settings makes it give up at once), are waited out: the
/// run completes, the waits are in the journal, the step is journaled once, and it is asked
/// again in the run's Gemini session.
#[cfg_attr(not(feature = "clients"), ignore = "needs Gemini CLI")]
#[test]
fn an_unattended_run_with_gemini_waits_out_a_rate_limit_and_an_overload_in_the_same_session() {
    let project = colour_project();
    trusted(&project);
    crate::common::write_file(
        &project.home().join(".gemini/settings.json"),
        &json!({
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"maxAttempts": 1},
        })
        .to_string(),
    );
    let standin = standin::start(vec![
        vec![text(r#"{"colour": "red"}"#)],
        standin::http_error(429),
        standin::http_error(503),
        vec![text(r#"{"letters": "3"}"#)],
    ]);
    let bin = gemini();
    let bin = bin.parent().expect("the folder of gemini");
    let mut command = project.command(&["run", "--agent", "gemini", "--json", "colour"]);
    command
        .env("PATH", format!("{}:{}", bin.display(), path_with_mekara()))
        .env("MEKARA_BACKOFF_SCALE", "0.001");
    use_standin(&mut command, &project, &standin);
    let run = crate::common::Run::from_output(command.output().expect("run mekara"));
    let requests = standin.main_requests();
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
    insta::assert_snapshot!(
        "waits_for_a_rate_limit_and_an_overload",
        crate::common::without_ms(&crate::common::lines_with(&run.stderr, &["rate-limited"]))
    );
    let waits: Vec<Json> = journal_events(&project)
        .into_iter()
        .filter(|e| e["event"] == "wait")
        .collect();
    assert_eq!(waits.len(), 2, "{waits:#?}");
    assert_eq!(waits[0]["step"], "colour[1]");
    let said = |w: &Json| w["said"].as_str().unwrap_or_default().to_string();
    assert!(
        said(&waits[0]).starts_with("Gemini CLI: "),
        "{}",
        said(&waits[0])
    );
    let steps = llm_steps(&project);
    assert_eq!(
        steps.len(),
        2,
        "each llm step is journaled once: {steps:#?}"
    );
    assert_eq!(
        steps[1]["result"]["agent"]["session"], steps[0]["result"]["agent"]["session"],
        "one session for the run"
    );
    assert_eq!(steps[1]["result"]["outputs"]["letters"], "3");
    // The last ask of the second step carried the first step: the same session.
    assert_eq!(requests.len(), 4, "{requests:#?}");
    let last = requests[3].contents_text();
    insta::assert_snapshot!(
        "the_last_ask_after_the_waits",
        crate::common::lines_with(&last, &["Name a colour.", "Count the letters"])
    );
}
