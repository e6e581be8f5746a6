//! mekara's Claude Code plugin without Claude Code: its launcher (`plugin/bin/mekara`, run by
//! `sh` as Claude Code runs it) finding mekara or saying how to install it, and `mekara hook
//! ... --plugin` as the plugin's `hooks.json` registers it. `claude_code::plugin` runs the
//! plugin in the real Claude Code.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value as Json, json};

use crate::common::{Project, Run, run_with_stdin};

/// The launcher, in the repository.
fn launcher() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("plugin/bin/mekara")
}

/// The launcher run with `args`, `PATH` and the project's `HOME`, nothing else of the test's
/// environment but `env`.
fn launch(project: &Project, path: &str, env: &[(&str, &str)], args: &[&str], stdin: &str) -> Run {
    let mut command = Command::new(launcher());
    command
        .args(args)
        .current_dir(project.root())
        .env_clear()
        .env("PATH", path)
        .env("HOME", project.home());
    for (key, value) in env {
        command.env(key, value);
    }
    run_with_stdin(command, stdin)
}

const NO_MEKARA: &str = "/usr/bin:/bin";

#[test]
fn the_launcher_runs_the_mekara_it_finds_on_path_with_every_argument() {
    let project = Project::new();
    let run = launch(
        &project,
        &crate::common::path_with_mekara(),
        &[],
        &["--version"],
        "",
    );
    run.expect_code(0);
    assert_eq!(
        run.stdout,
        format!("mekara {}\n", env!("CARGO_PKG_VERSION"))
    );
    // Its exit code is mekara's: a usage error is 2.
    launch(
        &project,
        &crate::common::path_with_mekara(),
        &[],
        &["no-such-command"],
        "",
    )
    .expect_code(2);
}

#[test]
fn the_launcher_takes_mekara_bin_first_then_cargo_and_pipx_folders() {
    let project = Project::new();
    let exe = env!("CARGO_BIN_EXE_mekara");
    launch(
        &project,
        NO_MEKARA,
        &[("MEKARA_BIN", exe)],
        &["--version"],
        "",
    )
    .expect_code(0);
    // `cargo install` puts it in ~/.cargo/bin; pipx and `uv tool install` in ~/.local/bin.
    for folder in [".cargo/bin", ".local/bin"] {
        let project = Project::new();
        let dir = project.home().join(folder);
        std::fs::create_dir_all(&dir).expect("create");
        std::os::unix::fs::symlink(exe, dir.join("mekara")).expect("link");
        launch(&project, NO_MEKARA, &[], &["--version"], "").expect_code(0);
    }
}

#[test]
fn the_launcher_never_runs_itself_or_another_launcher() {
    let project = Project::new();
    // Its own folder on PATH (Claude Code puts it on the agent's Bash PATH), and a copy of the
    // plugin elsewhere (an older version in the plugin cache): neither is mekara.
    let copy = project.home().join("cache/bin");
    std::fs::create_dir_all(&copy).expect("create");
    std::fs::copy(launcher(), copy.join("mekara")).expect("copy");
    let own = launcher().parent().expect("a folder").display().to_string();
    let path = format!("{own}:{}:{NO_MEKARA}", copy.display());
    let run = launch(&project, &path, &[], &["--version"], "");
    run.expect_code(127);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    assert_eq!(
        run.stderr,
        "mekara is not installed: install it with `pipx install mekara-cli` (or `npm install -g mekara`, or `cargo install --locked mekara`), then restart the agent\n"
    );
}

#[test]
fn without_mekara_the_session_start_hook_tells_the_person_and_the_agent_and_no_hook_breaks() {
    let project = Project::new();
    let run = launch(
        &project,
        NO_MEKARA,
        &[],
        &["hook", "session-start", "--plugin"],
        r#"{"hook_event_name":"SessionStart"}"#,
    );
    run.expect_code(0);
    let answer: Json = serde_json::from_str(&run.stdout).expect("JSON Claude Code reads");
    let told = answer["systemMessage"]
        .as_str()
        .expect("a message for the person");
    assert!(told.starts_with("mekara is not installed: install it with `pipx install mekara-cli`"));
    assert_eq!(
        answer["hookSpecificOutput"]["hookEventName"],
        "SessionStart"
    );
    let context = answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("context for the agent");
    assert!(context.contains(told), "{context}");
    // The other hooks say nothing and succeed: a hook must never break a session.
    for hook in ["reroute-user-commands", "reroute-agent-commands"] {
        let run = launch(&project, NO_MEKARA, &[], &["hook", hook, "--plugin"], "{}");
        run.expect_code(0);
        assert!(run.stdout.is_empty() && run.stderr.is_empty(), "{run:?}");
    }
}

/// `mekara hook NAME --plugin` with `input` on stdin.
fn plugin_hook(project: &Project, name: &str, input: &Json) -> Run {
    let run = run_with_stdin(
        project.command(&["hook", name, "--plugin"]),
        &input.to_string(),
    );
    run.expect_code(0);
    run
}

fn tool_call(project: &Project, tool: &str, tool_input: Json) -> Json {
    json!({
        "session_id": "s", "cwd": project.root(), "hook_event_name": "PreToolUse",
        "tool_name": tool, "tool_input": tool_input, "tool_use_id": "toolu_1",
    })
}

#[test]
fn the_plugins_hook_allows_the_plugins_own_tools_and_nothing_else() {
    let project = Project::new();
    let run = plugin_hook(
        &project,
        "reroute-agent-commands",
        &tool_call(
            &project,
            "mcp__plugin_mekara_mekara__start",
            json!({"name": "x"}),
        ),
    );
    let answer: Json = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "allow");
    for tool in [
        "mcp__mekara__start",
        "mcp__plugin_other_mekara__start",
        "Bash",
    ] {
        let run = plugin_hook(
            &project,
            "reroute-agent-commands",
            &tool_call(&project, tool, json!({})),
        );
        assert!(run.stdout.is_empty(), "{tool}: {}", run.stdout);
    }
    // Without `--plugin` (the hook `mekara install` registers), nothing is allowed.
    let run = run_with_stdin(
        project.command(&["hook", "reroute-agent-commands"]),
        &tool_call(&project, "mcp__plugin_mekara_mekara__start", json!({})).to_string(),
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[test]
fn the_plugins_hooks_take_commands_under_the_plugins_name_and_name_its_tools() {
    let project = Project::new();
    project.script(
        "deploy",
        "Deploy.\n",
        Some("def execute(request):\n    auto(\"true\")\n"),
    );
    let prompt = |typed: &str| {
        let input =
            json!({"cwd": project.root(), "hook_event_name": "UserPromptSubmit", "prompt": typed});
        plugin_hook(&project, "reroute-user-commands", &input).stdout
    };
    let answer = prompt("/mekara:compile deploy");
    insta::assert_snapshot!(
        "plugin_hook_compile_by_the_plugins_name",
        project.scrub(&answer)
    );
    insta::assert_snapshot!(
        "plugin_hook_a_project_script",
        project.scrub(&prompt("/deploy now"))
    );
    // `mekara:` alone, or an NL-only bundled script, is no compiled script.
    assert!(prompt("/mekara: deploy").is_empty());
    assert!(prompt("/mekara:systematize x").is_empty());
    // Typed without the plugin's name, a bundled NL script has no command file: its
    // instructions come with the hook, arguments in place.
    let answer = prompt("/systematize release-notes");
    assert!(answer.contains("release-notes"), "{answer}");
    // Not where the project has a command file of that name (its expansion says it all).
    project.write(".claude/commands/systematize.md", "Our own.\n");
    assert!(prompt("/systematize x").is_empty());
    let run = plugin_hook(
        &project,
        "reroute-agent-commands",
        &tool_call(
            &project,
            "Skill",
            json!({"skill": "mekara:compile", "args": "deploy"}),
        ),
    );
    let answer: Json = serde_json::from_str(&run.stdout).expect("JSON");
    assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
    // The session-start hook has nothing to say when mekara is there.
    let run = plugin_hook(
        &project,
        "session-start",
        &json!({"hook_event_name": "SessionStart"}),
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

#[test]
fn the_plugins_hooks_say_nothing_where_mekara_install_registered_its_own() {
    let project = Project::new();
    project.script(
        "deploy",
        "Deploy.\n",
        Some("def execute(request):\n    auto(\"true\")\n"),
    );
    project
        .command(&["install"])
        .output()
        .expect("mekara install");
    let input =
        json!({"cwd": project.root(), "hook_event_name": "UserPromptSubmit", "prompt": "/deploy"});
    let run = plugin_hook(&project, "reroute-user-commands", &input);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    let run = plugin_hook(
        &project,
        "reroute-agent-commands",
        &tool_call(&project, "mcp__plugin_mekara_mekara__start", json!({})),
    );
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    // The project's own hook answers.
    let run = run_with_stdin(
        project.command(&["hook", "reroute-user-commands"]),
        &input.to_string(),
    );
    insta::assert_snapshot!(
        "plugin_hook_the_projects_own_answers",
        project.scrub(&run.stdout)
    );
}

/// A project with no scripts yet: Claude Code starts the plugin's server in a folder with no
/// `.mekara/`, and the scripts `/mekara:systematize` and `/compile` write there while the
/// session lasts are found by that same server (without `--plugin`, a folder with neither
/// `.mekara/` nor `.claude/` is no project).
#[tokio::test]
async fn the_plugins_server_finds_scripts_written_after_it_started_in_a_new_project() {
    let project = Project::new();
    let fresh = project.dir.path().join("fresh");
    std::fs::create_dir_all(&fresh).expect("create");
    let client =
        crate::mcp::client::Client::start_command(&project, &fresh, &["mcp", "--plugin"], &[])
            .await;
    crate::common::write_file(
        &fresh.join(".mekara/scripts/nl/hello.md"),
        "1. Say hello.\n",
    );
    crate::common::write_file(
        &fresh.join(".mekara/scripts/compiled/hello.star"),
        "def execute(request):\n    auto(\"echo hello\")\n",
    );
    let reply = client
        .call("start", json!({"name": "hello", "arguments": ""}))
        .await
        .ok();
    insta::assert_snapshot!(
        "plugin_server_a_script_written_after_it_started",
        project.scrub(&reply)
    );
    assert!(
        fresh.join(".mekara/runs").is_dir(),
        "the run is the project's"
    );
}

/// The launcher run as [`launch`] does, stopped after 10 s (`timeout` exits 124 then).
fn launch_bounded(project: &Project, path: &str, args: &[&str]) -> Run {
    let mut command = Command::new("timeout");
    command
        .arg("10")
        .arg(launcher())
        .args(args)
        .current_dir(project.root())
        .env_clear()
        .env("PATH", path)
        .env("HOME", project.home());
    run_with_stdin(command, "")
}

/// Regression (issue 40): a `mekara` wrapper on PATH that execs the launcher made it run the
/// wrapper again, forever (a hook never returned). It now ends at once with a clear error,
/// or runs the real mekara further down PATH.
#[test]
fn a_wrapper_that_runs_the_launcher_again_does_not_loop() {
    let project = Project::new();
    let wrap = project.home().join("wrap");
    std::fs::create_dir_all(&wrap).expect("create");
    let wrapper = wrap.join("mekara");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", launcher().display()),
    )
    .expect("write");
    std::fs::set_permissions(
        &wrapper,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    let path = format!("{}:{NO_MEKARA}", wrap.display());
    let started = std::time::Instant::now();
    let run = launch_bounded(&project, &path, &["--version"]);
    run.expect_code(127);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(
        run.stderr,
        format!(
            "mekara was not found: `{}` ran this launcher again instead of mekara (a wrapper named `mekara`?); set MEKARA_BIN to the mekara program, or take the wrapper off PATH\n",
            wrapper.display()
        )
    );
    // A hook still returns, and quietly.
    launch_bounded(
        &project,
        &path,
        &["hook", "reroute-user-commands", "--plugin"],
    )
    .expect_code(0);
    // With the real mekara further down PATH, that one runs.
    let path = format!("{}:{}", wrap.display(), crate::common::path_with_mekara());
    let run = launch_bounded(&project, &path, &["--version"]);
    run.expect_code(0);
    assert_eq!(
        run.stdout,
        format!("mekara {}\n", env!("CARGO_PKG_VERSION"))
    );
}

/// Regression (issue 40): the launcher split PATH unquoted, so a folder `a/*` on it was
/// globbed and matched `a/b`, where a `mekara` was run.
#[test]
fn a_path_folder_with_a_star_is_not_globbed() {
    let project = Project::new();
    let inner = project.home().join("glob/b");
    std::fs::create_dir_all(&inner).expect("create");
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_mekara"), inner.join("mekara")).expect("link");
    let path = format!("{}/glob/*:{NO_MEKARA}", project.home().display());
    let run = launch_bounded(&project, &path, &["--version"]);
    run.expect_code(127);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
}

/// The Windows launcher (`plugin/bin/mekara.cmd`, run under Wine by `tests/windows/smoke.py`)
/// says the same sentence as the `sh` one, and keeps its CRLF line ends whatever git does
/// (`cmd` misreads labels in a file with bare LF ends).
#[test]
fn the_windows_launcher_says_what_the_sh_one_says_with_crlf_line_ends() {
    let sh = std::fs::read_to_string(launcher()).expect("read the sh launcher");
    let cmd = std::fs::read_to_string(launcher().with_extension("cmd")).expect("read mekara.cmd");
    let said = |text: &str, start: &str, end: &str| -> String {
        let from = text.find(start).expect(start) + start.len();
        text[from..][..text[from..].find(end).expect(end)].to_string()
    };
    assert_eq!(
        said(&cmd, "set \"install=", "\"\r\n"),
        said(&sh, "INSTALL='", "'\n")
    );
    assert!(cmd.contains("mekara-launcher"), "the launcher mark");
    assert_eq!(cmd.matches('\n').count(), cmd.matches("\r\n").count());
    let attributes =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(".gitattributes"))
            .expect("read .gitattributes");
    assert!(
        attributes
            .lines()
            .any(|l| l == "plugin/bin/mekara.cmd -text")
    );
}
