//! The loop of `mekara run`: reports each pending step, asks the person for what the engine
//! waits for, and goes on until the run ends or is left.

use super::answers::{Answers, Asked};
use super::clock::Clock;
use std::io::IsTerminal;

use super::prompts::{
    DONE, ask_done, ask_line, ask_outputs, ask_person, deadline_of, left_at_prompt,
    stopped_at_failure,
};
use super::terminal::Terminal;
use crate::cli::output::outln;
use crate::display::count;
use crate::engine::journal::Outcome;
use crate::engine::step::StepRecord;
use crate::engine::{EngineError, Executor, Pending};
use crate::exit::Exit;

/// Plays the run from `first` on: reports each pending step, asks the person for what the
/// engine waits for, and goes on until the run ends or is left.
pub(super) fn play(
    executor: &mut Executor,
    first: Result<Pending, EngineError>,
    terminal: &Terminal,
    mut input: Answers,
    clock: &Clock,
) -> anyhow::Result<Exit> {
    let mut pending = first;
    loop {
        // Whatever the engine printed last (a step's closing line, a frame ending) goes out
        // before mekara reports, asks or leaves.
        terminal.flush();
        let next = match pending {
            Err(EngineError::Cancelled { script, index }) if terminal.output_closed.get() => {
                let id = executor.run_id().unwrap_or_default();
                eprintln!(
                    "mekara: the output was closed, so step {script}[{index}] was stopped; resume with `mekara run --resume {id}`"
                );
                return Ok(Exit::OutputClosed);
            }
            Err(EngineError::Cancelled { script, index }) => {
                let id = executor.run_id().unwrap_or_default().to_string();
                outln!(
                    "\ninterrupted: step {script}[{index}] was stopped; resume with `mekara run --resume {id}`"
                )?;
                return Ok(Exit::Interrupted);
            }
            // Cut short (its evaluator child was killed): how to go on, as after Ctrl-C.
            Err(e @ EngineError::Evaluation { .. }) => {
                let id = executor.run_id().unwrap_or_default();
                eprintln!("error: {e}; resume with `mekara run --resume {id}`");
                return Ok(Exit::Interrupted);
            }
            Err(e) => return Err(e.into()),
            Ok(Pending::Finished {
                run,
                stop: Some(stop),
                ..
            }) => {
                outln!(
                    "\nstopped by the script `{}`: {}",
                    stop.script,
                    stop.message.trim_end()
                )?;
                if stop.retry {
                    outln!(
                        "it stopped on a step that failed: once the cause is fixed, run that step again and go on with `mekara run --resume {run} --retry`"
                    )?;
                }
                outln!(
                    "\n── run {run} stopped by the script: {} ──",
                    clock.summary(&run)
                )?;
                return Ok(Exit::Failure);
            }
            Ok(Pending::Finished {
                run,
                outcome,
                fell_back,
                stop: None,
            }) => {
                let how = match (outcome, fell_back) {
                    (_, true) => "failed and was finished by hand",
                    (Outcome::Completed, false) => "completed",
                    _ => "finished",
                };
                outln!("\n── run {run} {how}: {} ──", clock.summary(&run))?;
                return Ok(if fell_back {
                    Exit::Failure
                } else {
                    Exit::Success
                });
            }
            Ok(Pending::Llm {
                path,
                prompt,
                expects,
            }) => {
                outln!("\n── llm step {path} ──\n{}", prompt.trim_end())?;
                match ask_outputs(&mut input, expects.as_ref())? {
                    Asked::Answered(outputs) => executor.continue_llm(outputs, terminal),
                    unanswered => return left_at_prompt(executor, &unanswered),
                }
            }
            // The independent llm steps of a `parallel` group: one person asks them one
            // after another, each journaled as it is answered.
            Ok(Pending::Tasks { path, tasks, .. }) => {
                for task in &tasks {
                    let label = crate::agents::reply::task_label(&path, task.member);
                    outln!("\n── llm step {label} ──\n{}", task.prompt.trim_end())?;
                    match ask_outputs(&mut input, task.expects.as_ref())? {
                        Asked::Answered(outputs) => {
                            executor.answer_task(task.member, outputs, None, terminal)?;
                        }
                        unanswered => return left_at_prompt(executor, &unanswered),
                    }
                }
                executor.advance(terminal)
            }
            Ok(Pending::Ask {
                path,
                question,
                choices,
                timeout,
                asked_at,
            }) => {
                let deadline = timeout.map(|t| deadline_of(asked_at, t));
                match ask_person(
                    executor,
                    &mut input,
                    &path,
                    &question,
                    choices.as_deref(),
                    deadline,
                    terminal,
                )? {
                    Ok(next) => next,
                    Err(left) => return Ok(left),
                }
            }
            Ok(Pending::Nl { path, instructions }) => {
                outln!(
                    "\n── NL script {path}: do all of this by hand ──\n{}",
                    instructions.trim_end()
                )?;
                match ask_done(
                    &mut input,
                    "Press Enter when you have done all of the above.",
                )? {
                    Asked::Answered(()) => executor.finish_nl(terminal),
                    unanswered => return left_at_prompt(executor, &unanswered),
                }
            }
            Ok(Pending::Fallback {
                path,
                error,
                instructions,
                failed_call,
            }) => {
                let done = executor
                    .frames()
                    .last()
                    .map_or(0, |frame| steps_before_failure(&frame.steps));
                // Not "shown above": a resumed run shows only the steps of this invocation.
                let them = if done == 1 { "it" } else { "them" };
                let listed = executor
                    .run_id()
                    .map(|id| format!("; `mekara runs show {id}` lists {them}"))
                    .unwrap_or_default();
                let ran = if done == 0 {
                    "no step of it was done before the failure".to_string()
                } else {
                    format!(
                        "{} of it {} done before the failure{listed}",
                        count(done, "step"),
                        if done == 1 { "was" } else { "were" }
                    )
                };
                outln!(
                    "\n── {path} failed; finish it by hand ──\nWhat failed:\n{}\n\nThe script's instructions ({ran}):\n{}",
                    error.trim_end(),
                    instructions.trim_end()
                )?;
                if let Some(call) = failed_call {
                    let whose = if call.chain.len() > 2 {
                        format!(
                            "{}, whose own step failed, at the end of a chain of calls: {}; the instructions of {}",
                            call.name,
                            crate::display::call_chain(&call.chain),
                            call.name
                        )
                    } else {
                        format!("{}, which it called; its own instructions", call.name)
                    };
                    outln!(
                        "\nThe failure was in {whose} (for what is left of it: the step that failed and those after it):\n{}",
                        call.instructions.trim_end()
                    )?;
                    for (name, callee, instructions) in call.callers_between() {
                        outln!(
                            "\nThen the instructions of {name}, which called {callee}, for what is left of it after that call:\n{}",
                            instructions.trim_end()
                        )?;
                    }
                    if !call.between.is_empty() {
                        outln!(
                            "\nFinish them from the inside out: what is left of {}.",
                            call.inside_out(&path).join(", then of ")
                        )?;
                    }
                }
                if std::io::stdin().is_terminal() {
                    match ask_done(
                        &mut input,
                        "Press Enter when you have finished the script by hand.",
                    )? {
                        Asked::Answered(()) => executor.finish_nl(terminal),
                        unanswered => return left_at_prompt(executor, &unanswered),
                    }
                } else {
                    // Piped input was written before the failure was known: only a line
                    // that says so finishes the script by hand.
                    let prompt = format!(
                        "Type `{DONE}` when you have finished the script by hand (any other line stops the run here, saved):"
                    );
                    match ask_line(&mut input, &prompt)? {
                        Asked::Answered(line) if line.trim().eq_ignore_ascii_case(DONE) => {
                            executor.finish_nl(terminal)
                        }
                        Asked::Interrupted => {
                            return left_at_prompt(executor, &Asked::<()>::Interrupted);
                        }
                        read => return stopped_at_failure(executor, &read),
                    }
                }
            }
        };
        pending = next;
    }
}

/// The steps of a frame that fell back which did their work: all of them, but the step
/// whose failure stopped the frame (when a step stopped it, not the script's own code).
fn steps_before_failure(steps: &[StepRecord]) -> usize {
    let stopped_by_last = steps
        .last()
        .is_some_and(|step| !step.result.success && !step.allow_failure);
    steps.len() - usize::from(stopped_by_last)
}
