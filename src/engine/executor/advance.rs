//! Step dispatch: [`Executor::advance`] evaluates the top frame over its journal and acts on
//! what the evaluation asks for, until something needs the agent; with the NL text it shows
//! (prompt tags expanded) and the failed call a fallback names.

use std::time::Duration;

use super::{Executor, FailedCall, Pending};
use crate::engine::compiled::{Evaluation, FrameRun, Loaded, Suspension};
use crate::engine::error::EngineError;
use crate::engine::journal::{Event, Origin, Outcome, StepEvent, now_ms};
use crate::engine::observer::{Observer, Recorded};
use crate::engine::runner::{Ran, ToolCall};
use crate::engine::runs::last_own_step;
use crate::engine::step::{StepInput, StepRecord};
use crate::engine::tool::NL_TAG_CONTEXT;
use crate::script::Script;
use crate::script::nl::{ARGUMENTS, NlText};

impl Executor {
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
}
