//! `mekara run --agent claude` / `--agent-command CMD`: an unattended run. mekara runs the
//! auto steps and starts an agent process for each llm step, NL script and fallback, with
//! the text an agent over MCP would read (the same [`Session`] renders it). Answers are
//! checked as over MCP and journaled with what the agent reported; limits on agent steps,
//! cost and time stop the run between steps, resumable. For CI: exit codes, a `--json`
//! summary on stdout and a `--junit` report.
//!
//! Progress goes to stderr, so that stdout holds only the closing line, or the JSON summary.

pub(crate) mod limits;
mod tasks;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args};
use serde_json::{Value as Json, json};

use super::output::outln;
use crate::agents::claude::ClaudeAgent;
use crate::agents::clients::Headless;
use crate::agents::command::CommandAgent;
use crate::agents::headless::{Agent, Kind, Reply as AgentReply, Request, Spent, outputs_schema};
use crate::agents::history::Progress;
use crate::agents::rate_limit::{self, Backoff, Next, RateLimited};
use crate::agents::reply::Reply;
use crate::agents::session::{Answered, Session};
use crate::agents::tools::AgentCall;
use crate::display::count;
use crate::engine::journal::{AgentEvent, Event};
use crate::engine::step::{AgentReport, StepRecord};
use crate::engine::store::RunStore;
use crate::engine::{Pending, Settings, StepRunner};
use crate::exit::Exit;
use crate::script::Resolver;

/// The flags of an unattended run.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("unattended_agent").args(["agent", "agent_command"])))]
pub(super) struct UnattendedArgs {
    /// Run unattended: this agent does the llm steps and NL scripts (Claude Code, the Codex
    /// CLI or Gemini CLI headless, `claude`, `codex` or `gemini` on PATH).
    #[arg(long, value_enum, value_name = "AGENT")]
    agent: Option<Headless>,
    /// Run unattended: this command does the llm steps and NL scripts, through the JSON
    /// contract of docs/agent-command.md (run through the shell, once per step).
    #[arg(long, value_name = "CMD")]
    agent_command: Option<String>,
    /// How long one agent answer may take, in seconds, before the agent and everything it
    /// started are killed and the step fails.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 1200.0,
        requires = "unattended_agent"
    )]
    agent_timeout: f64,
    /// How many agent processes answer the llm steps of a `parallel` group at once (the
    /// group's own `max` when not given).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), requires = "unattended_agent")]
    max_parallel_agents: Option<u64>,
    /// Stop before an agent step once the run has had this many agent answers.
    #[arg(long, value_name = "N", requires = "unattended_agent")]
    max_agent_steps: Option<usize>,
    /// Pause before an agent step once the run's agents spent this much (US dollars: as
    /// reported, or estimated from the price table for agents that report only tokens);
    /// what is left is passed on as the agent's own budget where it has one.
    #[arg(long, value_name = "USD", requires = "unattended_agent")]
    max_cost: Option<f64>,
    /// Pause before an agent step once the run's agents used this many tokens (in and out).
    #[arg(long, value_name = "N", requires = "unattended_agent")]
    max_tokens: Option<u64>,
    /// Pause before the next agent step once one agent step used this many tokens (in and
    /// out); a step's agent is not asked again once its own tokens reached it.
    #[arg(long, value_name = "N", requires = "unattended_agent")]
    max_step_tokens: Option<u64>,
    /// What a reached `--max-cost`, `--max-tokens` or `--max-step-tokens` does: `pause` the
    /// run for a person to raise the cap or stop it with `mekara answer`, or `stop` it (for
    /// CI); `[limits] on_cap` of the config, else `pause`.
    #[arg(long, value_enum, value_name = "WHAT", requires = "unattended_agent")]
    on_cap: Option<limits::OnCap>,
    /// Stop before an agent step once this invocation has run this long (`90s`, `20m`, `1h`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "unattended_agent")]
    max_duration: Option<Duration>,
    /// Print a JSON summary of the run on stdout instead of the closing line.
    #[arg(long, requires = "unattended_agent")]
    json: bool,
    /// Write a JUnit XML report of the run's steps to FILE.
    #[arg(long, value_name = "FILE", requires = "unattended_agent")]
    junit: Option<PathBuf>,
    /// What a failed step does: `stop` the run there, resumable (fix the cause, then run
    /// the step again with `--resume ID --retry`), or hand what is left of the script to the
    /// `agent` to finish by hand.
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = Fallback::Stop, requires = "unattended_agent")]
    fallback: Fallback,
    /// Stop the run resumably, as Ctrl-C does, when stdin closes (a worker's child run).
    #[arg(long, hide = true, requires = "unattended_agent")]
    stop_when_stdin_closes: bool,
    /// Run nothing: list the steps the script's source calls, and which go to the agent.
    #[arg(long, conflicts_with = "resume")]
    pub(super) dry_run: bool,
}

/// `--fallback`: what an unattended run does when a step fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
// The values have no help of their own (the flag's says what each does): a description per
// value would turn `mekara run --help` into clap's long form.
enum Fallback {
    // Stop the run at the failed step, resumable: nobody is watching to say whether the
    // script's own failure handling ("if the tests fail, stop") allows working around it.
    Stop,
    // The agent finishes the script by hand from its NL instructions.
    Agent,
}

impl UnattendedArgs {
    /// Whether the run is unattended.
    pub(super) fn agent_given(&self) -> bool {
        self.agent.is_some() || self.agent_command.is_some()
    }

    /// The limits given as flags.
    fn given(&self) -> limits::Given {
        limits::Given {
            caps: crate::engine::journal::Caps {
                max_cost: self.max_cost,
                max_tokens: self.max_tokens,
                max_step_tokens: self.max_step_tokens,
            },
            max_agent_steps: self.max_agent_steps,
            max_duration: self.max_duration,
            on_cap: self.on_cap,
        }
    }

    fn agent(&self) -> Box<dyn Agent> {
        match (&self.agent, &self.agent_command) {
            (_, Some(command)) => Box::new(CommandAgent::new(command.clone())),
            (Some(headless), None) => (headless.start)(),
            // Not reached: the run is unattended only with one of the two.
            (None, None) => Box::new(ClaudeAgent),
        }
    }

    /// The note that says which agent drives the run, for the journal: the command that
    /// resumes it names the same agent ([`crate::engine::runs::resume_command`]).
    fn note(&self) -> AgentEvent {
        AgentEvent {
            agent: match (&self.agent, &self.agent_command) {
                (Some(headless), None) => Some(headless.client.name.to_string()),
                _ => None,
            },
            command: self.agent_command.clone(),
            ignorable: true,
            at: crate::engine::journal::now_ms(),
        }
    }
}

/// What the session is built from.
pub(super) struct Parts {
    pub resolver: Resolver,
    pub store: RunStore,
    pub runner: Box<dyn StepRunner>,
    pub settings: Settings,
    pub cwd: PathBuf,
    /// The project's root, whose `.mekara/config.toml` has `[limits]` and `[prices]`.
    pub project_root: Option<PathBuf>,
    /// Whether a new run starts by printing its script's estimate. Not for a run a program
    /// started under an id it chose (`--run-id`: a queue worker's, an eval's trial): nobody
    /// reads it there, and the past runs it reads would widen the moment between a worker's
    /// claim and the run's journal.
    pub estimate: bool,
}

/// A new run, or one taken up again.
pub(super) enum Start {
    New {
        name: String,
        arguments: String,
        working_dir: Option<PathBuf>,
        /// The person agreed to run the project's own script of a bundled script's name.
        project_script: bool,
    },
    /// Take run `id` up, retried or rewound first as asked (`--retry`, `--from`).
    Resume(String, Option<crate::engine::Rewind>),
}

/// How an unattended run ended, for the summary.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum End {
    Completed,
    /// A step failed and the script fell back; the agent finished it.
    FellBack,
    /// A limit stopped it before an agent step.
    Limit(String),
    /// A spend cap was reached before an agent step: the run waits for a person to raise
    /// it or stop the run (`mekara answer`).
    Paused(String),
    /// The agent could not finish an NL script or fallback, or mekara refused what came.
    Failed(String),
    /// A step failed, and the run stopped there (`--fallback stop`).
    StepFailed(String),
    /// The script asked the person a question (`ask`): the run waits for `mekara answer`.
    Waiting(String),
    /// The script stopped itself (`fail()`), and with it the run; `retry` when it stopped on
    /// a step that failed (a retry after the fix runs it again).
    Stopped {
        why: String,
        retry: bool,
    },
    Interrupted,
}

impl End {
    /// Its name in the JSON summary (`completed`, `waiting`, ...).
    pub(super) fn state(&self) -> &'static str {
        match self {
            End::Completed => "completed",
            End::FellBack => "fell_back",
            End::Limit(_) => "stopped",
            End::Failed(_) | End::StepFailed(_) => "failed",
            End::Waiting(_) | End::Paused(_) => "waiting",
            End::Stopped { .. } => "stopped_by_script",
            End::Interrupted => "interrupted",
        }
    }

    /// What the run said when it did not end as asked: why it stopped, what it waits for.
    pub(super) fn why(&self) -> Option<&str> {
        match self {
            End::Limit(why)
            | End::Paused(why)
            | End::Failed(why)
            | End::StepFailed(why)
            | End::Waiting(why)
            | End::Stopped { why, .. } => Some(why),
            End::Completed | End::FellBack | End::Interrupted => None,
        }
    }

    fn exit(&self) -> Exit {
        match self {
            End::Completed => Exit::Success,
            End::Interrupted => Exit::Interrupted,
            End::FellBack
            | End::Limit(_)
            | End::Failed(_)
            | End::StepFailed(_)
            | End::Stopped { .. }
            | End::Waiting(_)
            | End::Paused(_) => Exit::Failure,
        }
    }

    fn resumable(&self) -> bool {
        matches!(
            self,
            End::Limit(_)
                | End::Paused(_)
                | End::Failed(_)
                | End::StepFailed(_)
                | End::Waiting(_)
                | End::Interrupted
        )
    }
}

/// Runs the script (or resumes the run) with the agent answering, to its end or a limit.
pub(super) fn run(args: &UnattendedArgs, parts: Parts, start: Start) -> anyhow::Result<Exit> {
    let store = parts.store.clone();
    let mut agent = args.agent();
    let driven = drive(args, parts, start, agent.as_mut(), &mut |_, _, _| None)?;
    finish(
        args,
        &store,
        driven.id.as_deref(),
        &driven.end,
        driven.elapsed,
    )
}

/// How a driven run ended, and which run it was.
pub(super) struct Driven {
    pub end: End,
    /// The run's id; `None` when the script could not start (not found, say).
    pub id: Option<String>,
    pub elapsed: Duration,
}

/// Who gives the person's answer to a question (`ask`) in a run driven in-process (`mekara
/// test`): given the question's path, text and choices, the answer, or `None` to leave the run
/// waiting for one.
pub(super) type Person<'a> = dyn FnMut(&str, &str, Option<&[String]>) -> Option<String> + 'a;

/// The driver of an unattended run: runs the script (or resumes the run) with `agent`
/// answering the llm steps and `person` the questions, to its end, a limit or a question
/// nobody answers. What it says goes to stderr; the closing report is [`finish`]'s.
pub(super) fn drive(
    args: &UnattendedArgs,
    parts: Parts,
    start: Start,
    agent: &mut dyn Agent,
    person: &mut Person<'_>,
) -> anyhow::Result<Driven> {
    let agent_timeout = super::timeout_arg("--agent-timeout", args.agent_timeout)?;
    if let Some(cost) = args.max_cost
        && !(cost.is_finite() && cost >= 0.0)
    {
        return super::usage(format!(
            "`--max-cost` must be a number of US dollars, 0 or more, not `{cost}`"
        ));
    }
    let past = match &start {
        Start::Resume(id, _) => parts.store.read(id).map(|c| c.events).unwrap_or_default(),
        Start::New { .. } => Vec::new(),
    };
    let limits = match limits::Limits::of(&args.given(), parts.project_root.as_deref(), &past) {
        Ok(limits) => limits,
        Err(error) => return super::usage(error),
    };
    let prices = match crate::agents::prices::Prices::of_project(parts.project_root.as_deref()) {
        Ok(prices) => prices,
        Err(error) => return super::usage(error),
    };
    if let Start::Resume(id, None) = &start
        && crate::engine::journal::stopped_at_cap(&past)
    {
        anyhow::bail!(
            "run `{id}` was stopped at its spend cap by a person (`mekara answer {id} stop`): nothing is left to resume"
        );
    }
    if let Start::New { name, .. } = &start
        && parts.estimate
    {
        print_estimate(&parts.store, &parts.resolver, name);
    }
    let started = Instant::now();
    let progress = |p: Progress<'_>| {
        match p {
            Progress::Started(step) => eprintln!("▶ {step}"),
            // The script's own `print`s, as `mekara run` in a terminal shows them.
            Progress::Printed(text) => eprintln!("{text}"),
            Progress::Line(_) => {}
        }
    };
    let store = parts.store.clone();
    let mut stopped_in_wait = None;
    // Which agent drives the run goes to its journal once, for whoever shows the run later
    // (the command that resumes it names the agent); a new run has a journal only once its
    // first call started it.
    let note_agent = |session: &mut Session| {
        if let Err(e) = session.note_agent(args.note()) {
            eprintln!("! could not journal which agent drives the run: {e}");
        }
    };
    let new = matches!(start, Start::New { .. });
    // What the journal held before this invocation: a failure in it was notified already.
    let held = match &start {
        Start::Resume(id, _) if crate::notify::is_on() => {
            store.read(id).map_or(0, |c| c.events.len())
        }
        _ => 0,
    };
    let (mut session, first) = match start {
        Start::New {
            name,
            arguments,
            working_dir,
            project_script,
        } => {
            let session = Session::new(
                parts.resolver,
                parts.store,
                parts.runner,
                parts.settings,
                parts.cwd,
            );
            let call = AgentCall::Start {
                name,
                arguments,
                working_dir: working_dir.map(|d| d.display().to_string()),
                parent: None,
                project_script,
            };
            (session, call)
        }
        Start::Resume(id, rewind) => {
            stopped_in_wait = wait_left(&parts.store, &id);
            let (mut session, torn, plan) = Session::resume(
                parts.resolver,
                parts.store,
                parts.runner,
                parts.settings,
                parts.cwd,
                &id,
                rewind.as_ref(),
            )?;
            if let Some(torn) = torn {
                eprintln!(
                    "! the last record of run `{id}` was torn ({} bytes at byte {}): mekara stopped mid-write; it was dropped",
                    torn.len, torn.offset
                );
            }
            eprintln!("resuming run {id}");
            note_agent(&mut session);
            if let Some(plan) = &plan {
                eprint!("{}", plan.summary());
            }
            let call = AgentCall::Resume {
                run_id: None,
                rewind: None,
                answer: None,
            };
            (session, call)
        }
    };
    // Ctrl-C stops the running step or agent, and the run ends resumable (exit 130); so do
    // SIGTERM (a CI job cancelled) and SIGHUP (the terminal closed).
    let cancel = session.cancel_token();
    for signal in crate::exit::INTERRUPTING_SIGNALS {
        let _ = signal_hook::flag::register(signal, cancel.flag());
    }
    if args.stop_when_stdin_closes {
        super::queue::stop_when_stdin_closes(cancel.flag());
    }
    if let Some((step, left)) = stopped_in_wait {
        let left = Backoff::new().scaled(left);
        eprintln!(
            "  `{step}`: the run stopped during a wait for a rate limit of the model; waiting out the rest ({}) before asking the agent again",
            rate_limit::shown(left)
        );
        let until = Instant::now() + left;
        while !cancel.is_cancelled() && Instant::now() < until {
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
        }
    }
    let mut reply = session.call(&first, &progress, String::new(), None);
    if new {
        note_agent(&mut session);
    }
    let mut run_id = session.run_id().map(str::to_string);
    let end = loop {
        if reply.is_error && session.interrupted() {
            break End::Interrupted;
        }
        if reply.is_error {
            break End::Failed(reply.text.trim().to_string());
        }
        let Some(pending) = session.pending().cloned() else {
            break End::Failed("nothing is pending".to_string());
        };
        let (kind, path, expects) = match &pending {
            Pending::Finished {
                run,
                fell_back,
                stop,
                ..
            } => {
                // A run that needed no agent ended within the first call, before its id
                // could be read from the session.
                run_id.get_or_insert_with(|| run.clone());
                if let Some(stop) = stop {
                    break End::Stopped {
                        why: format!(
                            "stopped by the script `{}`: {}",
                            stop.script,
                            stop.message.trim().replace('\n', "\n  ")
                        ),
                        retry: stop.retry,
                    };
                }
                break if *fell_back {
                    End::FellBack
                } else {
                    End::Completed
                };
            }
            Pending::Llm { path, expects, .. } => (Kind::Llm, path.clone(), expects.clone()),
            Pending::Tasks { path, .. } => (Kind::Llm, path.clone(), None),
            Pending::Nl { path, .. } => (Kind::Nl, path.clone(), None),
            Pending::Fallback { path, error, .. } if args.fallback == Fallback::Stop => {
                break End::StepFailed(stopped_at_failure(path, error));
            }
            Pending::Fallback { path, .. } => (Kind::Fallback, path.clone(), None),
            // A question is for a person, never for the agent: the run stops, resumable.
            Pending::Ask {
                path,
                question,
                choices,
                ..
            } => {
                if let Some(answer) = person(path, question, choices.as_deref()) {
                    let answer = AgentCall::Resume {
                        run_id: None,
                        rewind: None,
                        answer: Some(answer),
                    };
                    reply = session.call(&answer, &progress, String::new(), None);
                    continue;
                }
                let id = session.run_id().unwrap_or_default();
                break End::Waiting(waiting_for_answer(id, path, question, choices.as_deref()));
            }
        };
        let id = session.run_id().unwrap_or_default().to_string();
        let spent = spent_of(&store, &id);
        if let Some(reached) = limits.reached(&spent, started.elapsed()) {
            break at_limit(&mut session, &limits, &path, reached);
        }
        let mut request = Request {
            run_id: id,
            step: path.clone(),
            kind,
            prompt: reply.text.clone(),
            schema: outputs_schema(expects.as_ref()),
            session: spent.session.clone(),
            session_spent: spent.in_session,
            attempt: 1,
            previous_error: None,
            budget_usd: limits
                .caps
                .max_cost
                .map(|max| (max - spent.cost_usd).max(0.0)),
            working_dir: session
                .frames()
                .last()
                .map_or_else(|| PathBuf::from("."), |f| f.working_dir.clone()),
            group_note: session.group_note().map(|n| n.for_agent()),
        };
        if let Pending::Tasks {
            path,
            group: position,
            max,
            tasks,
        } = &pending
        {
            let group = tasks::Group {
                path,
                position: *position,
                max: *max,
                tasks,
                spent: &spent,
                started,
                limits: &limits,
                prices: &prices,
            };
            match tasks::ask_tasks(
                args,
                &mut session,
                &group,
                &request,
                agent_timeout,
                &cancel,
                &progress,
            ) {
                Asked::Next(next) => reply = next,
                Asked::Stop(end) => break end,
            }
            continue;
        }
        eprintln!("… asking the agent: {} `{path}`", kind_name(kind));
        match ask(
            agent,
            &mut session,
            &mut request,
            Bounds {
                timeout: agent_timeout,
                deadline: deadline(&limits, started),
                max_step_tokens: limits.caps.max_step_tokens,
            },
            &prices,
            &cancel,
            &progress,
        ) {
            Asked::Next(next) => reply = next,
            Asked::Stop(end) => break end,
        }
    };
    // No run when the script could not start (not found, say): nothing to resume.
    let id = session.run_id().map(str::to_string).or(run_id);
    if let Some(id) = &id {
        notify_stop(&store, id, &end, held);
    }
    Ok(Driven {
        end,
        id,
        elapsed: started.elapsed(),
    })
}

/// Tells the notifiers (`[notify]`) that run `id` stopped for a person: at a failed step,
/// a limit, a spend cap it paused at, or an agent that could not go on (questions and ends are told as they are
/// journaled). A failed step among the `held` events the journal had before this
/// invocation was told by the one that ran it, and is not told again.
fn notify_stop(store: &RunStore, id: &str, end: &End, held: usize) {
    let (kind, why, retry) = match end {
        End::StepFailed(why) => (crate::notify::Kind::StepFailed, why, true),
        End::Limit(why) => (crate::notify::Kind::Limit, why, false),
        End::Paused(why) => (crate::notify::Kind::Cap, why, false),
        End::Failed(why) => (crate::notify::Kind::AgentFailed, why, false),
        _ => return,
    };
    if !crate::notify::is_on() {
        return;
    }
    let events = store.read(id).map(|c| c.events).unwrap_or_default();
    let failed_at = events.iter().rposition(|e| {
        matches!(e, Event::Step(step) if !step.record.result.success && !step.record.allow_failure)
    });
    if retry && failed_at.is_some_and(|at| at < held) {
        return;
    }
    let script = events.iter().find_map(|e| match e {
        Event::Push(push) if push.depth == 0 => Some(push.script.clone()),
        _ => None,
    });
    crate::notify::announce(&crate::notify::Notice {
        kind,
        run_id: id.to_string(),
        script: script.unwrap_or_default(),
        detail: Some(why.clone()),
        choices: None,
        next: Some(match kind {
            crate::notify::Kind::Cap => format!(
                "mekara answer {id} max-cost=USD (or max-tokens=N, max-step-tokens=N, or stop), then {}",
                store.resume_command(id, retry)
            ),
            _ => store.resume_command(id, retry),
        }),
        at: crate::engine::journal::now_ms(),
    });
}

/// What came of asking the agent about the pending item.
enum Asked {
    /// The answer was journaled; the run went on to this reply.
    Next(Reply),
    Stop(End),
}

/// What an unattended run that stopped at a failed step of `script` says (`finish` adds how
/// to resume).
fn stopped_at_failure(script: &str, error: &str) -> String {
    format!(
        "a step of `{script}` failed: {}\nthe run stopped there: unattended, the agent does not work around a failure unless `--fallback agent` is given",
        error.trim().replace('\n', "\n  ")
    )
}

/// What an unattended run that stopped at a question says: the question, and how to answer.
fn waiting_for_answer(id: &str, path: &str, question: &str, choices: Option<&[String]>) -> String {
    let choices = choices.map_or_else(String::new, |c| {
        format!(" (choices: {})", crate::display::quoted(c))
    });
    format!(
        "waiting for an answer: `{path}` asks the person (the agent does not answer questions):\n  {}{choices}\ngive it with `mekara answer {id} VALUE`",
        question.trim().replace('\n', "\n  ")
    )
}

/// How long one agent answer may take, when the run must stop (`--max-duration`), and how
/// many tokens one item may use before its agent is not asked again (`--max-step-tokens`).
#[derive(Debug, Clone, Copy)]
struct Bounds {
    timeout: Duration,
    deadline: Option<Instant>,
    max_step_tokens: Option<u64>,
}

/// When this invocation must stop, by `--max-duration`.
fn deadline(limits: &limits::Limits, started: Instant) -> Option<Instant> {
    limits.max_duration.and_then(|max| started.checked_add(max))
}

/// How the run ends at a limit `reached` before item `step`: a spend cap pauses it for a
/// person (journaled, so `mekara answer` knows what it waits for), unless `--on-cap stop`;
/// another limit stops it.
fn at_limit(
    session: &mut Session,
    limits: &limits::Limits,
    step: &str,
    reached: limits::Reached,
) -> End {
    if !reached.cap || limits.on_cap == limits::OnCap::Stop {
        return End::Limit(format!("stopped before `{step}`: {}", reached.why));
    }
    let note = crate::engine::journal::CapEvent {
        action: crate::engine::journal::CapAction::Paused,
        step: Some(step.to_string()),
        why: Some(reached.why.clone()),
        caps: limits.caps,
        by: None,
        ignorable: true,
        at: crate::engine::journal::now_ms(),
    };
    if let Err(error) = session.note_cap(note) {
        // Without the note `mekara answer` cannot raise the cap: stopped, resumable with a
        // higher flag, as `--on-cap stop` would.
        eprintln!("! could not journal the pause at the cap: {error}");
        return End::Limit(format!("stopped before `{step}`: {}", reached.why));
    }
    let id = session.run_id().unwrap_or_default();
    End::Paused(format!(
        "paused before `{step}`: {}\nthe run waits for a person: raise the cap with `mekara answer {id} {}` (or any higher), or end the run with `mekara answer {id} stop`",
        reached.why,
        raise_example(&limits.caps, &reached.why)
    ))
}

/// An answer that raises the cap named in `why` to twice what it is.
fn raise_example(caps: &crate::engine::journal::Caps, why: &str) -> String {
    if why.contains("--max-step-tokens") {
        format!(
            "max-step-tokens={}",
            caps.max_step_tokens.unwrap_or(0).saturating_mul(2).max(1)
        )
    } else if why.contains("--max-tokens") {
        format!(
            "max-tokens={}",
            caps.max_tokens.unwrap_or(0).saturating_mul(2).max(1)
        )
    } else {
        let cost = caps.max_cost.unwrap_or(0.0);
        format!("max-cost={}", if cost > 0.0 { cost * 2.0 } else { 1.0 })
    }
}

/// What came of a rate limit.
enum Waited {
    /// The wait is over: ask again.
    Again,
    /// No more waiting: the item fails with this error.
    GaveUp(String),
    /// The run was stopped (Ctrl-C) during the wait.
    Cancelled,
}

/// Waits out a rate limit of the model that the agent asked about `step` met, by
/// `backoff`, unless that would pass `deadline` or the waits are spent. `note` journals the
/// wait (the attempt that follows it, its length, what the agent's client said) before it
/// starts, so a run killed during it says why it was waiting, and asks again on resume.
fn wait_out(
    backoff: &mut Backoff,
    limited: &RateLimited,
    step: &str,
    deadline: Option<Instant>,
    cancel: &crate::engine::CancelToken,
    note: &mut dyn FnMut(u32, Duration, String) -> Result<(), String>,
) -> Waited {
    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let wait = match backoff.next(limited, left) {
        Next::GiveUp(error) => return Waited::GaveUp(error),
        Next::Wait(wait) => wait,
    };
    let attempt = backoff.waits + 1;
    eprintln!(
        "  `{step}`: rate-limited by the model; waiting {} (attempt {attempt})",
        rate_limit::shown(wait)
    );
    if let Err(error) = note(attempt, wait, limited.said.clone()) {
        return Waited::GaveUp(format!(
            "rate-limited by the model, and the wait could not be journaled: {error}"
        ));
    }
    let until = Instant::now() + wait;
    loop {
        if cancel.is_cancelled() {
            return Waited::Cancelled;
        }
        let now = Instant::now();
        if now >= until {
            return Waited::Again;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

/// Asks the agent, and asks once more when its answer does not fit; waits out a rate limit
/// of the model and asks again; journals the answer, or the step's failure.
fn ask(
    agent: &mut dyn Agent,
    session: &mut Session,
    request: &mut Request,
    bounds: Bounds,
    prices: &crate::agents::prices::Prices,
    cancel: &crate::engine::CancelToken,
    progress: &dyn Fn(Progress<'_>),
) -> Asked {
    let started = Instant::now();
    let mut total = AgentReport::default();
    let mut backoff = Backoff::new();
    loop {
        if let Some(max) = bounds.max_step_tokens
            && total.attempts > 0
            && step_tokens(&total) >= max
        {
            // Asked again, the agent would take the step past its cap.
            let error = format!(
                "the agent was not asked again: this step used {} tokens already (`--max-step-tokens {max}`)",
                step_tokens(&total)
            );
            eprintln!("  {error}");
            if request.kind != Kind::Llm {
                return Asked::Stop(End::Failed(unfinished(request.kind, &request.step, &error)));
            }
            return Asked::Next(session.answer(Answered::Failed(error), total, progress));
        }
        let answer = agent
            .ask(request, bounds.timeout, cancel)
            .map_report(|r| prices.estimate(r));
        let (answer, report) = match answer {
            AgentReply::Cancelled => return Asked::Stop(End::Interrupted),
            AgentReply::Outputs(outputs, report) => (Ok(outputs), report),
            AgentReply::Malformed(error, report) => (Err((error, true)), report),
            AgentReply::Failed(error, report) => (Err((error, false)), report),
            AgentReply::RateLimited(limited, mut report) => {
                // Asked again in the run's session, not in one the turned-away attempt began.
                report.session = None;
                let step = request.step.clone();
                let mut note =
                    |attempt, wait, said| session.note_wait(step.clone(), attempt, wait, said);
                match wait_out(
                    &mut backoff,
                    &limited,
                    &step,
                    bounds.deadline,
                    cancel,
                    &mut note,
                ) {
                    Waited::Again => {
                        add(&mut total, &report, request.attempt, started.elapsed());
                        in_session(request, &report);
                        eprintln!(
                            "… asking the agent again: {} `{}`",
                            kind_name(request.kind),
                            request.step
                        );
                        continue;
                    }
                    Waited::Cancelled => return Asked::Stop(End::Interrupted),
                    Waited::GaveUp(error) => (Err((error, false)), report),
                }
            }
        };
        add(&mut total, &report, request.attempt, started.elapsed());
        in_session(request, &report);
        let refused = match answer {
            Ok(outputs) if request.kind == Kind::Llm => {
                eprintln!("  answered{}", cost_note(&total));
                let reply = session.answer(Answered::Outputs(outputs), total.clone(), progress);
                if !reply.is_error {
                    return Asked::Next(reply);
                }
                (reply.text, true)
            }
            Ok(_) => {
                eprintln!("  done{}", cost_note(&total));
                return Asked::Next(session.answer(Answered::Finished, total.clone(), progress));
            }
            Err(refused) => refused,
        };
        let (error, worth_again) = refused;
        eprintln!("  {}", error.trim().replace('\n', "\n  "));
        if worth_again && request.attempt == 1 {
            request.attempt = 2;
            request.previous_error = Some(error);
            eprintln!(
                "… asking the agent again: {} `{}`",
                kind_name(request.kind),
                request.step
            );
            continue;
        }
        if request.kind != Kind::Llm {
            return Asked::Stop(End::Failed(unfinished(
                request.kind,
                &request.step,
                error.trim(),
            )));
        }
        // The step fails; the script falls back (or ends) as on any failed step.
        return Asked::Next(session.answer(Answered::Failed(error), total, progress));
    }
}

/// Adds one attempt's report into the step's.
fn add(total: &mut AgentReport, report: &AgentReport, attempt: u32, elapsed: Duration) {
    let sum_f = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    };
    let sum_u = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    if report.session.is_some() {
        total.session.clone_from(&report.session);
    }
    total.cost_usd = sum_f(total.cost_usd, report.cost_usd);
    total.cost_estimated |= report.cost_estimated;
    if report.model.is_some() {
        total.model.clone_from(&report.model);
    }
    total.input_tokens = sum_u(total.input_tokens, report.input_tokens);
    total.output_tokens = sum_u(total.output_tokens, report.output_tokens);
    total.attempts = attempt;
    total.wall_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
}

/// The tokens an item's answers used, in and out.
fn step_tokens(report: &AgentReport) -> u64 {
    report.input_tokens.unwrap_or(0) + report.output_tokens.unwrap_or(0)
}

/// Takes the session an answer to `request` named as the one the next asking continues, and
/// counts the answer in what that session has cost.
fn in_session(request: &mut Request, report: &AgentReport) {
    let Some(session) = &report.session else {
        return;
    };
    if request.session.as_ref() != Some(session) {
        request.session = Some(session.clone());
        request.session_spent = crate::agents::headless::SessionSpent::default();
    }
    request.session_spent.cost_usd += report.cost_usd.unwrap_or(0.0);
    request.session_spent.input_tokens += report.input_tokens.unwrap_or(0);
    request.session_spent.output_tokens += report.output_tokens.unwrap_or(0);
}

fn cost_note(report: &AgentReport) -> String {
    format!(": {}", report.summary())
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Llm => "llm step",
        Kind::Nl => "NL script",
        Kind::Fallback => "to finish by hand the failed script",
    }
}

/// Why the run stopped when the agent could not finish an NL script, or a failed compiled
/// script by hand, at `step`.
fn unfinished(kind: Kind, step: &str, error: &str) -> String {
    match kind {
        Kind::Fallback => format!(
            "a step of `{step}` failed and the agent could not finish the script by hand: {error}"
        ),
        _ => format!("the agent could not finish the NL script `{step}`: {error}"),
    }
}

fn spent_of(store: &RunStore, id: &str) -> Spent {
    store
        .read(id)
        .map(|contents| Spent::of(&contents.events))
        .unwrap_or_default()
}

/// Reports how the run ended (the closing line or the JSON summary, and the JUnit file).
fn finish(
    args: &UnattendedArgs,
    store: &RunStore,
    id: Option<&str>,
    end: &End,
    elapsed: Duration,
) -> anyhow::Result<Exit> {
    let events = id
        .and_then(|id| store.read(id).ok())
        .map(|c| c.events)
        .unwrap_or_default();
    let spent = Spent::of(&events);
    let steps = steps_of(&events);
    let failed = steps
        .iter()
        .rev()
        .find(|(_, record)| !record.result.success && !record.allow_failure);
    let retry = matches!(end, End::StepFailed(_) | End::Stopped { retry: true, .. });
    // With `retry`: resumed as it is, the run would stop at the same failure.
    let resume = id
        .filter(|_| end.resumable() || retry)
        .map(|id| crate::engine::runs::resume_command(id, Some(&args.note()), retry));
    let exit = end.exit();
    match end {
        End::Limit(why)
        | End::Paused(why)
        | End::Failed(why)
        | End::StepFailed(why)
        | End::Waiting(why)
        | End::Stopped { why, .. } => {
            eprintln!("{why}");
        }
        _ => {}
    }
    match (&resume, end) {
        (Some(resume), End::Stopped { .. }) => eprintln!(
            "it stopped on a step that failed: once the cause is fixed, run that step again and go on with `{resume}`"
        ),
        (None, End::Stopped { .. }) => {
            eprintln!("the script ended the run there on purpose: nothing is left to resume");
        }
        (Some(resume), End::StepFailed(_)) => eprintln!(
            "the run is saved: fix the cause, then run the failed step again and go on with `{resume}` (or hand the rest to the agent: `--fallback agent` instead of `--retry`)"
        ),
        (Some(resume), _) => eprintln!("the run is saved: resume it with `{resume}`"),
        (None, _) => {}
    }
    if let Some(file) = &args.junit {
        std::fs::write(file, junit(id.unwrap_or_default(), &steps, end, elapsed)).map_err(|e| {
            anyhow::anyhow!("cannot write the JUnit report `{}`: {e}", file.display())
        })?;
    }
    if args.json {
        let summary = json!({
            "run_id": id,
            "state": end.state(),
            "exit_code": exit.code(),
            "steps": steps.len(),
            "agent_steps": spent.answers,
            "failed_step": failed.map(|(path, record)| json!({
                "step": path,
                "error": record.result.error,
            })),
            "cost_usd": spent.cost_usd,
            "cost_estimated": spent.cost_estimated,
            "tokens": spent.tokens,
            "duration_ms": u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            "stopped_by": match end {
                End::Limit(why)
                | End::Paused(why)
                | End::Failed(why)
                | End::StepFailed(why)
                | End::Waiting(why)
                | End::Stopped { why, .. } => Json::String(why.clone()),
                _ => Json::Null,
            },
            "resume": resume,
        });
        outln!("{}", serde_json::to_string_pretty(&summary)?)?;
    } else {
        let how = match end {
            _ if id.is_none() => "not started",
            End::Completed => "completed",
            End::FellBack => "failed and was finished by the agent",
            End::Limit(_) => "stopped at a limit",
            End::Paused(_) => "is paused at a spend cap",
            End::Failed(_) => "stopped: the agent could not go on",
            End::StepFailed(_) => "stopped at a failed step",
            End::Waiting(_) => "is waiting for an answer",
            End::Stopped { .. } => "stopped by the script",
            End::Interrupted => "interrupted",
        };
        let run = id.map_or_else(|| "run".to_string(), |id| format!("run {id}"));
        outln!(
            "── {run} {how}: {}, {} ({}) in {:.1} s ──",
            count(steps.len(), "step"),
            count(spent.answers, "agent answer"),
            crate::display::usd(spent.cost_usd, spent.cost_estimated),
            elapsed.as_secs_f64()
        )?;
    }
    Ok(exit)
}

/// The run's steps, each with its path (`test:random[1]`), in journal order.
pub(super) fn steps_of(events: &[Event]) -> Vec<(String, StepRecord)> {
    let mut scripts: Vec<String> = Vec::new();
    let mut steps = Vec::new();
    for event in events {
        match event {
            Event::Push(push) => {
                scripts.truncate(push.depth);
                scripts.push(crate::script::name::shown(&push.script));
            }
            Event::Step(step) => {
                let script = scripts.get(step.depth).cloned().unwrap_or_default();
                steps.push((
                    format!("{script}[{}]", step.record.index),
                    step.record.clone(),
                ));
            }
            Event::Pop(pop) => scripts.truncate(pop.depth),
            _ => {}
        }
    }
    steps
}

/// A JUnit XML report: one test case per step, failed steps as failures, and a run that did
/// not complete as a failed case of its own.
fn junit(id: &str, steps: &[(String, StepRecord)], end: &End, elapsed: Duration) -> String {
    let escape = xml_attribute;
    let mut cases = String::new();
    let mut failures = 0;
    for (path, record) in steps {
        let seconds = record.result.duration_ms.unwrap_or(0) as f64 / 1000.0;
        let _ = write!(
            cases,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{seconds:.3}\"",
            escape(id),
            escape(&format!("{path} {}", record.input.summary()))
        );
        match &record.result.error {
            Some(error) if !record.allow_failure => {
                failures += 1;
                let _ = write!(
                    cases,
                    ">\n      <failure message=\"{}\"/>\n    </testcase>\n",
                    escape(error)
                );
            }
            _ => cases.push_str("/>\n"),
        }
    }
    let tests = steps.len() + 1;
    let _ = write!(
        cases,
        "    <testcase classname=\"{}\" name=\"run\" time=\"{:.3}\"",
        escape(id),
        elapsed.as_secs_f64()
    );
    if *end == End::Completed {
        cases.push_str("/>\n");
    } else {
        failures += 1;
        let why = match end {
            End::Limit(why)
            | End::Paused(why)
            | End::Failed(why)
            | End::Waiting(why)
            | End::Stopped { why, .. } => why.clone(),
            other => other.state().replace('_', " "),
        };
        let _ = write!(
            cases,
            ">\n      <failure message=\"{}\"/>\n    </testcase>\n",
            escape(&why)
        );
    }
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n  <testsuite name=\"mekara run {}\" tests=\"{tests}\" failures=\"{failures}\" time=\"{:.3}\">\n{cases}  </testsuite>\n</testsuites>\n",
        escape(id),
        elapsed.as_secs_f64()
    )
}

/// `text` as the value of an XML attribute between double quotes: markup characters as
/// entities, line breaks and tabs as character references (a parser would turn them into
/// spaces), and characters XML 1.0 cannot hold at all (other control characters, U+FFFE,
/// U+FFFF) as `\u{..}`, so the report is valid XML whatever a step printed or said.
pub(super) fn xml_attribute(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

/// `--dry-run`: what a run of script `name` would do, as far as its source tells, without
/// running anything.
pub(super) fn dry_run(resolver: &Resolver, store: &RunStore, name: &str) -> anyhow::Result<Exit> {
    let script = resolver.resolve(name)?;
    let shown = script.name.to_string();
    let estimate = crate::engine::estimate::Estimate::of(store, &shown, None)
        .map_or_else(String::new, |e| e.shown());
    let Some(compiled) = &script.compiled else {
        outln!(
            "dry run of `{shown}`, an NL script: nothing runs. The agent does all of it, in one \
             agent step.\n{estimate}"
        )?;
        return Ok(Exit::Success);
    };
    let steps = match crate::engine::compiled::planned_steps(&shown, &compiled.text) {
        Ok(steps) => steps,
        Err(error) => {
            outln!(
                "dry run of `{shown}`: its compiled script does not parse, so a run falls back at \
                 once and the agent does the NL instructions by hand:\n{error}"
            )?;
            return Ok(Exit::Failure);
        }
    };
    let mut out = format!(
        "dry run of `{shown}`, a compiled script: nothing runs. The step calls in its source, in \
         order (a call in a loop, a branch or a function may run any number of times, or not at \
         all; a failed step hands the rest to the agent, from the NL instructions):\n"
    );
    let mut templates = false;
    for step in &steps {
        let what = match (step.builtin, &step.what) {
            ("auto", Some(call)) if call.ends_with("(…)") && !step.template => call.clone(),
            ("auto", Some(command)) if step.template => {
                templates = true;
                format!("$ {command}  ({{…}} when it runs)")
            }
            ("auto", Some(command)) => format!("$ {command}"),
            ("llm", Some(prompt)) => crate::display::clipped(prompt.trim(), 120).into_owned(),
            ("call_script", Some(name)) => {
                format!("{name} (`mekara run --dry-run {name}` lists its steps)")
            }
            ("parallel", None) => "members computed when it runs".to_string(),
            (_, Some(text)) => text.clone(),
            (_, None) => "(computed when it runs)".to_string(),
        };
        let kind = match step.builtin {
            "llm" => "llm → agent",
            "ask" => "ask → person",
            other => other,
        };
        // A group's members are indented under it.
        let kind = format!("{}{kind}", "  ".repeat(step.depth));
        let _ = write!(out, "  line {:<4} {kind:<12} {what}", step.line);
        if !step.expects.is_empty() {
            let _ = write!(out, " (expects {})", crate::display::quoted(&step.expects));
        }
        if let Some(context) = &step.context {
            let _ = write!(out, "  # {context}");
        }
        out.push('\n');
    }
    let agent = steps.iter().filter(|s| s.builtin == "llm").count();
    let groups = steps.iter().filter(|s| s.builtin == "parallel").count();
    let _ = write!(
        out,
        "{} written, {} of them for the agent",
        count(steps.len() - groups, "step call"),
        agent
    );
    if groups > 0 {
        let _ = write!(out, "; {}", count(groups, "parallel group"));
    }
    out.push_str(".\n");
    if templates {
        out.push_str(
            "A command marked `({…} when it runs)` is a template: each `{…}` stands for a value \
             the script computes when it runs (a name, or the expression written).\n",
        );
    }
    out.push_str(&estimate);
    outln!("{}", out.trim_end())?;
    Ok(Exit::Success)
}

/// Says on stderr what a run of script `name` is likely to cost, from its past runs.
fn print_estimate(store: &RunStore, resolver: &Resolver, name: &str) {
    let Ok(script) = resolver.resolve(name) else {
        return;
    };
    // Said only when there is something to go by: a first run has no past.
    if let Some(estimate) =
        crate::engine::estimate::Estimate::of(store, &script.name.to_string(), None)
        && estimate.runs > 0
    {
        eprintln!("{}", estimate.shown());
    }
}

/// The rest of the rate-limit wait run `id` stopped in, and its step: its journal ends with
/// a wait (a step's hand-over aside) whose end has not come. A resume waits it out rather
/// than ask the agent at once, which the model had asked not to be.
fn wait_left(store: &RunStore, id: &str) -> Option<(String, Duration)> {
    let contents = store.read(id).ok()?;
    let last = contents
        .events
        .iter()
        .rev()
        .find(|e| !matches!(e, Event::Handed(_) | Event::Ignored(_) | Event::Agent(_)))?;
    let Event::Wait(wait) = last else {
        return None;
    };
    let left = wait
        .at
        .saturating_add(wait.wait_ms)
        .checked_sub(crate::engine::journal::now_ms())
        .filter(|ms| *ms > 0)?;
    Some((wait.step.clone(), Duration::from_millis(left)))
}
