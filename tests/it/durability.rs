//! Durability: a run survives the death of mekara. Killed with SIGKILL in the middle of a
//! multi-step script and resumed, every auto step that had finished ran exactly once.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{Project, lines, wait_for};

const SCRIPT: &str = r#"
def execute(request):
    auto("echo 1 >> a.count")
    auto("echo 1 >> b.count")
    auto("echo 1 >> c.count")
    auto("echo $$ > step.pid; sleep 300 & echo $! > background.pid; touch started; while [ ! -e go ]; do sleep 0.02; done; echo 1 >> d.count")
    answer = llm("Say a word", expects = ["word"])
    auto("echo " + answer.outputs["word"] + " >> e.count")
"#;

/// Each step that appends to `NAME.count` in `root` ran exactly once; `context` is shown
/// when one did not.
pub(crate) fn each_ran_once(root: &Path, counters: &[&str], context: &str) {
    for counter in counters {
        assert_eq!(
            lines(&root.join(format!("{counter}.count"))),
            1,
            "{counter}.count\n{context}"
        );
    }
}

/// Sends SIGINT to `child`, as Ctrl-C in its terminal would.
pub(crate) fn press_ctrl_c(child: &std::process::Child) {
    let sent = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
}

/// Waits up to 10 s for `child` to end after Ctrl-C was pressed, and returns how it ended;
/// fails with `hung` (and the time) if it does not. With `press_again`, Ctrl-C is pressed a
/// second time if mekara still runs a second after the first.
pub(crate) fn ended_after_ctrl_c(
    child: &mut std::process::Child,
    press_again: bool,
    hung: &str,
) -> std::process::ExitStatus {
    let pressed = Instant::now();
    let mut pressed_again = !press_again;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        assert!(
            pressed.elapsed() < Duration::from_secs(10),
            "{hung} for {:?} after Ctrl-C",
            pressed.elapsed()
        );
        if !pressed_again && pressed.elapsed() > Duration::from_secs(1) {
            pressed_again = true;
            press_ctrl_c(child);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub(crate) fn pid_in(file: &Path) -> String {
    std::fs::read_to_string(file)
        .expect("pid file")
        .trim()
        .to_string()
}

/// Whether process `pid` is alive (a zombie waiting to be reaped is not).
pub(crate) fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let state = stat[stat.rfind(')')? + 1..]
                .split_whitespace()
                .next()?
                .to_string();
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

pub(crate) fn wait_until_dead(pid: &str) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// A project whose `steps` run was SIGKILLed in its fourth step, and the pids of that step
/// and of what it started in the background, both still running: nothing is left to kill them.
fn killed_mid_step() -> (Project, String, String) {
    let project = Project::new();
    project.script("steps", "Run the steps.", Some(SCRIPT));
    let root = project.root();
    let mut child = project.spawn(&["run", "steps"]);
    wait_for(&root.join("started"));
    child.kill().expect("SIGKILL mekara");
    child.wait().expect("reap");
    let (step, background) = (
        pid_in(&root.join("step.pid")),
        pid_in(&root.join("background.pid")),
    );
    assert!(
        alive(&step) && alive(&background),
        "the orphaned step runs on"
    );
    (project, step, background)
}

#[test]
fn sigkill_mid_step_then_resume_runs_each_finished_step_once() {
    let (project, step, background) = killed_mid_step();
    let root = project.root();
    assert_eq!(
        (
            lines(&root.join("a.count")),
            lines(&root.join("b.count")),
            lines(&root.join("c.count"))
        ),
        (1, 1, 1)
    );
    assert_eq!(
        lines(&root.join("d.count")),
        0,
        "the step in flight did not finish"
    );

    let ids = project.run_ids();
    assert_eq!(ids.len(), 1);
    mekara_snapshot!(project, project.run(&["runs"], ""));

    // Resuming takes the run over: the orphaned step's group is killed before the step
    // runs again, so two copies of it never run at once.
    std::fs::remove_file(root.join("started")).expect("rm");
    let mut resuming = project.spawn(&["run", "--resume", &ids[0]]);
    wait_for(&root.join("started"));
    assert!(
        wait_until_dead(&step) && wait_until_dead(&background),
        "the resume killed the step and its background child that the killed mekara left"
    );
    assert_ne!(pid_in(&root.join("step.pid")), step, "the step runs again");
    std::fs::write(root.join("go"), "").expect("go");
    let mut stdin = resuming.stdin.take().expect("stdin");
    stdin.write_all(b"hello\n").expect("answer");
    drop(stdin);
    let resumed =
        crate::common::Run::from_output(resuming.wait_with_output().expect("resume ends"));
    resumed.expect_code(0);
    each_ran_once(&root, &["a", "b", "c", "d", "e"], &resumed.stdout);
    insta::assert_snapshot!(project.scrub(&resumed.stdout));
    assert!(
        !resumed.stdout.contains("steps[0]"),
        "finished steps are not run again:\n{}",
        resumed.stdout
    );
    assert!(project.run(&["runs"], "").stdout.contains("completed"));
}

/// A run a killed mekara left with a step running: pruning it (it is interrupted, so only
/// by name) kills that step's group as a resume would, and removes the run's files.
#[test]
fn pruning_an_interrupted_run_kills_the_step_it_left_running() {
    let (project, step, background) = killed_mid_step();
    let root = project.root();

    mekara_snapshot!(project, project.run(&["runs", "prune", "--keep", "0"], ""));
    assert!(
        alive(&step),
        "an interrupted run is not pruned unless named"
    );

    let pruned = project.run(&["runs", "prune", "--state", "interrupted"], "");
    pruned.expect_code(0);
    assert!(
        wait_until_dead(&step) && wait_until_dead(&background),
        "pruning killed the step and its background child:\n{}",
        pruned.stdout
    );
    assert!(project.run_ids().is_empty());
    let left: Vec<_> = std::fs::read_dir(root.join(".mekara/runs"))
        .expect("runs folder")
        .flatten()
        .map(|e| e.file_name())
        // The runs index (`index/`) stays; it is emptied with the runs.
        .filter(|n| n != ".gitignore" && n != "index")
        .collect();
    assert!(left.is_empty(), "{left:?}");
    assert!(
        std::fs::read_dir(root.join(".mekara/runs/index/open"))
            .map_or(true, |mut d| d.next().is_none()),
        "a removed run keeps no mark"
    );
}

#[test]
fn sigkill_while_waiting_for_the_person_loses_nothing() {
    let project = Project::new();
    project.script("steps", "Run the steps.", Some(SCRIPT));
    let root = project.root();
    std::fs::write(root.join("go"), "").expect("go");

    let mut child = project.spawn(&["run", "steps"]);
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !line.contains("Say a word") {
        assert!(Instant::now() < deadline, "the llm step never came");
        line.clear();
        stdout.read_line(&mut line).expect("read");
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");

    let id = project.run_ids().remove(0);
    let resumed = project.run(&["run", "--resume", &id], "again\n");
    resumed.expect_code(0);
    insta::assert_snapshot!(project.scrub(&resumed.stdout));
    each_ran_once(&root, &["a", "b", "c", "d", "e"], "");
    assert_eq!(
        std::fs::read_to_string(root.join("e.count")).expect("e"),
        "again\n"
    );
}

#[test]
fn a_torn_last_record_is_reported_and_not_trusted() {
    let project = Project::new();
    project.script("steps", "Run the steps.", Some(SCRIPT));
    let root = project.root();
    std::fs::write(root.join("go"), "").expect("go");
    // Stop at the llm step: stdin closed, the run is saved.
    project.run(&["run", "steps"], "").expect_code(1);
    let id = project.run_ids().remove(0);
    let journal = root.join(format!(".mekara/runs/{id}.jsonl"));
    let whole = std::fs::read_to_string(&journal).expect("journal");
    // A crash in the middle of writing the llm step's record.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .expect("open");
    let torn: &[u8] = br#"{"event":"step","depth":0,"index":4,"input":{"kind":"llm","pro"#;
    f.write_all(torn).expect("write");
    drop(f);

    // The byte counts in both say where the torn record starts: `whole.len()`.
    let at = |text: &str| text.replace(&format!("at byte {}", whole.len()), "at byte [END]");
    let shown = project.run(&["runs", "show", &id], "");
    insta::assert_snapshot!(project.scrub(&at(&shown.stdout)));
    let resumed = project.run(&["run", "--resume", &id], "late\n");
    resumed.expect_code(0);
    insta::assert_snapshot!(project.scrub(&at(&resumed.stdout)));
    let after = std::fs::read_to_string(&journal).expect("journal");
    assert!(
        after.starts_with(&whole),
        "complete records are kept as they were"
    );
    assert!(!after.contains(r#""pro"#) || after.contains(r#""prompt""#));
    assert!(
        after
            .lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()),
        "{after}"
    );
    assert_eq!(lines(&root.join("a.count")), 1);
}

#[test]
fn a_finished_run_cannot_be_resumed_and_an_unknown_one_is_named() {
    let project = Project::new();
    project.script(
        "quick",
        "Quick.",
        Some("def execute(request):\n    auto('true')\n"),
    );
    project.run(&["run", "quick"], "").expect_code(0);
    let id = project.run_ids().remove(0);
    let again = project.run(&["run", "--resume", &id], "");
    again.expect_code(2);
    assert_eq!(
        again.stderr,
        format!("error: run `{id}` has already finished; there is nothing to resume\n")
    );
    let unknown = project.run(&["run", "--resume", "../../etc/passwd"], "");
    unknown.expect_code(2);
    assert_eq!(
        unknown.stderr,
        "error: run `../../etc/passwd` not found; `mekara runs` lists the runs there are\n"
    );
}

/// Sends `signal` (`INT`, `TERM`, `HUP`) to a `mekara run` whose step waits, and checks that
/// the step's process group is stopped, mekara ends with 130 saying how to resume (the
/// transcript is pinned as `snapshot`), and the run resumes with each step run once.
fn a_signal_stops_the_running_step_and_leaves_the_run_resumable(signal: &str, snapshot: &str) {
    let project = Project::new();
    project.script("steps", "Run the steps.", Some(SCRIPT));
    let root = project.root();
    let child = project.spawn(&["run", "steps"]);
    wait_for(&root.join("started"));
    let (step, background) = (
        pid_in(&root.join("step.pid")),
        pid_in(&root.join("background.pid")),
    );
    // A terminal's Ctrl-C reaches mekara's process group, a CI runner's cancel or a closed
    // terminal mekara itself; the step has a group of its own, which none of them reaches.
    let sent = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(sent.success());
    let out = crate::common::Run::from_output(child.wait_with_output().expect("wait"));
    out.expect_code(130);
    mekara_snapshot!(snapshot, project, out);
    assert!(
        wait_until_dead(&step) && wait_until_dead(&background),
        "the step's group survived SIG{signal}"
    );
    let id = project.run_ids().remove(0);
    std::fs::remove_file(root.join("started")).expect("rm");
    std::fs::write(root.join("go"), "").expect("go");
    project.run(&["run", "--resume", &id], "x\n").expect_code(0);
    each_ran_once(&root, &["a", "b", "c", "d", "e"], "");
}

#[test]
fn ctrl_c_stops_the_running_step_and_leaves_the_run_resumable() {
    a_signal_stops_the_running_step_and_leaves_the_run_resumable("INT", "ctrl_c_mid_step");
}

/// Regression (issue 40): SIGTERM (a CI job cancelled) ended `mekara run` and left the
/// running step alive, with no word on how to resume.
#[test]
fn sigterm_stops_the_running_step_and_leaves_the_run_resumable() {
    a_signal_stops_the_running_step_and_leaves_the_run_resumable("TERM", "sigterm_mid_step");
}

/// Regression (issue 40): SIGHUP (the terminal closed) did the same.
#[test]
fn sighup_stops_the_running_step_and_leaves_the_run_resumable() {
    a_signal_stops_the_running_step_and_leaves_the_run_resumable("HUP", "sighup_mid_step");
}

/// Regression: Ctrl-C at a prompt used to be taken for a running step, so mekara went on
/// waiting for input and then killed the next step.
#[test]
fn ctrl_c_at_a_prompt_leaves_at_once_and_the_run_resumes() {
    let project = Project::new();
    project.script("steps", "Run the steps.", Some(SCRIPT));
    let root = project.root();
    std::fs::write(root.join("go"), "").expect("go");
    let mut child = project.spawn(&["run", "steps"]);
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !line.contains("Say a word") {
        assert!(Instant::now() < deadline, "the llm step never came");
        line.clear();
        stdout.read_line(&mut line).expect("read");
    }
    press_ctrl_c(&child);
    // stdin stays open: only the interrupt can end the process.
    let status = ended_after_ctrl_c(&mut child, false, "mekara kept waiting for input");
    assert_eq!(status.code(), Some(130));
    let id = project.run_ids().remove(0);
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .expect("stderr")
        .read_to_string(&mut stderr)
        .expect("read stderr");
    insta::assert_snapshot!(project.scrub(&stderr));
    project.run(&["run", "--resume", &id], "w\n").expect_code(0);
    each_ran_once(&root, &["a", "b", "c", "d", "e"], "");
}

/// Ctrl-C while the script is evaluating between steps (no step runs, no prompt waits):
/// the next step does not start, mekara ends with 130, and the run resumes from there. A
/// second Ctrl-C, should the first not have been acted on yet, leaves at once.
#[test]
fn ctrl_c_between_steps_ends_the_run_and_it_resumes() {
    let project = Project::new();
    project.script(
        "busy",
        "Count, think for a while, count again.",
        Some(
            r#"
def execute(request):
    auto("echo 1 >> a.count")
    n = 0
    for i in range(45000000):
        n = i * 2
    auto("echo 1 >> b.count")
"#,
        ),
    );
    let root = project.root();
    let mut child = project.spawn(&["run", "busy"]);
    // Between the steps: once the first is journaled (its file can appear while its shell
    // is still running, and Ctrl-C then stops that step, which runs again on resume).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !std::fs::read_dir(root.join(".mekara/runs"))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|j| j.contains(r#""event":"step""#)))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the first step was never journaled"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    press_ctrl_c(&child);
    let status = ended_after_ctrl_c(&mut child, true, "mekara went on");
    assert_eq!(status.code(), Some(130));
    assert_eq!(lines(&root.join("b.count")), 0, "the next step ran");
    let id = project.run_ids().remove(0);
    project.run(&["run", "--resume", &id], "").expect_code(0);
    each_ran_once(&root, &["a", "b"], "");
}

/// Spawns `mekara run NAME`, reads its output up to a line holding `needle`, and then
/// stops reading, as `head` does once it has its lines.
fn run_and_stop_reading_at(project: &Project, name: &str, needle: &str) -> std::process::Child {
    let mut child = project.spawn(&["run", name]);
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    while !line.contains(needle) {
        line.clear();
        assert!(
            stdout.read_line(&mut line).expect("read") > 0,
            "mekara ended before printing `{needle}`"
        );
    }
    child
}

/// Waits for a `mekara run` whose reader went away: it ends with 141, without a panic,
/// saying on stderr `hint` (given the run's id). Returns the id.
fn ended_quietly(
    project: &Project,
    child: std::process::Child,
    hint: impl Fn(&str) -> String,
) -> String {
    let out = crate::common::Run::from_output(child.wait_with_output().expect("wait"));
    out.expect_code(141);
    let id = project.run_ids().remove(0);
    assert!(out.stderr.contains(&hint(&id)), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    id
}

/// `mekara run ... | head`: when whoever reads the output goes away, the step whose output
/// can no longer be shown is stopped (not left to run unseen), mekara ends quietly with 141
/// (no panic), says on stderr how to resume, and the run resumes where it stopped.
#[test]
fn closing_the_output_stops_the_run_quietly_and_it_resumes() {
    let project = Project::new();
    project.script(
        "chatty",
        "Print a lot, then note that it ran.",
        Some(
            r#"
def execute(request):
    auto("echo 1 >> a.count")
    auto("echo $$ > step.pid; i=0; while [ ! -e go ]; do i=$((i+1)); echo line $i; sleep 0.01; done; echo 1 >> b.count")
    auto("echo 1 >> c.count")
"#,
        ),
    );
    let root = project.root();
    let child = run_and_stop_reading_at(&project, "chatty", "line 3");
    let step_pid = pid_in(&root.join("step.pid"));
    let id = ended_quietly(&project, child, |id| {
        format!(
            "the output was closed, so step chatty[1] was stopped; resume with `mekara run --resume {id}`"
        )
    });
    assert!(wait_until_dead(&step_pid), "the step outlived mekara");
    assert_eq!(lines(&root.join("c.count")), 0, "the run went on");

    std::fs::write(root.join("go"), "").expect("go");
    project.run(&["run", "--resume", &id], "").expect_code(0);
    each_ran_once(&root, &["a", "b", "c"], "");
}

/// Closed while the run is between steps (nothing runs, so nothing is stopped), at the
/// prompt of an llm step, the run ends quietly too and says how to resume.
#[test]
fn closing_the_output_before_a_prompt_says_how_to_resume() {
    let project = Project::new();
    project.script(
        "asks",
        "Count, ask, count again.",
        Some(
            r#"
def execute(request):
    auto("echo 1 >> a.count; while [ ! -e go ]; do sleep 0.01; done")
    llm("say when")
    auto("echo 1 >> b.count")
"#,
        ),
    );
    let root = project.root();
    // The reader goes away while the step runs (it prints nothing); the next thing mekara
    // prints is the step's closing line and the llm step's prompt.
    let child = run_and_stop_reading_at(&project, "asks", "asks[0]");
    std::fs::write(root.join("go"), "").expect("go");
    let id = ended_quietly(&project, child, |id| {
        format!(
            "the output was closed; the run is saved: resume it with `mekara run --resume {id}`"
        )
    });
    project.run(&["run", "--resume", &id], "\n").expect_code(0);
    each_ran_once(&root, &["a", "b"], "");
}

/// A listing piped into a reader that stops early ends quietly too.
#[test]
fn a_listing_into_a_closed_pipe_ends_quietly() {
    let project = Project::new();
    for i in 0..400 {
        project.script(&format!("s{i:03}"), "Say hello.", None);
    }
    let mut child = project.spawn(&["scripts"]);
    // Closed before mekara writes: its first write fails.
    drop(child.stdout.take());
    let out = crate::common::Run::from_output(child.wait_with_output().expect("wait"));
    out.expect_code(141);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

/// A step that notes when it starts and ends, in nanoseconds, one line each in `marks`.
fn marking_step(name: &str) -> String {
    format!(
        "auto(\"echo start-{name} $(date +%s%N) >> marks; sleep 1; echo end-{name} $(date +%s%N) >> marks\")"
    )
}

/// Runs `mekara ARGS` under strace, which kills it with SIGKILL when it enters its
/// `when`-th `pwrite64` (the write of a step's group note): the moment after the step's
/// shell was spawned and before its group was on disk. Returns what strace saw.
fn killed_at_the_group_note(project: &Project, args: &[&str], when: u32) -> String {
    let trace = project.dir.path().join("strace.out");
    let mut command = project.command(&[]);
    let mekara = command.get_program().to_owned();
    command = {
        let mut strace = std::process::Command::new("strace");
        strace
            .args(["-f", "-qq", "-o"])
            .arg(&trace)
            .arg("-e")
            .arg("trace=pwrite64")
            .arg("-e")
            .arg(format!("inject=pwrite64:signal=SIGKILL:when={when}"))
            .arg(mekara)
            .args(args)
            .current_dir(project.root())
            .env_clear()
            .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))));
        strace
    };
    let run = crate::common::run_with_stdin(command, "");
    let trace = std::fs::read_to_string(&trace).unwrap_or_default();
    assert!(
        trace.contains("killed by SIGKILL"),
        "strace did not kill mekara at pwrite64 #{when}:\n{trace}\n{run:?}"
    );
    trace
}

/// The `start-NAME` and `end-NAME` marks as (start, end) pairs, in the order written.
fn runs_of(root: &Path, name: &str) -> Vec<(u128, u128)> {
    let marks = std::fs::read_to_string(root.join("marks")).unwrap_or_default();
    let times = |kind: &str| -> Vec<u128> {
        marks
            .lines()
            .filter_map(|l| l.strip_prefix(&format!("{kind}-{name} ")))
            .map(|t| t.trim().parse().expect("a time"))
            .collect()
    };
    times("start").into_iter().zip(times("end")).collect()
}

/// Regression: a mekara killed after it spawned a step's shell and before it noted the
/// shell's group left the step running where a resume could not find it, so the resumed
/// step ran a second time while the first still ran.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs strace")]
fn sigkill_between_spawn_and_group_note_never_runs_a_step_twice() {
    // `when`: the note of the first step, then of the second (the first having ended).
    for (when, killed_in) in [(1, "one"), (2, "two")] {
        let project = Project::new();
        project.script(
            "marks",
            "Mark.",
            Some(&format!(
                "def execute(request):\n    {}\n    {}\n",
                marking_step("one"),
                marking_step("two")
            )),
        );
        let root = project.root();
        killed_at_the_group_note(&project, &["run", "marks"], when);
        // Whatever the killed mekara spawned had a second to run before the resume.
        std::thread::sleep(Duration::from_millis(1200));
        let id = project.run_ids().remove(0);
        let resumed = project.run(&["run", "--resume", &id], "");
        resumed.expect_code(0);
        let marks = std::fs::read_to_string(root.join("marks")).unwrap_or_default();
        for name in ["one", "two"] {
            let runs = runs_of(&root, name);
            assert_eq!(
                runs.len(),
                1,
                "step `{name}` ran once (killed at the note of step `{killed_in}`):\n{marks}"
            );
        }
        // And never two at once: each run of a step ended before the next one started.
        let (one, two) = (runs_of(&root, "one")[0], runs_of(&root, "two")[0]);
        assert!(one.1 < two.0, "{marks}");
    }
}

/// A project with one run stopped at its llm step (stdin closed), and the run's id.
fn run_stopped_at_a_prompt() -> (Project, String) {
    let project = Project::new();
    project.script(
        "ask",
        "Ask.",
        Some("def execute(request):\n    auto(\"echo 1 >> a.count\")\n    llm(\"Say a word\", expects = [\"word\"])\n"),
    );
    project.run(&["run", "ask"], "").expect_code(1);
    let id = project.run_ids().remove(0);
    (project, id)
}

fn journal_path(project: &Project, id: &str) -> std::path::PathBuf {
    project.root().join(format!(".mekara/runs/{id}.jsonl"))
}

/// Regression: a journal holding only its header (an older mekara killed right after it
/// created the run) was listed as "finished by hand" and its resume said it had finished.
#[test]
fn a_journal_with_only_its_header_says_its_script_never_started() {
    let (project, id) = run_stopped_at_a_prompt();
    let path = journal_path(&project, &id);
    let text = std::fs::read_to_string(&path).expect("journal");
    // This mekara writes the header with the first frame, in one write.
    let first = text.lines().next().expect("a header");
    assert!(first.contains(r#""event":"run""#), "{text}");
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.contains(r#""event":"push""#)),
        "{text}"
    );
    for (variant, content) in [
        ("header alone", format!("{first}\n")),
        ("empty", String::new()),
    ] {
        std::fs::write(&path, &content).expect("write");
        mekara_snapshot!(project, project.run(&["runs"], ""));
        let resumed = project.run(&["run", "--resume", &id], "");
        resumed.expect_code(2);
        assert_eq!(
            resumed.stderr,
            format!(
                "error: run `{id}` was stopped before its script started: nothing of it ran, so there is nothing to resume; start the script again\n"
            ),
            "{variant}"
        );
        let shown = project.run(&["runs", "show", &id], "");
        assert!(
            shown.stdout.ends_with(
                "stopped before its script started: nothing ran, so there is nothing to resume\n"
            ),
            "{variant}: {}",
            shown.stdout
        );
    }
}

/// Regression: a journal in a format this mekara does not know was read as if it were its
/// own.
#[test]
fn a_journal_in_an_unknown_format_is_refused_naming_it() {
    let (project, id) = run_stopped_at_a_prompt();
    let path = journal_path(&project, &id);
    let text = std::fs::read_to_string(&path).expect("journal");
    let mut torn_said = String::new();
    for format in ["mekara-journal/2", "mekara-journal/0", "something-else"] {
        std::fs::write(
            &path,
            text.replacen("mekara-journal/1", format, 1).replacen(
                env!("CARGO_PKG_VERSION"),
                "9.9.9",
                1,
            ),
        )
        .expect("write");
        let expected = format!(
            "journal `{}` is in format `{format}` (written by mekara 9.9.9), which this mekara ({}) cannot read; resume it with a mekara that reads `{format}`, or start the script again",
            path.display(),
            env!("CARGO_PKG_VERSION")
        );
        let resumed = project.run(&["run", "--resume", &id], "");
        resumed.expect_code(1);
        assert_eq!(resumed.stderr, format!("error: {expected}\n"));
        let shown = project.run(&["runs", "show", &id], "");
        assert_eq!(shown.stderr, format!("error: {expected}\n"));
        mekara_snapshot!(project, project.run(&["runs"], ""));
        // Torn last line or not, the header is checked.
        std::fs::write(
            &path,
            text.replacen("mekara-journal/1", format, 1)
                .trim_end_matches('\n'),
        )
        .expect("write");
        let torn = project.run(&["run", "--resume", &id], "");
        let version = format!("({})", env!("CARGO_PKG_VERSION"));
        torn_said.push_str(&project.scrub(&torn.stderr.replace(&version, "([VERSION])")));
    }
    insta::assert_snapshot!(torn_said);
}

/// Regression: an event that does not fit the stack was reported at "line 0", and the
/// depth it named was one off.
#[test]
fn an_event_that_does_not_fit_the_stack_is_reported_at_its_line() {
    let (project, id) = run_stopped_at_a_prompt();
    let path = journal_path(&project, &id);
    let text = std::fs::read_to_string(&path).expect("journal");
    // Line 3 is the step of the root frame (depth 0).
    assert!(
        text.lines()
            .nth(2)
            .is_some_and(|l| l.contains(r#""event":"step","depth":0"#)),
        "{text}"
    );
    for (depth, line, detail) in [
        (
            1,
            3,
            "a `step` event at depth 1, but the stack is 1 deep there, so it should be at depth 0",
        ),
        (
            7,
            3,
            "a `step` event at depth 7, but the stack is 1 deep there, so it should be at depth 0",
        ),
    ] {
        std::fs::write(
            &path,
            text.replacen(
                r#""event":"step","depth":0"#,
                &format!(r#""event":"step","depth":{depth}"#),
                1,
            ),
        )
        .expect("write");
        let resumed = project.run(&["run", "--resume", &id], "");
        resumed.expect_code(1);
        assert_eq!(
            resumed.stderr,
            format!(
                "error: journal `{}` is damaged at line {line}: {detail}; it cannot be resumed\n",
                path.display()
            )
        );
    }
    // A push that skips a depth, on line 2.
    std::fs::write(
        &path,
        text.replacen(
            r#""event":"push","depth":0"#,
            r#""event":"push","depth":1"#,
            1,
        ),
    )
    .expect("write");
    mekara_snapshot!(project, project.run(&["run", "--resume", &id], ""));
}

/// `mekara runs show` of an interrupted run says how to resume it, and the llm step it waits
/// on with its prompt's first lines (issue 28); of a finished one, not. Regression: it told
/// to resume over MCP with the bare run id, which the server refuses for a run with a
/// handle token (every run since handles): it names the handle now, and the bare id only
/// for a journal written before handles.
#[test]
fn runs_show_of_an_interrupted_run_says_how_to_resume_it() {
    let (project, id) = run_stopped_at_a_prompt();
    mekara_snapshot!(project, project.run(&["runs", "show", &id], "")).expect_code(0);
    // A journal written before handles has no token: its bare id opens it over MCP too.
    let path = journal_path(&project, &id);
    let text = std::fs::read_to_string(&path).expect("journal");
    let (header, rest) = text.split_once('\n').expect("a header line");
    let mut header: serde_json::Value = serde_json::from_str(header).expect("json header");
    assert!(
        header
            .as_object_mut()
            .expect("an object")
            .remove("token_sha256")
            .is_some(),
        "{header}"
    );
    std::fs::write(&path, format!("{header}\n{rest}")).expect("write");
    mekara_snapshot!(project, project.run(&["runs", "show", &id], ""));
    project
        .run(&["run", "--resume", &id], "word\n")
        .expect_code(0);
    let shown = project.run(&["runs", "show", &id], "");
    assert!(!shown.stdout.contains("resume"), "{}", shown.stdout);
}

/// Regression: a crafted `<run>.group` made a resume kill a process group mekara never
/// started. The note is checked against /proc: a bystander is left alone.
#[test]
fn a_crafted_group_note_does_not_make_a_resume_kill_a_bystander() {
    use std::os::unix::process::CommandExt as _;
    let (project, id) = run_stopped_at_a_prompt();
    let note = project.root().join(format!(".mekara/runs/{id}.group"));
    let boot_ns = || {
        let uptime = std::fs::read_to_string("/proc/uptime").expect("uptime");
        let secs: f64 = uptime
            .split_whitespace()
            .next()
            .and_then(|s| s.parse().ok())
            .expect("seconds");
        // Whole nanoseconds of uptime; precision is not needed here.
        format!("{:.0}", secs * 1e9)
    };
    for (window, what) in [
        ("1 {now}", "a window since boot"),
        ("{now} 99999999999999999999", "a window into the future"),
    ] {
        let mut bystander = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pgid = bystander.id();
        std::fs::write(
            &note,
            format!("{pgid} {} 999999999\n", window.replace("{now}", &boot_ns())),
        )
        .expect("write the note");
        let resumed = project.run(&["run", "--resume", &id], "");
        resumed.expect_code(1);
        assert!(
            bystander.try_wait().expect("try_wait").is_none(),
            "{what}: the resume killed a process it never started"
        );
        bystander.kill().expect("kill");
        bystander.wait().expect("reap");
    }
}

/// A `<run>.group` that is a link is not written through: what it points at is kept.
#[test]
fn a_group_note_that_is_a_link_is_not_written_through() {
    let (project, id) = run_stopped_at_a_prompt();
    let note = project.root().join(format!(".mekara/runs/{id}.group"));
    let victim = crate::common::write_file(&project.dir.path().join("victim"), "precious\n");
    let _ = std::fs::remove_file(&note);
    std::os::unix::fs::symlink(&victim, &note).expect("symlink");
    project.script(
        "ask",
        "Ask.",
        Some("def execute(request):\n    auto(\"echo 1 >> a.count\")\n    llm(\"Say a word\", expects = [\"word\"])\n    auto(\"true\")\n"),
    );
    project
        .run(&["run", "--resume", &id], "word\n")
        .expect_code(0);
    assert_eq!(
        std::fs::read_to_string(&victim).expect("victim"),
        "precious\n"
    );
}

/// How many seeds [`a_killed_evaluator_child_never_makes_a_step_run_twice`] tries: each is a
/// run of [`CHILD_KILL_STEPS`] short steps whose evaluator child is killed at a moment the
/// seed picks, and its resume.
const CHILD_KILL_SEEDS: u64 = 16;
const CHILD_KILL_STEPS: usize = 6;

/// Regression (issue 40): an evaluator child killed mid-step (SIGKILL, as the kernel's OOM
/// killer would) left the step its parent ran to its end unjournaled, mekara exited 2, and
/// the resume ran that step again. The parent journals the result now, ends as an
/// interrupted run (130) saying how to resume, and the resume runs no step twice.
#[test]
fn a_killed_evaluator_child_never_makes_a_step_run_twice() {
    let project = Project::new();
    project.script(
        "steps",
        "Run the steps.",
        Some(&format!(
            "def execute(request):\n    for i in range({CHILD_KILL_STEPS}):\n        auto(\"echo %d >> steps.log; sleep 0.04\" % i)\n"
        )),
    );
    let root = project.root();
    let mut interrupted = 0;
    for seed in 0..CHILD_KILL_SEEDS {
        let _ = std::fs::remove_file(root.join("steps.log"));
        let before = project.run_ids();
        let mut run = project.spawn(&["run", "steps"]);
        // A moment within the run's steps, spread by the seed (a fixed spread, so that a
        // failure is seen again with the same seed).
        let delay = Duration::from_millis(seed.wrapping_mul(7919) % 260);
        let deadline = Instant::now() + Duration::from_secs(10);
        let child = loop {
            if let Some(pid) = crate::mcp::warm::evaluators(run.id()).first() {
                break Some(*pid);
            }
            if run.try_wait().expect("try_wait").is_some() || Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        std::thread::sleep(delay);
        if let Some(pid) = child {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
        let out = crate::common::Run::from_output(run.wait_with_output().expect("wait"));
        let id = project
            .run_ids()
            .into_iter()
            .find(|id| !before.contains(id))
            .expect("the run's id");
        let steps = std::fs::read_to_string(root.join("steps.log")).unwrap_or_default();
        if out.code != Some(0) {
            out.expect_code(130);
            assert!(
                out.stderr
                    .contains(&format!("resume with `mekara run --resume {id}`")),
                "seed {seed}:\n{}",
                out.stderr
            );
            interrupted += 1;
            project.run(&["run", "--resume", &id], "").expect_code(0);
        }
        let steps = std::fs::read_to_string(root.join("steps.log")).unwrap_or(steps);
        let expected: Vec<String> = (0..CHILD_KILL_STEPS).map(|i| i.to_string()).collect();
        assert_eq!(
            steps.lines().collect::<Vec<_>>(),
            expected,
            "seed {seed}: each step ran once, in order"
        );
    }
    assert!(
        interrupted >= CHILD_KILL_SEEDS / 2,
        "most kills land while the run goes on ({interrupted} of {CHILD_KILL_SEEDS})"
    );
}

/// Regression (issue 40): SIGTERM or SIGHUP of `mekara mcp` (its client closing, a terminal
/// closed) ended the server with the running step's process group left running until a
/// resume. The server stops its running steps first, as when its client goes away.
#[tokio::test]
async fn sigterm_or_sighup_of_the_mcp_server_stops_the_running_step() {
    for signal in ["TERM", "HUP"] {
        let project = Project::new();
        project.script("steps", "Run the steps.", Some(SCRIPT));
        let client = crate::mcp::client::Client::start(&project, &[]).await;
        let (root, server) = (project.root(), client.pid);
        let killer = std::thread::spawn(move || {
            wait_for(&root.join("started"));
            let pids = (
                pid_in(&root.join("step.pid")),
                pid_in(&root.join("background.pid")),
            );
            let sent = std::process::Command::new("kill")
                .args([&format!("-{signal}"), &server.to_string()])
                .status()
                .expect("kill");
            assert!(sent.success());
            pids
        });
        let start = crate::mcp::client::params("start", serde_json::json!({"name": "steps"}));
        // The server goes away: the call gets no answer, or the one of a stopped step.
        let _ = client.service.call_tool(start).await;
        let (step, background) = killer.join().expect("killer");
        assert!(
            wait_until_dead(&server.to_string()),
            "the server ended on SIG{signal}"
        );
        assert!(
            !alive(&step) && !alive(&background),
            "the server stopped its running step's group before it ended on SIG{signal}"
        );
    }
}
