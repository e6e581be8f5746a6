//! `mekara eval NAME --cases FILE --trials N --agent …`: runs each case of the case file N
//! times per agent (and model), each trial a `mekara run` of its own in a scratch copy of the
//! case's fixture, judges each by the case's checks and judge, and adds the results up (pass
//! rates with their interval, cost, tokens and time, failures by step), against a baseline
//! when asked. The eval's folder (`crate::eval::record`) holds the plan and every finished
//! trial, so `--resume ID` runs only what is left.
//!
//! - this file: the command's arguments, the plan, and the trials run `--jobs` at a time
//!   under the total caps;
//! - [`trial`]: one trial (its scratch copy, its run, its checks and its judge).
//!
//! Progress goes to stderr; stdout gets the summary (Markdown, or JSON with `--json`).

mod trial;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args};

use super::output::outln;
use crate::agents::clients::Headless;
use crate::eval::cases::Cases;
use crate::eval::record::{AgentSpec, Baseline, Caps, EvalDir, Outcome, Plan, Trial};
use crate::eval::stats::Summary;
use crate::exit::Exit;
use trial::Ctx;

/// The flags of `mekara eval`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("eval_agent").args(["agent", "agent_command"])))]
pub(super) struct EvalArgs {
    /// The script to evaluate (`flow/commit` or `flow:commit`).
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    name: Option<String>,
    /// The case file: TOML, one `[[case]]` per case (docs/evaluating.md); without it, the
    /// cases mekara bundles for the script.
    #[arg(long, value_name = "FILE", conflicts_with = "resume")]
    cases: Option<PathBuf>,
    /// How many trials of each case, per agent (and model) and per variant.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    trials: u32,
    /// The agents that do the llm steps, comma-separated (`claude,codex,gemini`).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "AGENT")]
    agent: Vec<Headless>,
    /// A command that does the llm steps instead, through the JSON contract of
    /// docs/agent-command.md; it sees the trial in `MEKARA_EVAL_TRIAL`.
    #[arg(long, value_name = "CMD")]
    agent_command: Option<String>,
    /// The models to try, comma-separated: each agent runs every case with each (Claude Code
    /// through `ANTHROPIC_MODEL`, Gemini CLI through `GEMINI_MODEL`, a command through
    /// `MEKARA_EVAL_MODEL`).
    #[arg(long, value_delimiter = ',', value_name = "MODEL")]
    model: Vec<String>,
    /// Compare with a baseline run the same way: `nl` (the script's NL instructions given to
    /// the agent whole, without its compiled steps) or a git ref (the script's files there).
    #[arg(long, value_name = "nl|REF")]
    baseline: Option<String>,
    /// How many trials run at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    jobs: u64,
    /// Stop a trial once its agents reported spending this much (US dollars); it counts as
    /// capped.
    #[arg(long, value_name = "USD")]
    trial_max_cost: Option<f64>,
    /// Stop a trial that runs this long (`90s`, `20m`); it counts as capped.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    trial_timeout: Option<Duration>,
    /// Start no more trials once the eval's trials spent this much (US dollars).
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
    /// Start no more trials once this invocation has run this long (`30m`, `2h`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    max_duration: Option<Duration>,
    /// How long one agent answer may take, in seconds (as `mekara run --agent-timeout`).
    #[arg(long, value_name = "SECONDS", default_value = "1200")]
    agent_timeout: super::Seconds,
    /// Run what is left of this eval (its plan and caps as they were, but a `--max-cost` or
    /// `--max-duration` given again; the trials that finished are not run again).
    #[arg(long, value_name = "ID")]
    resume: Option<String>,
    /// Print the summary as JSON instead of Markdown.
    #[arg(long)]
    json: bool,
    /// Evaluate this project's own script although it has the name of one of mekara's bundled
    /// scripts (without it, such a script is refused).
    #[arg(long, conflicts_with = "resume")]
    project_script: bool,
}

pub(super) fn run(args: EvalArgs) -> anyhow::Result<Exit> {
    for (flag, value) in [
        ("--trial-max-cost", args.trial_max_cost),
        ("--max-cost", args.max_cost),
    ] {
        if let Some(cost) = value
            && !(cost.is_finite() && cost >= 0.0)
        {
            return super::usage(format!(
                "`{flag}` must be a number of US dollars, 0 or more, not `{cost}`"
            ));
        }
    }
    let (locations, resolver) = super::locate()?;
    let evals = locations
        .evals_dir()
        .ok_or_else(|| anyhow::anyhow!("no project here and no `HOME`: nowhere to keep an eval"))?;
    let cwd = std::env::current_dir()?;
    let (plan, eval) = if let Some(id) = &args.resume {
        let eval = EvalDir::of(&evals, id)?;
        let mut plan = eval.plan()?;
        // A total cap given again replaces the plan's: the way on past it.
        if let Some(cost) = args.max_cost {
            plan.caps.total_cost_usd = Some(cost);
        }
        if let Some(duration) = args.max_duration {
            plan.caps.total_ms = Some(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX));
        }
        (plan, eval)
    } else {
        let plan = plan(&args, &resolver)?;
        let eval = EvalDir::create(&evals, &plan)?;
        if let Some(baseline) = &plan.baseline
            && let Err(e) = trial::prepare_baseline(&eval, &resolver, &plan.script, baseline, &cwd)
        {
            let _ = std::fs::remove_dir_all(&eval.dir);
            return Err(e);
        }
        (plan, eval)
    };
    trial::write_judge_script(&eval)?;
    let ctx = Ctx {
        plan,
        eval,
        exe: std::env::current_exe()?,
        cwd,
        agent_timeout: super::timeout_arg("--agent-timeout", &args.agent_timeout)?.as_secs_f64(),
        stop: std::sync::Arc::new(AtomicBool::new(false)),
    };
    for signal in crate::exit::INTERRUPTING_SIGNALS {
        let _ = signal_hook::flag::register(signal, ctx.stop.clone());
    }
    let stopped_by = run_trials(&ctx);
    let results = ctx.eval.results(&ctx.plan);
    let summary = Summary::of(&ctx.plan, &results);
    let markdown = summary.markdown();
    ctx.eval.write_summary(&summary, &markdown)?;
    let left = ctx.plan.list.len() - results.len();
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&summary)?)?;
    } else {
        outln!("{}", markdown.trim_end())?;
    }
    let id = &ctx.plan.id;
    eprintln!(
        "eval {id}: summary in `{}`",
        ctx.eval.dir.join("summary.md").display()
    );
    if left == 0 {
        return Ok(Exit::Success);
    }
    let why = stopped_by.unwrap_or_else(|| "it was stopped".to_string());
    eprintln!(
        "{left} of {} trials did not run ({why}); run them with `mekara eval --resume {id}`",
        ctx.plan.list.len()
    );
    Ok(if ctx.stop.load(Ordering::SeqCst) {
        Exit::Interrupted
    } else {
        Exit::Failure
    })
}

/// The plan of a new eval, from the command line: every trial, checked before any runs.
fn plan(args: &EvalArgs, resolver: &crate::script::Resolver) -> anyhow::Result<Plan> {
    let name = args.name.as_deref().unwrap_or_default();
    let name = super::script_named(resolver, name, "eval")?;
    let script = match resolver.resolve_to_run(&name, args.project_script) {
        Err(crate::script::ScriptError::Shadows(shadowing)) => {
            return super::usage(format!(
                "`{}` here is this project's own script ({}), not mekara's bundled `{}`; to evaluate the project's, `mekara eval --project-script {} …`; to evaluate mekara's, move those files out of the project",
                shadowing.name,
                shadowing.files_named(),
                shadowing.bundled,
                shadowing.name
            ));
        }
        resolved => resolved?,
    };
    let cases = if let Some(file) = &args.cases {
        Cases::read(file)?
    } else {
        let path = format!("evals/{}.toml", script.name.as_path());
        let Some(bundled) = crate::script::bundled::file(&path) else {
            return super::usage(format!(
                "`mekara eval {name}` needs `--cases FILE`: mekara bundles no eval cases for `{name}` (docs/evaluating.md says how to write them)"
            ));
        };
        Cases::parse(Path::new(&format!("bundled:{path}")), bundled.text)?
    };
    let agents = agents(args)?;
    let baseline = args.baseline.as_deref().map(|b| match b.trim() {
        "nl" | "NL" => Ok(Baseline::Nl),
        r if r.is_empty() || r.starts_with('-') || r.chars().any(char::is_whitespace) => {
            super::usage(format!(
                "`--baseline` is `nl` or a git ref (a branch, a tag, a commit), not `{}`",
                crate::display::echoed(b)
            ))
        }
        r => Ok(Baseline::Ref(r.to_string())),
    });
    let baseline = baseline.transpose()?;
    let mut list = Vec::new();
    let variants: &[bool] = if baseline.is_some() {
        &[false, true]
    } else {
        &[false]
    };
    // Repetition first: a total cap then leaves every case, agent and variant with about as
    // many trials as the others.
    for repeat in 1..=args.trials {
        for case in &cases.cases {
            for agent in 0..agents.len() {
                for &baseline in variants {
                    list.push(Trial {
                        number: u32::try_from(list.len() + 1).unwrap_or(u32::MAX),
                        case: case.name.clone(),
                        agent,
                        baseline,
                        repeat,
                    });
                }
            }
        }
    }
    let ms = |d: Option<Duration>| d.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    Ok(Plan {
        id: crate::engine::runs::new_id(0),
        script: name,
        cases,
        agents,
        trials: args.trials,
        baseline,
        project_script: args.project_script,
        caps: Caps {
            trial_cost_usd: args.trial_max_cost,
            trial_ms: ms(args.trial_timeout),
            total_cost_usd: args.max_cost,
            total_ms: ms(args.max_duration),
        },
        jobs: usize::try_from(args.jobs).unwrap_or(1),
        created_ms: crate::engine::journal::now_ms(),
        list,
    })
}

/// The agents of `--agent` or `--agent-command`, each with each `--model`.
fn agents(args: &EvalArgs) -> anyhow::Result<Vec<AgentSpec>> {
    let mut base: Vec<AgentSpec> = args
        .agent
        .iter()
        .map(|h| AgentSpec {
            agent: h.client.name.to_string(),
            command: None,
            model: None,
        })
        .collect();
    base.dedup();
    if let Some(command) = &args.agent_command {
        base.push(AgentSpec {
            agent: "command".to_string(),
            command: Some(command.clone()),
            model: None,
        });
    }
    if base.is_empty() {
        return super::usage(
            "`mekara eval` needs the agents that do the llm steps: `--agent claude,codex,gemini` or `--agent-command CMD`",
        );
    }
    if args.model.is_empty() {
        return Ok(base);
    }
    if let Some(model) = args.model.iter().find(|m| m.trim().is_empty()) {
        return super::usage(format!("`--model` has an empty name: `{model}`"));
    }
    if let Some(fixed) = base
        .iter()
        .find(|a| trial::model_variable(&a.agent).is_none())
    {
        return super::usage(format!(
            "`--model` cannot be passed to `{}`; evaluate it in an eval of its own, without `--model`",
            fixed.agent
        ));
    }
    Ok(base
        .into_iter()
        .flat_map(|a| {
            args.model.iter().map(move |m| AgentSpec {
                model: Some(m.trim().to_string()),
                ..a.clone()
            })
        })
        .collect())
}

/// Where the trials of one invocation are.
struct State {
    /// The next of the trials to run.
    next: usize,
    /// What the finished trials spent.
    spent: f64,
    finished: usize,
    /// The total cap that stopped new trials.
    capped_by: Option<String>,
}

/// Runs the plan's unfinished trials, `jobs` at a time, until they are done, the eval is
/// stopped, or a total cap is reached (which it returns).
fn run_trials(ctx: &Ctx) -> Option<String> {
    let done = ctx.eval.results(&ctx.plan);
    let spent: f64 = done.iter().map(|r| r.cost_usd).sum();
    let todo: Vec<&Trial> = ctx
        .plan
        .list
        .iter()
        .filter(|t| !done.iter().any(|r| r.number == t.number))
        .collect();
    let total = ctx.plan.list.len();
    if done.is_empty() {
        eprintln!(
            "eval {}: {} of `{}` ({} × {} × {}{}), {} at a time",
            ctx.plan.id,
            crate::display::count(total, "trial"),
            ctx.plan.script,
            crate::display::count(ctx.plan.cases.cases.len(), "case"),
            crate::display::count(ctx.plan.agents.len(), "agent"),
            crate::display::count(ctx.plan.trials as usize, "trial"),
            if ctx.plan.baseline.is_some() {
                " × 2 variants"
            } else {
                ""
            },
            ctx.plan.jobs
        );
    } else {
        eprintln!(
            "resuming eval {}: {} of {total} trials finished, {} to run",
            ctx.plan.id,
            done.len(),
            todo.len()
        );
    }
    let state = Mutex::new(State {
        next: 0,
        spent,
        finished: done.len(),
        capped_by: None,
    });
    let started = Instant::now();
    let caps = &ctx.plan.caps;
    let take = || -> Option<&Trial> {
        let mut state = state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if ctx.stop.load(Ordering::SeqCst) || state.capped_by.is_some() {
            return None;
        }
        if let Some(max) = caps.total_cost_usd
            && state.spent >= max
        {
            state.capped_by = Some(format!(
                "the trials spent ${:.4} (`--max-cost {max}`)",
                state.spent
            ));
            return None;
        }
        if let Some(max) = caps.total_ms
            && started.elapsed() >= Duration::from_millis(max)
        {
            state.capped_by = Some(format!(
                "the eval ran {} (`--max-duration {}`)",
                humantime::format_duration(Duration::from_secs(started.elapsed().as_secs())),
                humantime::format_duration(Duration::from_millis(max))
            ));
            return None;
        }
        let trial = todo.get(state.next)?;
        state.next += 1;
        Some(trial)
    };
    std::thread::scope(|scope| {
        for _ in 0..ctx.plan.jobs.min(todo.len()) {
            scope.spawn(|| {
                while let Some(trial) = take() {
                    let Some(result) = trial::run(ctx, trial) else {
                        continue;
                    };
                    let mut state = state
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if let Err(e) = ctx.eval.write_result(&result) {
                        eprintln!("! {e}");
                        continue;
                    }
                    state.spent += result.cost_usd;
                    state.finished += 1;
                    eprintln!(
                        "[{}/{total}] {}",
                        state.finished,
                        progress_line(ctx, trial, &result)
                    );
                }
            });
        }
    });
    let state = state
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    state.capped_by
}

/// `#3 greets · command · script · 2/5: passed in 1.2 s, $0.0100 (run ID)`.
fn progress_line(ctx: &Ctx, trial: &Trial, result: &crate::eval::record::TrialResult) -> String {
    let agent = ctx
        .plan
        .agents
        .get(trial.agent)
        .map(AgentSpec::label)
        .unwrap_or_default();
    let variant = match (&ctx.plan.baseline, trial.baseline) {
        (Some(b), true) => b.label(),
        _ => "script".to_string(),
    };
    let outcome = match result.outcome {
        Outcome::Passed => "passed".to_string(),
        Outcome::Failed => format!(
            "failed at `{}`",
            result.step.as_deref().unwrap_or("(unknown)")
        ),
        Outcome::Capped => format!("capped: {}", result.why.as_deref().unwrap_or_default()),
    };
    format!(
        "#{} {} · {agent} · {variant} · {}/{}: {outcome} in {:.1} s, ${:.4} (run {})",
        trial.number,
        trial.case,
        trial.repeat,
        ctx.plan.trials,
        result.duration_ms as f64 / 1000.0,
        result.cost_usd,
        result.run_id
    )
}
