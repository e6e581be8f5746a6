//! Two workflows of the library (`flow/fix-ci`, `flow/release`) run unattended by the real
//! Claude Code (`mekara run --agent claude`) against the stand-in model: the model's scripted
//! turns use Claude Code's own tools (Bash to fix a file, StructuredOutput for a step's
//! outputs), and the person's questions wait for `mekara answer`.

use serde_json::json;

use super::standin::{StandIn, tool_use};
use super::unattended;
use crate::common::Project;
use crate::library::{
    JS_CLI, PY_STATS, commit_all, completed, git, js_project, last_run, python_check,
    python_project, read, state, steps,
};

/// Claude Code trusts the project and may run Bash there, as a person sets it up for
/// unattended runs.
fn trusted(project: &Project) {
    let root = project.root().canonicalize().expect("canonical root");
    crate::common::write_file(
        &project.home().join(".claude.json"),
        &json!({"projects": {root.display().to_string(): {"hasTrustDialogAccepted": true}}})
            .to_string(),
    );
    project.write(
        ".claude/settings.json",
        &json!({"permissions": {"allow": ["Bash", "Edit", "Write", "Read"]}}).to_string(),
    );
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn fix_ci_through_claude_code_fixes_the_failing_test_and_the_checks_pass_again() {
    let project = python_project();
    trusted(&project);
    project.write(
        "stats.py",
        &PY_STATS.replace("max(xs) - min(xs)", "max(xs) + min(xs)"),
    );
    commit_all(&project, "Break spread");
    let standin = StandIn::start(vec![
        vec![tool_use(
            "toolu_fix",
            "Bash",
            json!({"command": "sed -i 's/max(xs) + min(xs)/max(xs) - min(xs)  /' stats.py", "description": "Fix spread"}),
        )],
        vec![tool_use(
            "toolu_out",
            "StructuredOutput",
            json!({"fix": "spread added the minimum; it subtracts it now"}),
        )],
    ]);
    let run = unattended(
        &project,
        &standin,
        &["run", "--agent", "claude", "--json", "flow/fix-ci"],
    );
    completed(&run);
    assert!(read(&project, "stats.py").contains("max(xs) - min(xs)"));
    // The model was shown the failing check's output.
    let shown = standin.main_requests()[0].message_text();
    assert!(
        shown.contains(&format!("`{}` fails", python_check())) && shown.contains("FAILED"),
        "{shown}"
    );
    let last = steps(&project)
        .into_iter()
        .rev()
        .find(|s| s["result"]["exit_code"].is_i64())
        .expect("a shell step");
    assert_eq!(last["result"]["exit_code"], 0, "the checks pass at the end");
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn release_through_claude_code_waits_for_the_person_and_tags_the_drafted_entry() {
    let project = js_project();
    trusted(&project);
    commit_all(&project, "Let Claude Code run here");
    git(&project, &["tag", "v1.2.3"]);
    project.write("cli.js", &format!("{JS_CLI}// explained\n"));
    commit_all(&project, "Explain the greeting");
    let entry = "## v1.2.4\n\n### Changed\n\n- The greeting is explained.";
    let standin = StandIn::start(vec![vec![tool_use(
        "toolu_out",
        "StructuredOutput",
        json!({"entry": entry}),
    )]]);
    let claude = |args: &[&str]| unattended(&project, &standin, args);
    let first = claude(&["run", "--agent", "claude", "--json", "flow/release"]);
    assert_eq!(state(&first), "waiting", "{}", first.stderr);
    assert!(
        standin.main_requests().is_empty(),
        "the bump is not the model's"
    );
    let id = last_run(&project);
    project.run(&["answer", &id, "patch"], "").expect_code(0);
    let no_changelog = claude(&["run", "--resume", &id, "--agent", "claude", "--json"]);
    assert_eq!(state(&no_changelog), "waiting", "{}", no_changelog.stderr);
    project
        .run(&["answer", &id, "start CHANGELOG.md"], "")
        .expect_code(0);
    let second = claude(&["run", "--resume", &id, "--agent", "claude", "--json"]);
    assert_eq!(state(&second), "waiting", "{}", second.stderr);
    let asked = standin.main_requests().len();
    assert!(asked >= 1, "the model drafted the entry");
    project.run(&["answer", &id, "yes"], "").expect_code(0);
    completed(&claude(&[
        "run", "--resume", &id, "--agent", "claude", "--json",
    ]));
    assert_eq!(
        standin.main_requests().len(),
        asked,
        "no model call after the draft"
    );
    assert_eq!(git(&project, &["tag", "--points-at", "HEAD"]), "v1.2.4");
    assert!(read(&project, "package.json").contains("\"version\": \"1.2.4\""));
    assert!(read(&project, "CHANGELOG.md").starts_with(&format!("# Changelog\n\n{entry}\n")));
}

#[cfg_attr(not(feature = "clients"), ignore = "needs Claude Code")]
#[test]
fn a_library_workflow_is_a_typeable_command_in_its_folder() {
    let claude = super::claude();
    let (project, _) = super::installed_project();
    let shown = super::first_shown(&claude, &project, "/flow:release the parser fix");
    assert!(
        !shown.contains("no command with that name"),
        "Claude Code did not find `/flow:release`:\n{shown}"
    );
    assert!(
        shown.contains("<command-name>/flow:release</command-name>")
            && shown.contains("`/flow:release` is mekara's bundled compiled script `flow/release`"),
        "the command file was not expanded:\n{shown}"
    );
    assert!(
        shown.contains(r#"{"name":"flow:release","arguments":"the parser fix"}"#),
        "the hook's instruction is missing:\n{shown}"
    );
}
