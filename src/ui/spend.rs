//! The run page's spend fragment: what the run's agents spent against the caps it ran
//! under, the estimate from its script's past runs, and, for a run paused at a cap, the
//! form that raises the cap or stops the run (posted to `/runs/ID/answer`, as an `ask`'s
//! answer is). Built with `maud`, which escapes every value.

use maud::{Markup, html};
use serde::Serialize;

use crate::engine::journal::{CapEvent, Caps, Event};
use crate::engine::store::RunStore;

/// What the fragment shows, also given by `/api/runs/ID` as `spend`.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct SpendView {
    /// The caps the run last ran under, as flags (`--max-cost 0.5`), when it had any.
    pub caps: Option<String>,
    /// The pause at a cap the run waits at: `⏸ paused at a cap before …: …`.
    pub paused: Option<String>,
    /// The estimate from the script's past completed runs (this one left out).
    pub estimate: Option<String>,
    /// How to answer a pause.
    pub how: &'static str,
}

impl SpendView {
    /// The fragment's facts for run `id` of `script` (as shown), from its `events`. The
    /// estimate reads the script's newest completed runs (`engine::estimate`), so it is
    /// looked for only for a run that had agents or caps.
    pub(crate) fn of(
        store: &RunStore,
        id: &str,
        script: &str,
        events: &[Event],
        answers: usize,
    ) -> SpendView {
        let caps: Option<Caps> = events.iter().rev().find_map(|e| match e {
            Event::Cap(cap) => Some(cap.caps),
            _ => None,
        });
        let paused = crate::engine::journal::waiting_at_cap(events).map(CapEvent::said);
        let estimate = (answers > 0 || caps.is_some())
            .then(|| crate::engine::estimate::Estimate::of(store, script, Some(id)))
            .flatten()
            .map(|e| e.shown());
        SpendView {
            caps: caps.map(|c| c.shown()),
            paused,
            estimate,
            how: crate::engine::caps::HOW_TO_ANSWER,
        }
    }
}

/// The fragment: nothing for a run with no caps, no pause and no estimate.
pub(crate) fn section(view: &SpendView, id: &str, token: Option<&str>) -> Markup {
    if view.caps.is_none() && view.paused.is_none() && view.estimate.is_none() {
        return html! {};
    }
    html! {
        section.spend #spend {
            h2 { "Spend" }
            @if let Some(caps) = &view.caps {
                p #caps { "caps: " (caps) }
            }
            @if let Some(estimate) = &view.estimate {
                p #estimate { (estimate) }
            }
            @if let Some(paused) = &view.paused {
                div.ask #cap {
                    p.where { (paused) }
                    @match token {
                        Some(token) => {
                            form.answer method="post" action={ "/runs/" (id) "/answer" } {
                                input type="hidden" name="token" value=(token);
                                input name="value" required size="30" aria-label="raised caps" placeholder="max-cost=2";
                                " "
                                button { "raise the cap" }
                            }
                            form.answer method="post" action={ "/runs/" (id) "/answer" } {
                                input type="hidden" name="token" value=(token);
                                button.danger name="value" value="stop" { "stop the run" }
                            }
                            p.hint { "answer " (view.how) }
                        }
                        None => p.hint { "open the address `mekara ui` printed (with its token) to answer here" },
                    }
                }
            }
        }
    }
}
