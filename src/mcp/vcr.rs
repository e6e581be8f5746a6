//! VCR (DESIGN §7): record an MCP session into a cassette, and replay it through the real
//! session code with auto steps answered from the recording.
//!
//! A cassette is TOML: a `[cassette]` header, then one `[[event]]` table per event, in
//! order, appended as they happen (so a crash keeps everything before it). Multi-line texts
//! stay multi-line, so a person can read and diff them:
//!
//! - `call`: a tool call (`tool`, `input` as JSON text), then
//! - `run_token` / `run_id` / `shell`: what the session did through its [`StepRunner`], then
//! - `reply`: what the agent read (`text`, `is_error`).
//!
//! Folders inside the session's folder are written relative to it (`.`, `sub/dir`), and the
//! project's own path inside the effects' inputs and outputs as [`PROJECT`], so a cassette
//! replays in any checkout.

use std::collections::{BTreeMap, VecDeque};
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

use super::registry::{Driving, Registry, RunnerFactory};
use crate::agents::reply::{Reply, shown_dir};
use crate::agents::tools::AgentTool;
use crate::engine::runner::{Ran, ShellStep};
use crate::engine::step::StepResult;
use crate::engine::{CancelToken, StepRunner, ToolCall};

/// The cassette format's version, in its header. Version 3 writes the project's path inside
/// effects as [`PROJECT`]; version 2 records the tokens of run handles (`run_token`); version
/// 1 cassettes, recorded before handles, replay as runs without tokens, whose replies show no
/// handle, so they match what was recorded. Cassettes of versions 1 and 2 hold the recording
/// project's path as it was, and so replay only in the folder they were recorded in when an
/// effect names it.
const VERSION: u32 = 3;

/// What stands for the session's project folder in the inputs and outputs of the recorded
/// effects (`cargo test` prints `Compiling adder v0.4.1 (/home/ann/adder)`, a Python
/// traceback names `/home/ann/stats/test_stats.py`). A replay puts its own project folder in
/// its place, so the script sees what the same step would print in that checkout, and its
/// replies (recorded with the project's paths relative, see [`relative_paths`]) match.
pub(crate) const PROJECT: &str = "{{mekara:project}}";

/// One recorded event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum Entry {
    /// The agent called a tool.
    Call {
        /// The tool's name.
        tool: String,
        /// Its arguments, as JSON text.
        input: String,
    },
    /// A new run got this id.
    RunId {
        /// The id.
        id: String,
    },
    /// A new run's handle got this token (recorded just before its id).
    RunToken {
        /// The token.
        token: String,
    },
    /// A shell step ran.
    Shell {
        /// The command line.
        command: String,
        /// Where it ran: relative to the session's folder when inside it.
        working_dir: String,
        /// Extra environment variables.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        /// Whether it succeeded.
        success: bool,
        /// Its exit code.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        exit_code: Option<i32>,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Whether it was cancelled (then nothing else of it counts).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cancelled: bool,
        /// What it wrote.
        #[serde(default)]
        output: String,
    },
    /// A tool of another MCP server was called (`mcp()` steps, prompt tags).
    Tool {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// Its arguments, as JSON text.
        arguments: String,
        /// Whether it succeeded.
        success: bool,
        /// Whether the tool said it failed.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        is_error: bool,
        /// Why it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// Its structured content, as JSON text.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        structured: Option<String>,
        /// Whether it was cancelled (then nothing else of it counts).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        cancelled: bool,
        /// Its content as text.
        #[serde(default)]
        output: String,
    },
    /// What the call gave back.
    Reply {
        /// Whether it was an error result.
        is_error: bool,
        /// The text.
        text: String,
    },
}

/// The `[cassette]` table.
#[derive(Debug, Serialize, Deserialize)]
struct CassetteHeader {
    version: u32,
}

#[derive(Debug, Serialize, Deserialize)]
struct Cassette {
    cassette: CassetteHeader,
    #[serde(default)]
    event: Vec<Entry>,
}

#[derive(Serialize)]
struct OneEvent<'a> {
    event: [&'a Entry; 1],
}

/// Why a cassette could not be read, or a replay did not match it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum VcrError {
    /// The file could not be read or written.
    #[error("cassette `{}`: {source}", .path.display())]
    Io {
        /// The cassette.
        path: PathBuf,
        /// The reason.
        source: std::io::Error,
    },
    /// The file is not a cassette.
    #[error("cassette `{}` is malformed: {reason}", .path.display())]
    Malformed {
        /// The cassette.
        path: PathBuf,
        /// What is wrong, with its place.
        reason: String,
    },
    /// The replay differed from the recording.
    #[error("replay of `{}` differs at event {event} (call {call}, `{tool}`): {detail}", .path.display())]
    Mismatch {
        /// The cassette.
        path: PathBuf,
        /// 1-based index of the event in the cassette.
        event: usize,
        /// 1-based index of the tool call.
        call: usize,
        /// The tool called.
        tool: String,
        /// What differed.
        detail: String,
    },
}

/// Writes a cassette as the session goes.
pub(crate) struct Recorder {
    file: Mutex<File>,
    path: PathBuf,
    cwd: PathBuf,
    /// The session's project, whose paths replies are recorded relative to.
    root: PathBuf,
}

impl Recorder {
    /// Starts a cassette at `path` (replacing what was there) for a session in `cwd`.
    pub(crate) fn create(path: &Path, cwd: &Path) -> Result<Arc<Recorder>, VcrError> {
        let io = |source| VcrError::Io {
            path: path.to_path_buf(),
            source,
        };
        let mut file = File::create(path).map_err(io)?;
        let header = toml::to_string_pretty(&HeaderOnly {
            cassette: CassetteHeader { version: VERSION },
        })
        .map_err(|e| io(std::io::Error::other(e)))?;
        file.write_all(
            format!(
                "# mekara VCR cassette: an MCP session, recorded by `MEKARA_VCR_CASSETTE`.\n\
                 # Replay it with `mekara vcr replay <this file>`.\n{header}\n"
            )
            .as_bytes(),
        )
        .map_err(io)?;
        Ok(Arc::new(Recorder {
            file: Mutex::new(file),
            path: path.to_path_buf(),
            cwd: cwd.to_path_buf(),
            root: project_root(cwd),
        }))
    }

    /// A runner that runs effects with `inner` for real and records them here.
    pub(crate) fn runner(self: &Arc<Self>, inner: Box<dyn StepRunner>) -> Box<dyn StepRunner> {
        Box::new(Recording {
            inner,
            recorder: self.clone(),
        })
    }

    /// Records a tool call.
    pub(crate) fn call(&self, tool: &str, input: Option<&Map<String, Json>>) {
        self.write(&Entry::Call {
            tool: tool.to_string(),
            input: input_text(input),
        });
    }

    /// Records what a call gave back.
    pub(crate) fn reply(&self, reply: &Reply) {
        self.write(&Entry::Reply {
            is_error: reply.is_error,
            text: relative_paths(&reply.text, &self.root),
        });
    }

    fn write(&self, entry: &Entry) {
        let text = match toml::to_string_pretty(&OneEvent { event: [entry] }) {
            Ok(text) => text,
            Err(e) => {
                tracing::warn!("cannot encode a cassette event: {e}");
                return;
            }
        };
        let Ok(mut file) = self.file.lock() else {
            return;
        };
        if let Err(e) = file.write_all(format!("{text}\n").as_bytes()) {
            tracing::warn!("cannot write to cassette `{}`: {e}", self.path.display());
        }
    }
}

#[derive(Serialize)]
struct HeaderOnly {
    cassette: CassetteHeader,
}

/// A call's input as JSON text, redacted of the secrets the process knows: an agent's
/// outputs may hold one, which the journal holds redacted, so the replay gives the same.
fn input_text(input: Option<&Map<String, Json>>) -> String {
    match input {
        Some(map) => {
            let mut input = Json::Object(map.clone());
            crate::secrets::known().redact_json(&mut input);
            serde_json::to_string(&input).unwrap_or_default()
        }
        None => "{}".to_string(),
    }
}

struct Recording {
    inner: Box<dyn StepRunner>,
    recorder: Arc<Recorder>,
}

impl Recording {
    fn write_shell(&self, step: &ShellStep, ran: &Ran) {
        let (result, cancelled) = match ran {
            Ran::Done(result) => (result.clone(), false),
            Ran::Cancelled => (StepResult::default(), true),
        };
        let root = &self.recorder.root;
        self.recorder.write(&Entry::Shell {
            command: to_placeholder(&step.command, root),
            working_dir: shown_dir(&step.working_dir, &self.recorder.cwd),
            env: env_to_placeholder(&step.env, root),
            success: result.success,
            exit_code: result.exit_code,
            error: result.error.map(|e| to_placeholder(&e, root)),
            cancelled,
            output: to_placeholder(&result.output, root),
        });
    }
}

impl StepRunner for Recording {
    fn run_shell(
        &self,
        step: &ShellStep,
        on_output: &mut dyn FnMut(&[u8]),
        cancel: &CancelToken,
    ) -> Ran {
        let ran = self.inner.run_shell(step, on_output, cancel);
        self.write_shell(step, &ran);
        ran
    }

    /// The steps of a `parallel` round are recorded in the order the engine journals them
    /// (the order they finished), which is the order a replay answers them in.
    fn run_shells(
        &self,
        steps: &[ShellStep],
        max: usize,
        cancel: &CancelToken,
        on_done: &mut dyn FnMut(usize, Ran),
    ) {
        self.inner.run_shells(steps, max, cancel, &mut |at, ran| {
            self.write_shell(&steps[at], &ran);
            on_done(at, ran);
        });
    }

    fn call_tool(&self, call: &ToolCall, cancel: &CancelToken) -> Ran {
        let ran = self.inner.call_tool(call, cancel);
        let (result, cancelled) = match &ran {
            Ran::Done(result) => (result.clone(), false),
            Ran::Cancelled => (StepResult::default(), true),
        };
        let root = &self.recorder.root;
        self.recorder.write(&Entry::Tool {
            server: call.server.clone(),
            tool: call.tool.clone(),
            arguments: to_placeholder(&input_text(Some(&call.arguments)), root),
            success: result.success,
            is_error: result.is_error,
            error: result.error.map(|e| to_placeholder(&e, root)),
            structured: result
                .structured
                .map(|s| to_placeholder(&s.to_string(), root)),
            cancelled,
            output: to_placeholder(&result.output, root),
        });
        ran
    }

    fn new_run_id(&self, attempt: u32) -> String {
        let id = self.inner.new_run_id(attempt);
        self.recorder.write(&Entry::RunId { id: id.clone() });
        id
    }

    fn new_run_token(&self) -> Option<String> {
        let token = self.inner.new_run_token();
        if let Some(token) = &token {
            self.recorder.write(&Entry::RunToken {
                token: token.clone(),
            });
        }
        token
    }
}

/// Reads a cassette: its version and its events.
pub(crate) fn load(path: &Path) -> Result<(u32, Vec<Entry>), VcrError> {
    let text = std::fs::read_to_string(path).map_err(|source| VcrError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let cassette: Cassette = toml::from_str(&text).map_err(|e| VcrError::Malformed {
        path: path.to_path_buf(),
        reason: e.to_string().trim_end().to_string(),
    })?;
    if !(1..=VERSION).contains(&cassette.cassette.version) {
        return Err(VcrError::Malformed {
            path: path.to_path_buf(),
            reason: format!(
                "version {} is not one this mekara reads (it reads 1 to {VERSION})",
                cassette.cassette.version
            ),
        });
    }
    // A run id names files in the runs folder: one like `../x` would put them anywhere.
    if let Some((at, id)) = cassette
        .event
        .iter()
        .enumerate()
        .find_map(|(at, e)| match e {
            Entry::RunId { id } if !crate::engine::runs::is_run_id(id) => Some((at, id)),
            _ => None,
        })
    {
        return Err(VcrError::Malformed {
            path: path.to_path_buf(),
            reason: format!(
                "event {} has run id `{id}`, which is not a run id (ASCII letters, digits, `-` and `_`, at most 64)",
                at + 1
            ),
        });
    }
    Ok((cassette.cassette.version, cassette.event))
}

/// Answers a session's effects from the recording, and notes the first difference. Clones
/// share the recording, one per run.
#[derive(Clone)]
struct Player {
    queue: Arc<Mutex<VecDeque<Entry>>>,
    mismatch: Arc<Mutex<Option<String>>>,
    cwd: PathBuf,
    /// The replay's project folder, which takes the place of [`PROJECT`].
    root: PathBuf,
    /// Whether the cassette writes the project's folder as [`PROJECT`] (version 3 on);
    /// older ones hold it as recorded, and are compared as they are.
    placeholders: bool,
}

impl Player {
    fn differ(&self, detail: String) {
        if let Ok(mut slot) = self.mismatch.lock()
            && slot.is_none()
        {
            *slot = Some(detail);
        }
    }

    /// A step's input as the cassette writes it.
    fn recorded_form(&self, text: &str) -> String {
        if self.placeholders {
            to_placeholder(text, &self.root)
        } else {
            text.to_string()
        }
    }

    fn recorded_env(&self, env: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        env.iter()
            .map(|(k, v)| (k.clone(), self.recorded_form(v)))
            .collect()
    }

    fn next(&self) -> Option<Entry> {
        self.queue.lock().ok().and_then(|mut q| q.pop_front())
    }

    /// Notes that the replay asked for something the recording does not have, and fails
    /// the step with it.
    fn refuse(&self, detail: String) -> Ran {
        self.differ(detail.clone());
        Ran::Done(StepResult {
            success: false,
            error: Some(format!("vcr: {detail}")),
            ..StepResult::default()
        })
    }
}

impl StepRunner for Player {
    fn run_shell(
        &self,
        step: &ShellStep,
        on_output: &mut dyn FnMut(&[u8]),
        _cancel: &CancelToken,
    ) -> Ran {
        let asked = shown_dir(&step.working_dir, &self.cwd);
        let (asked_command, asked_env) = (
            self.recorded_form(&step.command),
            self.recorded_env(&step.env),
        );
        match self.next() {
            Some(Entry::Shell {
                command,
                working_dir,
                env,
                success,
                exit_code,
                error,
                cancelled,
                output,
            }) => {
                if command != asked_command || working_dir != asked || env != asked_env {
                    return self.refuse(format!(
                        "the replay ran shell step `{}` in `{asked}` (env {:?}), but the \
                             recording has `{command}` in `{working_dir}` (env {env:?})",
                        step.command, step.env
                    ));
                }
                if cancelled {
                    return Ran::Cancelled;
                }
                let output = from_placeholder(&output, &self.root);
                if !output.is_empty() {
                    on_output(output.as_bytes());
                }
                Ran::Done(StepResult {
                    success,
                    exit_code,
                    output,
                    error: error.map(|e| from_placeholder(&e, &self.root)),
                    ..StepResult::default()
                })
            }
            Some(other) => self.refuse(format!(
                "the replay ran shell step `{}`, but the recording has {} next",
                step.command,
                describe(&other)
            )),
            None => self.refuse(format!(
                "the replay ran shell step `{}`, but the recording has no more steps for \
                     this call",
                step.command
            )),
        }
    }

    /// The steps of a `parallel` round are answered one after another, in the order the
    /// recording has them (the order they finished when it was made), so the replay journals
    /// and reports them in that order too.
    fn run_shells(
        &self,
        steps: &[ShellStep],
        _max: usize,
        cancel: &CancelToken,
        on_done: &mut dyn FnMut(usize, Ran),
    ) {
        let mut left: Vec<usize> = (0..steps.len()).collect();
        while !left.is_empty() {
            let recorded_next = self
                .queue
                .lock()
                .ok()
                .and_then(|queue| match queue.front() {
                    Some(Entry::Shell {
                        command,
                        working_dir,
                        env,
                        ..
                    }) => left.iter().position(|&at| {
                        let step = &steps[at];
                        self.recorded_form(&step.command) == *command
                            && shown_dir(&step.working_dir, &self.cwd) == *working_dir
                            && self.recorded_env(&step.env) == *env
                    }),
                    _ => None,
                });
            // None: the recording differs here, which answering the first step notes.
            let at = left.remove(recorded_next.unwrap_or(0));
            on_done(at, self.run_shell(&steps[at], &mut |_| {}, cancel));
        }
    }

    fn call_tool(&self, call: &ToolCall, _cancel: &CancelToken) -> Ran {
        let asked = self.recorded_form(&input_text(Some(&call.arguments)));
        let name = format!("{}/{}", call.server, call.tool);
        match self.next() {
            Some(Entry::Tool {
                server,
                tool,
                arguments,
                success,
                is_error,
                error,
                structured,
                cancelled,
                output,
            }) => {
                if server != call.server || tool != call.tool || arguments != asked {
                    return self.refuse(
                        format!(
                            "the replay called tool `{name}` with `{asked}`, but the recording has `{server}/{tool}` with `{arguments}`"
                        ),
                    );
                }
                if cancelled {
                    return Ran::Cancelled;
                }
                let back = |text: &str| from_placeholder(text, &self.root);
                Ran::Done(StepResult {
                    success,
                    is_error,
                    error: error.map(|e| back(&e)),
                    structured: structured.and_then(|s| serde_json::from_str(&back(&s)).ok()),
                    output: back(&output),
                    ..StepResult::default()
                })
            }
            Some(other) => self.refuse(
                format!(
                    "the replay called tool `{name}`, but the recording has {} next",
                    describe(&other)
                ),
            ),
            None => self.refuse(
                format!(
                    "the replay called tool `{name}`, but the recording has no more effects for this call"
                ),
            ),
        }
    }

    fn new_run_id(&self, _attempt: u32) -> String {
        match self.next() {
            Some(Entry::RunId { id }) => id,
            other => {
                self.differ(format!(
                    "the replay started a new run, but the recording has {} next",
                    other.as_ref().map_or("nothing".to_string(), describe)
                ));
                crate::engine::runs::new_id(0)
            }
        }
    }

    /// The recorded token, or none when the cassette has none here (recorded before
    /// handles): the run then has no token, as it had none when it was recorded.
    fn new_run_token(&self) -> Option<String> {
        let mut queue = self.queue.lock().ok()?;
        match queue.front() {
            Some(Entry::RunToken { token }) => {
                let token = token.clone();
                queue.pop_front();
                Some(token)
            }
            _ => None,
        }
    }
}

fn describe(entry: &Entry) -> String {
    match entry {
        Entry::RunToken { .. } => "a new run's token".to_string(),
        Entry::Call { tool, .. } => format!("a call of `{tool}`"),
        Entry::RunId { id } => format!("a new run `{id}`"),
        Entry::Shell { command, .. } => format!("shell step `{command}`"),
        Entry::Tool { server, tool, .. } => format!("tool call `{server}/{tool}`"),
        Entry::Reply { .. } => "a reply".to_string(),
    }
}

/// What a replay went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Replayed {
    /// Tool calls fed in.
    pub calls: usize,
    /// Shell steps and tool calls answered from the recording.
    pub steps: usize,
}

/// Replays the cassette at `path` through a real [`Registry`] built by `registry` (given
/// the factory of the runners its sessions use), as one connection, failing at the first
/// difference.
pub(crate) fn replay(
    path: &Path,
    cwd: &Path,
    registry: impl FnOnce(RunnerFactory) -> Registry,
) -> Result<Replayed, VcrError> {
    let (version, entries) = load(path)?;
    let root = project_root(cwd);
    let queue = Arc::new(Mutex::new(VecDeque::new()));
    let mismatch = Arc::new(Mutex::new(None));
    let player = Player {
        queue: queue.clone(),
        mismatch: mismatch.clone(),
        cwd: cwd.to_path_buf(),
        root: root.clone(),
        placeholders: version >= 3,
    };
    let registry = registry(Box::new(move || Box::new(player.clone())));
    let driving = Mutex::new(Driving::default());
    let mut done = Replayed::default();
    let mut i = 0;
    while i < entries.len() {
        let (tool, input) = match &entries[i] {
            Entry::Call { tool, input } => (tool.clone(), input.clone()),
            other => {
                return Err(VcrError::Malformed {
                    path: path.to_path_buf(),
                    reason: format!("event {} is {} outside any call", i + 1, describe(other)),
                });
            }
        };
        let call_event = i + 1;
        done.calls += 1;
        let mismatch_at = |detail: String| VcrError::Mismatch {
            path: path.to_path_buf(),
            event: call_event,
            call: done.calls,
            tool: tool.clone(),
            detail,
        };
        // The effects recorded for this call, then its reply.
        let mut effects = VecDeque::new();
        i += 1;
        let recorded = loop {
            match entries.get(i) {
                Some(Entry::Reply { is_error, text }) => break (*is_error, text.clone()),
                Some(Entry::Call { .. }) | None => {
                    return Err(VcrError::Malformed {
                        path: path.to_path_buf(),
                        reason: format!("the call at event {call_event} has no reply"),
                    });
                }
                Some(effect) => {
                    if matches!(effect, Entry::Shell { .. } | Entry::Tool { .. }) {
                        done.steps += 1;
                    }
                    effects.push_back(effect.clone());
                }
            }
            i += 1;
        };
        i += 1;
        let input: Option<Map<String, Json>> = match serde_json::from_str::<Json>(&input) {
            Ok(Json::Object(map)) => Some(map),
            Ok(_) | Err(_) => {
                return Err(VcrError::Malformed {
                    path: path.to_path_buf(),
                    reason: format!(
                        "the input of the call at event {call_event} is not a JSON object"
                    ),
                });
            }
        };
        let Some(named) = AgentTool::named(&tool) else {
            return Err(mismatch_at(format!("mekara has no tool `{tool}`")));
        };
        if let Ok(mut q) = queue.lock() {
            *q = effects;
        }
        let reply = registry.handle(named, input.as_ref(), &driving, &|_| {}, &|slot| {
            Ok(slot
                .session
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner))
        });
        if let Some(detail) = mismatch.lock().ok().and_then(|mut m| m.take()) {
            return Err(mismatch_at(detail));
        }
        let left = queue
            .lock()
            .ok()
            .and_then(|q| q.front().map(|next| (q.len(), describe(next))));
        if let Some((left, next)) = left {
            return Err(mismatch_at(format!(
                "the recording has {left} more effect(s) for this call that the replay did not \
                 ask for, starting with {next}"
            )));
        }
        if reply.is_error != recorded.0 {
            return Err(mismatch_at(format!(
                "the reply is {} but was recorded as {}",
                if reply.is_error {
                    "an error"
                } else {
                    "not an error"
                },
                if recorded.0 {
                    "an error"
                } else {
                    "not an error"
                }
            )));
        }
        // Cassettes recorded before paths were made relative hold the recording project's
        // absolute paths: they still match in the folder they were recorded in.
        let text = relative_paths(&reply.text, &root);
        if text != recorded.1 && reply.text != recorded.1 {
            return Err(mismatch_at(text_difference(&recorded.1, &text)));
        }
    }
    Ok(done)
}

/// The project of a session in `cwd`: the folder its scripts and runs belong to (`cwd`
/// itself outside any project).
fn project_root(cwd: &Path) -> PathBuf {
    crate::paths::Locations::discover(cwd)
        .project_root
        .unwrap_or_else(|| cwd.to_path_buf())
}

/// `text` with the paths inside `root` written relative to it (`.mekara/runs/x`), and
/// `root` itself as `.`, so that a cassette replays in another checkout: a reply can name a
/// file of the project (a refused `eject_script`, a Starlark error's location). Only whole
/// path components are replaced: `/a/b` is not taken out of `/a/bc`.
pub(crate) fn relative_paths(text: &str, root: &Path) -> String {
    replace_root(text, root, "", ".")
}

/// `text` with `root` (as a whole path component) written as [`PROJECT`], for a cassette.
fn to_placeholder(text: &str, root: &Path) -> String {
    let inside = format!("{PROJECT}/");
    replace_root(text, root, &inside, PROJECT)
}

/// [`to_placeholder`] of each value of a step's environment.
fn env_to_placeholder(env: &BTreeMap<String, String>, root: &Path) -> BTreeMap<String, String> {
    env.iter()
        .map(|(k, v)| (k.clone(), to_placeholder(v, root)))
        .collect()
}

/// `text` from a cassette with [`PROJECT`] written as `root`, the replay's project.
fn from_placeholder(text: &str, root: &Path) -> String {
    text.replace(PROJECT, &root.to_string_lossy())
}

/// `text` with each whole-component occurrence of `root` (as given, and canonical) replaced:
/// `root/...` by `inside` followed by the rest, `root` alone by `alone`.
fn replace_root(text: &str, root: &Path, inside: &str, alone: &str) -> String {
    let mut out = text.to_string();
    let canonical = root.canonicalize().ok().filter(|c| c != root);
    for root in std::iter::once(root.to_path_buf()).chain(canonical) {
        let root = root.to_string_lossy().trim_end_matches('/').to_string();
        if root.is_empty() || !out.contains(&root) {
            continue;
        }
        let mut replaced = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some(at) = rest.find(&root) {
            let after = &rest[at + root.len()..];
            replaced.push_str(&rest[..at]);
            match after.chars().next() {
                Some('/') => {
                    replaced.push_str(inside);
                    rest = &after[1..];
                }
                Some(c) if c.is_alphanumeric() || matches!(c, '_' | '-' | '.') => {
                    replaced.push_str(&root);
                    rest = after;
                }
                _ => {
                    replaced.push_str(alone);
                    rest = after;
                }
            }
        }
        replaced.push_str(rest);
        out = replaced;
    }
    out
}

/// Names the first line where two texts differ, with both versions of it.
fn text_difference(recorded: &str, replayed: &str) -> String {
    let mut a = recorded.lines();
    let mut b = replayed.lines();
    let mut line = 1;
    loop {
        match (a.next(), b.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (None, None) => return "the reply texts differ only in line endings".to_string(),
            (x, y) => {
                return format!(
                    "the reply text differs at line {line}:\n  recorded: {}\n  replayed: {}",
                    x.map_or("(end of text)".to_string(), |l| format!("{l:?}")),
                    y.map_or("(end of text)".to_string(), |l| format!("{l:?}"))
                );
            }
        }
    }
}
