//! The file store's index of runs: listing reads the journals of the runs still going on
//! only, the index follows a run that is taken up again, a journal changed behind its back,
//! and a removed index, and rebuilds itself.

use crate::common::{Project, under_strace};

const DONE: &str = "def execute(request):\n    auto(\"echo done\")\n";
const ASKS: &str = "def execute(request):\n    llm(\"Say a word.\", expects = [\"word\"])\n";

fn project() -> Project {
    let project = Project::new();
    project.script("done", "Say done.", Some(DONE));
    project.script("asks", "Ask for a word.", Some(ASKS));
    project
}

/// The runs whose journals (`RUN_ID.jsonl`) `mekara ARGS` opened, as strace saw it.
fn journals_opened(project: &Project, args: &[&str]) -> Vec<String> {
    let (run, trace) = under_strace(project, &["-e", "trace=openat"], args);
    run.expect_code(0);
    let mut ids: Vec<String> = trace
        .lines()
        .filter_map(|l| {
            let (_, path) = l.split_once(".mekara/runs/")?;
            let (id, _) = path.split_once(".jsonl\"")?;
            (!id.contains('/')).then(|| id.to_string())
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// `mekara runs` with run ids and times as placeholders.
fn listing(project: &Project) -> String {
    let run = project.run(&["runs"], "");
    run.expect_code(0);
    project.scrub(&run.stdout)
}

fn going_on(project: &Project) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(project.root().join(".mekara/runs/index/open"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().into_string().ok())
                .collect()
        })
        .unwrap_or_default();
    ids.sort();
    ids
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs strace")]
fn listing_reads_only_the_journals_of_runs_going_on() {
    let project = project();
    for _ in 0..6 {
        project.run(&["run", "done"], "").expect_code(0);
    }
    // The first listing builds the index from every journal.
    let first = listing(&project);
    assert_eq!(first.matches("completed").count(), 6, "{first}");
    let before = project.run_ids();
    project.run(&["run", "asks"], "");
    let waiting = project
        .run_ids()
        .into_iter()
        .find(|id| !before.contains(id))
        .expect("the asking run");
    assert_eq!(going_on(&project), std::slice::from_ref(&waiting));
    // Six ended runs come from the index; the one going on from its journal.
    assert_eq!(
        journals_opened(&project, &["runs"]),
        std::slice::from_ref(&waiting)
    );
    let listed = listing(&project);
    assert_eq!(listed.matches("completed").count(), 6, "{listed}");
    assert_eq!(listed.matches("interrupted").count(), 1, "{listed}");

    // The index can go: the next listing is the same, and builds it again.
    std::fs::remove_dir_all(project.root().join(".mekara/runs/index")).expect("remove");
    assert_eq!(listing(&project), listed);
    assert_eq!(going_on(&project), std::slice::from_ref(&waiting));
    assert_eq!(
        journals_opened(&project, &["runs"]),
        std::slice::from_ref(&waiting)
    );

    // Taken up again and ended: its mark goes, and its summary is the index's.
    project
        .run(&["run", "--resume", &waiting], "a-word\n")
        .expect_code(0);
    assert!(going_on(&project).is_empty(), "{:?}", going_on(&project));
    assert!(journals_opened(&project, &["runs"]).is_empty());
    assert_eq!(listing(&project).matches("completed").count(), 7);
}

#[test]
fn a_journal_changed_since_it_was_indexed_is_read_again() {
    let project = project();
    project.run(&["run", "done"], "").expect_code(0);
    listing(&project);
    let before = project.run_ids();
    project.run(&["run", "done"], "").expect_code(0);
    let id = project
        .run_ids()
        .into_iter()
        .find(|id| !before.contains(id))
        .expect("a run");
    assert!(listing(&project).contains("completed"));
    // Cut after its first step: the run now reads as interrupted.
    let path = project.root().join(format!(".mekara/runs/{id}.jsonl"));
    let journal = std::fs::read_to_string(&path).expect("journal");
    let kept: Vec<&str> = journal.lines().take(2).collect();
    std::fs::write(&path, format!("{}\n", kept.join("\n"))).expect("write");
    let listed = listing(&project);
    assert_eq!(listed.matches("completed").count(), 1, "{listed}");
    assert_eq!(listed.matches("interrupted").count(), 1, "{listed}");
}

/// `mekara runs` shows the newest runs and counts the rest: with more runs than a screenful it
/// looks at the journals it shows and no other, and `--all` and `--limit` show the others.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs strace")]
fn runs_shows_the_newest_and_reads_only_their_journals() {
    let project = project();
    for _ in 0..25 {
        project.run(&["run", "done"], "").expect_code(0);
    }
    let ids = project.run_ids();
    assert_eq!(ids.len(), 25);
    // The first listing builds the index.
    let all = listing(&project);
    assert!(all.contains("the 20 newest of 25 runs in"), "{all}");
    let (run, trace) = under_strace(&project, &["-e", "trace=%file"], &["runs"]);
    run.expect_code(0);
    let mut touched: Vec<&str> = ids
        .iter()
        .filter(|id| trace.contains(&format!("{id}.jsonl")))
        .map(String::as_str)
        .collect();
    touched.dedup();
    // The 20 newest, and the runs made in the same second as the oldest of them: an id
    // says the second, and only the start time says which of that second came first.
    let second = &ids[5][..15];
    let from = ids
        .iter()
        .position(|id| id.starts_with(second))
        .expect("ids[5]");
    assert_eq!(
        touched,
        ids[from..].iter().map(String::as_str).collect::<Vec<_>>(),
        "{trace}"
    );
    let rows = |stdout: &str| {
        stdout
            .lines()
            .filter(|l| ids.iter().any(|id| l.starts_with(id.as_str())))
            .count()
    };
    assert_eq!(rows(&run.stdout), 20, "{}", run.stdout);
    assert!(
        run.stdout.contains("`--all` shows every one"),
        "{}",
        run.stdout
    );

    let every = mekara_snapshot!(project, project.run(&["runs", "--all"], ""));
    assert_eq!(rows(&every.stdout), 25, "{}", every.stdout);
    let three = project.run(&["runs", "--limit", "3"], "");
    three.expect_code(0);
    let shown: Vec<&str> = three
        .stdout
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|w| ids.iter().any(|id| id == w))
        .collect();
    // The three started last; they were made one after another.
    let mut by_start = ids.clone();
    by_start.sort_by_key(|id| {
        let journal = project.journal(id);
        let header: serde_json::Value =
            serde_json::from_str(journal.lines().next().expect("a header"))
                .expect("the header is JSON");
        header["at"].as_u64().expect("the header says when")
    });
    let mut newest: Vec<&str> = by_start[22..].iter().map(String::as_str).collect();
    newest.sort_unstable();
    let mut shown = shown;
    shown.sort_unstable();
    assert_eq!(shown, newest);
    let chosen = project.run(&["runs", "--state", "completed", "--limit", "2"], "");
    chosen.expect_code(0);
    assert!(
        chosen
            .stdout
            .contains("the 2 newest of the 25 that match (of 25)"),
        "{}",
        chosen.stdout
    );
    project
        .run(&["runs", "--all", "--limit", "3"], "")
        .expect_code(2);
}
