//! What the executor journals beside the steps the scripts run: the steps it decides itself,
//! and notes (which agent drives the run, waits, llm steps handed out).

use std::time::Duration;

use super::Executor;
use crate::engine::error::EngineError;
use crate::engine::journal::{Event, StepEvent, now_ms};
use crate::engine::step::{ParallelMember, StepInput, StepRecord, StepResult};

impl Executor {
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

    /// Journals a step the engine decided itself (llm outputs).
    pub(super) fn record_in_top(
        &mut self,
        input: StepInput,
        result: StepResult,
    ) -> Result<(), EngineError> {
        self.record_step(input, None, result, false).map(|_| ())
    }

    /// Journals a step in the top frame and returns its record.
    pub(super) fn record_step(
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
    pub(super) fn record_step_tagged(
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

    /// Notes beside the journal that an llm step was handed out now, for the viewer: one
    /// write to the step group note, no sync (docs/design.md, "What a run does now").
    pub(super) fn note_llm(&self) {
        if let Some(journal) = &self.journal {
            journal.group_note().note_llm(now_ms());
        }
    }
}
