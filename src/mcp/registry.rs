//! `Registry`: the runs one `mekara mcp` process holds, keyed by run id, each with its own
//! [`Session`] (executor, lock, what was shown) — and the routing of every tool call to one
//! of them.
//!
//! A call names its run by handle (`run_id`, or `parent` for a nested `start`); a run no
//! live session holds is taken up from its journal, when the handle opens it. A call
//! without a handle means the run its connection drives (a [`Driving`]): over stdio and
//! legacy sessionful HTTP that is the run the connection started last and that still waits;
//! a stateless `2026-07-28` request drives none, so it names its run. Sessions idle for
//! [`IDLE`] that no connection drives are dropped: the journal is the truth, and the next
//! call that names the run takes it up again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use super::session_plan::SessionPlan;
use crate::agents::history::Progress;
use crate::agents::reply::{self, Reply};
use crate::agents::session::Session;
use crate::agents::tools::{AgentCall, AgentTool};
use crate::engine::journal::TornTail;
use crate::engine::runs::{RunHistory, RunState, RunSummary};
use crate::engine::{CancelToken, EngineError, Rewind, RewindPlan, StepRunner, handle};
use crate::script::{Listing, Resolver};

/// How long a session no connection drives stays in memory after its last call.
const IDLE: Duration = Duration::from_secs(15 * 60);

/// How many runs' sessions a server holds at most before it drops the least recently used
/// of those no connection drives (see [`Registry::sweep`]): `MEKARA_MAX_HELD_RUNS`, else 128.
fn max_held() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("MEKARA_MAX_HELD_RUNS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(128)
    })
}

/// Makes the effect runner of each new session.
pub(crate) type RunnerFactory = Box<dyn Fn() -> Box<dyn StepRunner> + Send + Sync>;

/// Holds a run's session for a call, or refuses the call (the run is busy).
pub(crate) type Enter<'e> =
    dyn for<'a> Fn(&'a Arc<Slot>) -> Result<MutexGuard<'a, Session>, Reply> + 'e;

/// How a call found its run.
enum Found {
    /// A session held it already.
    Live,
    /// It was taken up from its journal, cutting this torn record if there was one, and
    /// rewound as the call asked, if it asked.
    TakenUp(Option<TornTail>, Option<Box<RewindPlan>>),
}

/// One run's session, with what the server needs to answer calls that arrive while it runs.
pub(crate) struct Slot {
    /// The run.
    pub session: Mutex<Session>,
    /// What the call in progress is doing, for calls that arrive meanwhile.
    pub running: Mutex<Option<String>>,
    /// The cancellation token of the call holding the session (see `Server::run`).
    pub holder: Mutex<Option<CancellationToken>>,
    /// Stops the session's running step.
    pub cancel: CancelToken,
    /// The token of the run's handle, as registered (`None`: a run without one).
    token: Mutex<Option<String>>,
    /// The run's id and root script, as of the end of its last call: how the run is named
    /// while a call holds its session.
    named: Mutex<Option<(String, String)>>,
    used: Mutex<Instant>,
}

impl Slot {
    fn new(session: Session) -> Slot {
        Slot {
            cancel: session.cancel_token(),
            session: Mutex::new(session),
            running: Mutex::new(None),
            holder: Mutex::new(None),
            token: Mutex::new(None),
            named: Mutex::new(None),
            used: Mutex::new(Instant::now()),
        }
    }

    /// Whether the session's run waits for the agent; a session busy with a call counts as
    /// waiting.
    fn waits(&self) -> bool {
        self.session.try_lock().map_or(true, |s| s.waits())
    }

    /// The run's id and handle, when it has a run and is not busy.
    fn handle(&self) -> Option<(String, String)> {
        let session = self.session.try_lock().ok()?;
        Some((session.run_id()?.to_string(), session.handle_or_id()?))
    }

    /// The run, its script and what it waits for, when it waits for a call and is not busy.
    fn live_run(&self) -> Option<reply::LiveRun> {
        let session = self.session.try_lock().ok()?;
        let waiting = session.pending()?.waiting();
        if waiting == crate::engine::Waiting::Nothing {
            return None;
        }
        Some(reply::LiveRun {
            id: session.run_id()?.to_string(),
            script: session.frames().first()?.script.name.to_string(),
            waiting: waiting.describe(),
        })
    }
}

/// The runs one connection drives, the one calls without `run_id` go to last.
#[derive(Default)]
pub(crate) struct Driving {
    stack: Vec<Arc<Slot>>,
}

impl Driving {
    fn top(&self) -> Option<&Arc<Slot>> {
        self.stack.last()
    }

    /// Makes `slot` the run this connection drives.
    fn drive(&mut self, slot: &Arc<Slot>) {
        self.stack.retain(|s| !Arc::ptr_eq(s, slot));
        self.stack.push(slot.clone());
    }
}

/// Where a call goes.
pub(crate) enum Route {
    /// Answered without a run.
    Reply(Reply),
    /// To this run's session, with the first lines of its reply.
    Run {
        /// The run's slot.
        slot: Arc<Slot>,
        /// What `resume` says first.
        preface: String,
        /// A retry or rewind the run's session still has to do (the run was live in it).
        rewind: Option<Rewind>,
    },
}

/// The runs of one server process.
pub(crate) struct Registry {
    plan: SessionPlan,
    runner: RunnerFactory,
    runs: Mutex<HashMap<String, Arc<Slot>>>,
    /// Every slot made, for stopping their steps when the server goes away.
    all: Mutex<Vec<Weak<Slot>>>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Registry {
    /// The runs of a server with `plan`, whose sessions run effects with what `runner`
    /// makes.
    pub(crate) fn new(plan: SessionPlan, runner: RunnerFactory) -> Registry {
        Registry {
            plan,
            runner,
            runs: Mutex::new(HashMap::new()),
            all: Mutex::new(Vec::new()),
        }
    }

    /// What the server's sessions are made from.
    pub(crate) fn plan(&self) -> &SessionPlan {
        &self.plan
    }

    /// The resolver scripts are found with.
    pub(crate) fn resolver(&self) -> &Resolver {
        &self.plan.resolver
    }

    /// Stops every step running now: the server is going away.
    pub(crate) fn stop(&self) {
        for slot in lock(&self.all).iter().filter_map(Weak::upgrade) {
            if lock(&slot.running).is_some() {
                slot.cancel.cancel();
            }
        }
    }

    fn new_slot(&self) -> Arc<Slot> {
        let slot = Arc::new(Slot::new(self.plan.session((self.runner)())));
        let mut all = lock(&self.all);
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&slot));
        slot
    }

    /// Runs one call of `tool` with its raw `input` to its end, with `enter` holding the
    /// session of the run it goes to while it runs (the server refuses a call on a busy run
    /// there; the replay just locks).
    pub(crate) fn handle(
        &self,
        tool: AgentTool,
        input: Option<&serde_json::Map<String, serde_json::Value>>,
        driving: &Mutex<Driving>,
        progress: &dyn Fn(Progress<'_>),
        enter: &Enter<'_>,
    ) -> Reply {
        let call = match tool.parse(input) {
            Ok(call) => call,
            Err(error) => return Reply::error(reply::argument_refusal(&error)),
        };
        let (slot, preface, rewind) = match self.route(&call, driving) {
            Route::Reply(reply) => return reply,
            Route::Run {
                slot,
                preface,
                rewind,
            } => (slot, preface, rewind),
        };
        let mut session = match enter(&slot) {
            Ok(session) => session,
            Err(busy) => return busy,
        };
        // A panic is a bug; caught here, it becomes this call's error, the session's lock is
        // released unpoisoned, and the next call is answered.
        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            session.call(&call, progress, preface, rewind.as_ref())
        }));
        let mut reply = handled.unwrap_or_else(|panic| {
            Reply::error(reply::internal_error(crate::display::panic_message(
                panic.as_ref(),
            )))
        });
        self.settle(&slot, &session, driving, &mut reply);
        // Cleared while the session is still held: the next holder sets its own.
        *lock(&slot.running) = None;
        *lock(&slot.holder) = None;
        drop(session);
        reply
    }

    /// Decides where `call` goes.
    fn route(&self, call: &AgentCall, driving: &Mutex<Driving>) -> Route {
        self.sweep();
        match call {
            AgentCall::ListScripts { all } => return Route::Reply(self.list_scripts(*all)),
            AgentCall::Eject { name, force } => return Route::Reply(self.eject(name, *force)),
            AgentCall::Resume { run_id: None, .. } => {
                return Route::Reply(self.interrupted_runs());
            }
            _ => {}
        }
        // `status` only reads: a run no session here holds is read from its journal, never
        // taken (another process may be driving it).
        if let AgentCall::Status {
            run_id: Some(named),
        } = call
            && !self.holds(named, driving)
        {
            return Route::Reply(self.peek(named));
        }
        if let Some(named) = call.handle() {
            let resume = matches!(call, AgentCall::Resume { .. });
            let asked = match call {
                AgentCall::Resume { rewind, .. } => rewind.as_ref(),
                _ => None,
            };
            return match self.named(named, driving, asked) {
                Ok((slot, taken_up)) => {
                    let (id, _) = handle::split(named);
                    let mut rewind = None;
                    let preface = match (resume, taken_up) {
                        (true, Found::TakenUp(torn, plan)) => {
                            let mut text = reply::resumed(id, torn.as_ref());
                            if let Some(plan) = &plan {
                                text.push_str(&reply::rewound(plan));
                            }
                            text
                        }
                        (true, Found::Live) => {
                            rewind = asked.cloned();
                            reply::resumed_same(id)
                        }
                        (false, _) => String::new(),
                    };
                    // A run taken up with `resume`, or nested into with `start`, is the one
                    // this connection drives from now on.
                    if matches!(call, AgentCall::Resume { .. } | AgentCall::Start { .. }) {
                        lock(driving).drive(&slot);
                    }
                    Route::Run {
                        slot,
                        preface,
                        rewind,
                    }
                }
                Err(error) => Route::Reply(Reply::error(if resume {
                    reply::resume_refused(&error)
                } else {
                    reply::handle_refused(call.tool(), &error)
                })),
            };
        }
        let mut driving = lock(driving);
        let top = driving.top().cloned();
        // A call without `run_id` while this connection drives several runs that wait could
        // mean any of them: it is answered with the list, never sent to the newest.
        if !matches!(call, AgentCall::Start { .. }) {
            let waiting: Vec<&Arc<Slot>> = driving.stack.iter().filter(|s| s.waits()).collect();
            if waiting.len() > 1 {
                let runs = Registry::describe(&waiting);
                return Route::Reply(if let AgentCall::Status { .. } = call {
                    Reply::ok(reply::driven_runs(&runs))
                } else {
                    Reply::error(reply::which_run(call.tool(), &runs))
                });
            }
        }
        let slot = match (call, top) {
            // A `start` without `parent` begins a new run: in the connection's session when
            // its run has ended, in a new one when that run still waits.
            (AgentCall::Start { .. }, Some(top)) if !top.waits() => top,
            (AgentCall::Start { .. }, _) => {
                let slot = self.new_slot();
                driving.drive(&slot);
                slot
            }
            (_, Some(top)) => top,
            (_, None) => {
                let open = self.open_runs();
                if open.is_empty() {
                    // Nothing to point at: a session without a run says so.
                    self.new_slot()
                } else if let AgentCall::Status { .. } = call {
                    return Route::Reply(Reply::ok(reply::open_runs(&open)));
                } else {
                    return Route::Reply(Reply::error(reply::no_run_named(call.tool(), &open)));
                }
            }
        };
        Route::Run {
            slot,
            preface: String::new(),
            rewind: None,
        }
    }

    /// Whether a session of this server holds the run `named` (a handle or an id).
    fn holds(&self, named: &str, driving: &Mutex<Driving>) -> bool {
        let (id, _) = handle::split(named);
        lock(&self.runs).contains_key(id)
            || lock(driving)
                .stack
                .iter()
                .any(|s| s.handle().is_some_and(|(run, _)| run == id))
    }

    /// `status` of the run `named` (a handle, or the id of a run journaled before handles)
    /// that no session of this server holds: what its journal says, read without taking
    /// the run.
    fn peek(&self, named: &str) -> Reply {
        let (id, token) = handle::split(named);
        let refused =
            |error: &EngineError| Reply::error(reply::handle_refused(AgentTool::Status, error));
        let contents = match self.plan.store.read(id) {
            Ok(contents) => contents,
            Err(error) => return refused(&error),
        };
        let kept = match contents.events.first() {
            Some(crate::engine::journal::Event::Run(header)) => header.token_sha256.as_deref(),
            _ => None,
        };
        if let Err(problem) = handle::opens(kept, token) {
            return refused(&EngineError::Handle {
                id: id.to_string(),
                problem,
            });
        }
        let history = match RunHistory::replay(std::path::Path::new(id), &contents.events) {
            Ok(history) => history,
            Err(error) => return refused(&error.into()),
        };
        let state = match self.plan.store.summary(id) {
            Ok(summary) => summary.state,
            Err(error) => return refused(&error),
        };
        Reply::ok(reply::read_status(
            id,
            named,
            &history,
            state,
            &self.plan.cwd,
        ))
    }

    /// The slot of the run `named` (a handle, or a bare id of a run this connection drives
    /// or of one journaled before handles), taken up from its journal when no session
    /// holds it — and then rewound as `rewind` asks; with the torn record the take-up cut,
    /// when it took it up.
    fn named(
        &self,
        named: &str,
        driving: &Mutex<Driving>,
        rewind: Option<&Rewind>,
    ) -> Result<(Arc<Slot>, Found), EngineError> {
        let (id, token) = handle::split(named);
        if token.is_none()
            && let Some(slot) = lock(driving)
                .stack
                .iter()
                .find(|s| s.handle().is_some_and(|(run, _)| run == id))
        {
            return Ok((slot.clone(), Found::Live));
        }
        let mut runs = lock(&self.runs);
        if let Some(slot) = runs.get(id) {
            let kept = lock(&slot.token).as_deref().map(handle::digest);
            handle::opens(kept.as_deref(), token).map_err(|problem| EngineError::Handle {
                id: id.to_string(),
                problem,
            })?;
            *lock(&slot.used) = Instant::now();
            return Ok((slot.clone(), Found::Live));
        }
        let slot = self.new_slot();
        let (torn, plan) = lock(&slot.session).take_up(id, token, rewind)?;
        *lock(&slot.token) = lock(&slot.session).token().map(str::to_string);
        runs.insert(id.to_string(), slot.clone());
        Ok((slot, Found::TakenUp(torn, plan.map(Box::new))))
    }

    /// After a call: registers a run that started, forgets one that ended, and when the run
    /// this connection drove ended while one it started before still waits, goes back to
    /// that one and says so.
    fn settle(
        &self,
        slot: &Arc<Slot>,
        session: &Session,
        driving: &Mutex<Driving>,
        reply: &mut Reply,
    ) {
        *lock(&slot.used) = Instant::now();
        *lock(&slot.named) = session.run_id().map(|id| {
            let script = session
                .frames()
                .first()
                .map(|f| f.script.name.to_string())
                .unwrap_or_default();
            (id.to_string(), script)
        });
        let mut runs = lock(&self.runs);
        if let Some(id) = session.run_id() {
            runs.entry(id.to_string()).or_insert_with(|| {
                *lock(&slot.token) = session.token().map(str::to_string);
                slot.clone()
            });
            return;
        }
        runs.retain(|_, s| !Arc::ptr_eq(s, slot));
        drop(runs);
        let mut driving = lock(driving);
        if driving.stack.len() > 1 && driving.top().is_some_and(|top| Arc::ptr_eq(top, slot)) {
            driving.stack.pop();
            // Its pending item comes with the note, so that the agent goes on with it at
            // once instead of asking `status` first.
            if let Some(top) = driving.top()
                && !reply.is_error
                && let Ok(waiting) = top.session.try_lock()
                && let Some(handle) = waiting.handle_or_id()
            {
                reply
                    .text
                    .push_str(&reply::still_waiting(&handle, waiting.pending()));
            }
        }
    }

    /// Drops the sessions idle for [`IDLE`] that no connection drives and no call holds;
    /// past [`max_held`] sessions, the least recently used of those too, however briefly
    /// idle. Each holds its run's journal, step note and evaluator child open: runs started
    /// and left (a stateless `2026-07-28` client can leave thousands) must not take every
    /// descriptor of the process. A dropped run is taken up again from its journal by the
    /// next call that names it.
    fn sweep(&self) {
        let mut runs = lock(&self.runs);
        let free =
            |slot: &Arc<Slot>| Arc::strong_count(slot) == 1 && slot.session.try_lock().is_ok();
        runs.retain(|_, slot| !free(slot) || lock(&slot.used).elapsed() < IDLE);
        let over = runs.len().saturating_sub(max_held());
        if over > 0 {
            let mut idle: Vec<(Instant, String)> = runs
                .iter()
                .filter(|(_, slot)| free(slot))
                .map(|(id, slot)| (*lock(&slot.used), id.clone()))
                .collect();
            idle.sort();
            for (_, id) in idle.into_iter().take(over) {
                runs.remove(&id);
            }
        }
    }

    /// `slots`, newest first, each as its run, script and what it waits for (a slot busy with
    /// a call now, for that call to end).
    fn describe(slots: &[&Arc<Slot>]) -> Vec<reply::LiveRun> {
        slots
            .iter()
            .rev()
            .filter_map(|slot| {
                slot.live_run().or_else(|| {
                    let (id, script) = lock(&slot.named).clone()?;
                    Some(reply::LiveRun {
                        id,
                        script,
                        waiting: "the end of the call running on it now",
                    })
                })
            })
            .collect()
    }

    /// The project's runs that have not ended.
    fn open_runs(&self) -> Vec<RunSummary> {
        self.plan
            .store
            .list_open()
            .unwrap_or_else(|e| {
                tracing::warn!("cannot list the runs: {e}");
                Vec::new()
            })
            .into_iter()
            .filter(|r| {
                matches!(
                    r.state,
                    RunState::Interrupted | RunState::WaitingForAnswer | RunState::Active
                )
            })
            .collect()
    }

    fn list_scripts(&self, all: bool) -> Reply {
        let listing = Listing::all_if(all);
        Reply::ok(reply::scripts(&self.resolver().list(listing), listing))
    }

    /// `eject_script(name, force)`: copy a bundled script into the server's project.
    fn eject(&self, name: &str, force: bool) -> Reply {
        let root = crate::paths::Locations::discover(&self.plan.cwd)
            .project_root
            .unwrap_or_else(|| self.plan.cwd.clone());
        match crate::script::eject::eject(name, &root.join(".mekara"), force) {
            Ok(ejected) => Reply::ok(reply::ejected(&ejected, &root)),
            Err(e) => Reply::error(reply::eject_refused(&e)),
        }
    }

    /// `resume()` without an id: the runs a restart interrupted, and the runs this server
    /// holds that wait for a call (which need no resume: their handle goes on with them).
    fn interrupted_runs(&self) -> Reply {
        let runs: Vec<_> = match self.plan.store.list_open() {
            Ok(runs) => runs
                .into_iter()
                .filter(|r| matches!(r.state, RunState::Interrupted | RunState::WaitingForAnswer))
                .collect(),
            Err(e) => return Reply::error(reply::resume_refused(&e)),
        };
        // A run busy with a call now is not waiting for one.
        let mut live: Vec<reply::LiveRun> = lock(&self.runs)
            .values()
            .filter_map(|s| s.live_run())
            .collect();
        live.sort_by(|a, b| a.id.cmp(&b.id));
        let runs: Vec<_> = runs
            .into_iter()
            .filter(|r| !live.iter().any(|l| l.id == r.id))
            .collect();
        Reply::ok(reply::interrupted_runs(&runs, &live))
    }
}

/// Kept here rather than with the plan, which the registry holds: a plan does not know the
/// registry.
impl SessionPlan {
    /// The runs of a server with this plan, each running effects with its own real runner.
    pub(crate) fn registry(self) -> Registry {
        let runner = self.clone();
        Registry::new(self, Box::new(move || runner.runner()))
    }
}
