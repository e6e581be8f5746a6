//! The engine's overhead figures, printed side by side with their targets.
//!
//! `cargo bench --locked --bench engine` runs the release binary in a temporary project:
//!
//! 1. the cost of an auto step above spawning the same shell command directly, with bash and
//!    with sh (mekara takes `bash` from `PATH`, else `/bin/sh`, so the sh figures run mekara
//!    with a `PATH` that holds only `sh` and `true`);
//! 2. the wall time of a 1000-step script of function steps that ends at an llm step, run
//!    through, and resumed after being interrupted there (the resume re-evaluates every
//!    journaled step);
//! 3. the peak RSS of those runs;
//! 4. the instructions mekara itself executes per shell step, counted by callgrind (when
//!    valgrind is installed): the same count on every run of the same binary, whatever the
//!    rest of the machine does, so it shows a change in mekara's own per-step work that the
//!    wall-time figures are too noisy to show.
//!
//! Every figure is a median of runs taken interleaved, so that a slow moment of the machine
//! does not land on one figure only.
//!
//! The step overhead is a small difference of large numbers: on this kind of virtual machine
//! the cost of spawning `bash -c true` itself drifts by a fifth from one second to the next.
//! So it gets many more rounds ([`STEP_ROUNDS`]) than the other figures, each round pairs a
//! mekara run with the direct spawns and a 0-step run taken right beside it (in alternating
//! order, so that a steady drift cancels), and the figure is the median of the per-round
//! differences, printed with its standard error. mekara's output goes to `/dev/null`, as the
//! direct spawns' does not reach anyone either: a reader of the output would add its own
//! work to one side only. The writes themselves are counted.
//!
//! The figure is then split in two. Most of a step is the shell's own CPU time, and that is
//! what drifts; it is read with `getrusage(RUSAGE_CHILDREN)`. The rest (wall time minus the
//! shells' CPU) is what the spawner adds, and it is steady to a few microseconds. Of the
//! rest, mekara's own CPU time (its thread's, from `/proc/PID/schedstat` once it has exited
//! and before it is reaped) is set against the direct spawner's (`CLOCK_THREAD_CPUTIME_ID`).
//!
//! A plain `main`, not criterion: each sample is a whole process, and the figures only make
//! sense side by side.

use super::common;
use common::{find_in_path, median, ms, verdict};

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::resource::{UsageWho, getrusage};
use nix::time::{ClockId, clock_gettime};
use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};

/// Samples per figure.
const RUNS: usize = 15;
/// Rounds of the step-overhead figure (see the module comment); `MEKARA_BENCH_ROUNDS`
/// sets another number (the standard error shrinks with its square root).
const STEP_ROUNDS: usize = 200;
/// Steps of the shell-step script.
const SHELL_STEPS: u32 = 200;
/// Steps of the function-step script.
const FUNCTION_STEPS: u32 = 1000;

const TARGET_STEP_OVERHEAD_MS: f64 = 0.05;
const TARGET_RUN_MS: f64 = 500.0;
const TARGET_RSS_MB: f64 = 30.0;

/// GNU time: its `-f %M` is the child's `ru_maxrss` from `wait4`, in KiB.
const GNU_TIME: &str = "/usr/bin/time";

/// The prompt `mekara run` prints at an llm step without expects, before it reads a line.
const PRESS_ENTER: &str = "Press Enter when done.";

pub(crate) fn main() {
    let bench = Bench::new();
    let bash = find_in_path(&std::env::var_os("PATH").unwrap_or_default(), "bash")
        .expect("bash on PATH: the bash figures need it");
    let sh = PathBuf::from("/bin/sh");
    let sh_only_path = bench.sh_only_path();
    bench.check_shell(&bench.path, "bash");
    bench.check_shell(&sh_only_path, "sh");

    let step_rounds = std::env::var("MEKARA_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(STEP_ROUNDS);
    eprintln!("measuring the step overhead ({step_rounds} rounds)...");
    let mut samples = Samples::default();
    let shells = [(&bench.path, bash.as_path()), (&sh_only_path, sh.as_path())];
    // One unmeasured round first: page cache, the binary's first start.
    for round in 0..=step_rounds {
        for (into, (path, shell)) in samples.shells.iter_mut().zip(shells) {
            let empty = || bench.run_quiet(path, &["run", "empty"]);
            let direct = || spawn_directly(shell, &bench.root, path, &bench.home);
            // Alternating order: a steady drift raises the first and the last in turn.
            let (e, d, steps) = if round % 2 == 0 {
                let (e, d) = (empty(), direct());
                (e, d, bench.run_quiet(path, &["run", "shell200"]))
            } else {
                let steps = bench.run_quiet(path, &["run", "shell200"]);
                let d = direct();
                (empty(), d, steps)
            };
            if round > 0 {
                into.empty.push(e);
                into.steps.push(steps);
                into.direct.push(d);
            }
        }
    }
    eprintln!("measuring the function-step script ({RUNS} runs)...");
    for round in 0..=RUNS {
        let full = bench.run_ok(&bench.path, &["run", "fn1000"], "\n");
        let (interrupted, resumed) = bench.interrupt_and_resume();
        if round > 0 {
            samples.full_run.push(full);
            samples.interrupted.push(interrupted);
            samples.resume.push(resumed);
        }
    }
    let rss = bench.peak_rss();
    eprintln!("counting instructions per step under callgrind...");
    let instructions = bench.instructions_per_step();

    print_report(&bench, &bash, &sh, &samples, &rss, instructions.as_ref());
}

/// The temporary project, its home folder, and the binary under test.
struct Bench {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    binary: PathBuf,
    /// The `PATH` mekara gets for the bash figures (the caller's).
    path: OsString,
}

impl Bench {
    fn new() -> Bench {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("project");
        let home = dir.path().join("home");
        std::fs::create_dir_all(&home).expect("mkdir home");
        let script = |name: &str, nl: &str, star: &str| {
            write_file(&root.join(format!(".mekara/scripts/nl/{name}.md")), nl);
            write_file(
                &root.join(format!(".mekara/scripts/compiled/{name}.star")),
                star,
            );
        };
        script(
            "empty",
            "Nothing to do.\n",
            "def execute(request):\n    pass\n",
        );
        script(
            "shell200",
            &format!("Run `true` {SHELL_STEPS} times.\n"),
            &format!(
                "def execute(request):\n    for i in range({SHELL_STEPS}):\n        auto(\"true\")\n"
            ),
        );
        script(
            "shell400",
            &format!("Run `true` {} times.\n", 2 * SHELL_STEPS),
            &format!(
                "def execute(request):\n    for i in range({}):\n        auto(\"true\")\n",
                2 * SHELL_STEPS
            ),
        );
        script(
            "fn1000",
            &format!("Double the numbers below {FUNCTION_STEPS}, then finish up.\n"),
            &format!(
                "def f(i):\n    return i * 2\n\n\
                 def execute(request):\n    for i in range({FUNCTION_STEPS}):\n        auto(f, {{\"i\": i}})\n    llm(\"finish up\")\n"
            ),
        );
        script(
            "which_shell",
            "Say which shell runs steps.\n",
            "def execute(request):\n    print(auto(\"echo shell=${BASH_VERSION:+bash}\").output)\n",
        );
        Bench {
            _dir: dir,
            root,
            home,
            // `MEKARA_BENCH_BINARY` measures another build (say, of an older commit).
            binary: std::env::var_os("MEKARA_BENCH_BINARY").map_or_else(
                || PathBuf::from(env!("CARGO_BIN_EXE_mekara")),
                PathBuf::from,
            ),
            path: std::env::var_os("PATH").unwrap_or_default(),
        }
    }

    /// A folder holding only `sh` and `true`, for a `PATH` without bash.
    fn sh_only_path(&self) -> OsString {
        let bin = self
            .home
            .parent()
            .expect("home has a parent")
            .join("sh-only-bin");
        std::fs::create_dir_all(&bin).expect("mkdir sh-only-bin");
        for tool in ["sh", "true"] {
            let target =
                find_in_path(&self.path, tool).unwrap_or_else(|| panic!("`{tool}` on PATH"));
            std::os::unix::fs::symlink(target, bin.join(tool)).expect("symlink");
        }
        bin.into_os_string()
    }

    /// Makes sure mekara runs steps with `expected` under `path`, so no figure is mislabelled.
    fn check_shell(&self, path: &OsString, expected: &str) {
        let out = self
            .command(path, &["run", "which_shell"])
            .stdin(Stdio::null())
            .output()
            .expect("spawn mekara");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let got = if stdout.contains("shell=bash") {
            "bash"
        } else {
            "sh"
        };
        assert!(
            out.status.success() && got == expected,
            "expected steps to run with {expected}:\n{stdout}"
        );
    }

    /// `mekara ARGS` in the project, with a hermetic environment and the given `PATH`.
    fn command(&self, path: &OsString, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.binary);
        cmd.args(args).current_dir(&self.root);
        hermetic(&mut cmd, path, &self.home);
        cmd
    }

    /// Runs mekara with `stdin`, checks that the run completed, and returns its wall time.
    fn run_ok(&self, path: &OsString, args: &[&str], stdin: &str) -> Duration {
        let (elapsed, code, stdout) = timed(self.command(path, args), stdin);
        assert!(
            code == Some(0) && stdout.contains(" completed: "),
            "`mekara {}` failed ({code:?}):\n{stdout}",
            args.join(" ")
        );
        elapsed
    }

    /// Runs mekara with its output to `/dev/null` and checks that it succeeded. Returns its
    /// wall time and the CPU time of mekara itself (its main thread, from
    /// `/proc/PID/schedstat` once it has exited and before it is reaped; the steps' shells
    /// are not in it).
    fn run_quiet(&self, path: &OsString, args: &[&str]) -> Timed {
        let children_before = children_cpu();
        let started = Instant::now();
        let mut child = self
            .command(path, args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mekara");
        let pid = Pid::from_child(&child);
        waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        )
        .expect("wait for mekara to exit");
        let wall = started.elapsed();
        let schedstat = std::fs::read_to_string(format!("/proc/{}/schedstat", child.id()))
            .expect("read /proc/PID/schedstat");
        let cpu_ns: u64 = schedstat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse().ok())
            .unwrap_or_else(|| panic!("no run time in /proc/PID/schedstat: {schedstat}"));
        let status = child.wait().expect("reap mekara");
        assert!(
            status.success(),
            "`mekara {}` failed: {status}",
            args.join(" ")
        );
        let cpu = Duration::from_nanos(cpu_ns);
        Timed {
            wall,
            cpu,
            // mekara and the shells it reaped, less mekara.
            shells: children_cpu()
                .checked_sub(children_before)
                .expect("children only gain CPU time")
                .saturating_sub(cpu),
        }
    }

    /// Runs `fn1000` with stdin closed, so it stops at the llm step (exit 1, the run saved),
    /// then resumes it with an answer. Returns both wall times.
    fn interrupt_and_resume(&self) -> (Duration, Duration) {
        let (interrupted, code, stdout) = timed(self.command(&self.path, &["run", "fn1000"]), "");
        assert_eq!(
            code,
            Some(1),
            "the run should stop at the llm step:\n{stdout}"
        );
        let id = resume_id(&stdout);
        let resumed = self.run_ok(&self.path, &["run", "--resume", &id], "\n");
        (interrupted, resumed)
    }

    /// Instructions of mekara's own (user space, its shells not counted) per shell step:
    /// a run of `2 x SHELL_STEPS` steps less one of `SHELL_STEPS`, so start-up cancels.
    /// `Err` says why there is no count (no valgrind on `PATH`).
    fn instructions_per_step(&self) -> Result<f64, String> {
        let valgrind = find_in_path(&self.path, "valgrind")
            .ok_or_else(|| "no valgrind on PATH".to_string())?;
        let count = |script: &str| -> u64 {
            let mut cmd = Command::new(&valgrind);
            cmd.args(["--tool=callgrind", "--callgrind-out-file=/dev/null"])
                .arg(&self.binary)
                .args(["run", script])
                .current_dir(&self.root);
            hermetic(&mut cmd, &self.path, &self.home);
            let (_, code, output) = timed(cmd, "");
            assert_eq!(
                code,
                Some(0),
                "`mekara run {script}` under callgrind:\n{output}"
            );
            // `==PID== Collected : N`, on stderr.
            output
                .lines()
                .find_map(|l| l.split("Collected :").nth(1))
                .and_then(|n| n.trim().parse().ok())
                .unwrap_or_else(|| panic!("no instruction count from callgrind:\n{output}"))
        };
        let (one, two) = (count("shell200"), count("shell400"));
        Ok((two.saturating_sub(one)) as f64 / f64::from(SHELL_STEPS))
    }

    /// Peak RSS of the full run and of a resume of `fn1000`, in KiB: the largest of [`RUNS`].
    fn peak_rss(&self) -> Rss {
        let gnu_time = Path::new(GNU_TIME).is_file();
        let measure = |args: &[&str]| -> u64 {
            if gnu_time {
                self.rss_by_gnu_time(args)
            } else {
                self.rss_at_prompt(args)
            }
        };
        let mut full = 0;
        let mut resume = 0;
        for _ in 0..RUNS {
            full = full.max(measure(&["run", "fn1000"]));
            let (_, code, stdout) = timed(self.command(&self.path, &["run", "fn1000"]), "");
            assert_eq!(
                code,
                Some(1),
                "the run should stop at the llm step:\n{stdout}"
            );
            resume = resume.max(measure(&["run", "--resume", &resume_id(&stdout)]));
        }
        Rss {
            method: if gnu_time {
                "wait4 ru_maxrss, whole run (/usr/bin/time -f %M)"
            } else {
                "VmHWM of /proc/PID/status at the llm prompt (no /usr/bin/time)"
            },
            full_kib: full,
            resume_kib: resume,
        }
    }

    /// `ru_maxrss` of the whole mekara process, as GNU time reports it from `wait4`.
    fn rss_by_gnu_time(&self, args: &[&str]) -> u64 {
        let report = self
            .home
            .parent()
            .expect("home has a parent")
            .join("time.out");
        let mut cmd = Command::new(GNU_TIME);
        cmd.arg("-o")
            .arg(&report)
            .args(["-f", "%M"])
            .arg(&self.binary)
            .args(args)
            .current_dir(&self.root);
        hermetic(&mut cmd, &self.path, &self.home);
        let (_, code, stdout) = timed(cmd, "\n");
        assert!(
            code == Some(0) && stdout.contains(" completed: "),
            "`mekara {}` failed ({code:?}):\n{stdout}",
            args.join(" ")
        );
        let text = std::fs::read_to_string(&report).expect("read the GNU time report");
        text.trim()
            .parse()
            .unwrap_or_else(|_| panic!("GNU time printed `{text}`, not KiB"))
    }

    /// The high-water mark of mekara's RSS while it waits at the llm step (after all the
    /// function steps ran); what happens after the answer is not seen.
    fn rss_at_prompt(&self, args: &[&str]) -> u64 {
        let mut child = self
            .command(&self.path, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn mekara");
        let mut stdout = child.stdout.take().expect("piped stdout");
        let mut seen = Vec::new();
        let mut buf = [0u8; 8192];
        while !String::from_utf8_lossy(&seen).contains(PRESS_ENTER) {
            let n = stdout.read(&mut buf).expect("read mekara's stdout");
            assert!(
                n > 0,
                "mekara ended before the llm step:\n{}",
                String::from_utf8_lossy(&seen)
            );
            seen.extend_from_slice(&buf[..n]);
        }
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id()))
            .expect("read /proc/PID/status");
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("a VmHWM line in /proc/PID/status");
        let mut stdin = child.stdin.take().expect("piped stdin");
        stdin.write_all(b"\n").expect("answer the llm step");
        drop(stdin);
        stdout.read_to_end(&mut seen).expect("read mekara's stdout");
        assert!(
            child.wait().expect("wait for mekara").success(),
            "{}",
            String::from_utf8_lossy(&seen)
        );
        kib
    }
}

/// A clean environment: only `PATH`, `HOME` and fixed locale and display settings.
fn hermetic(cmd: &mut Command, path: &OsString, home: &Path) {
    cmd.env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .env("NO_COLOR", "1")
        .env("COLUMNS", "100")
        .env("LANG", "C.UTF-8");
}

/// Spawns `SHELL -c true` [`SHELL_STEPS`] times, as mekara would (in the project folder,
/// stdin from `/dev/null`, output piped, same environment), waiting for each. Returns the
/// wall time and the CPU time of this thread (the spawning, piping and waiting; not the
/// shells').
fn spawn_directly(shell: &Path, folder: &Path, path: &OsString, home: &Path) -> Timed {
    let children_before = children_cpu();
    let started = Instant::now();
    let cpu_before = thread_cpu();
    for _ in 0..SHELL_STEPS {
        let mut cmd = Command::new(shell);
        cmd.args(["-c", "true"])
            .current_dir(folder)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        hermetic(&mut cmd, path, home);
        let out = cmd.output().expect("spawn the shell");
        assert!(out.status.success(), "`{} -c true` failed", shell.display());
    }
    Timed {
        wall: started.elapsed(),
        cpu: thread_cpu()
            .checked_sub(cpu_before)
            .expect("a thread only gains CPU time"),
        shells: children_cpu()
            .checked_sub(children_before)
            .expect("children only gain CPU time"),
    }
}

/// The CPU time (user and system) of this process's reaped children and their reaped
/// descendants.
fn children_cpu() -> Duration {
    let usage = getrusage(UsageWho::RUSAGE_CHILDREN).expect("getrusage");
    let of = |t: nix::sys::time::TimeVal| {
        Duration::new(
            u64::try_from(t.tv_sec()).unwrap_or(0),
            u32::try_from(t.tv_usec()).unwrap_or(0) * 1000,
        )
    };
    of(usage.user_time()) + of(usage.system_time())
}

/// The CPU time this thread has used.
fn thread_cpu() -> Duration {
    let t = clock_gettime(ClockId::CLOCK_THREAD_CPUTIME_ID).expect("the thread's CPU clock");
    Duration::new(
        u64::try_from(t.tv_sec()).unwrap_or(0),
        u32::try_from(t.tv_nsec()).unwrap_or(0),
    )
}

/// A sample's wall time, the CPU time of the process measured (mekara, or the direct
/// spawner), and the CPU time of the shells it ran.
#[derive(Clone, Copy)]
struct Timed {
    wall: Duration,
    cpu: Duration,
    shells: Duration,
}

/// Runs `cmd` with `stdin` piped in; returns its wall time, exit code and stdout.
fn timed(mut cmd: Command, stdin: &str) -> (Duration, Option<i32>, String) {
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut input = child.stdin.take().expect("piped stdin");
    input.write_all(stdin.as_bytes()).expect("write stdin");
    drop(input);
    let out = child.wait_with_output().expect("wait");
    let elapsed = started.elapsed();
    let mut stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.stderr.is_empty() {
        stdout.push_str("\n[stderr]\n");
        stdout.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    (elapsed, out.status.code(), stdout)
}

/// The run id in "resume it with `mekara run --resume ID`".
fn resume_id(stdout: &str) -> String {
    stdout
        .split("--resume ")
        .nth(1)
        .and_then(|rest| rest.split('`').next())
        .unwrap_or_else(|| panic!("no run id to resume in:\n{stdout}"))
        .to_string()
}

fn write_file(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
    std::fs::write(path, text).expect("write");
}

#[derive(Default)]
struct Samples {
    /// bash, then sh.
    shells: [ShellSamples; 2],
    full_run: Vec<Duration>,
    interrupted: Vec<Duration>,
    resume: Vec<Duration>,
}

/// One shell's samples, one entry per round.
#[derive(Default)]
struct ShellSamples {
    /// `mekara run` of a script without steps.
    empty: Vec<Timed>,
    /// `mekara run shell200`, whole process.
    steps: Vec<Timed>,
    /// [`SHELL_STEPS`] direct spawns.
    direct: Vec<Timed>,
}

struct Rss {
    method: &'static str,
    full_kib: u64,
    resume_kib: u64,
}

/// How far the median of `values` may be off: 1.2533 σ/√n, with σ estimated from the
/// interquartile range (IQR / 1.349), which one wild round does not inflate.
fn standard_error_of_median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    // An index into a short list of samples: in range and non-negative by construction.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let quartile = |q: f64| sorted[((sorted.len() - 1) as f64 * q).round() as usize];
    let sigma = (quartile(0.75) - quartile(0.25)) / 1.349;
    1.2533 * sigma / (values.len() as f64).sqrt()
}

fn median_ms(samples: &[Duration]) -> f64 {
    median(&samples.iter().copied().map(ms).collect::<Vec<_>>())
}

fn print_report(
    bench: &Bench,
    bash: &Path,
    sh: &Path,
    s: &Samples,
    rss: &Rss,
    instructions: Result<&f64, &String>,
) {
    let shown = |p: &Path| match std::fs::canonicalize(p) {
        Ok(real) if real != p => format!("{} -> {}", p.display(), real.display()),
        _ => p.display().to_string(),
    };
    let steps = f64::from(SHELL_STEPS);
    let row = |label: &str, value: String, target: &str, verdict: &str| {
        println!("  {label:<48} {value:>16}   {target:<16} {verdict}");
    };

    println!();
    println!("mekara engine benchmark: {}", bench.binary.display());
    println!(
        "medians of {} rounds (figure 1) and of {RUNS} runs (figure 2; peak RSS: largest of {RUNS}); wall times include process start",
        s.shells[0].steps.len()
    );
    println!();
    println!(
        "  {:<48} {:>16}   {:<16} verdict",
        "figure", "measured", "target"
    );
    println!("  {}", "-".repeat(98));

    println!("1. auto step overhead: {SHELL_STEPS} x auto(\"true\"), journal included");
    for (name, shell, samples) in [("bash", bash, &s.shells[0]), ("sh", sh, &s.shells[1])] {
        let ShellSamples {
            empty,
            steps: with_steps,
            direct,
        } = samples;
        let wall = |samples: &[Timed]| samples.iter().map(|t| t.wall).collect::<Vec<_>>();
        let (empty_wall, steps_wall, direct_wall) = (wall(empty), wall(with_steps), wall(direct));
        println!("   {name}: {}", shown(shell));
        // Paired per round: a slow moment of the machine shifts all three samples of a round.
        let per_round = |of: fn(&Timed) -> Duration| -> Vec<f64> {
            (0..with_steps.len())
                .map(|i| ms(of(&with_steps[i])) - ms(of(&empty[i])) - ms(of(&direct[i])))
                .map(|total| total / steps)
                .collect()
        };
        let wall_rounds = per_round(|t| t.wall);
        let target_text = format!("<= {TARGET_STEP_OVERHEAD_MS} ms/step");
        let overhead = median(&wall_rounds);
        row(
            &format!("   direct `{name} -c true` (Command, piped)"),
            format!("{:.3} ms/step", median_ms(&direct_wall) / steps),
            "",
            "",
        );
        row(
            &format!(
                "   mekara run, minus a 0-step run ({:.1} ms)",
                median_ms(&empty_wall)
            ),
            format!(
                "{:.3} ms/step",
                (median_ms(&steps_wall) - median_ms(&empty_wall)) / steps
            ),
            "",
            "",
        );
        row(
            "   overhead per step (median of rounds)",
            format!("{overhead:.3} ms/step"),
            &target_text,
            &verdict(overhead, TARGET_STEP_OVERHEAD_MS, "ms/step", 3),
        );
        row(
            "   standard error of that median",
            format!("{:.3} ms/step", standard_error_of_median(&wall_rounds)),
            "",
            "",
        );
        let (low, high) = wall_rounds
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
        row(
            "   lowest .. highest round",
            format!("{low:.3} .. {high:.3}"),
            "",
            "",
        );
        // What the wall figure is made of. The shells' own CPU time is most of a step and
        // drifts with the machine, so the rest (wall time minus the shells' CPU) is far
        // steadier; mekara's own CPU time is the steadiest of all.
        let split = |label: &str, rounds: Vec<f64>, target: bool| {
            let value = median(&rounds);
            let error = standard_error_of_median(&rounds);
            row(
                label,
                format!("{value:.3} ms/step"),
                if target { &target_text } else { "" },
                &if target {
                    format!(
                        "{} (+/- {error:.3})",
                        verdict(value, TARGET_STEP_OVERHEAD_MS, "ms/step", 3)
                    )
                } else {
                    format!("+/- {error:.3}")
                },
            );
        };
        println!("   the overhead is made of:");
        split(
            "     the shells' own CPU, under mekara - direct",
            per_round(|t| t.shells),
            false,
        );
        split(
            "     the rest: wall - the shells' CPU",
            per_round(|t| t.wall.saturating_sub(t.shells)),
            true,
        );
        split(
            "       of which mekara's own CPU - the spawner's",
            per_round(|t| t.cpu),
            false,
        );
    }

    println!("2. {FUNCTION_STEPS} x auto(f, {{\"i\": i}}) then an llm step, whole run");
    let full = median_ms(&s.full_run);
    let resume = median_ms(&s.resume);
    row(
        "   full run, stdin \"\\n\"",
        format!("{full:.1} ms"),
        &format!("<= {TARGET_RUN_MS} ms"),
        &verdict(full, TARGET_RUN_MS, "ms", 1),
    );
    row(
        "   first leg, stdin closed at the llm step",
        format!("{:.1} ms", median_ms(&s.interrupted)),
        "",
        "",
    );
    row(
        &format!("   --resume ID (re-evaluates {FUNCTION_STEPS} steps), \"\\n\""),
        format!("{resume:.1} ms"),
        &format!("<= {TARGET_RUN_MS} ms"),
        &verdict(resume, TARGET_RUN_MS, "ms", 1),
    );

    println!("3. peak RSS of that script: {}", rss.method);
    // KiB from the kernel, shown in MB of 10^6 bytes: the stricter reading of "30 MB".
    for (label, kib) in [
        ("   full run", rss.full_kib),
        ("   --resume ID", rss.resume_kib),
    ] {
        let mb = kib as f64 * 1024.0 / 1e6;
        row(
            label,
            format!("{mb:.1} MB"),
            &format!("<= {TARGET_RSS_MB} MB"),
            &verdict(mb, TARGET_RSS_MB, "MB", 1),
        );
    }

    println!("4. mekara's own instructions per auto(\"true\") step (callgrind, user space)");
    row(
        "   (400-step run - 200-step run) / 200",
        match instructions {
            Ok(n) => format!("{:.1} k", n / 1000.0),
            Err(why) => format!("n/a: {why}"),
        },
        "",
        "",
    );
    println!();
}
