//! Codex: its model sees mekara's tools in a namespace named after the server
//! (`mcp__mekara`) under their own names; `--client codex` adds `[mcp_servers.mekara]` to
//! `.codex/config.toml`; `--agent codex` runs the Codex CLI headless.
//!
//! Headless, each question is one `codex exec --json` with the
//! prompt on stdin; an llm step that expects outputs gets `--output-schema FILE`, so the
//! last agent message is the outputs as JSON. The first question starts a thread and the next
//! ones `codex exec resume` it, so Codex keeps the context of the whole run, as over MCP.
//! `--json` prints one event per line: `thread.started` (the thread id), `item.completed`
//! (an `agent_message` holds the answer), `turn.completed` (token counts), `turn.failed`
//! and `error`. Codex reports no cost.

use std::path::Path;
use std::time::Duration;

use serde_json::Value as Json;

use super::clients::{Client, Served};
use super::headless::{Agent, Reply, Request, Stopped, run_agent};
use super::rate_limit::{RateLimited, says_limited};
use super::tools::{AgentTool, SERVER_NAME};
use crate::display::shell_quote;
use crate::engine::CancelToken;
use crate::engine::step::AgentReport;
use crate::install::edits::{Edit, EditError, read_optional};
use crate::install::{Action, Change, Direction, InstallError, Setup};

/// Codex.
pub(crate) const CLIENT: Client = Client {
    name: "codex",
    help: "Codex (`.codex/config.toml`)",
    is_client_info: |name| name == "codex-mcp-client",
    tool_name,
    fills_only_required_arguments: false,
    always: false,
    install,
    left_for_you,
    note_rank: 2,
    headless: Some(|| Box::new(CodexAgent)),
};

/// `start`: the tool's own name, in the server's namespace.
fn tool_name(tool: AgentTool, _: Served) -> String {
    tool.name().to_string()
}

fn install(setup: &mut Setup<'_>) -> Result<(), InstallError> {
    let path = setup.base().join(".codex/config.toml");
    let edit = config_edit(&path, setup.direction())?;
    setup.edit(edit);
    Ok(())
}

fn left_for_you(user: bool) -> Option<String> {
    (!user).then(|| {
        "trust this folder in Codex once: start `codex` in it and trust it when \
         asked, or run `codex exec --trust` (until then Codex ignores \
         `.codex/config.toml`, so it does not start the `mekara` server)"
            .to_string()
    })
}

/// The setting of a Codex MCP server that lets its tools run without asking: Codex refuses a
/// tool call that needs approval when nobody can give it (`codex exec` runs with the approval
/// policy `never`), and asks for each call in the TUI. mekara's tools only run the person's
/// own scripts, as Claude Code's `permissions.allow` entries say too.
const CODEX_APPROVAL: (&str, &str) = ("default_tools_approval_mode", "approve");

/// Codex's `config.toml`: `[mcp_servers.mekara]`, with its tools approved. Edited with
/// `toml_edit`, so comments and layout stay.
fn config_edit(path: &Path, direction: Direction) -> Result<Edit, EditError> {
    use toml_edit::{DocumentMut, Item, Table, value};
    let existing = read_optional(path)?;
    let text = existing.clone().unwrap_or_default();
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        let line = e.span().map_or(1, |span| {
            text[..span.start.min(text.len())].matches('\n').count() + 1
        });
        EditError::Parse {
            path: path.to_path_buf(),
            reason: format!("{} (line {line})", e.message().trim_end()),
        }
    })?;
    let name = SERVER_NAME;
    let (approval_key, approval) = CODEX_APPROVAL;
    let approved = |item: &Item| item.get(approval_key).and_then(Item::as_str) == Some(approval);
    // What install writes; without the approval setting, what installs before it wrote.
    let is_ours = |item: &Item| {
        item.get("command").and_then(Item::as_str) == Some("mekara")
            && item
                .get("args")
                .and_then(Item::as_array)
                .is_some_and(|a| a.len() == 1 && a.get(0).and_then(|v| v.as_str()) == Some("mcp"))
            && item
                .as_table_like()
                .is_some_and(|t| t.len() == 2 || (t.len() == 3 && approved(item)))
    };
    let approval_detail =
        format!("+ its tools run without an approval prompt (`{approval_key} = \"{approval}\"`)");
    let mut details = Vec::new();
    let mut kept = Vec::new();
    let shape = |found: &Item| EditError::Shape {
        path: path.to_path_buf(),
        key: "mcp_servers".to_string(),
        expected: "a table",
        found: format!("a value of type {}", found.type_name()),
    };
    match direction {
        Direction::Install => {
            let item = doc.entry("mcp_servers").or_insert_with(|| {
                let mut t = Table::new();
                t.set_implicit(true);
                Item::Table(t)
            });
            if !item.is_table_like() {
                return Err(shape(item));
            }
            let servers = item
                .as_table_like_mut()
                .expect("checked to be table-like just above");
            match servers.get(name) {
                None => {
                    let mut t = Table::new();
                    t.insert("command", value("mekara"));
                    t.insert("args", value(toml_edit::Array::from_iter(["mcp"])));
                    t.insert(approval_key, value(approval));
                    servers.insert(name, Item::Table(t));
                    details.push(format!("+ MCP server `{name}` (runs `mekara mcp`)"));
                    details.push(approval_detail);
                }
                Some(item) if is_ours(item) => {
                    if !approved(item) {
                        let server = servers
                            .get_mut(name)
                            .and_then(Item::as_table_like_mut)
                            .expect("checked to be ours, a table, just above");
                        server.insert(approval_key, value(approval));
                        details.push(approval_detail);
                    }
                }
                Some(_) => kept.push(format!(
                    "`{}` already has a server `{name}` with other settings: left as is",
                    path.display()
                )),
            }
        }
        Direction::Uninstall => {
            if let Some(servers) = doc.get_mut("mcp_servers").and_then(Item::as_table_like_mut) {
                match servers.get(name) {
                    Some(item) if is_ours(item) => {
                        servers.remove(name);
                        details.push(format!("- MCP server `{name}`"));
                    }
                    Some(_) => kept.push(format!(
                        "`{}` has a server `{name}` that install did not write: left as is",
                        path.display()
                    )),
                    None => {}
                }
                if servers.is_empty() {
                    doc.remove("mcp_servers");
                }
            }
        }
    }
    let new_text = doc.to_string();
    let action = if new_text == text {
        None
    } else if doc.as_table().is_empty() && direction == Direction::Uninstall {
        Some(Action::Remove)
    } else {
        Some(Action::Write {
            text: new_text,
            created: existing.is_none(),
        })
    };
    Ok(Edit {
        change: action.map(|action| Change {
            path: path.to_path_buf(),
            action,
            details,
        }),
        kept,
    })
}

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
        let prompt = super::reply::cli_prompt(request);
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
            Ok(stdout) => read_events(&stdout, request.wants_outputs()).map_report(|mut r| {
                r.model = configured_model();
                r
            }),
            // Codex exits 1 when a turn fails, its events on stdout: a rate limit or an
            // overload is told by the words of its `turn.failed`.
            Err(Stopped::Failed(error, said)) => match read_events(&said.stdout, false) {
                limited @ Reply::RateLimited(..) => limited,
                _ => Reply::Failed(error, AgentReport::default()),
            },
            Err(stopped) => stopped.into(),
        }
    }
}

/// The model the person's Codex configuration names (`model` of `$CODEX_HOME/config.toml`,
/// `~/.codex/config.toml` by default, the home being `%USERPROFILE%` on Windows), for its
/// price: Codex's events do not name it. `None` when it names none (Codex's own default then answers, whose price mekara cannot know).
fn configured_model() -> Option<String> {
    let home = std::env::var_os("CODEX_HOME")
        .map(std::path::PathBuf::from)
        .or_else(|| crate::paths::home_dir().map(|h| h.join(".codex")))?;
    let text = std::fs::read_to_string(home.join("config.toml")).ok()?;
    let config: toml::Table = toml::from_str(&text).ok()?;
    config.get("model")?.as_str().map(str::to_string)
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
        // After its own retries (`request_max_retries` and `stream_max_retries` of the
        // model provider), Codex says `exceeded retry limit, last status: 429 Too Many
        // Requests`.
        if says_limited(&failure) {
            return Reply::RateLimited(RateLimited::from_said(format!("Codex: {failure}")), report);
        }
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
