//! Retry and rewind: which part of a run's history a `supersede` event takes out
//! (DESIGN §10).
//!
//! A run's live events form a tree of frames ([`Trace`]). A retry supersedes from the step
//! whose failure made the run fall back (following a failed `call_script` down to the step
//! that failed in the called script); a rewind to an edited script from the first recorded
//! step whose inputs the script no longer asks for (found by evaluating each frame over its
//! recorded steps with a runner that runs nothing); `--from` from the step the person names.
//! This module only plans: the executor appends the event and rebuilds the stack.

use std::path::Path;

use super::compiled::{Evaluation, FrameRun};
use super::error::{AfterStop, EngineError, StopAdvice};
use super::journal::{Event, Origin, Outcome, PushEvent, Reason, SupersedeEvent, now_ms};
use super::runner::{CancelToken, Ran, ShellStep, StepRunner, ToolCall};
use super::settings::{Settings, load_program};
use super::step::{StepInput, StepRecord};
use crate::script::Resolver;

/// What a person or agent asks of a run that stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Rewind {
    /// Run the failed step again, or, when a script changed since the run recorded its
    /// steps, go on live from the first step whose inputs changed.
    Retry,
    /// Run again from this step (a label as `mekara runs show` shows it: `deploy[4]`, or
    /// with its callers, `main[2] > deploy[4]`).
    From(String),
}

/// What a rewind does, decided before anything runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RewindPlan {
    /// Why.
    pub reason: Reason,
    /// The first step that runs again, e.g. `main[2] > deploy[4]`.
    pub step: String,
    /// What changed or failed there, when the run knows.
    pub detail: Option<String>,
    /// The recorded steps kept (answered from the journal), as runs of labels.
    pub kept: Vec<String>,
    /// How many recorded steps are kept.
    pub kept_steps: usize,
    /// The recorded steps superseded (they run again as far as the script still asks for
    /// them), as runs of labels.
    pub again: Vec<String>,
    /// How many recorded steps are superseded.
    pub again_steps: usize,
    /// The event that says so in the journal.
    pub event: SupersedeEvent,
}

/// A frame as the live events describe it, with the journal lines of its events.
struct Trace {
    /// `main[2] > ` for a frame called by step 2 of `main`; empty for the root.
    callers: String,
    push_line: usize,
    push: PushEvent,
    /// Each step with its line.
    steps: Vec<(usize, StepRecord)>,
    /// How many steps the frame had when it fell back to its NL instructions.
    failed_after: Option<usize>,
    /// The line of that `fail` event.
    fail_line: usize,
    ended: Option<Outcome>,
    /// The line of its `pop` event, once it ended.
    end_line: usize,
    /// What the script gave `fail()`, when it stopped itself.
    stopped: Option<String>,
    /// The frames pushed while this one was on top, each with this frame's step count then.
    children: Vec<(usize, Trace)>,
}

impl RewindPlan {
    /// What a retry or rewind does, said before anything runs: the step it goes on from and
    /// why, the recorded steps kept and those superseded, and that those ran before.
    pub(crate) fn summary(&self) -> String {
        let detail = self
            .detail
            .as_deref()
            .map(|d| format!(" ({})", d.trim_end()))
            .unwrap_or_default();
        let step = &self.step;
        let mut text = match self.reason {
            Reason::Retry => format!("retry: step {step} failed{detail}; it runs again\n"),
            Reason::ScriptChanged => format!(
                "rewind: the script changed since this run recorded step {step}{detail}; the run goes on from there with the scripts as they are now\n"
            ),
            Reason::From => format!("rewind: from step {step}, as asked\n"),
        };
        let list = |spans: &[String]| {
            if spans.is_empty() {
                "none".to_string()
            } else {
                spans.join(", ")
            }
        };
        text.push_str(&format!(
            "kept, answered from the journal ({}): {}\n",
            crate::display::count(self.kept_steps, "step"),
            list(&self.kept)
        ));
        text.push_str(&format!(
            "superseded, run again as far as the script asks for them ({}): {}\n",
            crate::display::count(self.again_steps, "step"),
            list(&self.again)
        ));
        if self.again_steps > 0 {
            text.push_str(
                "! the superseded steps ran before: what they did (files written, commands sent) may be there already\n",
            );
        }
        text
    }
}

impl Trace {
    fn name(&self) -> String {
        crate::script::name::shown(&self.push.script)
    }

    /// Step `index` (its position in the frame) as `runs show` numbers it: the number its
    /// record has, which for the steps of a `parallel` group follows the members' order
    /// rather than the order the journal holds them in.
    fn label(&self, index: usize) -> String {
        format!("{}{}[{}]", self.callers, self.name(), self.number(index))
    }

    /// The number of step `index` (its position in the frame): its record's, or the
    /// position itself past the recorded steps.
    fn number(&self, index: usize) -> usize {
        self.steps
            .get(index)
            .map_or(index, |(_, record)| record.index)
    }

    /// The first line of step `index` of this frame: right after its step before (or its
    /// push). Everything from there to the frame's end belongs to that step or later ones
    /// (a called frame's events come before the call's own step).
    fn line_of(&self, index: usize) -> usize {
        match index.checked_sub(1) {
            None => self.push_line + 1,
            Some(before) => self.steps[before].0 + 1,
        }
    }

    /// Every frame of this tree, this one first, in the order they were pushed.
    fn walk<'t>(&'t self, out: &mut Vec<&'t Trace>) {
        out.push(self);
        for (_, child) in &self.children {
            child.walk(out);
        }
    }
}

/// The frames of the live events (`live` as [`super::runs::live`] gives it), roots first.
/// The events were replayed already, so their depths fit.
fn traces(events: &[Event], live: &[bool]) -> Vec<Trace> {
    fn close(stack: &mut [Trace], roots: &mut Vec<Trace>, trace: Trace) {
        match stack.last_mut() {
            Some(parent) => parent.children.push((parent.steps.len(), trace)),
            None => roots.push(trace),
        }
    }
    let mut roots = Vec::new();
    let mut stack: Vec<Trace> = Vec::new();
    for (index, event) in events.iter().enumerate().filter(|(i, _)| live[*i]) {
        let line = index + 1;
        match event {
            Event::Push(push) => {
                let mut callers = String::new();
                for caller in &stack {
                    callers.push_str(&format!("{}[{}] > ", caller.name(), caller.steps.len()));
                }
                stack.push(Trace {
                    callers,
                    push_line: line,
                    push: push.clone(),
                    steps: Vec::new(),
                    failed_after: None,
                    fail_line: 0,
                    ended: None,
                    end_line: 0,
                    stopped: None,
                    children: Vec::new(),
                });
            }
            Event::Step(step) => {
                if let Some(top) = stack.last_mut() {
                    top.steps.push((line, step.record.clone()));
                }
            }
            Event::Fail(_) => {
                if let Some(top) = stack.last_mut() {
                    top.failed_after = Some(top.steps.len());
                    top.fail_line = line;
                }
            }
            Event::Pop(pop) => {
                if let Some(mut trace) = stack.pop() {
                    trace.ended = Some(pop.outcome);
                    trace.end_line = line;
                    if pop.outcome == Outcome::Stopped {
                        trace.stopped = Some(pop.error.clone().unwrap_or_default());
                    }
                    close(&mut stack, &mut roots, trace);
                }
            }
            Event::Run(_)
            | Event::Supersede(_)
            | Event::Ask(_)
            | Event::Wait(_)
            | Event::Ignored(_)
            | Event::Killed(_)
            | Event::Handed(_)
            | Event::Agent(_)
            | Event::Cap(_) => {}
        }
    }
    while let Some(trace) = stack.pop() {
        close(&mut stack, &mut roots, trace);
    }
    roots
}

/// Where the history is superseded from, and why.
struct Cut<'t> {
    trace: &'t Trace,
    index: usize,
    detail: Option<String>,
    /// The script stopped itself here (`fail()`) with this message, right after a step that
    /// did not fail: it stopped on a decision, not on a failure a fix would change.
    stopped: Option<String>,
}

/// Decides what `how` does to the run `id` whose journal holds `events` (already replayed
/// without error, so they fit together).
pub(crate) fn plan(
    resolver: &Resolver,
    settings: &Settings,
    id: &str,
    events: &[Event],
    how: &Rewind,
) -> Result<RewindPlan, EngineError> {
    let live = super::runs::live(events).map_err(|(line, reason)| {
        EngineError::Journal(super::journal::JournalError::Corrupt {
            path: Path::new(id).to_path_buf(),
            line,
            reason,
        })
    })?;
    let roots = traces(events, &live);
    let mut frames = Vec::new();
    for root in &roots {
        root.walk(&mut frames);
    }
    let (cut, reason) = match how {
        Rewind::From(label) => (named(id, &frames, label)?, Reason::From),
        Rewind::Retry => {
            let mut changed = None;
            for root in &roots {
                changed = first_change(resolver, settings, root)?;
                if changed.is_some() {
                    break;
                }
            }
            let failed = roots.last().and_then(last_failure);
            match (changed, failed) {
                (Some(changed), Some(failed))
                    if failed.stopped.is_none()
                        && failed.trace.line_of(failed.index)
                            < changed.trace.line_of(changed.index) =>
                {
                    (failed, Reason::Retry)
                }
                (Some(changed), _) => (changed, Reason::ScriptChanged),
                (
                    None,
                    Some(Cut {
                        trace,
                        stopped: Some(message),
                        ..
                    }),
                ) => {
                    return Err(EngineError::StoppedByScript {
                        id: id.to_string(),
                        script: trace.name(),
                        message,
                    });
                }
                (None, Some(failed)) => (failed, Reason::Retry),
                (None, None) => {
                    return Err(EngineError::NothingToRetry { id: id.to_string() });
                }
            }
        }
    };
    let line = cut.trace.line_of(cut.index);
    let (mut kept, mut again) = (Vec::new(), Vec::new());
    for (step_line, trace, index) in in_order(&frames) {
        let side = if step_line < line {
            &mut kept
        } else {
            &mut again
        };
        side.push((trace, index));
    }
    Ok(RewindPlan {
        reason,
        step: cut.trace.label(cut.index),
        detail: cut.detail,
        kept: spans(&kept),
        kept_steps: kept.len(),
        again: spans(&again),
        again_steps: again.len(),
        event: SupersedeEvent {
            line,
            depth: cut.trace.push.depth,
            script: cut.trace.push.script.clone(),
            index: cut.trace.number(cut.index),
            reason,
            mekara: env!("CARGO_PKG_VERSION").to_string(),
            at: now_ms(),
        },
    })
}

/// What run `id`, whose live `events` end with its script stopping itself, can do next; `None`
/// when no script of it stopped itself.
pub(crate) fn after_stop(
    resolver: &Resolver,
    settings: &Settings,
    id: &str,
    events: &[Event],
) -> Option<StopAdvice> {
    let live = super::runs::live(events).ok()?;
    let roots = traces(events, &live);
    let mut frames = Vec::new();
    for root in &roots {
        root.walk(&mut frames);
    }
    let stopper = frames
        .iter()
        .filter(|t| t.stopped.is_some())
        .max_by_key(|t| t.end_line)?;
    let message = stopper.stopped.clone().unwrap_or_default();
    let next = match plan(resolver, settings, id, events, &Rewind::Retry) {
        Ok(plan) => AfterStop::Retry { step: plan.step },
        Err(_) => AfterStop::From {
            last: stopper
                .steps
                .len()
                .checked_sub(1)
                .map(|last| stopper.label(last)),
        },
    };
    Some(StopAdvice {
        script: stopper.name(),
        message,
        next,
    })
}

/// Steps as runs of labels: `main[0] to main[5]`, `main[6] > child[0]`.
fn spans(steps: &[(&Trace, usize)]) -> Vec<String> {
    let mut out: Vec<(String, String, usize, *const Trace)> = Vec::new();
    for &(trace, index) in steps {
        if let Some(last) = out.last_mut()
            && std::ptr::eq(last.3, trace)
            && last.2 + 1 == index
        {
            last.1 = trace.label(index);
            last.2 = index;
            continue;
        }
        out.push((trace.label(index), String::new(), index, trace));
    }
    out.into_iter()
        .map(|(first, last, _, _)| {
            if last.is_empty() {
                first
            } else {
                format!("{first} to {last}")
            }
        })
        .collect()
}

/// Every recorded step of the run, as runs of labels, for an error that lists them.
fn all_steps(frames: &[&Trace]) -> String {
    let steps: Vec<(&Trace, usize)> = in_order(frames)
        .into_iter()
        .map(|(_, t, i)| (t, i))
        .collect();
    spans(&steps).join(", ")
}

/// Every recorded step of `frames`, in the order they were journaled: its line, its frame
/// and its index there.
fn in_order<'t>(frames: &[&'t Trace]) -> Vec<(usize, &'t Trace, usize)> {
    let mut steps: Vec<(usize, &Trace, usize)> = frames
        .iter()
        .flat_map(|t| {
            t.steps
                .iter()
                .enumerate()
                .map(move |(i, (l, _))| (*l, *t, i))
        })
        .collect();
    steps.sort_by_key(|(l, _, _)| *l);
    steps
}

/// The recorded step `label` names: its whole path, or its frame's name and index alone
/// when only one frame of that name recorded such a step.
fn named<'t>(id: &str, frames: &[&'t Trace], label: &str) -> Result<Cut<'t>, EngineError> {
    let norm = |s: &str| -> String {
        let compact: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        crate::script::name::shown(&compact)
    };
    let wanted = norm(label);
    let mut found = Vec::new();
    for trace in frames {
        for index in 0..trace.steps.len() {
            let full = norm(&trace.label(index));
            let short = norm(&format!("{}[{}]", trace.name(), trace.number(index)));
            if full == wanted {
                return Ok(Cut {
                    trace,
                    index,
                    detail: None,
                    stopped: None,
                });
            }
            if short == wanted {
                found.push((*trace, index));
            }
        }
    }
    match found.as_slice() {
        [(trace, index)] => Ok(Cut {
            trace,
            index: *index,
            detail: None,
            stopped: None,
        }),
        [] => Err(EngineError::NoSuchStep {
            id: id.to_string(),
            step: label.to_string(),
            steps: all_steps(frames),
        }),
        many => Err(EngineError::AmbiguousStep {
            step: label.to_string(),
            paths: many.iter().map(|(t, i)| t.label(*i)).collect(),
        }),
    }
}

/// The step whose failure the run fell back or stopped on last: the failed step before the
/// fall-back (or before the script stopped itself), followed down through failed
/// `call_script` steps into the called script. A frame that failed without a failed step
/// (an error in the script itself) runs again from where it stopped; a script that stopped
/// itself without one stopped on a decision, which the cut says.
fn last_failure(root: &Trace) -> Option<Cut<'_>> {
    let mut frames = Vec::new();
    root.walk(&mut frames);
    let failed = frames
        .into_iter()
        .filter_map(|t| match (t.failed_after, &t.stopped) {
            (Some(after), _) => Some((t.fail_line, t, after)),
            // A stop that ended the run, or a frame started on top of another: a called
            // frame's stop is reached from its caller's failed call.
            (None, Some(_)) if t.push.origin == Origin::Start => {
                Some((t.end_line, t, t.steps.len()))
            }
            _ => None,
        })
        .max_by_key(|(line, _, _)| *line)?;
    Some(cause(failed.1, failed.2))
}

/// Why frame `trace` failed after its first `steps` steps: its last step, when that failed.
/// A script that stopped itself (`fail`, or an error) right after a step whose failure it
/// allowed read that failure and stopped on it (`t = auto("make test", allow_failure =
/// True)`, then `fail(...)`): that step is the cause, so a retry after the fix runs it
/// again. Otherwise it runs again from where it stopped.
fn cause(trace: &Trace, steps: usize) -> Cut<'_> {
    let last = steps
        .checked_sub(1)
        .and_then(|last| Some((last, &trace.steps.get(last)?.1)))
        .filter(|(_, record)| !record.result.success);
    let Some((index, record)) = last else {
        return Cut {
            trace,
            index: steps,
            detail: None,
            stopped: trace.stopped.clone(),
        };
    };
    let child = trace.children.iter().find(|(at, child)| {
        *at == index && matches!(child.ended, Some(Outcome::Failed | Outcome::Stopped))
    });
    match (&record.input, child) {
        (StepInput::Call { .. }, Some((_, child))) => cause(child, child.steps.len()),
        _ => Cut {
            trace,
            index,
            detail: record.result.error.clone(),
            stopped: None,
        },
    }
}

/// How a frame's script now compares with the frame's recorded steps.
enum Probe {
    /// It asks for the same steps.
    Same,
    /// It asks for something else at this step.
    Changed(usize, String),
    /// The frame cannot run as recorded any more (its script is gone, or became compiled or
    /// NL): the step that pushed it runs again.
    Gone(String),
}

/// The first recorded step, in the order they ran, that the scripts as they are now no
/// longer ask for. A root frame that cannot run as recorded is an error: nothing pushed it.
fn first_change<'t>(
    resolver: &Resolver,
    settings: &Settings,
    root: &'t Trace,
) -> Result<Option<Cut<'t>>, EngineError> {
    match change_in(resolver, settings, root)? {
        Change::Gone(detail) => Err(EngineError::Diverged {
            script: root.name(),
            index: 0,
            detail,
        }),
        Change::At(cut) => Ok(Some(cut)),
        Change::None => Ok(None),
    }
}

enum Change<'t> {
    None,
    At(Cut<'t>),
    Gone(String),
}

fn change_in<'t>(
    resolver: &Resolver,
    settings: &Settings,
    trace: &'t Trace,
) -> Result<Change<'t>, EngineError> {
    let changed = match probe(resolver, settings, trace)? {
        Probe::Same => None,
        Probe::Changed(index, detail) => Some((index, detail)),
        Probe::Gone(detail) => return Ok(Change::Gone(detail)),
    };
    let before = changed.as_ref().map_or(usize::MAX, |(index, _)| *index);
    for (at, child) in trace.children.iter().filter(|(at, _)| *at < before) {
        match change_in(resolver, settings, child)? {
            Change::None => {}
            Change::At(cut) => return Ok(Change::At(cut)),
            Change::Gone(detail) => {
                return Ok(Change::At(Cut {
                    trace,
                    index: *at,
                    detail: Some(detail),
                    stopped: None,
                }));
            }
        }
    }
    Ok(match changed {
        Some((index, detail)) => Change::At(Cut {
            trace,
            index,
            detail: Some(detail),
            stopped: None,
        }),
        None => Change::None,
    })
}

/// Evaluates the frame's script as it is now over the frame's recorded steps, running
/// nothing, and says where it first asks for something the journal did not record.
fn probe(resolver: &Resolver, settings: &Settings, trace: &Trace) -> Result<Probe, EngineError> {
    let script = match resolver.resolve(&trace.push.script) {
        Ok(script) => script,
        Err(e) => return Ok(Probe::Gone(e.to_string())),
    };
    if script.compiled.is_some() != trace.push.compiled {
        return Ok(Probe::Gone(if trace.push.compiled {
            "the run started it as a compiled script, but its compiled file is gone".into()
        } else {
            "the run started it as an NL script, but it now has a compiled file".into()
        }));
    }
    let Some(program) = load_program(resolver, &script, settings) else {
        return Ok(Probe::Same);
    };
    let program = match program {
        Ok(program) => program,
        Err(_) if trace.steps.is_empty() => return Ok(Probe::Same),
        Err(code) => return Ok(Probe::Changed(0, code.message)),
    };
    // A frame that fell back recorded the steps it ran, then those of its NL tags.
    let recorded = trace.failed_after.unwrap_or(trace.steps.len());
    let mut steps: Vec<StepRecord> = trace.steps[..recorded]
        .iter()
        .map(|(_, r)| r.clone())
        .collect();
    let label = format!("{}{}", trace.callers, trace.name());
    let mut printed = usize::MAX;
    let mut forget = |_: &StepRecord| Ok(());
    let cancel = CancelToken::default();
    let run = FrameRun::new(
        &label,
        &trace.push.working_dir,
        &mut steps,
        &mut printed,
        &mut forget,
        &RunsNothing,
        &cancel,
        &settings.limits,
    );
    let (evaluation, cursor) =
        program.evaluate_counted(run.request(&trace.push.request).source(program.authored()));
    let now = match evaluation {
        Err(EngineError::Diverged { index, detail, .. }) => {
            return Ok(Probe::Changed(index, detail));
        }
        Ok(Evaluation::Suspended(suspension)) => {
            // A frame that waits on a script it called: the call is not journaled until that
            // script ends, so its inputs are compared with the called frame's.
            let input = suspension.input();
            let open_call = trace
                .children
                .iter()
                .find(|(at, child)| {
                    *at == cursor && child.ended.is_none() && child.push.origin == Origin::Call
                })
                .map(|(_, child)| StepInput::Call {
                    script: child
                        .push
                        .called_as
                        .clone()
                        .unwrap_or_else(|| child.push.script.clone()),
                    request: child.push.request.clone(),
                    working_dir: child.push.working_dir.clone(),
                });
            if let Some(called) = open_call.filter(|called| *called != input) {
                return Ok(Probe::Changed(cursor, input.difference(&called)));
            }
            Now::GoesOn
        }
        Err(EngineError::Cancelled { .. }) | Ok(Evaluation::Tasks { .. }) => Now::GoesOn,
        Ok(Evaluation::Completed) => Now::Ends,
        Ok(Evaluation::Failed(message)) => Now::Fails(message),
        Ok(Evaluation::Stopped(message)) => Now::Stops(message),
        Err(e) => return Err(e),
    };
    if cursor < recorded {
        return Ok(Probe::Changed(
            cursor,
            format!(
                "the script now {} after {}, but the run recorded {recorded}",
                now.describe(),
                crate::display::count(cursor, "step")
            ),
        ));
    }
    let stopped = trace.stopped.is_some();
    let failed = stopped || trace.failed_after.is_some() || trace.ended == Some(Outcome::Failed);
    // A journal written before scripts could stop themselves recorded a `fail()` as a
    // failure: either fits either.
    let fits = if failed {
        matches!(now, Now::Fails(_) | Now::Stops(_)) && cursor == recorded
    } else if trace.ended.is_some() {
        matches!(now, Now::Ends) && cursor == recorded
    } else {
        true
    };
    if fits {
        return Ok(Probe::Same);
    }
    let was = if stopped {
        "stopped"
    } else if failed {
        "failed"
    } else {
        "ended"
    };
    Ok(Probe::Changed(
        recorded,
        format!(
            "the frame {was} after {}, but the script now {} there",
            crate::display::count(recorded, "step"),
            now.describe()
        ),
    ))
}

/// What a script does past its recorded steps.
enum Now {
    GoesOn,
    Ends,
    Fails(String),
    /// The script stops itself (`fail()`).
    Stops(String),
}

impl Now {
    fn describe(&self) -> String {
        match self {
            Now::GoesOn => "goes on".into(),
            Now::Ends => "ends".into(),
            Now::Fails(message) => format!("fails ({message})"),
            Now::Stops(message) => format!("stops itself ({message})"),
        }
    }
}

/// A runner for evaluations that must not have effects: every step is "cancelled", so the
/// evaluation stops where it would run something.
struct RunsNothing;

impl StepRunner for RunsNothing {
    fn run_shell(
        &self,
        _step: &ShellStep,
        _on_output: &mut dyn FnMut(&[u8]),
        _cancel: &CancelToken,
    ) -> Ran {
        Ran::Cancelled
    }

    fn call_tool(&self, _call: &ToolCall, _cancel: &CancelToken) -> Ran {
        Ran::Cancelled
    }
}
