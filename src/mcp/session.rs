//! One agent's session: an executor and what the agent has been shown. Every tool call
//! lands in [`Session::call`], which is synchronous (it runs auto steps) and is the one
//! entry point both the MCP transports and the VCR replay driver use.

use std::collections::HashSet;
use std::path::PathBuf;

use serde_json::{Map, Value as Json};

use super::history::{CallEvent, History, Progress};
use super::reply::{self, JournalRef, Reply};
use super::tools::{AgentCall, AgentTool};
use crate::engine::runs::{RunState, RunStore};
use crate::engine::{EngineError, Executor, Pending, Settings, StepRunner};
use crate::script::{Listing, Resolver};

/// An agent's session with mekara.
pub(crate) struct Session {
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
    pub(crate) fn new(
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
    pub(crate) fn cancel_token(&self) -> crate::engine::CancelToken {
        self.executor.cancel_token()
    }

    /// The resolver scripts are found with.
    pub(crate) fn resolver(&self) -> &Resolver {
        self.executor.resolver()
    }

    /// Runs one call of `tool` with its raw `input`, checking the arguments first.
    /// `progress` hears about steps as they run.
    pub(crate) fn handle(
        &mut self,
        tool: AgentTool,
        input: Option<&Map<String, Json>>,
        progress: &dyn Fn(Progress<'_>),
    ) -> Reply {
        match tool.parse(input) {
            Ok(call) => self.call(call, progress),
            Err(error) => Reply::error(reply::argument_refusal(&error)),
        }
    }

    /// Runs one checked tool call.
    pub(crate) fn call(&mut self, call: AgentCall, progress: &dyn Fn(Progress<'_>)) -> Reply {
        let history = History::new(progress);
        let outcome = match &call {
            AgentCall::Start {
                name,
                arguments,
                working_dir,
            } => {
                let dir = self.working_dir(working_dir.as_deref());
                self.executor.start(name, arguments, &dir, &history)
            }
            AgentCall::Continue { outputs } => {
                self.executor.continue_llm(outputs.clone(), &history)
            }
            AgentCall::Finish => self.executor.finish_nl(&history),
            AgentCall::Status => return self.status(),
            AgentCall::ListScripts { all } => return self.list_scripts(*all),
            AgentCall::Resume { run_id: None } => return self.interrupted_runs(),
            AgentCall::Resume { run_id: Some(id) } => {
                return self.resume(id, history);
            }
            AgentCall::Eject { name, force } => return self.eject(name, *force),
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
        tool: AgentTool,
        outcome: Result<Pending, EngineError>,
        events: Vec<CallEvent>,
        preface: String,
    ) -> Reply {
        // Labels of frames that ended may be reused by frames pushed later.
        for event in &events {
            if let CallEvent::Returned { path, .. } = event {
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
        text.push_str(&reply::steps_executed(&events, journal.as_ref()));
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
                text.push_str(&reply::refusal(
                    tool,
                    &error,
                    self.last.as_ref(),
                    self.executor.run_id(),
                ));
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

    /// `status`: the stack and the pending item, without running anything.
    fn status(&self) -> Reply {
        Reply::ok(reply::status(
            self.executor.run_id(),
            self.executor.frames(),
            &self.cwd,
            self.last.as_ref(),
            self.interrupted.as_deref(),
        ))
    }

    fn list_scripts(&self, all: bool) -> Reply {
        let listing = Listing::all_if(all);
        Reply::ok(reply::scripts(&self.resolver().list(listing), listing))
    }

    /// `eject_script(name, force)`: copy a bundled script into the server's project.
    fn eject(&self, name: &str, force: bool) -> Reply {
        let root = crate::paths::Locations::discover(&self.cwd)
            .project_root
            .unwrap_or_else(|| self.cwd.clone());
        match crate::script::eject::eject(name, &root.join(".mekara"), force) {
            Ok(ejected) => Reply::ok(reply::ejected(&ejected, &root)),
            Err(e) => Reply::error(reply::eject_refused(&e)),
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
        Reply::ok(reply::interrupted_runs(&runs))
    }

    /// `resume(run_id)`: take the run up (or re-derive the pending step of the current one).
    fn resume(&mut self, id: &str, history: History<'_>) -> Reply {
        let preface = if self.executor.run_id() == Some(id) {
            reply::resumed_same(id)
        } else {
            let previous = self.executor.run_id().map(str::to_string);
            match self.executor.switch_to(id) {
                Ok(torn) => {
                    self.shown.clear();
                    self.last = None;
                    self.interrupted = None;
                    reply::resumed(id, previous.as_deref(), torn.as_ref())
                }
                Err(e) => return Reply::error(reply::resume_refused(&e)),
            }
        };
        let outcome = self.executor.advance(&history);
        self.reply(AgentTool::Resume, outcome, history.into_events(), preface)
    }
}
