//! The viewer's eval pages: `/evals` lists the project's evals, `/evals/ID` shows one (its
//! table of pass rates, its failures by step, and every trial with a link to its run), and
//! `/api/evals/ID` gives the same as JSON. They read the eval's folder
//! ([`crate::eval::record`]) as `mekara eval` writes it, so an eval under way shows the
//! trials finished so far. Built with `maud`, which escapes every value.

use maud::{DOCTYPE, Markup, html};
use serde_json::{Value as Json, json};

use crate::eval::record::{self, EvalDir, Outcome, Plan, RecordError, TrialResult};
use crate::eval::stats::{self, Summary};
use crate::paths::Locations;

/// `path` with the viewer's token, so that a link keeps working.
fn link(token: &str, path: &str) -> String {
    let join = if path.contains('?') { '&' } else { '?' };
    format!("{path}{join}token={token}")
}

fn layout(token: &str, title: &str, body: Markup) -> String {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) " · mekara" }
                link rel="stylesheet" href="/assets/app.css";
            }
            body {
                header {
                    a.home href=(link(token, "/")) { "mekara runs" }
                    " · "
                    a href=(link(token, "/evals")) { "evals" }
                }
                main #content { (body) }
            }
        }
    }
    .into_string()
}

/// The evals of the project, newest first.
pub(super) fn list_page(locations: &Locations, token: &str) -> String {
    let dir = locations.evals_dir();
    let evals: Vec<(String, Option<Plan>)> = dir
        .as_deref()
        .map(record::list)
        .unwrap_or_default()
        .into_iter()
        .map(|id| {
            let plan = dir
                .as_deref()
                .and_then(|d| EvalDir::of(d, &id).ok())
                .and_then(|e| e.plan().ok());
            (id, plan)
        })
        .collect();
    let body = html! {
        h1 { "Evals" }
        @if evals.is_empty() {
            p { "No eval yet: " code { "mekara eval NAME --cases FILE --agent …" } " runs one." }
        } @else {
            table.evals {
                thead { tr { th { "eval" } th { "script" } th { "trials" } } }
                tbody {
                    @for (id, plan) in &evals {
                        tr {
                            td { a href=(link(token, &format!("/evals/{id}"))) { (id) } }
                            td { code { (plan.as_ref().map_or("", |p| p.script.as_str())) } }
                            td { (plan.as_ref().map_or(0, |p| p.list.len())) }
                        }
                    }
                }
            }
        }
    };
    layout(token, "Evals", body)
}

/// Eval `id`: its plan, its results so far and their summary.
fn read(locations: &Locations, id: &str) -> Result<(Plan, EvalDir, Vec<TrialResult>), RecordError> {
    let dir = locations.evals_dir().unwrap_or_default();
    let eval = EvalDir::of(&dir, id)?;
    let plan = eval.plan()?;
    let results = eval.results(&plan);
    Ok((plan, eval, results))
}

/// `/api/evals/ID`: the plan's trials with their results, and the summary.
pub(super) fn api(locations: &Locations, id: &str) -> Result<Json, RecordError> {
    let (plan, _, results) = read(locations, id)?;
    let summary = Summary::of(&plan, &results);
    Ok(json!({ "plan": plan, "results": results, "summary": summary }))
}

/// `/evals/ID`: the table, the failures by step, and every trial.
pub(super) fn page(locations: &Locations, id: &str, token: &str) -> Result<String, RecordError> {
    let (plan, eval, results) = read(locations, id)?;
    let summary = Summary::of(&plan, &results);
    let run_link = |run: &str| link(token, &format!("/runs/{run}"));
    let body = html! {
        h1 { "Eval " (plan.id) " of " code { (plan.script) } }
        p.summary {
            (summary.finished) " of " (summary.planned) " trials finished · "
            (stats::usd(Some(summary.cost_usd))) " spent · cases from " code { (plan.cases.file.display()) }
        }
        table.eval-summary {
            thead { tr {
                th { "variant" } th { "agent" } th { "case" } th { "passed" }
                th { "pass rate (95% CI)" } th { "capped" } th { "cost/trial" }
                th { "cost/success" } th { "tokens/trial" } th { "time/trial" } th { "time/success" }
            } }
            tbody {
                @for row in &summary.rows {
                    tr.(if row.case.is_none() { "all" } else { "case" }) {
                        td { (row.variant) } td { (row.agent) }
                        td { (row.case.as_deref().unwrap_or("all")) }
                        td { (row.passed) "/" (row.trials) }
                        td.rate { (stats::rate(row)) }
                        td { (row.capped) }
                        td { (stats::usd(Some(row.cost_per_trial))) }
                        td { (stats::usd(row.cost_per_success)) }
                        td { (format!("{:.0}", row.tokens_per_trial)) }
                        td { (stats::seconds(Some(row.ms_per_trial))) }
                        td { (stats::seconds(row.ms_per_success)) }
                    }
                }
            }
        }
        @if !summary.failures.is_empty() {
            h2 { "Failures by step" }
            table.eval-failures {
                thead { tr { th { "variant" } th { "agent" } th { "step" } th { "trials" } } }
                tbody {
                    @for group in &summary.failures {
                        tr {
                            td { (group.variant) } td { (group.agent) }
                            td { code { (group.step) } }
                            td {
                                (group.trials.len()) ": "
                                @for n in &group.trials { a href={ "#trial-" (n) } { "#" (n) } " " }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Trials" }
        table.eval-trials {
            thead { tr {
                th { "#" } th { "case" } th { "agent" } th { "variant" } th { "repeat" }
                th { "outcome" } th { "where" } th { "why" } th { "cost" } th { "time" } th { "run" }
            } }
            tbody {
                @for trial in &plan.list {
                    @let result = results.iter().find(|r| r.number == trial.number);
                    @let started = eval.started(trial.number);
                    tr id={ "trial-" (trial.number) } class=(outcome_class(result)) {
                        td { (trial.number) }
                        td { (trial.case) }
                        td { (plan.agents.get(trial.agent).map(record::AgentSpec::label).unwrap_or_default()) }
                        td { (match (&plan.baseline, trial.baseline) { (Some(b), true) => b.label(), _ => "script".to_string() }) }
                        td { (trial.repeat) "/" (plan.trials) }
                        @match result {
                            Some(r) => {
                                td.outcome { (outcome_name(r.outcome)) }
                                td { @if let Some(step) = &r.step { code { (step) } } }
                                td.why { (r.why.as_deref().unwrap_or_default()) }
                                td { (stats::usd(Some(r.cost_usd))) }
                                td { (stats::seconds(Some(r.duration_ms as f64))) }
                                td {
                                    a.run href=(run_link(&r.run_id)) { (r.run_id) }
                                    @if let Some(judge) = r.judge.as_ref().and_then(|j| j.run_id.as_ref()) {
                                        " · " a.judge href=(run_link(judge)) { "judge" }
                                    }
                                }
                            }
                            None => {
                                td.outcome { (if started.is_empty() { "not run" } else { "started" }) }
                                td {} td {} td {} td {}
                                td { @if let Some(run) = started.last() { a.run href=(run_link(run)) { (run) } } }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout(token, &format!("Eval {}", plan.id), body))
}

fn outcome_name(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Passed => "passed",
        Outcome::Failed => "failed",
        Outcome::Capped => "capped",
    }
}

fn outcome_class(result: Option<&TrialResult>) -> &'static str {
    result.map_or("pending", |r| outcome_name(r.outcome))
}
