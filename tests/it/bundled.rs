//! `mekara run` driven through piped stdin, end to end, on every bundled script.

use crate::common::Project;

#[test]
fn random_plays_to_the_end() {
    let project = Project::new();
    let run = project.run(&["run", "test/random"], "50\n\n");
    run.expect_code(0);
    let out = &run.stdout;
    assert!(
        out.contains("▶ test:random[0] $ shuf -i 1-100 -n 1"),
        "{out}"
    );
    assert!(
        out.contains("guess (the user's guess, as a whole number): 50"),
        "{out}"
    );
    let secret: u32 = out
        .lines()
        .find_map(|l| l.strip_prefix("  │ ")?.trim().parse().ok())
        .expect("the picked number is shown");
    assert!((1..=100).contains(&secret));
    let verdict = if secret == 50 {
        "Right! The number was 50."
    } else {
        &format!("Wrong: the number was {secret}.")
    };
    assert!(out.contains(&format!("  │ {verdict}")), "{out}");
    assert!(
        out.contains(&format!("Step 4: the user was told: {verdict} React")),
        "{out}"
    );
    assert!(out.contains("completed: 4 steps in "), "{out}");
}

#[test]
fn double_or_nothing_writes_its_file_in_the_working_dir() {
    let project = Project::new();
    let work = project.root().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    let run = project.run(
        &[
            "run",
            "--working-dir",
            "work",
            "test:double-or-nothing",
            "21",
        ],
        "",
    );
    run.expect_code(0);
    let written = std::fs::read_to_string(work.join("resulting-number.txt")).expect("result file");
    assert!(written == "42\n" || written == "0\n", "{written:?}");
    assert!(
        run.stdout.contains(&format!("  │ {}", written.trim())),
        "{}",
        run.stdout
    );
}

#[test]
fn imagine_object_is_handed_over_whole() {
    let project = Project::new();
    mekara_snapshot!(
        project,
        project.run(&["run", "test/imagine-object", " made of glass"], "\n")
    );
}

#[test]
fn nested_runs_all_three_and_comes_back() {
    let project = Project::new();
    // guess, react, imagine-object done, final step done
    let run = project.run(&["run", "test:nested"], "7\n\n\n\n");
    run.expect_code(0);
    let out = &run.stdout;
    let order = [
        "→ test:nested[0] > test:random",
        "── llm step test:nested[0] > test:random[1] ──",
        "← test:nested[0] > test:random ended",
        "→ test:nested[1] > test:double-or-nothing",
        "▶ test:nested[1] > test:double-or-nothing[1] $ printf",
        "← test:nested[1] > test:double-or-nothing ended",
        "── NL script test:nested[2] > test:imagine-object[0]: do all of this by hand ──",
        "── llm step test:nested[3] ──",
        "Step 4: tell the user they owe you exactly 1 imagined object",
        "completed",
    ];
    let mut at = 0;
    for needle in order {
        let found = out[at..]
            .find(needle)
            .unwrap_or_else(|| panic!("`{needle}` missing after byte {at}:\n{out}"));
        at += found + needle.len();
    }
    let written = std::fs::read_to_string("/tmp/resulting-number.txt").expect("written in /tmp");
    assert!(written == "42\n" || written == "0\n", "{written:?}");
}

/// The bundled `test:*` scripts are demos for mekara's own tests: a user's listings leave
/// them out unless asked (`--all`), and they still run by name.
#[test]
fn demo_scripts_are_listed_only_when_asked_for() {
    let project = Project::new();
    let listed = project.run(&["scripts"], "");
    listed.expect_code(0);
    assert!(!listed.stdout.contains("test:"), "{}", listed.stdout);
    assert!(listed.stdout.contains("compile"), "{}", listed.stdout);
    let all = project.run(&["scripts", "--all"], "");
    all.expect_code(0);
    insta::assert_snapshot!(
        "demo_scripts_listed_with_all",
        crate::common::lines_with(&all.stdout, &["test:"])
    );

    let checked = project.run(&["check"], "");
    checked.expect_code(0);
    assert!(!checked.stdout.contains("test:"), "{}", checked.stdout);
    let all = project.run(&["check", "--all"], "");
    all.expect_code(0);
    insta::assert_snapshot!(
        "demo_scripts_checked_with_all",
        crate::common::lines_with(&all.stdout, &["test:"])
    );
    // Named, a demo is checked and run as any script.
    mekara_snapshot!(
        "a_demo_script_checked_by_name",
        project,
        project.command(&["check", "test:nested"])
    )
    .expect_code(0);
    project
        .run(&["run", "test/imagine-object", "a teapot"], "\n")
        .expect_code(0);
}

/// A project's or user's own `test/...` script is theirs, not a demo: always listed.
#[test]
fn own_scripts_named_test_are_listed() {
    let project = Project::new();
    project.script("test/mine", "Mine.\n", None);
    crate::common::write_file(
        &project.home().join(".mekara/scripts/nl/test/random.md"),
        "My own random.\n",
    );
    let listed = project.run(&["scripts"], "");
    listed.expect_code(0);
    insta::assert_snapshot!(
        "own_scripts_named_test",
        project.scrub(&crate::common::lines_with(&listed.stdout, &["test:"]))
    );
}
