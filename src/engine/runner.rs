//! The seam between the engine and its effects: the [`StepRunner`] trait, what it is asked
//! to run ([`ShellStep`], [`ToolCall`]), what it gives back ([`Ran`]) and how a running
//! step is stopped ([`CancelToken`]).
//!
//! The engine decides which steps run and journals what came of them; a runner only runs
//! them. [`ShellRunner`](super::ShellRunner) spawns real processes, `crate::client` adds the
//! MCP client, and a cassette answers from a recording: the engine never knows which it has.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value as Json};

use super::group_note::GroupNote;
use super::step::{StepInput, StepResult};

/// Runs the effects of auto steps. The engine holds one and never knows which: the real
/// [`ShellRunner`](super::ShellRunner), or a recording that answers from a cassette.
///
/// Everything a run does that is not a pure function of its journal goes through here:
/// shell commands, and the ids and tokens of new runs.
///
/// A runner that wraps another (to name its runs, add an environment, reach MCP servers)
/// says which through [`inner`](Self::inner): every method it does not write itself is the
/// inner runner's. A runner that wraps none writes [`run_shell`](Self::run_shell).
pub(crate) trait StepRunner: Send + Sync {
    /// The runner this one wraps, whose methods this one's defaults forward to; `None` (the
    /// default) for a runner that runs steps itself.
    fn inner(&self) -> Option<&dyn StepRunner> {
        None
    }

    /// Runs `step`, passing output to `on_output` as it arrives.
    fn run_shell(
        &self,
        step: &ShellStep,
        on_output: &mut dyn FnMut(&[u8]),
        cancel: &CancelToken,
    ) -> Ran {
        match self.inner() {
            Some(inner) => inner.run_shell(step, on_output, cancel),
            None => Ran::Done(no_shell(step)),
        }
    }

    /// Runs the shell steps of one round of a `parallel` group, at most `max` at once, and
    /// passes each result to `on_done` with the step's position in `steps`, on the calling
    /// thread, as it comes. Each step runs as [`run_shell`](Self::run_shell) runs it (its
    /// own process group, timeout and cancellation); its output is not streamed but kept
    /// whole in its result, so the outputs of steps that run at once never mix. A step
    /// whose group is noted gets a line of the note of its own (see `group_note`).
    ///
    /// A runner that changes [`run_shell`](Self::run_shell) and wraps another changes this
    /// too, or the steps of a `parallel` group go to the inner runner unchanged.
    fn run_shells(
        &self,
        steps: &[ShellStep],
        max: usize,
        cancel: &CancelToken,
        on_done: &mut dyn FnMut(usize, Ran),
    ) {
        match self.inner() {
            Some(inner) => inner.run_shells(steps, max, cancel, on_done),
            None => run_in_threads(self, steps, max, cancel, on_done),
        }
    }

    /// Calls a tool on another MCP server (`mcp()` steps and prompt tags). A runner without
    /// an MCP client fails the step.
    fn call_tool(&self, call: &ToolCall, cancel: &CancelToken) -> Ran {
        match self.inner() {
            Some(inner) => inner.call_tool(call, cancel),
            None => Ran::Done(no_client(call)),
        }
    }

    /// The id for a new run; `attempt` counts the ids already taken.
    fn new_run_id(&self, attempt: u32) -> String {
        match self.inner() {
            Some(inner) => inner.new_run_id(attempt),
            None => super::runs::new_id(attempt),
        }
    }

    /// The token of a new run's handle ([`super::handle`]); `None` for a run without one
    /// (a replay of a cassette recorded before handles).
    fn new_run_token(&self) -> Option<String> {
        match self.inner() {
            Some(inner) => inner.new_run_token(),
            None => Some(super::handle::new_token()).filter(|t| !t.is_empty()),
        }
    }
}

/// [`StepRunner::run_shells`] of a runner that wraps none: `steps` on up to `max` threads,
/// each run by `runner`'s [`run_shell`](StepRunner::run_shell).
fn run_in_threads<R: StepRunner + ?Sized>(
    runner: &R,
    steps: &[ShellStep],
    max: usize,
    cancel: &CancelToken,
    on_done: &mut dyn FnMut(usize, Ran),
) {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let (sender, receiver) = std::sync::mpsc::channel();
    // Worker `worker` takes the next step not taken until none is left; its steps note
    // their group in line `worker + 1` of the note.
    let work = |worker: usize, sender: std::sync::mpsc::Sender<(usize, Ran)>| loop {
        let at = next.fetch_add(1, Ordering::SeqCst);
        let Some(step) = steps.get(at) else { break };
        let mut step = step.clone();
        step.group_note = step
            .group_note
            .map(|n| n.member_slot(worker + 1, step.number));
        let ran = runner.run_shell(&step, &mut |_| {}, cancel);
        if let Some(note) = &step.group_note {
            note.clear();
        }
        if sender.send((at, ran)).is_err() {
            break;
        }
    };
    std::thread::scope(|scope| {
        let mut workers = 0;
        for worker in 0..max.clamp(1, steps.len().max(1)) {
            let sender = sender.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("mekara-parallel-{worker}"))
                .spawn_scoped(scope, move || work(worker, sender));
            match spawned {
                Ok(_) => workers += 1,
                // Fewer workers only means fewer steps at once.
                Err(e) => {
                    tracing::warn!("cannot start a thread for a parallel step: {e}");
                    break;
                }
            }
        }
        if workers == 0 {
            // Not one thread: the steps run one after another on this one.
            work(0, sender);
        } else {
            drop(sender);
        }
        for (at, ran) in receiver {
            on_done(at, ran);
        }
    });
}

/// The result of running a step, unless it was cancelled.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub enum Ran {
    /// The step ran to an end (success, failure or timeout).
    Done(StepResult),
    /// The step was stopped by its [`CancelToken`]; nothing of it should be recorded.
    Cancelled,
}

/// A shell command to run.
#[derive(Debug, Clone)]
pub(crate) struct ShellStep {
    /// The command line.
    pub command: String,
    /// Absolute folder to run in.
    pub working_dir: PathBuf,
    /// Extra environment variables.
    pub env: BTreeMap<String, String>,
    /// How long it may run before its process group is killed.
    pub timeout: Duration,
    /// Where to note the step's process group while it runs, so that a resume after
    /// mekara was killed can kill it.
    pub group_note: Option<GroupNote>,
    /// The step's number in its frame, for a step of a `parallel` group: noted beside its
    /// group, so that a resume that kills it journals which step it was. `None` elsewhere (a
    /// sequential step is the one after the journal's last).
    pub number: Option<usize>,
    /// The shell the script named for it (`"bash"`, `"pwsh"`, `"cmd"`); `None` for the
    /// runner's own (bash).
    pub shell: Option<String>,
}

impl ShellStep {
    /// What the journal records of this step: the command, the folder and the environment
    /// (see [`StepInput`] for why the timeout is not part of it).
    pub(crate) fn input(&self) -> StepInput {
        StepInput::Shell {
            command: self.command.clone(),
            working_dir: self.working_dir.clone(),
            env: self.env.clone(),
            shell: self.shell.clone(),
        }
    }
}

/// One call of a tool on a server declared in `.mcp.json`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ToolCall {
    /// The server's name.
    pub server: String,
    /// The tool's name.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Json>,
    /// How long the call may take; `None` takes the server's configured timeout.
    pub timeout: Option<Duration>,
}

impl ToolCall {
    /// What the journal records of this call: the server, the tool and the arguments.
    pub fn input(&self) -> StepInput {
        StepInput::Mcp {
            server: self.server.clone(),
            tool: self.tool.clone(),
            arguments: self.arguments.clone(),
        }
    }
}

/// Set from another thread or a signal handler (Ctrl-C, an MCP cancellation) to stop the
/// running step.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// Asks the running step to stop.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Clears the request, once it has been acted on.
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }

    /// The flag behind the token, for a signal handler to set.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

/// The result when the runner runs no shell step (one that wraps none and does not write
/// [`StepRunner::run_shell`]).
fn no_shell(step: &ShellStep) -> StepResult {
    StepResult {
        success: false,
        error: Some(format!(
            "cannot run `{}`: this runner runs no shell step",
            step.command
        )),
        ..StepResult::default()
    }
}

/// The result when the runner has no MCP client (a runner that only runs shell steps).
fn no_client(call: &ToolCall) -> StepResult {
    StepResult {
        success: false,
        error: Some(format!(
            "cannot call `{}/{}`: this runner has no MCP client",
            call.server, call.tool
        )),
        ..StepResult::default()
    }
}

/// The longest timeout mekara takes: a year. A longer one (`1e300` seconds) would overflow
/// the clock arithmetic that enforces it.
pub(crate) const MAX_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 60 * 60);

/// A timeout given in seconds (a script's `timeout`, `--timeout`, a server's `timeout` in
/// `.mekara/config.toml`), or `None` unless it is positive and at most [`MAX_TIMEOUT`].
pub(crate) fn timeout_from_secs(secs: f64) -> Option<Duration> {
    (secs > 0.0 && secs <= MAX_TIMEOUT.as_secs_f64()).then(|| Duration::from_secs_f64(secs))
}

/// What a refused timeout is told: the rule [`timeout_from_secs`] applies.
pub(crate) const TIMEOUT_RULE: &str = "a positive number of seconds, at most 31536000 (a year)";
