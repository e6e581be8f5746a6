//! Taking a run up from its journal: resuming, switching to another run, rewinding (superseding
//! part of its history) and rebuilding the stack from what stays live.

use super::{Claim, Executor, Frame};
use crate::engine::error::{EngineError, Waiting};
use crate::engine::group_note::Leftover;
use crate::engine::journal::{Event, KilledEvent, TornTail, now_ms};
use crate::engine::rewind::{Rewind, RewindPlan};
use crate::engine::runner::StepRunner;
use crate::engine::runs::RunHistory;
use crate::engine::settings::Settings;
use crate::engine::store::{RunLog, RunStore};
use crate::script::Resolver;

impl Executor {
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
}
