//! Issue 29, "Fast at every length": every figure of its goals, side by side, in one run, for
//! three programs: the binary under test (NEW), an earlier build of it (PREV), and mekara's
//! Python predecessor (PyPI `mekara==0.1.2`) where the figure applies to it.
//!
//! ```text
//! cargo bench --locked --bench lengths -- [--quick] [NEW [PREV]]
//! ```
//!
//! NEW defaults to the release binary cargo builds for the bench; PREV to
//! `/tmp/mekara-prev-f8296ce` (`git worktree add /tmp/prev f8296ce && cd /tmp/prev &&
//! cargo build --release --locked`), left out when missing. The predecessor is the one
//! `bash benches/predecessor/install.sh` installs into `target/bench-peers/`; without it the
//! bench says so and leaves its column empty. `--quick` takes fewer samples and shorter runs,
//! for iterating on the bench itself; its figures are not the issue's.
//!
//! Each program gets its own temporary project and `HOME`. The figures:
//!
//! 1. `continue_compiled_script` over MCP (stdio, `benches/common/stdio.rs`): a run of 200 llm
//!    steps, each continue timed from request to reply; then a warm `status` with no run
//!    pending, in the same session; their ratio.
//! 2. the same over a run of 1,000 llm steps: the median of its first 20 calls and of its
//!    last 20, and their ratio (a call that replays the journal grows with the run).
//! 3. processes started per call: the server under `strace -f -e trace=execve` over one
//!    `start` and 50 continues; every `execve` after the server's own, per call.
//! 4. an unattended llm step above the agent's own cost: `benches/agent_overhead.sh`, which
//!    runs both binaries in the same rounds (the predecessor has no unattended runs).
//! 5. `status` (MCP, no run pending) and `mekara runs` in a project with 1,000 past runs,
//!    made once here with NEW (`mekara run` of a one-step script, two at a time), against an
//!    empty project; the same folder serves every program. The predecessor keeps no runs.
//! 6. the PostgreSQL store against the file store, for function steps and shell steps:
//!    `benches/store.sh NEW 0 PREV` (it starts its own PostgreSQL 15).
//! 7. no loss elsewhere: the `UserPromptSubmit` hook for a typed compiled script, spawn to
//!    exit; `mcp`'s cold start to the `tools/list` reply; its peak RSS idle after that.
//!
//! Every figure is a median with its spread (fastest .. slowest), the issue's target and a
//! verdict for NEW. Samples of different programs are taken interleaved where they are short,
//! so a slow moment of the machine lands on every column.

mod common;

use common::stdio::{Bench, Server, Session, load_average, range, round_order};
use common::{median, ms, verdict};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const DEFAULT_PREV: &str = "/tmp/mekara-prev-f8296ce";
const PREDECESSOR: &str = "target/bench-peers/predecessor/bin/mekara";

const TARGET_CONTINUE_MS: f64 = 1.0;
const TARGET_CONTINUE_PER_STATUS: f64 = 15.0;
const TARGET_LAST_PER_FIRST: f64 = 1.3;
const TARGET_UNATTENDED_MS: f64 = 5.0;
const TARGET_HISTORY_PER_EMPTY: f64 = 2.0;
const TARGET_PG_PER_FILES: f64 = 2.0;

/// How many samples each figure takes; `--quick` takes fewer.
struct Sizes {
    /// Llm steps of the run of figure 1.
    steps: usize,
    /// Llm steps of the long run of figure 2.
    long_steps: usize,
    /// Calls at each end of the long run.
    ends: usize,
    /// Calls at each end of the long run whose CPU time is taken (the kernel counts it in
    /// 10 ms ticks, so a window needs a few hundred calls to be read to a few per cent).
    cpu_ends: usize,
    /// Continues under strace.
    traced: usize,
    /// Warm `status` calls.
    status_calls: usize,
    /// Past runs in the history folder.
    history: usize,
    /// Processes timed per program (`mekara runs`, hooks, cold starts).
    spawns: usize,
    /// (steps, rounds) of `agent_overhead.sh`.
    unattended: (usize, usize),
    /// Rounds of `store.sh`.
    store_rounds: usize,
}

const FULL: Sizes = Sizes {
    steps: 200,
    long_steps: 1000,
    ends: 20,
    cpu_ends: 300,
    traced: 50,
    status_calls: 200,
    history: 1000,
    spawns: 21,
    unattended: (50, 5),
    store_rounds: 3,
};

const QUICK: Sizes = Sizes {
    steps: 50,
    long_steps: 200,
    ends: 20,
    cpu_ends: 50,
    traced: 10,
    status_calls: 50,
    history: 100,
    spawns: 5,
    unattended: (20, 2),
    store_rounds: 1,
};

/// A program measured, with its own project.
struct Program {
    label: &'static str,
    path: PathBuf,
    /// The Python predecessor: its scripts are Python generators under `.agents/skills/`, and
    /// it has no unattended runs, no run history and no stores.
    python: bool,
    bench: Bench,
}

impl Program {
    fn new(label: &'static str, path: PathBuf, python: bool) -> Program {
        let bench = Bench::new(&format!("lengths-{label}"));
        let program = Program {
            label,
            path,
            python,
            bench,
        };
        for n in [
            FULL.steps,
            FULL.long_steps,
            FULL.traced,
            QUICK.steps,
            QUICK.long_steps,
            QUICK.traced,
        ] {
            program.llm_script(n);
        }
        program
    }

    /// The MCP server, with `status` as its warm call.
    fn server(&self) -> Server {
        Server {
            label: self.label,
            program: self.path.clone(),
            args: vec!["mcp".into()],
            tool: "status",
            call: r#"{"name":"status","arguments":{}}"#,
            call_reply: r#""isError":false"#,
        }
    }

    /// `steps-N`: a script of N llm steps and nothing else, in this program's language.
    fn llm_script(&self, n: usize) {
        let name = format!("steps-{n}");
        let root = &self.bench.root;
        if self.python {
            let dir = root.join(".agents/skills").join(&name);
            write(
                &dir.join("SKILL.md"),
                "---\ndescription: llm steps\n---\nAnswer each step.\n",
            );
            write(
                &dir.join("mekara.py"),
                &format!(
                    "from mekara.scripting.runtime import llm\n\n\ndef execute(request):\n    for i in range({n}):\n        yield llm(\"Step %d: answer.\" % i, expects={{\"answer\": \"anything\"}})\n"
                ),
            );
        } else {
            write(
                &root.join(format!(".mekara/scripts/nl/{name}.md")),
                "Answer each step.\n",
            );
            write(
                &root.join(format!(".mekara/scripts/compiled/{name}.star")),
                &format!(
                    "def execute(request):\n    for i in range({n}):\n        llm(\"Step %d: answer.\" % i, expects = {{\"answer\": \"anything\"}})\n"
                ),
            );
        }
    }
}

/// A session of `server` in `bench`'s project, initialized.
fn open(bench: &Bench, server: &Server) -> Session {
    let mut session = bench.spawn(server);
    session.initialize(server);
    session
}

/// One `start` of `steps-N`, then its N continues, each timed and its reply checked.
fn llm_run(session: &mut Session, n: usize) -> Vec<f64> {
    llm_run_with_cpu(session, n, 0).0
}

/// [`llm_run`], also taking the CPU time the server and its children spend per call over
/// the first `cpu_ends` calls and over the last `cpu_ends` before the final one (which ends
/// the run, and with it the evaluator child whose time is counted): wall time on a shared
/// machine swings with the scheduler, CPU time shows whether the work per call grows.
fn llm_run_with_cpu(session: &mut Session, n: usize, cpu_ends: usize) -> (Vec<f64>, [f64; 2]) {
    start_steps(session, n);
    let server = session.child.id();
    let marks = [0, cpu_ends, n - 1 - cpu_ends, n - 1];
    let mut cpu = [0.0; 4];
    let mut times = Vec::with_capacity(n);
    for i in 1..=n {
        if cpu_ends > 0
            && let Some(at) = marks.iter().position(|m| *m == i - 1)
        {
            cpu[at] = tree_cpu_ms(server);
        }
        times.push(continue_step(session, None, i, n));
    }
    let per_call = |from: f64, to: f64| (to - from) / cpu_ends.max(1) as f64;
    (times, [per_call(cpu[0], cpu[1]), per_call(cpu[2], cpu[3])])
}

/// The first `ends` calls of a new run of `steps-N` and the last `ends` of another run of it
/// in the same session, taken in turns (one call of each, then the next), so that both ends
/// meet the same moments of a shared machine: the run is taken to its last `ends` calls
/// first, untimed, then the new run starts. Each call names its run by its handle.
fn ends_side_by_side(session: &mut Session, n: usize, ends: usize) -> (Vec<f64>, Vec<f64>) {
    let start = |session: &mut Session| -> String {
        start_steps(session, n);
        let line = &session.line;
        let from = line.find("handle is `").map(|at| at + "handle is `".len());
        let handle = from.and_then(|from| Some(&line[from..from + line[from..].find('`')?]));
        match handle {
            Some(handle) => handle.to_string(),
            None => session.fail("no handle in the reply to `start`"),
        }
    };
    let late = start(session);
    for i in 1..=n - ends {
        continue_step(session, Some(&late), i, n);
    }
    let early = start(session);
    let (mut firsts, mut lasts) = (Vec::new(), Vec::new());
    for k in 1..=ends {
        firsts.push(continue_step(session, Some(&early), k, n));
        lasts.push(continue_step(session, Some(&late), n - ends + k, n));
    }
    (firsts, lasts)
}

/// Starts a run of `steps-N` and checks that it hands out its first step.
fn start_steps(session: &mut Session, n: usize) {
    session.request(
        "tools/call",
        &format!(r#"{{"name":"start","arguments":{{"name":"steps-{n}"}}}}"#),
    );
    session.expect("Step 0: answer.");
}

/// Answers the llm step of run `run_id` (of the session's one run, when `None`), step `i`
/// of a run of `n`: the call's wall time in ms, its reply checked (the next step, or the
/// run's end).
fn continue_step(session: &mut Session, run_id: Option<&str>, i: usize, n: usize) -> f64 {
    let run = run_id.map_or_else(String::new, |id| format!(r#""run_id":"{id}","#));
    let started = Instant::now();
    session.request(
        "tools/call",
        &format!(
            r#"{{"name":"continue_compiled_script","arguments":{{{run}"outputs":{{"answer":"42"}}}}}}"#
        ),
    );
    let elapsed = ms(started.elapsed());
    if i < n {
        session.expect(&format!("Step {i}: answer."));
    } else {
        session.expect("ompleted");
    }
    elapsed
}

/// The CPU time (user and system, ms) that process `pid` and its descendants have used, from
/// `/proc`: a process's figure includes its threads that ended and its children it waited
/// for, and its children alive now are added.
fn tree_cpu_ms(pid: u32) -> f64 {
    // /proc counts in USER_HZ ticks, 100 a second on Linux.
    const MS_PER_TICK: f64 = 10.0;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command (which may hold spaces) in parentheses; utime, stime, cutime
    // and cstime are the 14th to the 17th of the line.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks: f64 = [11, 12, 13, 14]
        .iter()
        .filter_map(|i| fields.get(*i)?.parse::<f64>().ok())
        .sum();
    let mut children = Vec::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for task in tasks.flatten() {
            let listed = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            children.extend(
                listed
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
    }
    ticks * MS_PER_TICK + children.into_iter().map(tree_cpu_ms).sum::<f64>()
}

/// `calls` timed warm `status` calls, after as many unmeasured ones.
fn status_calls(session: &mut Session, server: &Server, calls: usize) -> Vec<f64> {
    for _ in 0..calls.min(50) {
        session.call_tool(server);
    }
    (0..calls)
        .map(|_| {
            let started = Instant::now();
            session.call_tool(server);
            ms(started.elapsed())
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let sizes = if quick { &QUICK } else { &FULL };
    let mut paths = args.iter().filter(|a| !a.starts_with("--"));
    let new = absolute(paths.next().map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_mekara")),
        PathBuf::from,
    ));
    let prev = paths
        .next()
        .map_or_else(|| PathBuf::from(DEFAULT_PREV), PathBuf::from);
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut programs = vec![Program::new("new", new, false)];
    if prev.is_file() {
        programs.push(Program::new("prev", absolute(prev), false));
    } else {
        eprintln!(
            "note: no previous binary at {}; measuring without it",
            prev.display()
        );
    }
    let predecessor = repo.join(PREDECESSOR);
    if predecessor.is_file() {
        programs.push(Program::new("predecessor", predecessor, true));
    } else {
        eprintln!(
            "note: the predecessor is not installed ({} is missing): run `bash benches/predecessor/install.sh`",
            predecessor.display()
        );
    }
    let load_before = load_average();
    let started = Instant::now();
    let mut report = Report::new(&programs);

    eprintln!("1. a run of {} llm steps, then warm status...", sizes.steps);
    let mut continues = Vec::new();
    let mut statuses = Vec::new();
    for program in &programs {
        let server = program.server();
        let mut session = open(&program.bench, &server);
        continues.push(llm_run(&mut session, sizes.steps));
        statuses.push(status_calls(&mut session, &server, sizes.status_calls));
        session.close();
    }
    report.section(&format!(
        "1. continue_compiled_script over MCP, a run of {} llm steps (each call; spread: fastest .. slowest)",
        sizes.steps
    ));
    report.samples(
        "   continue, median",
        &continues,
        3,
        "ms",
        &format!("<= {TARGET_CONTINUE_MS} ms"),
        TARGET_CONTINUE_MS,
    );
    report.samples(
        &format!(
            "   warm status (no run pending, {} calls)",
            sizes.status_calls
        ),
        &statuses,
        3,
        "ms",
        "",
        f64::INFINITY,
    );
    report.ratios(
        "   continue / status (medians)",
        &ratio_of_medians(&continues, &statuses),
        TARGET_CONTINUE_PER_STATUS,
    );

    eprintln!("2. a run of {} llm steps...", sizes.long_steps);
    let mut firsts = Vec::new();
    let mut lasts = Vec::new();
    let mut cpu = Vec::new();
    for program in &programs {
        let mut session = open(&program.bench, &program.server());
        let (times, ends) = llm_run_with_cpu(&mut session, sizes.long_steps, sizes.cpu_ends);
        session.close();
        firsts.push(times[..sizes.ends].to_vec());
        lasts.push(times[times.len() - sizes.ends..].to_vec());
        cpu.push(ends);
    }
    report.section(&format!(
        "2. the same over a run of {} llm steps: its first {} calls and its last {}",
        sizes.long_steps, sizes.ends, sizes.ends
    ));
    report.samples(
        "   first calls, median",
        &firsts,
        3,
        "ms",
        "",
        f64::INFINITY,
    );
    report.samples("   last calls, median", &lasts, 3, "ms", "", f64::INFINITY);
    report.ratios(
        "   last / first (medians)",
        &ratio_of_medians(&lasts, &firsts),
        TARGET_LAST_PER_FIRST,
    );
    // The same ends taken in turns from two runs (the predecessor takes one run at a time).
    let (mut side_firsts, mut side_lasts) = (Vec::new(), Vec::new());
    for program in &programs {
        if program.python {
            side_firsts.push(Vec::new());
            side_lasts.push(Vec::new());
            continue;
        }
        let mut session = open(&program.bench, &program.server());
        let (firsts, lasts) = ends_side_by_side(&mut session, sizes.long_steps, sizes.ends);
        session.close();
        side_firsts.push(firsts);
        side_lasts.push(lasts);
    }
    report.samples(
        "   taken in turns: first calls of a new run",
        &side_firsts,
        3,
        "ms",
        "",
        f64::INFINITY,
    );
    report.samples(
        "   taken in turns: last calls of another",
        &side_lasts,
        3,
        "ms",
        "",
        f64::INFINITY,
    );
    report.ratios(
        "   taken in turns: last / first (medians)",
        &ratio_of_medians(&side_lasts, &side_firsts),
        TARGET_LAST_PER_FIRST,
    );
    let cpu_cell = |at: usize| -> Vec<String> {
        cpu.iter()
            .map(|ends| format!("{:.3} ms", ends[at]))
            .collect()
    };
    report.line(
        &format!("   CPU per call, first {} calls", sizes.cpu_ends),
        &cpu_cell(0),
        "",
        "",
    );
    report.line(
        &format!("   CPU per call, last {} calls", sizes.cpu_ends),
        &cpu_cell(1),
        "",
        "",
    );
    report.line(
        "   CPU per call, last / first",
        &cpu.iter()
            .map(|ends| format!("{:.2}x", ends[1] / ends[0]))
            .collect::<Vec<_>>(),
        "(flat: the work per call)",
        "",
    );

    eprintln!("3. processes per call, under strace...");
    report.section(&format!(
        "3. processes started per call (strace -f -e trace=execve; one start and {} continues)",
        sizes.traced
    ));
    let counts: Vec<Option<usize>> = programs
        .iter()
        .map(|p| execs_per_call(p, sizes.traced))
        .collect();
    report.line(
        "   execve after the server's own",
        &counts
            .iter()
            .map(|c| {
                c.map_or("strace missing".into(), |execs| {
                    format!(
                        "{execs} ({:.2} per call)",
                        execs as f64 / (sizes.traced + 1) as f64
                    )
                })
            })
            .collect::<Vec<_>>(),
        "1 (one child per run)",
        "",
    );

    eprintln!("4. unattended llm steps (benches/agent_overhead.sh)...");
    report.section(
        "4. an unattended llm step above the agent's own cost (benches/agent_overhead.sh)",
    );
    unattended(&mut report, repo, &programs, sizes.unattended);

    eprintln!("5. a history of {} past runs...", sizes.history);
    history(&mut report, &programs, sizes);

    eprintln!("6. the PostgreSQL store against the files (benches/store.sh)...");
    report.section("6. the PostgreSQL store against the file store, per step (benches/store.sh)");
    stores(&mut report, repo, &programs, sizes.store_rounds);

    eprintln!("7. hooks, cold starts, idle memory...");
    no_loss(&mut report, &programs, sizes.spawns);

    println!();
    println!(
        "issue 29 benchmark, {}",
        if quick {
            "QUICK (not the issue's figures)"
        } else {
            "full"
        }
    );
    for program in &programs {
        println!("  {:<12} {}", program.label, program.path.display());
    }
    println!(
        "load average: {} before, {} after; {:.0} s in all",
        load_before,
        load_average(),
        started.elapsed().as_secs_f64()
    );
    println!();
    report.print();
}

/// Counts the `execve`s of `program`'s MCP server and its children over one start and `n`
/// continues, after its own. `None` when strace is not installed.
fn execs_per_call(program: &Program, n: usize) -> Option<usize> {
    let strace = common::find_in_path(&program.bench.path, "strace")?;
    let log = program.bench.dir.join("strace.log");
    let mut args: Vec<String> = ["-f", "-qq", "-e", "trace=execve", "-o"]
        .map(String::from)
        .to_vec();
    args.push(log.display().to_string());
    args.push(program.path.display().to_string());
    args.push("mcp".into());
    let server = Server {
        program: strace,
        args,
        ..program.server()
    };
    let mut session = open(&program.bench, &server);
    llm_run(&mut session, n);
    session.close();
    let text = std::fs::read_to_string(&log).expect("strace's log");
    // Successful calls only (a failed one is a PATH lookup); a call cut by another process's
    // line ends in its `resumed` line.
    let execs = text
        .lines()
        .filter(|l| l.contains("execve") && l.trim_end().ends_with("= 0"))
        .count();
    Some(execs.saturating_sub(1))
}

fn unattended(
    report: &mut Report,
    repo: &Path,
    programs: &[Program],
    (steps, rounds): (usize, usize),
) {
    let binaries: Vec<&Program> = programs.iter().filter(|p| !p.python).collect();
    let mut command = Command::new("bash");
    command
        .arg(repo.join("benches/agent_overhead.sh"))
        .arg(&binaries[0].path)
        .arg(steps.to_string())
        .arg(rounds.to_string())
        .args(binaries[1..].iter().map(|p| &p.path));
    let out = run_script(&mut command);
    // `X ms per llm step (median of R runs of S steps; rounds LO .. HI ms)`.
    let overhead = |p: &Program| -> Option<(f64, String)> {
        let rest = find_after(&out, &format!("mekara overhead ({}): ", p.path.display()))?;
        let median = rest.split_whitespace().next()?.parse::<f64>().ok()?;
        let spread = rest.split("; rounds ").nth(1)?.trim_end_matches(" ms)");
        Some((median, spread.replace(" .. ", "..")))
    };
    let cells: Vec<String> = programs
        .iter()
        .map(|p| match overhead(p) {
            None if p.python => "no unattended runs".into(),
            None => "?".into(),
            Some((median, spread)) => format!("{median:.2} ms ({spread})"),
        })
        .collect();
    report.line(
        &format!("   per llm step ({rounds} runs of {steps} steps)"),
        &cells,
        &format!("<= {TARGET_UNATTENDED_MS} ms"),
        &overhead(binaries[0]).map_or("?".into(), |(o, _)| {
            verdict(o, TARGET_UNATTENDED_MS, "ms", 2)
        }),
    );
    if let Some(direct) = find_after(&out, "agent command run directly: ") {
        report.note(&format!("   (the agent command alone: {direct})"));
    }
}

/// Figure 5: `status` and `mekara runs` with many past runs against none.
fn history(report: &mut Report, programs: &[Program], sizes: &Sizes) {
    let empty = Bench::new("lengths-empty");
    let full = Bench::new("lengths-history");
    write(&full.root.join(".mekara/scripts/nl/one.md"), "Say hello.\n");
    write(
        &full.root.join(".mekara/scripts/compiled/one.star"),
        "def execute(request):\n    auto(\"echo hello\", context = \"hello\")\n",
    );
    // Two at a time, with the binary under test.
    let made = Instant::now();
    std::thread::scope(|scope| {
        for worker in 0..2 {
            let (full, new) = (&full, &programs[0].path);
            scope.spawn(move || {
                for _ in (worker..sizes.history).step_by(2) {
                    let out = command(new, full)
                        .args(["run", "one"])
                        .output()
                        .expect("spawn mekara run");
                    assert!(out.status.success(), "mekara run one: {out:?}");
                }
            });
        }
    });
    let journals = std::fs::read_dir(full.root.join(".mekara/runs"))
        .expect("the runs folder")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".jsonl"))
        .count();
    assert_eq!(journals, sizes.history, "one journal per run");
    report.section(&format!(
        "5. status and `mekara runs` with {} past runs (made with new in {:.0} s) against an empty project",
        sizes.history,
        made.elapsed().as_secs_f64()
    ));

    let rust: Vec<&Program> = programs.iter().filter(|p| !p.python).collect();
    let mut first = Vec::new();
    let mut warm_empty = Vec::new();
    let mut warm_full = Vec::new();
    let mut runs_empty = Vec::new();
    let mut runs_full = Vec::new();
    for program in &rust {
        let server = program.server();
        let mut empty_session = open(&empty, &server);
        let mut full_session = open(&full, &server);
        let started = Instant::now();
        full_session.call_tool(&server);
        first.push(vec![ms(started.elapsed())]);
        let (mut e, mut f) = (Vec::new(), Vec::new());
        for _ in 0..20 {
            empty_session.call_tool(&server);
            full_session.call_tool(&server);
        }
        for _ in 0..sizes.status_calls {
            let started = Instant::now();
            empty_session.call_tool(&server);
            e.push(ms(started.elapsed()));
            let started = Instant::now();
            full_session.call_tool(&server);
            f.push(ms(started.elapsed()));
        }
        empty_session.close();
        full_session.close();
        warm_empty.push(e);
        warm_full.push(f);
        let (mut e, mut f) = (Vec::new(), Vec::new());
        for round in 0..=sizes.spawns {
            for which in round_order(2, round) {
                let bench = if which == 0 { &empty } else { &full };
                let started = Instant::now();
                let out = command(&program.path, bench)
                    .arg("runs")
                    .output()
                    .expect("spawn mekara runs");
                let elapsed = ms(started.elapsed());
                assert!(out.status.success(), "mekara runs: {out:?}");
                if round > 0 {
                    if which == 0 { &mut e } else { &mut f }.push(elapsed);
                }
            }
        }
        runs_empty.push(e);
        runs_full.push(f);
    }
    let pad = |values: Vec<Vec<f64>>| -> Vec<Vec<f64>> {
        let mut values = values;
        values.resize(programs.len(), Vec::new());
        values
    };
    let (first, warm_empty, warm_full, runs_empty, runs_full) = (
        pad(first),
        pad(warm_empty),
        pad(warm_full),
        pad(runs_empty),
        pad(runs_full),
    );
    report.note("   (the predecessor keeps no runs: its column is empty)");
    report.samples(
        "   first status in the history",
        &first,
        2,
        "ms",
        "",
        f64::INFINITY,
    );
    report.samples(
        "   warm status, empty project",
        &warm_empty,
        3,
        "ms",
        "",
        f64::INFINITY,
    );
    report.samples(
        "   warm status, with the history",
        &warm_full,
        3,
        "ms",
        "",
        f64::INFINITY,
    );
    report.ratios(
        "   status: history / empty",
        &ratio_of_medians(&warm_full, &warm_empty),
        TARGET_HISTORY_PER_EMPTY,
    );
    report.samples(
        &format!("   `mekara runs`, empty project ({} runs)", sizes.spawns),
        &runs_empty,
        2,
        "ms",
        "",
        f64::INFINITY,
    );
    report.samples(
        "   `mekara runs`, with the history",
        &runs_full,
        2,
        "ms",
        "",
        f64::INFINITY,
    );
    report.ratios(
        "   mekara runs: history / empty",
        &ratio_of_medians(&runs_full, &runs_empty),
        TARGET_HISTORY_PER_EMPTY,
    );
}

fn ratio_of_medians(over: &[Vec<f64>], under: &[Vec<f64>]) -> Vec<f64> {
    over.iter()
        .zip(under)
        .map(|(o, u)| {
            if o.is_empty() {
                f64::NAN
            } else {
                median(o) / median(u)
            }
        })
        .collect()
}

/// Figure 6, from `benches/store.sh`'s lines.
fn stores(report: &mut Report, repo: &Path, programs: &[Program], rounds: usize) {
    let binaries: Vec<&Program> = programs.iter().filter(|p| !p.python).collect();
    let mut command = Command::new("bash");
    command
        .arg(repo.join("benches/store.sh"))
        .arg(&binaries[0].path)
        .arg("0")
        .args(binaries[1..].iter().map(|p| &p.path))
        .env("ROUNDS", rounds.to_string());
    let out = run_script(&mut command);
    // The script prints one block per binary, in the order given; none for the predecessor.
    let blocks: Vec<&str> = out.split("append latency per step, ").skip(1).collect();
    let block = |p: &Program| -> Option<&str> {
        let k = binaries.iter().position(|b| b.path == p.path)?;
        blocks.get(k).copied()
    };
    for kind in ["function", "shell"] {
        for store in ["files", "postgresql"] {
            let cells: Vec<String> = programs
                .iter()
                .map(|p| match block(p) {
                    None if p.python => "no stores".into(),
                    block => block
                        .and_then(|b| find_after(b, &format!("{kind} steps, {store} ")))
                        .map_or("?".into(), |rest| {
                            rest.split("  (+").next().unwrap_or("").trim().to_string()
                        }),
                })
                .collect();
            report.line(&format!("   {kind} steps, {store}"), &cells, "", "");
        }
        // `... (+D ms per step, R.RRx the files)`.
        let ratios: Vec<f64> = programs
            .iter()
            .map(|p| {
                block(p)
                    .and_then(|b| find_after(b, &format!("{kind} steps, postgresql ")))
                    .and_then(|rest| {
                        let ratio = rest.split(", ").nth(1)?.split('x').next()?;
                        ratio.parse().ok()
                    })
                    .unwrap_or(f64::NAN)
            })
            .collect();
        report.ratios(
            &format!("   {kind} steps: postgresql / files"),
            &ratios,
            TARGET_PG_PER_FILES,
        );
    }
}

/// Figure 7: hooks, cold start, idle memory, interleaved across the programs.
fn no_loss(report: &mut Report, programs: &[Program], spawns: usize) {
    let mut hooks = vec![Vec::new(); programs.len()];
    let mut cold = vec![Vec::new(); programs.len()];
    let mut rss = vec![Vec::new(); programs.len()];
    let mut anon = vec![Vec::new(); programs.len()];
    for round in 0..=spawns {
        for i in round_order(programs.len(), round) {
            let program = &programs[i];
            let (elapsed, answer) = hook(program);
            assert!(
                !answer.is_empty(),
                "{}: the hook said nothing",
                program.label
            );
            let (start, kib, anon_kib) = program
                .bench
                .cold_start_memory(&program.server(), Duration::from_millis(250));
            if round > 0 {
                hooks[i].push(elapsed);
                cold[i].push(ms(start));
                rss[i].push(kib as f64 / 1024.0);
                anon[i].push(anon_kib as f64 / 1024.0);
            }
        }
    }
    report.section(&format!(
        "7. no loss elsewhere ({spawns} of each, interleaved)"
    ));
    report.no_loss(
        "   hook, typed compiled script, spawn to exit",
        &hooks,
        2,
        "ms",
    );
    report.no_loss("   mcp cold start to tools/list", &cold, 1, "ms");
    report.no_loss("   peak RSS idle after tools/list", &rss, 1, "MiB");
    report.no_loss("   of it anonymous (not the mapped code)", &anon, 2, "MiB");
    report.note(
        "   (the per-evaluation memory cap: benches/hostile_memory.sh; durability: benches/kill_harness.sh)",
    );
}

/// One `UserPromptSubmit` hook for a typed compiled script: its time and its answer.
fn hook(program: &Program) -> (f64, String) {
    let root = &program.bench.root;
    let input = serde_json::json!({
        "prompt": format!("/steps-{} some arguments", FULL.steps),
        "cwd": root.display().to_string(),
    })
    .to_string();
    let started = Instant::now();
    let mut child = command(&program.path, &program.bench)
        .args(["hook", "reroute-user-commands"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the hook");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(input.as_bytes())
        .expect("write the hook's input");
    let out = child.wait_with_output().expect("wait for the hook");
    (
        ms(started.elapsed()),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// `program` in `bench`'s project, with its `HOME` and nothing else of the caller's
/// environment but `PATH` (a `MEKARA_STORE_URL` there would send the runs elsewhere).
fn command(program: &Path, bench: &Bench) -> Command {
    let mut command = Command::new(program);
    command
        .current_dir(&bench.root)
        .env_clear()
        .env("PATH", &bench.path)
        .env("HOME", &bench.home);
    command
}

/// Runs a bench script, shows its output as it goes on stderr, and returns its stdout.
fn run_script(command: &mut Command) -> String {
    let out = command
        .stderr(Stdio::inherit())
        .output()
        .expect("spawn bash");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    eprint!("{text}");
    assert!(out.status.success(), "{command:?} failed: {}", out.status);
    text
}

/// The rest of the first line of `text` that starts with `prefix` (after spaces).
fn find_after(text: &str, prefix: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.trim_start().strip_prefix(prefix))
        .map(|rest| rest.trim().to_string())
}

/// Each program's median and spread (fastest..slowest); `-` where it was not measured.
fn cells(samples: &[Vec<f64>], decimals: usize, unit: &str) -> Vec<String> {
    samples
        .iter()
        .map(|v| {
            if v.is_empty() {
                return "-".into();
            }
            let (lo, hi) = range(v);
            format!(
                "{:.decimals$} {unit} ({lo:.decimals$}..{hi:.decimals$})",
                median(v)
            )
        })
        .collect()
}

/// The report, printed at the end: one column per program.
struct Report {
    labels: Vec<&'static str>,
    lines: Vec<String>,
}

impl Report {
    fn new(programs: &[Program]) -> Report {
        Report {
            labels: programs.iter().map(|p| p.label).collect(),
            lines: Vec::new(),
        }
    }

    fn section(&mut self, title: &str) {
        self.lines.push(title.to_string());
    }

    fn note(&mut self, text: &str) {
        self.lines.push(text.to_string());
    }

    /// A figure per program: its median and spread; the verdict is NEW's against `target`.
    fn samples(
        &mut self,
        label: &str,
        samples: &[Vec<f64>],
        decimals: usize,
        unit: &str,
        target_text: &str,
        target: f64,
    ) {
        let verdict = if target.is_finite() {
            verdict(median(&samples[0]), target, unit, decimals)
        } else {
            String::new()
        };
        self.line(
            label,
            &cells(samples, decimals, unit),
            target_text,
            &verdict,
        );
    }

    /// A figure that must not get worse: NEW's median against PREV's.
    fn no_loss(&mut self, label: &str, samples: &[Vec<f64>], decimals: usize, unit: &str) {
        let verdict = match samples.get(1) {
            Some(prev) if !prev.is_empty() && self.labels[1] == "prev" => {
                format!("new / prev = {:.2}x", median(&samples[0]) / median(prev))
            }
            _ => String::new(),
        };
        self.line(label, &cells(samples, decimals, unit), "no loss", &verdict);
    }

    /// A ratio per program; the verdict is NEW's.
    fn ratios(&mut self, label: &str, ratios: &[f64], target: f64) {
        let cells: Vec<String> = ratios
            .iter()
            .map(|r| {
                if r.is_nan() {
                    "-".into()
                } else {
                    format!("{r:.2}x")
                }
            })
            .collect();
        self.line(
            label,
            &cells,
            &format!("<= {target}x"),
            &verdict(ratios[0], target, "x", 2),
        );
    }

    fn line(&mut self, label: &str, cells: &[String], target: &str, verdict: &str) {
        let mut text = format!("{label:<46}");
        for cell in cells {
            text.push_str(&format!(" {cell:>28}"));
        }
        text.push_str(&format!("   {target:<22} {verdict}"));
        self.lines.push(text.trim_end().to_string());
    }

    fn print(&self) {
        let mut header = format!("{:<46}", "figure");
        for label in &self.labels {
            header.push_str(&format!(" {label:>28}"));
        }
        header.push_str(&format!("   {:<22} verdict (new)", "target"));
        println!("{header}");
        println!("{}", "-".repeat(header.len()));
        for line in &self.lines {
            println!("{line}");
        }
    }
}

fn absolute(path: PathBuf) -> PathBuf {
    std::fs::canonicalize(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}
