//! A spend cap as a gate for a person: an unattended run that reached one journals a pause
//! (a `cap` event) and waits, as at an `ask`; a person answers it with `mekara answer` or in
//! the viewer, raising caps or stopping the run. The answer is journaled under the run's
//! lock; nothing of the script runs here (the next `mekara run --resume` goes on).

use super::journal::{CapAction, CapEvent, Caps, waiting_at_cap};
use super::step::AnsweredBy;
use super::store::RunStore;
use super::{EngineError, Executor, Settings};
use crate::script::Resolver;

/// What a person answers a run that paused at a cap.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CapAnswer {
    /// Raise these caps (the others stay).
    Raise(Caps),
    /// Stop the run there.
    Stop,
}

impl CapAnswer {
    /// What was done, said to the person who answered run `id` (`resume`: the command that
    /// goes on with it).
    pub(crate) fn said(&self, id: &str, resume: &str) -> String {
        match self {
            CapAnswer::Stop => format!("stopped run {id} at its spend cap: it will not be resumed"),
            CapAnswer::Raise(caps) => format!(
                "raised the caps of run {id} to {}; go on with `{resume}`",
                caps.shown()
            ),
        }
    }
}

/// How to answer a run paused at a cap, for the messages that say so.
pub(crate) const HOW_TO_ANSWER: &str = "`stop`, or the caps raised as `max-cost=USD`, `max-tokens=N`, `max-step-tokens=N` (several separated by spaces)";

/// Reads a person's answer to a run paused at `paused`: `stop`, or one or more
/// `max-cost=USD`, `max-tokens=N`, `max-step-tokens=N`, each above the cap in force (a
/// raise that would pause the run again at once is refused).
pub(crate) fn parse_answer(text: &str, paused: &Caps) -> Result<CapAnswer, String> {
    let text = text.trim();
    if text.eq_ignore_ascii_case("stop") {
        return Ok(CapAnswer::Stop);
    }
    if text.is_empty() {
        return Err(format!("the run waits at a cap: answer {HOW_TO_ANSWER}"));
    }
    let mut caps = Caps::default();
    for word in text.split_whitespace() {
        let shown = crate::display::clipped(word, 80);
        let Some((name, value)) = word.split_once('=') else {
            return Err(format!("`{shown}` is not a cap: answer {HOW_TO_ANSWER}"));
        };
        let number = |what: &str| format!("`{shown}`: `{name}` takes {what}, as in `{name}=2`");
        match name.trim_start_matches("--") {
            "max-cost" | "max_cost" => {
                let cost: f64 = value
                    .parse()
                    .ok()
                    .filter(|c: &f64| c.is_finite() && *c >= 0.0)
                    .ok_or_else(|| number("a number of US dollars, 0 or more"))?;
                caps.max_cost = Some(cost);
            }
            "max-tokens" | "max_tokens" => {
                caps.max_tokens = Some(
                    value
                        .parse()
                        .map_err(|_| number("a whole number of tokens"))?,
                );
            }
            "max-step-tokens" | "max_step_tokens" => {
                caps.max_step_tokens = Some(
                    value
                        .parse()
                        .map_err(|_| number("a whole number of tokens"))?,
                );
            }
            _ => {
                return Err(format!(
                    "`{shown}`: there is no cap `{name}`; answer {HOW_TO_ANSWER}"
                ));
            }
        }
    }
    let not_above = |flag: &str, new: String, old: String| {
        format!(
            "`{flag}={new}` does not raise the cap, which is {old} now: give a higher one, or `stop`"
        )
    };
    if let (Some(new), Some(old)) = (caps.max_cost, paused.max_cost)
        && new <= old
    {
        return Err(not_above("max-cost", new.to_string(), old.to_string()));
    }
    if let (Some(new), Some(old)) = (caps.max_tokens, paused.max_tokens)
        && new <= old
    {
        return Err(not_above("max-tokens", new.to_string(), old.to_string()));
    }
    if let (Some(new), Some(old)) = (caps.max_step_tokens, paused.max_step_tokens)
        && new <= old
    {
        return Err(not_above(
            "max-step-tokens",
            new.to_string(),
            old.to_string(),
        ));
    }
    Ok(CapAnswer::Raise(caps))
}

/// The event that journals `answer` to a run paused at a cap, given `by` whom.
pub(crate) fn answer_event(answer: &CapAnswer, by: AnsweredBy) -> CapEvent {
    let (action, caps) = match answer {
        CapAnswer::Raise(caps) => (CapAction::Raised, *caps),
        CapAnswer::Stop => (CapAction::Stopped, Caps::default()),
    };
    CapEvent {
        action,
        step: None,
        why: None,
        caps,
        by: Some(by),
        ignorable: true,
        at: crate::engine::journal::now_ms(),
    }
}

/// Answers run `id`, paused at a cap, with `value` given `by` whom: `None` when the run does
/// not wait at a cap (the caller tries a question); else what was answered, or why the
/// answer is not one (the run is left as it was).
pub(crate) fn answer_cap(
    resolver: Resolver,
    store: RunStore,
    id: &str,
    value: &str,
    by: AnsweredBy,
) -> Result<Option<Result<CapAnswer, String>>, EngineError> {
    let contents = store.read(id)?;
    let Some(paused) = waiting_at_cap(&contents.events) else {
        return Ok(None);
    };
    let answer = match parse_answer(value, &paused.caps) {
        Ok(answer) => answer,
        Err(error) => return Ok(Some(Err(error))),
    };
    // Taken as a resume takes it, for its lock: a run that another process holds is refused.
    let runner = Box::new(super::shell::ShellRunner::new());
    let settings = Settings::default().evaluating_in_children();
    let (mut executor, _, _) = Executor::resume(resolver, store, runner, settings, id, None)?;
    executor.note_cap(answer_event(&answer, by))?;
    Ok(Some(Ok(answer)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_answer_is_stop_or_raises_above_the_caps_in_force() {
        let paused = Caps {
            max_cost: Some(0.5),
            max_tokens: Some(1000),
            max_step_tokens: None,
        };
        assert_eq!(parse_answer(" STOP ", &paused), Ok(CapAnswer::Stop));
        assert_eq!(
            parse_answer("max-cost=2 max-step-tokens=300", &paused),
            Ok(CapAnswer::Raise(Caps {
                max_cost: Some(2.0),
                max_tokens: None,
                max_step_tokens: Some(300),
            }))
        );
        for (text, said) in [
            ("", "the run waits at a cap: answer `stop`"),
            ("go on", "`go` is not a cap"),
            (
                "max-cost=lots",
                "`max-cost=lots`: `max-cost` takes a number of US dollars",
            ),
            ("max-cost=-1", "0 or more"),
            ("max-cost=inf", "0 or more"),
            ("max-tokens=1e9", "a whole number of tokens"),
            ("max-tokens=-5", "a whole number of tokens"),
            ("max-wishes=3", "there is no cap `max-wishes`"),
            (
                "max-cost=0.5",
                "`max-cost=0.5` does not raise the cap, which is 0.5 now",
            ),
            (
                "max-tokens=999",
                "does not raise the cap, which is 1000 now",
            ),
            (&"x".repeat(10_000), "is not a cap"),
        ] {
            let error = parse_answer(text, &paused).expect_err(text);
            assert!(error.contains(said), "{text}: {error}");
            assert!(error.len() < 400, "{error}");
        }
    }
}
