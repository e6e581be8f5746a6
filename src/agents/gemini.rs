//! Gemini CLI: its model sees mekara's tools as `mcp_mekara_NAME`; `--client gemini` adds
//! the `mekara` server to `.gemini/settings.json`; `--agent gemini` runs it headless.
//!
//! Headless, each question is one `gemini --output-format json
//! -p ''` with the prompt on stdin (`-p` appends its text to stdin's). Gemini CLI has no
//! structured-output option, so an llm step that expects outputs has their JSON Schema at
//! the end of its prompt, and the outputs are the last JSON object of the answer. The first
//! question starts a session and the next ones `--resume` it by id, so Gemini keeps the
//! context of the whole run, as over MCP. The JSON result holds `session_id`, `response`,
//! `stats` (token counts per model) and, when it failed, `error`. Gemini CLI reports no cost.

use std::time::Duration;

use serde_json::{Value as Json, json};

use super::clients::{Client, Served};
use super::headless::{Agent, Reply, Request, Stopped, last_json_object, run_agent};
use super::rate_limit::{RateLimited, is_limit_status, says_final, says_limited};
use super::tools::{AgentTool, SERVER_NAME};
use crate::display::shell_quote;
use crate::engine::CancelToken;
use crate::engine::step::AgentReport;
use crate::install::{InstallError, Setup};

/// Gemini CLI.
pub(crate) const CLIENT: Client = Client {
    name: "gemini",
    help: "Gemini CLI (`.gemini/settings.json`)",
    is_client_info: |name| name == "gemini-cli-mcp-client",
    tool_name,
    // It fills the required ones from the typed words (all of them into the one there is;
    // nothing typed gives it `""`) and drops them for optional ones. (Claude Code refuses a
    // command whose required argument is not typed, so everywhere else it stays optional.)
    fills_only_required_arguments: true,
    always: false,
    install,
    left_for_you: |user| Some(left_for_you(user)),
    note_rank: 5,
    headless: Some(|| Box::new(GeminiAgent)),
};

/// `mcp_mekara_start`.
fn tool_name(tool: AgentTool, _: Served) -> String {
    format!("mcp_{SERVER_NAME}_{}", tool.name())
}

/// `settings.json`: the `mekara` server, trusted. Gemini asks before every call of an
/// untrusted server's tools, and without a person to ask (`gemini -p`) it does not offer them
/// to the model at all; `trust` is its one switch for a server's tools.
fn install(setup: &mut Setup<'_>) -> Result<(), InstallError> {
    let path = setup.base().join(".gemini/settings.json");
    let entry = json!({"command": "mekara", "args": ["mcp"], "trust": true});
    setup.server_entry(&path, "mcpServers", &entry)
}

fn left_for_you(user: bool) -> String {
    let folders = if user {
        "each folder you use it in"
    } else {
        "this folder"
    };
    format!(
        "start `gemini` in {folders} once and trust the folder: Gemini CLI neither \
         reads an untrusted folder's `.gemini/settings.json` nor starts any MCP server \
         there (`gemini -p` refuses to run in it)"
    )
}

/// Gemini CLI's exit code when it will not run headless in a folder it does not trust.
const UNTRUSTED_FOLDER: &str = "exited with code 55";

/// The program, found on `PATH`.
const PROGRAM: &str = "gemini";

/// Gemini CLI, found as `gemini` on `PATH`.
pub(crate) struct GeminiAgent;

impl GeminiAgent {
    /// The command line for `request` (the prompt goes on stdin).
    fn command(&self, request: &Request) -> String {
        let mut command = format!("{PROGRAM} --output-format json");
        if let Some(session) = &request.session {
            command.push_str(" --resume ");
            command.push_str(&shell_quote(session));
        }
        command.push_str(" -p ''");
        command
    }
}

impl Agent for GeminiAgent {
    fn ask(&mut self, request: &Request, timeout: Duration, cancel: &CancelToken) -> Reply {
        let mut prompt = super::reply::cli_prompt(request);
        if request.wants_outputs() {
            prompt.push_str(&super::reply::json_answer_request(&request.schema));
        }
        match run_agent(
            &self.command(request),
            prompt.as_bytes(),
            request,
            timeout,
            cancel,
        ) {
            Ok(stdout) => read_result(&stdout, request.wants_outputs()),
            Err(Stopped::Failed(error, _)) if error.contains(UNTRUSTED_FOLDER) => {
                Reply::Failed(untrusted(request), AgentReport::default())
            }
            // Gemini CLI gives up on an API error with a non-zero exit and its JSON error
            // last on stderr (`{"error": {"code": 429, ...}}`): a limit to wait out, or a
            // failure told in the error's own words (a daily quota), not in all of stderr.
            Err(Stopped::Failed(error, said)) => {
                let told = |reply: &Reply| match reply {
                    Reply::RateLimited(..) => true,
                    Reply::Failed(e, _) => e.starts_with(GEMINI_FAILED),
                    _ => false,
                };
                [&said.stdout, &said.stderr]
                    .into_iter()
                    .map(|text| read_result(text, false))
                    .find(told)
                    .unwrap_or_else(|| Reply::Failed(error, AgentReport::default()))
            }
            Err(stopped) => stopped.into(),
        }
    }
}

/// Why Gemini CLI refused to run, and what to do about it (the run, saved, says how to
/// resume it).
fn untrusted(request: &Request) -> String {
    format!(
        "Gemini CLI does not trust the folder {}, so it will not run headless there: trust it \
         once (start `gemini` in that folder and answer its trust question), or set \
         GEMINI_CLI_TRUST_WORKSPACE=true in mekara's environment",
        request.working_dir.display()
    )
}

/// How a failure Gemini CLI reported in its JSON error begins.
const GEMINI_FAILED: &str = "Gemini CLI failed: ";

/// The model that used the most tokens in `result`'s `stats.models`: Gemini CLI routes some
/// requests to a smaller model, and the answer's tokens are priced at the main one's price
/// (an estimate that errs high).
fn main_model(result: &serde_json::Map<String, Json>) -> Option<String> {
    let models = result.get("stats")?.get("models")?.as_object()?;
    models
        .iter()
        .max_by_key(|(_, m)| {
            m.get("tokens")
                .and_then(|t| t.get("total"))
                .and_then(Json::as_u64)
                .unwrap_or(0)
        })
        .map(|(name, _)| name.clone())
}

/// Reads the result object `gemini --output-format json` prints.
fn read_result(stdout: &str, wants_outputs: bool) -> Reply {
    // Gemini CLI may print a line of its own before the JSON (a warning): the result is the
    // last JSON object it printed.
    let Some(result) = last_json_object(stdout) else {
        return Reply::Failed(
            format!(
                "Gemini CLI did not print its JSON result; it wrote: {}",
                crate::display::clipped(stdout.trim(), 2000)
            ),
            AgentReport::default(),
        );
    };
    let tokens = |kind: &str| -> Option<u64> {
        let models = result.get("stats")?.get("models")?.as_object()?;
        models
            .values()
            .map(|m| {
                m.get("tokens")
                    .and_then(|t| t.get(kind))
                    .and_then(Json::as_u64)
            })
            .sum()
    };
    let report = AgentReport {
        session: result
            .get("session_id")
            .and_then(Json::as_str)
            .map(str::to_string),
        input_tokens: tokens("prompt"),
        output_tokens: tokens("candidates"),
        model: main_model(&result),
        ..AgentReport::default()
    };
    if let Some(error) = result.get("error") {
        let message = error
            .get("message")
            .and_then(Json::as_str)
            .map_or_else(|| error.to_string(), str::to_string);
        // After its own retries (`general.maxAttempts` of its settings, 10 by default): 429
        // for a rate limit or an exhausted quota, 503 for an overloaded model. A daily quota
        // (or no billing) is a 429 too, but comes back only the next day: a failure.
        if !says_final(&message)
            && error
                .get("code")
                .and_then(Json::as_u64)
                .is_some_and(is_limit_status)
            || says_limited(&message)
        {
            return Reply::RateLimited(
                RateLimited::from_said(format!("Gemini CLI: {message}")),
                report,
            );
        }
        return Reply::Failed(format!("{GEMINI_FAILED}{message}"), report);
    }
    if !wants_outputs {
        return Reply::Outputs(serde_json::Map::new(), report);
    }
    let said = result.get("response").and_then(Json::as_str).unwrap_or("");
    match last_json_object(said) {
        Some(outputs) => Reply::Outputs(outputs, report),
        None => Reply::Malformed(
            format!(
                "Gemini's answer does not end with the step's outputs as a JSON object; it \
                 said: {}",
                crate::display::clipped(said.trim(), 2000)
            ),
            report,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_result_gives_the_outputs_the_session_and_the_tokens() {
        let stdout = r#"{
  "session_id": "s-1",
  "response": "Here it is:\n```json\n{\"colour\": \"red\", \"shade\": {\"dark\": true}}\n```",
  "stats": {"models": {
    "gemini-2.5-flash": {"tokens": {"prompt": 12, "candidates": 3, "total": 15}},
    "gemini-2.5-flash-lite": {"tokens": {"prompt": 2, "candidates": 1, "total": 3}}
  }}
}"#;
        match read_result(stdout, true) {
            Reply::Outputs(outputs, report) => {
                assert_eq!(outputs["colour"], "red");
                assert_eq!(outputs["shade"]["dark"], true);
                assert_eq!(report.session.as_deref(), Some("s-1"));
                assert_eq!(
                    (report.input_tokens, report.output_tokens),
                    (Some(14), Some(4))
                );
                // The main model's name, for its price.
                assert_eq!(report.model.as_deref(), Some("gemini-2.5-flash"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failures_and_wrong_answers_are_told_apart() {
        let failed = r#"{"session_id": "s", "error": {"type": "Error", "message": "quota"}}"#;
        assert!(
            matches!(read_result(failed, true), Reply::Failed(e, _) if e == "Gemini CLI failed: quota")
        );
        let prose = r#"{"session_id": "s", "response": "red"}"#;
        assert!(matches!(read_result(prose, true), Reply::Malformed(..)));
        assert!(matches!(
            read_result("not json at all", true),
            Reply::Failed(..)
        ));
        assert!(matches!(read_result(prose, false), Reply::Outputs(o, _) if o.is_empty()));
    }
}
