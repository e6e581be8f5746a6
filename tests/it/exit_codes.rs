//! One mistake, one exit code: the same mistake made with `mekara run` and with `mekara check`
//! (or `scripts show`) ends with the same code, from the one table in `README.md`: 0 success,
//! 1 the workflow or its input failed, 2 usage.

use crate::common::Project;

const NL: &str = "---\ndescription: Broken\n---\n1. Do it.\n";

/// Regression: `mekara run nope` exited 2 and `mekara check nope` exited 1 (with the error on
/// stdout and no hint).
#[test]
fn an_unknown_script_name_is_a_usage_error_everywhere() {
    let project = Project::new();
    for args in [
        &["run", "nope"][..],
        &["check", "nope"],
        &["check", "test:random", "nope"],
        &["scripts", "show", "nope"],
    ] {
        let run = project.run(args, "");
        run.expect_code(2);
        assert_eq!(run.stdout, "", "{args:?}");
        assert_eq!(
            run.stderr,
            "error: script `nope` not found; `mekara scripts` lists the scripts there are\n",
            "{args:?}"
        );
    }
}

/// A name that is no script name at all (`..`) is the same mistake.
#[test]
fn an_invalid_script_name_is_a_usage_error_everywhere() {
    let project = Project::new();
    insta::assert_snapshot!(project.session(&[&["run", "../x"], &["check", "../x"]]));
}

/// A compiled script that does not parse is a failed workflow (1): `check` reports it, and
/// `run` falls back to the NL instructions and ends failed once they are done by hand.
#[test]
fn a_script_with_a_syntax_error_fails_everywhere() {
    let project = Project::new();
    project.script("broken", NL, Some("def execute(request):\n    llm(\n"));
    mekara_snapshot!(
        "syntax_error_check",
        project,
        project.command(&["check", "broken"])
    );
    mekara_snapshot!(
        "syntax_error_run",
        project,
        project.run(&["run", "broken"], "\n")
    );
}

/// An unknown run id is a usage error for every command that takes one.
#[test]
fn an_unknown_run_is_a_usage_error_everywhere() {
    let project = Project::new();
    insta::assert_snapshot!(
        project.session(&[&["run", "--resume", "nope"], &["runs", "show", "nope"]])
    );
}
