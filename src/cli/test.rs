//! `mekara test [NAME...]`: runs workflows' test cases (`crate::cases`) with no agent and no
//! network, each in a scratch project, several at once, and reports what differs.
//!
//! Each case runs in a child process (`mekara test --drive FILE`, started in the scratch
//! project with its environment): the real unattended driver of `mekara run --agent`, with
//! the case's answers given in-process behind the same agent trait, and a report of the run on
//! stdout. A child per case keeps what one run sets (its current folder, `HOME`, signal
//! handlers, what it prints) away from the others; it costs one process start per case.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use clap::Args;

use super::output::outln;
use crate::cases::case::{Case, CaseError, Origin};
use crate::cases::compare::{Places, Verdict, compare};
use crate::cases::fixture::{Scratch, copy_dir, prepare};
use crate::cases::run::{CaseAgent, CasePerson, Drive, Report, StepRun};
use crate::cases::update::Outcome;
use crate::display::count;
use crate::exit::Exit;

#[derive(Debug, Args)]
pub(super) struct TestArgs {
    /// Scripts (`flow/commit`), folders of them (`flow`) or cases (`flow/commit/basic`) to
    /// test: all the cases when none is given.
    names: Vec<String>,
    /// Test the cases bundled with mekara's own scripts instead of the project's
    /// (`.mekara/tests/`).
    #[arg(long)]
    bundled: bool,
    /// Write what each run gave into its case file as what the case expects (end state,
    /// steps, the files and step outputs it expects exactly), keeping the rest of the file.
    #[arg(long, conflicts_with = "bundled")]
    update: bool,
    /// Write a JUnit XML report of the cases to FILE.
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// How many cases run at once (default: the number of cores).
    #[arg(long, short = 'j', value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    jobs: Option<u64>,
    /// How long one case may run, in seconds, before it is stopped and fails.
    #[arg(long, value_name = "SECONDS", default_value = "600")]
    timeout: super::Seconds,
    /// Keep the scratch project of each failed case, and say where it is.
    #[arg(long)]
    keep: bool,
    /// Turn this VCR cassette (`MEKARA_VCR_CASSETTE`) into a test case, written to `-o FILE`.
    #[arg(long, value_name = "CASSETTE", requires = "output", conflicts_with_all = ["names", "update", "bundled"])]
    from_cassette: Option<PathBuf>,
    /// With `--from-cassette`: the case file to write.
    #[arg(long, short = 'o', value_name = "FILE", requires = "from_cassette")]
    output: Option<PathBuf>,
    /// Run one case's run in the current folder, from this request (what `mekara test`
    /// starts for each case).
    #[arg(long, hide = true, value_name = "FILE", conflicts_with_all = ["names", "bundled", "update", "from_cassette"])]
    drive: Option<PathBuf>,
}

pub(super) fn run(args: TestArgs) -> anyhow::Result<Exit> {
    if let Some(request) = &args.drive {
        return drive(request);
    }
    if let (Some(cassette), Some(output)) = (&args.from_cassette, &args.output) {
        return from_cassette(cassette, output);
    }
    let timeout = super::timeout_arg("--timeout", &args.timeout)?;
    let (locations, _) = super::locate()?;
    let dot_mekara = locations.project_dir();
    let found = if args.bundled {
        crate::cases::find::bundled()
    } else {
        let Some(dot_mekara) = &dot_mekara else {
            return super::usage(
                "no project here (no `.mekara/` or `.claude/` in this folder or above): a project's test cases are in its `.mekara/tests/`; run mekara's own with `mekara test --bundled`",
            );
        };
        crate::cases::find::project(dot_mekara)
    };
    let found: Vec<Result<Case, CaseError>> = found
        .into_iter()
        .filter(|c| match c {
            Ok(case) => crate::cases::find::wanted(&case.name, &case.script, &args.names),
            Err(_) => true,
        })
        .collect();
    if found.is_empty() {
        let place = if args.bundled {
            "mekara's bundled cases".to_string()
        } else {
            format!(
                "`{}`",
                dot_mekara
                    .unwrap_or_default()
                    .join(crate::cases::find::PROJECT_FOLDER)
                    .display()
            )
        };
        return super::usage(if args.names.is_empty() {
            format!(
                "no test cases in {place}: write one (`.mekara/tests/SCRIPT/CASE.toml`, see docs/testing.md), or turn a recorded session into one with `mekara test --from-cassette CASSETTE -o CASE.toml`"
            )
        } else {
            format!(
                "no test case in {place} is {}: name a script (`flow/commit`), a folder (`flow`) or a case (`flow/commit/basic`)",
                crate::display::quoted(&args.names)
            )
        });
    }
    let jobs = args.jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        |j| usize::try_from(j).unwrap_or(usize::MAX),
    );
    let started = Instant::now();
    let scripts = if args.bundled {
        None
    } else {
        locations.project_dir().map(|d| d.join("scripts"))
    };
    let setup = Setup {
        scripts: scripts.as_deref(),
        timeout,
        keep: args.keep,
        update: args.update,
    };
    let results = run_all(&found, jobs.min(found.len()).max(1), &setup);
    let elapsed = started.elapsed();
    let failed: Vec<&Tested> = results.iter().filter(|r| !r.passed()).collect();
    for result in &failed {
        outln!("\n✗ {} ({})", result.name, result.file)?;
        if let Some(parted) = &result.verdict.parted {
            outln!("  the run parted from the case at `{parted}`")?;
        }
        for failure in &result.verdict.failures {
            outln!("  {}", failure.replace('\n', "\n  "))?;
        }
        if let Some(kept) = &result.kept {
            outln!("  its scratch project is kept in `{}`", kept.display())?;
        }
    }
    let updated = results.iter().filter(|r| r.updated).count();
    if updated > 0 {
        outln!(
            "\nupdated {}: read the change (`git diff`) before you commit it",
            count(updated, "case file")
        )?;
    }
    outln!(
        "── {} passed, {} failed in {:.1} s ──",
        results.len() - failed.len(),
        failed.len(),
        elapsed.as_secs_f64()
    )?;
    if let Some(file) = &args.junit {
        std::fs::write(file, junit(&results, elapsed)).map_err(|e| {
            anyhow::anyhow!("cannot write the JUnit report `{}`: {e}", file.display())
        })?;
    }
    Ok(if failed.is_empty() {
        Exit::Success
    } else {
        Exit::Failure
    })
}

/// What every case of one `mekara test` shares.
struct Setup<'a> {
    /// The project's scripts folder, copied into each scratch project (project cases).
    scripts: Option<&'a Path>,
    timeout: Duration,
    keep: bool,
    update: bool,
}

/// What came of one case.
struct Tested {
    name: String,
    file: String,
    verdict: Verdict,
    elapsed: Duration,
    kept: Option<PathBuf>,
    updated: bool,
}

impl Tested {
    fn passed(&self) -> bool {
        self.verdict.passed() || self.updated
    }

    /// A case that could not be run at all.
    fn broken(name: String, file: String, why: String) -> Tested {
        Tested {
            name,
            file,
            verdict: Verdict {
                failures: vec![why],
                parted: None,
            },
            elapsed: Duration::ZERO,
            kept: None,
            updated: false,
        }
    }
}

/// Runs the cases `jobs` at a time, each on its own thread; reports each as it ends (on
/// stderr), and gives their results in the cases' order.
fn run_all(cases: &[Result<Case, CaseError>], jobs: usize, setup: &Setup<'_>) -> Vec<Tested> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Tested>>> = cases.iter().map(|_| Mutex::new(None)).collect();
    eprintln!(
        "running {} ({} at once)",
        count(cases.len(), "test case"),
        jobs
    );
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| {
                loop {
                    let at = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(case) = cases.get(at) else {
                        return;
                    };
                    let tested = match case {
                        Ok(case) => test_case(case, setup),
                        Err(e) => Tested::broken(e.name.clone(), e.file.clone(), e.reason.clone()),
                    };
                    let mark = match (tested.updated, tested.passed()) {
                        (true, _) => "↻",
                        (false, true) => "✓",
                        (false, false) => "✗",
                    };
                    eprintln!("{mark} {} ({} ms)", tested.name, tested.elapsed.as_millis());
                    if let Ok(mut slot) = results[at].lock() {
                        *slot = Some(tested);
                    }
                }
            });
        }
    });
    results
        .into_iter()
        .filter_map(|slot| slot.into_inner().ok().flatten())
        .collect()
}

/// Runs one case: its scratch project, its run in a child process, the comparison (and,
/// with `--update`, the case file rewritten).
fn test_case(case: &Case, setup: &Setup<'_>) -> Tested {
    let started = Instant::now();
    let file = case.origin.shown();
    let broken = |why: String| Tested {
        elapsed: started.elapsed(),
        ..Tested::broken(case.name.clone(), file.clone(), why)
    };
    let scratch = match prepare(&case.fixture) {
        Ok(scratch) => scratch,
        Err(e) => return broken(e.to_string()),
    };
    let report = match run_in(&scratch, case, setup) {
        Ok(report) => report,
        Err(why) => {
            let mut tested = broken(why);
            tested.kept = setup.keep.then(|| scratch.keep());
            return tested;
        }
    };
    let places = Places {
        project: scratch.project(),
        home: scratch.home(),
    };
    let commands: Vec<_> = case
        .expect
        .command
        .iter()
        .map(|c| run_check(&scratch, &c.run))
        .collect();
    let verdict = compare(&case.expect, &report, places, &commands);
    let mut updated = false;
    if setup.update
        && let Origin::Project(path) = &case.origin
    {
        match write_update(path, case, &report, places) {
            Ok(changed) => updated = changed,
            Err(why) => return broken(format!("cannot update the case file: {why}")),
        }
    }
    let kept = (setup.keep && !verdict.passed() && !updated).then(|| scratch.keep());
    Tested {
        name: case.name.clone(),
        file,
        verdict,
        elapsed: started.elapsed(),
        kept,
        updated,
    }
}

/// Runs a command of `[[expect.command]]` in the scratch project: its exit code and output.
fn run_check(scratch: &Scratch, command: &str) -> crate::cases::compare::Ran {
    match scratch.command(command).stdin(Stdio::null()).output() {
        Ok(out) => {
            let mut said = String::from_utf8_lossy(&out.stdout).into_owned();
            said.push_str(&String::from_utf8_lossy(&out.stderr));
            (out.status.code(), said)
        }
        Err(e) => (None, format!("it could not run: {e}")),
    }
}

/// Writes what the run gave into the case file at `path`; whether that changed it.
fn write_update(
    path: &Path,
    case: &Case,
    report: &Report,
    places: Places<'_>,
) -> Result<bool, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let files = case
        .expect
        .files
        .keys()
        .map(|f| {
            let text = std::fs::read(places.project.join(f))
                .ok()
                .map(|b| String::from_utf8_lossy(&b).into_owned());
            (f.clone(), text)
        })
        .collect::<BTreeMap<_, _>>();
    let outcome = Outcome {
        end: report.end.clone(),
        steps: report.steps.iter().map(|s| places.hide_step(s)).collect(),
        files,
    };
    let updated = crate::cases::update::record(&text, &case.expect, &outcome)?;
    if updated == text {
        return Ok(false);
    }
    std::fs::write(path, updated).map_err(|e| e.to_string())?;
    Ok(true)
}

/// Runs the case's run in a child process in `scratch`, and reads its report.
fn run_in(scratch: &Scratch, case: &Case, setup: &Setup<'_>) -> Result<Report, String> {
    // The project's scripts as they are now, in a project of its own.
    let scripts = scratch.project().join(".mekara/scripts");
    std::fs::create_dir_all(&scripts)
        .map_err(|e| format!("cannot make the scratch project's `.mekara/`: {e}"))?;
    if let Some(own) = setup.scripts.filter(|s| s.is_dir()) {
        copy_dir(own, &scripts).map_err(|e| format!("cannot copy the project's scripts: {e}"))?;
    }
    let request = scratch.root().join("drive.json");
    let drive = serde_json::to_string(&Drive::of(case)).map_err(|e| e.to_string())?;
    std::fs::write(&request, drive).map_err(|e| format!("cannot write the run's request: {e}"))?;
    let stdout = scratch.root().join("report.json");
    let stderr = scratch.root().join("run.log");
    let open = |path: &Path| {
        std::fs::File::create(path).map_err(|e| format!("cannot make `{}`: {e}", path.display()))
    };
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find mekara's own binary: {e}"))?;
    let mut command = Command::new(exe);
    command
        .arg("test")
        .arg("--drive")
        .arg(&request)
        .current_dir(scratch.project())
        .stdin(Stdio::null())
        .stdout(open(&stdout)?)
        .stderr(open(&stderr)?);
    // Nothing of the person's own mekara setup reaches the run: no shared store, traces,
    // cassette or log file.
    for (var, _) in std::env::vars_os() {
        let name = var.to_string_lossy();
        if name.starts_with("MEKARA_") || name.starts_with("OTEL_") {
            command.env_remove(&var);
        }
    }
    command.envs(scratch.env());
    let mut child = command
        .spawn()
        .map_err(|e| format!("cannot start the case's run: {e}"))?;
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < setup.timeout => {
                std::thread::sleep(Duration::from_millis(2));
            }
            Ok(None) => {
                // As Ctrl-C does, so that the running step's process group is stopped too;
                // killed after a grace period if that does not end it.
                super::queue::interrupt(&child);
                let grace = Instant::now();
                while grace.elapsed() < Duration::from_secs(5)
                    && matches!(child.try_wait(), Ok(None))
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the case's run took more than {} s and was stopped (`--timeout`)",
                    setup.timeout.as_secs_f64()
                ));
            }
            Err(e) => return Err(format!("cannot wait for the case's run: {e}")),
        }
    };
    let said = std::fs::read_to_string(&stdout).unwrap_or_default();
    match serde_json::from_str::<Report>(&said) {
        Ok(report) if status.success() => Ok(report),
        _ => {
            let log = std::fs::read_to_string(&stderr).unwrap_or_default();
            let log = Places {
                project: scratch.project(),
                home: scratch.home(),
            }
            .hide(log.trim());
            Err(format!(
                "the case's run could not go on:\n{}",
                crate::display::clipped(&log, 4000)
            ))
        }
    }
}

/// `mekara test --drive FILE`: runs the request's script here, unattended, with the case's
/// answers, and prints the report of the run as JSON.
fn drive(request: &Path) -> anyhow::Result<Exit> {
    use clap::{Args as _, FromArgMatches as _};
    let text = std::fs::read_to_string(request).map_err(|e| {
        anyhow::anyhow!("cannot read the run's request `{}`: {e}", request.display())
    })?;
    let drive: Drive = serde_json::from_str(&text)?;
    let (locations, resolver) = super::locate()?;
    let store = super::run_store(&locations)?;
    // Scripts are evaluated in this process, not in a child per evaluation as `mekara run`
    // does: this process is already the case's own, so a script that asks for too much
    // memory still ends only its case (reported with this process's stderr).
    let settings = crate::engine::Settings::default();
    let runner: Box<dyn crate::engine::StepRunner> = Box::new(crate::engine::ShellRunner::new());
    let name = super::script_named(&resolver, &drive.script, "test")?;
    // The flags of `mekara run --agent-command`, as the driver reads them; the command is
    // what the journal says drove the run.
    let flags = super::run::RunArgs::augment_args(clap::Command::new("run"))
        .try_get_matches_from(["run", "--agent-command", "mekara test", "x"])?;
    let flags = super::run::RunArgs::from_arg_matches(&flags)?.unattended;
    let parts = super::unattended::Parts {
        resolver,
        store: store.clone(),
        runner,
        settings,
        cwd: std::env::current_dir()?,
        project_root: locations.project_root.clone(),
        estimate: false,
    };
    let start = super::unattended::Start::New {
        name,
        arguments: drive.arguments,
        working_dir: None,
        project_script: drive.project_script,
    };
    let mut agent = CaseAgent::new(drive.agent);
    let mut person = CasePerson::new(drive.ask);
    let driven = super::unattended::drive(
        &flags,
        parts,
        start,
        &mut agent,
        &mut |path, question, choices| person.answer(path, question, choices),
    )?;
    let events = driven
        .id
        .as_deref()
        .and_then(|id| store.read(id).ok())
        .map(|c| c.events)
        .unwrap_or_default();
    let steps = super::unattended::steps_of(&events)
        .into_iter()
        .map(|(label, record)| StepRun {
            label,
            summary: crate::display::clipped(
                crate::display::first_line(&record.input.summary()),
                160,
            )
            .into_owned(),
            success: record.result.success,
            exit_code: record.result.exit_code,
            output: record.result.output,
            error: record.result.error,
        })
        .collect();
    let mut unanswered = agent.unanswered;
    unanswered.extend(person.unanswered);
    let report = Report {
        end: if driven.id.is_some() {
            driven.end.state().to_string()
        } else {
            "not_started".to_string()
        },
        why: driven.end.why().map(str::to_string),
        run_id: driven.id,
        steps,
        unanswered,
    };
    outln!("{}", serde_json::to_string(&report)?)?;
    Ok(Exit::Success)
}

/// `--from-cassette CASSETTE -o FILE`.
fn from_cassette(cassette: &Path, output: &Path) -> anyhow::Result<Exit> {
    let text = crate::cases::cassette::case_of(cassette)?;
    if output.exists() {
        return super::usage(format!(
            "`{}` exists: give `-o` a new file, mekara does not overwrite a case",
            output.display()
        ));
    }
    if let Some(parent) = output.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(output, text)
        .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", output.display()))?;
    outln!(
        "wrote the case `{}`: give it a fixture where the run needs one, run it with `mekara test`, and record what it expects with `mekara test --update`",
        output.display()
    )?;
    Ok(Exit::Success)
}

/// A JUnit XML report: one test case per case, its differences as its failure.
fn junit(results: &[Tested], elapsed: Duration) -> String {
    use std::fmt::Write as _;
    let escape = super::unattended::xml_attribute;
    let mut cases = String::new();
    let mut failures = 0;
    for result in results {
        let (class, name) = result
            .name
            .rsplit_once('/')
            .unwrap_or(("", result.name.as_str()));
        let _ = write!(
            cases,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            escape(class),
            escape(name),
            result.elapsed.as_secs_f64()
        );
        if result.passed() {
            cases.push_str("/>\n");
            continue;
        }
        failures += 1;
        let first = result
            .verdict
            .failures
            .first()
            .map_or("", |f| f.lines().next().unwrap_or(""));
        let _ = write!(
            cases,
            ">\n      <failure message=\"{}\">{}</failure>\n    </testcase>\n",
            escape(first),
            escape(&result.verdict.failures.join("\n\n"))
        );
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"mekara test\" tests=\"{}\" failures=\"{failures}\" time=\"{:.3}\">\n{cases}  </testsuite>\n</testsuites>\n",
        results.len(),
        elapsed.as_secs_f64()
    )
}
