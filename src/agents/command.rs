//! `--agent-command CMD`: any agent CLI, through the JSON contract of
//! `docs/agent-command.md`. CMD gets the [`Request`] as JSON on stdin and answers on stdout
//! with `{"outputs": {...}}` or `{"error": "..."}` (with `"rate_limited": true` and
//! perhaps `"retry_after": SECONDS` when the model turned it away for now), and may add
//! what it knows of itself (`session`, `cost_usd`, `input_tokens`, `output_tokens`,
//! `model`).

use std::time::Duration;

use serde_json::{Map, Value as Json, json};

use super::headless::{Agent, Reply, Request, run_agent};
use super::rate_limit::RateLimited;
use crate::display::json_type;
use crate::engine::CancelToken;
use crate::engine::step::AgentReport;

/// The generic adapter: a shell command line.
pub(crate) struct CommandAgent {
    command: String,
}

impl CommandAgent {
    pub(crate) fn new(command: String) -> CommandAgent {
        CommandAgent { command }
    }
}

impl Agent for CommandAgent {
    fn ask(&mut self, request: &Request, timeout: Duration, cancel: &CancelToken) -> Reply {
        let input = request_json(request).to_string();
        match run_agent(&self.command, input.as_bytes(), request, timeout, cancel) {
            Ok(stdout) => read_answer(&stdout),
            Err(stopped) => stopped.into(),
        }
    }
}

/// The version of the request's shape, in its `version` field.
pub(crate) const REQUEST_VERSION: u32 = 1;

/// The request as the `--agent-command` contract writes it on the agent's stdin
/// (`docs/agent-command.md`).
pub(crate) fn request_json(request: &Request) -> Json {
    json!({
        "version": REQUEST_VERSION,
        "run_id": request.run_id,
        "session_key": request.run_id,
        "step": request.step,
        "kind": request.kind.name(),
        "prompt": request.prompt,
        "unattended": super::reply::UNATTENDED,
        "output_schema": request.schema,
        "agent_session": request.session,
        "attempt": request.attempt,
        "previous_error": request.previous_error,
        "budget_usd": request.budget_usd,
    })
}

/// Reads the agent's answer: one JSON object, `{"outputs": {...}}` or `{"error": "..."}`.
fn read_answer(stdout: &str) -> Reply {
    let shown = || crate::display::clipped(stdout.trim(), 2000).into_owned();
    let answer: Json = match serde_json::from_str(stdout.trim()) {
        Ok(answer) => answer,
        Err(_) if stdout.trim().is_empty() => {
            return Reply::Malformed(
                "the agent wrote nothing on stdout; it must write one JSON object, \
                 `{\"outputs\": {...}}` or `{\"error\": \"...\"}`"
                    .to_string(),
                AgentReport::default(),
            );
        }
        Err(e) => {
            return Reply::Malformed(
                format!(
                    "the agent's answer is not JSON ({e}); it must write one JSON object, \
                     `{{\"outputs\": {{...}}}}` or `{{\"error\": \"...\"}}`; it wrote: {}",
                    shown()
                ),
                AgentReport::default(),
            );
        }
    };
    let Json::Object(mut answer) = answer else {
        return Reply::Malformed(
            format!(
                "the agent's answer is {}, not an object `{{\"outputs\": {{...}}}}` or \
                 `{{\"error\": \"...\"}}`",
                json_type(&answer)
            ),
            AgentReport::default(),
        );
    };
    let report = report_of(&answer);
    if let Some(error) = answer.remove("error").filter(|e| !e.is_null()) {
        let error = error
            .as_str()
            .map_or_else(|| error.to_string(), str::to_string);
        // No credit, no plan, a daily quota: waiting does not help, whatever the wrapper
        // says (`docs/agent-command.md`, "Rate limits and overloads").
        if answer.get("rate_limited").and_then(Json::as_bool) == Some(true)
            && !super::rate_limit::says_final(&error)
        {
            let mut limited = RateLimited::from_said(format!("the agent said: {error}"));
            if let Some(seconds) = answer.get("retry_after").and_then(Json::as_f64) {
                limited.retry_after = Duration::try_from_secs_f64(seconds.min(3600.0)).ok();
            }
            return Reply::RateLimited(limited, report);
        }
        return Reply::Failed(format!("the agent said: {error}"), report);
    }
    match answer.remove("outputs") {
        Some(Json::Object(outputs)) => Reply::Outputs(outputs, report),
        Some(other) => Reply::Malformed(
            format!(
                "`outputs` in the agent's answer is {}, not an object",
                json_type(&other)
            ),
            report,
        ),
        None => Reply::Malformed(
            format!(
                "the agent's answer has neither `outputs` nor `error`: {}",
                shown()
            ),
            report,
        ),
    }
}

/// What the answer says of the agent itself; fields of the wrong type are left out.
fn report_of(answer: &Map<String, Json>) -> AgentReport {
    AgentReport {
        session: answer
            .get("session")
            .and_then(Json::as_str)
            .map(str::to_string),
        cost_usd: answer.get("cost_usd").and_then(Json::as_f64),
        input_tokens: answer.get("input_tokens").and_then(Json::as_u64),
        output_tokens: answer.get("output_tokens").and_then(Json::as_u64),
        model: answer
            .get("model")
            .and_then(Json::as_str)
            .map(|m| crate::display::clipped(m, 200).into_owned()),
        ..AgentReport::default()
    }
}

#[cfg(test)]
mod tests {
    use super::{Reply, read_answer};

    /// Regression (issue 40): `rate_limited: true` was waited out for an account out of
    /// credit or quota, which no wait brings back.
    #[test]
    fn a_billing_or_quota_error_fails_even_when_said_rate_limited() {
        for error in [
            "Your credit balance is too low to access the API",
            "429 insufficient_quota: check your plan and billing details",
            "You have exhausted your daily quota",
        ] {
            let answer = serde_json::json!({"error": error, "rate_limited": true}).to_string();
            match read_answer(&answer) {
                Reply::Failed(said, _) => assert_eq!(said, format!("the agent said: {error}")),
                other => panic!("{error}: {other:?}"),
            }
        }
        let answer = r#"{"error": "429 Too Many Requests", "rate_limited": true}"#;
        assert!(matches!(read_answer(answer), Reply::RateLimited(..)));
    }
}
