//! mekara's Claude Code plugin, installed the way the README says (`claude plugin marketplace
//! add` of this repository, `claude plugin install mekara@mekara`) into a temporary `HOME`,
//! then used in a project whose team committed only its scripts: the `.mekara/` folder and the
//! `.claude/commands` link, with no `.mcp.json`, no hooks and no `mekara install`.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use serde_json::{Value as Json, json};

use super::standin::{StandIn, text, tool_use};
use super::{Session, claude, claude_p, claude_p_with_path, installed_project, tool_result};
use crate::common::{Project, journal_events};

/// How Claude Code names the plugin's tools.
const TOOLS: &str = "mcp__plugin_mekara_mekara__";

/// `claude ARGS` with the project's `HOME`, mekara on `PATH`, and nothing else of the test's
/// environment; panics unless it succeeds.
fn claude_cli(project: &Project, args: &[&str]) -> String {
    let out = Command::new(claude())
        .args(args)
        .current_dir(project.root())
        .env_clear()
        .env("PATH", crate::common::path_with_mekara())
        .env("HOME", project.home())
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .env("DISABLE_AUTOUPDATER", "1")
        .output()
        .expect("run claude");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "`claude {}` failed:\n{said}",
        args.join(" ")
    );
    said
}

/// Installs the plugin for the project's user, as the README says, and marks the project's
/// folder trusted (what a person accepts on the first interactive launch).
fn install_plugin(project: &Project) {
    let repository = Path::new(env!("CARGO_MANIFEST_DIR"));
    let clock = Instant::now();
    claude_cli(
        project,
        &[
            "plugin",
            "marketplace",
            "add",
            &repository.display().to_string(),
        ],
    );
    let added = clock.elapsed().as_secs_f64();
    let said = claude_cli(project, &["plugin", "install", "mekara@mekara"]);
    assert!(said.contains("Successfully installed"), "{said}");
    // The figures `benches/plugin_first_run.sh` reads (shown with `--nocapture`).
    eprintln!(
        "timing: marketplace add {:.2} s, plugin install {:.2} s",
        added,
        clock.elapsed().as_secs_f64() - added
    );
    let state = project.home().join(".claude.json");
    let mut value: Json = std::fs::read_to_string(&state)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    let root = project.root().canonicalize().expect("canonical root");
    value["projects"][root.display().to_string()]["hasTrustDialogAccepted"] = json!(true);
    crate::common::write_file(&state, &value.to_string());
}

/// The compiled script `hello`: a shell step, then an llm step about its output.
fn hello(project: &Project) {
    project.script(
        "hello",
        "Say hello.\n\n1. Run `echo hello`.\n2. Tell the user what it printed.\n",
        Some(
            "def execute(request):\n    \
             r = auto(\"echo hello \" + request)\n    \
             llm(\"Tell the user what it printed: \" + r.output)\n",
        ),
    );
}

/// A project with `hello` and the commands link, as a team commits them, opened by a person
/// with the plugin installed.
fn plugin_project() -> Project {
    let project = Project::new();
    hello(&project);
    std::fs::create_dir_all(project.root().join(".claude")).expect("create .claude");
    std::os::unix::fs::symlink(
        "../.mekara/scripts/nl",
        project.root().join(".claude/commands"),
    )
    .expect("link the commands");
    install_plugin(&project);
    project
}

/// One scripted turn calling the plugin's `tool`.
fn plugin_call(id: &str, tool: &str, input: Json) -> super::standin::Turn {
    vec![tool_use(id, &format!("{TOOLS}{tool}"), input)]
}

/// The text of the first main request (what the model was first shown).
fn first_shown(session: &Session) -> String {
    session
        .standin
        .main_requests()
        .first()
        .unwrap_or_else(|| panic!("no request\n{session}"))
        .message_text()
}

/// Whether any request offered (or deferred) one of the plugin's tools.
fn offers_plugin_tools(session: &Session) -> bool {
    session
        .standin
        .main_requests()
        .iter()
        .any(|r| r.body.to_string().contains(TOOLS))
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn a_plugin_user_types_a_compiled_script_and_it_runs_to_its_end_without_a_prompt() {
    let claude = claude();
    let project = plugin_project();
    let turns = vec![
        plugin_call(
            "toolu_start",
            "start",
            json!({"name": "hello", "arguments": "world"}),
        ),
        plugin_call(
            "toolu_told",
            "continue_compiled_script",
            json!({"run_id": super::standin::HANDLE, "outputs": {}}),
        ),
        vec![text("It printed `hello world`.")],
    ];
    let clock = Instant::now();
    let session = claude_p(&claude, &project, "/hello world", turns);
    eprintln!(
        "timing: first /hello run {:.2} s",
        clock.elapsed().as_secs_f64()
    );
    assert_eq!(session.standin.turns_left(), 0, "{session}");
    let shown = first_shown(&session);
    // The plugin's hook rerouted `/hello` to its own tools.
    insta::assert_snapshot!("hello_typed", super::prompt_shown(&project, &shown));
    // No permission prompt refused the calls (`-p` has nobody to answer one): the plugin's
    // hook allowed its own tools.
    let (started, is_error) = tool_result(&session, "toolu_start");
    assert!(!is_error, "{started}\n{session}");
    insta::assert_snapshot!("hello_started", project.scrub(&started));
    let (done, is_error) = tool_result(&session, "toolu_told");
    assert!(!is_error, "{done}");
    insta::assert_snapshot!("hello_done", project.scrub(&done));
    crate::standin::assert_completed(&journal_events(&project));
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn the_plugins_hook_denies_a_skill_call_for_a_compiled_script() {
    let claude = claude();
    let project = plugin_project();
    let session = claude_p(
        &claude,
        &project,
        "Say hello.",
        vec![vec![tool_use(
            "toolu_skill",
            "Skill",
            json!({"skill": "hello", "args": "there"}),
        )]],
    );
    let (result, is_error) = tool_result(&session, "toolu_skill");
    assert!(is_error, "the Skill call was not refused:\n{result}");
    insta::assert_snapshot!("a_skill_call_denied_by_the_plugin", result);
    assert!(project.run_ids().is_empty());
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn a_plugin_user_types_compile_with_or_without_the_plugins_name() {
    let claude = claude();
    let project = plugin_project();
    // As Claude Code lists it: the plugin's command, expanded, and the hook's call.
    let shown = first_shown(&claude_p(
        &claude,
        &project,
        "/mekara:compile hello",
        vec![vec![text("Noted.")]],
    ));
    insta::assert_snapshot!(
        "compile_typed_with_the_plugins_name",
        super::prompt_shown(&project, &shown)
    );
    // Typed as the README's tutorial types it: Claude Code has no such command, and the
    // hook still gives the call.
    let turns = vec![
        plugin_call(
            "toolu_compile",
            "start",
            json!({"name": "compile", "arguments": "hello"}),
        ),
        vec![text("Reading it.")],
    ];
    let session = claude_p(&claude, &project, "/compile hello", turns);
    let shown = first_shown(&session);
    insta::assert_snapshot!(
        "compile_typed_without_the_plugins_name",
        super::prompt_shown(&project, &shown)
    );
    // The NL-only `/systematize`, typed without the prefix: its instructions reach the model.
    let shown = first_shown(&claude_p(
        &claude,
        &project,
        "/systematize release-notes",
        vec![vec![text("Noted.")]],
    ));
    // How many more commands Claude Code counts depends on what its home holds: not pinned.
    let more = regex::Regex::new(r"and \d+ more\.").expect("a regex");
    insta::assert_snapshot!(
        "systematize_typed_without_the_plugins_name",
        more.replace_all(
            &crate::common::lines_with(&shown, &["/systematize", "release-notes"]),
            "and [N] more."
        )
    );
    // Its first step ran `mekara scripts show` through the plugin's server.
    let (started, is_error) = tool_result(&session, "toolu_compile");
    assert!(!is_error, "{started}\n{session}");
    insta::assert_snapshot!(
        "compile_started_by_the_plugins_server",
        crate::common::lines_with(
            &project.scrub(&started),
            &["mekara scripts show", "hello.star"]
        )
    );
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn with_no_mekara_to_be_found_the_plugin_says_how_to_install_it() {
    let claude = claude();
    let project = plugin_project();
    // No mekara on `PATH`, none under the test's `HOME`: the launcher finds nothing.
    let session = claude_p_with_path(
        &claude,
        &project,
        "/hello world",
        vec![vec![text("mekara is missing.")]],
        "/usr/local/bin:/usr/bin:/bin",
    );
    let shown = first_shown(&session);
    insta::assert_snapshot!(
        "no_mekara_to_be_found",
        super::prompt_shown(&project, &shown)
    );
    assert!(project.run_ids().is_empty());
}

/// A project whose team committed `mekara install`'s whole set-up: the plugin's server and
/// hooks stand down, so there is one server and each prompt is answered once.
#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn in_a_project_set_up_by_mekara_install_the_plugin_stands_down() {
    let claude = claude();
    let (project, _) = installed_project();
    hello(&project);
    install_plugin(&project);
    let session = claude_p(
        &claude,
        &project,
        "/hello world",
        vec![vec![tool_use(
            "toolu_start",
            "mcp__mekara__start",
            json!({"name": "hello", "arguments": "world"}),
        )]],
    );
    let shown = first_shown(&session);
    assert_eq!(
        shown.matches("is a compiled mekara script").count(),
        1,
        "one hook answered, the project's:\n{shown}"
    );
    insta::assert_snapshot!(
        "hello_typed_in_an_installed_project",
        super::prompt_shown(&project, &shown)
    );
    assert!(
        !offers_plugin_tools(&session),
        "the plugin's server offered its tools beside the project's:\n{session}"
    );
    let (started, is_error) = tool_result(&session, "toolu_start");
    assert!(!is_error, "{started}");
    insta::assert_snapshot!(
        "hello_started_in_an_installed_project",
        project.scrub(&started)
    );
}

/// `mekara run --agent claude` for a plugin user: the step's `claude -p` starts without the
/// plugin (no mekara server per step, none of mekara's tools inside a step, no hooks), while
/// the same person's interactive Claude Code has it.
#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn an_unattended_run_starts_claude_without_the_plugin() {
    let project = plugin_project();
    let standin = StandIn::start(Vec::new());
    let run = super::unattended(
        &project,
        &standin,
        &["run", "--agent", "claude", "--json", "hello", "world"],
    );
    run.expect_code(0);
    let summary: Json = serde_json::from_str(&run.stdout).expect("a JSON summary");
    assert_eq!(summary["state"], "completed", "{summary}\n{}", run.stderr);
    let main = standin.main_requests();
    assert!(!main.is_empty(), "the step's agent asked nothing");
    for request in &main {
        let body = request.body.to_string();
        assert!(
            !body.contains(TOOLS) && !body.contains("hook additional context"),
            "the step's agent had the plugin:\n{body}"
        );
    }
    // The control: the same person's Claude Code, in the same project, has it.
    let session = claude_p(&claude(), &project, "Hi.", vec![vec![text("Hello.")]]);
    assert!(offers_plugin_tools(&session), "{session}");
}
