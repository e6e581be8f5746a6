//! The parent's side: starts `mekara __evaluate`, sends it the job, does what it asks with
//! the frame's runner, journal and observer, and makes of how it ended the evaluation's end.

use std::io::BufRead;
use std::path::Path;

use serde::Serialize;

use super::evaluator::SUBCOMMAND;
use super::live::Live;
use super::protocol::{
    Answer, Ask, CallJob, FrameJob, LoadJob, Opening, Outcome, Start, stopped, write_line,
};
use super::sources::Sources;
use super::warm::{TakeUp, Warm};
use crate::engine::compiled::static_check::largest_constant;
use crate::engine::compiled::{Called, CodeError, DirectCall, Evaluation, FrameRun};
use crate::engine::error::EngineError;
use crate::engine::journal::JournalError;
use crate::engine::observer::Recorded;
use crate::engine::runner::{Ran, ShellStep};
use crate::engine::step::{StepInput, StepRecord};

/// Evaluates the script of `sources` over the frame's journal in a child process `exe
/// __evaluate`, doing what it asks with `run`'s runner, journal and observer; ends as
/// [`evaluate_counted`](crate::engine::compiled::program::evaluate_counted) does.
///
/// With a [`Warm`] slot in `run`, a child that suspends is kept there holding the
/// evaluation, and the next evaluation of the frame takes it up: with no new step it
/// answers what it answered; with new steps (the suspended step's answer first) the child
/// goes on from where it stopped. Any other change of the journal, or a child that is gone,
/// starts a new one from the top, which is what would have happened without it.
pub(crate) fn evaluate(
    exe: &Path,
    sources: &Sources,
    mut run: FrameRun<'_>,
) -> (Result<Evaluation, EngineError>, usize) {
    let mut slot = run.warm.take();
    let held = slot.as_mut().and_then(|slot| slot.take());
    // The conversation that went on, or the run back, for a new child.
    let resumed = match held.map(|warm| warm.take_up(run.steps)) {
        Some(TakeUp::Same(warm)) => {
            *run.printed = warm.printed;
            let same = (Ok(warm.evaluation.clone()), warm.cursor);
            if let Some(slot) = slot {
                *slot = Some(*warm);
            }
            return same;
        }
        Some(TakeUp::Resume(live, new)) => {
            let evaluating = Evaluating::enter();
            let ended = converse(live, &Answer::Resume(new), run, true);
            drop(evaluating);
            match ended.end {
                // Gone before it said anything: nothing happened, so a new child does it
                // all.
                End::Gone => Err(ended.run),
                _ => Ok(ended),
            }
        }
        Some(TakeUp::Stale) | None => Err(run),
    };
    let ended = resumed.unwrap_or_else(|run| {
        let job = frame_job(sources, &run, slot.is_some());
        start(exe, &Start::Frame(job), run)
    });
    let Ended {
        run,
        end,
        journal_error,
    } = ended;
    match end {
        End::Held {
            evaluation,
            cursor,
            printed,
            live,
        } => {
            *run.printed = printed;
            if let Some(slot) = slot {
                *slot = Warm::keep(live, run.steps, &evaluation, cursor, printed);
            }
            (Ok(evaluation), cursor)
        }
        End::Finished {
            outcome,
            cursor,
            printed,
        } => {
            *run.printed = printed;
            let result = match outcome {
                Outcome::Evaluated(evaluation) => Ok(evaluation),
                outcome => Err(outcome.into_error(run.path, journal_error)),
            };
            (result, cursor)
        }
        End::Refused(message) => (Ok(Evaluation::Failed(message)), run.steps.len()),
        // A journal that could not be written says more than the child's end.
        End::Stopped(e) => (
            Err(journal_error.map_or(e, EngineError::Journal)),
            run.steps.len(),
        ),
        End::Gone => (
            Err(stopped(
                run.path,
                "its process ended before the evaluation did",
            )),
            run.steps.len(),
        ),
    }
}

/// The job of evaluating `run`'s frame from the top.
fn frame_job(sources: &Sources, run: &FrameRun<'_>, warm: bool) -> FrameJob {
    FrameJob {
        sources: sources.clone(),
        path: run.path.to_string(),
        request: run.request.to_string(),
        working_dir: run.working_dir.to_path_buf(),
        steps: run.steps.clone(),
        printed: *run.printed,
        default_timeout: run.default_timeout,
        limits: run.limits.clone(),
        warm,
    }
}

/// Calls a function of the module `source` (named `origin` in error locations) as
/// [`call_directly`](crate::engine::compiled::call_directly) does, in a child process `exe __evaluate` that loads the module
/// again (its top level only defines things) and asks for the steps the call runs.
pub(crate) fn call(
    exe: &Path,
    origin: &str,
    source: &str,
    call: DirectCall<'_>,
) -> Result<Called, EngineError> {
    let start = Start::Call(CallJob {
        origin: origin.to_string(),
        source: source.to_string(),
        function: call.function.to_string(),
        kwargs: call.kwargs.clone(),
        working_dir: call.working_dir.to_path_buf(),
        default_timeout: call.default_timeout,
        limits: call.limits.clone(),
    });
    // Nothing of the call is journaled or observed (as in `call_directly`).
    let (mut steps, mut printed) = (Vec::new(), 0);
    let mut forget = |_: &StepRecord| Ok(());
    let run = FrameRun::new(
        call.function,
        call.working_dir,
        &mut steps,
        &mut printed,
        &mut forget,
        call.runner,
        call.cancel,
        call.limits,
    )
    .default_timeout(call.default_timeout);
    let ended = self::start(exe, &start, run);
    match ended.end {
        End::Finished {
            outcome: Outcome::Called(called),
            ..
        } => Ok(called),
        End::Finished { outcome, .. } => {
            Err(outcome.into_error(call.function, ended.journal_error))
        }
        End::Refused(message) => Ok(Called::Failed(message)),
        End::Stopped(e) => Err(e),
        // A call's job does not hold its evaluation, and is never resumed.
        End::Held { .. } | End::Gone => Err(stopped(
            call.function,
            "the child answered another job than it was given",
        )),
    }
}

/// Runs the top level of `sources` (a compiled script with its helpers when `script`, else a
/// tool module) in a child process `exe __evaluate`, where the memory cap stops the child,
/// not this process: what `mekara check` and `mekara serve`'s start-up do before anything
/// of the module runs here. The error is the module's problem, as loading it here would
/// give it, or the cap's message with the statement's line.
pub(crate) fn load(
    exe: &Path,
    sources: &Sources,
    limits: &crate::engine::compiled::Limits,
    script: bool,
) -> Result<(), CodeError> {
    let start = Start::Load(LoadJob {
        sources: sources.clone(),
        limits: limits.clone(),
        script,
    });
    let (mut steps, mut printed) = (Vec::new(), 0);
    let mut forget = |_: &StepRecord| Ok(());
    let runner = crate::engine::shell::ShellRunner::new();
    let cancel = crate::engine::runner::CancelToken::default();
    let here = std::env::current_dir().unwrap_or_default();
    let run = FrameRun::new(
        &sources.origin,
        &here,
        &mut steps,
        &mut printed,
        &mut forget,
        &runner,
        &cancel,
        limits,
    );
    match self::start(exe, &start, run).end {
        End::Finished {
            outcome: Outcome::Loaded(None),
            ..
        } => Ok(()),
        End::Finished {
            outcome: Outcome::Loaded(Some(message)),
            ..
        } => Err(CodeError::new(message)),
        // starlark computes constant expressions as it compiles each statement, before it
        // runs: a refusal then names the statement before, or none. A constant that large
        // is where it was refused.
        End::Refused(message) => {
            let cap = u128::try_from(limits.memory_cap()).unwrap_or(0);
            Err(CodeError::new(
                match largest_constant(&sources.origin, &sources.text, cap / 2) {
                    Some(at) => {
                        let why = message.split("\n --> ").next().unwrap_or(&message);
                        format!("{why}\nin {at}")
                    }
                    None => message,
                },
            ))
        }
        End::Finished { .. } | End::Held { .. } | End::Gone => Err(CodeError::new(format!(
            "error: the evaluator answered another job than loading {}",
            sources.origin
        ))),
        End::Stopped(e) => Err(CodeError::new(format!("error: {e}"))),
    }
}

/// How a conversation with a child ended.
struct Ended<'a> {
    /// The frame it was about, given back.
    run: FrameRun<'a>,
    /// How.
    end: End,
    /// Why the journal could not be written, when it could not.
    journal_error: Option<JournalError>,
}

/// How a child ended, or stopped to hold its evaluation.
enum End {
    /// It said how the evaluation ended, where its cursor was and how many prints it
    /// reported.
    Finished {
        outcome: Outcome,
        cursor: usize,
        printed: usize,
    },
    /// The evaluation suspended, and the child, alive, holds it.
    Held {
        evaluation: Evaluation,
        cursor: usize,
        printed: usize,
        live: Live,
    },
    /// It stopped at the memory cap: the script's failure, with the cap's message and the
    /// statement.
    Refused(String),
    /// It stopped any other way before it said: the run is kept as it was.
    Stopped(EngineError),
    /// A child taken up to go on was gone before it said anything.
    Gone,
}

/// Starts `exe __evaluate` and sends it `start` (see [`converse`]).
fn start<'a>(exe: &Path, start: &Start, run: FrameRun<'a>) -> Ended<'a> {
    let _evaluating = Evaluating::enter();
    match Live::spawn(exe, run.limits) {
        Ok(live) => converse(live, &Opening::new(start), run, false),
        Err(e) => {
            let detail = format!("cannot start `{} {SUBCOMMAND}`: {e}", exe.display());
            Ended {
                end: End::Stopped(stopped(run.path, &detail)),
                run,
                journal_error: None,
            }
        }
    }
}

/// Sends `first` to the child (a job, or the steps a held evaluation goes on with) and does
/// what it asks with `run` until it says how the evaluation ended or suspended, or stops.
fn converse<'a>(
    live: Live,
    first: &impl Serialize,
    run: FrameRun<'a>,
    resuming: bool,
) -> Ended<'a> {
    let mut parent = Parent {
        run,
        live,
        journal_error: None,
        heard: false,
        started: None,
        unjournaled: None,
    };
    let said = parent.serve(first);
    // A child gone between a step's end and its record leaves the result here: the step
    // ran, so it is journaled, and a resume goes on after it instead of running it again.
    let orphan = match said {
        None => parent.journal_orphan(),
        Some(_) => None,
    };
    let Parent {
        run,
        live,
        mut journal_error,
        heard,
        ..
    } = parent;
    let end = match said {
        Some(Said::Suspended {
            evaluation,
            cursor,
            printed,
        }) => End::Held {
            evaluation,
            cursor,
            printed,
            live,
        },
        Some(Said::Finished {
            outcome,
            cursor,
            printed,
        }) => {
            // The child says nothing after `Finished`; closing its stdin lets it go.
            let _ = live.end();
            End::Finished {
                outcome,
                cursor,
                printed,
            }
        }
        None => {
            let (status, said) = live.end();
            if let Some(refused) = refusal(&said) {
                End::Refused(refused)
            } else if resuming && !heard {
                End::Gone
            } else {
                let how = match status {
                    Ok(status) => status.to_string(),
                    Err(e) => format!("cannot wait for it: {e}"),
                };
                let said = said.trim();
                let mut detail = if said.is_empty() {
                    format!("its process ended ({how}) before the evaluation did")
                } else {
                    format!("its process ended ({how}) before the evaluation did, saying: {said}")
                };
                match orphan {
                    Some(Ok(step)) => detail.push_str(&format!(
                        "; step `{step}` had ended, and its result is journaled"
                    )),
                    Some(Err(e)) => journal_error = Some(e),
                    None => {}
                }
                End::Stopped(stopped(run.path, &detail))
            }
        }
    };
    Ended {
        run,
        end,
        journal_error,
    }
}

/// A place among the evaluations that may go on at once in this process, held while one
/// does: each may take up to its hard memory cap (four times the heap limit), so with
/// [`max_evaluating`] of them, and at most [`MAX_WARM`](super::warm::MAX_WARM) held children
/// of at most [`WARM_RSS`](super::warm::WARM_RSS) each, that bounds what a server's evaluations take together. Past it, an
/// evaluation waits for a place (docs/design.md, "Memory across evaluations").
struct Evaluating;

/// How many evaluations go on now, and the condition their end signals.
static EVALUATING: (std::sync::Mutex<usize>, std::sync::Condvar) =
    (std::sync::Mutex::new(0), std::sync::Condvar::new());

/// How many evaluations may go on at once: `MEKARA_MAX_EVALUATIONS`, else 4.
fn max_evaluating() -> usize {
    static MAX: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("MEKARA_MAX_EVALUATIONS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|n| *n > 0)
            .unwrap_or(4)
    })
}

impl Evaluating {
    /// Waits for a place, and holds it until dropped.
    fn enter() -> Evaluating {
        let (count, ended) = &EVALUATING;
        let mut going = count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *going >= max_evaluating() {
            tracing::info!(
                "{} evaluations go on (MEKARA_MAX_EVALUATIONS): this one waits for one to end",
                *going
            );
        }
        while *going >= max_evaluating() {
            going = ended
                .wait(going)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *going += 1;
        Evaluating
    }
}

impl Drop for Evaluating {
    fn drop(&mut self) {
        let (count, ended) = &EVALUATING;
        let mut going = count
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *going = going.saturating_sub(1);
        ended.notify_one();
    }
}

/// The memory cap's message in what a child said, without the line that says the process
/// stops (here only the evaluation does).
fn refusal(said: &str) -> Option<String> {
    let at = said.find(crate::memory::REFUSED)?;
    let message = &said[at..];
    let end = message.find(crate::memory::STOPS).unwrap_or(message.len());
    Some(message[..end].trim_end().to_string())
}

/// The parent's side of the conversation.
struct Parent<'a> {
    run: FrameRun<'a>,
    live: Live,
    /// Why the journal could not be written, when it could not.
    journal_error: Option<JournalError>,
    /// Whether the child said anything.
    heard: bool,
    /// The step the child said started (outside a `parallel` round), until it runs.
    started: Option<Started>,
    /// A step run for the child whose result the child has not journaled yet: the record
    /// it would write, and the frame's stack path.
    unjournaled: Option<(String, StepRecord)>,
}

/// A step the child said started: what its record holds besides the result.
struct Started {
    frame: String,
    index: usize,
    input: StepInput,
    context: Option<String>,
    recorded: Recorded,
}

/// How the child ended an evaluation, or suspended it.
enum Said {
    Finished {
        outcome: Outcome,
        cursor: usize,
        printed: usize,
    },
    Suspended {
        evaluation: Evaluation,
        cursor: usize,
        printed: usize,
    },
}

impl Parent<'_> {
    /// Sends `first`, then does what the child asks until it says how the evaluation ended
    /// or that it suspended (`None`: it stopped first).
    fn serve(&mut self, first: &impl Serialize) -> Option<Said> {
        self.send(first)?;
        loop {
            match self.next_ask()? {
                Ask::Finished {
                    outcome,
                    cursor,
                    printed,
                } => {
                    return Some(Said::Finished {
                        outcome,
                        cursor,
                        printed,
                    });
                }
                Ask::Suspended {
                    evaluation,
                    cursor,
                    printed,
                } => {
                    return Some(Said::Suspended {
                        evaluation,
                        cursor,
                        printed,
                    });
                }
                ask => self.answer(ask)?,
            }
        }
    }

    /// What the child says next (`None`: it stopped, or said something that is not its
    /// protocol).
    fn next_ask(&mut self) -> Option<Ask> {
        let mut line = String::new();
        match self.live.from_child.as_mut()?.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => self.heard = true,
        }
        serde_json::from_str(&line)
            .inspect_err(|e| {
                tracing::warn!("the evaluating child said something that is not its protocol: {e}");
            })
            .ok()
    }

    /// Does what the child asks until it says [`Ask::Next`].
    fn until_next(&mut self) -> Option<()> {
        loop {
            match self.next_ask()? {
                Ask::Next => return Some(()),
                Ask::Finished { .. } | Ask::Suspended { .. } => return None,
                ask => self.answer(ask)?,
            }
        }
    }

    /// Does what `ask` asks, and answers when it takes an answer.
    fn answer(&mut self, ask: Ask) -> Option<()> {
        let run = &self.run;
        match ask {
            Ask::Shell(shell) => {
                let step = shell.into_step(run);
                let ran = run.runner.run_shell(
                    &step,
                    &mut |chunk| run.observer.output(chunk),
                    run.cancel,
                );
                self.ran(&step.input(), &ran);
                self.send(&Answer::Ran(ran))
            }
            Ask::Shells { steps, max } => {
                let steps: Vec<ShellStep> = steps.into_iter().map(|s| s.into_step(run)).collect();
                let (runner, cancel) = (run.runner, run.cancel);
                let mut gone = false;
                // Each result goes to the child as it comes, and the child journals it while
                // the others run, as an evaluation here would. A child that is gone leaves
                // the others to end unrecorded, as after a kill.
                runner.run_shells(&steps, max, cancel, &mut |at, ran| {
                    gone = gone
                        || self.send(&Answer::Done { at, ran }).is_none()
                        || self.until_next().is_none();
                });
                if gone {
                    return None;
                }
                self.send(&Answer::AllDone)
            }
            Ask::Tool(call) => {
                let ran = run.runner.call_tool(&call, run.cancel);
                self.ran(&call.input(), &ran);
                self.send(&Answer::Ran(ran))
            }
            Ask::Journal(record) => {
                self.unjournaled = None;
                let written = (self.run.journal)(&record);
                let ok = match written {
                    Ok(()) => {
                        self.run.steps.push(record);
                        true
                    }
                    Err(e) => {
                        self.journal_error = Some(e);
                        false
                    }
                };
                self.send(&Answer::Journaled(ok))
            }
            Ask::StepStarted {
                frame,
                index,
                input,
                context,
                recorded,
            } => {
                run.observer
                    .step_started(&frame, index, &input, context.as_deref(), recorded);
                self.started = Some(Started {
                    frame,
                    index,
                    input,
                    context,
                    recorded,
                });
                Some(())
            }
            Ask::Output(text) => {
                run.observer.output(text.as_bytes());
                Some(())
            }
            Ask::Print { frame, text } => {
                run.observer.print(&frame, &text);
                Some(())
            }
            Ask::StepFinished { frame, record } => {
                run.observer.step_finished(&frame, &record);
                Some(())
            }
            Ask::Next | Ask::Finished { .. } | Ask::Suspended { .. } => Some(()),
        }
    }

    /// Keeps the record of the step that started, now that it ran to an end as `input`
    /// (the same step), until the child journals it.
    fn ran(&mut self, input: &StepInput, ran: &Ran) {
        let started = self.started.take();
        self.unjournaled = match (started, ran) {
            (Some(started), Ran::Done(result)) if started.input == *input => Some((
                started.frame,
                StepRecord {
                    index: started.index,
                    input: started.input,
                    context: started.context,
                    result: result.clone(),
                    allow_failure: started.recorded.allow_failure,
                    parallel: started.recorded.parallel,
                },
            )),
            _ => None,
        };
    }

    /// Journals the step that ran for a child that is gone before it journaled it, and
    /// tells the observer, as the child would have: the step's label (`steps[3]`), or why
    /// its record could not be written (`None`: no step waited for its record).
    fn journal_orphan(&mut self) -> Option<Result<String, JournalError>> {
        let (frame, record) = self.unjournaled.take()?;
        Some((self.run.journal)(&record).map(|()| {
            self.run.observer.step_finished(&frame, &record);
            let label = format!("{frame}[{}]", record.index);
            self.run.steps.push(record);
            label
        }))
    }

    /// Sends `message` to the child (`None`: it is gone).
    fn send(&mut self, message: &impl Serialize) -> Option<()> {
        write_line(self.live.to_child.as_mut()?, message).ok()
    }
}
