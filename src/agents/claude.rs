//! `--agent claude`: Claude Code headless. Each question is one `claude -p --output-format
//! json` with the prompt on stdin; an llm step that expects outputs gets `--json-schema`, so
//! the outputs come back as `structured_output`. The first question starts a session and
//! the next ones `--resume` it, so Claude keeps the context of the whole run, as over MCP.

use std::time::Duration;

use serde_json::Value as Json;

use super::headless::{Agent, Reply, Request, run_agent, shell_quote};
use crate::engine::CancelToken;
use crate::engine::step::AgentReport;

/// The program, found on `PATH`.
const PROGRAM: &str = "claude";

/// Claude Code, found as `claude` on `PATH`.
pub(crate) struct ClaudeAgent;

impl ClaudeAgent {
    /// The command line for `request` (the prompt goes on stdin).
    fn command(&self, request: &Request) -> String {
        let mut command = format!("{PROGRAM} -p --output-format json");
        if request.wants_outputs() {
            command.push_str(" --json-schema ");
            command.push_str(&shell_quote(&request.schema.to_string()));
        }
        if let Some(session) = &request.session {
            command.push_str(" --resume ");
            command.push_str(&shell_quote(session));
        }
        if let Some(budget) = request.budget_usd {
            command.push_str(&format!(" --max-budget-usd {budget:.4}"));
        }
        command
    }
}

impl Agent for ClaudeAgent {
    fn ask(&mut self, request: &Request, timeout: Duration, cancel: &CancelToken) -> Reply {
        let prompt = request.cli_prompt();
        match run_agent(
            &self.command(request),
            prompt.as_bytes(),
            request,
            timeout,
            cancel,
        ) {
            Ok(stdout) => read_result(&stdout, request.wants_outputs()),
            Err(stopped) => stopped.into(),
        }
    }
}

/// Reads the result object `claude -p --output-format json` prints.
fn read_result(stdout: &str, wants_outputs: bool) -> Reply {
    let result: Json = match serde_json::from_str(stdout.trim()) {
        Ok(Json::Object(result)) => Json::Object(result),
        _ => {
            return Reply::Failed(
                format!(
                    "Claude Code did not print its JSON result; it wrote: {}",
                    crate::display::clipped(stdout.trim(), 2000)
                ),
                AgentReport::default(),
            );
        }
    };
    let usage = result.get("usage");
    let tokens = |names: &[&str]| -> Option<u64> {
        let usage = usage?;
        names
            .iter()
            .map(|n| usage.get(*n).and_then(Json::as_u64))
            .sum()
    };
    let report = AgentReport {
        session: result
            .get("session_id")
            .and_then(Json::as_str)
            .map(str::to_string),
        cost_usd: result.get("total_cost_usd").and_then(Json::as_f64),
        input_tokens: tokens(&[
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ])
        .or_else(|| tokens(&["input_tokens"])),
        output_tokens: tokens(&["output_tokens"]),
        ..AgentReport::default()
    };
    let text = result.get("result").and_then(Json::as_str).unwrap_or("");
    if result.get("is_error").and_then(Json::as_bool) == Some(true) {
        let subtype = result
            .get("subtype")
            .and_then(Json::as_str)
            .unwrap_or("error");
        let said = if text.is_empty() { subtype } else { text };
        return Reply::Failed(format!("Claude Code failed: {said}"), report);
    }
    if !wants_outputs {
        return Reply::Outputs(serde_json::Map::new(), report);
    }
    match result.get("structured_output") {
        Some(Json::Object(outputs)) => Reply::Outputs(outputs.clone(), report),
        _ => Reply::Malformed(
            format!(
                "Claude Code gave no structured output for the step's outputs; it said: {}",
                crate::display::clipped(text.trim(), 2000)
            ),
            report,
        ),
    }
}
