//! What a run of a script is likely to cost, from its past runs: the median and the 90th
//! percentile of the cost, the tokens and the time of its newest completed runs in the
//! store, with how many runs that rests on. Shown by `mekara run --dry-run`, at the start of
//! an unattended run, by `mekara runs show` and in the viewer's run page.
//!
//! Cost: one listing of every run of the store (its index, as `mekara runs --all` reads it,
//! which grows with the number of runs kept) and at most [`RUNS`] journals read whole.

use super::journal::Event;
use super::store::RunStore;

/// How many of the script's newest completed runs an estimate reads.
pub(crate) const RUNS: usize = 20;

/// The middle and the 90th percentile of one measure over past runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Spread {
    /// The median: the middle value, or the mean of the two middle ones.
    pub median: f64,
    /// The 90th percentile, by nearest rank: the value that 90% of the runs did not exceed.
    pub p90: f64,
}

impl Spread {
    /// The spread of `values`; `None` when there are none.
    fn of(mut values: Vec<f64>) -> Option<Spread> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            f64::midpoint(values[n / 2 - 1], values[n / 2])
        };
        // Nearest rank: the ⌈0.9·n⌉-th smallest.
        let rank = (n * 9).div_ceil(10).max(1);
        Some(Spread {
            median,
            p90: values[rank - 1],
        })
    }
}

/// What a run of a script is likely to take, from its past runs.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Estimate {
    /// The script, as shown.
    pub script: String,
    /// How many past runs it rests on.
    pub runs: usize,
    /// Their agents' cost in US dollars (`None` when no agent reported one).
    pub cost_usd: Option<Spread>,
    /// Whether some of those costs are mekara's estimates from its price table.
    pub cost_estimated: bool,
    /// Their agents' tokens, in and out (`None` when no agent reported any).
    pub tokens: Option<Spread>,
    /// Their time from start to end, in seconds (waits for a person included).
    pub seconds: Option<Spread>,
}

/// What one past run took.
#[derive(Debug, Default)]
struct Took {
    cost_usd: Option<f64>,
    cost_estimated: bool,
    tokens: Option<u64>,
    seconds: Option<f64>,
}

/// What the run of `events` took: its agents' cost and tokens, and its time from its first
/// event to the end of its root frame.
fn took(events: &[Event]) -> Took {
    let mut took = Took::default();
    let first = events.first().map(Event::at);
    for event in events {
        let report = event.agent_report();
        if let Some(report) = report {
            if let Some(cost) = report.cost_usd {
                *took.cost_usd.get_or_insert(0.0) += cost;
            }
            took.cost_estimated |= report.cost_estimated;
            if report.input_tokens.is_some() || report.output_tokens.is_some() {
                *took.tokens.get_or_insert(0) +=
                    report.input_tokens.unwrap_or(0) + report.output_tokens.unwrap_or(0);
            }
        }
        if let (Event::Pop(pop), Some(first)) = (event, first)
            && pop.depth == 0
        {
            #[allow(clippy::cast_precision_loss)] // milliseconds far below 2^52
            let seconds = pop.at.saturating_sub(first) as f64 / 1000.0;
            took.seconds = Some(seconds);
        }
    }
    took
}

impl Estimate {
    /// The estimate for script `script` (as shown, `test:random`) from the newest [`RUNS`]
    /// of its runs in `store` that completed; `except` (a run in progress) is left out.
    /// `None` when the store cannot be listed.
    pub(crate) fn of(store: &RunStore, script: &str, except: Option<&str>) -> Option<Estimate> {
        let runs = store.list().ok()?;
        let mut took_each = Vec::new();
        for run in runs.iter().rev() {
            if took_each.len() == RUNS {
                break;
            }
            if run.state != super::runs::RunState::Completed
                || crate::script::name::shown(&run.script) != script
                || Some(run.id.as_str()) == except
            {
                continue;
            }
            if let Ok(contents) = store.read(&run.id) {
                took_each.push(took(&contents.events));
            }
        }
        #[allow(clippy::cast_precision_loss)] // token counts far below 2^52
        let tokens = took_each
            .iter()
            .filter_map(|t| t.tokens.map(|n| n as f64))
            .collect();
        Some(Estimate {
            script: script.to_string(),
            runs: took_each.len(),
            cost_usd: Spread::of(took_each.iter().filter_map(|t| t.cost_usd).collect()),
            cost_estimated: took_each.iter().any(|t| t.cost_estimated),
            tokens: Spread::of(tokens),
            seconds: Spread::of(took_each.iter().filter_map(|t| t.seconds).collect()),
        })
    }

    /// One line: `estimate for `colour` from 5 past runs: cost $0.5000 (90%: $0.7500), …`.
    pub(crate) fn shown(&self) -> String {
        if self.runs == 0 {
            return format!(
                "no estimate for `{}`: it has no completed run in this store yet",
                self.script
            );
        }
        let mut parts = Vec::new();
        if let Some(cost) = self.cost_usd {
            let usd = |v| crate::display::usd(v, self.cost_estimated);
            parts.push(format!(
                "cost {} median, {} at the 90th percentile",
                usd(cost.median),
                usd(cost.p90)
            ));
        }
        if let Some(tokens) = self.tokens {
            parts.push(format!(
                "{:.0} tokens median, {:.0} at the 90th percentile",
                tokens.median, tokens.p90
            ));
        }
        if let Some(seconds) = self.seconds {
            parts.push(format!(
                "time {:.1} s median, {:.1} s at the 90th percentile",
                seconds.median, seconds.p90
            ));
        }
        format!(
            "estimate for `{}` from {}: {}",
            self.script,
            crate::display::count(self.runs, "past completed run"),
            parts.join("; ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_and_the_90th_percentile_are_of_the_sorted_values() {
        let spread = |v: &[f64]| Spread::of(v.to_vec()).expect("values");
        assert_eq!(
            spread(&[3.0]),
            Spread {
                median: 3.0,
                p90: 3.0
            }
        );
        assert_eq!(
            spread(&[4.0, 1.0]),
            Spread {
                median: 2.5,
                p90: 4.0
            }
        );
        assert_eq!(
            spread(&[5.0, 1.0, 3.0, 2.0, 4.0]),
            Spread {
                median: 3.0,
                p90: 5.0
            }
        );
        let ten: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(
            spread(&ten),
            Spread {
                median: 5.5,
                p90: 9.0
            }
        );
        let eleven: Vec<f64> = (1..=11).map(f64::from).collect();
        assert_eq!(
            spread(&eleven),
            Spread {
                median: 6.0,
                p90: 10.0
            }
        );
        assert_eq!(Spread::of(Vec::new()), None);
    }
}
