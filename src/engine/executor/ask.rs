//! Questions for the person (`ask`): asked once and journaled, answered (by the agent, `mekara
//! answer` or the viewer) or timed out.

use std::time::Duration;

use super::{Answer, Executor, Pending};
use crate::engine::error::{EngineError, Waiting};
use crate::engine::journal::{AskEvent, Event, now_ms};
use crate::engine::observer::Observer;
use crate::engine::settings::Settings;
use crate::engine::step::{AnsweredBy, StepInput, StepResult};
use crate::engine::store::RunStore;
use crate::script::Resolver;

impl Executor {
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
    pub(super) fn waiting_question(&self) -> Option<AskEvent> {
        let top = self.stack.last()?;
        top.asked
            .clone()
            .filter(|a| a.index == top.steps.len() && top.failure.is_none())
    }

    /// The question of the top frame's next step, journaled when it is asked for the first
    /// time (the time its timeout counts from).
    pub(super) fn asked(
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

    /// How long past its timeout the question is, when it is.
    pub(super) fn timed_out(&self, asked: &AskEvent) -> Option<Duration> {
        let deadline = asked.at.saturating_add(asked.timeout_ms?);
        let now = now_ms();
        (now >= deadline).then(|| Duration::from_millis(now - deadline))
    }

    /// Fails the question the run waits on: no answer came in time.
    pub(super) fn record_timeout(
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
}

/// The answer `given` stands for among `choices`: a choice as written, or its number (from
/// 1) as the terminal lists them; any answer when there are no choices.
pub(super) fn choose(given: &str, choices: Option<&[String]>) -> Result<String, EngineError> {
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

#[cfg(test)]
mod tests {
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
