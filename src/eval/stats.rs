//! What an eval's trials add up to: pass rates with a Wilson 95% interval, cost, tokens and
//! time per trial and per success, and failures grouped by the step where they happened;
//! as JSON (`summary.json`) and as a Markdown table (`summary.md`, and the command's output).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use super::record::{Outcome, Plan, TrialResult};

/// The normal quantile of a two-sided 95% interval.
const Z: f64 = 1.959_963_984_540_054;

/// A group of trials: variant, agent, and case (`None` for every case).
type Key = (String, String, Option<String>);

/// The Wilson score interval of `passed` successes in `trials`, at 95%: unlike the normal
/// approximation it stays within 0..=1 and means something for a handful of trials and for
/// rates of 0 or 1. No trials: the whole range.
pub(crate) fn wilson(passed: u32, trials: u32) -> (f64, f64) {
    if trials == 0 {
        return (0.0, 1.0);
    }
    let n = f64::from(trials);
    let p = f64::from(passed) / n;
    let z2 = Z * Z;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// One line of the table: the trials of one variant and agent, of one case or of all.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Row {
    /// `script`, or the baseline's label.
    pub variant: String,
    pub agent: String,
    /// `None`: every case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case: Option<String>,
    /// Trials that finished.
    pub trials: u32,
    pub passed: u32,
    /// Trials stopped at a cap (counted as not passed).
    pub capped: u32,
    pub pass_rate: f64,
    /// The Wilson 95% interval of the pass rate.
    pub low: f64,
    pub high: f64,
    pub cost_usd: f64,
    pub cost_per_trial: f64,
    /// `None` when nothing passed.
    pub cost_per_success: Option<f64>,
    pub tokens_per_trial: f64,
    pub ms_per_trial: f64,
    pub ms_per_success: Option<f64>,
}

/// The trials of one variant and agent that did not pass at one step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct FailureGroup {
    pub variant: String,
    pub agent: String,
    pub step: String,
    /// The trials' numbers.
    pub trials: Vec<u32>,
}

/// The eval's summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Summary {
    pub id: String,
    pub script: String,
    pub planned: usize,
    pub finished: usize,
    /// Per variant and agent over every case, then per case.
    pub rows: Vec<Row>,
    pub failures: Vec<FailureGroup>,
    pub cost_usd: f64,
}

impl Summary {
    /// Adds up the `results` of `plan`'s trials.
    pub(crate) fn of(plan: &Plan, results: &[TrialResult]) -> Summary {
        let by_number: BTreeMap<u32, &TrialResult> =
            results.iter().map(|r| (r.number, r)).collect();
        let variant = |baseline: bool| match (&plan.baseline, baseline) {
            (Some(b), true) => b.label(),
            _ => "script".to_string(),
        };
        // In the plan's order.
        let mut groups: Vec<(Key, Vec<&TrialResult>)> = Vec::new();
        let mut failures: Vec<FailureGroup> = Vec::new();
        for trial in &plan.list {
            let variant = variant(trial.baseline);
            let agent = plan
                .agents
                .get(trial.agent)
                .map(super::record::AgentSpec::label)
                .unwrap_or_default();
            for case in [None, Some(trial.case.clone())] {
                let key = (variant.clone(), agent.clone(), case);
                let at = if let Some(at) = groups.iter().position(|(k, _)| *k == key) {
                    at
                } else {
                    groups.push((key, Vec::new()));
                    groups.len() - 1
                };
                if let Some(result) = by_number.get(&trial.number) {
                    groups[at].1.push(result);
                }
            }
            if let Some(result) = by_number.get(&trial.number)
                && result.outcome != Outcome::Passed
            {
                let step = result
                    .step
                    .clone()
                    .unwrap_or_else(|| "(unknown)".to_string());
                match failures
                    .iter_mut()
                    .find(|f| f.variant == variant && f.agent == agent && f.step == step)
                {
                    Some(group) => group.trials.push(trial.number),
                    None => failures.push(FailureGroup {
                        variant,
                        agent,
                        step,
                        trials: vec![trial.number],
                    }),
                }
            }
        }
        // Overall rows first, then each case's.
        groups.sort_by_key(|((_, _, case), _)| case.is_some());
        let rows = groups
            .into_iter()
            .map(|((variant, agent, case), trials)| row(variant, agent, case, &trials))
            .collect();
        failures.sort_by_key(|f| std::cmp::Reverse(f.trials.len()));
        Summary {
            id: plan.id.clone(),
            script: plan.script.clone(),
            planned: plan.list.len(),
            finished: by_number.len(),
            rows,
            failures,
            cost_usd: results.iter().map(|r| r.cost_usd).sum(),
        }
    }

    /// The summary as Markdown: the table, then the failures by step.
    pub(crate) fn markdown(&self) -> String {
        let mut out = format!(
            "# eval {} of `{}`\n\n{} of {} trials finished, ${:.4} spent.\n\n",
            self.id, self.script, self.finished, self.planned, self.cost_usd
        );
        out.push_str("| variant | agent | case | passed | pass rate (95% CI) | capped | cost/trial | cost/success | tokens/trial | time/trial | time/success |\n");
        out.push_str("|---|---|---|---|---|---|---|---|---|---|---|\n");
        for row in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {}/{} | {} | {} | {} | {} | {:.0} | {} | {} |",
                row.variant,
                row.agent,
                row.case.as_deref().unwrap_or("all"),
                row.passed,
                row.trials,
                rate(row),
                row.capped,
                usd(Some(row.cost_per_trial)),
                usd(row.cost_per_success),
                row.tokens_per_trial,
                seconds(Some(row.ms_per_trial)),
                seconds(row.ms_per_success),
            );
        }
        if self.failures.is_empty() {
            out.push_str("\nNo trial failed.\n");
        } else {
            out.push_str(
                "\n## Failures by step\n\n| variant | agent | step | trials |\n|---|---|---|---|\n",
            );
            for group in &self.failures {
                let trials: Vec<String> = group.trials.iter().map(|n| format!("#{n}")).collect();
                let _ = writeln!(
                    out,
                    "| {} | {} | `{}` | {} ({}) |",
                    group.variant,
                    group.agent,
                    group.step.replace('`', "'").replace('|', "\\|"),
                    group.trials.len(),
                    trials.join(" ")
                );
            }
        }
        out
    }
}

/// `70% (40–89%)`, or `–` when no trial finished.
pub(crate) fn rate(row: &Row) -> String {
    if row.trials == 0 {
        return "–".to_string();
    }
    format!(
        "{:.0}% ({:.0}–{:.0}%)",
        row.pass_rate * 100.0,
        row.low * 100.0,
        row.high * 100.0
    )
}

/// `$0.0123`, or `–`.
pub(crate) fn usd(value: Option<f64>) -> String {
    value.map_or_else(|| "–".to_string(), |v| format!("${v:.4}"))
}

/// `1.2 s`, or `–`.
pub(crate) fn seconds(ms: Option<f64>) -> String {
    ms.map_or_else(|| "–".to_string(), |ms| format!("{:.1} s", ms / 1000.0))
}

fn row(variant: String, agent: String, case: Option<String>, trials: &[&TrialResult]) -> Row {
    let n = u32::try_from(trials.len()).unwrap_or(u32::MAX);
    let passed = u32::try_from(
        trials
            .iter()
            .filter(|t| t.outcome == Outcome::Passed)
            .count(),
    )
    .unwrap_or(u32::MAX);
    let capped = u32::try_from(
        trials
            .iter()
            .filter(|t| t.outcome == Outcome::Capped)
            .count(),
    )
    .unwrap_or(u32::MAX);
    let (low, high) = wilson(passed, n);
    let cost: f64 = trials.iter().map(|t| t.cost_usd).sum();
    let tokens: u64 = trials.iter().map(|t| t.tokens).sum();
    let ms: u64 = trials.iter().map(|t| t.duration_ms).sum();
    let per = |total: f64, count: u32| (count > 0).then(|| total / f64::from(count));
    Row {
        variant,
        agent,
        case,
        trials: n,
        passed,
        capped,
        pass_rate: per(f64::from(passed), n).unwrap_or(0.0),
        low,
        high,
        cost_usd: cost,
        cost_per_trial: per(cost, n).unwrap_or(0.0),
        cost_per_success: per(cost, passed),
        tokens_per_trial: per(tokens as f64, n).unwrap_or(0.0),
        ms_per_trial: per(ms as f64, n).unwrap_or(0.0),
        ms_per_success: per(ms as f64, passed),
    }
}

#[cfg(test)]
mod tests {
    use super::{Summary, wilson};
    use crate::eval::cases::Cases;
    use crate::eval::record::{AgentSpec, Baseline, Caps, Outcome, Plan, Trial, TrialResult};

    #[test]
    fn a_summary_has_a_row_per_variant_and_agent_then_per_case_and_groups_failures_by_step() {
        let trial = |number, case: &str, baseline| Trial {
            number,
            case: case.to_string(),
            agent: 0,
            baseline,
            repeat: 1,
        };
        let plan = Plan {
            id: "e".to_string(),
            script: "s".to_string(),
            cases: Cases {
                file: "c.toml".into(),
                cases: Vec::new(),
            },
            agents: vec![AgentSpec {
                agent: "claude".to_string(),
                command: None,
                model: Some("m".to_string()),
            }],
            trials: 1,
            baseline: Some(Baseline::Nl),
            project_script: false,
            caps: Caps::default(),
            jobs: 1,
            created_ms: 0,
            list: vec![
                trial(1, "a", false),
                trial(2, "a", true),
                trial(3, "b", false),
                trial(4, "b", true),
            ],
        };
        let result = |number, outcome, step: Option<&str>| TrialResult {
            number,
            run_id: format!("r{number}"),
            outcome,
            why: None,
            step: step.map(str::to_string),
            state: "completed".to_string(),
            checks: Vec::new(),
            judge: None,
            agent_steps: 1,
            cost_usd: 1.0,
            tokens: 10,
            duration_ms: 1000,
        };
        // Trial 4 has not finished.
        let results = [
            result(1, Outcome::Passed, None),
            result(2, Outcome::Failed, Some("s[1]")),
            result(3, Outcome::Capped, Some("cap")),
        ];
        let summary = Summary::of(&plan, &results);
        let rows: Vec<(String, String, Option<String>, u32, u32)> = summary
            .rows
            .iter()
            .map(|r| {
                (
                    r.variant.clone(),
                    r.agent.clone(),
                    r.case.clone(),
                    r.passed,
                    r.trials,
                )
            })
            .collect();
        let row = |v: &str, c: Option<&str>, p, t| {
            (
                v.to_string(),
                "claude/m".to_string(),
                c.map(str::to_string),
                p,
                t,
            )
        };
        assert_eq!(
            rows,
            [
                row("script", None, 1, 2),
                row("baseline: NL", None, 0, 1),
                row("script", Some("a"), 1, 1),
                row("baseline: NL", Some("a"), 0, 1),
                row("script", Some("b"), 0, 1),
                row("baseline: NL", Some("b"), 0, 0),
            ]
        );
        assert_eq!(summary.rows[0].capped, 1);
        assert_eq!(summary.rows[0].cost_per_success, Some(2.0));
        assert_eq!(summary.rows[1].cost_per_success, None);
        let failures: Vec<(&str, &[u32])> = summary
            .failures
            .iter()
            .map(|f| (f.step.as_str(), f.trials.as_slice()))
            .collect();
        assert_eq!(failures, [("s[1]", &[2][..]), ("cap", &[3][..])]);
        assert_eq!((summary.planned, summary.finished), (4, 3));
        assert!(
            summary
                .markdown()
                .contains("| script | claude/m | all | 1/2 | 50% (9–91%) | 1 |")
        );
    }

    #[test]
    fn the_wilson_interval_matches_the_textbook_values() {
        let round = |(low, high): (f64, f64)| ((low * 1e4).round(), (high * 1e4).round());
        // 7 of 10: 0.3968 to 0.8922 (Wilson 1927; any statistics table).
        assert_eq!(round(wilson(7, 10)), (3968.0, 8922.0));
        assert_eq!(round(wilson(0, 10)), (0.0, 2775.0));
        assert_eq!(round(wilson(10, 10)), (7225.0, 10000.0));
        assert_eq!(wilson(0, 0), (0.0, 1.0));
    }
}
