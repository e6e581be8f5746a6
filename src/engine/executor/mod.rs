//! `Executor`: the stack of frames of one run, and the calls that move it on (DESIGN §4).
//!
//! The pending item is never stored: [`Executor::advance`] derives it by evaluating the top
//! frame over its journal, running auto steps past the end of it, pushing and popping
//! frames, until something needs the agent or the stack is empty.

mod advance;
mod ask;
mod llm;
mod outputs;
mod record;
mod resume;
mod stack;
mod tasks;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value as Json};

// The engine's modules that the code of this folder's files names as `super::…`, as it did
// when the executor was one file: the paths stay as they were.
use super::{compiled, handle, journal, observer, rewind, shell, step, tool};

use super::compiled::child::Warm;
use super::compiled::{CodeError, Loaded, Task};
use super::error::{EngineError, Waiting};
use super::group_note::GroupNote;
use super::journal::{AskEvent, Event, HandedEvent, Origin, Outcome};
use super::observer::Observer;
use super::runner::{CancelToken, StepRunner};
use super::runs::FailedCallee;
use super::settings::{Settings, load_program};
use super::step::{MAX_KEPT, StepRecord};
use super::store::RunLog;
use super::store::RunStore;
use crate::script::{Resolver, Script};

pub(crate) use outputs::check_outputs;

/// A script on the stack.
pub(crate) struct Frame {
    /// The script, resolved when the frame was pushed (or resumed).
    pub script: Script,
    /// Its arguments.
    pub request: String,
    /// The folder it runs in.
    pub working_dir: PathBuf,
    /// Who pushed it.
    pub origin: Origin,
    /// For a call, the name the caller wrote.
    pub called_as: Option<String>,
    /// For a call, whether the caller said `allow_failure = True`: a failure of this frame
    /// is then journaled in the caller as an allowed one.
    pub allow_failure: bool,
    /// Its journaled steps.
    pub steps: Vec<StepRecord>,
    /// The failure it fell back on.
    pub failure: Option<String>,
    /// The last question its `ask` steps put to the person (when, and what it takes).
    pub asked: Option<AskEvent>,
    /// When the last script it called failed: that script, and the ones under it that
    /// failed with it.
    failed_calls: Vec<FailedCallee>,
    /// The last llm step it handed to the agent, as journaled.
    handed: Option<HandedEvent>,
    program: Option<Result<Arc<Loaded>, CodeError>>,
    /// An evaluator child holding the frame's suspended evaluation, if one does: a cache
    /// (see `compiled::child::Warm`).
    warm: Option<Warm>,
    /// How many of the script's prints outside function steps were reported: evaluation
    /// starts from the top each time, and says each print once.
    printed: usize,
}

impl Frame {
    /// Whether this frame runs as a compiled script.
    pub(crate) fn is_compiled(&self) -> bool {
        self.script.compiled.is_some()
    }

    /// The frame's program, loaded once per process with the helper modules of the
    /// script's level as they are now, like the script itself: on resume, a helper that
    /// changed under the run shows as a step whose inputs differ from the journal's.
    fn program(
        &mut self,
        resolver: &Resolver,
        settings: &Settings,
    ) -> Option<Result<Arc<Loaded>, CodeError>> {
        self.script.compiled.as_ref()?;
        let script = &self.script;
        Some(
            self.program
                .get_or_insert_with(|| {
                    load_program(resolver, script, settings)
                        .expect("the script is compiled")
                        .map(Arc::new)
                })
                .clone(),
        )
    }
}

/// What the run needs next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Pending {
    /// An llm step: the agent does it and gives its outputs.
    Llm {
        /// Stack path, e.g. `test:nested[0] > test:random[1]`.
        path: String,
        /// The instruction.
        prompt: String,
        /// Output names and descriptions.
        expects: Option<Map<String, Json>>,
    },
    /// An NL script: the agent follows all of it, then finishes it.
    Nl {
        /// Stack path.
        path: String,
        /// The instructions, arguments substituted.
        instructions: String,
    },
    /// A compiled script failed: the agent finishes it by hand.
    Fallback {
        /// Stack path.
        path: String,
        /// What failed.
        error: String,
        /// The NL instructions, arguments substituted.
        instructions: String,
        /// When the failure was a script it called, that script's own NL instructions:
        /// the part of the work it did not finish is the agent's too.
        failed_call: Option<FailedCall>,
    },
    /// The llm steps that the members of a `parallel` group stopped at: independent tasks,
    /// each answered on its own (unattended runs only).
    Tasks {
        /// Stack path, the top frame at the group's first step.
        path: String,
        /// The frame's step position where the group's steps begin.
        group: usize,
        /// The group's bound on what runs at once (`parallel(…, max = N)`).
        max: usize,
        /// The tasks not answered yet, in the members' order.
        tasks: Vec<Task>,
    },
    /// A question for the person (`ask`): the agent passes it on and never answers it itself.
    Ask {
        /// Stack path.
        path: String,
        /// The question.
        question: String,
        /// The answers it takes, when it takes only some.
        choices: Option<Vec<String>>,
        /// How long after it was asked an answer may come.
        timeout: Option<Duration>,
        /// When it was asked (Unix ms).
        asked_at: u64,
    },
    /// The stack is empty: the run ended.
    Finished {
        /// The run's id.
        run: String,
        /// How the root script ended.
        outcome: Outcome,
        /// Whether the root script fell back to its NL instructions.
        fell_back: bool,
        /// When a script stopped itself (`fail()`), and with it the run: what it said.
        stop: Option<Stop>,
    },
}

/// A script that stopped itself with `fail(message)`, and with it the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stop {
    /// The frame that called `fail()`, as its stack label (`release`, `main[2] > check`).
    pub script: String,
    /// What it gave `fail()`.
    pub message: String,
    /// Whether it stopped right after a failed step whose failure it allowed (it read that
    /// failure and stopped on it): once the cause is fixed, `--retry` runs that step again.
    /// Otherwise it stopped on a decision (a person's "no"), and a retry would stop again.
    pub retry: bool,
}

/// A script called with `call_script` whose failure made its caller fall back, directly or
/// through the scripts between.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FailedCall {
    /// The name, as resolved, of the script whose own step failed: the script called, or,
    /// when that failed because a script it called failed, the last of that chain.
    pub name: String,
    /// Its NL instructions, arguments substituted.
    pub instructions: String,
    /// The chain of calls, by name: the script that falls back, the script it called, and
    /// so on down to the one whose step failed (`name`, the last).
    pub chain: Vec<String>,
    /// The scripts between the one that falls back and the one whose step failed, the
    /// innermost first (the order what is left of them is done in): each name, and its NL
    /// instructions with its arguments substituted. Empty when the script that falls back
    /// called the failing one itself.
    pub between: Vec<(String, String)>,
}

impl FailedCall {
    /// Each script between, with the script it called: `(name, callee, instructions)`.
    pub(crate) fn callers_between(&self) -> impl Iterator<Item = (&str, &str, &str)> {
        let callees =
            std::iter::once(self.name.as_str()).chain(self.between.iter().map(|(n, _)| n.as_str()));
        self.between
            .iter()
            .zip(callees)
            .map(|((name, instructions), callee)| (name.as_str(), callee, instructions.as_str()))
    }

    /// Whose work is left, in the order to finish it: the failing script, the scripts
    /// between, then `root` (the script that falls back).
    pub(crate) fn inside_out<'a>(&'a self, root: &'a str) -> Vec<&'a str> {
        std::iter::once(self.name.as_str())
            .chain(self.between.iter().map(|(name, _)| name.as_str()))
            .chain([root])
            .collect()
    }
}

impl Pending {
    /// What this pending item waits for.
    pub(crate) fn waiting(&self) -> Waiting {
        match self {
            Pending::Llm { .. } | Pending::Tasks { .. } => Waiting::LlmStep,
            Pending::Nl { .. } => Waiting::NlScript,
            Pending::Fallback { .. } => Waiting::Fallback,
            Pending::Ask { .. } => Waiting::Answer,
            Pending::Finished { .. } => Waiting::Nothing,
        }
    }
}

/// What came of an answer given with [`Executor::record_answer`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Answer {
    /// It was journaled: this choice, or these words.
    Given(String),
    /// It came this long after the question's timeout: the step failed instead.
    TooLate(Duration),
}

/// Who takes a run up from its journal.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Claim<'a> {
    /// The person who owns the run's files (`mekara run --resume`): no handle needed.
    Owner,
    /// A caller with this token of the run's handle (`None`: the id alone), which must
    /// match the digest in the run's header, if it has one.
    Handle(Option<&'a str>),
}

/// The frames of a run and the means to move them on.
pub(crate) struct Executor {
    resolver: Resolver,
    store: RunStore,
    runner: Box<dyn StepRunner>,
    settings: Settings,
    cancel: CancelToken,
    journal: Option<Box<dyn RunLog>>,
    /// The token of the run's handle, when the run has one and it is known here (a run
    /// started here, or taken up with its handle).
    token: Option<String>,
    stack: Vec<Frame>,
    /// The last run that ended, for `Pending::Finished` when asked again.
    ended: Option<Ended>,
    /// The stop being journaled, frame by frame (see [`Executor::stop`]).
    stopping: Option<Stop>,
    root_fell_back: bool,
}

/// How the run's root script ended: what [`Pending::Finished`] says when asked again.
#[derive(Debug, Clone)]
struct Ended {
    /// The run's id.
    run: String,
    /// How the root script ended.
    outcome: Outcome,
    /// Whether the root script fell back to its NL instructions.
    fell_back: bool,
    /// When a script stopped itself (`fail()`), and with it the run: what it said.
    stop: Option<Stop>,
}

impl Executor {
    /// An executor with an empty stack; the first `start` creates a run in `store`.
    pub(crate) fn new(
        resolver: Resolver,
        store: RunStore,
        runner: Box<dyn StepRunner>,
        settings: Settings,
    ) -> Executor {
        Executor {
            resolver,
            store,
            runner,
            settings,
            cancel: CancelToken::default(),
            journal: None,
            token: None,
            stack: Vec::new(),
            ended: None,
            stopping: None,
            root_fell_back: false,
        }
    }

    /// Where the run in progress notes the process group of what it runs now, so that a
    /// resume after mekara was killed can kill it: its shell steps, and (unattended) the agent.
    pub(crate) fn group_note(&self) -> Option<GroupNote> {
        self.journal.as_ref().map(|j| j.group_note().clone())
    }

    /// The id of the run in progress.
    pub(crate) fn run_id(&self) -> Option<&str> {
        self.journal.as_deref().map(RunLog::id)
    }

    /// The handle of the run in progress (`<id>.<token>`), when it has a token.
    pub(crate) fn handle(&self) -> Option<String> {
        Some(super::handle::join(self.run_id()?, self.token.as_deref()?))
    }

    /// The handle of run `run`, which just ended here: a run a script stopped after a failed
    /// step can be taken up again with `retry`, and only by its handle.
    pub(crate) fn handle_of_ended(&self, run: &str) -> Option<String> {
        Some(super::handle::join(run, self.token.as_deref()?))
    }

    /// The token of the run in progress, when known.
    pub(crate) fn token(&self) -> Option<&str> {
        self.token.as_deref().filter(|_| self.journal.is_some())
    }

    /// The frames, root first.
    pub(crate) fn frames(&self) -> &[Frame] {
        &self.stack
    }

    /// A token that stops the running step from another thread.
    pub(crate) fn cancel_token(&self) -> CancelToken {
        self.cancel.clone()
    }

    /// Pushes script `name` and runs it until it needs the agent. Started while another
    /// script is pending, it runs nested, and that script's pending step comes back when it
    /// ends. Nothing changes when it fails. A project's own script that has a bundled
    /// script's name is refused unless `project_script` (the person said to run it).
    pub(crate) fn start(
        &mut self,
        name: &str,
        request: &str,
        working_dir: &Path,
        project_script: bool,
        observer: &dyn Observer,
    ) -> Result<Pending, EngineError> {
        let script = self.resolver.resolve_to_run(name, project_script)?;
        // Arguments are journaled (and given to the script) as every value is: with the
        // secrets this process knows as `${VAR}`.
        let request = &crate::secrets::redact(request);
        if request.len() > MAX_KEPT {
            return Err(EngineError::ArgumentsTooLong {
                bytes: request.len(),
                limit: MAX_KEPT,
            });
        }
        if self.stack.len() >= self.settings.max_depth {
            return Err(EngineError::TooDeep {
                path: self.path(),
                limit: self.settings.max_depth,
            });
        }
        if !working_dir.is_dir() {
            return Err(EngineError::BadWorkingDir {
                path: working_dir.to_path_buf(),
            });
        }
        if self.journal.is_none() {
            let token = self.runner.new_run_token();
            self.journal = Some(self.store.create(
                &|attempt| self.runner.new_run_id(attempt),
                token.as_deref().map(super::handle::digest),
            )?);
            self.token = token;
            self.root_fell_back = false;
        }
        self.push(script, request, working_dir, None, observer)?;
        self.advance(observer)
    }

    fn append(&mut self, event: &Event) -> Result<(), EngineError> {
        let journal = self
            .journal
            .as_mut()
            .expect("a run is open while frames are on the stack");
        Ok(journal.append(event)?)
    }

    fn sync(&mut self) -> Result<(), EngineError> {
        match self.journal.as_mut() {
            Some(journal) => Ok(journal.sync()?),
            None => Ok(()),
        }
    }

    /// `test:nested[0] > test:random[1]`: each frame with the index of its pending step.
    pub(crate) fn path(&self) -> String {
        self.stack
            .iter()
            .map(|f| format!("{}[{}]", f.script.name, f.steps.len()))
            .collect::<Vec<_>>()
            .join(" > ")
    }

    /// The path of the parents with indexes, then the top frame's name alone:
    /// `test:nested[0] > test:random`.
    pub(crate) fn label(&self) -> String {
        let Some((top, parents)) = self.stack.split_last() else {
            return String::new();
        };
        parents
            .iter()
            .map(|f| format!("{}[{}] > ", f.script.name, f.steps.len()))
            .chain(std::iter::once(top.script.name.to_string()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    /// The MCP server moves executors onto blocking threads.
    #[test]
    fn executor_is_send() {
        fn send<T: Send>() {}
        send::<super::Executor>();
    }
}
