//! One run as an agent drives it: an executor and what the agent has been shown of its run.
//! A server's registry (`crate::mcp::registry`) holds any number of them, keyed by run, and routes every
//! tool call that moves or shows a run to one of them, in [`Session::call`], which is
//! synchronous (it runs auto steps).

use std::collections::HashSet;
use std::path::PathBuf;

use super::history::{CallEvent, History, Progress};
use super::reply::{self, JournalRef, Reply};
use super::tools::{AgentCall, AgentTool};
use crate::engine::journal::TornTail;
use crate::engine::step::{AgentReport, AnsweredBy};
use crate::engine::store::RunStore;
use crate::engine::{
    Claim, EngineError, Executor, Pending, Rewind, RewindPlan, Settings, StepRunner,
};
use crate::script::Resolver;

/// What an agent process did with the pending item.
pub(crate) enum Answered {
    /// The llm step's outputs.
    Outputs(serde_json::Map<String, serde_json::Value>),
    /// It could not do the llm step: the step fails with this error.
    Failed(String),
    /// It did the NL script or fallback.
    Finished,
}

/// A run an agent drives (or, before its first `start`, will drive).
pub(crate) struct Session {
    executor: Executor,
    cwd: PathBuf,
    /// Labels of the compiled frames on the stack whose NL source this session has shown
    /// (a label leaves when its frame ends, and all leave when the run is taken up anew).
    shown: HashSet<String>,
    /// The pending item the agent was last told about, for `status`.
    last: Option<Pending>,
    /// Why `last` cannot be trusted: the last call was cancelled mid-step.
    interrupted: Option<String>,
    /// What happened while the tasks of a `parallel` group were answered, for the reply
    /// that goes on after them.
    carried: Vec<CallEvent>,
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
            executor: Executor::new(resolver, store, runner, settings),
            cwd,
            shown: HashSet::new(),
            last: None,
            interrupted: None,
            carried: Vec::new(),
        }
    }

    /// A session that takes run `id` up from its journal, as the person who owns the run's
    /// files (`mekara run --resume ID --agent …`), retried or rewound first as `rewind` asks
    /// (`--retry`, `--from`; a rewound run may have ended).
    #[allow(clippy::too_many_arguments)] // the parts of a session, and which run to take up
    pub(crate) fn resume(
        resolver: Resolver,
        store: RunStore,
        runner: Box<dyn StepRunner>,
        settings: Settings,
        cwd: PathBuf,
        id: &str,
        rewind: Option<&Rewind>,
    ) -> Result<(Session, Option<TornTail>, Option<RewindPlan>), EngineError> {
        let (executor, torn, plan) =
            Executor::resume(resolver, store, runner, settings, id, rewind)?;
        let session = Session {
            executor,
            cwd,
            shown: HashSet::new(),
            last: None,
            interrupted: None,
            carried: Vec::new(),
        };
        Ok((session, torn, plan))
    }

    /// Whether the last call was cancelled mid-step (Ctrl-C): the run is left resumable.
    pub(crate) fn interrupted(&self) -> bool {
        self.interrupted.is_some()
    }

    /// What the last reply left pending.
    pub(crate) fn pending(&self) -> Option<&Pending> {
        self.last.as_ref()
    }

    /// The frames on the stack, root first.
    pub(crate) fn frames(&self) -> &[crate::engine::executor::Frame] {
        self.executor.frames()
    }

    /// What an agent process (`mekara run --agent …`) did with the pending item, journaled
    /// with what it reported; the reply is the one the MCP call doing the same would get.
    pub(crate) fn answer(
        &mut self,
        answer: Answered,
        report: AgentReport,
        progress: &dyn Fn(Progress<'_>),
    ) -> Reply {
        let history = History::new(progress);
        let (tool, outcome) = match answer {
            Answered::Outputs(outputs) => (
                AgentTool::Continue,
                self.executor.answer_llm(outputs, Some(report), &history),
            ),
            Answered::Failed(error) => (
                AgentTool::Continue,
                self.executor.fail_llm(error, report, &history),
            ),
            Answered::Finished => (
                AgentTool::Finish,
                self.executor.finish_nl_by(Some(report), &history),
            ),
        };
        self.reply(tool, outcome, history.into_events(), String::new())
    }

    /// What an agent process did with task `member` of the pending `parallel` group (its
    /// outputs, or why it could not), journaled at once with what it reported; the run
    /// does not go on until [`Session::go_on`]. An error is the refusal's text, as an agent
    /// over MCP would read it.
    pub(crate) fn answer_task(
        &mut self,
        member: usize,
        answer: Result<serde_json::Map<String, serde_json::Value>, String>,
        report: AgentReport,
        progress: &dyn Fn(Progress<'_>),
    ) -> Result<(), String> {
        let history = History::new(progress);
        let done = match answer {
            Ok(outputs) => self
                .executor
                .answer_task(member, outputs, Some(report), &history),
            Err(error) => self.executor.fail_task(member, error, report, &history),
        };
        self.carried.extend(history.into_events());
        done.map_err(|e| reply::refusal(AgentTool::Continue, &e, None, None))
    }

    /// Goes on after the tasks of a `parallel` group were answered: the reply is the one
    /// the MCP call finishing the group would get.
    pub(crate) fn go_on(&mut self, progress: &dyn Fn(Progress<'_>)) -> Reply {
        let history = History::new(progress);
        let outcome = self.executor.advance(&history);
        let mut events = std::mem::take(&mut self.carried);
        events.extend(history.into_events());
        self.reply(AgentTool::Continue, outcome, events, String::new())
    }

    /// Journals which agent drives the run; see `Executor::note_agent`.
    pub(crate) fn note_agent(
        &mut self,
        note: crate::engine::journal::AgentEvent,
    ) -> Result<(), String> {
        self.executor.note_agent(note).map_err(|e| e.to_string())
    }

    /// Journals a note about the run's spend caps; see `Executor::note_cap`.
    pub(crate) fn note_cap(
        &mut self,
        note: crate::engine::journal::CapEvent,
    ) -> Result<(), String> {
        self.executor.note_cap(note).map_err(|e| e.to_string())
    }

    /// Journals a wait for a rate limit before the agent is asked about `step` again
    /// (`attempt`); see `Executor::note_wait`.
    pub(crate) fn note_wait(
        &mut self,
        step: String,
        attempt: u32,
        wait: std::time::Duration,
        said: String,
    ) -> Result<(), String> {
        self.executor
            .note_wait(step, attempt, wait, said)
            .map_err(|e| e.to_string())
    }

    /// The token that stops the running step of this session from another thread.
    pub(crate) fn cancel_token(&self) -> crate::engine::CancelToken {
        self.executor.cancel_token()
    }

    /// The id of the run in progress.
    pub(crate) fn run_id(&self) -> Option<&str> {
        self.executor.run_id()
    }

    /// Where the run notes the process group of what it runs now (see `group_note`).
    pub(crate) fn group_note(&self) -> Option<crate::engine::group_note::GroupNote> {
        self.executor.group_note()
    }

    /// The handle of the run in progress, or its id when it has no token (a run journaled
    /// before handles).
    pub(crate) fn handle_or_id(&self) -> Option<String> {
        self.executor
            .handle()
            .or_else(|| self.run_id().map(str::to_string))
    }

    /// The token of the run in progress.
    pub(crate) fn token(&self) -> Option<&str> {
        self.executor.token()
    }

    /// Whether the last call left the run waiting for the agent.
    pub(crate) fn waits(&self) -> bool {
        self.run_id().is_some()
    }

    /// Takes run `id` up from its journal, when `token` opens it, rewound as `rewind` asks
    /// (a rewound run may have ended). Nothing changes on error.
    pub(crate) fn take_up(
        &mut self,
        id: &str,
        token: Option<&str>,
        rewind: Option<&Rewind>,
    ) -> Result<(Option<TornTail>, Option<RewindPlan>), EngineError> {
        let taken = self.executor.switch_to(id, Claim::Handle(token), rewind)?;
        self.forget_shown();
        Ok(taken)
    }

    /// Forgets what the agent was shown of the run: it was taken up anew, or rewound.
    fn forget_shown(&mut self) {
        self.shown.clear();
        self.last = None;
        self.interrupted = None;
    }

    /// Runs one checked call of a tool that moves or shows this session's run. `preface`
    /// starts the reply (what `resume` did); `rewind` is a retry or rewind of this session's
    /// run to do first.
    pub(crate) fn call(
        &mut self,
        call: &AgentCall,
        progress: &dyn Fn(Progress<'_>),
        mut preface: String,
        rewind: Option<&Rewind>,
    ) -> Reply {
        if let Some(how) = rewind {
            match self.executor.rewind(how) {
                Ok(plan) => {
                    self.forget_shown();
                    preface.push_str(&reply::rewound(&plan));
                }
                Err(error) => {
                    preface.push_str(&reply::resume_refused(&error));
                    return Reply::error(preface);
                }
            }
        }
        let history = History::new(progress);
        let outcome = match call {
            AgentCall::Start {
                name,
                arguments,
                working_dir,
                project_script,
                ..
            } => {
                let dir = self.working_dir(working_dir.as_deref());
                self.executor
                    .start(name, arguments, &dir, *project_script, &history)
            }
            AgentCall::Continue { outputs, .. } => {
                self.executor.continue_llm(outputs.clone(), &history)
            }
            AgentCall::Finish { .. } => self.executor.finish_nl(&history),
            AgentCall::Resume {
                answer: Some(answer),
                ..
            } => {
                let answered = self
                    .executor
                    .answer_ask(answer, AnsweredBy::Agent, &history);
                if answered.is_ok() {
                    preface.push_str(reply::ANSWERED_BY_RESUME);
                }
                answered
            }
            AgentCall::Resume { .. } => self.executor.advance(&history),
            AgentCall::Status { .. } | AgentCall::ListScripts { .. } | AgentCall::Eject { .. } => {
                return self.status();
            }
        };
        self.reply(call.tool(), outcome, history.into_events(), preface)
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
        let handle = self.executor.handle().or_else(|| match &outcome {
            Ok(Pending::Finished {
                run,
                stop: Some(stop),
                ..
            }) if stop.retry => self.executor.handle_of_ended(run),
            _ => None,
        });
        let mut text = preface;
        text.push_str(&reply::steps_executed(&events, journal.as_ref()));
        match outcome {
            Ok(pending) => {
                let source = self.nl_source_once(&pending);
                text.push_str(&reply::pending(
                    &pending,
                    source.as_ref().map(|(n, s)| (n.as_str(), s.as_str())),
                    handle.as_deref(),
                ));
                self.last = Some(pending);
                self.interrupted = None;
                Reply::ok(text)
            }
            Err(error) => {
                if let EngineError::Cancelled { .. } | EngineError::Evaluation { .. } = &error {
                    self.interrupted = Some(error.to_string());
                }
                text.push_str(&reply::refusal(
                    tool,
                    &error,
                    self.last.as_ref(),
                    handle.as_deref().or(self.executor.run_id()),
                ));
                Reply::error(text)
            }
        }
    }

    /// The NL source of the top frame, when it is compiled and this is the first time it
    /// needs the agent.
    fn nl_source_once(&mut self, pending: &Pending) -> Option<(String, String)> {
        if !matches!(pending, Pending::Llm { .. } | Pending::Tasks { .. }) {
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
            self.executor.handle().as_deref(),
            self.executor.frames(),
            &self.cwd,
            self.last.as_ref(),
            self.interrupted.as_deref(),
        ))
    }
}
