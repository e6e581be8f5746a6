//! The queue of unattended runs: `mekara submit`, `mekara worker` and `mekara runs cancel`
//! against a real PostgreSQL (the server of [`crate::postgres`]). Every worker is a process
//! of its own, on a host of its own (a checkout with its own folder, HOME and `MEKARA_HOST`);
//! the steps append to files in a folder all hosts see, so the tests count what ran.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use crate::common::{Project, wait_for};
use crate::postgres::{Db, Host};

/// `steps` with four steps, each `sleep`s a little and then appends `REQUEST N` to
/// `shared/log` (so a step killed in flight leaves no line); `gate` appends `REQUEST 0`,
/// then waits for `shared/go` (saying so with `shared/started`), then appends `REQUEST 1`;
/// `paid` has two llm steps.
fn checkout(shared: &Path, config: &str) -> Project {
    let project = Project::new();
    project.write(
        ".mekara/config.toml",
        &format!("[store]\nproject = \"acme\"\n{config}"),
    );
    let s = shared.display();
    project.script(
        "steps",
        "Run the steps.",
        Some(&format!(
            r#"def execute(request):
    for i in range(4):
        auto("sleep 0.1; echo '%s %d' >> {s}/log" % (request, i), context = "step %d" % i)
"#
        )),
    );
    project.script(
        "gate",
        "Wait at the gate.",
        Some(&format!(
            r#"def execute(request):
    auto("echo '%s 0' >> {s}/log" % request)
    auto("touch {s}/started; while [ ! -e {s}/go ]; do sleep 0.02; done")
    auto("echo '%s 1' >> {s}/log" % request)
"#
        )),
    );
    project.script(
        "paid",
        "Two agent steps.",
        Some(
            r#"def execute(request):
    llm("First.", expects = {"word": "a word"})
    llm("Second.", expects = {"word": "a word"})
"#,
        ),
    );
    project
}

/// An agent that answers every llm step with a word, at $0.60 a step.
const AGENT: &str = r#"echo '{"outputs": {"word": "x"}, "cost_usd": 0.6}'"#;

/// How many times each `REQUEST N` line is in `shared/log`.
fn ran(shared: &Path) -> BTreeMap<String, usize> {
    let mut ran = BTreeMap::new();
    for line in std::fs::read_to_string(shared.join("log"))
        .unwrap_or_default()
        .lines()
    {
        *ran.entry(line.to_string()).or_insert(0) += 1;
    }
    ran
}

/// Submits `script REQUEST` on `host` to `queue`; returns the run id it printed.
fn submit(host: &Host, script: &str, request: &str, extra: &[&str]) -> String {
    let mut args = vec!["submit", "--agent-command", AGENT];
    args.extend(extra);
    args.extend([script, request]);
    let out = host.run(&args);
    out.expect_code(0);
    let id = out.stdout.trim().to_string();
    assert!(
        out.stderr
            .contains(&format!("follow it with `mekara runs show {id}`")),
        "{}",
        out.stderr
    );
    id
}

/// Starts `mekara worker ARGS` on `host`, allowing the tests' agent command ([`AGENT`]),
/// its stderr to `HOST.err` in `shared`.
fn worker(host: &Host, shared: &Path, args: &[&str]) -> Child {
    let mut all = vec!["worker", "--allow-agent-command", AGENT];
    all.extend(args);
    let err = std::fs::File::create(shared.join(format!("{}.err", host.name))).expect("err");
    host.command(&all)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .expect("spawn worker")
}

/// The processes whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .expect("/proc")
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rsplit_once(')')
                    .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}

fn stderr_of(shared: &Path, host: &str) -> String {
    std::fs::read_to_string(shared.join(format!("{host}.err"))).unwrap_or_default()
}

/// Waits up to `secs` for `child` to end; its exit code.
fn wait(child: &mut Child, secs: u64) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status.code();
        }
        assert!(Instant::now() < deadline, "the worker did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The queue's state of run `id`.
fn state(db: &Db, id: &str) -> String {
    db.client()
        .query_one("SELECT state FROM mekara_queue WHERE run_id = $1", &[&id])
        .expect("row")
        .get(0)
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_submitted_run_is_listed_queued_then_drained_by_a_worker_on_another_host() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let laptop = checkout(s, "");
    let db = Db::migrated(&laptop);
    let laptop = db.host("laptop", laptop);
    let ci = db.host("ci", checkout(s, ""));
    let id = submit(&laptop, "steps", "r", &[]);

    let listed = ci.run(&["runs", "--state", "queued"]);
    listed.expect_code(0);
    let row = listed
        .stdout
        .lines()
        .find(|l| l.contains(&id))
        .expect("listed");
    assert!(
        row.contains("queued in default") && row.contains("laptop"),
        "{row}"
    );
    let shown = ci.run(&["runs", "show", &id]);
    shown.expect_code(0);
    insta::assert_snapshot!(ci.project.scrub(&shown.stdout));

    let mut w = worker(&ci, s, &["--until-empty"]);
    assert_eq!(wait(&mut w, 60), Some(0), "{}", stderr_of(s, "ci"));
    insta::assert_snapshot!(ci.project.scrub(&lines_about(&stderr_of(s, "ci"), &id)));
    assert_eq!(ran(s).values().copied().collect::<Vec<_>>(), vec![1; 4]);
    assert_eq!(state(&db, &id), "done");
    let listed = laptop.run(&["runs"]);
    let row = listed
        .stdout
        .lines()
        .find(|l| l.contains(&id))
        .expect("listed");
    assert!(row.contains("completed") && row.contains("ci"), "{row}");
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn three_workers_run_every_run_of_a_queue_exactly_once() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let hosts: Vec<Host> = ["w1", "w2", "w3"]
        .iter()
        .map(|name| db.host(name, checkout(s, "")))
        .collect();
    for n in 0..9 {
        submit(&hosts[0], "steps", &format!("r{n}"), &[]);
    }
    let mut workers: Vec<Child> = hosts
        .iter()
        .map(|h| worker(h, s, &["--until-empty", "--concurrency", "2"]))
        .collect();
    for w in &mut workers {
        assert_eq!(wait(w, 120), Some(0));
    }
    let ran = ran(s);
    assert_eq!(ran.len(), 36, "{ran:?}");
    assert!(ran.values().all(|&n| n == 1), "a step ran twice: {ran:?}");
    let claimed: usize = ["w1", "w2", "w3"]
        .iter()
        .map(|h| stderr_of(s, h).matches("claimed run").count())
        .sum();
    assert_eq!(claimed, 9, "every run claimed once");
    drop(first);
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn workers_killed_at_random_points_lose_no_step_and_rerun_none_that_finished() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let submitter = db.host("laptop", first);
    let runs = 6;
    for n in 0..runs {
        submit(&submitter, "steps", &format!("r{n}"), &[]);
    }
    let hosts: Vec<Host> = (0..6)
        .map(|n| db.host(&format!("h{n}"), checkout(s, "")))
        .collect();
    let mut live: Vec<Child> = vec![worker(&hosts[0], s, &[]), worker(&hosts[1], s, &[])];
    // Kill a worker every 0.3–0.7 s (a pseudo-random pause from the clock), five times,
    // starting a new one on another host each time.
    let mut kills = 0;
    for n in 0..4 {
        let pause = 300 + u64::from(Instant::now().elapsed().subsec_nanos() % 400);
        std::thread::sleep(Duration::from_millis(pause));
        let mut victim = live.remove(n % live.len());
        victim.kill().expect("SIGKILL");
        victim.wait().expect("reap");
        kills += 1;
        live.push(worker(&hosts[2 + n], s, &[]));
    }
    // The workers left drain the queue, taking up the runs of the killed ones.
    let deadline = Instant::now() + Duration::from_secs(120);
    let done = || {
        db.client()
            .query("SELECT 1 FROM mekara_queue WHERE state <> 'done'", &[])
            .expect("rows")
            .is_empty()
    };
    while !done() {
        if Instant::now() >= deadline {
            let rows: Vec<String> = db
                .client()
                .query(
                    "SELECT run_id || ' ' || state || ' ' || attempts::text FROM mekara_queue",
                    &[],
                )
                .expect("rows")
                .iter()
                .map(|r| r.get(0))
                .collect();
            let said: Vec<String> = hosts
                .iter()
                .map(|h| format!("{}:\n{}", h.name, stderr_of(s, &h.name)))
                .collect();
            panic!("the queue was not drained: {rows:?}\n{}", said.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    for mut w in live {
        let _ = w.kill();
        let _ = w.wait();
    }
    let ran = ran(s);
    for n in 0..runs {
        for step in 0..4 {
            assert!(
                ran.contains_key(&format!("r{n} {step}")),
                "step lost: r{n} {step}: {ran:?}"
            );
        }
    }
    // A step is `sleep; echo`: a kill lands in its sleep (the step runs again, once) or,
    // rarely, in the instant between its echo and its journal entry; a finished step never
    // runs again.
    let twice: usize = ran.values().map(|n| n - 1).sum();
    assert!(
        twice <= kills,
        "{twice} steps ran twice after {kills} kills: {ran:?}"
    );
    let rows: Vec<String> = db
        .client()
        .query("SELECT state FROM mekara_queue", &[])
        .expect("rows")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(rows.iter().all(|r| r == "done"), "{rows:?}");
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn sigterm_stops_a_worker_gracefully_and_another_takes_the_run_up() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let a = db.host("a", first);
    let b = db.host("b", checkout(s, ""));
    let id = submit(&a, "gate", "g", &[]);
    let mut wa = worker(&a, s, &[]);
    wait_for(&s.join("started"));
    let listed = b.run(&["runs"]);
    let row = listed
        .stdout
        .lines()
        .find(|l| l.contains(&id))
        .expect("listed");
    assert!(row.contains("active on a"), "{row}");
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(wa.id()).expect("pid")).expect("pid"),
        rustix::process::Signal::TERM,
    )
    .expect("SIGTERM");
    assert_eq!(wait(&mut wa, 30), Some(0));
    insta::assert_snapshot!(a.project.scrub(&lines_about(&stderr_of(s, "a"), &id)));
    assert_eq!(state(&db, &id), "queued");
    // Its journal says interrupted, but the queue holds it for a worker: prune leaves it.
    let pruned = b.run(&["runs", "prune", "--state", "interrupted"]);
    pruned.expect_code(0);
    assert!(!pruned.stdout.contains(&id), "{}", pruned.stdout);

    std::fs::write(s.join("go"), "").expect("go");
    let mut wb = worker(&b, s, &["--until-empty"]);
    assert_eq!(wait(&mut wb, 60), Some(0));
    assert!(
        stderr_of(s, "b").contains(&format!("resuming run {id}")),
        "{}",
        stderr_of(s, "b")
    );
    assert_eq!(
        ran(s).get("g 0"),
        Some(&1),
        "the finished step did not run again"
    );
    assert_eq!(ran(s).get("g 1"), Some(&1));
    assert_eq!(state(&db, &id), "done");
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn cancel_a_queued_a_running_and_a_finished_run() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let laptop = db.host("laptop", first);
    let ci = db.host("ci", checkout(s, ""));

    // Queued: it never starts.
    let queued = submit(&laptop, "steps", "q", &[]);
    let out = ci.run(&["runs", "cancel", &queued]);
    out.expect_code(0);
    assert_eq!(
        out.stdout,
        format!("cancelled run {queued}: no worker runs it, and none will\n")
    );
    let listed = laptop.run(&["runs", "--state", "cancelled"]);
    assert!(listed.stdout.contains(&queued), "{}", listed.stdout);

    // Running: it stops within the step in flight; its last step never runs.
    let running = submit(&laptop, "gate", "g", &[]);
    let mut w = worker(&ci, s, &[]);
    wait_for(&s.join("started"));
    let out = laptop.run(&["runs", "cancel", &running]);
    out.expect_code(0);
    assert_eq!(
        out.stdout,
        format!("cancelled run {running}: its worker stopped it\n")
    );
    assert!(stderr_of(s, "ci").contains(&format!("cancelled run {running} after")));
    std::fs::write(s.join("go"), "").expect("go");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ran(s).get("q 0"), None, "the queued run never started");
    assert_eq!(ran(s).get("g 0"), Some(&1));
    assert_eq!(
        ran(s).get("g 1"),
        None,
        "the cancelled run stopped at its step in flight"
    );
    let shown = laptop.run(&["runs", "show", &running]);
    assert!(
        shown.stdout.contains("cancelled by `mekara runs cancel`"),
        "{}",
        shown.stdout
    );
    let listed = laptop.run(&["runs"]);
    let row = listed
        .stdout
        .lines()
        .find(|l| l.contains(&running))
        .expect("row");
    assert!(row.contains("cancelled"), "{row}");
    // Prune takes a cancelled run as `cancelled`, and refuses to choose queued ones.
    let pruned = laptop.run(&["runs", "prune", "--state", "cancelled", "--dry-run"]);
    pruned.expect_code(0);
    assert!(
        pruned
            .stdout
            .lines()
            .any(|l| l.contains(&running) && l.contains("cancelled")),
        "{}",
        pruned.stdout
    );
    let refused = laptop.run(&["runs", "prune", "--state", "queued"]);
    refused.expect_code(2);
    insta::assert_snapshot!(laptop.project.scrub(&refused.stderr));

    // Finished: nothing changes.
    let done = submit(&laptop, "steps", "d", &[]);
    let deadline = Instant::now() + Duration::from_secs(60);
    while state(&db, &done) != "done" {
        assert!(Instant::now() < deadline, "never done");
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = w.kill();
    let _ = w.wait();
    let out = laptop.run(&["runs", "cancel", &done]);
    out.expect_code(1);
    assert_eq!(
        out.stderr,
        format!("run {done} has ended (completed): there is nothing to cancel\n")
    );
    assert_eq!(state(&db, &done), "done");

    let out = laptop.run(&["runs", "cancel", "20990101-000000-0000"]);
    out.expect_code(2);
    insta::assert_snapshot!(laptop.project.scrub(&out.stderr));
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_queues_concurrency_holds_across_workers_and_its_max_cost_stops_a_run() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let config = "[queue.one]\nconcurrency = 1\nmax_cost = 0.5\n";
    let first = checkout(s, config);
    let db = Db::migrated(&first);
    let a = db.host("a", first);
    let b = db.host("b", checkout(s, config));
    for n in 0..4 {
        submit(&a, "steps", &format!("r{n}"), &["--queue", "one"]);
    }
    let paid = submit(&a, "paid", "p", &["--queue", "one"]);
    let mut workers = [
        worker(
            &a,
            s,
            &["--queue", "one", "--concurrency", "3", "--until-empty"],
        ),
        worker(
            &b,
            s,
            &["--queue", "one", "--concurrency", "3", "--until-empty"],
        ),
    ];
    // Never two runs at once: the lines of one run come together.
    for w in &mut workers {
        assert_eq!(wait(w, 120), Some(0));
    }
    let log = std::fs::read_to_string(s.join("log")).expect("log");
    let order: Vec<&str> = log
        .lines()
        .map(|l| l.split(' ').next().unwrap_or(""))
        .collect();
    let mut runs_in_order = order.clone();
    runs_in_order.dedup();
    assert_eq!(runs_in_order.len(), 4, "runs overlapped: {log}");
    assert!(
        stderr_of(s, "a").contains("`one` (at most 1 at once across workers)"),
        "{}",
        stderr_of(s, "a")
    );
    // `max_cost = 0.5`: the first agent step spent $0.60, so the second never ran; the run
    // waits at the cap for a person (`mekara answer`), which the worker says, not a failure.
    assert_eq!(state(&db, &paid), "done");
    let said = format!("{}{}", stderr_of(s, "a"), stderr_of(s, "b"));
    insta::assert_snapshot!(a.project.scrub(line_of(&said, &paid)));
    // A flag given to `submit` wins over the queue's setting.
    let generous = submit(&a, "paid", "p", &["--queue", "one", "--max-cost", "5"]);
    let mut w = worker(&a, s, &["--queue", "one", "--until-empty"]);
    assert_eq!(wait(&mut w, 60), Some(0));
    assert_eq!(state(&db, &generous), "done");
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn bad_input_to_submit_worker_and_cancel_is_a_clear_error() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let host = db.host("a", first);
    let mut seen = String::new();
    let mut said = |args: &str, out: &crate::common::Run| {
        out.expect_code(2);
        seen.push_str(&format!(
            "$ mekara {args}\n{}\n",
            host.project.scrub(&out.stderr)
        ));
    };
    said(
        "submit --agent-command AGENT nope",
        &host.run(&["submit", "--agent-command", AGENT, "nope"]),
    );
    said("submit steps", &host.run(&["submit", "steps"]));
    let outside = tempfile::tempdir().expect("tempdir");
    let mut cmd = host.project.command_in(outside.path(), &["worker"]);
    cmd.env("MEKARA_STORE_URL", db.url());
    said(
        "worker (outside a project)",
        &crate::common::run_with_stdin(cmd, ""),
    );
    // The file store has no queue.
    let files = checkout(s, "");
    for args in [
        &["submit", "--agent-command", AGENT, "steps"][..],
        &["worker"],
        &["runs", "cancel", "x"],
    ] {
        said(
            &format!("{} (runs in files)", args.join(" ")),
            &files.run(args, ""),
        );
    }
    insta::assert_snapshot!(seen);
}

/// The pid of the `mekara run` a worker started for run `id`.
fn child_of(id: &str) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for entry in std::fs::read_dir("/proc").expect("/proc").flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let words: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            if words
                .windows(2)
                .any(|w| (w[0] == b"--run-id" || w[0] == b"--resume") && w[1] == id.as_bytes())
            {
                return pid;
            }
        }
        assert!(Instant::now() < deadline, "no child runs {id}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_run_whose_process_is_killed_is_resumed_by_its_worker_with_no_finished_step_again() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let host = db.host("a", first);
    let id = submit(&host, "gate", "g", &[]);
    let mut w = worker(&host, s, &["--until-empty"]);
    wait_for(&s.join("started"));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(child_of(&id)).expect("pid"),
        rustix::process::Signal::KILL,
    )
    .expect("SIGKILL");
    std::fs::write(s.join("go"), "").expect("go");
    assert_eq!(wait(&mut w, 60), Some(0), "{}", stderr_of(s, "a"));
    insta::assert_snapshot!(host.project.scrub(&lines_about(&stderr_of(s, "a"), &id)));
    assert_eq!(
        ran(s).get("g 0"),
        Some(&1),
        "the finished step did not run again"
    );
    assert_eq!(ran(s).get("g 1"), Some(&1));
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_second_sigterm_stops_a_worker_at_once_and_its_run_is_still_taken_up() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let a = db.host("a", first);
    let b = db.host("b", checkout(s, ""));
    let id = submit(&a, "gate", "g", &[]);
    let mut wa = worker(&a, s, &[]);
    wait_for(&s.join("started"));
    let pid = rustix::process::Pid::from_raw(i32::try_from(wa.id()).expect("pid")).expect("pid");
    // The run in hand is held (stopped) so that it cannot end before the second signal.
    let run = children_of(wa.id()).pop().expect("the worker's run");
    let run = rustix::process::Pid::from_raw(i32::try_from(run).expect("pid")).expect("pid");
    rustix::process::kill_process(run, rustix::process::Signal::STOP).expect("SIGSTOP");
    let term =
        || rustix::process::kill_process(pid, rustix::process::Signal::TERM).expect("SIGTERM");
    term();
    // Two signals sent before the worker is scheduled are one (the kernel keeps one of a
    // kind pending): the second is sent once the first was taken.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !stderr_of(s, "a").contains("stopping: no new runs; 1 run in hand") {
        assert!(Instant::now() < deadline, "{}", stderr_of(s, "a"));
        std::thread::sleep(Duration::from_millis(10));
    }
    term();
    assert_eq!(wait(&mut wa, 10), Some(130));
    rustix::process::kill_process(run, rustix::process::Signal::CONT).expect("SIGCONT");
    std::fs::write(s.join("go"), "").expect("go");
    let mut wb = worker(&b, s, &["--until-empty"]);
    // The run's last process may still be letting go of it: the worker waits for it.
    let deadline = Instant::now() + Duration::from_secs(60);
    while state(&db, &id) != "done" {
        assert!(Instant::now() < deadline, "{}", stderr_of(s, "b"));
        if wb.try_wait().expect("wait").is_some() {
            wb = worker(&b, s, &["--until-empty"]);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = wb.kill();
    let _ = wb.wait();
    assert_eq!(ran(s).get("g 0"), Some(&1));
    assert_eq!(ran(s).get("g 1"), Some(&1));
}

/// Regression: `submit --queue ../x` was accepted (a queue name is a config section's name
/// and a word on every worker's log lines); a bad name is a usage error before any store is
/// asked.
#[test]
fn a_queue_name_that_is_not_a_plain_word_is_refused() {
    let project = Project::new();
    let mut seen = String::new();
    for name in ["../x", "", "a b", "q.x"] {
        for args in [
            &[
                "submit",
                "--agent-command",
                "true",
                "--queue",
                name,
                "steps",
            ][..],
            &["worker", "--queue", name],
        ] {
            let out = project.run(args, "");
            out.expect_code(2);
            seen.push_str(&format!("{args:?}\n{}", project.scrub(&out.stderr)));
        }
    }
    insta::assert_snapshot!(seen);
}

/// Regression (issue 31): a queue row's agent and limits became words of the worker's
/// command line, `--agent-command` included, so anyone who could write to the queue table
/// ran commands on every worker's host. A worker runs only the agent commands its host
/// allows (`--allow-agent-command`); a run with another, or a row whose words are not
/// what `mekara submit` writes (a value that is a flag of its own), fails without running
/// anything, with the reason recorded on the run, and the worker goes on with the next.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_worker_runs_only_the_agent_commands_its_host_allows() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let laptop = checkout(s, "");
    let db = Db::migrated(&laptop);
    let laptop = db.host("laptop", laptop);
    let ci = db.host("ci", checkout(s, ""));
    let pwned = s.join("pwned");
    let evil = format!("touch {}", pwned.display());
    let out = laptop.run(&["submit", "--agent-command", &evil, "paid"]);
    out.expect_code(0);
    let refused = out.stdout.trim().to_string();
    // Rows written into the table by hand: a limit whose value is a flag, and an agent
    // command smuggled in as a limit.
    let crafted = submit(&laptop, "paid", "", &[]);
    let smuggled = submit(&laptop, "paid", "", &[]);
    let client = &mut db.client();
    client
        .execute(
            "UPDATE mekara_queue SET limits = $2 WHERE run_id = $1",
            &[
                &crafted,
                &vec!["--max-cost".to_string(), format!("--agent-command={evil}")],
            ],
        )
        .expect("update");
    client
        .execute(
            "UPDATE mekara_queue SET limits = $2 WHERE run_id = $1",
            &[
                &smuggled,
                &vec!["--agent-command".to_string(), evil.clone()],
            ],
        )
        .expect("update");
    let allowed = submit(&laptop, "paid", "", &[]);

    let mut w = worker(&ci, s, &["--until-empty"]);
    assert_eq!(wait(&mut w, 60), Some(0), "{}", stderr_of(s, "ci"));
    let said = stderr_of(s, "ci");
    assert!(
        !pwned.exists(),
        "the worker ran a command it was not allowed: {said}"
    );
    assert!(
        said.contains(&format!(
            "refused run {refused}: this worker does not run the agent command `{evil}`"
        )),
        "{said}"
    );
    for id in [&refused, &crafted, &smuggled] {
        assert_eq!(state(&db, id), "failed", "{id}: {said}");
    }
    let shown = laptop.run(&["runs", "show", &refused]);
    assert!(
        shown
            .stdout
            .contains("start the worker with `--allow-agent-command")
            || shown
                .stderr
                .contains("start the worker with `--allow-agent-command"),
        "the reason is recorded on the run: {}{}",
        shown.stdout,
        shown.stderr
    );
    assert_eq!(state(&db, &allowed), "done", "{said}");
}

/// The moment a killed worker leaves behind: its child goes on to create the run it was
/// given, while the next worker claims that run as not started (no journal yet) and starts
/// it afresh. The test stands in for the dead worker's child between the lock the store
/// takes on a run it creates and the run's journal: it holds that lock (`mekara-run`,
/// the project, the id: the key every mekara computes for a run) while a worker claims the
/// run. The claim's child finds the id taken; the run must go back to the queue untried and
/// run once the other process let go, not fail with "entity already exists".
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_run_taken_by_a_dead_workers_child_while_claimed_afresh_is_given_back_not_failed() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let host = db.host("h", first);
    let id = submit(&host, "steps", "r", &[]);
    let mut holder = db.client();
    let key = "('x' || encode(substring(sha256(convert_to('mekara-run', 'UTF8') || '\\x00'::bytea \
               || convert_to('acme', 'UTF8') || '\\x00'::bytea || convert_to($1, 'UTF8')) \
               from 1 for 8), 'hex'))::bit(64)::bigint";
    holder
        .execute(&format!("SELECT pg_advisory_lock({key})"), &[&id])
        .expect("lock");
    let mut w = worker(&host, s, &["--until-empty"]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let said = loop {
        let said = stderr_of(s, "h");
        if said.contains(&format!("released run {id}"))
            || said.contains(&format!("failed run {id}"))
        {
            break said;
        }
        assert!(Instant::now() < deadline, "{said}");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        said.contains(&format!(
            "released run {id}: another process still holds it; it is tried again"
        )),
        "{said}"
    );
    holder
        .execute(&format!("SELECT pg_advisory_unlock({key})"), &[&id])
        .expect("unlock");
    assert_eq!(wait(&mut w, 60), Some(0), "{}", stderr_of(s, "h"));
    assert_eq!(state(&db, &id), "done", "{}", stderr_of(s, "h"));
    assert_eq!(ran(s).values().copied().collect::<Vec<_>>(), vec![1; 4]);
}

/// The lines a worker said (in `said`) of run `id`, and of its stopping, with the time a
/// run took (`completed in 1.2 s`) as `[S]`.
fn lines_about(said: &str, id: &str) -> String {
    said.lines()
        .filter(|l| l.contains(id) || l.starts_with("stopping:"))
        .map(|l| match l.find(" in ").zip(l.rfind(" s")) {
            Some((at, end)) if l.contains(": completed in ") && end > at => {
                format!("{} in [S]{}\n", &l[..at], &l[end..])
            }
            _ => format!("{l}\n"),
        })
        .collect()
}

/// The line a worker said (in `said`) of how run `id` ended.
fn line_of<'a>(said: &'a str, id: &str) -> &'a str {
    said.lines()
        .find(|l| l.contains(&format!("run {id}:")))
        .unwrap_or_default()
}

/// A queued run that stops for a person (a script's `ask`) waits for an answer: the worker
/// says what it asks, how to answer and how to go on, rather than that it failed, and the
/// answer then takes the run to its end.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_queued_run_that_asks_a_person_is_reported_waiting_with_how_to_answer() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    first.script(
        "asks",
        "Ask before deploying.",
        Some(&format!(
            r#"def execute(request):
    if ask("Deploy?", choices = ["yes", "no"]).answer == "yes":
        auto("echo deployed >> {}/log")
"#,
            s.display()
        )),
    );
    let db = Db::migrated(&first);
    let host = db.host("h", first);
    let id = submit(&host, "asks", "", &[]);
    let mut w = worker(&host, s, &["--until-empty"]);
    assert_eq!(wait(&mut w, 60), Some(0), "{}", stderr_of(s, "h"));
    let said = stderr_of(s, "h");
    insta::assert_snapshot!(host.project.scrub(line_of(&said, &id)));
    assert_eq!(state(&db, &id), "done", "{said}");
    host.run(&["answer", &id, "yes"]).expect_code(0);
    let resumed = host.run(&["run", "--resume", &id, "--agent-command", AGENT]);
    resumed.expect_code(0);
    assert_eq!(ran(s).get("deployed"), Some(&1), "{}", resumed.stderr);
}

/// A run whose process cannot start (here its arguments are longer than a command line
/// may hold, `E2BIG`, in a row written by hand) fails with the reason recorded on it, and
/// the worker goes on with the next run instead of ending.
#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_run_whose_process_cannot_start_fails_and_the_worker_goes_on() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let host = db.host("h", first);
    let unstartable = submit(&host, "steps", "u", &[]);
    db.client()
        .execute(
            "UPDATE mekara_queue SET arguments = $2 WHERE run_id = $1",
            &[&unstartable, &"x".repeat(300_000)],
        )
        .expect("update");
    let next = submit(&host, "steps", "n", &[]);
    let mut w = worker(&host, s, &["--until-empty"]);
    assert_eq!(wait(&mut w, 60), Some(0), "{}", stderr_of(s, "h"));
    let said = stderr_of(s, "h");
    assert_eq!(state(&db, &unstartable), "failed", "{said}");
    assert_eq!(state(&db, &next), "done", "{said}");
    let note: String = db
        .client()
        .query_one(
            "SELECT note FROM mekara_queue WHERE run_id = $1",
            &[&unstartable],
        )
        .expect("row")
        .get(0);
    let line = line_of(&said, &unstartable).replace(env!("CARGO_BIN_EXE_mekara"), "[MEKARA]");
    insta::assert_snapshot!(host.project.scrub(&line));
    assert!(
        line_of(&said, &unstartable).ends_with(&note),
        "the reason is recorded on the run: {note}"
    );
}

#[test]
#[cfg_attr(not(feature = "clients"), ignore = "needs PostgreSQL 15")]
fn a_worker_that_cannot_write_a_runs_log_gives_the_run_back_and_stops() {
    let shared = tempfile::tempdir().expect("tempdir");
    let s = shared.path();
    let first = checkout(s, "");
    let db = Db::migrated(&first);
    let host = db.host("h", first);
    let id = submit(&host, "steps", "r", &[]);
    // What the worker writes the run's output to is a folder: it cannot be opened.
    let log = host
        .project
        .root()
        .join(format!(".mekara/runs/{id}.worker.log"));
    std::fs::create_dir_all(&log).expect("a folder where the log goes");
    let mut w = worker(&host, s, &["--until-empty"]);
    let code = wait(&mut w, 60);
    let said = stderr_of(s, "h");
    assert_eq!(code, Some(1), "{said}");
    assert_eq!(state(&db, &id), "queued", "{said}");
    let attempts: i32 = db
        .client()
        .query_one(
            "SELECT attempts FROM mekara_queue WHERE run_id = $1",
            &[&id],
        )
        .expect("row")
        .get(0);
    assert_eq!(attempts, 0, "{said}");
    let error = said
        .lines()
        .find(|line| line.starts_with("error:"))
        .unwrap_or_else(|| panic!("no error line:\n{said}"));
    insta::assert_snapshot!(host.project.scrub(&error.replace(&id, "[RUN]")));
}
