//! End to end with the real Claude Code: `mekara install` in a temporary project, then
//! `claude -p` with `HOME` in a temporary folder and `ANTHROPIC_BASE_URL` at a scripted
//! stand-in model ([`standin`]), which records every request Claude Code makes. The checks are
//! on those requests (what the model was really shown) and on mekara's journal.
//!
//! Claude Code is installed by `tests/claude/install.sh` into
//! `target/test-clients/claude-code/`. The tests are ignored unless the `clients` feature is on
//! (as in CI); with it on, a missing binary is a failure.

mod eval;
mod library;
mod plugin;
mod standin;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value as Json, json};

use crate::common::{Project, journal_events};
use standin::{StandIn, text, tool_use};

/// The installed `claude`.
fn claude() -> PathBuf {
    crate::common::outside_client(
        "claude-code/node_modules/.bin/claude",
        "Claude Code",
        "tests/claude/install.sh",
    )
}

/// The installed Claude Code 2.0.72: the last that offered commands to the model through its
/// `SlashCommand` tool.
fn claude_2_0() -> PathBuf {
    crate::common::outside_client(
        "claude-code-2.0/node_modules/.bin/claude",
        "Claude Code 2.0.72",
        "tests/claude-2.0/install.sh",
    )
}

/// A project with `mekara install` run in it, and the two approvals a person gives on the
/// first interactive launch: trusting the folder (`~/.claude.json`) and approving the
/// `mekara` server of `.mcp.json` (`.claude/settings.local.json`).
fn installed_project() -> (Project, PathBuf) {
    let project = Project::new();
    let root = project.root().canonicalize().expect("canonical root");
    let out = project
        .command(&["install"])
        .env("PATH", crate::common::path_with_mekara())
        .output()
        .expect("run mekara install");
    assert!(out.status.success(), "mekara install failed: {out:?}");
    crate::common::write_file(
        &project.home().join(".claude.json"),
        &json!({
            "projects": { root.display().to_string(): { "hasTrustDialogAccepted": true } }
        })
        .to_string(),
    );
    project.write(
        ".claude/settings.local.json",
        &json!({"enabledMcpjsonServers": ["mekara"]}).to_string(),
    );
    (project, root)
}

/// What one `claude -p` run left behind.
type Session = crate::standin::Session<standin::Turn>;

/// Runs `claude -p PROMPT` in the project against a stand-in scripted with `turns`.
fn claude_p(claude: &Path, project: &Project, prompt: &str, turns: Vec<standin::Turn>) -> Session {
    claude_p_with_path(
        claude,
        project,
        prompt,
        turns,
        &crate::common::path_with_mekara(),
    )
}

/// [`claude_p`] with this `PATH`.
fn claude_p_with_path(
    claude: &Path,
    project: &Project,
    prompt: &str,
    turns: Vec<standin::Turn>,
    path: &str,
) -> Session {
    let standin = StandIn::start(turns);
    let mut command = Command::new(claude);
    command
        .arg("-p")
        .arg(prompt)
        .current_dir(project.root())
        .env_clear()
        .env("PATH", path)
        .env("HOME", project.home())
        .env("ANTHROPIC_BASE_URL", standin.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-stand-in")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .env("MEKARA_LOG_FILE", project.home().join("mekara.log"))
        .env("MEKARA_LOG", "debug");
    Session::run(command, standin)
}

/// What the model was shown of a prompt, scrubbed, without what Claude Code adds around it
/// (its `<system-reminder>` blocks, its environment and lists of tools and skills, today's
/// date): the prompt, the command file Claude Code expanded and the hooks' additional
/// context, as a snapshot pins them.
pub(crate) fn prompt_shown(project: &Project, shown: &str) -> String {
    let mut kept = String::new();
    let mut rest = shown;
    while let Some((before, after)) = rest.split_once("<system-reminder>") {
        kept.push_str(before);
        rest = after
            .split_once("</system-reminder>")
            .map_or("", |(_, after)| after);
    }
    kept.push_str(rest);
    // Claude Code's description of its environment, tools, agents and skills, up to the
    // next hook's context.
    if let Some((before, after)) = kept.split_once("\n# Environment\n") {
        let hook = after
            .find("hook additional context:")
            .map_or(after.len(), |at| {
                after[..at].rfind('\n').map_or(0, |line| line + 1)
            });
        kept = format!("{before}\n{}", &after[hook..]);
    }
    let kept: Vec<&str> = kept
        .lines()
        .filter(|l| !l.starts_with("Today's date is "))
        .collect();
    project.scrub(kept.join("\n").trim())
}

/// The tool result the model got for `id`, from the main request that carried it.
fn tool_result(session: &Session, id: &str) -> (String, bool) {
    session
        .standin
        .main_requests()
        .iter()
        .find_map(|r| r.tool_result(id))
        .unwrap_or_else(|| panic!("no tool result for `{id}` reached the model\n{session}"))
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn a_typed_command_reaches_the_model_with_the_hook_instruction_and_start_runs_without_a_prompt() {
    let claude = claude();
    let (project, _) = installed_project();
    let session = claude_p(
        &claude,
        &project,
        "/test/random 7",
        vec![vec![tool_use(
            "toolu_start",
            "mcp__mekara__start",
            json!({"name": "test/random", "arguments": "7"}),
        )]],
    );
    let main = session.standin.main_requests();
    let first = main
        .first()
        .unwrap_or_else(|| panic!("no request\n{session}"));
    let shown = first.message_text();
    // The prompt, and the hook's instruction after it.
    insta::assert_snapshot!("a_typed_command_shown", prompt_shown(&project, &shown));

    // The call reached `mekara mcp` (no permission prompt refused it), ran the auto step,
    // and its reply came back as the tool result.
    let (result, is_error) = tool_result(&session, "toolu_start");
    assert!(!is_error, "the start call failed:\n{result}\n{session}");
    insta::assert_snapshot!(
        "a_typed_command_started",
        crate::common::reply_shown(&project, &result)
    );
    let events = journal_events(&project);
    assert_eq!(events[1]["event"], "push");
    assert_eq!(events[1]["script"], "test/random");
    assert_eq!(events[1]["request"], "7");
    assert_eq!(events[2]["input"]["command"], "shuf -i 1-100 -n 1");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn without_the_installed_permissions_the_same_call_is_refused() {
    // The control for the test above: it is install's `permissions.allow` that lets the
    // call through in `-p` mode, where nobody can answer a prompt.
    let claude = claude();
    let (project, _) = installed_project();
    let settings = project.root().join(".claude/settings.json");
    let mut value: Json =
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("settings")).expect("json");
    value["permissions"]["allow"] = json!([]);
    std::fs::write(&settings, value.to_string()).expect("write settings");
    let session = claude_p(
        &claude,
        &project,
        "Start test/random.",
        vec![vec![tool_use(
            "toolu_start",
            "mcp__mekara__start",
            json!({"name": "test/random", "arguments": "7"}),
        )]],
    );
    let (result, is_error) = tool_result(&session, "toolu_start");
    assert!(
        is_error && result.contains("permission"),
        "not refused:\n{result}"
    );
    assert!(project.run_ids().is_empty(), "mekara ran the script anyway");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn a_scripted_sequence_of_calls_completes_test_nested() {
    let claude = claude();
    let (project, _) = installed_project();
    // Claude Code speaks `2026-07-28` over stdio too (no `initialize`), and a call without
    // `run_id` still goes to the run the connection (the one process) drives.
    complete_test_nested(&claude, &project, &json!({}));
    let log = std::fs::read_to_string(project.home().join("mekara.log")).expect("mekara's log");
    assert_protocol(&log, "2026-07-28");
}

/// Checks that every request mekara logged (`MEKARA_LOG=debug`) in `log` spoke protocol
/// `version`, the first a `server/discover`, and that five were tool calls.
fn assert_protocol(log: &str, version: &str) {
    let requests = crate::common::logged_requests(log);
    let protocol = format!(", protocol `{version}`");
    assert!(
        requests.first() == Some(&format!("`server/discover`{protocol}").as_str())
            && requests.iter().all(|r| r.ends_with(&protocol)),
        "not all in `{version}`:\n{log}"
    );
    let calls = requests
        .iter()
        .filter(|r| r.starts_with("`tools/call`"))
        .count();
    assert_eq!(calls, 5, "every call was logged:\n{log}");
}

/// Issue 19: Claude Code speaks MCP `2026-07-28` over HTTP, which has no sessions, so each
/// call reached a fresh executor and the call after `start` found nothing pending. The model
/// passes the handle `start` gave as `run_id`, and the run goes to its end.
#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn over_http_the_model_passes_the_handle_and_test_nested_completes() {
    let claude = claude();
    let (project, _) = installed_project();
    let server =
        crate::mcp_protocol::HttpServer::start_with(&project, &["mcp"], &[("MEKARA_LOG", "debug")]);
    project.write(
        ".mcp.json",
        &json!({"mcpServers": {"mekara": {
            "type": "http",
            "url": format!("http://127.0.0.1:{}/mcp", server.port),
        }}})
        .to_string(),
    );
    complete_test_nested(&claude, &project, &json!({"run_id": standin::HANDLE}));
    // What Claude Code spoke: `server/discover`, then requests without a session, each
    // naming its protocol version.
    assert_protocol(&server.log(), "2026-07-28");
}

/// `test:nested` carried to its end by the scripted model (a `start`, then each step's
/// call with `with` added to its arguments), checked in the replies the model got and in
/// the journal.
fn complete_test_nested(claude: &Path, project: &Project, with: &Json) -> Session {
    let calls = [
        (
            "toolu_1",
            "start",
            json!({"name": "test:nested", "arguments": ""}),
        ),
        (
            "toolu_2",
            "continue_compiled_script",
            json!({"outputs": {"guess": "50"}}),
        ),
        (
            "toolu_3",
            "continue_compiled_script",
            json!({"outputs": {}}),
        ),
        ("toolu_4", "finish_nl_script", json!({})),
        (
            "toolu_5",
            "continue_compiled_script",
            json!({"outputs": {}}),
        ),
    ];
    let turns = calls
        .iter()
        .enumerate()
        .map(|(i, (id, tool, input))| {
            let mut input = input.clone();
            if i > 0
                && let (Some(input), Some(with)) = (input.as_object_mut(), with.as_object())
            {
                input.extend(with.clone());
            }
            mekara_call(id, tool, input)
        })
        .chain([vec![text("All done.")]])
        .collect();
    let session = claude_p(claude, project, "Run the nested test script.", turns);
    assert_eq!(
        session.standin.turns_left(),
        0,
        "not every turn was asked for\n{session}"
    );

    // Claude Code 2.1 defers MCP tools behind its ToolSearch, so the first request does not
    // list them: the names it took the scripted calls under are the names it offers.
    let offered: Vec<String> = calls
        .iter()
        .map(|(_, tool, _)| format!("mcp__mekara__{tool}"))
        .collect();
    for (i, (id, tool, _)) in calls.iter().enumerate() {
        let (result, is_error) = tool_result(&session, id);
        assert!(!is_error, "`{tool}` ({id}) failed:\n{result}\n{session}");
        insta::assert_snapshot!(
            format!("test_nested_reply_{i}"),
            crate::common::reply_shown(project, &result)
        );
        // The calls it names are named as Claude Code offers them (`mcp__mekara__...`).
        crate::standin::assert_names_offered_tools(&result, &offered);
    }

    // The journal says the same: every frame pushed was popped, the root last.
    let events = journal_events(project);
    crate::standin::assert_completed(&events);
    let guess = events
        .iter()
        .find(|e| e["input"]["kind"] == "llm" && e["result"]["outputs"]["guess"].is_string())
        .unwrap_or_else(|| panic!("the guess is not journaled: {events:#?}"));
    assert_eq!(guess["result"]["outputs"]["guess"], "50");
    session
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn a_skill_call_for_a_compiled_script_is_denied_with_the_reason() {
    let (_, result) = agent_command_call(
        &claude(),
        "Skill",
        json!({"skill": "test:random", "args": "say \"hi\"\nthen 7"}),
    );
    // The ejected copy is the project's own script with a bundled name: the reason asks the
    // person first, and the call it names says so (`project_script`).
    insta::assert_snapshot!("a_skill_call_denied", result);
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code 2.0.72")]
#[test]
fn a_slash_command_call_in_claude_code_2_0_is_denied_with_the_reason() {
    let (session, result) = agent_command_call(
        &claude_2_0(),
        "SlashCommand",
        json!({"command": "/test:random say \"hi\" then 7"}),
    );
    let offered = session
        .standin
        .main_requests()
        .first()
        .map(|r| r.body["tools"].to_string())
        .unwrap_or_default();
    assert!(
        offered.contains("\"SlashCommand\""),
        "Claude Code 2.0.72 offered no SlashCommand tool:\n{session}"
    );
    insta::assert_snapshot!("a_slash_command_call_denied", result);
}

/// The model calls `tool` (`Skill`, or `SlashCommand` before 2.0.73) with `input` for the
/// compiled `test:random` in an installed project; the call must be refused (by the hook) and
/// start no run. Returns the session and the refusal the model got.
fn agent_command_call(claude: &Path, tool: &str, input: Json) -> (Session, String) {
    let (project, _) = installed_project();
    // Claude Code checks that a command exists before any hook sees the call: the script
    // must be one of the project's commands, which install links to the NL scripts.
    let out = project
        .command(&["scripts", "eject", "test/random"])
        .output()
        .expect("run mekara scripts eject");
    assert!(out.status.success(), "eject failed: {out:?}");
    assert!(
        project
            .root()
            .join(".claude/commands/test/random.md")
            .is_file()
    );
    let session = claude_p(
        claude,
        &project,
        "Play the number game.",
        vec![vec![tool_use("toolu_command", tool, input)]],
    );
    let (result, is_error) = tool_result(&session, "toolu_command");
    assert!(is_error, "the {tool} call was not refused:\n{result}");
    assert!(project.run_ids().is_empty());
    (session, project.scrub(&result))
}

/// The text of the first request the model got for `prompt`, in an installed project.
fn first_shown(claude: &Path, project: &Project, prompt: &str) -> String {
    let session = claude_p(claude, project, prompt, vec![vec![text("Noted.")]]);
    let main = session.standin.main_requests();
    main.first()
        .unwrap_or_else(|| panic!("no request for `{prompt}`\n{session}"))
        .message_text()
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn bundled_scripts_are_typeable_commands_after_install() {
    let claude = claude();
    let (project, _) = installed_project();

    // Compiled: the instruction is the reroute to `start`, with the arguments as typed; the
    // command file says the same call, and Claude Code no longer says there is no command.
    let shown = first_shown(&claude, &project, "/compile deploy \"fast\"");
    assert!(
        !shown.contains("no command with that name"),
        "Claude Code did not find `/compile`:\n{shown}"
    );
    // The command file expanded, then the hook's instruction.
    insta::assert_snapshot!("compile_typed", prompt_shown(&project, &shown));
    // Only the call: not the Markdown that the hook says not to follow by hand.
    assert!(!shown.contains("## Rules"), "{shown}");

    // NL only: its instructions, the arguments in place of every `$ARGUMENTS`, no hook text.
    let shown = first_shown(&claude, &project, "/systematize release-notes");
    assert!(
        !shown.contains("no command with that name"),
        "Claude Code did not find `/systematize`:\n{shown}"
    );
    assert!(!shown.contains("$ARGUMENTS"), "{shown}");
    insta::assert_snapshot!(
        "systematize_typed",
        crate::common::lines_with(&shown, &["release-notes", "<command-"])
    );
    assert!(!shown.contains("hook additional context"), "{shown}");
}

/// The prompts `docs/tutorial.md` types in Claude Code: `/compile NAME`, then `/NAME`.
fn tutorial_prompts() -> (String, String) {
    let prompts = crate::tutorial::claude_code_prompts();
    let [compile, run] = prompts.as_slice() else {
        panic!("the tutorial types two prompts in Claude Code, not {prompts:?}");
    };
    (compile.clone(), run.clone())
}

/// One scripted model turn that calls one of mekara's tools.
fn mekara_call(id: &str, tool: &str, input: Json) -> standin::Turn {
    vec![tool_use(id, &format!("mcp__mekara__{tool}"), input)]
}

/// The "done when": in an empty project, `mekara install`; `/compile` on a new NL
/// script, the stand-in model playing the agent (it writes the `.star` with the Write tool,
/// with one mistake that the check must catch and the loop report, then fixes it, tries the
/// script and finishes); then the compiled script typed as its `/name`. The script and the
/// prompts are the tutorial's.
#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn the_first_hour_in_claude_code() {
    let claude = claude();
    let (project, root) = installed_project();
    // The person lets the agent write files, as one does to have a script compiled.
    project.write(
        ".claude/settings.local.json",
        &json!({
            "enabledMcpjsonServers": ["mekara"],
            "permissions": {"defaultMode": "acceptEdits", "allow": ["Read", "Edit", "Write"]},
        })
        .to_string(),
    );
    let nl_path = ".mekara/scripts/nl/describe.md";
    project.write(nl_path, &crate::tutorial::file(nl_path));
    project.write("notes.txt", "Things to remember: buy milk.\n");
    let star_path = ".mekara/scripts/compiled/describe.star";
    let star = crate::tutorial::file(star_path);
    let mistaken = star.replacen("context = ", "contxt = ", 1);
    assert_ne!(
        mistaken, star,
        "the tutorial's script has no `context =` to misspell"
    );
    let star_file = root.join(star_path).display().to_string();
    let (compile_prompt, run_prompt) = tutorial_prompts();
    let name = run_prompt.trim_start_matches('/').to_string();

    let turns = vec![
        mekara_call(
            "toolu_compile",
            "start",
            json!({"name": "compile", "arguments": name}),
        ),
        vec![tool_use(
            "toolu_write",
            "Write",
            json!({"file_path": star_file, "content": mistaken}),
        )],
        mekara_call(
            "toolu_check",
            "continue_compiled_script",
            json!({"outputs": {}}),
        ),
        vec![tool_use(
            "toolu_read",
            "Read",
            json!({"file_path": star_file}),
        )],
        vec![tool_use(
            "toolu_fix",
            "Write",
            json!({"file_path": star_file, "content": star}),
        )],
        mekara_call(
            "toolu_recheck",
            "continue_compiled_script",
            json!({"outputs": {}}),
        ),
        mekara_call("toolu_try", "start", json!({"name": name, "arguments": ""})),
        mekara_call(
            "toolu_try_file",
            "continue_compiled_script",
            json!({"run_id": standin::HANDLE, "outputs": {"file": "notes.txt"}}),
        ),
        mekara_call(
            "toolu_try_done",
            "continue_compiled_script",
            json!({"run_id": standin::HANDLE, "outputs": {}}),
        ),
        mekara_call(
            "toolu_step5",
            "continue_compiled_script",
            json!({"run_id": standin::HANDLE, "outputs": {}}),
        ),
        mekara_call(
            "toolu_step6",
            "continue_compiled_script",
            json!({"run_id": standin::HANDLE, "outputs": {}}),
        ),
        vec![text(
            "`describe` is compiled: step 1 is automatic, steps 2 and 3 stay with me.",
        )],
    ];
    let session = claude_p(&claude, &project, &compile_prompt, turns);
    assert_eq!(
        session.standin.turns_left(),
        0,
        "not every turn was asked for\n{session}"
    );
    let shown = session.standin.main_requests()[0].message_text();
    assert!(!shown.contains("no command with that name"), "{shown}");
    insta::assert_snapshot!("first_hour_compile_typed", prompt_shown(&project, &shown));
    let result = |id: &str| {
        let (text, is_error) = tool_result(&session, id);
        assert!(!is_error, "`{id}` failed:\n{text}\n{session}");
        text
    };
    // Where to write the script.
    let started = result("toolu_compile");
    insta::assert_snapshot!(
        "first_hour_compile_started",
        crate::common::lines_with(&project.scrub(&started), &["write its compiled script"])
    );
    result("toolu_write");
    // The mistake: `mekara check` catches it, and the loop reports it to the agent.
    let checked = result("toolu_check");
    insta::assert_snapshot!("first_hour_checked", project.scrub(&checked));
    result("toolu_fix");
    let rechecked = result("toolu_recheck");
    insta::assert_snapshot!("first_hour_rechecked", project.scrub(&rechecked));
    let tried = result("toolu_try");
    insta::assert_snapshot!("first_hour_tried", project.scrub(&tried));
    insta::assert_snapshot!("first_hour_done", project.scrub(&result("toolu_step6")));

    // Then the compiled script, typed as its command.
    let turns = vec![
        mekara_call("toolu_run", "start", json!({"name": name, "arguments": ""})),
        mekara_call(
            "toolu_file",
            "continue_compiled_script",
            json!({"outputs": {"file": "notes.txt"}}),
        ),
        mekara_call(
            "toolu_done",
            "continue_compiled_script",
            json!({"outputs": {}}),
        ),
        vec![text("notes.txt is a reminder to buy milk.")],
    ];
    let session = claude_p(&claude, &project, &run_prompt, turns);
    assert_eq!(
        session.standin.turns_left(),
        0,
        "not every turn was asked for\n{session}"
    );
    let shown = session.standin.main_requests()[0].message_text();
    insta::assert_snapshot!("first_hour_typed", prompt_shown(&project, &shown));
    let (ran, is_error) = tool_result(&session, "toolu_run");
    assert!(!is_error, "{ran}");
    insta::assert_snapshot!("first_hour_ran", project.scrub(&ran));
    let (done, _) = tool_result(&session, "toolu_done");
    insta::assert_snapshot!("first_hour_ran_done", project.scrub(&done));
    // The trial in step 5 is a `start` without `parent`: a run of its own beside the compile
    // run (which goes on when it ends), not nested in it.
    assert_eq!(
        project.run_ids().len(),
        3,
        "the compile run, its trial and the describe run"
    );
}

/// `mekara run --agent claude ARGS` in `project`, with the Claude Code under test on `PATH`
/// and talking to `standin`.
fn unattended(project: &Project, standin: &StandIn, args: &[&str]) -> crate::common::Run {
    unattended_with(project, standin, args, &[])
}

/// [`unattended`] with these environment variables set too.
fn unattended_with(
    project: &Project,
    standin: &StandIn,
    args: &[&str],
    env: &[(&str, &str)],
) -> crate::common::Run {
    let claude_dir = claude().parent().expect("a folder").to_path_buf();
    let mut command = project.command(args);
    command.envs(env.iter().copied());
    command
        .env(
            "PATH",
            format!(
                "{}:{}",
                claude_dir.display(),
                crate::common::path_with_mekara()
            ),
        )
        .env("ANTHROPIC_BASE_URL", standin.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-stand-in")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1");
    crate::common::run_with_stdin(command, "")
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn an_unattended_run_with_claude_gets_structured_outputs_keeps_one_session_and_resumes_after_a_limit()
 {
    let project = Project::new();
    let root = project.root().canonicalize().expect("canonical root");
    crate::common::write_file(
        &project.home().join(".claude.json"),
        &json!({
            "projects": { root.display().to_string(): { "hasTrustDialogAccepted": true } }
        })
        .to_string(),
    );
    // The model gives the step's outputs through Claude Code's structured-output tool; every
    // other turn is the stand-in's "Done.".
    let standin = StandIn::start(vec![vec![tool_use(
        "toolu_out",
        "StructuredOutput",
        json!({"guess": 50}),
    )]]);
    let run = unattended(
        &project,
        &standin,
        &[
            "run",
            "--agent",
            "claude",
            "--json",
            "--max-agent-steps",
            "1",
            "test:random",
        ],
    );
    run.expect_code(1);
    let summary: Json = serde_json::from_str(&run.stdout).expect("a JSON summary");
    assert_eq!(summary["state"], "stopped", "{summary}\n{}", run.stderr);
    assert_eq!(summary["agent_steps"], 1);
    let first_requests = standin.main_requests().len();
    let offered = standin.main_requests()[0].tool_names();
    assert!(
        offered.iter().any(|t| t == "StructuredOutput"),
        "{offered:?}"
    );
    let events = journal_events(&project);
    let answered = events
        .iter()
        .find(|e| e["input"]["kind"] == "llm")
        .expect("the llm step is journaled");
    assert_eq!(answered["result"]["outputs"], json!({"guess": 50}));
    let agent = &answered["result"]["agent"];
    let session = agent["session"].as_str().expect("Claude's session id");
    assert!(agent["cost_usd"].is_number(), "{agent}");
    assert!(agent["output_tokens"].is_u64(), "{agent}");

    let id = summary["run_id"].as_str().expect("the run id");
    let resumed = unattended(
        &project,
        &standin,
        &["run", "--resume", id, "--agent", "claude", "--json"],
    );
    resumed.expect_code(0);
    let summary: Json = serde_json::from_str(&resumed.stdout).expect("a JSON summary");
    assert_eq!(
        summary["state"], "completed",
        "{summary}\n{}",
        resumed.stderr
    );
    assert_eq!(summary["agent_steps"], 2);
    // The second call resumed the first's session: the model saw the first step's prompt and
    // its own structured answer before the second step.
    let second = standin.main_requests()[first_requests..]
        .first()
        .cloned()
        .expect("the resumed run asked the model");
    let shown = second.message_text();
    insta::assert_snapshot!(
        "the_second_call_carries_the_firsts_history",
        crate::common::reply_shown(
            &project,
            &crate::common::lines_with(&shown, &["Step 2: ask", "Step 4: the user"])
        )
    );
    let events = journal_events(&project);
    let last = events
        .iter()
        .rev()
        .find(|e| e["input"]["kind"] == "llm")
        .expect("the second llm step");
    assert_eq!(
        last["result"]["agent"]["session"], session,
        "one session for the run"
    );
}

/// A rate limit (429) and then an overload (529) of the model, after Claude Code's own retries
/// (`CLAUDE_CODE_MAX_RETRIES=0` makes it give up at once), are waited out: the run completes,
/// both waits are in the journal and in `runs show`, the step is journaled once, and it is
/// asked again in the run's Claude session.
#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn an_unattended_run_with_claude_waits_out_a_rate_limit_and_an_overload_in_the_same_session() {
    let project = Project::new();
    let root = project.root().canonicalize().expect("canonical root");
    crate::common::write_file(
        &project.home().join(".claude.json"),
        &json!({
            "projects": { root.display().to_string(): { "hasTrustDialogAccepted": true } }
        })
        .to_string(),
    );
    // The first step is answered; the second meets a 429, then a 529, then gets "Done.".
    let standin = StandIn::start_on_prompts(vec![
        vec![tool_use(
            "toolu_out",
            "StructuredOutput",
            json!({"guess": 50}),
        )],
        standin::http_error(429),
        standin::http_error(529),
    ]);
    let run = unattended_with(
        &project,
        &standin,
        &["run", "--agent", "claude", "--json", "test:random"],
        &[
            ("CLAUDE_CODE_MAX_RETRIES", "0"),
            ("MEKARA_BACKOFF_SCALE", "0.001"),
        ],
    );
    let summary: Json = serde_json::from_str(&run.stdout).expect("a JSON summary");
    assert_eq!(summary["state"], "completed", "{summary}\n{}", run.stderr);
    run.expect_code(0);
    assert_eq!(summary["agent_steps"], 2, "{summary}");
    insta::assert_snapshot!(
        "waits_for_a_rate_limit_and_an_overload",
        crate::common::without_ms(&crate::common::lines_with(
            &run.stderr,
            &["rate-limited", "attempt"]
        ))
    );
    let events = journal_events(&project);
    let waits: Vec<&Json> = events.iter().filter(|e| e["event"] == "wait").collect();
    assert_eq!(waits.len(), 2, "{events:#?}");
    assert_eq!(waits[0]["step"], "test:random[3]");
    assert_eq!(waits[0]["reason"], "rate-limit");
    assert_eq!(
        (waits[0]["attempt"].as_u64(), waits[1]["attempt"].as_u64()),
        (Some(2), Some(3))
    );
    let said = |w: &Json| w["said"].as_str().unwrap_or_default().to_string();
    assert!(said(waits[0]).contains("429"), "{}", said(waits[0]));
    assert!(said(waits[1]).contains("529"), "{}", said(waits[1]));
    let llm: Vec<&Json> = events
        .iter()
        .filter(|e| e["input"]["kind"] == "llm")
        .collect();
    assert_eq!(llm.len(), 2, "each llm step is journaled once: {events:#?}");
    assert_eq!(llm[1]["index"], 3);
    assert_eq!(
        llm[1]["result"]["agent"]["session"], llm[0]["result"]["agent"]["session"],
        "one session for the run"
    );
    // Three asks of the second step, each resuming the run's session: every one carries
    // the first step's history.
    let asks: Vec<String> = standin
        .main_requests()
        .iter()
        .filter(|r| r.is_new_prompt())
        .map(crate::standin::Recorded::message_text)
        .filter(|text| text.contains("Step 4: the user was told"))
        .collect();
    assert_eq!(asks.len(), 3, "{asks:#?}");
    for shown in &asks {
        assert!(
            shown.contains("Step 2: ask the user to guess"),
            "an ask of the second step does not carry the session:\n{shown}"
        );
    }
    assert_eq!(standin.turns_left(), 0);
    let id = summary["run_id"].as_str().expect("the run id");
    let shown = project.run(&["runs", "show", id], "");
    insta::assert_snapshot!(
        "waits_in_runs_show",
        crate::common::without_ms(
            &project.scrub(&crate::common::lines_with(&shown.stdout, &["⏸"]))
        )
        .replace(
            standin.url().trim_start_matches("http://"),
            "127.0.0.1:[PORT]"
        )
    );
}
