//! Asking the agent about one pending item of an unattended run: asked again once when its
//! answer does not fit, a rate limit of the model waited out, the answer or the step's
//! failure journaled, and the limits and spend caps that stop the run before an agent step.

use std::time::{Duration, Instant};

use super::end::End;
use super::limits;
use crate::agents::headless::{Agent, Kind, Reply as AgentReply, Request};
use crate::agents::history::Progress;
use crate::agents::rate_limit::{self, Backoff, Next, RateLimited};
use crate::agents::reply::Reply;
use crate::agents::session::{Answered, Session};
use crate::engine::step::AgentReport;

/// What came of asking the agent about the pending item.
pub(super) enum Asked {
    /// The answer was journaled; the run went on to this reply.
    Next(Reply),
    Stop(End),
}

/// How long one agent answer may take, when the run must stop (`--max-duration`), and how
/// many tokens one item may use before its agent is not asked again (`--max-step-tokens`).
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub timeout: Duration,
    pub deadline: Option<Instant>,
    pub max_step_tokens: Option<u64>,
}

/// When this invocation must stop, by `--max-duration`.
pub(super) fn deadline(limits: &limits::Limits, started: Instant) -> Option<Instant> {
    limits.max_duration.and_then(|max| started.checked_add(max))
}

/// How the run ends at a limit `reached` before item `step`: a spend cap pauses it for a
/// person (journaled, so `mekara answer` knows what it waits for), unless `--on-cap stop`;
/// another limit stops it.
pub(super) fn at_limit(
    session: &mut Session,
    limits: &limits::Limits,
    step: &str,
    reached: limits::Reached,
) -> End {
    if !reached.cap || limits.on_cap == limits::OnCap::Stop {
        return End::Limit(format!("stopped before `{step}`: {}", reached.why));
    }
    let note = crate::engine::journal::CapEvent {
        action: crate::engine::journal::CapAction::Paused,
        step: Some(step.to_string()),
        why: Some(reached.why.clone()),
        caps: limits.caps,
        by: None,
        ignorable: true,
        at: crate::engine::journal::now_ms(),
    };
    if let Err(error) = session.note_cap(note) {
        // Without the note `mekara answer` cannot raise the cap: stopped, resumable with a
        // higher flag, as `--on-cap stop` would.
        eprintln!("! could not journal the pause at the cap: {error}");
        return End::Limit(format!("stopped before `{step}`: {}", reached.why));
    }
    let id = session.run_id().unwrap_or_default();
    End::Paused(format!(
        "paused before `{step}`: {}\nthe run waits for a person: raise the cap with `mekara answer {id} {}` (or any higher), or end the run with `mekara answer {id} stop`",
        reached.why,
        raise_example(&limits.caps, &reached.why)
    ))
}

/// An answer that raises the cap named in `why` to twice what it is.
fn raise_example(caps: &crate::engine::journal::Caps, why: &str) -> String {
    if why.contains("--max-step-tokens") {
        format!(
            "max-step-tokens={}",
            caps.max_step_tokens.unwrap_or(0).saturating_mul(2).max(1)
        )
    } else if why.contains("--max-tokens") {
        format!(
            "max-tokens={}",
            caps.max_tokens.unwrap_or(0).saturating_mul(2).max(1)
        )
    } else {
        let cost = caps.max_cost.unwrap_or(0.0);
        format!("max-cost={}", if cost > 0.0 { cost * 2.0 } else { 1.0 })
    }
}

/// What came of a rate limit.
pub(super) enum Waited {
    /// The wait is over: ask again.
    Again,
    /// No more waiting: the item fails with this error.
    GaveUp(String),
    /// The run was stopped (Ctrl-C) during the wait.
    Cancelled,
}

/// Waits out a rate limit of the model that the agent asked about `step` met, by
/// `backoff`, unless that would pass `deadline` or the waits are spent. `note` journals the
/// wait (the attempt that follows it, its length, what the agent's client said) before it
/// starts, so a run killed during it says why it was waiting, and asks again on resume.
pub(super) fn wait_out(
    backoff: &mut Backoff,
    limited: &RateLimited,
    step: &str,
    deadline: Option<Instant>,
    cancel: &crate::engine::CancelToken,
    note: &mut dyn FnMut(u32, Duration, String) -> Result<(), String>,
) -> Waited {
    let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
    let wait = match backoff.next(limited, left) {
        Next::GiveUp(error) => return Waited::GaveUp(error),
        Next::Wait(wait) => wait,
    };
    let attempt = backoff.waits + 1;
    eprintln!(
        "  `{step}`: rate-limited by the model; waiting {} (attempt {attempt})",
        rate_limit::shown(wait)
    );
    if let Err(error) = note(attempt, wait, limited.said.clone()) {
        return Waited::GaveUp(format!(
            "rate-limited by the model, and the wait could not be journaled: {error}"
        ));
    }
    let until = Instant::now() + wait;
    loop {
        if cancel.is_cancelled() {
            return Waited::Cancelled;
        }
        let now = Instant::now();
        if now >= until {
            return Waited::Again;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(50)));
    }
}

/// Asks the agent, and asks once more when its answer does not fit; waits out a rate limit
/// of the model and asks again; journals the answer, or the step's failure.
pub(super) fn ask(
    agent: &mut dyn Agent,
    session: &mut Session,
    request: &mut Request,
    bounds: Bounds,
    prices: &crate::agents::prices::Prices,
    cancel: &crate::engine::CancelToken,
    progress: &dyn Fn(Progress<'_>),
) -> Asked {
    let started = Instant::now();
    let mut total = AgentReport::default();
    let mut backoff = Backoff::new();
    loop {
        if let Some(max) = bounds.max_step_tokens
            && total.attempts > 0
            && step_tokens(&total) >= max
        {
            // Asked again, the agent would take the step past its cap.
            let error = format!(
                "the agent was not asked again: this step used {} tokens already (`--max-step-tokens {max}`)",
                step_tokens(&total)
            );
            eprintln!("  {error}");
            if request.kind != Kind::Llm {
                return Asked::Stop(End::Failed(unfinished(request.kind, &request.step, &error)));
            }
            return Asked::Next(session.answer(Answered::Failed(error), total, progress));
        }
        let answer = agent
            .ask(request, bounds.timeout, cancel)
            .map_report(|r| prices.estimate(r));
        let (answer, report) = match answer {
            AgentReply::Cancelled => return Asked::Stop(End::Interrupted),
            AgentReply::Outputs(outputs, report) => (Ok(outputs), report),
            AgentReply::Malformed(error, report) => (Err((error, true)), report),
            AgentReply::Failed(error, report) => (Err((error, false)), report),
            AgentReply::RateLimited(limited, mut report) => {
                // Asked again in the run's session, not in one the turned-away attempt began.
                report.session = None;
                let step = request.step.clone();
                let mut note =
                    |attempt, wait, said| session.note_wait(step.clone(), attempt, wait, said);
                match wait_out(
                    &mut backoff,
                    &limited,
                    &step,
                    bounds.deadline,
                    cancel,
                    &mut note,
                ) {
                    Waited::Again => {
                        add(&mut total, &report, request.attempt, started.elapsed());
                        in_session(request, &report);
                        eprintln!(
                            "… asking the agent again: {} `{}`",
                            kind_name(request.kind),
                            request.step
                        );
                        continue;
                    }
                    Waited::Cancelled => return Asked::Stop(End::Interrupted),
                    Waited::GaveUp(error) => (Err((error, false)), report),
                }
            }
        };
        add(&mut total, &report, request.attempt, started.elapsed());
        in_session(request, &report);
        let refused = match answer {
            Ok(outputs) if request.kind == Kind::Llm => {
                eprintln!("  answered{}", cost_note(&total));
                let reply = session.answer(Answered::Outputs(outputs), total.clone(), progress);
                if !reply.is_error {
                    return Asked::Next(reply);
                }
                (reply.text, true)
            }
            Ok(_) => {
                eprintln!("  done{}", cost_note(&total));
                return Asked::Next(session.answer(Answered::Finished, total.clone(), progress));
            }
            Err(refused) => refused,
        };
        let (error, worth_again) = refused;
        eprintln!("  {}", error.trim().replace('\n', "\n  "));
        if worth_again && request.attempt == 1 {
            request.attempt = 2;
            request.previous_error = Some(error);
            eprintln!(
                "… asking the agent again: {} `{}`",
                kind_name(request.kind),
                request.step
            );
            continue;
        }
        if request.kind != Kind::Llm {
            return Asked::Stop(End::Failed(unfinished(
                request.kind,
                &request.step,
                error.trim(),
            )));
        }
        // The step fails; the script falls back (or ends) as on any failed step.
        return Asked::Next(session.answer(Answered::Failed(error), total, progress));
    }
}

/// Adds one attempt's report into the step's.
pub(super) fn add(total: &mut AgentReport, report: &AgentReport, attempt: u32, elapsed: Duration) {
    let sum_f = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0.0) + b.unwrap_or(0.0)),
    };
    let sum_u = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    };
    if report.session.is_some() {
        total.session.clone_from(&report.session);
    }
    total.cost_usd = sum_f(total.cost_usd, report.cost_usd);
    total.cost_estimated |= report.cost_estimated;
    if report.model.is_some() {
        total.model.clone_from(&report.model);
    }
    total.input_tokens = sum_u(total.input_tokens, report.input_tokens);
    total.output_tokens = sum_u(total.output_tokens, report.output_tokens);
    total.attempts = attempt;
    total.wall_ms = Some(u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX));
}

/// The tokens an item's answers used, in and out.
pub(super) fn step_tokens(report: &AgentReport) -> u64 {
    report.input_tokens.unwrap_or(0) + report.output_tokens.unwrap_or(0)
}

/// Takes the session an answer to `request` named as the one the next asking continues, and
/// counts the answer in what that session has cost.
pub(super) fn in_session(request: &mut Request, report: &AgentReport) {
    let Some(session) = &report.session else {
        return;
    };
    if request.session.as_ref() != Some(session) {
        request.session = Some(session.clone());
        request.session_spent = crate::agents::headless::SessionSpent::default();
    }
    request.session_spent.cost_usd += report.cost_usd.unwrap_or(0.0);
    request.session_spent.input_tokens += report.input_tokens.unwrap_or(0);
    request.session_spent.output_tokens += report.output_tokens.unwrap_or(0);
}

pub(super) fn cost_note(report: &AgentReport) -> String {
    format!(": {}", report.summary())
}

pub(super) fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Llm => "llm step",
        Kind::Nl => "NL script",
        Kind::Fallback => "to finish by hand the failed script",
    }
}

/// Why the run stopped when the agent could not finish an NL script, or a failed compiled
/// script by hand, at `step`.
pub(super) fn unfinished(kind: Kind, step: &str, error: &str) -> String {
    match kind {
        Kind::Fallback => format!(
            "a step of `{step}` failed and the agent could not finish the script by hand: {error}"
        ),
        _ => format!("the agent could not finish the NL script `{step}`: {error}"),
    }
}
