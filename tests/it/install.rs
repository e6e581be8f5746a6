//! `mekara install` and `mekara uninstall` on real folders: what they write, that a second
//! run changes nothing, that everything else in the files survives (key order included), and
//! that uninstall takes out exactly what install put in.

use std::path::Path;

use crate::common::{Project, Run};
use serde_json::{Value as Json, json};

/// `PATH` with the `mekara` under test on it, as after a real installation.
fn path_with_mekara() -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_mekara"))
        .parent()
        .expect("folder");
    format!("{}:/usr/bin:/bin", bin.display())
}

/// `mekara ARGS` in `project` as a person types it: with the umask most people have
/// (whatever the test runner's is) and mekara on the `PATH`.
fn command(project: &Project, args: &[&str]) -> std::process::Command {
    let mut command = project.command(args);
    umask_022(&mut command);
    command.env("PATH", path_with_mekara());
    command
}

/// Pins what a person sees of `mekara ARGS` in `project` (a snapshot named `name`).
fn pinned(name: &str, project: &Project, args: &[&str]) -> Run {
    mekara_snapshot!(name, project, command(project, args))
}

fn mekara(project: &Project, args: &[&str]) -> Run {
    let out = command(project, args).output().expect("run mekara");
    let run = Run::from_output(out);
    Run {
        stdout: project.scrub(&run.stdout),
        stderr: project.scrub(&run.stderr),
        ..run
    }
}

fn umask_022(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    // Through a shell's `umask`, rather than `pre_exec`, to keep `unsafe` out of the tests.
    let program = command.get_program().to_owned();
    let args: Vec<_> = command.get_args().map(ToOwned::to_owned).collect();
    let mut shell = std::process::Command::new("/bin/sh");
    shell
        .arg("-c")
        .arg("umask 022 && exec \"$@\"")
        .arg("sh")
        .arg(program)
        .args(args);
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => shell.env(key, value),
            None => shell.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        shell.current_dir(dir);
    }
    let _ = shell.arg0("sh");
    *command = shell;
}

/// Every file, folder and link under `dir` with its mode and contents, byte for byte.
fn tree_with_modes(dir: &Path) -> Vec<String> {
    use std::os::unix::fs::PermissionsExt;
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(dir)
                .expect("inside")
                .display()
                .to_string();
            let meta = std::fs::symlink_metadata(&path).expect("meta");
            let mode = meta.permissions().mode() & 0o7777;
            if meta.file_type().is_symlink() {
                out.push(format!("{rel} -> {:?}", std::fs::read_link(&path)));
            } else if meta.is_dir() {
                out.push(format!("{rel}/ {mode:o}"));
                stack.push(path);
            } else {
                out.push(format!(
                    "{rel} {mode:o}: {:?}",
                    std::fs::read(&path).expect("read")
                ));
            }
        }
    }
    out.sort();
    out
}

fn mode(project: &Project, path: &str) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(project.root().join(path))
        .expect("meta")
        .permissions()
        .mode()
        & 0o777
}

/// Regression: install wrote new files through a temporary file of mode 0600, so a new
/// `.mcp.json` was private where every other new file of the person is 0644.
#[test]
fn new_files_get_the_mode_of_any_new_file_and_edited_files_keep_theirs() {
    use std::os::unix::fs::PermissionsExt;
    let project = Project::new();
    project.write(".claude/settings.json", "{}\n");
    let settings = project.root().join(".claude/settings.json");
    std::fs::set_permissions(&settings, std::fs::Permissions::from_mode(0o640)).expect("chmod");
    mekara(&project, &["install"]).expect_code(0);
    assert_eq!(mode(&project, ".mcp.json"), 0o644);
    assert_eq!(mode(&project, ".mekara/install.json"), 0o644);
    assert_eq!(mode(&project, ".claude/settings.json"), 0o640);
}

/// Regression: uninstall deleted a `.mcp.json` that was there before install (it held only
/// what install had added, so it looked like install's), and left `.claude/commands` a link
/// instead of giving back the folder install had moved aside. A round trip must leave the
/// project as it was, byte for byte and mode for mode.
#[test]
fn install_then_uninstall_leaves_the_project_as_it_was() {
    use std::os::unix::fs::PermissionsExt;
    for (case, mcp) in [
        (
            "other servers",
            "{\n  \"mcpServers\": {\n    \"github\": {\n      \"command\": \"gh-mcp\"\n    }\n  }\n}\n",
        ),
        ("empty object", "{}\n"),
    ] {
        let project = Project::new();
        project.write(".mcp.json", mcp);
        std::fs::set_permissions(
            project.root().join(".mcp.json"),
            std::fs::Permissions::from_mode(0o600),
        )
        .expect("chmod");
        project.write(".claude/commands/greet.md", "Say hi to $ARGUMENTS.\n");
        project.write(".claude/commands/ops/deploy.md", "Deploy.\n");
        project.write(".mekara/scripts/nl/ops/deploy.md", "Deploy.\n");
        let before = tree_with_modes(&project.root());
        mekara(&project, &["install"]).expect_code(0);
        assert_ne!(tree_with_modes(&project.root()), before, "{case}");
        let run = mekara(&project, &["uninstall"]);
        run.expect_code(0);
        assert_eq!(
            tree_with_modes(&project.root()),
            before,
            "{case}:\n{}",
            run.stdout
        );
    }
}

fn read(project: &Project, path: &str) -> String {
    std::fs::read_to_string(project.root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every file and link under the project, with link targets, for before/after comparisons.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let path = entry.path();
            let rel = path
                .strip_prefix(dir)
                .expect("inside")
                .display()
                .to_string();
            let meta = std::fs::symlink_metadata(&path).expect("meta");
            if meta.file_type().is_symlink() {
                out.push(format!(
                    "{rel} -> {}",
                    std::fs::read_link(&path).expect("link").display()
                ));
            } else if meta.is_dir() {
                out.push(format!("{rel}/"));
                stack.push(path);
            } else {
                out.push(format!(
                    "{rel}: {}",
                    std::fs::read_to_string(&path).unwrap_or_default()
                ));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn a_fresh_project_gets_folders_link_server_hooks_and_permissions() {
    let project = Project::new();
    let run = mekara(&project, &["install"]);
    run.expect_code(0);
    insta::assert_snapshot!("install_fresh", run.stdout);
    insta::assert_snapshot!(
        "install_fresh_settings",
        read(&project, ".claude/settings.json")
    );
    insta::assert_snapshot!("install_fresh_mcp", read(&project, ".mcp.json"));
    let link = std::fs::read_link(project.root().join(".claude/commands")).expect("a link");
    assert_eq!(link, Path::new("../.mekara/scripts/nl"));
    assert!(project.root().join(".mekara/scripts/compiled").is_dir());

    // A script written to the NL folder is now one of Claude Code's commands.
    project.write(".mekara/scripts/nl/deploy.md", "Deploy.\n");
    assert!(project.root().join(".claude/commands/deploy.md").is_file());

    let before = tree(&project.root());
    let again = mekara(&project, &["install"]);
    again.expect_code(0);
    assert!(
        again.stdout.starts_with(
            "mekara install (project `[PROJECT]`): nothing to change, already installed"
        ),
        "{}",
        again.stdout
    );
    assert_eq!(
        tree(&project.root()),
        before,
        "a second install changed files"
    );
}

#[test]
fn other_settings_and_their_key_order_survive_and_uninstall_restores_them() {
    let project = Project::new();
    let settings = r#"{
  "zeta": 1,
  "permissions": {
    "deny": ["Bash(rm:*)"],
    "allow": ["Bash(ls)"]
  },
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}
    ]
  },
  "alpha": {"b": 1, "a": 12345678901234567890123}
}
"#;
    let mcp = r#"{"mcpServers": {"github": {"command": "gh-mcp"}}, "other": true}"#;
    project.write(".claude/settings.json", settings);
    project.write(".mcp.json", mcp);
    mekara(&project, &["install"]).expect_code(0);

    let installed = read(&project, ".claude/settings.json");
    insta::assert_snapshot!("install_merged_settings", installed);
    let keys: Vec<String> = serde_json::from_str::<serde_json::Map<String, Json>>(&installed)
        .expect("object")
        .keys()
        .cloned()
        .collect();
    assert_eq!(keys, ["zeta", "permissions", "hooks", "alpha"]);
    assert!(
        installed.contains("12345678901234567890123"),
        "a big number lost its digits"
    );
    insta::assert_snapshot!("install_merged_mcp", read(&project, ".mcp.json"));

    let run = mekara(&project, &["uninstall"]);
    run.expect_code(0);
    insta::assert_snapshot!("uninstall_merged", run.stdout);
    let restored: Json =
        serde_json::from_str(&read(&project, ".claude/settings.json")).expect("json");
    let original: Json = serde_json::from_str(settings).expect("json");
    assert_eq!(restored, original);
    assert_eq!(
        serde_json::to_string(&restored).expect("json"),
        serde_json::to_string(&original).expect("json"),
        "key order changed"
    );
    let mcp_after: Json = serde_json::from_str(&read(&project, ".mcp.json")).expect("json");
    assert_eq!(mcp_after, serde_json::from_str::<Json>(mcp).expect("json"));
    assert!(!project.root().join(".claude/commands").exists());
    // The script folders install created held no script: they went; the project's own
    // `.mekara/` stays.
    assert!(!project.root().join(".mekara/scripts").exists());
    assert!(project.root().join(".mekara").is_dir());

    pinned("uninstall_again", &project, &["uninstall"]);
}

/// mekara before the `SlashCommand` matcher registered its PreToolUse hook for `Skill` only:
/// a new install replaces that entry (never two entries running the hook), and uninstall
/// takes out either.
#[test]
fn an_earlier_skill_only_hook_is_replaced_and_uninstalled() {
    let project = Project::new();
    let earlier = r#"{
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]},
      {"matcher": "Skill", "hooks": [{"type": "command", "command": "mekara hook reroute-agent-commands"}]}
    ]
  }
}
"#;
    project.write(".claude/settings.json", earlier);
    pinned("install_over_an_earlier_skill_hook", &project, &["install"]);
    let installed: Json =
        serde_json::from_str(&read(&project, ".claude/settings.json")).expect("json");
    let matchers: Vec<&str> = installed["hooks"]["PreToolUse"]
        .as_array()
        .expect("entries")
        .iter()
        .map(|e| e["matcher"].as_str().expect("matcher"))
        .collect();
    assert_eq!(matchers, ["Bash", "Skill|SlashCommand"]);
    let again = mekara(&project, &["install"]);
    again.expect_code(0);
    assert_eq!(
        read(&project, ".claude/settings.json"),
        serde_json::to_string_pretty(&installed).expect("json") + "\n",
        "a second install changes nothing:\n{}",
        again.stdout
    );

    // An uninstall by this mekara of what the earlier one installed.
    project.write(".claude/settings.json", earlier);
    mekara(&project, &["uninstall"]).expect_code(0);
    let left: Json = serde_json::from_str(&read(&project, ".claude/settings.json")).expect("json");
    assert_eq!(
        left,
        json!({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]}]}})
    );
}

#[test]
fn uninstall_after_install_on_a_bare_folder_leaves_it_bare() {
    let project = Project::new();
    let clients = [
        "--client", "codex", "--client", "opencode", "--client", "gemini", "--client", "qwen",
        "--client", "copilot",
    ];
    mekara(&project, &[&["install"][..], &clients].concat()).expect_code(0);
    mekara(&project, &[&["uninstall"][..], &clients].concat()).expect_code(0);
    // Everything but the project's `.mekara/` was install's, the empty script folders too:
    // it all goes.
    assert_eq!(tree(&project.root()), [".mekara/"]);
}

#[test]
fn a_file_that_does_not_parse_is_named_and_nothing_is_written() {
    for (case, (path, text)) in [
        (".mcp.json", "{ \"mcpServers\": "),
        (".claude/settings.json", "[1, 2]"),
        (".claude/settings.json", r#"{"hooks": []}"#),
        (
            ".claude/settings.json",
            r#"{"permissions": {"allow": "all"}}"#,
        ),
        (".codex/config.toml", "[mcp_servers\ncommand = "),
        (".codex/config.toml", "mcp_servers = 3\n"),
        (".gemini/settings.json", "{\"theme\": \"dark\",}"),
        (".gemini/settings.json", r#"{"mcpServers": ["mekara"]}"#),
        (
            ".gemini/settings.json",
            "{\n  // dark, always\n  \"theme\": \"dark\"\n}",
        ),
        (".gemini/settings.json", "{\"theme\": /* dark */ \"dark\"}"),
    ]
    .into_iter()
    .enumerate()
    {
        let project = Project::new();
        project.write(path, text);
        let before = tree(&project.root());
        let run = mekara(
            &project,
            &["install", "--client", "codex", "--client", "gemini"],
        );
        run.expect_code(1);
        assert_eq!(run.stdout, "");
        assert_eq!(
            tree(&project.root()),
            before,
            "{path}: something was written"
        );
        insta::assert_snapshot!(
            format!("refused_{case}"),
            format!("{path}: {text}\n{}", run.stderr)
        );
    }
}

#[test]
fn dry_run_shows_the_changes_and_makes_none() {
    let project = Project::new();
    let before = tree(&project.root());
    let run = mekara(&project, &["install", "--dry-run", "--client", "codex"]);
    run.expect_code(0);
    insta::assert_snapshot!("install_dry_run", run.stdout);
    assert_eq!(tree(&project.root()), before);
}

#[test]
fn a_real_commands_folder_is_moved_into_the_nl_scripts_and_linked() {
    let project = Project::new();
    project.write(".claude/commands/greet.md", "Say hi to $ARGUMENTS.\n");
    project.write(".claude/commands/ops/deploy.md", "Deploy.\n");
    project.write(".mekara/scripts/nl/ops/deploy.md", "Deploy.\n");
    let run = mekara(&project, &["install"]);
    run.expect_code(0);
    insta::assert_snapshot!("install_real_commands_folder", run.stdout);
    assert_eq!(
        read(&project, ".claude/commands/greet.md"),
        "Say hi to $ARGUMENTS.\n"
    );
    assert!(
        std::fs::symlink_metadata(project.root().join(".claude/commands"))
            .expect("meta")
            .file_type()
            .is_symlink()
    );
}

#[test]
fn a_command_clashing_with_a_different_nl_script_is_refused() {
    let project = Project::new();
    project.write(".claude/commands/deploy.md", "Deploy (mine).\n");
    project.write(".mekara/scripts/nl/deploy.md", "Deploy (theirs).\n");
    let before = tree(&project.root());
    let run = mekara(&project, &["install"]);
    run.expect_code(1);
    insta::assert_snapshot!("install_commands_clash", run.stderr);
    assert_eq!(tree(&project.root()), before);
}

#[test]
fn user_scope_writes_the_home_files_and_keeps_claude_json() {
    let project = Project::new();
    let claude_json = r#"{"numStartups": 3, "projects": {"/x": {"hasTrustDialogAccepted": true}}}"#;
    crate::common::write_file(&project.home().join(".claude.json"), claude_json);
    let run = mekara(&project, &["install", "--user"]);
    run.expect_code(0);
    insta::assert_snapshot!("install_user", run.stdout);
    let written: Json = serde_json::from_str(
        &std::fs::read_to_string(project.home().join(".claude.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(written["numStartups"], 3);
    assert_eq!(written["projects"]["/x"]["hasTrustDialogAccepted"], true);
    assert_eq!(written["mcpServers"]["mekara"]["args"][0], "mcp");
    assert_eq!(
        std::fs::read_link(project.home().join(".claude/commands")).expect("link"),
        Path::new("../.mekara/scripts/nl")
    );
    assert!(project.home().join(".claude/settings.json").is_file());
    assert!(
        !project.root().join(".mcp.json").exists(),
        "the project was touched"
    );

    mekara(&project, &["uninstall", "--user"]).expect_code(0);
    let restored: Json = serde_json::from_str(
        &std::fs::read_to_string(project.home().join(".claude.json")).expect("read"),
    )
    .expect("json");
    assert_eq!(
        restored,
        serde_json::from_str::<Json>(claude_json).expect("json")
    );
}

#[test]
fn codex_and_opencode_configs_keep_their_formatting() {
    let project = Project::new();
    let codex =
        "# my settings\nmodel = \"o3\"  # the best\n\n[mcp_servers.github]\ncommand = \"gh\"\n";
    let opencode = r#"{"$schema": "https://opencode.ai/config.json", "theme": "dark"}"#;
    project.write(".codex/config.toml", codex);
    project.write("opencode.json", opencode);
    mekara(
        &project,
        &["install", "--client", "codex", "--client", "opencode"],
    )
    .expect_code(0);
    insta::assert_snapshot!("install_codex", read(&project, ".codex/config.toml"));
    insta::assert_snapshot!("install_opencode", read(&project, "opencode.json"));
    mekara(
        &project,
        &["uninstall", "--client", "codex", "--client", "opencode"],
    )
    .expect_code(0);
    assert_eq!(read(&project, ".codex/config.toml"), codex);
    let restored: Json = serde_json::from_str(&read(&project, "opencode.json")).expect("json");
    assert_eq!(
        restored,
        serde_json::from_str::<Json>(opencode).expect("json")
    );
}

/// Regression: the sentence that says when to run install again held 18 spaces (a string
/// continued on a new line without its `\`). The whole output is pinned.
#[test]
fn install_for_opencode_says_everything_in_plain_sentences() {
    let project = Project::new();
    project.script(
        "greet",
        "---\ndescription: Greet\n---\nSay hi.\n",
        Some("def execute(request):\n    llm(\"Say hi.\")\n"),
    );
    mekara_snapshot!(
        project,
        command(&project, &["install", "--client", "opencode"])
    );
}

/// Regression (in `install_opencode_again`): the command install removes when its compiled
/// script is gone was said to be "for a bundled script", also for a project's own.
///
/// OpenCode has no hooks, so `--client opencode` writes a command per compiled script that
/// sends it to `mekara_start`; each install follows the scripts there are (a new one gets a
/// command, a removed one loses it), a command of the person's is left alone, and uninstall
/// takes the commands out with their folders.
#[test]
fn opencode_commands_follow_the_compiled_scripts() {
    let project = Project::new();
    let star = Some("def execute(request):\n    llm(\"Say hi.\")\n");
    project.script(
        "greet",
        "---\ndescription: Greet \"everyone\"\n---\nSay hi.\n",
        star,
    );
    project.script("notes", "Just notes, no compiled script.\n", None);
    let run = mekara(&project, &["install", "--client", "opencode"]);
    run.expect_code(0);
    let commands = project.root().join(".opencode/commands");
    // The commands outside the workflow library's folder (`flow/`, counted once here).
    let listed = |dir: &Path| {
        let mut names: Vec<String> = tree(dir)
            .iter()
            .map(|entry| entry.split(':').next().unwrap_or(entry).to_string())
            .filter(|entry| !entry.starts_with("flow/"))
            .collect();
        names.sort();
        names
    };
    // The bundled compiled scripts (`compile`, the library's ten) and the project's; not
    // the NL-only one.
    assert_eq!(listed(&commands), ["compile.md", "greet.md"]);
    assert_eq!(
        std::fs::read_dir(commands.join("flow")).map_or(0, Iterator::count),
        10
    );
    insta::assert_snapshot!(
        "install_opencode_command",
        read(&project, ".opencode/commands/greet.md")
    );
    // What install says (when to run it again among it) is pinned by
    // `install_for_opencode_says_everything_in_plain_sentences`.

    // A new compiled script gets its command, a removed one loses it; the person's own
    // command file is theirs.
    project.script("team/deploy", "Deploy.\n", star);
    std::fs::remove_file(project.root().join(".mekara/scripts/compiled/greet.star"))
        .expect("remove");
    project.write(".opencode/commands/compile.md", "My own compile command.\n");
    pinned(
        "install_opencode_again",
        &project,
        &["install", "--client", "opencode"],
    );
    assert_eq!(listed(&commands), ["compile.md", "team/", "team/deploy.md"]);
    assert_eq!(
        read(&project, ".opencode/commands/compile.md"),
        "My own compile command.\n"
    );
    let deploy = read(&project, ".opencode/commands/team/deploy.md");
    insta::assert_snapshot!("install_opencode_nested_command", project.scrub(&deploy));

    std::fs::remove_file(project.root().join(".opencode/commands/compile.md")).expect("remove");
    mekara(&project, &["uninstall", "--client", "opencode"]).expect_code(0);
    assert!(
        !project.root().join(".opencode").exists(),
        "{:?}",
        tree(&project.root())
    );
}

/// Gemini CLI's settings hold much besides servers (theme, auth, other servers): install adds
/// the trusted `mekara` server among them, in place, and uninstall takes out only that.
#[test]
fn gemini_settings_get_a_trusted_server_and_keep_everything_else() {
    let project = Project::new();
    let settings = r#"{
  "theme": "GitHub",
  "mcpServers": {
    "github": {
      "command": "gh-mcp",
      "trust": false
    }
  },
  "security": {
    "auth": {
      "selectedType": "gemini-api-key"
    }
  }
}
"#;
    project.write(".gemini/settings.json", settings);
    pinned(
        "install_gemini_output",
        &project,
        &["install", "--client", "gemini"],
    );
    insta::assert_snapshot!("install_gemini", read(&project, ".gemini/settings.json"));
    second_install_changes_nothing_and_uninstall_restores(
        &project,
        "gemini",
        ".gemini/settings.json",
        settings,
    );
}

/// Qwen Code: the `mekara` server in `.qwen/settings.json`, trusted (no confirmation per
/// call) and with its tools always loaded (not behind Qwen Code's `tool_search`), and the
/// one approval Qwen Code asks for a project's servers left to the person.
#[test]
fn qwen_settings_get_a_trusted_always_loaded_server() {
    let project = Project::new();
    let settings = "{\n  \"model\": {\n    \"name\": \"qwen3-coder-plus\"\n  }\n}\n";
    project.write(".qwen/settings.json", settings);
    pinned(
        "install_qwen_output",
        &project,
        &["install", "--client", "qwen"],
    );
    let written: Json = serde_json::from_str(&read(&project, ".qwen/settings.json")).expect("json");
    assert_eq!(
        written,
        serde_json::json!({
            "model": {"name": "qwen3-coder-plus"},
            "mcpServers": {"mekara": {
                "command": "mekara", "args": ["mcp"], "trust": true, "alwaysLoadTools": true
            }}
        })
    );
    second_install_changes_nothing_and_uninstall_restores(
        &project,
        "qwen",
        ".qwen/settings.json",
        settings,
    );
}

/// Copilot CLI reads a project's `.mcp.json` (Claude Code's entry serves it) and, for every
/// folder, `~/.copilot/mcp-config.json`; it keeps no tool approvals in a file, so install says
/// how to allow mekara's tools when starting it.
#[test]
fn copilot_reads_the_project_mcp_json_and_the_user_scope_writes_its_mcp_config() {
    let project = Project::new();
    pinned(
        "install_copilot_output",
        &project,
        &["install", "--client", "copilot"],
    );
    assert!(!project.root().join(".copilot").exists());
    let mcp: Json = serde_json::from_str(&read(&project, ".mcp.json")).expect("json");
    assert_eq!(mcp["mcpServers"]["mekara"]["command"], "mekara");

    let config = project.home().join(".copilot/mcp-config.json");
    pinned(
        "install_copilot_user_output",
        &project,
        &["install", "--user", "--client", "copilot"],
    );
    let written: Json =
        serde_json::from_str(&std::fs::read_to_string(&config).expect("read")).expect("json");
    assert_eq!(
        written,
        json!({"mcpServers": {"mekara": {
            "type": "local", "command": "mekara", "args": ["mcp"], "tools": ["*"]
        }}})
    );
    mekara(&project, &["uninstall", "--user", "--client", "copilot"]).expect_code(0);
    assert!(!config.exists(), "{}", config.display());
}

#[test]
fn gemini_user_scope_writes_the_home_settings() {
    let project = Project::new();
    let home_settings = project.home().join(".gemini/settings.json");
    pinned(
        "install_gemini_user_output",
        &project,
        &["install", "--user", "--client", "gemini"],
    );
    let written: Json =
        serde_json::from_str(&std::fs::read_to_string(&home_settings).expect("read"))
            .expect("json");
    assert_eq!(
        written,
        serde_json::json!({"mcpServers": {"mekara": {"command": "mekara", "args": ["mcp"], "trust": true}}})
    );
    assert!(
        !project.root().join(".gemini").exists(),
        "the project was touched"
    );
    mekara(&project, &["uninstall", "--user", "--client", "gemini"]).expect_code(0);
    assert!(!home_settings.exists(), "{}", home_settings.display());
    assert!(!project.home().join(".gemini").exists());
}

#[test]
fn an_entry_named_mekara_with_other_settings_is_left_alone() {
    let project = Project::new();
    let mcp =
        r#"{"mcpServers": {"mekara": {"command": "/opt/mekara/bin/mekara", "args": ["mcp"]}}}"#;
    project.write(".mcp.json", mcp);
    pinned("install_beside_another_mekara", &project, &["install"]);
    mekara(&project, &["uninstall"]).expect_code(0);
    assert_eq!(read(&project, ".mcp.json"), mcp);
}

/// Codex refused every call of mekara's tools ("requires approval, but approval policy is
/// never") when install wrote the server without `default_tools_approval_mode`: an install
/// over such an entry adds the setting, and uninstall takes the whole entry out.
#[test]
fn a_codex_server_written_without_the_approval_mode_gets_it_and_uninstall_removes_both() {
    let project = Project::new();
    let before = "model = \"o3\"\n\n[mcp_servers.github]\ncommand = \"gh\"\n";
    let old_install = "\n[mcp_servers.mekara]\ncommand = \"mekara\"\nargs = [\"mcp\"]\n";
    project.write(".codex/config.toml", &format!("{before}{old_install}"));
    pinned(
        "install_codex_approval_mode",
        &project,
        &["install", "--client", "codex"],
    );
    assert_eq!(
        read(&project, ".codex/config.toml"),
        format!("{before}{old_install}default_tools_approval_mode = \"approve\"\n")
    );
    second_install_changes_nothing_and_uninstall_restores(
        &project,
        "codex",
        ".codex/config.toml",
        before,
    );
}

/// After an install for `client`: a second changes nothing, and uninstall gives `file` back
/// as it was, `before`.
fn second_install_changes_nothing_and_uninstall_restores(
    project: &Project,
    client: &str,
    file: &str,
    before: &str,
) {
    let again = mekara(project, &["install", "--client", client]);
    assert!(
        again
            .stdout
            .contains("nothing to change, already installed"),
        "{}",
        again.stdout
    );
    mekara(project, &["uninstall", "--client", client]).expect_code(0);
    assert_eq!(read(project, file), before);
}

#[test]
fn a_codex_server_whose_approval_mode_the_person_chose_is_left_alone() {
    let project = Project::new();
    let config = "[mcp_servers.mekara]\ncommand = \"mekara\"\nargs = [\"mcp\"]\n\
                  default_tools_approval_mode = \"prompt\"\n";
    project.write(".codex/config.toml", config);
    pinned(
        "install_codex_chosen_mode",
        &project,
        &["install", "--client", "codex"],
    );
    assert_eq!(read(&project, ".codex/config.toml"), config);
    mekara(&project, &["uninstall", "--client", "codex"]).expect_code(0);
    assert_eq!(read(&project, ".codex/config.toml"), config);
}

#[test]
fn the_output_says_when_mekara_is_not_on_path() {
    let project = Project::new();
    let mut command = project.command(&["install", "--dry-run"]);
    command.env("PATH", "/usr/bin:/bin");
    mekara_snapshot!(project, command);
}

/// What `cargo install` ships must stay small: release builds carry no debug info and no
/// symbol table (`[profile.release]` in Cargo.toml). Line tables alone made it 120 MB.
#[test]
#[cfg_attr(debug_assertions, ignore = "the size limit is for release builds")]
fn the_release_binary_is_at_most_25_mb() {
    let size = std::fs::metadata(env!("CARGO_BIN_EXE_mekara"))
        .expect("the mekara binary")
        .len();
    assert!(
        size <= 25 * 1024 * 1024,
        "the release binary is {size} bytes, over 25 MiB: does [profile.release] still strip it?"
    );
}

/// The file of the command `/name` in an installed project (through the commands link).
fn command_file(project: &Project, name: &str) -> String {
    std::fs::read_to_string(project.root().join(format!(".claude/commands/{name}.md")))
        .unwrap_or_else(|e| panic!("no command file for `/{name}`: {e}"))
}

#[test]
fn every_bundled_script_but_the_demos_gets_a_command_that_does_not_shadow_it() {
    let project = Project::new();
    mekara(&project, &["install"]).expect_code(0);

    // NL only: the script's own instructions, `$ARGUMENTS` left for Claude Code to replace.
    let systematize = command_file(&project, "systematize");
    insta::assert_snapshot!(
        "install_systematize_command_arguments",
        crate::common::lines_with(&systematize, &["$ARGUMENTS"])
    );
    // Compiled: the call to `start`, not the Markdown mekara would have the agent skip.
    let compile = command_file(&project, "compile");
    insta::assert_snapshot!("install_compile_command", project.scrub(&compile));
    assert!(!compile.contains("## Rules"), "{compile}");
    let commands = std::fs::read_dir(project.root().join(".claude/commands"))
        .expect("the commands folder")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .collect::<std::collections::BTreeSet<_>>();
    assert_eq!(
        commands.into_iter().collect::<Vec<_>>(),
        ["compile.md", "flow", "systematize.md"],
        "the demos get no command"
    );
    // A workflow of the library is a command in a folder: `/flow:commit`.
    let commit = command_file(&project, "flow/commit");
    assert!(
        commit.contains("`/flow:commit` is mekara's bundled compiled script `flow/commit`"),
        "{commit}"
    );

    // The files stand for the bundled scripts: still bundled, and `compile` still compiled.
    let listed = mekara(&project, &["scripts"]);
    insta::assert_snapshot!("install_bundled_commands_scripts", listed.stdout);
    let shown = mekara(&project, &["scripts", "show", "compile"]);
    insta::assert_snapshot!(
        "install_bundled_compile_shown",
        project.scrub(&shown.stdout)
    );

    // install.json records them, so uninstall knows they are install's.
    let record = std::fs::read_to_string(project.root().join(".mekara/install.json"))
        .expect("the install record");
    assert!(
        record.contains(".mekara/scripts/nl/compile.md")
            && record.contains(".mekara/scripts/nl/systematize.md"),
        "{record}"
    );
}

#[test]
fn a_second_install_refreshes_an_old_command_file_and_never_touches_your_own() {
    let project = Project::new();
    mekara(&project, &["install"]).expect_code(0);
    let fresh = command_file(&project, "systematize");
    // As left by an older mekara: marked, different text.
    let old = fresh.replace("Look back over this conversation.", "Look back.");
    project.write(".mekara/scripts/nl/systematize.md", &old);
    // The person's own `/compile`: no mark.
    project.write(
        ".mekara/scripts/nl/compile.md",
        "My own compile: $ARGUMENTS\n",
    );
    // Left by an older mekara for a bundled script this one no longer has.
    project.write(
        ".mekara/scripts/nl/retired.md",
        "---\nmekara-bundled: retired\n---\n\nGone.\n",
    );

    let again = mekara(&project, &["install"]);
    again.expect_code(0);
    insta::assert_snapshot!("install_refresh_commands", again.stdout);
    assert_eq!(command_file(&project, "systematize"), fresh);
    assert!(
        !project
            .root()
            .join(".mekara/scripts/nl/retired.md")
            .exists()
    );
    assert_eq!(
        command_file(&project, "compile"),
        "My own compile: $ARGUMENTS\n"
    );
    // Yours is the script now, at the project level.
    let shown = mekara(&project, &["scripts", "show", "compile"]);
    insta::assert_snapshot!("install_own_compile_shown", project.scrub(&shown.stdout));

    mekara(&project, &["uninstall"]).expect_code(0);
    assert!(
        !project
            .root()
            .join(".mekara/scripts/nl/systematize.md")
            .exists()
    );
    assert_eq!(
        std::fs::read_to_string(project.root().join(".mekara/scripts/nl/compile.md"))
            .expect("yours stays"),
        "My own compile: $ARGUMENTS\n"
    );
}

#[test]
fn eject_replaces_a_generated_command_without_force() {
    let project = Project::new();
    mekara(&project, &["install"]).expect_code(0);
    mekara(&project, &["scripts", "eject", "compile"]).expect_code(0);
    let nl = command_file(&project, "compile");
    assert!(nl.contains("## Rules"), "not the script's own text:\n{nl}");
    assert!(
        project
            .root()
            .join(".mekara/scripts/compiled/compile.star")
            .is_file()
    );
    // Ejected, it is the person's: the next install leaves it.
    mekara(&project, &["install"]).expect_code(0);
    assert_eq!(command_file(&project, "compile"), nl);
    // And without the mark, eject refuses as it always did.
    mekara(&project, &["scripts", "eject", "compile"]).expect_code(2);
}
