//! What the viewer shows, as data: the runs of the store ([`RunRow`]) and one run as a tree
//! of frames with their steps on one time axis ([`RunDetail`]). Built from what every other
//! reader uses (the store's listing, its events, [`live`] and [`RunHistory`]); the pages and
//! `/api` are two renderings of these same values.

use std::collections::HashMap;
use std::sync::Mutex;

use serde::Serialize;

use crate::engine::EngineError;
use crate::engine::group_note::DoingKind;
use crate::engine::journal::{Event, Origin, Outcome, Reason, now_ms};
use crate::engine::runs::{RunHistory, RunState, RunSummary, driven_by, live, resume_command};
use crate::engine::step::{AgentReport, StepInput, StepRecord, StepResult};
use crate::engine::store::RunStore;
use crate::paths::Locations;

/// One run as the runs page lists it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunRow {
    pub id: String,
    pub script: String,
    /// The state, as `mekara runs` words it.
    pub state: String,
    /// The state as a short key: `active`, `llm` (held, its llm step handed to the agent
    /// and not answered yet), `interrupted`, `waiting`, `completed`, `finished`, `failed`,
    /// `not-started`, `queued`, `cancelled`.
    pub state_key: &'static str,
    pub host: Option<String>,
    pub user: Option<String>,
    pub queue: Option<String>,
    pub worker: Option<String>,
    /// Start time (Unix ms).
    pub started_at: u64,
    /// From the start to the last event (to now, for a run not ended).
    pub duration_ms: u64,
    pub steps: usize,
    /// What its agent steps cost, as far as the agents said (every attempt counted).
    pub cost_usd: Option<f64>,
    /// Why its journal cannot be read, when it cannot.
    pub problem: Option<String>,
}

/// The short key of a state: CSS classes, the `state` filter, `/api`.
pub(crate) fn state_key(state: RunState) -> &'static str {
    match state {
        RunState::Active => "active",
        RunState::Interrupted => "interrupted",
        RunState::WaitingForAnswer => "waiting",
        RunState::Completed => "completed",
        RunState::FinishedByAgent => "finished",
        RunState::FellBack => "failed",
        RunState::Stopped => "stopped",
        RunState::NotStarted => "not-started",
        RunState::Queued => "queued",
        RunState::Cancelled => "cancelled",
    }
}

/// Every state key, in the order the filter offers them.
pub(crate) const STATE_KEYS: [&str; 11] = [
    "active",
    "llm",
    "waiting",
    "interrupted",
    "queued",
    "completed",
    "failed",
    "stopped",
    "finished",
    "cancelled",
    "not-started",
];

/// The costs of ended runs, by id and last activity: an ended run's journal is read once.
#[derive(Debug, Default)]
pub(crate) struct CostCache(Mutex<HashMap<String, (u64, Option<f64>)>>);

/// The store's runs with what the shared queue knows, newest first.
pub(crate) fn summaries(
    locations: &Locations,
    store: &RunStore,
) -> Result<Vec<RunSummary>, EngineError> {
    let mut runs = store.list()?;
    if let Some(shared) = crate::store::config::shared(locations)? {
        let rows = shared.queue_rows(None).map_err(EngineError::from)?;
        crate::store::with_queue(&mut runs, rows);
    }
    runs.reverse();
    Ok(runs)
}

/// The runs page's rows, newest first.
pub(crate) fn rows(
    locations: &Locations,
    store: &RunStore,
    costs: &CostCache,
) -> Result<Vec<RunRow>, EngineError> {
    let now = now_ms();
    let runs = summaries(locations, store)?;
    Ok(runs
        .into_iter()
        .map(|r| {
            let cost = costs.of(store, &r);
            row(r, cost, now)
        })
        .collect())
}

fn row(r: RunSummary, cost_usd: Option<f64>, now: u64) -> RunRow {
    let end = if r.state.has_ended() || r.problem.is_some() {
        r.last_at
    } else {
        now
    };
    // A run held by a process whose note says its llm step waits for the agent. A run
    // nobody holds is interrupted whatever its note says (the summary has no `now` then).
    let waits_for_llm =
        r.state == RunState::Active && r.now.is_some_and(|now| now.kind == DoingKind::Llm);
    RunRow {
        state: if waits_for_llm {
            "waiting for an llm step".to_string()
        } else {
            r.state.to_string()
        },
        state_key: if waits_for_llm {
            "llm"
        } else {
            state_key(r.state)
        },
        duration_ms: end.saturating_sub(r.started_at),
        id: r.id,
        script: crate::script::name::shown(&r.script),
        host: r.host,
        user: r.user,
        queue: r.queue,
        worker: r.worker,
        started_at: r.started_at,
        steps: r.steps,
        cost_usd,
        problem: r.problem,
    }
}

impl CostCache {
    fn of(&self, store: &RunStore, run: &RunSummary) -> Option<f64> {
        if run.steps == 0 || run.problem.is_some() {
            return None;
        }
        let key = run.last_at;
        if let Ok(cache) = self.0.lock()
            && let Some((at, cost)) = cache.get(&run.id)
            && *at == key
        {
            return *cost;
        }
        let cost = store
            .read(&run.id)
            .ok()
            .and_then(|c| Spent::of(&c.events).cost_usd);
        if let Ok(mut cache) = self.0.lock() {
            cache.insert(run.id.clone(), (key, cost));
        }
        cost
    }
}

/// What the agents of a run reported spending: every attempt, superseded ones too (their
/// money was spent all the same).
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Spent {
    pub cost_usd: Option<f64>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Agent answers counted.
    pub answers: usize,
}

impl Spent {
    fn of(events: &[Event]) -> Spent {
        let mut spent = Spent::default();
        for event in events {
            let agent = event.agent_report();
            if let Some(agent) = agent {
                spent.add(agent);
            }
        }
        spent
    }

    fn add(&mut self, agent: &AgentReport) {
        fn plus<T: std::ops::Add<Output = T> + Copy>(a: Option<T>, b: Option<T>) -> Option<T> {
            match (a, b) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            }
        }
        self.answers += 1;
        self.cost_usd = plus(self.cost_usd, agent.cost_usd);
        self.input_tokens = plus(self.input_tokens, agent.input_tokens);
        self.output_tokens = plus(self.output_tokens, agent.output_tokens);
    }
}

/// One run, whole.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunDetail {
    #[serde(flatten)]
    pub row: RunRow,
    /// When it was submitted to a queue (Unix ms), for a queued run: its queue time is from
    /// here to `started_at`.
    pub submitted_at: Option<u64>,
    /// The end of its time axis: its last event, or now while it goes on (Unix ms).
    pub until: u64,
    /// The root frames (one, and more when a finished run was started again by hand).
    pub frames: Vec<FrameView>,
    /// What the agents spent.
    pub spent: Spent,
    /// The caps, a pause at one, and the estimate.
    pub spend: super::spend::SpendView,
    /// The question it waits on, when nobody drives it and it waits for a person.
    pub question: Option<Question>,
    /// Commands that go on with it.
    pub commands: Vec<String>,
    /// A torn last record the reader ignored.
    pub torn: Option<String>,
    /// The step it is on now, while a process drives it and the note beside its journal
    /// says: a shell step running, or an llm step waiting for the agent. Gone once the
    /// step's result is journaled.
    pub now: Option<NowStep>,
}

/// The step a run is on now (not journaled yet).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct NowStep {
    /// `llm` (handed to the agent, not answered yet) or `shell` (running).
    pub kind: DoingKind,
    /// Its frame's script.
    pub script: String,
    /// Its position in that frame.
    pub index: usize,
    /// Since when (Unix ms).
    pub since: u64,
    /// For how long, until `until` (ms).
    pub for_ms: u64,
}

/// The question a run waits on.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Question {
    pub question: String,
    pub choices: Option<Vec<String>>,
    /// Where: `deploy[1]`.
    pub script: String,
    pub index: usize,
    pub asked_at: u64,
}

/// A frame: a script on the stack, its steps and the frames it called, in order.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FrameView {
    pub script: String,
    pub compiled: bool,
    /// `started` (pushed by `start` or `mekara run`, or started by hand inside another
    /// script) or `called` (`call_script`).
    pub origin: &'static str,
    pub request: String,
    pub working_dir: String,
    pub depth: usize,
    pub started_at: u64,
    pub ended_at: Option<u64>,
    /// `completed`, `finished by hand`, `failed`; none while on the stack.
    pub outcome: Option<&'static str>,
    pub error: Option<String>,
    /// The failure it fell back to its NL instructions on.
    pub fell_back: Option<String>,
    /// What the agent process that finished it by hand reported.
    pub agent: Option<AgentReport>,
    /// A retry or rewind took it out of the run's history (it stays visible).
    pub superseded: bool,
    pub items: Vec<Item>,
}

/// What a frame holds, in the order it happened.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "item", rename_all = "snake_case")]
pub(crate) enum Item {
    Step(Box<StepView>),
    Frame(Box<FrameView>),
    /// An attempt of step `index` left running by a mekara that stopped, killed by the
    /// resume that ran the step again.
    Killed {
        index: usize,
        group: i32,
        at: u64,
    },
    /// A retry or rewind: the history from `script[index]` on was superseded.
    Supersede {
        script: String,
        index: usize,
        reason: &'static str,
        at: u64,
    },
    /// An unattended run waited out a rate limit of the model before asking its agent
    /// about `step` again (attempt `attempt`).
    Wait {
        step: String,
        attempt: u32,
        wait_ms: u64,
        said: String,
        at: u64,
        superseded: bool,
    },
}

/// One journaled step.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct StepView {
    pub index: usize,
    pub summary: String,
    pub context: Option<String>,
    pub input: StepInput,
    pub result: StepResult,
    pub allow_failure: bool,
    /// `ok`, `failed`, or `allowed` (failed, and `allow_failure` let the script go on).
    pub mark: &'static str,
    /// Its `parallel` group and member.
    pub group: Option<usize>,
    pub member: Option<usize>,
    /// When it began (Unix ms): its end less its duration, or, for a step the agent or a
    /// person did, when it was handed over.
    pub started_at: u64,
    pub ended_at: u64,
    /// How long it waited for the agent (llm) or the person (ask), in ms.
    pub waited_ms: Option<u64>,
    /// A retry or rewind superseded it; the attempt that replaced it follows.
    pub superseded: bool,
    /// Its event's place in the run's journal (from 0): the address of its whole output.
    pub event: usize,
    /// Set when `result.output` holds only the head and tail of the output.
    pub output_clipped: Option<ClippedOutput>,
}

/// A step output shown clipped ([`crate::agents::reply::head_and_tail`], as MCP replies
/// show it): a run's page and `/api` stay small however much a step printed.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ClippedOutput {
    /// The whole output's size.
    pub bytes: usize,
    pub lines: usize,
    /// Where the whole output is served as text (with the token, as every page).
    pub whole: String,
}

/// The characters of a run id left as they are in a link's path; every other byte is
/// percent-encoded (a store only lists ids of letters, digits, `-` and `_`, but a link never
/// relies on it: `/`, `?`, `#` or a space in an id would otherwise change where it goes).
const PATH_SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// The viewer's path of run `id` (`/runs/ID`) followed by `tail` (`/answer`), the id
/// URL-encoded.
pub(crate) fn run_path(id: &str, tail: &str) -> String {
    format!(
        "/runs/{}{tail}",
        percent_encoding::utf8_percent_encode(id, PATH_SEGMENT)
    )
}

/// Where the viewer serves the whole output of the step at `event` of run `id`.
pub(crate) fn output_path(id: &str, event: usize) -> String {
    run_path(id, &format!("/output/{event}"))
}

/// A frame being built: where it sits, and what it holds so far.
struct Building {
    view: FrameView,
    parent: Option<usize>,
    /// Items, with the frames they hold as indexes into the arena.
    items: Vec<Slot>,
    asked_at: Option<(usize, u64)>,
}

enum Slot {
    Item(Item),
    Frame(usize),
}

/// Run `id` of `store`, whole, with what the queue knows of it.
pub(crate) fn detail(
    locations: &Locations,
    store: &RunStore,
    id: &str,
) -> Result<RunDetail, EngineError> {
    let queued = match crate::store::config::shared(locations)? {
        Some(shared) => shared
            .queue_rows(Some(id))
            .map_err(EngineError::from)?
            .pop(),
        None => None,
    };
    let contents = match store.read(id) {
        Err(EngineError::RunNotFound { .. }) if queued.is_some() => None,
        contents => Some(contents?),
    };
    // A queued run without a journal yet is all in its queue row.
    let mut summary = match &contents {
        Some(_) => vec![store.summary(id)?],
        None => Vec::new(),
    };
    let submitted_at = queued.as_ref().map(|q| q.submitted_at);
    crate::store::with_queue(&mut summary, queued.into_iter().collect());
    let summary = summary
        .pop()
        .ok_or_else(|| EngineError::RunNotFound { id: id.to_string() })?;
    let Some(mut contents) = contents else {
        let now = now_ms();
        return Ok(RunDetail {
            until: now,
            row: row(summary, None, now),
            submitted_at,
            frames: Vec::new(),
            spent: Spent::default(),
            spend: super::spend::SpendView::default(),
            question: None,
            commands: Vec::new(),
            torn: None,
            now: None,
        });
    };
    let spent = Spent::of(&contents.events);
    let spend = super::spend::SpendView::of(
        store,
        id,
        &crate::script::name::shown(&summary.script),
        &contents.events,
        spent.answers,
    );
    let clipped = clip_outputs(id, &mut contents.events);
    let events = &contents.events;
    let frames = frames(events, &clipped);
    let last = events
        .iter()
        .map(Event::at)
        .max()
        .unwrap_or(summary.started_at);
    let until = if summary.state.has_ended() {
        last
    } else {
        last.max(now_ms())
    };
    let question = (summary.state == RunState::WaitingForAnswer)
        .then(|| question(id, events))
        .flatten();
    let now = summary
        .now
        .filter(|_| summary.state == RunState::Active)
        .and_then(|doing| {
            let history = RunHistory::replay(std::path::Path::new(id), events).ok()?;
            let top = history.frames.last()?;
            Some(NowStep {
                kind: doing.kind,
                script: crate::script::name::shown(&top.push.script),
                index: top.steps.len(),
                since: doing.since,
                for_ms: until.saturating_sub(doing.since),
            })
        });
    let commands = commands(id, summary.state, &frames, events);
    let torn = contents.torn.map(|t| {
        format!(
            "a torn last record ({} bytes at byte {}): the writer stopped mid-write; it is ignored",
            t.len, t.offset
        )
    });
    Ok(RunDetail {
        row: row(summary, spent.cost_usd, until),
        submitted_at,
        until,
        frames,
        spent,
        spend,
        question,
        commands,
        torn,
        now,
    })
}

/// The question the run waits on, as the events say it.
fn question(id: &str, events: &[Event]) -> Option<Question> {
    let history = RunHistory::replay(std::path::Path::new(id), events).ok()?;
    let top = history.frames.last()?;
    let ask = top.waiting_question()?;
    Some(Question {
        question: ask.question.clone(),
        choices: ask.choices.clone(),
        script: crate::script::name::shown(&top.push.script),
        index: ask.index,
        asked_at: ask.at,
    })
}

/// The commands that go on with a run in `state`, with the agent that drove it, if one did.
fn commands(id: &str, state: RunState, frames: &[FrameView], events: &[Event]) -> Vec<String> {
    let failed = frames.last().is_some_and(|f| {
        f.fell_back.is_some() || f.outcome == Some("failed") || last_step_failed(f)
    });
    match state {
        RunState::Interrupted | RunState::Cancelled if failed => vec![
            resume_command(id, driven_by(events), true),
            resume_command(id, driven_by(events), false),
        ],
        RunState::Interrupted | RunState::Cancelled | RunState::WaitingForAnswer => {
            vec![resume_command(id, driven_by(events), false)]
        }
        RunState::FellBack => vec![resume_command(id, driven_by(events), true)],
        _ => Vec::new(),
    }
}

fn last_step_failed(frame: &FrameView) -> bool {
    match frame.items.last() {
        Some(Item::Step(step)) => step.mark == "failed",
        Some(Item::Frame(child)) => child.fell_back.is_some() || last_step_failed(child),
        _ => false,
    }
}

/// The frames of `events` as a tree, superseded attempts kept and marked.
fn frames(events: &[Event], clipped: &HashMap<usize, ClippedOutput>) -> Vec<FrameView> {
    let live = live(events).unwrap_or_else(|_| vec![true; events.len()]);
    let mut arena: Vec<Building> = Vec::new();
    let mut roots: Vec<usize> = Vec::new();
    // The frames on the stack after each event, to go back to when a supersede cuts the
    // history at an earlier line.
    let mut open: Vec<usize> = Vec::new();
    let mut after: Vec<Vec<usize>> = Vec::with_capacity(events.len());
    let mut previous_at = 0;
    for (index, event) in events.iter().enumerate() {
        let is_live = live[index];
        match event {
            Event::Run(run) => previous_at = run.at,
            Event::Push(push) => {
                let parent = open.get(push.depth.wrapping_sub(1)).copied();
                open.truncate(push.depth);
                let origin = match (push.origin, push.depth) {
                    (Origin::Call, _) => "called",
                    (Origin::Start, 0) => "started",
                    (Origin::Start, _) => "started by hand",
                };
                arena.push(Building {
                    view: FrameView {
                        script: crate::script::name::shown(&push.script),
                        compiled: push.compiled,
                        origin,
                        request: push.request.clone(),
                        working_dir: push.working_dir.display().to_string(),
                        depth: push.depth,
                        started_at: push.at,
                        ended_at: None,
                        outcome: None,
                        error: None,
                        fell_back: None,
                        agent: None,
                        superseded: !is_live,
                        items: Vec::new(),
                    },
                    parent,
                    items: Vec::new(),
                    asked_at: None,
                });
                let at = arena.len() - 1;
                match parent {
                    Some(parent) => arena[parent].items.push(Slot::Frame(at)),
                    None => roots.push(at),
                }
                open.push(at);
            }
            Event::Step(step) => {
                if let Some(&top) = open.last() {
                    let asked = arena[top]
                        .asked_at
                        .filter(|(i, _)| *i == step.record.index)
                        .map(|(_, at)| at);
                    let mut view = step_view(&step.record, step.at, previous_at, asked, !is_live);
                    view.event = index;
                    view.output_clipped = clipped.get(&index).cloned();
                    arena[top]
                        .items
                        .push(Slot::Item(Item::Step(Box::new(view))));
                }
            }
            Event::Ask(ask) => {
                if let Some(&top) = open.last() {
                    arena[top].asked_at = Some((ask.index, ask.at));
                }
            }
            Event::Wait(wait) => {
                if let Some(&top) = open.last() {
                    arena[top].items.push(Slot::Item(Item::Wait {
                        step: wait.step.clone(),
                        attempt: wait.attempt,
                        wait_ms: wait.wait_ms,
                        said: wait.said.clone(),
                        at: wait.at,
                        superseded: !is_live,
                    }));
                }
            }
            // The pending step's prompt is for `status` and `runs show`; the step shows
            // once answered.
            Event::Ignored(_) | Event::Handed(_) | Event::Agent(_) | Event::Cap(_) => {}
            Event::Killed(killed) => {
                if let Some(&top) = open.last() {
                    arena[top].items.push(Slot::Item(Item::Killed {
                        index: killed.index,
                        group: killed.group,
                        at: killed.at,
                    }));
                }
            }
            Event::Fail(fail) => {
                if let Some(&top) = open.last()
                    && is_live
                {
                    arena[top].view.fell_back = Some(fail.error.clone());
                }
            }
            Event::Supersede(supersede) => {
                if let Some(&top) = open.last() {
                    arena[top].items.push(Slot::Item(Item::Supersede {
                        script: crate::script::name::shown(&supersede.script),
                        index: supersede.index,
                        reason: match supersede.reason {
                            Reason::Retry => "retry",
                            Reason::ScriptChanged => "the script changed",
                            Reason::From => "--from",
                        },
                        at: supersede.at,
                    }));
                }
                // The stack goes back to what it was before the superseded line.
                if let Some(before) = supersede.line.checked_sub(2).and_then(|i| after.get(i)) {
                    open.clone_from(before);
                    for &frame in &open {
                        let view = &mut arena[frame].view;
                        view.ended_at = None;
                        view.outcome = None;
                        view.error = None;
                    }
                }
            }
            Event::Pop(pop) => {
                if let Some(top) = open.pop() {
                    let view = &mut arena[top].view;
                    view.ended_at = Some(pop.at);
                    view.outcome = Some(match pop.outcome {
                        Outcome::Completed => "completed",
                        Outcome::FinishedByAgent => "finished by hand",
                        Outcome::Failed => "failed",
                        Outcome::Stopped => "stopped by the script",
                    });
                    view.error.clone_from(&pop.error);
                    view.agent.clone_from(&pop.agent);
                }
            }
        }
        previous_at = previous_at.max(event.at());
        after.push(open.clone());
    }
    roots.into_iter().map(|r| assemble(&mut arena, r)).collect()
}

/// Frame `at` of the arena with its items, the frames among them assembled in turn.
fn assemble(arena: &mut [Building], at: usize) -> FrameView {
    let slots = std::mem::take(&mut arena[at].items);
    let mut view = arena[at].view.clone();
    debug_assert!(arena[at].parent.is_none_or(|p| p < at));
    view.items = slots
        .into_iter()
        .map(|slot| match slot {
            Slot::Item(item) => item,
            Slot::Frame(child) => Item::Frame(Box::new(assemble(arena, child))),
        })
        .collect();
    view
}

/// Clips the output of every step of run `id`'s `events` to its head and tail, in place
/// (the whole is dropped at once, not copied into the page's values); says which were
/// clipped, by their events' places, and where their whole outputs are.
fn clip_outputs(id: &str, events: &mut [Event]) -> HashMap<usize, ClippedOutput> {
    let mut clipped = HashMap::new();
    for (index, event) in events.iter_mut().enumerate() {
        let Event::Step(step) = event else { continue };
        let output = &mut step.record.result.output;
        let whole = output_path(id, index);
        let shown = crate::agents::reply::head_and_tail(
            output,
            &format!("the whole output ({} bytes) is at {whole}", output.len()),
            crate::agents::reply::SHOWN_LINES,
        );
        if shown.trim_end() != output.trim_end() {
            clipped.insert(
                index,
                ClippedOutput {
                    bytes: output.len(),
                    lines: output.lines().count(),
                    whole,
                },
            );
            *output = shown;
        }
    }
    clipped
}

fn step_view(
    record: &StepRecord,
    at: u64,
    previous_at: u64,
    asked_at: Option<u64>,
    superseded: bool,
) -> StepView {
    let handed_over = asked_at.unwrap_or(previous_at).min(at);
    let (started_at, waited_ms) = match (&record.input, record.result.duration_ms) {
        (StepInput::Llm { .. } | StepInput::Ask { .. }, _) => {
            (handed_over, Some(at.saturating_sub(handed_over)))
        }
        (_, Some(ms)) => (at.saturating_sub(ms), None),
        (_, None) => (handed_over, None),
    };
    StepView {
        index: record.index,
        summary: record.input.summary(),
        context: record.context.clone(),
        input: record.input.clone(),
        result: record.result.clone(),
        allow_failure: record.allow_failure,
        mark: if record.result.success {
            "ok"
        } else if record.allow_failure {
            "allowed"
        } else {
            "failed"
        },
        group: record.parallel.map(|p| p.group),
        member: record.parallel.map(|p| p.member),
        started_at,
        ended_at: at,
        waited_ms,
        superseded,
        event: 0,
        output_clipped: None,
    }
}
