//! `--agent codex`: the Codex CLI headless. Each question is one `codex exec --json` with the
//! prompt on stdin; an llm step that expects outputs gets `--output-schema FILE`, so the
//! last agent message is the outputs as JSON. The first question starts a thread and the next
//! ones `codex exec resume` it, so Codex keeps the context of the whole run, as over MCP.
//! `--json` prints one event per line: `thread.started` (the thread id), `item.completed`
//! (an `agent_message` holds the answer), `turn.completed` (token counts), `turn.failed`
//! and `error`. Codex reports no cost.

use std::time::Duration;

use serde_json::Value as Json;

use super::headless::{Agent, Reply, Request, run_agent, shell_quote};
use crate::engine::CancelToken;
use crate::engine::step::AgentReport;

/// The program, found on `PATH`.
const PROGRAM: &str = "codex";

/// The Codex CLI, found as `codex` on `PATH`.
pub(crate) struct CodexAgent;

impl CodexAgent {
    /// The command line for `request`, with the outputs' schema in `schema_file` (the prompt
    /// goes on stdin).
    fn command(&self, request: &Request, schema_file: Option<&std::path::Path>) -> String {
        let mut command = format!("{PROGRAM} exec");
        if let Some(session) = &request.session {
            command.push_str(" resume ");
            command.push_str(&shell_quote(session));
        }
        command.push_str(" --json --skip-git-repo-check");
        if let Some(file) = schema_file {
            command.push_str(" --output-schema ");
            command.push_str(&shell_quote(&file.display().to_string()));
        }
        command.push_str(" -");
        command
    }
}

impl Agent for CodexAgent {
    fn ask(&mut self, request: &Request, timeout: Duration, cancel: &CancelToken) -> Reply {
        let prompt = request.cli_prompt();
        let schema = match write_schema(request) {
            Ok(schema) => schema,
            Err(e) => {
                return Reply::Failed(
                    format!("cannot write the outputs' schema for Codex: {e}"),
                    AgentReport::default(),
                );
            }
        };
        match run_agent(
            &self.command(request, schema.as_ref().map(tempfile::NamedTempFile::path)),
            prompt.as_bytes(),
            request,
            timeout,
            cancel,
        ) {
            Ok(stdout) => read_events(&stdout, request.wants_outputs()),
            Err(stopped) => stopped.into(),
        }
    }
}

/// The outputs' JSON Schema in a file, for `--output-schema`, when the step expects outputs.
/// OpenAI's structured outputs want every property required and no others allowed.
fn write_schema(request: &Request) -> std::io::Result<Option<tempfile::NamedTempFile>> {
    if !request.wants_outputs() {
        return Ok(None);
    }
    let mut schema = request.schema.clone();
    if let Some(object) = schema.as_object_mut() {
        let names: Vec<Json> = object
            .get("properties")
            .and_then(Json::as_object)
            .map(|p| p.keys().cloned().map(Json::String).collect())
            .unwrap_or_default();
        object.insert("required".into(), Json::Array(names));
        object.insert("additionalProperties".into(), Json::Bool(false));
    }
    let mut file = tempfile::Builder::new()
        .prefix("mekara-codex-schema-")
        .suffix(".json")
        .tempfile()?;
    std::io::Write::write_all(&mut file, schema.to_string().as_bytes())?;
    Ok(Some(file))
}

/// Reads the events `codex exec --json` printed.
fn read_events(stdout: &str, wants_outputs: bool) -> Reply {
    let mut report = AgentReport::default();
    let mut answer: Option<String> = None;
    let mut failure: Option<String> = None;
    let mut events = 0;
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let Ok(event) = serde_json::from_str::<Json>(line) else {
            continue;
        };
        events += 1;
        let text = |key: &str| event.get(key).and_then(Json::as_str).map(str::to_string);
        match event.get("type").and_then(Json::as_str) {
            Some("thread.started") => report.session = text("thread_id"),
            Some("item.completed") => {
                let item = event.get("item");
                if item.and_then(|i| i.get("type")).and_then(Json::as_str) == Some("agent_message")
                {
                    answer = item
                        .and_then(|i| i.get("text"))
                        .and_then(Json::as_str)
                        .map(str::to_string);
                }
            }
            Some("turn.completed") => {
                let usage = event.get("usage");
                let count = |k: &str| usage.and_then(|u| u.get(k)).and_then(Json::as_u64);
                report.input_tokens = count("input_tokens");
                report.output_tokens = count("output_tokens");
            }
            Some("turn.failed") => {
                failure = event
                    .get("error")
                    .and_then(|e| e.get("message"))
                    .and_then(Json::as_str)
                    .map(str::to_string)
                    .or(Some("the turn failed".into()));
            }
            Some("error") => failure = text("message").or(failure),
            _ => {}
        }
    }
    if events == 0 {
        return Reply::Failed(
            format!(
                "Codex did not print its JSON events; it wrote: {}",
                crate::display::clipped(stdout.trim(), 2000)
            ),
            report,
        );
    }
    if let Some(failure) = failure {
        return Reply::Failed(format!("Codex failed: {failure}"), report);
    }
    if !wants_outputs {
        return Reply::Outputs(serde_json::Map::new(), report);
    }
    let said = answer.unwrap_or_default();
    match serde_json::from_str::<Json>(said.trim()) {
        Ok(Json::Object(outputs)) => Reply::Outputs(outputs, report),
        _ => Reply::Malformed(
            format!(
                "Codex's last message is not the step's outputs as a JSON object; it said: {}",
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
    fn events_give_the_outputs_the_thread_and_the_tokens() {
        let stdout = concat!(
            r#"{"type":"thread.started","thread_id":"t-1"}"#,
            "\n",
            r#"{"type":"turn.started"}"#,
            "\n",
            r#"{"type":"item.completed","item":{"id":"i","type":"agent_message","text":"{\"colour\":\"red\"}"}}"#,
            "\n",
            r#"{"type":"turn.completed","usage":{"input_tokens":12,"cached_input_tokens":0,"output_tokens":3}}"#,
            "\n"
        );
        match read_events(stdout, true) {
            Reply::Outputs(outputs, report) => {
                assert_eq!(outputs["colour"], "red");
                assert_eq!(report.session.as_deref(), Some("t-1"));
                assert_eq!(
                    (report.input_tokens, report.output_tokens),
                    (Some(12), Some(3))
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn failures_and_wrong_answers_are_told_apart() {
        let failed = r#"{"type":"turn.failed","error":{"message":"quota"}}"#;
        assert!(
            matches!(read_events(failed, true), Reply::Failed(e, _) if e == "Codex failed: quota")
        );
        let prose = r#"{"type":"item.completed","item":{"type":"agent_message","text":"red"}}"#;
        assert!(matches!(read_events(prose, true), Reply::Malformed(..)));
        assert!(matches!(
            read_events("not json at all", true),
            Reply::Failed(..)
        ));
        assert!(matches!(read_events(prose, false), Reply::Outputs(o, _) if o.is_empty()));
    }
}
