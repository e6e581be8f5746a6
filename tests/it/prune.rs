//! `mekara runs prune`: which runs go (`--keep`, `--older-than`, `--state`), what a dry run
//! lists, that a run's files all go with it, that interrupted runs go only when named, and
//! that a run another process drives is never removed.

use crate::common::{Project, Run};

const DONE: &str = "def execute(request):\n    auto(\"echo done\")\n";
const FAILS: &str = "def execute(request):\n    auto(\"exit 3\")\n";
const ASKS: &str = "def execute(request):\n    llm(\"Say a word.\", expects = [\"word\"])\n";

fn project() -> Project {
    let project = Project::new();
    project.script("done", "Say done.", Some(DONE));
    project.script("fails", "Fail.", Some(FAILS));
    project.script("asks", "Ask for a word.", Some(ASKS));
    project
}

/// Runs `name` and returns its id: `done` completes, `fails` fails and is finished by hand
/// (`done` ends its fallback), `asks` gets no answer and is interrupted.
fn run(project: &Project, name: &str) -> String {
    let before = project.run_ids();
    let finish_by_hand = if name == "fails" { "done\n" } else { "" };
    project.run(&["run", name], finish_by_hand);
    let after = project.run_ids();
    after
        .into_iter()
        .find(|id| !before.contains(id))
        .expect("a new run")
}

fn runs_folder(project: &Project) -> std::path::PathBuf {
    project.root().join(".mekara/runs")
}

/// The files of run `id` in the runs folder.
fn files_of(project: &Project, id: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(runs_folder(project))
        .expect("runs folder")
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(id))
        .collect();
    names.sort();
    names
}

fn prune(project: &Project, args: &[&str]) -> Run {
    let mut all = vec!["runs", "prune"];
    all.extend_from_slice(args);
    project.run(&all, "")
}

#[test]
fn prune_without_a_rule_is_refused_and_removes_nothing() {
    let project = project();
    let id = run(&project, "done");
    let refused = prune(&project, &[]);
    refused.expect_code(2);
    for option in ["--older-than", "--keep", "--state"] {
        assert!(refused.stderr.contains(option), "{}", refused.stderr);
    }
    let bad = prune(&project, &["--older-than", "3 fortnights"]);
    bad.expect_code(2);
    assert!(
        bad.stderr.contains("write a duration such as `30d`"),
        "{}",
        bad.stderr
    );
    let bad = prune(&project, &["--state", "done"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("interrupted"), "{}", bad.stderr);
    assert_eq!(project.run_ids(), vec![id]);
}

#[test]
fn keep_removes_the_older_ended_runs_and_leaves_interrupted_ones() {
    let project = project();
    let oldest = run(&project, "done");
    let failed = run(&project, "fails");
    let interrupted = run(&project, "asks");
    let newest = run(&project, "done");
    assert_eq!(
        files_of(&project, &oldest).len(),
        1,
        "{:?}",
        files_of(&project, &oldest)
    );
    assert!(project.run(&["runs"], "").stdout.contains("interrupted"));

    let dry = prune(&project, &["--keep", "1", "--dry-run"]);
    dry.expect_code(0);
    assert!(
        dry.stdout.starts_with("would remove 2 runs ("),
        "{}",
        dry.stdout
    );
    assert!(dry.stdout.contains(&oldest) && dry.stdout.contains(&failed));
    assert!(!dry.stdout.contains(&interrupted) && !dry.stdout.contains(&newest));
    assert_eq!(project.run_ids().len(), 4, "a dry run removes nothing");

    let pruned = prune(&project, &["--keep", "1"]);
    pruned.expect_code(0);
    assert!(
        pruned.stdout.contains("removed 2 runs, ") && pruned.stdout.contains("; 2 runs left"),
        "{}",
        pruned.stdout
    );
    let mut left = project.run_ids();
    left.sort();
    let mut expected = vec![interrupted.clone(), newest.clone()];
    expected.sort();
    assert_eq!(left, expected);
    assert!(files_of(&project, &oldest).is_empty());

    // Named, interrupted runs go too, with every file of theirs.
    let pruned = prune(&project, &["--state", "interrupted"]);
    pruned.expect_code(0);
    assert_eq!(project.run_ids(), vec![newest]);
    assert!(files_of(&project, &interrupted).is_empty());
    mekara_snapshot!(project, project.run(&["runs"], ""));
}

#[test]
fn state_selects_by_state_and_keep_counts_within_it() {
    let project = project();
    let failed = [run(&project, "fails"), run(&project, "fails")];
    let done = run(&project, "done");
    let pruned = prune(&project, &["--state", "failed", "--keep", "1"]);
    pruned.expect_code(0);
    let mut left = project.run_ids();
    left.sort();
    let mut expected = vec![failed[1].clone(), done];
    expected.sort();
    assert_eq!(left, expected, "{}", pruned.stdout);
}

/// The journal of run `id` with every event's time moved `days` back.
fn age(project: &Project, id: &str, days: u64) {
    let path = runs_folder(project).join(format!("{id}.jsonl"));
    let text = std::fs::read_to_string(&path).expect("journal");
    let shift = days * 86_400_000;
    let mut aged = String::new();
    for line in text.lines() {
        let mut event: serde_json::Value = serde_json::from_str(line).expect("event");
        let at = event["at"].as_u64().expect("at");
        event["at"] = (at - shift).into();
        aged.push_str(&format!("{event}\n"));
    }
    std::fs::write(&path, aged).expect("write");
}

#[test]
fn older_than_goes_by_the_last_activity() {
    let project = project();
    let old = run(&project, "done");
    let recent = run(&project, "done");
    age(&project, &old, 40);
    age(&project, &recent, 2);
    let none = prune(&project, &["--older-than", "60d"]);
    none.expect_code(0);
    assert!(none.stdout.contains("no run to remove"), "{}", none.stdout);
    prune(&project, &["--older-than", "30days"]).expect_code(0);
    assert_eq!(project.run_ids(), vec![recent.clone()]);
    prune(&project, &["--older-than", "1d"]).expect_code(0);
    assert!(project.run_ids().is_empty());
}

#[test]
fn a_run_another_process_drives_is_never_removed() {
    let project = project();
    let mut waiting = project.spawn(&["run", "asks"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let id = loop {
        let listed = project.run(&["runs"], "").stdout;
        if let Some(line) = listed.lines().find(|l| l.contains("active")) {
            break line.split_whitespace().next().expect("id").to_string();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never active:\n{listed}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    for args in [
        &["--state", "interrupted"][..],
        &["--keep", "0"],
        &["--older-than", "0s", "--state", "interrupted"],
    ] {
        let pruned = prune(&project, args);
        pruned.expect_code(0);
        assert!(
            pruned.stdout.contains("no run to remove"),
            "{}",
            pruned.stdout
        );
    }
    assert_eq!(project.run_ids(), vec![id]);
    waiting.kill().expect("kill");
    waiting.wait().expect("reap");
}
