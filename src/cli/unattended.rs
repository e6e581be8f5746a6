//! `mekara run --agent claude` / `--agent-command CMD`: an unattended run. mekara runs the
//! auto steps and starts an agent process for each llm step, NL script and fallback, with
//! the text an agent over MCP would read (the same [`Session`] renders it). Answers are
//! checked as over MCP and journaled with what the agent reported; limits on agent steps,
//! cost and time stop the run between steps, resumable. For CI: exit codes, a `--json`
//! summary on stdout and a `--junit` report.
//!
//! Progress goes to stderr, so that stdout holds only the closing line, or the JSON summary.

mod args;
mod ask;
mod end;
pub(crate) mod limits;
mod tasks;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value as Json, json};

use super::output::outln;
use crate::agents::headless::{Agent, Kind, Request, Spent, outputs_schema};
use crate::agents::history::Progress;
use crate::agents::rate_limit::{self, Backoff};
use crate::agents::session::Session;
use crate::agents::tools::AgentCall;
use crate::display::count;
use crate::engine::journal::Event;
use crate::engine::step::StepRecord;
use crate::engine::store::RunStore;
use crate::engine::{Pending, Settings, StepRunner};
use crate::exit::Exit;
use crate::script::Resolver;
use args::Fallback;
pub(super) use args::UnattendedArgs;
use ask::{Asked, Bounds, ask, at_limit, deadline, kind_name};
pub(super) use end::End;

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
    let agent_timeout = super::timeout_arg("--agent-timeout", &args.agent_timeout)?;
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
