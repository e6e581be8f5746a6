//! One agent's session: an executor and what the agent has been shown. Every tool call
//! lands in [`Session::call`], which is synchronous (it runs auto steps) and is the one
//! entry point both the MCP transports and the VCR replay driver use.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::PathBuf;

use serde_json::{Map, Value as Json};

use super::reply::{self, Event, History, JournalRef, Progress};
use super::tools::{Tool, ToolCall};
use crate::engine::runs::{RunState, RunStore};
use crate::engine::{EngineError, Executor, Pending, Settings, StepRunner, Waiting};
use crate::script::{Resolver, ScriptError};

/// What a tool call gives back: Markdown, and whether it is an error the agent must act on.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The text the agent reads.
    pub text: String,
    /// Whether the call was refused or failed (`isError`).
    pub is_error: bool,
}

impl Reply {
    pub fn ok(text: String) -> Reply {
        Reply {
            text,
            is_error: false,
        }
    }

    pub fn error(text: String) -> Reply {
        Reply {
            text,
            is_error: true,
        }
    }
}

/// An agent's session with mekara.
pub struct Session {
    executor: Executor,
    store: RunStore,
    cwd: PathBuf,
    /// Labels of the compiled frames on the stack whose NL source this session has shown
    /// (a label leaves when its frame ends, and all leave when another run is taken up).
    shown: HashSet<String>,
    /// The pending item the agent was last told about, for `status`.
    last: Option<Pending>,
    /// Why `last` cannot be trusted: the last call was cancelled mid-step.
    interrupted: Option<String>,
}

impl Session {
    /// A session whose scripts run in `cwd` unless a call says otherwise.
    pub fn new(
        resolver: Resolver,
        store: RunStore,
        runner: Box<dyn StepRunner>,
        settings: Settings,
        cwd: PathBuf,
    ) -> Session {
        Session {
            executor: Executor::new(resolver, store.clone(), runner, settings),
            store,
            cwd,
            shown: HashSet::new(),
            last: None,
            interrupted: None,
        }
    }

    /// The token that stops the running step of this session from another thread.
    pub fn cancel_token(&self) -> crate::engine::CancelToken {
        self.executor.cancel_token()
    }

    /// The resolver scripts are found with.
    pub fn resolver(&self) -> &Resolver {
        self.executor.resolver()
    }

    /// Runs one call of `tool` with its raw `input`, checking the arguments first.
    /// `progress` hears about steps as they run.
    pub fn handle(
        &mut self,
        tool: Tool,
        input: Option<&Map<String, Json>>,
        progress: &dyn Fn(Progress<'_>),
    ) -> Reply {
        match tool.parse(input) {
            Ok(call) => self.call(call, progress),
            Err(message) => Reply::error(format!(
                "Refused: {}\nNothing changed in the run.",
                sentence(&message)
            )),
        }
    }

    /// Runs one checked tool call.
    pub fn call(&mut self, call: ToolCall, progress: &dyn Fn(Progress<'_>)) -> Reply {
        let history = History::new(progress);
        let outcome = match &call {
            ToolCall::Start {
                name,
                arguments,
                working_dir,
            } => {
                let dir = self.working_dir(working_dir.as_deref());
                self.executor.start(name, arguments, &dir, &history)
            }
            ToolCall::Continue { outputs } => self.executor.continue_llm(outputs.clone(), &history),
            ToolCall::Finish => self.executor.finish_nl(&history),
            ToolCall::Status => return self.status(),
            ToolCall::ListScripts => return self.list_scripts(),
            ToolCall::Resume { run_id: None } => return self.interrupted_runs(),
            ToolCall::Resume { run_id: Some(id) } => {
                return self.resume(id, history);
            }
            ToolCall::Eject { name, force } => return self.eject(name, *force),
        };
        self.reply(call.tool(), outcome, history.into_events(), String::new())
    }

    fn working_dir(&self, asked: Option<&str>) -> PathBuf {
        match asked {
            None | Some("") => self.cwd.clone(),
            Some(dir) => self.cwd.join(dir),
        }
    }

    /// The reply to a call that moved the run: what ran, then what is pending, or why the
    /// call was refused.
    fn reply(
        &mut self,
        tool: Tool,
        outcome: Result<Pending, EngineError>,
        events: Vec<Event>,
        preface: String,
    ) -> Reply {
        // Labels of frames that ended may be reused by frames pushed later.
        for event in &events {
            if let Event::Returned { path, .. } = event {
                self.shown.remove(path);
            }
        }
        // A run that just ended has no id in the executor any more; its reply still names it.
        let run = self
            .executor
            .run_id()
            .map(str::to_string)
            .or_else(|| match &outcome {
                Ok(Pending::Finished { run, .. }) => Some(run.clone()),
                _ => None,
            });
        let journal = run.as_deref().map(|run| JournalRef { run });
        let mut text = preface;
        text.push_str(&reply::steps(&events, journal.as_ref()));
        match outcome {
            Ok(pending) => {
                let source = self.nl_source_once(&pending);
                text.push_str(&reply::pending(
                    &pending,
                    source.as_ref().map(|(n, s)| (n.as_str(), s.as_str())),
                ));
                self.last = Some(pending);
                self.interrupted = None;
                Reply::ok(text)
            }
            Err(error) => {
                if let EngineError::Cancelled { .. } = &error {
                    self.interrupted = Some(error.to_string());
                }
                text.push_str(&self.refusal(tool, &error));
                Reply::error(text)
            }
        }
    }

    /// The NL source of the top frame, when it is compiled and this is the first time it
    /// needs the agent.
    fn nl_source_once(&mut self, pending: &Pending) -> Option<(String, String)> {
        if !matches!(pending, Pending::Llm { .. }) {
            return None;
        }
        let top = self.executor.frames().last()?;
        let label = self.executor.label();
        if !self.shown.insert(label) {
            return None;
        }
        Some((top.script.name.to_string(), top.script.nl.text.clone()))
    }

    /// Says why `error` stopped the call, and what to call instead.
    fn refusal(&self, tool: Tool, error: &EngineError) -> String {
        let pending_path = match &self.last {
            Some(Pending::Llm { path, .. } | Pending::Nl { path, .. }) => format!(" `{path}`"),
            Some(Pending::Fallback { path, .. }) => format!(" `{path}`"),
            _ => String::new(),
        };
        match error {
            EngineError::WrongCall { waiting, .. } => {
                let instead = match waiting {
                    Waiting::LlmStep => format!(
                        "An llm step{pending_path} is pending, not an NL script: do that one \
                         step, then call `continue_compiled_script` with its outputs. \
                         `finish_nl_script` is only for NL scripts and failed scripts finished \
                         by hand."
                    ),
                    Waiting::NlScript => format!(
                        "An NL script{pending_path} is pending, not an llm step: follow all of \
                         its instructions, then call `finish_nl_script`."
                    ),
                    Waiting::Fallback => format!(
                        "A failed script{pending_path} is waiting to be finished by hand: do \
                         what is left of it, then call `finish_nl_script`."
                    ),
                    Waiting::Nothing => "Nothing is pending: no script is running. Call \
                                         `start` to run a script (`list_scripts` lists them)."
                        .to_string(),
                };
                format!(
                    "Refused: `{}` does not fit now. {instead}\nNothing changed in the run.",
                    tool.name()
                )
            }
            EngineError::Outputs { .. } => format!(
                "Refused: {error}. Call `continue_compiled_script` again with every expected \
                 output in `outputs`.\nNothing changed in the run."
            ),
            EngineError::Script(ScriptError::NotFound { suggestions, .. })
                if suggestions.is_empty() =>
            {
                format!(
                    "Refused: {}. Call `list_scripts` to see the scripts there are.\nNothing changed in the run.",
                    error.to_string().split(';').next().unwrap_or_default()
                )
            }
            EngineError::Script(_)
            | EngineError::BadWorkingDir { .. }
            | EngineError::TooDeep { .. } => {
                format!(
                    "Refused: {}\nNothing changed in the run.",
                    sentence(&error.to_string())
                )
            }
            EngineError::Cancelled { .. } => format!(
                "Stopped: {error}. The step that was running left no record and runs again \
                 when the run is resumed: call `resume` with `{{\"run_id\": \"{}\"}}`.",
                self.executor.run_id().unwrap_or_default()
            ),
            _ => format!("Error: {error}."),
        }
    }

    /// `status`: the stack and the pending item, without running anything.
    fn status(&self) -> Reply {
        let mut text = String::from("## Status\n\n");
        let Some(run) = self.executor.run_id() else {
            text.push_str("No script is running in this session.");
            if let Some(Pending::Finished { run, .. }) = &self.last {
                let _ = write!(text, " The last run, `{run}`, has ended.");
            }
            text.push_str(
                " Call `start` to run a script (`list_scripts` lists them), or `resume` to \
                 list runs that were interrupted.\n",
            );
            return Reply::ok(text);
        };
        let _ = writeln!(text, "Run `{run}`. The stack, outermost first:\n");
        for (depth, frame) in self.executor.frames().iter().enumerate() {
            let kind = if frame.is_compiled() {
                "compiled"
            } else {
                "NL"
            };
            let _ = write!(
                text,
                "{}. `{}` ({kind}, {} done, in `{}`)",
                depth + 1,
                frame.script.name,
                steps(frame.steps.len()),
                shown_dir(&frame.working_dir, &self.cwd)
            );
            if !frame.request.is_empty() {
                let _ = write!(text, " with arguments {}", quote(&frame.request));
            }
            text.push('\n');
        }
        text.push('\n');
        match (&self.interrupted, &self.last) {
            (Some(why), _) => {
                let _ = writeln!(
                    text,
                    "The last call was stopped: {why}. Call `resume` with \
                     `{{\"run_id\": \"{run}\"}}` to go on."
                );
            }
            (None, Some(pending)) => {
                text.push_str("Pending now (repeated from the last reply):\n\n");
                text.push_str(&reply::pending(pending, None));
            }
            (None, None) => {
                let _ = writeln!(
                    text,
                    "Call `resume` with `{{\"run_id\": \"{run}\"}}` to see what is pending."
                );
            }
        }
        Reply::ok(text)
    }

    fn list_scripts(&self) -> Reply {
        let entries = self.resolver().list();
        if entries.is_empty() {
            return Reply::ok("No scripts found.\n".to_string());
        }
        let mut text = String::from(
            "## Scripts\n\nStart one with `start` (`{\"name\": \"<name>\", \"arguments\": \
             \"...\"}`). Compiled scripts run their auto steps themselves; NL scripts are \
             followed by you.\n\n",
        );
        for entry in entries {
            let kind = if entry.compiled { "compiled" } else { "NL" };
            let _ = write!(text, "- `{}` ({kind}, {})", entry.name, entry.level);
            if !entry.description.is_empty() {
                let _ = write!(text, ": {}", entry.description);
            }
            text.push('\n');
        }
        Reply::ok(text)
    }

    /// `eject_script(name, force)`: copy a bundled script into the server's project.
    fn eject(&self, name: &str, force: bool) -> Reply {
        let root = crate::paths::Locations::discover(&self.cwd)
            .project_root
            .unwrap_or_else(|| self.cwd.clone());
        match crate::script::eject::eject(name, &root.join(".mekara"), force) {
            Ok(ejected) => {
                let mut text = format!(
                    "Copied the bundled script `{}` into the project:\n\n",
                    ejected.name
                );
                for file in &ejected.files {
                    let _ = writeln!(
                        text,
                        "- `{}`",
                        file.strip_prefix(&root).unwrap_or(file).display()
                    );
                }
                text.push_str(
                    "\nChange it there: the project's copy now wins over the bundled one.\n",
                );
                Reply::ok(text)
            }
            Err(e) => Reply::error(format!("Refused: {}.\nNothing was written.", e)),
        }
    }

    /// `resume()` without an id: the runs a restart interrupted.
    fn interrupted_runs(&self) -> Reply {
        let runs: Vec<_> = self
            .store
            .list()
            .into_iter()
            .filter(|r| r.state == RunState::Interrupted)
            .collect();
        if runs.is_empty() {
            return Reply::ok(
                "## Interrupted runs\n\nNone: no run is waiting to be resumed. Call `start` to \
                 run a script.\n"
                    .to_string(),
            );
        }
        let mut text = String::from(
            "## Interrupted runs\n\nNewest first. Call `resume` with `{\"run_id\": \"<id>\"}` \
             to take one up again; auto steps that finished do not run again.\n\n",
        );
        for run in runs.iter().rev() {
            let _ = writeln!(
                text,
                "- `{}`: `{}`, {} done, started {}",
                run.id,
                run.script,
                steps(run.steps),
                crate::cli::format_time(run.started_at)
            );
        }
        Reply::ok(text)
    }

    /// `resume(run_id)`: take the run up (or re-derive the pending step of the current one).
    fn resume(&mut self, id: &str, history: History<'_>) -> Reply {
        let mut preface = String::new();
        if self.executor.run_id() != Some(id) {
            let previous = self.executor.run_id().map(str::to_string);
            match self.executor.switch_to(id) {
                Ok(torn) => {
                    self.shown.clear();
                    self.last = None;
                    self.interrupted = None;
                    let _ = writeln!(preface, "Resumed run `{id}`.");
                    if let Some(previous) = previous {
                        let _ = writeln!(
                            preface,
                            "Run `{previous}` was set aside; it can be resumed later."
                        );
                    }
                    if let Some(torn) = torn {
                        let _ = writeln!(
                            preface,
                            "The run's last record was torn ({} bytes at byte {}): mekara \
                             stopped mid-write; that step runs again.",
                            torn.len, torn.offset
                        );
                    }
                    preface.push('\n');
                }
                Err(e) => {
                    let hint = match &e {
                        EngineError::RunNotFound { .. } => {
                            " Call `resume` without arguments to list the interrupted runs."
                        }
                        _ => "",
                    };
                    return Reply::error(format!(
                        "Refused: {}{hint}\nNothing changed.",
                        sentence(&e.to_string())
                    ));
                }
            }
        } else {
            let _ = writeln!(preface, "Run `{id}` is this session's run; going on.\n");
        }
        let outcome = self.executor.advance(&history);
        self.reply(Tool::Resume, outcome, history.into_events(), preface)
    }
}

/// `1 step`, `3 steps`.
fn steps(n: usize) -> String {
    if n == 1 {
        "1 step".to_string()
    } else {
        format!("{n} steps")
    }
}

/// A folder as the agent sees it: relative to the session's folder when inside it.
pub fn shown_dir(dir: &std::path::Path, cwd: &std::path::Path) -> String {
    match dir.strip_prefix(cwd) {
        Ok(rest) if rest.as_os_str().is_empty() => ".".to_string(),
        Ok(rest) => rest.display().to_string(),
        Err(_) => dir.display().to_string(),
    }
}

/// `text` ending in a full stop, unless it ends in other punctuation.
fn sentence(text: &str) -> String {
    let text = text.trim_end();
    if text.ends_with(['.', '?', '!']) {
        text.to_string()
    } else {
        format!("{text}.")
    }
}

/// `"text"` with JSON escapes, so any arguments show unambiguously.
fn quote(text: &str) -> String {
    serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}"))
}
