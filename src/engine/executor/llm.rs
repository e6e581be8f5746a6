//! Work handed to the agent and what it gives back: the pending llm step's outputs (or its
//! failure) and NL scripts and fallbacks finished by hand.

use serde_json::{Map, Value as Json};

use super::outputs::{answer_of, check_outputs};
use super::{Executor, Pending};
use crate::engine::error::{EngineError, Waiting};
use crate::engine::journal::{Event, HandedEvent, Outcome};
use crate::engine::observer::Observer;
use crate::engine::step::{AgentReport, AnsweredBy, StepInput, StepResult};

impl Executor {
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

    /// Journals that the top frame's next step, an llm step asking `prompt`, is handed to
    /// the agent, the first time it is: a reader of the journal can then say what the run
    /// waits on without evaluating the script.
    pub(super) fn hand_out(&mut self, prompt: &str) -> Result<(), EngineError> {
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
}
