//! Frames pushed and popped: a `call_script` step, a script started, a frame that ends
//! (completed, failed, stopped with `fail()`, or fallen back) and the run's end.

use std::path::{Path, PathBuf};

use super::{Ended, Executor, Frame, Pending, Stop};
use crate::engine::error::{EngineError, Waiting};
use crate::engine::journal::{Event, FailEvent, Origin, Outcome, PopEvent, PushEvent, now_ms};
use crate::engine::observer::{FrameEvent, Observer};
use crate::engine::runs::failed_calls;
use crate::engine::step::{AgentReport, StepInput, StepResult};
use crate::script::Script;

impl Executor {
    /// A `call_script` step: push the script, or record why it cannot run.
    pub(super) fn call(
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
    pub(super) fn push(
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
    pub(super) fn pop(
        &mut self,
        outcome: Outcome,
        error: Option<String>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        self.pop_with(outcome, error, None, observer)
    }

    pub(super) fn pop_with(
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
            self.ended = Some(Ended {
                run: self.run_id().unwrap_or_default().to_string(),
                outcome,
                fell_back: self.root_fell_back,
                stop: self
                    .stopping
                    .clone()
                    .filter(|_| outcome == Outcome::Stopped),
            });
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
    pub(super) fn stop(
        &mut self,
        message: String,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
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

    pub(super) fn fail_top(&mut self, error: String) -> Result<(), EngineError> {
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

    pub(super) fn finished(&mut self) -> Result<Pending, EngineError> {
        if let Some(journal) = self.journal.take() {
            journal.close()?;
        }
        match &self.ended {
            Some(Ended {
                run,
                outcome,
                fell_back,
                stop,
            }) => Ok(Pending::Finished {
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
}

/// Whether a frame that ended so did what it was for (a called frame's call succeeded).
pub(super) fn succeeded(outcome: Outcome) -> bool {
    !matches!(outcome, Outcome::Failed | Outcome::Stopped)
}
