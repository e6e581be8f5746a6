//! `Executor`: the stack of frames of one run, and the calls that move it on (DESIGN §4).
//!
//! The pending item is never stored: [`Executor::advance`] derives it by evaluating the top
//! frame over its journal, running auto steps past the end of it, pushing and popping
//! frames, until something needs the agent or the stack is empty.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value as Json};

use super::compiled::child::Warm;
use super::compiled::{CodeError, Evaluation, FrameRun, Loaded, Suspension, Task};
use super::error::{EngineError, Waiting};
use super::group_note::{GroupNote, Leftover};
use super::journal::{
    AskEvent, Event, FailEvent, HandedEvent, KilledEvent, Origin, Outcome, PopEvent, PushEvent,
    StepEvent, TornTail, now_ms,
};
use super::observer::{FrameEvent, Observer};
use super::rewind::{Rewind, RewindPlan};
use super::runner::{CancelToken, Ran, StepRunner, ToolCall};
use super::runs::{FailedCallee, RunHistory, failed_calls, last_own_step};
use super::settings::{Settings, load_program};
use super::step::{
    AgentReport, AnsweredBy, MAX_KEPT, ParallelMember, StepInput, StepRecord, StepResult,
};
use super::store::RunLog;
use super::store::RunStore;
use super::tool::NL_TAG_CONTEXT;
use crate::engine::observer::Recorded;
use crate::script::nl::{ARGUMENTS, NlText};
use crate::script::{Resolver, Script};

/// A script on the stack.
pub(crate) struct Frame {
    /// The script, resolved when the frame was pushed (or resumed).
    pub script: Script,
    /// Its arguments.
    pub request: String,
    /// The folder it runs in.
    pub working_dir: PathBuf,
    /// Who pushed it.
    pub origin: Origin,
    /// For a call, the name the caller wrote.
    pub called_as: Option<String>,
    /// For a call, whether the caller said `allow_failure = True`: a failure of this frame
    /// is then journaled in the caller as an allowed one.
    pub allow_failure: bool,
    /// Its journaled steps.
    pub steps: Vec<StepRecord>,
    /// The failure it fell back on.
    pub failure: Option<String>,
    /// The last question its `ask` steps put to the person (when, and what it takes).
    pub asked: Option<AskEvent>,
    /// When the last script it called failed: that script, and the ones under it that
    /// failed with it.
    failed_calls: Vec<FailedCallee>,
    /// The last llm step it handed to the agent, as journaled.
    handed: Option<HandedEvent>,
    program: Option<Result<Arc<Loaded>, CodeError>>,
    /// An evaluator child holding the frame's suspended evaluation, if one does: a cache
    /// (see `compiled::child::Warm`).
    warm: Option<Warm>,
    /// How many of the script's prints outside function steps were reported: evaluation
    /// starts from the top each time, and says each print once.
    printed: usize,
}

impl Frame {
    /// Whether this frame runs as a compiled script.
    pub(crate) fn is_compiled(&self) -> bool {
        self.script.compiled.is_some()
    }

    /// The frame's program, loaded once per process with the helper modules of the
    /// script's level as they are now, like the script itself: on resume, a helper that
    /// changed under the run shows as a step whose inputs differ from the journal's.
    fn program(
        &mut self,
        resolver: &Resolver,
        settings: &Settings,
    ) -> Option<Result<Arc<Loaded>, CodeError>> {
        self.script.compiled.as_ref()?;
        let script = &self.script;
        Some(
            self.program
                .get_or_insert_with(|| {
                    load_program(resolver, script, settings)
                        .expect("the script is compiled")
                        .map(Arc::new)
                })
                .clone(),
        )
    }
}

/// What the run needs next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pending {
    /// An llm step: the agent does it and gives its outputs.
    Llm {
        /// Stack path, e.g. `test:nested[0] > test:random[1]`.
        path: String,
        /// The instruction.
        prompt: String,
        /// Output names and descriptions.
        expects: Option<Map<String, Json>>,
    },
    /// An NL script: the agent follows all of it, then finishes it.
    Nl {
        /// Stack path.
        path: String,
        /// The instructions, arguments substituted.
        instructions: String,
    },
    /// A compiled script failed: the agent finishes it by hand.
    Fallback {
        /// Stack path.
        path: String,
        /// What failed.
        error: String,
        /// The NL instructions, arguments substituted.
        instructions: String,
        /// When the failure was a script it called, that script's own NL instructions:
        /// the part of the work it did not finish is the agent's too.
        failed_call: Option<FailedCall>,
    },
    /// The llm steps that the members of a `parallel` group stopped at: independent tasks,
    /// each answered on its own (unattended runs only).
    Tasks {
        /// Stack path, the top frame at the group's first step.
        path: String,
        /// The frame's step position where the group's steps begin.
        group: usize,
        /// The group's bound on what runs at once (`parallel(…, max = N)`).
        max: usize,
        /// The tasks not answered yet, in the members' order.
        tasks: Vec<Task>,
    },
    /// A question for the person (`ask`): the agent passes it on and never answers it itself.
    Ask {
        /// Stack path.
        path: String,
        /// The question.
        question: String,
        /// The answers it takes, when it takes only some.
        choices: Option<Vec<String>>,
        /// How long after it was asked an answer may come.
        timeout: Option<Duration>,
        /// When it was asked (Unix ms).
        asked_at: u64,
    },
    /// The stack is empty: the run ended.
    Finished {
        /// The run's id.
        run: String,
        /// How the root script ended.
        outcome: Outcome,
        /// Whether the root script fell back to its NL instructions.
        fell_back: bool,
        /// When a script stopped itself (`fail()`), and with it the run: what it said.
        stop: Option<Stop>,
    },
}

/// A script that stopped itself with `fail(message)`, and with it the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stop {
    /// The frame that called `fail()`, as its stack label (`release`, `main[2] > check`).
    pub script: String,
    /// What it gave `fail()`.
    pub message: String,
    /// Whether it stopped right after a failed step whose failure it allowed (it read that
    /// failure and stopped on it): once the cause is fixed, `--retry` runs that step again.
    /// Otherwise it stopped on a decision (a person's "no"), and a retry would stop again.
    pub retry: bool,
}

/// A script called with `call_script` whose failure made its caller fall back, directly or
/// through the scripts between.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FailedCall {
    /// The name, as resolved, of the script whose own step failed: the script called, or,
    /// when that failed because a script it called failed, the last of that chain.
    pub name: String,
    /// Its NL instructions, arguments substituted.
    pub instructions: String,
    /// The chain of calls, by name: the script that falls back, the script it called, and
    /// so on down to the one whose step failed (`name`, the last).
    pub chain: Vec<String>,
    /// The scripts between the one that falls back and the one whose step failed, the
    /// innermost first (the order what is left of them is done in): each name, and its NL
    /// instructions with its arguments substituted. Empty when the script that falls back
    /// called the failing one itself.
    pub between: Vec<(String, String)>,
}

impl FailedCall {
    /// Each script between, with the script it called: `(name, callee, instructions)`.
    pub(crate) fn callers_between(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        let callees =
            std::iter::once(self.name.as_str()).chain(self.between.iter().map(|(n, _)| n.as_str()));
        self.between
            .iter()
            .zip(callees)
            .map(|((name, instructions), callee)| (name.as_str(), callee, instructions.as_str()))
    }

    /// Whose work is left, in the order to finish it: the failing script, the scripts
    /// between, then `root` (the script that falls back).
    pub(crate) fn inside_out<'a>(&'a self, root: &'a str) -> Vec<&'a str> {
        std::iter::once(self.name.as_str())
            .chain(self.between.iter().map(|(name, _)| name.as_str()))
            .chain([root])
            .collect()
    }
}

impl Pending {
    /// What this pending item waits for.
    pub(crate) fn waiting(&self) -> Waiting {
        match self {
            Pending::Llm { .. } | Pending::Tasks { .. } => Waiting::LlmStep,
            Pending::Nl { .. } => Waiting::NlScript,
            Pending::Fallback { .. } => Waiting::Fallback,
            Pending::Ask { .. } => Waiting::Answer,
            Pending::Finished { .. } => Waiting::Nothing,
        }
    }
}

/// What came of an answer given with [`Executor::record_answer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It was journaled: this choice, or these words.
    Given(String),
    /// It came this long after the question's timeout: the step failed instead.
    TooLate(Duration),
}

/// The answer `given` stands for among `choices`: a choice as written, or its number (from
/// 1) as the terminal lists them; any answer when there are no choices.
fn choose(given: &str, choices: Option<&[String]>) -> Result<String, EngineError> {
    let Some(choices) = choices else {
        return Ok(given.to_string());
    };
    if let Some(choice) = choices.iter().find(|c| *c == given) {
        return Ok(choice.clone());
    }
    // `Minor` for `minor`, ` yes ` for `yes`: the choice as written is journaled, so a run
    // replays the same. Only when one choice alone matches so.
    let loose = |c: &&String| c.trim().to_lowercase() == given.trim().to_lowercase();
    if let [choice] = choices.iter().filter(loose).collect::<Vec<_>>()[..] {
        return Ok(choice.clone());
    }
    if let Some(choice) = given
        .trim()
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|n| choices.get(n))
    {
        return Ok(choice.clone());
    }
    Err(EngineError::NotAChoice {
        given: given.to_string(),
        choices: choices.to_vec(),
    })
}

/// The answer to a question in the outputs an agent gave (`{"answer": …}`): its text, as
/// the text of a number or other value when the agent did not give a string.
fn answer_of(mut outputs: Map<String, Json>) -> Result<String, EngineError> {
    let answer = outputs.remove("answer");
    if answer.is_none() || !outputs.is_empty() {
        return Err(EngineError::Outputs {
            missing: if answer.is_none() {
                vec!["answer".to_string()]
            } else {
                Vec::new()
            },
            unexpected: outputs.keys().cloned().collect(),
            expected: vec!["answer".to_string()],
        });
    }
    Ok(match answer {
        Some(Json::String(text)) => text,
        Some(other) => other.to_string(),
        None => String::new(),
    })
}

/// Who takes a run up from its journal.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Claim<'a> {
    /// The person who owns the run's files (`mekara run --resume`): no handle needed.
    Owner,
    /// A caller with this token of the run's handle (`None`: the id alone), which must
    /// match the digest in the run's header, if it has one.
    Handle(Option<&'a str>),
}

/// The frames of a run and the means to move them on.
pub(crate) struct Executor {
    resolver: Resolver,
    store: RunStore,
    runner: Box<dyn StepRunner>,
    settings: Settings,
    cancel: CancelToken,
    journal: Option<Box<dyn RunLog>>,
    /// The token of the run's handle, when the run has one and it is known here (a run
    /// started here, or taken up with its handle).
    token: Option<String>,
    stack: Vec<Frame>,
    /// The last run that ended, for `Pending::Finished` when asked again.
    ended: Option<(String, Outcome, bool, Option<Stop>)>,
    /// The stop being journaled, frame by frame (see [`Executor::stop`]).
    stopping: Option<Stop>,
    root_fell_back: bool,
}

impl Executor {
    /// An executor with an empty stack; the first `start` creates a run in `store`.
    pub(crate) fn new(
        resolver: Resolver,
        store: RunStore,
        runner: Box<dyn StepRunner>,
        settings: Settings,
    ) -> Executor {
        Executor {
            resolver,
            store,
            runner,
            settings,
            cancel: CancelToken::default(),
            journal: None,
            token: None,
            stack: Vec::new(),
            ended: None,
            stopping: None,
            root_fell_back: false,
        }
    }

    /// Rebuilds run `id` from its journal to continue it, as the person who owns the run's
    /// files (no handle needed), superseding part of its history first when `how` asks for
    /// a retry or rewind (the run may have ended: a rewind opens it again). A torn last
    /// record (the writer died mid-write) is cut off and returned, so the caller can say so,
    /// with the rewind's plan when there was one.
    pub(crate) fn resume(
        resolver: Resolver,
        store: RunStore,
        runner: Box<dyn StepRunner>,
        settings: Settings,
        id: &str,
        how: Option<&Rewind>,
    ) -> Result<(Executor, Option<TornTail>, Option<RewindPlan>), EngineError> {
        let mut executor = Executor::new(resolver, store, runner, settings);
        let (torn, plan) = executor.switch_to(id, Claim::Owner, how)?;
        Ok((executor, torn, plan))
    }

    /// Supersedes part of the history of the run in progress as `how` asks, and rebuilds
    /// its stack from what stays live.
    pub(crate) fn rewind(&mut self, how: &Rewind) -> Result<RewindPlan, EngineError> {
        let Some(journal) = self.journal.as_mut() else {
            return Err(EngineError::WrongCall {
                expected: Waiting::Fallback,
                waiting: Waiting::Nothing,
            });
        };
        let id = journal.id().to_string();
        let mut events = journal.read()?.events;
        let plan = Self::supersede(
            &self.resolver,
            &self.settings,
            journal.as_mut(),
            &id,
            &mut events,
            how,
        )?;
        let history = RunHistory::replay(journal.path(), &events)?;
        let stack = self.stack_of(&history)?;
        self.stack = stack;
        self.ended = None;
        self.root_fell_back = history.root_fell_back;
        self.cancel.reset();
        Ok(plan)
    }

    /// Plans what `how` does to the run whose journal holds `events`, appends the event that
    /// says so to the journal, and to `events`.
    fn supersede(
        resolver: &Resolver,
        settings: &Settings,
        journal: &mut dyn RunLog,
        id: &str,
        events: &mut Vec<Event>,
        how: &Rewind,
    ) -> Result<RewindPlan, EngineError> {
        let history = RunHistory::replay(journal.path(), events)?;
        if !history.started {
            return Err(EngineError::RunNotStarted { id: id.to_string() });
        }
        let plan = super::rewind::plan(resolver, settings, id, events, how)?;
        let event = Event::Supersede(plan.event.clone());
        journal.append(&event)?;
        events.push(event);
        Ok(plan)
    }

    /// Sets the run in progress aside (it stays on disk, resumable) and takes up run `id`
    /// from its journal instead, when `claim` opens it, superseding part of its history
    /// first when `how` asks for a retry or rewind (the run may have ended: a rewind opens
    /// it again). On error, nothing changes: a wrong handle is refused before anything of
    /// the run is touched.
    pub(crate) fn switch_to(
        &mut self,
        id: &str,
        claim: Claim<'_>,
        how: Option<&Rewind>,
    ) -> Result<(Option<TornTail>, Option<RewindPlan>), EngineError> {
        // The handle is checked before the run's lock is taken: a wrong one is refused as
        // such even while another process drives the run.
        let token = match claim {
            Claim::Owner => None,
            Claim::Handle(token) => {
                let contents = self.store.read(id)?;
                let kept = match contents.events.first() {
                    Some(Event::Run(header)) => header.token_sha256.as_deref(),
                    _ => None,
                };
                super::handle::opens(kept, token).map_err(|problem| EngineError::Handle {
                    id: id.to_string(),
                    problem,
                })?;
                token.filter(|_| kept.is_some()).map(str::to_string)
            }
        };
        let (mut journal, contents) = self.store.open(id)?;
        // Holding the run now means whoever drove it is gone; a step it left running is
        // killed before anything runs again.
        let leftovers = journal.group_note().kill_leftover();
        let killed = |found: Leftover| match found {
            Leftover::Killed(group) => {
                tracing::info!(
                    "run {id}: killed process group {group}, left running by a step when mekara stopped"
                );
                Some((group, false))
            }
            Leftover::Lingers(group) => Some((group, true)),
            Leftover::Reused(pid) => {
                tracing::info!(
                    "run {id}: the noted step group {pid} is gone (its pid now belongs to another process)"
                );
                None
            }
            // Said where it was found (a warning in the log); the run goes on.
            Leftover::NotOurs(_) | Leftover::None => None,
        };
        // The killed attempts recorded nothing: the sequential step was the one after the
        // journal's last in the top frame, and the members of a `parallel` group running
        // there were noted with their numbers.
        let mut attempts: Vec<(Option<usize>, i32, bool)> = Vec::new();
        if let Some((group, lingered)) = killed(leftovers.step) {
            attempts.push((None, group, lingered));
        }
        for (number, found) in leftovers.members {
            if let Some((group, lingered)) = killed(found) {
                attempts.push((Some(number), group, lingered));
            }
        }
        // In the steps' order (the sequential step, with no number, has no member beside it).
        attempts.sort_by_key(|(number, ..)| *number);
        let mut events = contents.events;
        if !attempts.is_empty() {
            // Journaled so that the run's history shows them.
            let history = RunHistory::replay(journal.path(), &events)?;
            if let Some(top) = history.frames.last() {
                for (number, group, lingered) in attempts {
                    let event = Event::Killed(KilledEvent {
                        depth: history.frames.len() - 1,
                        index: number.unwrap_or(top.steps.len()),
                        group,
                        lingered,
                        ignorable: true,
                        at: now_ms(),
                    });
                    journal.append(&event)?;
                    events.push(event);
                }
            }
        }
        let plan = match how {
            Some(how) => Some(Self::supersede(
                &self.resolver,
                &self.settings,
                journal.as_mut(),
                id,
                &mut events,
                how,
            )?),
            None => None,
        };
        let history = RunHistory::replay(journal.path(), &events)?;
        if !history.started || history.frames.is_empty() {
            // Opening the run made its group note; a run that is not going on keeps none
            // (a call naming a finished run must leave its files as they were).
            if let Err(e) = journal.close() {
                tracing::debug!("run {id}: {e}");
            }
            return Err(if history.started {
                EngineError::RunFinished {
                    id: id.to_string(),
                    stopped: (history.outcome == Some(super::journal::Outcome::Stopped))
                        .then(|| {
                            super::rewind::after_stop(&self.resolver, &self.settings, id, &events)
                        })
                        .flatten(),
                }
            } else {
                EngineError::RunNotStarted { id: id.to_string() }
            });
        }
        let stack = self.stack_of(&history)?;
        self.sync()?;
        self.journal = Some(journal);
        self.token = token;
        self.stack = stack;
        self.ended = None;
        self.root_fell_back = history.root_fell_back;
        self.cancel.reset();
        Ok((contents.torn, plan))
    }

    /// The frames a replayed history holds, with their scripts resolved as they are now.
    fn stack_of(&self, history: &RunHistory) -> Result<Vec<Frame>, EngineError> {
        let mut stack = Vec::new();
        for state in history.frames.iter().cloned() {
            let script = self.resolver.resolve(&state.push.script)?;
            if script.compiled.is_some() != state.push.compiled {
                return Err(EngineError::Diverged {
                    script: state.push.script.clone(),
                    index: 0,
                    detail: if state.push.compiled {
                        "the run started it as a compiled script, but its compiled file is gone"
                            .into()
                    } else {
                        "the run started it as an NL script, but it now has a compiled file".into()
                    },
                });
            }
            stack.push(Frame {
                script,
                request: state.push.request,
                working_dir: state.push.working_dir,
                origin: state.push.origin,
                called_as: state.push.called_as,
                allow_failure: state.push.allow_failure,
                steps: state.steps,
                failure: state.failure,
                asked: state.asked,
                failed_calls: state.failed_calls,
                handed: state.handed,
                program: None,
                warm: None,
                printed: 0,
            });
        }
        Ok(stack)
    }

    /// Journals which agent drives the run (an unattended run, once per invocation), when a
    /// run is open: a note, not a step result; replay skips it.
    pub(crate) fn note_agent(
        &mut self,
        note: super::journal::AgentEvent,
    ) -> Result<(), EngineError> {
        if self.journal.is_none() || self.stack.is_empty() {
            return Ok(());
        }
        self.append(&Event::Agent(note))
    }

    /// Journals a note about the run's spend caps (a pause at one, a person's answer), on
    /// disk at once: a person looking at the run sees why it waits.
    pub(crate) fn note_cap(&mut self, note: super::journal::CapEvent) -> Result<(), EngineError> {
        if self.journal.is_none() || self.stack.is_empty() {
            return Ok(());
        }
        self.append(&Event::Cap(note))?;
        self.sync()
    }

    /// Journals that the agent asked about `step`, the pending item of the top frame, was
    /// turned away by the model and that the run now waits `wait` before asking again
    /// (`attempt`). A note, not a step result: replay skips it.
    pub(crate) fn note_wait(
        &mut self,
        step: String,
        attempt: u32,
        wait: Duration,
        said: String,
    ) -> Result<(), EngineError> {
        let event = Event::Wait(super::journal::WaitEvent {
            depth: self.stack.len().saturating_sub(1),
            step,
            reason: super::journal::WaitReason::RateLimit,
            attempt,
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
            said,
            ignorable: true,
            at: now_ms(),
        });
        self.append(&event)?;
        // On disk before the wait, which may be long: a person looking at the run sees why
        // it does not move.
        self.sync()
    }

    /// Where the run in progress notes the process group of what it runs now, so that a
    /// resume after mekara was killed can kill it: its shell steps, and (unattended) the agent.
    pub(crate) fn group_note(&self) -> Option<GroupNote> {
        self.journal.as_ref().map(|j| j.group_note().clone())
    }

    /// The id of the run in progress.
    pub(crate) fn run_id(&self) -> Option<&str> {
        self.journal.as_deref().map(RunLog::id)
    }

    /// The handle of the run in progress (`<id>.<token>`), when it has a token.
    pub(crate) fn handle(&self) -> Option<String> {
        Some(super::handle::join(self.run_id()?, self.token.as_deref()?))
    }

    /// The token of the run in progress, when known.
    pub(crate) fn token(&self) -> Option<&str> {
        self.token.as_deref().filter(|_| self.journal.is_some())
    }

    /// The frames, root first.
    pub(crate) fn frames(&self) -> &[Frame] {
        &self.stack
    }

    /// A token that stops the running step from another thread.
    pub(crate) fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Pushes script `name` and runs it until it needs the agent. Started while another
    /// script is pending, it runs nested, and that script's pending step comes back when it
    /// ends. Nothing changes when it fails. A project's own script that has a bundled
    /// script's name is refused unless `project_script` (the person said to run it).
    pub(crate) fn start(
        &mut self,
        name: &str,
        request: &str,
        working_dir: &Path,
        project_script: bool,
        observer: &dyn Observer,
    ) -> Result<Pending, EngineError> {
        let script = self.resolver.resolve_to_run(name, project_script)?;
        // Arguments are journaled (and given to the script) as every value is: with the
        // secrets this process knows as `${VAR}`.
        let request = &crate::secrets::redact(request);
        if request.len() > MAX_KEPT {
            return Err(EngineError::ArgumentsTooLong {
                bytes: request.len(),
                limit: MAX_KEPT,
            });
        }
        if self.stack.len() >= self.settings.max_depth {
            return Err(EngineError::TooDeep {
                path: self.path(),
                limit: self.settings.max_depth,
            });
        }
        if !working_dir.is_dir() {
            return Err(EngineError::BadWorkingDir {
                path: working_dir.to_path_buf(),
            });
        }
        if self.journal.is_none() {
            let token = self.runner.new_run_token();
            self.journal = Some(self.store.create(
                &|attempt| self.runner.new_run_id(attempt),
                token.as_deref().map(super::handle::digest),
            )?);
            self.token = token;
            self.root_fell_back = false;
        }
        self.push(script, request, working_dir, None, observer)?;
        self.advance(observer)
    }

    /// Gives the outputs of the pending llm step and runs on. Missing or unexpected names
    /// are refused, and the step stays pending.
    ///
    /// When a question (`ask`) is pending instead, `outputs` holds the person's answer as
    /// `answer`, passed on by the agent.
    pub(crate) fn continue_llm(
        &mut self,
        outputs: Map<String, Json>,
        observer: &dyn Observer,
    ) -> Result<Pending, EngineError> {
        let pending = match self.waiting_question() {
            Some(_) => None,
            None => Some(self.advance(observer)?),
        };
        match pending {
            None | Some(Pending::Ask { .. }) => {
                let answer = answer_of(outputs)?;
                self.answer_ask(&answer, AnsweredBy::Agent, observer)
            }
            Some(Pending::Tasks { group, tasks, .. }) => {
                self.answer_tasks(group, tasks, &outputs, observer)
            }
            Some(_) => self.answer_llm(outputs, None, observer),
        }
    }

    /// Gives the outputs of every task of the pending `parallel` group at once, keyed by
    /// task (the member's number), and runs on. All are checked before any is journaled.
    fn answer_tasks(
        &mut self,
        group: usize,
        tasks: Vec<Task>,
        outputs: &Map<String, Json>,
        observer: &dyn Observer,
    ) -> Result<Pending, EngineError> {
        let expected: Vec<String> = tasks.iter().map(|t| t.member.to_string()).collect();
        check_names(expected, outputs)?;
        let mut given = Vec::with_capacity(tasks.len());
        for task in tasks {
            let key = task.member.to_string();
            let own = match outputs.get(&key) {
                Some(Json::Object(own)) => own.clone(),
                _ => {
                    return Err(EngineError::Unfit {
                        detail: format!(
                            "the outputs of task `{key}` must be an object of its outputs (`{{}}` when it expects none)"
                        ),
                    });
                }
            };
            check_outputs(task.expects.as_ref(), &own).map_err(|e| match e {
                EngineError::Outputs {
                    missing,
                    unexpected,
                    expected,
                } => {
                    let named = |names: Vec<String>| {
                        names.into_iter().map(|n| format!("{key}.{n}")).collect()
                    };
                    EngineError::Outputs {
                        missing: named(missing),
                        unexpected: named(unexpected),
                        expected: named(expected),
                    }
                }
                other => other,
            })?;
            given.push((task, own));
        }
        // In the members' order: each is the first of the tasks left.
        for (task, own) in given {
            let result = StepResult {
                success: true,
                outputs: Some(own),
                ..StepResult::default()
            };
            self.record_task(group, task, 0, result, observer)?;
        }
        self.advance(observer)
    }

    /// [`Executor::continue_llm`], with what the agent process that answered reported
    /// journaled beside the outputs (`mekara run --agent …`).
    pub(crate) fn answer_llm(
        &mut self,
        outputs: Map<String, Json>,
        agent: Option<AgentReport>,
        observer: &dyn Observer,
    ) -> Result<Pending, EngineError> {
        let (prompt, expects) = self.pending_llm(observer)?;
        check_outputs(expects.as_ref(), &outputs)?;
        self.record_in_top(
            StepInput::Llm { prompt, expects },
            StepResult {
                success: true,
                outputs: Some(outputs),
                duration_ms: agent.as_ref().and_then(|a| a.wall_ms),
                agent,
                ..StepResult::default()
            },
        )?;
        self.advance(observer)
    }

    /// Gives the outputs of the task of `member` in the pending `parallel` group (with what
    /// the agent process that answered reported, if one did), journaled tagged with the
    /// member. The run does not go on: the group's other tasks may still be out;
    /// [`Executor::advance`] goes on.
    pub(crate) fn answer_task(
        &mut self,
        member: usize,
        outputs: Map<String, Json>,
        agent: Option<AgentReport>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let (group, task, rank) = self.pending_task(member, observer)?;
        check_outputs(task.expects.as_ref(), &outputs)?;
        let result = StepResult {
            success: true,
            outputs: Some(outputs),
            duration_ms: agent.as_ref().and_then(|a| a.wall_ms),
            agent,
            ..StepResult::default()
        };
        self.record_task(group, task, rank, result, observer)
    }

    /// Fails the task of `member` in the pending `parallel` group: the agent process could
    /// not do it. The member fails when the group is called again, and with it the group.
    pub(crate) fn fail_task(
        &mut self,
        member: usize,
        error: String,
        agent: AgentReport,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let (group, task, rank) = self.pending_task(member, observer)?;
        let result = StepResult {
            success: false,
            error: Some(error),
            duration_ms: agent.wall_ms,
            agent: Some(agent),
            ..StepResult::default()
        };
        self.record_task(group, task, rank, result, observer)
    }

    /// The pending task of `member`, with its group's position and its rank among the
    /// tasks still pending (in the members' order).
    fn pending_task(
        &mut self,
        member: usize,
        observer: &dyn Observer,
    ) -> Result<(usize, Task, usize), EngineError> {
        let pending = self.advance(observer)?;
        if let Pending::Tasks { group, tasks, .. } = &pending
            && let Some(rank) = tasks.iter().position(|t| t.member == member)
        {
            return Ok((*group, tasks[rank].clone(), rank));
        }
        Err(EngineError::WrongCall {
            expected: Waiting::LlmStep,
            waiting: pending.waiting(),
        })
    }

    /// Journals the answer of a task of the group at `group`, tagged with its member; `rank`
    /// is its place among the tasks still pending. Answers are journaled as they come, and
    /// numbered in the members' order: the task of rank `r` takes the `r`-th number the
    /// group's steps leave free, so the numbers are the same whichever answer comes first.
    fn record_task(
        &mut self,
        group: usize,
        task: Task,
        rank: usize,
        result: StepResult,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let tag = ParallelMember {
            group,
            member: task.member,
        };
        let input = StepInput::Llm {
            prompt: task.prompt,
            expects: task.expects,
        };
        let number = self.stack.last().map(|top| {
            super::step::free_numbers(&top.steps, group)
                .nth(rank)
                .unwrap_or(group)
        });
        let record = self.record_step_tagged(input, None, result, false, Some(tag), number)?;
        observer.step_finished(&self.label(), &record);
        Ok(())
    }

    /// The prompt and `expects` of the pending llm step; an error when something else is
    /// pending.
    fn pending_llm(
        &mut self,
        observer: &dyn Observer,
    ) -> Result<(String, Option<Map<String, Json>>), EngineError> {
        match self.advance(observer)? {
            Pending::Llm {
                prompt, expects, ..
            } => Ok((prompt, expects)),
            pending => Err(EngineError::WrongCall {
                expected: Waiting::LlmStep,
                waiting: pending.waiting(),
            }),
        }
    }

    /// Fails the pending llm step: the agent process that was to do it could not (`mekara
    /// run --agent …`). The frame stops as on any failed step, and falls back.
    pub(crate) fn fail_llm(
        &mut self,
        error: String,
        agent: AgentReport,
        observer: &dyn Observer,
    ) -> Result<Pending, EngineError> {
        let (prompt, expects) = self.pending_llm(observer)?;
        let record = self.record_step(
            StepInput::Llm { prompt, expects },
            None,
            StepResult {
                success: false,
                error: Some(error),
                duration_ms: agent.wall_ms,
                agent: Some(agent),
                ..StepResult::default()
            },
            false,
        )?;
        observer.step_finished(&self.label(), &record);
        self.advance(observer)
    }

    /// Gives the answer of the pending `ask` step, from `by`, and runs on. An answer that is
    /// not among the choices is refused, and the question stays pending. A question whose
    /// timeout passed since it was shown fails instead (the late answer is not kept), and
    /// the run goes on from the failed step.
    pub(crate) fn answer_ask(
        &mut self,
        answer: &str,
        by: AnsweredBy,
        observer: &dyn Observer,
    ) -> Result<Pending, EngineError> {
        if let Some(asked) = self.waiting_question()
            && self.timed_out(&asked).is_some()
        {
            self.record_timeout(&asked, observer)?;
            return self.advance(observer);
        }
        match self.advance(observer)? {
            Pending::Ask { .. } => {}
            pending => {
                return Err(EngineError::WrongCall {
                    expected: Waiting::Answer,
                    waiting: pending.waiting(),
                });
            }
        }
        self.record_answer(answer, by, observer)?;
        self.advance(observer)
    }

    /// Answers the question run `id` waits on and lets the run go again, running nothing:
    /// takes the run as a resume does (refused while another process drives it), journals
    /// `answer` as given `by`. Returns the run's path (`deploy[1]`) and what came of the
    /// answer. How `mekara answer` and `mekara ui` answer a run.
    pub(crate) fn answer_run(
        resolver: Resolver,
        store: RunStore,
        id: &str,
        answer: &str,
        by: AnsweredBy,
    ) -> Result<(String, Answer), EngineError> {
        let runner = Box::new(super::shell::ShellRunner::new());
        let settings = Settings::default().evaluating_in_children();
        let mut executor = match Executor::resume(resolver, store, runner, settings, id, None) {
            Ok((executor, _, _)) => executor,
            Err(EngineError::RunFinished { .. }) => {
                return Err(EngineError::NotWaitingForAnswer { id: id.to_string() });
            }
            Err(e) => return Err(e),
        };
        let path = executor.path();
        let answered = executor.record_answer(answer, by, &super::observer::Quiet)?;
        Ok((path, answered))
    }

    /// Journals `answer` to the question the run waits on, as its journal says it (nothing
    /// is evaluated, nothing runs): how `mekara answer` answers a run that stopped at an
    /// `ask`. An answer that comes after the question's timeout fails the step instead, and
    /// says so.
    pub(crate) fn record_answer(
        &mut self,
        answer: &str,
        by: AnsweredBy,
        observer: &dyn Observer,
    ) -> Result<Answer, EngineError> {
        let asked = self
            .waiting_question()
            .ok_or_else(|| EngineError::NotWaitingForAnswer {
                id: self.run_id().unwrap_or_default().to_string(),
            })?;
        if let Some(late) = self.timed_out(&asked) {
            self.record_timeout(&asked, observer)?;
            return Ok(Answer::TooLate(late));
        }
        if let Some(detail) = super::step::oversize(&answer, "the answer") {
            return Err(EngineError::Oversize { detail });
        }
        let answer = choose(answer, asked.choices.as_deref())?;
        self.record_ask(
            &asked,
            StepResult {
                success: true,
                duration_ms: Some(now_ms().saturating_sub(asked.at)),
                answer: Some(answer.clone()),
                answered_by: Some(by),
                ..StepResult::default()
            },
            observer,
        )?;
        Ok(Answer::Given(answer))
    }

    /// Journals the result of the question `asked`, and reports it.
    fn record_ask(
        &mut self,
        asked: &AskEvent,
        result: StepResult,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let input = StepInput::Ask {
            question: asked.question.clone(),
            choices: asked.choices.clone(),
        };
        let record = self.record_step(input, None, result, asked.allow_failure)?;
        observer.step_finished(&self.label(), &record);
        Ok(())
    }

    /// The question the top frame waits on, as journaled: asked, and not answered yet.
    fn waiting_question(&self) -> Option<AskEvent> {
        let top = self.stack.last()?;
        top.asked
            .clone()
            .filter(|a| a.index == top.steps.len() && top.failure.is_none())
    }

    /// The question of the top frame's next step, journaled when it is asked for the first
    /// time (the time its timeout counts from).
    fn asked(
        &mut self,
        question: String,
        choices: Option<Vec<String>>,
        timeout: Option<Duration>,
        allow_failure: bool,
    ) -> Result<AskEvent, EngineError> {
        let depth = self.stack.len() - 1;
        let top = self.stack.last().expect("a question comes from a frame");
        let index = top.steps.len();
        if let Some(asked) = top
            .asked
            .as_ref()
            .filter(|a| a.index == index && a.question == question && a.choices == choices)
        {
            return Ok(asked.clone());
        }
        let asked = AskEvent {
            depth,
            index,
            question,
            choices,
            timeout_ms: timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
            allow_failure,
            at: now_ms(),
        };
        self.append(&Event::Ask(asked.clone()))?;
        if let Some(top) = self.stack.last_mut() {
            top.asked = Some(asked.clone());
        }
        Ok(asked)
    }

    /// Journals that the top frame's next step, an llm step asking `prompt`, is handed to
    /// the agent, the first time it is: a reader of the journal can then say what the run
    /// waits on without evaluating the script.
    fn hand_out(&mut self, prompt: &str) -> Result<(), EngineError> {
        if self.journal.is_none() {
            return Ok(());
        }
        let depth = self.stack.len() - 1;
        let top = self.stack.last().expect("an llm step comes from a frame");
        // Journaled as every text is: with the secrets this process knows as `${VAR}`.
        let prompt = crate::secrets::redact(prompt);
        let handed = HandedEvent::new(depth, top.steps.len(), &prompt);
        if top
            .handed
            .as_ref()
            .is_some_and(|h| h.index == handed.index && h.prompt == handed.prompt)
        {
            return Ok(());
        }
        self.append(&Event::Handed(handed.clone()))?;
        if let Some(top) = self.stack.last_mut() {
            top.handed = Some(handed);
        }
        Ok(())
    }

    /// How long past its timeout the question is, when it is.
    fn timed_out(&self, asked: &AskEvent) -> Option<Duration> {
        let deadline = asked.at.saturating_add(asked.timeout_ms?);
        let now = now_ms();
        (now >= deadline).then(|| Duration::from_millis(now - deadline))
    }

    /// Fails the question the run waits on: no answer came in time.
    fn record_timeout(
        &mut self,
        asked: &AskEvent,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let timeout = Duration::from_millis(asked.timeout_ms.unwrap_or(0));
        self.record_ask(
            asked,
            StepResult {
                success: false,
                error: Some(format!(
                    "no answer came within the timeout ({}) of the question",
                    humantime::format_duration(timeout)
                )),
                duration_ms: Some(now_ms().saturating_sub(asked.at)),
                ..StepResult::default()
            },
            observer,
        )
    }

    /// Finishes the pending NL script or NL fallback, done by hand, and runs on.
    pub(crate) fn finish_nl(&mut self, observer: &dyn Observer) -> Result<Pending, EngineError> {
        self.finish_nl_by(None, observer)
    }

    /// [`Executor::finish_nl`], with what the agent process that did the work reported
    /// journaled in the frame's end (`mekara run --agent …`).
    pub(crate) fn finish_nl_by(
        &mut self,
        agent: Option<AgentReport>,
        observer: &dyn Observer,
    ) -> Result<Pending, EngineError> {
        let pending = self.advance(observer)?;
        if !matches!(pending, Pending::Nl { .. } | Pending::Fallback { .. }) {
            return Err(EngineError::WrongCall {
                expected: Waiting::NlScript,
                waiting: pending.waiting(),
            });
        }
        self.pop_with(Outcome::FinishedByAgent, None, agent, observer)?;
        self.advance(observer)
    }

    /// Runs until the agent is needed or the stack is empty, and says what is pending.
    /// With nothing new to run, this only re-derives the pending item.
    pub(crate) fn advance(&mut self, observer: &dyn Observer) -> Result<Pending, EngineError> {
        loop {
            let Some(top) = self.stack.last_mut() else {
                return self.finished();
            };
            if let Some(error) = top.failure.clone() {
                let (script, request) = (top.script.clone(), top.request.clone());
                let failed_call = self.failed_call();
                let instructions = self.expand_tags(&script, &request, observer)?;
                self.sync()?;
                // The failed frame's own index would point past the failed step: name it
                // alone; the error says which step failed.
                return Ok(Pending::Fallback {
                    path: self.label(),
                    error,
                    instructions,
                    failed_call,
                });
            }
            let Some(program) = top.program(&self.resolver, &self.settings) else {
                let (script, request) = (top.script.clone(), top.request.clone());
                let instructions = self.expand_tags(&script, &request, observer)?;
                self.sync()?;
                return Ok(Pending::Nl {
                    path: self.path(),
                    instructions,
                });
            };
            let evaluation = match program {
                Ok(program) => self.evaluate_top(&program, observer)?,
                Err(code) => Evaluation::Failed(code.message),
            };
            match evaluation {
                Evaluation::Suspended(Suspension::Llm { prompt, expects }) => {
                    self.hand_out(&prompt)?;
                    self.sync()?;
                    self.note_llm();
                    return Ok(Pending::Llm {
                        path: self.path(),
                        prompt,
                        expects,
                    });
                }
                Evaluation::Tasks { group, max, tasks } => {
                    self.sync()?;
                    self.note_llm();
                    return Ok(Pending::Tasks {
                        // Named by the group's first step: it stays as tasks are answered.
                        path: format!("{}[{group}]", self.label()),
                        group,
                        max,
                        tasks,
                    });
                }
                Evaluation::Suspended(Suspension::Ask {
                    question,
                    choices,
                    timeout,
                    allow_failure,
                }) => {
                    let asked = self.asked(question, choices, timeout, allow_failure)?;
                    if self.timed_out(&asked).is_some() {
                        // Nobody answered in time: the step fails, and the script goes on as
                        // from any failed step.
                        self.record_timeout(&asked, observer)?;
                        continue;
                    }
                    self.sync()?;
                    return Ok(Pending::Ask {
                        path: self.path(),
                        question: asked.question,
                        choices: asked.choices,
                        timeout: asked.timeout_ms.map(Duration::from_millis),
                        asked_at: asked.at,
                    });
                }
                Evaluation::Suspended(Suspension::Call {
                    script,
                    request,
                    working_dir,
                    allow_failure,
                }) => {
                    self.call(script, request, working_dir, allow_failure, observer)?;
                }
                Evaluation::Completed => self.pop(Outcome::Completed, None, observer)?,
                Evaluation::Stopped(message) => self.stop(message, observer)?,
                Evaluation::Failed(error) => {
                    if self.stack.last().is_some_and(|f| f.origin == Origin::Call) {
                        self.pop(Outcome::Failed, Some(error), observer)?;
                    } else {
                        self.fail_top(error)?;
                    }
                }
            }
        }
    }

    /// The script whose step stopped the top frame through a failed call, when one did:
    /// the frame's last own step is a call that failed without `allow_failure`, and the
    /// script whose step failed is the last of the chain of calls under it that failed (the
    /// script it called, or one that script called, and so on). It is resolved again by
    /// name, as it was when it ran (resolution depends only on the project). A call refused
    /// before it ran (no such script) has no instructions to give.
    fn failed_call(&self) -> Option<FailedCall> {
        let top = self.stack.last()?;
        let last = last_own_step(&top.steps)?;
        let StepInput::Call {
            script, request, ..
        } = &last.input
        else {
            return None;
        };
        if last.result.success || last.allow_failure {
            return None;
        }
        let (script, request) = match top.failed_calls.last() {
            Some(failing) => (&failing.script, &failing.request),
            None => (script, request),
        };
        let called = self.resolver.resolve(script).ok()?;
        let mut chain = vec![top.script.name.to_string()];
        chain.extend(top.failed_calls.iter().map(|callee| {
            self.resolver
                .resolve(&callee.script)
                .map_or_else(|_| callee.script.clone(), |s| s.name.to_string())
        }));
        if chain.len() < 2 {
            chain.push(called.name.to_string());
        }
        let between = top
            .failed_calls
            .iter()
            .rev()
            .skip(1)
            .filter_map(|callee| {
                let script = self.resolver.resolve(&callee.script).ok()?;
                Some((
                    script.name.to_string(),
                    script.instructions(&callee.request),
                ))
            })
            .collect();
        Some(FailedCall {
            name: called.name.to_string(),
            instructions: called.instructions(request),
            chain,
            between,
        })
    }

    /// Expands the prompt tags of NL instructions shown for the top frame. The k-th tag is
    /// answered by the frame's k-th step made for an NL tag when it asked for the same call
    /// (so re-deriving the pending item calls nothing); otherwise the tool is called now and
    /// the result journaled in the frame, which is also the record of what the agent saw.
    ///
    /// Tags are read from the script's own text before `request` fills its `$ARGUMENTS`,
    /// so the user's arguments never call a tool (see `tool::expand_template`).
    fn expand_tags(
        &mut self,
        script: &Script,
        request: &str,
        observer: &dyn Observer,
    ) -> Result<String, EngineError> {
        let recorded: Vec<StepRecord> = self
            .stack
            .last()
            .map(|top| {
                top.steps
                    .iter()
                    .filter(|s| s.context.as_deref() == Some(NL_TAG_CONTEXT))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let mut seen = 0;
        let nl = NlText::parse(&script.nl.text);
        let (template, tail) = nl.template(request);
        let mut expanded = super::tool::expand_template(
            template,
            ARGUMENTS,
            request,
            |server, tool, arguments| {
                let call = ToolCall {
                    server: server.to_string(),
                    tool: tool.to_string(),
                    arguments,
                    timeout: None,
                };
                let input = call.input();
                let known = recorded.get(seen).filter(|r| r.input == input);
                seen += 1;
                if let Some(record) = known {
                    return Ok(record.result.clone());
                }
                let path = self.label();
                let index = self.stack.last().map_or(0, |f| f.steps.len());
                observer.step_started(
                    &path,
                    index,
                    &input,
                    Some(NL_TAG_CONTEXT),
                    Recorded::default(),
                );
                let result = match self.runner.call_tool(&call, &self.cancel) {
                    Ran::Done(result) => result,
                    Ran::Cancelled => {
                        self.cancel.reset();
                        return Err(EngineError::Cancelled {
                            script: path,
                            index,
                        });
                    }
                };
                let record =
                    self.record_step(input, Some(NL_TAG_CONTEXT.to_string()), result, false)?;
                observer.step_finished(&path, &record);
                Ok(record.result)
            },
        )?;
        expanded.push_str(&tail);
        Ok(expanded)
    }

    fn evaluate_top(
        &mut self,
        program: &Loaded,
        observer: &dyn Observer,
    ) -> Result<Evaluation, EngineError> {
        let label = self.label();
        let depth = self.stack.len() - 1;
        let journal = self
            .journal
            .as_mut()
            .expect("a run is open while frames are on the stack");
        let frame = self
            .stack
            .last_mut()
            .expect("called with a frame on the stack");
        let group_note = journal.group_note().clone();
        let mut write = |record: &StepRecord| {
            journal.append(&Event::Step(StepEvent {
                depth,
                record: record.clone(),
                at: now_ms(),
            }))
        };
        let run = FrameRun::new(
            &label,
            &frame.working_dir,
            &mut frame.steps,
            &mut frame.printed,
            &mut write,
            self.runner.as_ref(),
            &self.cancel,
            &self.settings.limits,
        );
        let result = program.evaluate(
            run.request(&frame.request)
                .group_note(&group_note)
                .observer(observer)
                .default_timeout(self.settings.default_timeout)
                .source(program.authored())
                .warm(&mut frame.warm),
        );
        if matches!(result, Err(EngineError::Cancelled { .. })) {
            self.cancel.reset();
            self.sync()?;
        }
        result
    }

    /// A `call_script` step: push the script, or record why it cannot run.
    fn call(
        &mut self,
        name: String,
        request: String,
        working_dir: PathBuf,
        allow_failure: bool,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let refusal = match self.resolver.resolve(&name) {
            Err(e) => Err(e.to_string()),
            Ok(_) if self.stack.len() >= self.settings.max_depth => Err(format!(
                "scripts are nested {} deep ({}); the limit is {}",
                self.stack.len(),
                self.path(),
                self.settings.max_depth
            )),
            Ok(_) if !working_dir.is_dir() => Err(format!(
                "working_dir `{}` is not a folder",
                working_dir.display()
            )),
            Ok(script) => Ok(script),
        };
        match refusal {
            Ok(script) => self.push(
                script,
                &request,
                &working_dir,
                Some((name, allow_failure)),
                observer,
            ),
            Err(error) => self
                .record_step(
                    StepInput::Call {
                        script: name,
                        request,
                        working_dir,
                    },
                    None,
                    StepResult {
                        success: false,
                        error: Some(error),
                        ..StepResult::default()
                    },
                    allow_failure,
                )
                .map(|_| ()),
        }
    }

    /// Pushes `script`: started by the agent, or called (with the name the caller wrote and
    /// whether it allowed a failure).
    fn push(
        &mut self,
        script: Script,
        request: &str,
        working_dir: &Path,
        call: Option<(String, bool)>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let origin = if call.is_some() {
            Origin::Call
        } else {
            Origin::Start
        };
        let (called_as, allow_failure) =
            call.map_or((None, false), |(name, allowed)| (Some(name), allowed));
        self.append(&Event::Push(PushEvent {
            depth: self.stack.len(),
            script: script.name.as_path().to_string(),
            compiled: script.compiled.is_some(),
            request: request.to_string(),
            working_dir: working_dir.to_path_buf(),
            origin,
            called_as: called_as.clone(),
            allow_failure,
            at: now_ms(),
        }))?;
        self.stack.push(Frame {
            script,
            request: request.to_string(),
            working_dir: working_dir.to_path_buf(),
            origin,
            called_as,
            allow_failure,
            steps: Vec::new(),
            failure: None,
            asked: None,
            failed_calls: Vec::new(),
            handed: None,
            program: None,
            warm: None,
            printed: 0,
        });
        observer.frame_event(FrameEvent::Pushed {
            path: &self.label(),
        });
        Ok(())
    }

    /// Pops the top frame; a called frame's end becomes its caller's step result.
    fn pop(
        &mut self,
        outcome: Outcome,
        error: Option<String>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        self.pop_with(outcome, error, None, observer)
    }

    fn pop_with(
        &mut self,
        outcome: Outcome,
        error: Option<String>,
        agent: Option<AgentReport>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let label = self.label();
        let depth = self.stack.len() - 1;
        self.append(&Event::Pop(PopEvent {
            depth,
            outcome,
            error: error.clone(),
            agent,
            at: now_ms(),
        }))?;
        let frame = self
            .stack
            .pop()
            .expect("pop is called with a frame on the stack");
        observer.frame_event(FrameEvent::Ended {
            path: &label,
            success: succeeded(outcome),
            allow_failure: frame.allow_failure,
        });
        if depth == 0 {
            self.ended = Some((
                self.run_id().unwrap_or_default().to_string(),
                outcome,
                self.root_fell_back,
                self.stopping
                    .clone()
                    .filter(|_| outcome == Outcome::Stopped),
            ));
        }
        if frame.origin == Origin::Call {
            if let Some(caller) = self.stack.last_mut() {
                // As replay keeps it when it reads the pop.
                caller.failed_calls = if outcome == Outcome::Failed {
                    failed_calls(
                        frame.script.name.as_path().to_string(),
                        frame.request.clone(),
                        &frame.steps,
                        frame.failed_calls,
                    )
                } else {
                    Vec::new()
                };
            }
            self.record_step(
                StepInput::Call {
                    script: frame
                        .called_as
                        .unwrap_or_else(|| frame.script.name.to_string()),
                    request: frame.request,
                    working_dir: frame.working_dir,
                },
                None,
                StepResult {
                    success: succeeded(outcome),
                    error,
                    ..StepResult::default()
                },
                frame.allow_failure,
            )?;
        }
        Ok(())
    }

    /// The top frame's script called `fail(message)`: it stopped itself. The frame is popped
    /// as stopped, and so is each caller that did not allow the call to fail (its call
    /// failed, which would stop it anyway); a caller that allowed it gets the failed call.
    /// A script started on top of a pending step (`start` with `parent`) stops its parent
    /// too, as a root script's stop ends the run: "stop" means stop, and no step of the
    /// parent asked for it, so none could allow it to fail. A root frame's stop ends the
    /// run: nobody finishes it by hand.
    fn stop(&mut self, message: String, observer: &dyn Observer) -> Result<(), EngineError> {
        let top = self.stack.last().expect("a frame stops itself");
        self.stopping = Some(Stop {
            script: self.label(),
            message: message.clone(),
            // A step that failed without `allow_failure` would have stopped the frame
            // before the script could: the last step failed, so the script allowed it.
            retry: top.steps.last().is_some_and(|s| !s.result.success),
        });
        let result = loop {
            let Some(frame) = self.stack.last() else {
                break Ok(());
            };
            let goes_up = match frame.origin {
                Origin::Call => !frame.allow_failure,
                Origin::Start => true,
            };
            if let Err(e) = self.pop(Outcome::Stopped, Some(message.clone()), observer) {
                break Err(e);
            }
            if !goes_up {
                break Ok(());
            }
        };
        self.stopping = None;
        result
    }

    fn fail_top(&mut self, error: String) -> Result<(), EngineError> {
        let depth = self.stack.len() - 1;
        self.append(&Event::Fail(FailEvent {
            depth,
            error: error.clone(),
            at: now_ms(),
        }))?;
        if depth == 0 {
            self.root_fell_back = true;
        }
        if let Some(top) = self.stack.last_mut() {
            top.failure = Some(error);
        }
        Ok(())
    }

    /// Journals a step the engine decided itself (llm outputs).
    fn record_in_top(&mut self, input: StepInput, result: StepResult) -> Result<(), EngineError> {
        self.record_step(input, None, result, false).map(|_| ())
    }

    /// Journals a step in the top frame and returns its record.
    fn record_step(
        &mut self,
        input: StepInput,
        context: Option<String>,
        result: StepResult,
        allow_failure: bool,
    ) -> Result<StepRecord, EngineError> {
        self.record_step_tagged(input, context, result, allow_failure, None, None)
    }

    /// [`Executor::record_step`], of the `parallel` member `parallel` when one, numbered
    /// `number` when given (else by its place in the frame).
    fn record_step_tagged(
        &mut self,
        input: StepInput,
        context: Option<String>,
        result: StepResult,
        allow_failure: bool,
        parallel: Option<ParallelMember>,
        number: Option<usize>,
    ) -> Result<StepRecord, EngineError> {
        let depth = self.stack.len() - 1;
        let top = self.stack.last().expect("a step is recorded into a frame");
        // An answer (llm outputs, an answer to `ask`, an agent's error) may hold a secret
        // this process knows: it is journaled, and given to the script, as `${VAR}`.
        let mut result = result;
        result.redact(&crate::secrets::known());
        let record = StepRecord {
            index: number.unwrap_or(top.steps.len()),
            input,
            context,
            result,
            allow_failure,
            parallel,
        };
        self.append(&Event::Step(StepEvent {
            depth,
            record: record.clone(),
            at: now_ms(),
        }))?;
        if let Some(top) = self.stack.last_mut() {
            top.steps.push(record.clone());
        }
        Ok(record)
    }

    fn finished(&mut self) -> Result<Pending, EngineError> {
        if let Some(journal) = self.journal.take() {
            journal.close()?;
        }
        match &self.ended {
            Some((run, outcome, fell_back, stop)) => Ok(Pending::Finished {
                run: run.clone(),
                outcome: *outcome,
                fell_back: *fell_back,
                stop: stop.clone(),
            }),
            None => Err(EngineError::WrongCall {
                expected: Waiting::LlmStep,
                waiting: Waiting::Nothing,
            }),
        }
    }

    /// Notes beside the journal that an llm step was handed out now, for the viewer: one
    /// write to the step group note, no sync (docs/design.md, "What a run does now").
    fn note_llm(&self) {
        if let Some(journal) = &self.journal {
            journal.group_note().note_llm(now_ms());
        }
    }

    fn append(&mut self, event: &Event) -> Result<(), EngineError> {
        let journal = self
            .journal
            .as_mut()
            .expect("a run is open while frames are on the stack");
        Ok(journal.append(event)?)
    }

    fn sync(&mut self) -> Result<(), EngineError> {
        match self.journal.as_mut() {
            Some(journal) => Ok(journal.sync()?),
            None => Ok(()),
        }
    }

    /// `test:nested[0] > test:random[1]`: each frame with the index of its pending step.
    pub(crate) fn path(&self) -> String {
        self.stack
            .iter()
            .map(|f| format!("{}[{}]", f.script.name, f.steps.len()))
            .collect::<Vec<_>>()
            .join(" > ")
    }

    /// The path of the parents with indexes, then the top frame's name alone:
    /// `test:nested[0] > test:random`.
    pub(crate) fn label(&self) -> String {
        let Some((top, parents)) = self.stack.split_last() else {
            return String::new();
        };
        parents
            .iter()
            .map(|f| format!("{}[{}] > ", f.script.name, f.steps.len()))
            .chain(std::iter::once(top.script.name.to_string()))
            .collect()
    }
}

/// Whether a frame that ended so did what it was for (a called frame's call succeeded).
fn succeeded(outcome: Outcome) -> bool {
    !matches!(outcome, Outcome::Failed | Outcome::Stopped)
}

/// Checks that `outputs` has exactly the names `expected`.
fn check_names(expected: Vec<String>, outputs: &Map<String, Json>) -> Result<(), EngineError> {
    let missing: Vec<String> = expected
        .iter()
        .filter(|k| !outputs.contains_key(*k))
        .cloned()
        .collect();
    let unexpected: Vec<String> = outputs
        .keys()
        .filter(|k| !expected.contains(k))
        .cloned()
        .collect();
    if missing.is_empty() && unexpected.is_empty() {
        return Ok(());
    }
    Err(EngineError::Outputs {
        missing,
        unexpected,
        expected,
    })
}

/// Checks the outputs given for an llm step against its `expects`: the same names, each a
/// value a script can hold.
pub(crate) fn check_outputs(
    expects: Option<&Map<String, Json>>,
    outputs: &Map<String, Json>,
) -> Result<(), EngineError> {
    check_names(
        expects.iter().flat_map(|e| e.keys().cloned()).collect(),
        outputs,
    )?;
    if let Some(detail) = outputs.iter().find_map(|(name, value)| {
        super::compiled::unfit(value).map(|found| found.describe(&format!("output `{name}`")))
    }) {
        return Err(EngineError::Unfit { detail });
    }
    if let Some(detail) = super::step::oversize(outputs, "the object of outputs") {
        return Err(EngineError::Oversize { detail });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    /// The MCP server moves executors onto blocking threads.
    #[test]
    fn executor_is_send() {
        fn send<T: Send>() {}
        send::<super::Executor>();
    }

    #[test]
    fn a_choice_is_taken_as_written_by_its_number_or_in_another_case() {
        let choices = [
            "major".to_string(),
            "minor".to_string(),
            "Patch".to_string(),
        ];
        let choose = |given| super::choose(given, Some(&choices)).ok();
        assert_eq!(choose("minor").as_deref(), Some("minor"));
        assert_eq!(choose("2").as_deref(), Some("minor"));
        assert_eq!(choose("Minor").as_deref(), Some("minor"));
        assert_eq!(choose(" PATCH ").as_deref(), Some("Patch"));
        assert_eq!(choose("min"), None);
        // Two choices that differ only in case: only the exact one is taken.
        let both = ["Yes".to_string(), "yes".to_string()];
        assert_eq!(super::choose("YES", Some(&both)).ok(), None);
        assert_eq!(
            super::choose("Yes", Some(&both)).ok().as_deref(),
            Some("Yes")
        );
    }
}
