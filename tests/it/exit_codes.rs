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
        project.run(&["run", "broken"], "done\n")
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

/// Regression: options written after the script name were taken silently: `--retry` and
/// `--from` without `--resume` were dropped (the script ran afresh), and an option after an
/// argument became part of the script's request. Both are usage errors saying where the
/// option goes; after `--` it is the script's.
#[test]
fn options_after_the_script_name_are_refused_saying_where_they_go() {
    let project = Project::new();
    project.script("x", NL, None);
    insta::assert_snapshot!(project.session(&[
        &["run", "x", "--retry"],
        &["run", "x", "--from", "x[0]"],
        &["run", "x", "an", "argument", "--timeout", "5"],
        &["run", "x", "an", "argument", "-C", "elsewhere"],
        &["run", "x", "an", "argument", "--timeout=5"],
    ]));
    // After `--`, it is the script's argument.
    let passed = project.run(&["run", "x", "an", "--", "--timeout", "5"], "\n");
    passed.expect_code(0);
    assert!(!passed.stderr.contains("comes after"), "{}", passed.stderr);
}

/// Regression: a path that names nothing to serve is a mistake on the command line, like an
/// unknown script name, but exited 1.
#[test]
fn a_serve_path_that_names_nothing_is_a_usage_error() {
    let project = Project::new();
    mekara_snapshot!(project, project.run(&["serve", "nothere.star"], ""));
}

/// Regression: errors repeated a 120 KB input in full. Every span an error echoes in
/// backticks is clipped, whichever command and error made it.
#[test]
fn errors_clip_what_they_echo() {
    let project = Project::new();
    let big = "a".repeat(120_000);
    let mut shown = String::new();
    for args in [
        &["run", big.as_str()][..],
        &["runs", "show", &big],
        &["answer", &big, "x"],
        &["run", "--resume", &big],
        &["tools", "call", &big, "t"],
    ] {
        let run = project.run(args, "");
        run.expect_code(2);
        assert!(
            run.stderr.len() < 1_000,
            "{} bytes: {}",
            run.stderr.len(),
            &run.stderr[..300]
        );
        shown.push_str(&run.stderr.replace(&"a".repeat(200), "a×200"));
    }
    insta::assert_snapshot!(shown);
}
