//! `mekara runs`: the runs of this project, and one run's journal, readably.

use super::output::{out, outln};
use clap::{ArgGroup, Args, Subcommand, ValueEnum};

use crate::agents::reply::resume_call;
use crate::display::{bytes, count, format_time};
use crate::engine::journal::{Event, Origin, Outcome, Reason};
use crate::engine::runs::{
    PruneRule, RunHistory, RunState, RunSummary, driven_by, live, resume_command,
};
use crate::engine::step::StepRecord;
use crate::engine::store::RunStore;
use crate::exit::Exit;
use crate::script::name::shown;
use crate::store::postgres::{JobState, QueueRow};
use crate::store::with_queue;

#[derive(Debug, Args)]
pub(super) struct RunsArgs {
    #[command(subcommand)]
    command: Option<RunsCommand>,
    /// Only runs created on this host (a shared run store lists every host's runs).
    #[arg(long, value_name = "HOST")]
    host: Option<String>,
    /// Only runs created by this user (a shared run store lists every user's runs).
    #[arg(long, value_name = "USER")]
    user: Option<String>,
    /// Only runs in this state (repeat it for several).
    #[arg(long, value_enum, value_name = "STATE")]
    state: Vec<PruneState>,
    /// Show the N newest runs (of those chosen); the older ones are counted, not read.
    #[arg(long, value_name = "N", default_value_t = NEWEST, conflicts_with = "all")]
    limit: usize,
    /// Show every run, however many.
    #[arg(long)]
    all: bool,
}

/// How many runs `mekara runs` shows when not told: a screenful, so that what it reads
/// follows what it shows, not the project's whole history.
const NEWEST: usize = 20;

#[derive(Debug, Subcommand)]
enum RunsCommand {
    /// Print a run's journal: every frame and step, with outputs.
    Show {
        /// The run's id, as `mekara runs` lists it.
        id: String,
    },
    /// Stop a run `mekara submit` queued, from any host: a queued run never starts, a running
    /// one stops within the step in flight (the shared run store only).
    Cancel {
        /// The run's id, as `mekara submit` printed it.
        id: String,
    },
    /// Remove old runs (never one another mekara process is driving)
    ///
    /// Say which runs go with at least one of `--older-than`, `--keep` and `--state`;
    /// `--dry-run` lists them first. A run's journal and step note go together; a step a
    /// killed mekara left running is killed first.
    #[command(group(ArgGroup::new("which").required(true).multiple(true).args(["older_than", "keep", "state"])))]
    Prune {
        /// Only runs with no activity for at least this long: `30d`, `12h`, `2weeks`.
        #[arg(long, value_name = "DURATION", value_parser = parse_age)]
        older_than: Option<std::time::Duration>,
        /// Keep the N newest runs (of the states chosen) and remove the older ones.
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// Only runs in this state (repeat it for several). Without it, every run that
        /// ended; interrupted runs go only when named, because they can still be resumed.
        #[arg(long, value_enum, value_name = "STATE")]
        state: Vec<PruneState>,
        /// List what would be removed, and remove nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

/// A state `--state` names, as `mekara runs` shows it.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum PruneState {
    /// completed
    Completed,
    /// failed, finished by hand
    Failed,
    /// finished by hand
    Finished,
    /// stopped by the script (`fail()`)
    Stopped,
    /// interrupted (it could still be resumed)
    Interrupted,
    /// waiting for an answer (it could still be answered and resumed)
    Waiting,
    /// stopped before its script started
    NotStarted,
    /// queued (`mekara submit`), waiting for a worker
    Queued,
    /// cancelled (`mekara runs cancel`)
    Cancelled,
}

impl From<PruneState> for RunState {
    fn from(state: PruneState) -> RunState {
        match state {
            PruneState::Completed => RunState::Completed,
            PruneState::Failed => RunState::FellBack,
            PruneState::Finished => RunState::FinishedByAgent,
            PruneState::Stopped => RunState::Stopped,
            PruneState::Interrupted => RunState::Interrupted,
            PruneState::Waiting => RunState::WaitingForAnswer,
            PruneState::NotStarted => RunState::NotStarted,
            PruneState::Queued => RunState::Queued,
            PruneState::Cancelled => RunState::Cancelled,
        }
    }
}

fn parse_age(text: &str) -> Result<std::time::Duration, String> {
    humantime::parse_duration(text)
        .map_err(|e| format!("{e}; write a duration such as `30d`, `12h` or `2weeks`"))
}

pub(super) fn run(args: RunsArgs) -> anyhow::Result<Exit> {
    let (locations, _) = super::locate()?;
    let store = super::run_store(&locations)?;
    match args.command {
        None => {
            if !store.is_shared() && (args.host.is_some() || args.user.is_some()) {
                return super::usage(format!(
                    "`--host` and `--user` choose among the runs of a shared run store, and this project keeps its runs in files ({}); set `[store] url` in `.mekara/config.toml` or `MEKARA_STORE_URL` to share them",
                    store.place()
                ));
            }
            let states: Vec<RunState> = args.state.into_iter().map(RunState::from).collect();
            let shown_at_most = if args.all { usize::MAX } else { args.limit };
            let chosen = |r: &RunSummary| {
                args.host
                    .as_ref()
                    .is_none_or(|h| r.host.as_ref() == Some(h))
                    && args
                        .user
                        .as_ref()
                        .is_none_or(|u| r.user.as_ref() == Some(u))
                    && (states.is_empty() || states.contains(&r.state))
            };
            let filtered = args.host.is_some() || args.user.is_some() || !states.is_empty();
            // Without a filter only the newest runs are read; a filter reads them all.
            let (mut runs, mut all) = if filtered {
                let runs = store.list()?;
                let all = runs.len();
                (runs, all)
            } else {
                store.list_newest(shown_at_most)?
            };
            if let Some(shared) = crate::store::config::shared(&locations)? {
                let before = runs.len();
                with_queue(&mut runs, shared.queue_rows(None)?);
                all += runs.len() - before;
            }
            runs.retain(chosen);
            let matching = if filtered { runs.len() } else { all };
            runs.drain(..runs.len().saturating_sub(shown_at_most));
            if all == 0 {
                outln!("no runs yet in {}", store.place())?;
                return Ok(Exit::Success);
            }
            if runs.is_empty() {
                outln!(
                    "none of the {} in {} matches",
                    count(all, "run"),
                    store.place()
                )?;
                return Ok(Exit::Success);
            }
            let shared = store.is_shared();
            outln!(
                "{:20}  {:24}  {:24}  {:20}  STEPS{}",
                "ID",
                "SCRIPT",
                "STATE",
                "STARTED",
                if shared {
                    format!("  {:16}  USER", "HOST")
                } else {
                    String::new()
                }
            )?;
            for r in &runs {
                let script = shown(&r.script);
                // A shared store's runs say who made them, in columns after the steps.
                let (steps, who) = match (&r.host, &r.user) {
                    (Some(host), Some(user)) => {
                        (format!("{:<5}", r.steps), format!("  {host:16}  {user}"))
                    }
                    _ => (r.steps.to_string(), String::new()),
                };
                match &r.problem {
                    Some(problem) => outln!("{:20}  unreadable: {problem}{who}", r.id)?,
                    None => outln!(
                        "{:20}  {:24}  {:24}  {:20}  {steps}{who}",
                        r.id,
                        script,
                        state_cell(r),
                        format_time(r.started_at),
                    )?,
                }
            }
            let total: u64 = runs.iter().map(|r| r.bytes).sum();
            // Bytes are added up only over every run chosen: a page would understate them.
            let what = if runs.len() == all {
                format!("{}, {}", count(all, "run"), bytes(total))
            } else if runs.len() == matching {
                format!("{} of {all}, {}", runs.len(), bytes(total))
            } else if filtered {
                format!(
                    "the {} newest of the {matching} that match (of {all})",
                    runs.len()
                )
            } else {
                format!("the {} newest of {}", runs.len(), count(all, "run"))
            };
            let paged = if runs.len() < matching {
                "; `--all` shows every one, `--limit N` the N newest"
            } else {
                ""
            };
            outln!(
                "\n{what} in {}{paged}; `mekara runs prune` removes old ones",
                store.place()
            )?;
        }
        Some(RunsCommand::Prune {
            older_than,
            keep,
            state,
            dry_run,
        }) => {
            if state.iter().any(|s| matches!(s, PruneState::Queued)) {
                return super::usage(
                    "queued runs wait in the queue and are never pruned: stop one with `mekara runs cancel ID`, then prune it as `--state cancelled`",
                );
            }
            let rule = PruneRule {
                older_than,
                keep,
                states: state.into_iter().map(RunState::from).collect(),
            };
            let queue = match crate::store::config::shared(&locations)? {
                Some(shared) => shared.queue_rows(None)?,
                None => Vec::new(),
            };
            return prune(&store, &rule, queue, dry_run);
        }
        Some(RunsCommand::Cancel { id }) => return super::queue::cancel(&locations, &id),
        Some(RunsCommand::Show { id }) => {
            let queued = match crate::store::config::shared(&locations)? {
                Some(shared) => shared.queue_rows(Some(&id))?.pop(),
                None => None,
            };
            let contents = match (store.read(&id), &queued) {
                (Err(crate::engine::EngineError::RunNotFound { .. }), Some(row)) => {
                    outln!("{}", not_started(row))?;
                    return Ok(Exit::Success);
                }
                (contents, _) => contents?,
            };
            let mut out = String::new();
            // An unreadable order of supersede events is said by the state below; here,
            // every event then counts as live.
            let live = live(&contents.events).unwrap_or_else(|_| vec![true; contents.events.len()]);
            for (event, live) in contents.events.iter().zip(live) {
                let mut text = String::new();
                show_event(&mut text, event);
                if !live && !matches!(event, Event::Supersede(_)) {
                    text = mark_superseded(&text);
                }
                out.push_str(&text);
            }
            if let Some(torn) = contents.torn {
                out.push_str(&format!(
                    "! torn last record ({} bytes at byte {}): the writer stopped mid-write; it is ignored\n",
                    torn.len, torn.offset
                ));
            }
            let has_token = contents
                .events
                .iter()
                .any(|e| matches!(e, Event::Run(header) if header.token_sha256.is_some()));
            let mut summary = vec![store.summary(&id)?];
            with_queue(&mut summary, queued.into_iter().collect());
            let driver = driven_by(&contents.events);
            let resume = resume_command(&id, driver, false);
            // Said when the journal does not name the agent that drove the run.
            let agent_hint = |hint: &'static str| if driver.is_some() { "" } else { hint };
            let paused = crate::engine::journal::waiting_at_cap(&contents.events);
            match summary[0].state {
                RunState::WaitingForAnswer | RunState::Interrupted if paused.is_some() => out.push_str(&format!(
                    "paused at a spend cap: answer with `mekara answer {id} ANSWER` ({}), then resume it with `{resume}`{}\n",
                    crate::engine::caps::HOW_TO_ANSWER,
                    agent_hint(" (with the `--agent` it ran with)")
                )),
                // The journal keeps only the digest of a run's token: over MCP, only the
                // agent that holds the handle its `start` gave can take the run up.
                RunState::Interrupted if has_token => out.push_str(&format!(
                    "interrupted: resume it with `{resume}`; over MCP, only the agent holding its handle can, with {} (the id alone is refused)\n",
                    resume_call(&format!("{id}.<token>"))
                )),
                RunState::Interrupted => out.push_str(&format!(
                    "interrupted: resume it with `{resume}`, or from an agent with MCP {}\n",
                    resume_call(&id)
                )),
                RunState::WaitingForAnswer => {
                    out.push_str(&format!(
                        "waiting for an answer: give it with `mekara answer {id} VALUE`, then resume it with `{resume}`{}\n",
                        agent_hint(" (with the `--agent` it ran with, if any)")
                    ));
                }
                RunState::Active => {
                    out.push_str("active: another mekara process is driving it now\n");
                }
                RunState::NotStarted => out.push_str(
                    "stopped before its script started: nothing ran, so there is nothing to resume\n",
                ),
                RunState::Cancelled => out.push_str(&format!(
                    "cancelled by `mekara runs cancel`; resume it with `{resume}`{} to go on all the same\n",
                    agent_hint(" (with the agent it ran with)")
                )),
                RunState::Stopped => out.push_str(&format!(
                    "stopped by the script: {}\nthe script ended the run there on purpose, so there is nothing to resume; when it stopped on a failed step whose cause is fixed now, run that step again with `mekara run --resume {id} --retry`; to go on from an earlier step (to give another answer), `mekara run --resume {id} --from STEP`\n",
                    stop_message(&contents.events).unwrap_or_default()
                )),
                RunState::Completed
                | RunState::FinishedByAgent
                | RunState::FellBack
                | RunState::Queued => {}
            }
            if matches!(summary[0].state, RunState::Active | RunState::Interrupted) {
                out.push_str(&waiting_on(&id, &contents.events));
            }
            out.push_str(&spend_lines(
                &store,
                &id,
                &summary[0].script,
                &contents.events,
            ));
            out!("{out}")?;
        }
    }
    Ok(Exit::Success)
}

/// What a run's agents spent, against the caps it last ran under, and what a run of its
/// script is likely to cost (from the script's past runs, this one left out): said only for
/// a run with agent answers or caps.
fn spend_lines(
    store: &crate::engine::store::RunStore,
    id: &str,
    script: &str,
    events: &[Event],
) -> String {
    let spent = crate::agents::headless::Spent::of(events);
    let caps = events.iter().rev().find_map(|e| match e {
        Event::Cap(cap) => Some(cap.caps),
        _ => None,
    });
    if spent.answers == 0 && caps.is_none() {
        return String::new();
    }
    let mut out = format!(
        "spent: {} and {} tokens in {}",
        crate::display::usd(spent.cost_usd, spent.cost_estimated),
        spent.tokens,
        crate::display::count(spent.answers, "agent answer")
    );
    if let Some(caps) = caps {
        out.push_str(&format!(" (caps: {})", caps.shown()));
    }
    out.push('\n');
    if let Some(estimate) = crate::engine::estimate::Estimate::of(store, &shown(script), Some(id)) {
        out.push_str(&estimate.shown());
        out.push('\n');
    }
    out
}

/// The llm step a run waits on for the agent, as its journal says (`handed`): a line naming
/// it and the first lines of its instructions; nothing when the journal does not say.
fn waiting_on(id: &str, events: &[Event]) -> String {
    let Ok(history) = RunHistory::replay(std::path::Path::new(id), events) else {
        return String::new();
    };
    let Some((top, handed)) = history
        .frames
        .last()
        .and_then(|top| Some((top, top.waiting_llm()?)))
    else {
        return String::new();
    };
    format!(
        "it waits for the agent on the llm step `{}[{}]`, handed out {}:\n{}\n",
        shown(&top.push.script),
        handed.index,
        format_time(handed.at),
        indent_lines(&format!("  {}", handed.prompt), "  ")
    )
}

/// `mekara runs prune`: removes what `rule` selects (or lists it, for a dry run).
fn prune(
    store: &RunStore,
    rule: &PruneRule,
    queue: Vec<QueueRow>,
    dry_run: bool,
) -> anyhow::Result<Exit> {
    let mut runs = store.list()?;
    let total = runs.len();
    // A run the queue still holds (queued again after its worker let it go, or claimed) is
    // a worker's to resume: never pruned. A cancelled one reads `cancelled`.
    let waiting: Vec<String> = queue
        .iter()
        .filter(|row| matches!(row.state, JobState::Queued | JobState::Claimed))
        .map(|row| row.run_id.clone())
        .collect();
    runs.retain(|r| !waiting.contains(&r.id));
    let queue = queue
        .into_iter()
        .filter(|row| runs.iter().any(|r| r.id == row.run_id))
        .collect();
    with_queue(&mut runs, queue);
    let chosen = rule.select(&runs, crate::engine::journal::now_ms());
    let unreadable = runs.iter().filter(|r| r.problem.is_some()).count();
    if chosen.is_empty() {
        outln!(
            "no run to remove: none of the {} matches",
            count(total, "run")
        )?;
    } else if dry_run {
        let total: u64 = chosen.iter().map(|r| r.bytes).sum();
        outln!(
            "would remove {} ({}); nothing was removed:",
            count(chosen.len(), "run"),
            bytes(total)
        )?;
        for r in &chosen {
            outln!("  {}", prune_line(r))?;
        }
    } else {
        let (mut removed, mut freed, mut skipped) = (0, 0, 0);
        for r in &chosen {
            match store.remove(&r.id) {
                Ok(b) => {
                    removed += 1;
                    freed += b;
                    outln!("removed {}", prune_line(r))?;
                }
                Err(e) => {
                    skipped += 1;
                    outln!("kept {}: {e}", r.id)?;
                }
            }
        }
        outln!(
            "removed {}, {} freed; {} left",
            count(removed, "run"),
            bytes(freed),
            count(total - removed, "run")
        )?;
        if skipped > 0 {
            return Ok(Exit::Failure);
        }
    }
    if unreadable > 0 {
        outln!(
            "{} cannot be read and {} never removed by prune: `mekara runs` names {}",
            count(unreadable, "run"),
            if unreadable == 1 { "is" } else { "are" },
            if unreadable == 1 { "it" } else { "them" }
        )?;
    }
    Ok(Exit::Success)
}

fn prune_line(r: &RunSummary) -> String {
    format!(
        "{}  {}  {}  last active {}",
        r.id,
        shown(&r.script),
        r.state,
        format_time(r.last_at.max(r.started_at))
    )
}

fn show_event(out: &mut String, event: &Event) {
    match event {
        Event::Run(run) => out.push_str(&format!(
            "run {} (mekara {}), started {}\n",
            run.id,
            run.mekara,
            format_time(run.at)
        )),
        Event::Push(push) => {
            let indent = "  ".repeat(push.depth);
            let how = match push.origin {
                Origin::Start => "started",
                Origin::Call => "called",
            };
            let kind = if push.compiled { "compiled" } else { "NL" };
            out.push_str(&format!(
                "{indent}▶ {} ({kind}, {how}) in {}",
                shown(&push.script),
                push.working_dir.display()
            ));
            if !push.request.is_empty() {
                out.push_str(&format!(" with `{}`", push.request));
            }
            out.push('\n');
        }
        Event::Step(step) => show_step(out, step.depth, &step.record),
        Event::Ask(ask) => {
            let indent = "  ".repeat(ask.depth + 1);
            out.push_str(&format!(
                "{indent}? [{}] asked the person, {}: {}\n",
                ask.index,
                format_time(ask.at),
                indent_lines(ask.question.trim_end(), &indent)
            ));
            if let Some(choices) = &ask.choices {
                out.push_str(&format!(
                    "{indent}    choices: {}\n",
                    crate::display::quoted(choices)
                ));
            }
        }
        Event::Wait(wait) => {
            let indent = "  ".repeat(wait.depth + 1);
            out.push_str(&format!(
                "{indent}⏸ `{}` rate-limited by the model, {}: a wait of {} before attempt {}; it said: {}\n",
                wait.step,
                format_time(wait.at),
                crate::agents::rate_limit::shown(std::time::Duration::from_millis(wait.wait_ms)),
                wait.attempt,
                indent_lines(
                    &crate::display::clipped(wait.said.trim(), 500),
                    &indent
                )
            ));
        }
        Event::Ignored(ignored) => out.push_str(&format!(
            "· a `{}` event from a later mekara, {} (skipped)\n",
            ignored.kind,
            format_time(ignored.at)
        )),
        // Said once, as what the run waits on (`waiting_on`); the step shows once answered.
        Event::Handed(_) => {}
        Event::Agent(agent) => out.push_str(&format!(
            "· taken up unattended with `{}`, {}\n",
            agent.flags().trim_start(),
            format_time(agent.at)
        )),
        Event::Cap(cap) => out.push_str(&format!("{}, {}\n", cap.said(), format_time(cap.at))),
        Event::Killed(killed) => {
            let indent = "  ".repeat(killed.depth + 1);
            out.push_str(&format!(
                "{indent}✗ [{}] killed, {}: this attempt was still running from a mekara that stopped; the resume killed its process group {}{} and runs the step again\n",
                killed.index,
                format_time(killed.at),
                killed.group,
                if killed.lingered {
                    " (some of its processes had not ended a while later)"
                } else {
                    ""
                }
            ));
        }
        Event::Fail(fail) => {
            let indent = "  ".repeat(fail.depth + 1);
            out.push_str(&format!(
                "{indent}✗ fell back to the NL instructions: {}\n",
                indent_lines(&fail.error, &indent)
            ));
        }
        Event::Supersede(supersede) => {
            let indent = "  ".repeat(supersede.depth + 1);
            let why = match supersede.reason {
                Reason::Retry => "retry",
                Reason::ScriptChanged => "the script changed",
                Reason::From => "--from",
            };
            out.push_str(&format!(
                "{indent}↺ superseded from {}[{}] ({why}, by mekara {}): the events marked superseded stay in the journal; the run went on from there\n",
                shown(&supersede.script),
                supersede.index,
                supersede.mekara
            ));
        }
        Event::Pop(pop) => {
            let indent = "  ".repeat(pop.depth);
            let how = match pop.outcome {
                Outcome::Completed => "completed",
                Outcome::FinishedByAgent if pop.agent.is_some() => "finished by the agent process",
                Outcome::FinishedByAgent => "finished by hand",
                Outcome::Failed => "failed",
                Outcome::Stopped => "stopped by the script",
            };
            out.push_str(&format!("{indent}◀ {how}"));
            if let Some(error) = &pop.error {
                out.push_str(&format!(": {}", indent_lines(error, &indent)));
            }
            out.push('\n');
            if let Some(agent) = &pop.agent {
                out.push_str(&format!("{indent}    agent: {}\n", agent.summary()));
            }
        }
    }
}

/// What the script that stopped the run gave `fail()`, as the live events say.
fn stop_message(events: &[Event]) -> Option<String> {
    let path = std::path::Path::new("");
    crate::engine::runs::RunHistory::replay(path, events)
        .ok()?
        .stop_message
}

fn show_step(out: &mut String, depth: usize, record: &StepRecord) {
    let indent = "  ".repeat(depth + 1);
    let mark = record.mark();
    out.push_str(&format!(
        "{indent}{mark} [{}] {}",
        record.index,
        record.input.summary()
    ));
    if let Some(member) = &record.parallel {
        out.push_str(&format!("  ∥ {member}"));
    }
    if let Some(context) = &record.context {
        out.push_str(&format!("  # {context}"));
    }
    if let Some(ms) = record.result.duration_ms {
        out.push_str(&format!("  ({ms} ms)"));
    }
    out.push('\n');
    let body = format!("{indent}    ");
    if !record.result.output.is_empty() {
        out.push_str(&format!(
            "{body}{}\n",
            indent_lines(record.result.output.trim_end(), &body)
        ));
    }
    if let Some(value) = &record.result.value {
        out.push_str(&format!("{body}= {value}\n"));
    }
    if let Some(outputs) = &record.result.outputs {
        out.push_str(&format!(
            "{body}→ {}\n",
            serde_json::Value::Object(outputs.clone())
        ));
    }
    if let Some(answer) = &record.result.answer {
        let label = record.result.answer_label();
        out.push_str(&format!("{body}{label}: {answer}\n"));
    }
    if let Some(agent) = &record.result.agent {
        out.push_str(&format!("{body}agent: {}\n", agent.summary()));
    }
    if let Some(error) = &record.result.error {
        let label = if record.failure_allowed() {
            "error (allowed by `allow_failure`: the script went on)"
        } else {
            "error"
        };
        out.push_str(&format!("{body}{label}: {}\n", indent_lines(error, &body)));
    }
}

/// An event's text with its first line marked as superseded by a retry or rewind.
fn mark_superseded(text: &str) -> String {
    match text.split_once('\n') {
        Some((first, rest)) => format!("{first}  (superseded)\n{rest}"),
        None => format!("{text}  (superseded)"),
    }
}

fn indent_lines(text: &str, indent: &str) -> String {
    text.replace('\n', &format!("\n{indent}"))
}

/// The STATE cell of `mekara runs`: a queued run names its queue, a run a worker drives
/// names the worker's host.
fn state_cell(r: &RunSummary) -> String {
    match (&r.state, &r.queue, &r.worker) {
        (RunState::Queued, Some(queue), _) => format!("queued in {queue}"),
        (RunState::Active, _, Some(worker)) => format!("active on {worker}"),
        (state, _, _) => state.to_string(),
    }
}

/// What `runs show` says of a queued run that has no journal yet.
fn not_started(row: &QueueRow) -> String {
    let id = &row.run_id;
    let submitted = format!(
        "run {id} (`{}`), submitted to queue `{}` by {} on {}, {}",
        shown(&row.script),
        row.queue,
        row.submitted_user,
        row.submitted_host,
        format_time(row.submitted_at)
    );
    let now = match row.state {
        JobState::Claimed if row.live => format!(
            "starting on {}",
            row.worker_host.as_deref().unwrap_or("a worker")
        ),
        JobState::Queued | JobState::Claimed => {
            "queued: no step has run yet; a `mekara worker` runs it".to_string()
        }
        JobState::Cancelled => "cancelled before a worker ran it".to_string(),
        JobState::Done | JobState::Failed => format!(
            "failed before its script started: {}",
            row.note.as_deref().unwrap_or("see the worker's output")
        ),
    };
    format!("{submitted}\n{now}")
}
