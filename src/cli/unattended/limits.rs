//! The limits of an unattended run and its spend caps: where they come from (the flags, then
//! `[limits]` of `.mekara/config.toml`, then the caps the run's journal carries), when one is
//! reached (what a person answers a run paused at a cap is `crate::engine::caps`'s). Checked before each agent item, never during one: an item never starts once a
//! limit is reached.
//!
//! ```toml
//! [limits]
//! max_cost = 5.0           # US dollars, the whole run
//! max_tokens = 2000000     # tokens in and out, the whole run
//! max_step_tokens = 400000 # tokens in and out, one agent item
//! max_agent_steps = 40
//! max_duration = "2h"
//! on_cap = "pause"         # or "stop"
//! ```

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::agents::headless::Spent;
use crate::display::count;
use crate::engine::journal::{CapAction, Caps, Event};

/// `--on-cap`: what a run does when a spend cap (`--max-cost`, `--max-tokens`,
/// `--max-step-tokens`) is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum, Deserialize)]
#[serde(rename_all = "snake_case")]
// The values have no `///` help of their own (the flag's says what each does): a description
// per value would turn `mekara run --help` into clap's long form.
pub(crate) enum OnCap {
    // The run waits for a person, resumable, who raises the cap or stops the run.
    #[default]
    Pause,
    // The run stops there, resumable with higher limits (for CI).
    Stop,
}

/// `[limits]` of `.mekara/config.toml`: what a run has when its flags do not say.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    max_cost: Option<f64>,
    max_tokens: Option<u64>,
    max_step_tokens: Option<u64>,
    max_agent_steps: Option<usize>,
    max_duration: Option<String>,
    on_cap: Option<OnCap>,
}

/// The limits given on the command line.
#[derive(Debug, Default, Clone)]
pub(super) struct Given {
    pub caps: Caps,
    pub max_agent_steps: Option<usize>,
    pub max_duration: Option<Duration>,
    pub on_cap: Option<OnCap>,
}

/// The limits an unattended run goes by.
#[derive(Debug, Clone, Default)]
pub(crate) struct Limits {
    pub caps: Caps,
    pub max_agent_steps: Option<usize>,
    pub max_duration: Option<Duration>,
    pub on_cap: OnCap,
}

/// A limit the next agent item would cross.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Reached {
    /// Which, and what was spent: `the run's agents spent $0.5000 (`--max-cost 0.5`)`.
    pub why: String,
    /// Whether it is a spend cap, which pauses the run (`--on-cap pause`).
    pub cap: bool,
}

impl Limits {
    /// The limits of a run: each flag given, else `[limits]` of the project's settings
    /// (at `root`), else, for a cap, the one the run's journal `events` last carried; a cap a
    /// person raised since (`mekara answer`) is never lowered by them.
    pub(super) fn of(
        given: &Given,
        root: Option<&Path>,
        events: &[Event],
    ) -> Result<Limits, String> {
        let section: Section = crate::config::section(root, "limits")?.unwrap_or_default();
        let bad = |reason: String| format!("`[limits]` of `.mekara/config.toml`: {reason}");
        if let Some(cost) = section.max_cost
            && !(cost.is_finite() && cost >= 0.0)
        {
            return Err(bad(format!(
                "`max_cost` must be a number of US dollars, 0 or more, not `{cost}`"
            )));
        }
        let duration = match &section.max_duration {
            None => None,
            Some(text) => Some(humantime::parse_duration(text).map_err(|e| {
                bad(format!(
                    "`max_duration = \"{text}\"`: {e}; write a duration such as `90s`, `20m` or `1h`"
                ))
            })?),
        };
        let (journaled, raised) = journaled_caps(events);
        Ok(Limits {
            caps: Caps {
                max_cost: pick(
                    given.caps.max_cost,
                    section.max_cost,
                    journaled.max_cost,
                    raised.max_cost,
                ),
                max_tokens: pick(
                    given.caps.max_tokens,
                    section.max_tokens,
                    journaled.max_tokens,
                    raised.max_tokens,
                ),
                max_step_tokens: pick(
                    given.caps.max_step_tokens,
                    section.max_step_tokens,
                    journaled.max_step_tokens,
                    raised.max_step_tokens,
                ),
            },
            max_agent_steps: given.max_agent_steps.or(section.max_agent_steps),
            max_duration: given.max_duration.or(duration),
            on_cap: given.on_cap.or(section.on_cap).unwrap_or_default(),
        })
    }

    /// The limit the next agent item would cross, named with its flag.
    pub(crate) fn reached(&self, spent: &Spent, elapsed: Duration) -> Option<Reached> {
        let cap = |why: String| Some(Reached { why, cap: true });
        if let Some(max) = self.max_agent_steps
            && spent.answers >= max
        {
            return Some(Reached {
                why: format!(
                    "the run has had {} (`--max-agent-steps {max}`)",
                    count(spent.answers, "agent answer")
                ),
                cap: false,
            });
        }
        if let Some(max) = self.caps.max_cost
            && spent.cost_usd >= max
        {
            return cap(format!(
                "the run's agents spent {} (`--max-cost {max}`)",
                crate::display::usd(spent.cost_usd, spent.cost_estimated)
            ));
        }
        if let Some(max) = self.caps.max_tokens
            && spent.tokens >= max
        {
            return cap(format!(
                "the run's agents used {} (`--max-tokens {max}`)",
                count(usize::try_from(spent.tokens).unwrap_or(usize::MAX), "token")
            ));
        }
        if let Some(max) = self.caps.max_step_tokens
            && spent.answers > 0
            && spent.last_step_tokens >= max
        {
            return cap(format!(
                "the last agent step used {} (`--max-step-tokens {max}`)",
                count(
                    usize::try_from(spent.last_step_tokens).unwrap_or(usize::MAX),
                    "token"
                )
            ));
        }
        if let Some(max) = self.max_duration
            && elapsed >= max
        {
            return Some(Reached {
                why: format!(
                    "this run took {} (`--max-duration {}`)",
                    humantime::format_duration(Duration::from_secs(elapsed.as_secs())),
                    humantime::format_duration(max)
                ),
                cap: false,
            });
        }
        None
    }
}

/// A cap: the flag, else the config's, else the one the journal carried; never below the
/// one a person raised (`up`).
fn pick<T: PartialOrd + Copy>(
    flag: Option<T>,
    own: Option<T>,
    was: Option<T>,
    up: Option<T>,
) -> Option<T> {
    match (flag.or(own).or(was), up) {
        (Some(cap), Some(up)) if up > cap => Some(up),
        (cap, up) => cap.or(up),
    }
}

/// The caps the journal's `cap` events carried last (paused or raised), and those a person
/// raised, each the latest.
fn journaled_caps(events: &[Event]) -> (Caps, Caps) {
    let mut carried = Caps::default();
    let mut raised = Caps::default();
    for event in events {
        let Event::Cap(cap) = event else { continue };
        let over = |into: &mut Caps| {
            into.max_cost = cap.caps.max_cost.or(into.max_cost);
            into.max_tokens = cap.caps.max_tokens.or(into.max_tokens);
            into.max_step_tokens = cap.caps.max_step_tokens.or(into.max_step_tokens);
        };
        over(&mut carried);
        if cap.action == CapAction::Raised {
            over(&mut raised);
        }
    }
    (carried, raised)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_raised_cap_outlives_the_flags_of_a_resume_and_a_journaled_one_the_lack_of_them() {
        let event = |action, caps| {
            Event::Cap(crate::engine::journal::CapEvent {
                action,
                step: None,
                why: None,
                caps,
                by: None,
                ignorable: true,
                at: 0,
            })
        };
        let events = vec![
            event(
                CapAction::Paused,
                Caps {
                    max_cost: Some(0.5),
                    max_tokens: Some(100),
                    max_step_tokens: None,
                },
            ),
            event(
                CapAction::Raised,
                Caps {
                    max_cost: Some(2.0),
                    ..Caps::default()
                },
            ),
        ];
        let given = Given {
            caps: Caps {
                max_cost: Some(0.5),
                ..Caps::default()
            },
            ..Given::default()
        };
        let limits = Limits::of(&given, None, &events).expect("limits");
        assert_eq!(limits.caps.max_cost, Some(2.0));
        assert_eq!(limits.caps.max_tokens, Some(100));
        assert_eq!(limits.on_cap, OnCap::Pause);
    }
}
