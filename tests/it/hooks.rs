//! `mekara hook ...` run as Claude Code runs it: the real binary, the hook's JSON on stdin.

use crate::common::{Project, Run, run_with_stdin};
use serde_json::{Value as Json, json};

/// A project with a compiled script `deploy` and an NL-only script `notes`.
fn project() -> Project {
    let project = Project::new();
    project.script(
        "deploy",
        "Deploy to $ARGUMENTS.\n",
        Some("def execute(request):\n    auto(\"true\")\n"),
    );
    project.script("notes", "Write notes.\n", None);
    project
}

fn hook(project: &Project, name: &str, stdin: &str) -> Run {
    let run = run_with_stdin(project.command(&["hook", name]), stdin);
    run.expect_code(0);
    run
}

fn prompt(project: &Project, prompt: &str) -> Run {
    let input = json!({
        "session_id": "s", "transcript_path": "/tmp/t.jsonl", "cwd": project.root(),
        "prompt_id": "p", "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit", "prompt": prompt,
    });
    hook(project, "reroute-user-commands", &input.to_string())
}

fn skill(project: &Project, skill: &str, args: Option<&str>) -> Run {
    let mut tool_input = json!({ "skill": skill });
    if let Some(args) = args {
        tool_input["args"] = json!(args);
    }
    let input = json!({
        "session_id": "s", "cwd": project.root(), "hook_event_name": "PreToolUse",
        "tool_name": "Skill", "tool_input": tool_input, "tool_use_id": "toolu_1",
    });
    hook(project, "reroute-agent-commands", &input.to_string())
}

/// The `mcp__mekara__start` arguments a hook's text gives, parsed back.
fn start_arguments(text: &str) -> Json {
    let start = text
        .find("{\"name\"")
        .expect("the arguments are in the text");
    let mut stream = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Json>();
    stream.next().expect("a JSON value").expect("valid JSON")
}

#[test]
fn a_typed_compiled_command_is_sent_to_start() {
    let project = project();
    let run = prompt(&project, "/deploy staging");
    let answer: Json = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    insta::assert_snapshot!(serde_json::to_string_pretty(&answer).expect("json"));
    let context = answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("context");
    assert_eq!(
        start_arguments(context),
        json!({"name": "deploy", "arguments": "staging"})
    );
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

#[test]
fn arguments_with_quotes_and_several_lines_survive_exactly() {
    let project = project();
    let args = "the \"prod\" cluster\nline two with `ticks`, \\backslash and {braces}\n  indented";
    let run = prompt(&project, &format!("/deploy {args}\n"));
    let answer: Json = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    let context = answer["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .expect("context");
    assert_eq!(
        start_arguments(context),
        json!({"name": "deploy", "arguments": args})
    );
}

/// Regression: `//deploy staging` was passed on with the name `/deploy`, which is no script,
/// so the command ran by hand; a doubled slash must behave exactly as one.
#[test]
fn a_doubled_slash_is_rerouted_as_one() {
    let project = project();
    for args in ["staging", "the \"prod\" cluster\nline two\n  indented"] {
        let single = prompt(&project, &format!("/deploy {args}\n"));
        let double = prompt(&project, &format!("//deploy {args}\n"));
        assert_eq!(double.stdout, single.stdout, "for {args:?}");
        let answer: Json = serde_json::from_str(&double.stdout).expect("JSON on stdout");
        let context = answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .expect("context");
        assert_eq!(
            start_arguments(context),
            json!({"name": "deploy", "arguments": args})
        );
    }
    // Only an NL script, or no script at all, still gets nothing.
    for text in ["//notes today", "//", "//usr/bin/env true"] {
        assert_eq!(prompt(&project, text).stdout, "", "for {text:?}");
    }
}

#[test]
fn nested_names_bundled_scripts_and_both_separators_are_recognised() {
    let project = project();
    for (typed, name) in [
        ("/test:random 7", "test:random"),
        ("/test/random", "test/random"),
    ] {
        let run = prompt(&project, typed);
        let answer: Json = serde_json::from_str(&run.stdout).expect("JSON on stdout");
        let context = answer["hookSpecificOutput"]["additionalContext"]
            .as_str()
            .expect("context");
        assert_eq!(start_arguments(context)["name"], name, "{typed}");
    }
}

#[test]
fn nothing_is_said_for_anything_but_a_compiled_script() {
    let project = project();
    for text in [
        "/notes today",      // an NL-only script: Claude Code's own expansion is right
        "/help",             // not a script
        "/usr/bin/env true", // a path, not a command
        "deploy staging",    // no slash
        "please /deploy",    // not at the start
        "/",
        "",
        "/../../etc/passwd",
    ] {
        let run = prompt(&project, text);
        assert_eq!(run.stdout, "", "for {text:?}");
        assert_eq!(run.stderr, "", "for {text:?}");
    }
}

#[test]
fn a_skill_call_for_a_compiled_script_is_denied_with_the_call_to_make() {
    let project = project();
    let run = skill(&project, "deploy", Some("to \"prod\"\nnow"));
    let answer: Json = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    insta::assert_snapshot!(serde_json::to_string_pretty(&answer).expect("json"));
    let reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .expect("reason");
    assert_eq!(
        start_arguments(reason),
        json!({"name": "deploy", "arguments": "to \"prod\"\nnow"})
    );
    // Without `args`, the arguments are empty.
    let run = skill(&project, "deploy", None);
    let answer: Json = serde_json::from_str(&run.stdout).expect("JSON on stdout");
    let reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .expect("reason");
    assert_eq!(start_arguments(reason)["arguments"], "");
}

/// Claude Code before 2.0.73 offered commands through `SlashCommand`, whose input is the
/// command as typed.
fn slash_command(project: &Project, command: &str) -> Run {
    let input = json!({
        "session_id": "s", "cwd": project.root(), "hook_event_name": "PreToolUse",
        "tool_name": "SlashCommand", "tool_input": {"command": command}, "tool_use_id": "toolu_1",
    });
    hook(project, "reroute-agent-commands", &input.to_string())
}

#[test]
fn a_slash_command_call_for_a_compiled_script_is_denied_like_a_skill_call() {
    let project = project();
    for (command, arguments) in [
        ("/deploy to \"prod\"\nnow", "to \"prod\"\nnow"),
        ("/deploy", ""),
        ("  //deploy   staging ", "staging"),
    ] {
        let run = slash_command(&project, command);
        let answer: Json = serde_json::from_str(&run.stdout)
            .unwrap_or_else(|e| panic!("{command:?}: {e}: {:?}", run.stdout));
        assert_eq!(answer["hookSpecificOutput"]["permissionDecision"], "deny");
        let reason = answer["hookSpecificOutput"]["permissionDecisionReason"]
            .as_str()
            .expect("reason");
        assert!(
            reason.starts_with("`deploy` is a compiled mekara script"),
            "{reason}"
        );
        assert_eq!(
            start_arguments(reason),
            json!({"name": "deploy", "arguments": arguments}),
            "{command:?}"
        );
    }
    for other in ["/notes x", "/help", "deploy now", "", "/"] {
        assert_eq!(slash_command(&project, other).stdout, "", "{other:?}");
    }
    let malformed = json!({"tool_name": "SlashCommand", "tool_input": {"cmd": "/deploy"}, "cwd": project.root()});
    let run = hook(&project, "reroute-agent-commands", &malformed.to_string());
    assert_eq!(run.stdout, "");
}

#[test]
fn a_skill_call_for_anything_else_is_left_alone() {
    let project = project();
    assert_eq!(skill(&project, "notes", Some("x")).stdout, "");
    assert_eq!(skill(&project, "pdf", None).stdout, "");
    let other_tool =
        json!({"tool_name": "Bash", "tool_input": {"command": "ls"}, "cwd": project.root()});
    assert_eq!(
        hook(&project, "reroute-agent-commands", &other_tool.to_string()).stdout,
        ""
    );
}

#[test]
fn malformed_input_exits_0_prints_nothing_and_logs_why() {
    let project = project();
    let cases = [
        ("reroute-user-commands", "", "the hook's input is empty"),
        (
            "reroute-user-commands",
            "   \n",
            "the hook's input is empty",
        ),
        (
            "reroute-user-commands",
            "{not json",
            "the hook's input is not JSON",
        ),
        ("reroute-user-commands", "[1, 2]", "has no string `prompt`"),
        (
            "reroute-user-commands",
            r#"{"prompt": 7}"#,
            "has no string `prompt`",
        ),
        (
            "reroute-agent-commands",
            r#"{"tool_name": "Skill"}"#,
            "has no string `tool_input`",
        ),
        (
            "reroute-agent-commands",
            r#"{"tool_name": "Skill", "tool_input": {"args": "x"}}"#,
            "has no string `skill`",
        ),
        ("reroute-agent-commands", "\u{0}\u{1}binary", "is not JSON"),
    ];
    for (name, stdin, logged) in cases {
        let run = hook(&project, name, stdin);
        assert_eq!(run.stdout, "", "{name} with {stdin:?}");
        assert!(
            run.stderr.contains(logged),
            "{name} with {stdin:?}: {}",
            run.stderr
        );
    }
}

#[test]
fn the_project_is_the_one_of_the_hooks_cwd() {
    // Claude Code gives the session's folder as `cwd`; the hook may be started elsewhere.
    let project = project();
    let input = json!({"prompt": "/deploy x", "cwd": project.root()});
    let elsewhere = project.home();
    let run = run_with_stdin(
        project.command_in(&elsewhere, &["hook", "reroute-user-commands"]),
        &input.to_string(),
    );
    run.expect_code(0);
    assert!(run.stdout.contains("mcp__mekara__start"), "{}", run.stdout);
}
