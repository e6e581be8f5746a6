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
    let run = project.run(&["run", "test/imagine-object", " made of glass"], "\n");
    run.expect_code(0);
    assert!(
        run.stdout
            .contains("── NL script test:imagine-object[0]: do all of this by hand ──"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout
            .contains("Imagine a single everyday object made of glass."),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("finished: 0 steps in "),
        "{}",
        run.stdout
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
