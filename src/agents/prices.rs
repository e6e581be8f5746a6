//! What a model's tokens cost, for agents that report tokens and no cost (Codex, Gemini CLI,
//! an `--agent-command` that names its `model`): a built-in table with the source and date
//! of its figures, which `[prices."MODEL"]` of `.mekara/config.toml` extends or overrides.
//! A cost computed here is an estimate and says so (`AgentReport::cost_estimated`) wherever
//! it shows; a cost an agent reports is never replaced.
//!
//! ```toml
//! [prices."gpt-5-codex"]
//! input_per_mtok = 1.25    # US dollars per million tokens read
//! output_per_mtok = 10.0   # ... and written
//! source = "our contract, 2026-09"
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::engine::step::AgentReport;

/// The price of one model's tokens.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Price {
    /// US dollars per million tokens the model reads (cached reads are counted at this
    /// price too: an estimate errs high rather than low).
    pub input_per_mtok: f64,
    /// US dollars per million tokens the model writes.
    pub output_per_mtok: f64,
    /// Where the figures come from, and when they were read.
    #[serde(default)]
    pub source: Option<String>,
}

/// Where the built-in figures come from.
const OPENAI: &str = "https://openai.com/api/pricing/, read 2025-10";
const GOOGLE: &str = "https://ai.google.dev/gemini-api/docs/pricing, read 2025-10";
const ANTHROPIC: &str = "https://platform.claude.com/docs/en/about-claude/pricing, read 2026-11";

/// The built-in table: model, input and output price per million tokens, source. Gemini's
/// figures are those of prompts up to 200k tokens (longer ones cost more).
const BUILT_IN: &[(&str, f64, f64, &str)] = &[
    ("gpt-5", 1.25, 10.0, OPENAI),
    ("gpt-5-codex", 1.25, 10.0, OPENAI),
    ("gpt-5-mini", 0.25, 2.0, OPENAI),
    ("gpt-5-nano", 0.05, 0.4, OPENAI),
    ("o4-mini", 1.1, 4.4, OPENAI),
    ("gpt-4.1", 2.0, 8.0, OPENAI),
    ("gemini-2.5-pro", 1.25, 10.0, GOOGLE),
    ("gemini-2.5-flash", 0.3, 2.5, GOOGLE),
    ("gemini-2.5-flash-lite", 0.1, 0.4, GOOGLE),
    ("claude-opus-4-6", 5.0, 25.0, ANTHROPIC),
    ("claude-opus-4-5", 5.0, 25.0, ANTHROPIC),
    ("claude-opus-4-1", 15.0, 75.0, ANTHROPIC),
    ("claude-sonnet-4-6", 3.0, 15.0, ANTHROPIC),
    ("claude-sonnet-4-5", 3.0, 15.0, ANTHROPIC),
    ("claude-haiku-4-5", 1.0, 5.0, ANTHROPIC),
];

/// The price table in force: the built-in one with the project's `[prices]` over it.
#[derive(Debug, Clone)]
pub(crate) struct Prices {
    table: BTreeMap<String, Price>,
}

impl Default for Prices {
    fn default() -> Prices {
        let table = BUILT_IN
            .iter()
            .map(|(model, input, output, source)| {
                (
                    (*model).to_string(),
                    Price {
                        input_per_mtok: *input,
                        output_per_mtok: *output,
                        source: Some((*source).to_string()),
                    },
                )
            })
            .collect();
        Prices { table }
    }
}

impl Prices {
    /// The table of the project at `root`: the built-in one, with `[prices."MODEL"]` of its
    /// settings over it. The error says which model's price is wrong and how.
    pub(crate) fn of_project(root: Option<&Path>) -> Result<Prices, String> {
        let own: BTreeMap<String, Price> =
            crate::config::section(root, "prices")?.unwrap_or_default();
        let mut prices = Prices::default();
        for (model, price) in own {
            for (name, value) in [
                ("input_per_mtok", price.input_per_mtok),
                ("output_per_mtok", price.output_per_mtok),
            ] {
                if !(value.is_finite() && value >= 0.0) {
                    return Err(format!(
                        "`[prices.\"{model}\"] {name}` must be US dollars per million tokens, 0 or more, not `{value}`"
                    ));
                }
            }
            prices.table.insert(model, price);
        }
        Ok(prices)
    }

    /// The price of `model`: its own entry, else the longest entry it begins with
    /// (`gemini-2.5-flash-001` is priced as `gemini-2.5-flash`).
    pub(crate) fn of(&self, model: &str) -> Option<&Price> {
        self.table.get(model).or_else(|| {
            self.table
                .iter()
                .filter(|(name, _)| model.starts_with(name.as_str()))
                .max_by_key(|(name, _)| name.len())
                .map(|(_, price)| price)
        })
    }

    /// `report` with its cost estimated from its tokens and model, when the agent reported
    /// tokens and no cost and the model has a price; as it was otherwise.
    pub(crate) fn estimate(&self, mut report: AgentReport) -> AgentReport {
        if report.cost_usd.is_some() {
            return report;
        }
        let Some(model) = &report.model else {
            return report;
        };
        if report.input_tokens.is_none() && report.output_tokens.is_none() {
            return report;
        }
        let Some(price) = self.of(model) else {
            return report;
        };
        #[allow(clippy::cast_precision_loss)] // token counts are far below 2^52
        let cost = (report.input_tokens.unwrap_or(0) as f64 * price.input_per_mtok
            + report.output_tokens.unwrap_or(0) as f64 * price.output_per_mtok)
            / 1_000_000.0;
        report.cost_usd = Some(cost);
        report.cost_estimated = true;
        report
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(model: &str, input: u64, output: u64) -> AgentReport {
        AgentReport {
            model: Some(model.to_string()),
            input_tokens: Some(input),
            output_tokens: Some(output),
            ..AgentReport::default()
        }
    }

    #[test]
    fn tokens_are_priced_by_the_longest_model_name_they_begin_with() {
        let prices = Prices::default();
        let lite = prices.estimate(report("gemini-2.5-flash-lite-001", 1_000_000, 1_000_000));
        assert_eq!(lite.cost_usd, Some(0.5));
        assert!(lite.cost_estimated);
        let flash = prices.estimate(report("gemini-2.5-flash", 2_000_000, 0));
        assert_eq!(flash.cost_usd, Some(0.6));
        // Opus 4.5 costs a third of Opus 4.1: a dated name takes its own family's price.
        let opus = prices.estimate(report("claude-opus-4-5-20251101", 1_000_000, 1_000_000));
        assert_eq!(opus.cost_usd, Some(30.0));
    }

    #[test]
    fn a_reported_cost_an_unknown_model_or_no_tokens_are_left_alone() {
        let prices = Prices::default();
        let reported = AgentReport {
            cost_usd: Some(0.01),
            ..report("gpt-5", 10, 10)
        };
        assert_eq!(prices.estimate(reported.clone()), reported);
        let unknown = report("someone-elses-model", 10, 10);
        assert_eq!(prices.estimate(unknown.clone()), unknown);
        let no_tokens = AgentReport {
            model: Some("gpt-5".into()),
            ..AgentReport::default()
        };
        assert_eq!(prices.estimate(no_tokens.clone()), no_tokens);
    }

    #[test]
    fn the_projects_prices_override_and_bad_ones_are_refused() {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let write = |text: &str| {
            std::fs::create_dir_all(dir.path().join(".mekara")).expect("mkdir");
            std::fs::write(dir.path().join(crate::config::FILE), text).expect("write");
        };
        write("[prices.\"gpt-5\"]\ninput_per_mtok = 2.0\noutput_per_mtok = 0\n");
        let prices = Prices::of_project(Some(dir.path())).expect("prices");
        assert_eq!(
            prices.estimate(report("gpt-5", 500_000, 9)).cost_usd,
            Some(1.0)
        );
        for (text, said) in [
            (
                "[prices.\"x\"]\ninput_per_mtok = -1.0\noutput_per_mtok = 1\n",
                "`[prices.\"x\"] input_per_mtok` must be US dollars per million tokens, 0 or more, not `-1`",
            ),
            (
                "[prices.\"x\"]\ninput_per_mtok = nan\noutput_per_mtok = 1\n",
                "not `NaN`",
            ),
            ("[prices.\"x\"]\ninput = 1\n", "unknown field `input`"),
            ("[prices]\nx = \"free\"\n", "`[prices]`"),
        ] {
            write(text);
            let error = Prices::of_project(Some(dir.path())).expect_err(text);
            assert!(error.contains(said), "{text}: {error}");
        }
    }
}
