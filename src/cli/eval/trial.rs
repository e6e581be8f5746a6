//! One trial of an eval: a scratch copy of its case's fixture, a `mekara run` of the script
//! (or of the baseline) in it with the trial's agent and caps, then the case's checks in the
//! resulting tree and, when they pass, its judge (a `mekara run` of a one-step script whose
//! llm step the same agent answers). Every run is a run of the project's store.
//!
//! A trial is a child process so that its caps are a process's: a trial over its time is
//! stopped by closing its stdin (the run stops resumably and kills its agent), and killed if
//! it does not stop; a killed eval's children stop the same way, as their stdin closes.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use crate::cases::fixture::Scratch;
use crate::engine::journal::Event;
use crate::engine::runner::{Ran, ShellStep};
use crate::engine::{CancelToken, ShellRunner, StepRunner as _};
use crate::eval::cases::Case;
use crate::eval::record::{
    Baseline, CheckResult, EvalDir, Outcome, Plan, Trial, TrialResult, Verdict,
};

/// What every trial of one invocation shares.
pub(super) struct Ctx {
    pub plan: Plan,
    pub eval: EvalDir,
    /// The running mekara, which each trial runs as `mekara run`.
    pub exe: PathBuf,
    /// The project's folder: trials' runs start there, so they land in its run store.
    pub cwd: PathBuf,
    pub agent_timeout: f64,
    /// Set by Ctrl-C (or SIGTERM, SIGHUP): running trials stop unfinished, none starts.
    pub stop: std::sync::Arc<AtomicBool>,
}

/// The judge's script name, in its own scripts folder of the eval.
const JUDGE: &str = "mekara-eval-judge";

/// How long a check or a fixture's setup command may run.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(600);

/// How long a stopped run gets to end on its own before it is killed.
const GRACE: Duration = Duration::from_secs(10);

/// The variable an agent client reads its model from, where mekara can pass one.
pub(super) fn model_variable(agent: &str) -> Option<&'static str> {
    match agent {
        "claude" => Some("ANTHROPIC_MODEL"),
        "gemini" => Some("GEMINI_MODEL"),
        "command" => Some("MEKARA_EVAL_MODEL"),
        _ => None,
    }
}

/// Runs `trial` to its result; `None` when the eval was stopped during it (it runs again on
/// resume).
pub(super) fn run(ctx: &Ctx, trial: &Trial) -> Option<TrialResult> {
    let started = Instant::now();
    let deadline = ctx
        .plan
        .caps
        .trial_ms
        .map(|ms| started + Duration::from_millis(ms));
    let case = ctx.plan.cases.cases.iter().find(|c| c.name == trial.case)?;
    let attempt = ctx.eval.started(trial.number).len();
    let run_id = match attempt {
        0 => format!("{}-t{:04}", ctx.plan.id, trial.number),
        n => format!("{}-t{:04}-{}", ctx.plan.id, trial.number, n + 1),
    };
    let mut result = TrialResult {
        number: trial.number,
        run_id: run_id.clone(),
        outcome: Outcome::Failed,
        why: None,
        step: None,
        state: "not started".to_string(),
        checks: Vec::new(),
        judge: None,
        agent_steps: 0,
        cost_usd: 0.0,
        tokens: 0,
        duration_ms: 0,
    };
    let finish = |mut result: TrialResult| {
        result.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        Some(result)
    };
    let scratch = match crate::cases::fixture::prepare(&case.fixture.to_fixture()) {
        Ok(scratch) => scratch,
        Err(why) => {
            result.step = Some("fixture".to_string());
            result.why = Some(why.to_string());
            return finish(result);
        }
    };
    if let Err(e) = ctx.eval.note_started(trial.number, &run_id) {
        result.step = Some("eval".to_string());
        result.why = Some(e.to_string());
        return finish(result);
    }
    let scripts = trial.baseline.then(|| baseline_dir(&ctx.eval));
    let ended = run_child(
        ctx,
        trial,
        &Child {
            run_id: &run_id,
            scratch: &scratch,
            scripts: scripts.as_deref(),
            name: &ctx.plan.script,
            arguments: &case.arguments,
            deadline,
        },
    );
    add_spend(ctx, &run_id, &mut result);
    match ended {
        Ended::Stopped => return None,
        Ended::TimedOut => {
            result.state = "interrupted".to_string();
            result.outcome = Outcome::Capped;
            result.step = Some("cap".to_string());
            result.why = Some(trial_timeout(ctx));
            return finish(result);
        }
        Ended::Summary(summary) => {
            result.state = summary["state"].as_str().unwrap_or("unknown").to_string();
            match result.state.as_str() {
                "completed" | "fell_back" => {}
                "stopped" => {
                    result.outcome = Outcome::Capped;
                    result.step = Some("cap".to_string());
                    result.why = summary["stopped_by"].as_str().map(str::to_string);
                    return finish(result);
                }
                _ => {
                    result.step = summary["failed_step"]["step"]
                        .as_str()
                        .map(str::to_string)
                        .or_else(|| Some(format!("run {}", result.state)));
                    result.why = summary["stopped_by"]
                        .as_str()
                        .or(summary["failed_step"]["error"].as_str())
                        .map(|w| crate::display::clipped(w.trim(), 500).into_owned());
                    return finish(result);
                }
            }
        }
        Ended::Failed(why) => {
            result.step = Some("run".to_string());
            result.why = Some(why);
            return finish(result);
        }
    }
    // The run ended: the checks, then the judge, decide.
    let cancel = CancelToken::default();
    for command in &case.checks {
        let (passed, output) = shell(command, &scratch, &cancel);
        result.checks.push(CheckResult {
            command: command.clone(),
            passed,
            output: crate::display::clipped(output.trim(), 2000).into_owned(),
        });
        if !passed {
            result.step = Some(format!("check: {command}"));
            result.why = Some(format!("the check `{command}` failed"));
            return finish(result);
        }
    }
    if case.judge.is_some() {
        let judge_id = format!("{run_id}-judge");
        let ended = run_child(
            ctx,
            trial,
            &Child {
                run_id: &judge_id,
                scratch: &scratch,
                scripts: Some(&judge_dir(&ctx.eval)),
                name: JUDGE,
                arguments: &judge_request(ctx, case, &result),
                deadline,
            },
        );
        add_spend(ctx, &judge_id, &mut result);
        let verdict = match ended {
            Ended::Stopped => return None,
            Ended::TimedOut => {
                result.outcome = Outcome::Capped;
                result.step = Some("cap".to_string());
                result.why = Some(trial_timeout(ctx));
                return finish(result);
            }
            Ended::Failed(why) => Err(why),
            Ended::Summary(_) => verdict_of(ctx, &judge_id),
        };
        match verdict {
            Ok((passed, why)) => {
                if !passed {
                    result.step = Some("judge".to_string());
                    result.why = Some(format!("the judge said: {why}"));
                }
                result.judge = Some(Verdict {
                    passed,
                    why,
                    run_id: Some(judge_id),
                });
                if !passed {
                    return finish(result);
                }
            }
            Err(why) => {
                result.step = Some("judge".to_string());
                result.why = Some(format!("the judge gave no verdict: {why}"));
                return finish(result);
            }
        }
    }
    result.outcome = Outcome::Passed;
    finish(result)
}

fn trial_timeout(ctx: &Ctx) -> String {
    let ms = ctx.plan.caps.trial_ms.unwrap_or_default();
    format!(
        "the trial ran past `--trial-timeout {}`",
        humantime::format_duration(Duration::from_millis(ms))
    )
}

/// Runs `command` in the scratch project as a shell step runs (its own process group, a
/// timeout), with the scratch project's environment: whether it exited 0, and what it
/// printed.
fn shell(command: &str, scratch: &Scratch, cancel: &CancelToken) -> (bool, String) {
    let step = ShellStep {
        command: command.to_string(),
        working_dir: scratch.project().to_path_buf(),
        env: scratch
            .env()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string_lossy().into_owned()))
            .collect(),
        timeout: COMMAND_TIMEOUT,
        group_note: None,
        number: None,
        shell: None,
    };
    let mut output = Vec::new();
    match ShellRunner::new().run_shell(&step, &mut |chunk| output.extend_from_slice(chunk), cancel)
    {
        Ran::Done(result) => (
            result.success,
            String::from_utf8_lossy(&output).into_owned(),
        ),
        Ran::Cancelled => (false, "stopped".to_string()),
    }
}

/// One `mekara run` of a trial.
struct Child<'a> {
    run_id: &'a str,
    scratch: &'a Scratch,
    /// A scripts folder searched first (a baseline's, the judge's).
    scripts: Option<&'a Path>,
    name: &'a str,
    arguments: &'a str,
    deadline: Option<Instant>,
}

/// How a trial's `mekara run` ended.
enum Ended {
    /// It ended on its own: its `--json` summary.
    Summary(Json),
    /// It ran past the trial's time and was stopped.
    TimedOut,
    /// The eval was stopped.
    Stopped,
    /// It could not start, or said nothing readable.
    Failed(String),
}

fn run_child(ctx: &Ctx, trial: &Trial, child: &Child<'_>) -> Ended {
    let Some(agent) = ctx.plan.agents.get(trial.agent) else {
        return Ended::Failed("the plan names no such agent".to_string());
    };
    let mut command = Command::new(&ctx.exe);
    command
        .current_dir(&ctx.cwd)
        .arg("run")
        .args([
            "--run-id",
            child.run_id,
            "--json",
            "--stop-when-stdin-closes",
        ])
        .arg("-C")
        .arg(child.scratch.project())
        .args(["--agent-timeout", &ctx.agent_timeout.to_string()]);
    match &agent.command {
        Some(cmd) => command.args(["--agent-command", cmd]),
        None => command.args(["--agent", &agent.agent]),
    };
    if let Some(scripts) = child.scripts {
        command
            .arg("--scripts-dir")
            .arg(scripts)
            .arg("--project-script");
    } else if ctx.plan.project_script {
        command.arg("--project-script");
    }
    if let Some(cost) = ctx.plan.caps.trial_cost_usd {
        // A trial over its cap is stopped and counted as capped: nobody is there to raise
        // the cap of a paused trial.
        command.args(["--max-cost", &cost.to_string(), "--on-cap", "stop"]);
    }
    // The scratch project's git identity and dates, but the person's own `HOME`: an agent
    // client finds its login there.
    command.envs(
        child
            .scratch
            .env()
            .into_iter()
            .filter(|(k, _)| *k != "HOME"),
    );
    command.env("MEKARA_EVAL_ID", &ctx.plan.id);
    command.env("MEKARA_EVAL_TRIAL", trial.number.to_string());
    command.env("MEKARA_EVAL_CASE", &trial.case);
    command.env("MEKARA_EVAL_REPEAT", trial.repeat.to_string());
    command.env(
        "MEKARA_EVAL_VARIANT",
        if trial.baseline { "baseline" } else { "script" },
    );
    if let (Some(model), Some(variable)) = (&agent.model, model_variable(&agent.agent)) {
        command.env(variable, model);
        command.env("MEKARA_EVAL_MODEL", model);
    }
    command.arg("--").arg(child.name);
    if !child.arguments.is_empty() {
        command.arg(child.arguments);
    }
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(ctx.eval.log_path(trial.number));
    let stderr = match log {
        Ok(log) => Stdio::from(log),
        Err(_) => Stdio::null(),
    };
    let spawned = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn();
    let mut process = match spawned {
        Ok(process) => process,
        Err(e) => return Ended::Failed(format!("cannot start `{}`: {e}", ctx.exe.display())),
    };
    // Holding its stdin open keeps it going; closing it stops it, resumably.
    let mut stdin = process.stdin.take();
    let mut stdout = process.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(out) = stdout.as_mut() {
            let _ = out.read_to_string(&mut text);
        }
        text
    });
    let mut stopping: Option<(Instant, bool)> = None;
    loop {
        match process.try_wait() {
            Ok(Some(_)) | Err(_) => break,
            Ok(None) => {}
        }
        let now = Instant::now();
        if stopping.is_none() {
            let timed_out = child.deadline.is_some_and(|d| now >= d);
            if timed_out || ctx.stop.load(Ordering::SeqCst) {
                stdin.take();
                stopping = Some((now, timed_out));
            }
        }
        if let Some((since, _)) = stopping
            && now.duration_since(since) > GRACE
        {
            let _ = process.kill();
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
    let _ = process.wait();
    let text = reader.join().unwrap_or_default();
    match stopping {
        Some((_, true)) => return Ended::TimedOut,
        Some((_, false)) => return Ended::Stopped,
        None => {}
    }
    match serde_json::from_str::<Json>(text.trim()) {
        Ok(summary) if summary.is_object() => Ended::Summary(summary),
        _ => Ended::Failed(format!(
            "`mekara run` gave no summary; its log is `{}`",
            ctx.eval.log_path(trial.number).display()
        )),
    }
}

/// Adds what run `id` spent (its agents' reports) to `result`.
fn add_spend(ctx: &Ctx, id: &str, result: &mut TrialResult) {
    let Ok(store) = crate::store::config::run_store(&crate::paths::Locations::discover(&ctx.cwd))
    else {
        return;
    };
    let Ok(contents) = store.read(id) else {
        return;
    };
    let spent = crate::agents::headless::Spent::of(&contents.events);
    result.agent_steps += spent.answers;
    result.cost_usd += spent.cost_usd;
    result.tokens += spent.tokens;
}

/// The judge's llm step's answer in run `id`: whether it passed, and why.
fn verdict_of(ctx: &Ctx, id: &str) -> Result<(bool, String), String> {
    let store = crate::store::config::run_store(&crate::paths::Locations::discover(&ctx.cwd))
        .map_err(|e| e.to_string())?;
    let contents = store.read(id).map_err(|e| e.to_string())?;
    let outputs = contents
        .events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::Step(step) => step.record.result.outputs.clone(),
            _ => None,
        })
        .ok_or_else(|| format!("its run `{id}` has no answer"))?;
    let verdict = outputs
        .get("verdict")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .trim()
        .to_lowercase();
    let why = outputs
        .get("why")
        .and_then(Json::as_str)
        .unwrap_or_default()
        .trim()
        .to_string();
    match verdict.as_str() {
        "pass" => Ok((true, why)),
        "fail" => Ok((false, why)),
        other => Err(format!(
            "its verdict is `{other}`, not `pass` or `fail` (run `{id}`)"
        )),
    }
}

/// What the judge is asked: the rubric, and what the trial did.
fn judge_request(ctx: &Ctx, case: &Case, result: &TrialResult) -> String {
    let checks: Vec<String> = result
        .checks
        .iter()
        .map(|c| format!("- `{}`: passed", c.command))
        .collect();
    format!(
        "Judge the result of one trial of the workflow `{}` (arguments: `{}`). The current folder is the tree the trial left behind; read it (files, `git status`, `git diff`, `git log` when it is a repository) and decide whether the result meets the rubric. The run ended `{}`.{}\n\nRubric:\n{}\n\nAnswer `verdict` `pass` or `fail`, and `why` in a sentence or two.",
        ctx.plan.script,
        case.arguments,
        result.state,
        if checks.is_empty() {
            String::new()
        } else {
            format!(" Its checks:\n{}", checks.join("\n"))
        },
        case.judge.as_deref().unwrap_or_default().trim()
    )
}

fn judge_dir(eval: &EvalDir) -> PathBuf {
    eval.dir.join("judge")
}

fn baseline_dir(eval: &EvalDir) -> PathBuf {
    eval.dir.join("baseline").join(".mekara")
}

/// Writes the judge's script into the eval's folder: one llm step that answers a verdict.
pub(super) fn write_judge_script(eval: &EvalDir) -> anyhow::Result<()> {
    let dir = judge_dir(eval).join("scripts");
    let write = |path: PathBuf, text: &str| -> anyhow::Result<()> {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, text)
            .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", path.display()))
    };
    write(
        dir.join("nl").join(format!("{JUDGE}.md")),
        "Judge the result of an eval's trial as asked below, and answer `verdict` (`pass` or `fail`) and `why`.\n\n$ARGUMENTS\n",
    )?;
    write(
        dir.join("compiled").join(format!("{JUDGE}.star")),
        "def execute(request):\n    llm(request, expects = {\n        \"verdict\": \"`pass` or `fail`: whether the result meets the rubric\",\n        \"why\": \"a sentence or two: what in the result decided it\",\n    })\n",
    )
}

/// Writes the baseline's scripts folder: the NL file of `script` alone (`nl`), or the
/// project's scripts at a git ref.
pub(super) fn prepare_baseline(
    eval: &EvalDir,
    resolver: &crate::script::Resolver,
    script: &str,
    baseline: &Baseline,
    cwd: &Path,
) -> anyhow::Result<()> {
    let dir = baseline_dir(eval);
    let resolved = resolver.resolve(script)?;
    let nl = dir
        .join("scripts")
        .join("nl")
        .join(format!("{}.md", resolved.name.as_path()));
    match baseline {
        Baseline::Nl => {
            if let Some(parent) = nl.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&nl, &resolved.nl.text)?;
        }
        Baseline::Ref(reference) => {
            std::fs::create_dir_all(&dir)?;
            let root = crate::paths::Locations::discover(cwd)
                .project_root
                .ok_or_else(|| {
                    anyhow::anyhow!("`--baseline {reference}` needs a project: no `.mekara/` here")
                })?;
            let archive = Command::new("git")
                .current_dir(&root)
                .args([
                    "archive",
                    "--format=tar",
                    reference,
                    "--",
                    ".mekara/scripts",
                ])
                .output()
                .map_err(|e| anyhow::anyhow!("cannot run git for `--baseline {reference}`: {e}"))?;
            if !archive.status.success() {
                return super::super::usage(format!(
                    "`--baseline {reference}`: git cannot read the project's scripts at `{reference}`: {}",
                    String::from_utf8_lossy(&archive.stderr).trim()
                ));
            }
            let mut tar = Command::new("tar")
                .current_dir(dir.parent().unwrap_or(&dir))
                .args(["-xf", "-"])
                .stdin(Stdio::piped())
                .spawn()?;
            if let Some(mut input) = tar.stdin.take() {
                use std::io::Write as _;
                input.write_all(&archive.stdout)?;
            }
            if !tar.wait()?.success() {
                anyhow::bail!(
                    "cannot unpack the scripts of `{reference}` into `{}`",
                    dir.display()
                );
            }
            if !nl.is_file() {
                return super::super::usage(format!(
                    "`--baseline {reference}`: the project has no script `{script}` at `{reference}` (no `{}`)",
                    Path::new(".mekara")
                        .join(nl.strip_prefix(&dir).unwrap_or(&nl))
                        .display()
                ));
            }
        }
    }
    Ok(())
}
