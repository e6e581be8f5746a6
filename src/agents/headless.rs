//! Agent processes as step runners (`mekara run --agent claude`, `--agent-command CMD`): the
//! request mekara gives an agent for one llm step or NL script, the answer it reads back,
//! and what every headless adapter shares to start the agent. The adapters themselves are in
//! their clients' files ([`super::command`], [`super::claude`], [`super::codex`],
//! [`super::gemini`]).
//!
//! An adapter only runs the agent once and reads what it said. Deciding what to ask (the
//! prompt is the reply an agent over MCP would read, rendered by [`super::reply`]), checking
//! the outputs, asking again, journaling and the run's limits belong to the driver in
//! `crate::cli`. Nothing here knows the engine's frames.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value as Json, json};

use super::rate_limit::RateLimited;
use crate::display::shell_quote;
use crate::engine::group_note::GroupNote;
use crate::engine::journal::Event;
use crate::engine::runner::{Ran, ShellStep};
use crate::engine::step::{AgentReport, MAX_KEPT, too_large};
use crate::engine::{CancelToken, ShellRunner, StepRunner};

/// What the agent is asked to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One llm step of a compiled script: give its outputs.
    Llm,
    /// A whole NL script: do it, then return.
    Nl,
    /// A compiled script that failed: finish it by hand, then return.
    Fallback,
}

impl Kind {
    /// Its name in the request (`llm`, `nl`, `fallback`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Llm => "llm",
            Kind::Nl => "nl",
            Kind::Fallback => "fallback",
        }
    }
}

/// One question to the agent.
#[derive(Debug, Clone)]
pub(crate) struct Request {
    /// The run's id; also the session key, stable for the run.
    pub run_id: String,
    /// The pending item's path: `test:random[1]`.
    pub step: String,
    pub kind: Kind,
    /// The text an agent driving the run over MCP would be given at this point.
    pub prompt: String,
    /// The expected outputs, as a JSON Schema of the `outputs` object.
    pub schema: Json,
    /// The agent's own session from its last answer in this run, to continue.
    pub session: Option<String>,
    /// 1, or 2 when the first answer was refused.
    pub attempt: u32,
    /// Why the previous answer was refused.
    pub previous_error: Option<String>,
    /// What the agent may still spend, when the run has a cost limit.
    pub budget_usd: Option<f64>,
    /// What the answers so far in `session` cost, as journaled.
    pub session_spent: SessionSpent,
    /// The folder the agent runs in.
    pub working_dir: PathBuf,
    /// Where the agent's process group is noted while it runs, so that a resume after mekara
    /// was killed kills an agent left working (as it kills a shell step's group).
    pub group_note: Option<GroupNote>,
}

impl Request {
    /// Whether the agent is to give outputs: an llm step that expects some.
    pub(crate) fn wants_outputs(&self) -> bool {
        self.kind == Kind::Llm
            && self.schema["properties"]
                .as_object()
                .is_some_and(|p| !p.is_empty())
    }
}

/// What came of asking the agent.
#[derive(Debug)]
pub(crate) enum Reply {
    /// The outputs it gave (`{}` for an NL script).
    Outputs(Map<String, Json>, AgentReport),
    /// Its answer could not be read; worth asking again with this error.
    Malformed(String, AgentReport),
    /// It said it could not do the step, or it failed, hung or crashed.
    Failed(String, AgentReport),
    /// The model turned it away for now (a rate limit or an overload): worth asking again
    /// after a wait.
    RateLimited(RateLimited, AgentReport),
    /// The run was stopped (Ctrl-C) while the agent worked.
    Cancelled,
}

impl Reply {
    /// The reply with `f` applied to its report (a price estimate, a correction).
    #[must_use]
    pub(crate) fn map_report(self, f: impl FnOnce(AgentReport) -> AgentReport) -> Reply {
        match self {
            Reply::Outputs(outputs, report) => Reply::Outputs(outputs, f(report)),
            Reply::Malformed(error, report) => Reply::Malformed(error, f(report)),
            Reply::Failed(error, report) => Reply::Failed(error, f(report)),
            Reply::RateLimited(limited, report) => Reply::RateLimited(limited, f(report)),
            Reply::Cancelled => Reply::Cancelled,
        }
    }
}

/// An agent process mekara starts for each question.
pub(crate) trait Agent {
    /// Asks once, and waits at most `timeout` for the answer.
    fn ask(&mut self, request: &Request, timeout: Duration, cancel: &CancelToken) -> Reply;
}

/// The JSON Schema of an llm step's outputs, from its `expects`: an object with exactly the
/// expected names, each described by its `expects` text.
pub(crate) fn outputs_schema(expects: Option<&Map<String, Json>>) -> Json {
    let mut properties = Map::new();
    let mut required = Vec::new();
    for (name, description) in expects.into_iter().flatten() {
        let mut property = Map::new();
        if let Some(d) = description.as_str().filter(|d| !d.trim().is_empty()) {
            property.insert("description".into(), Json::String(d.trim().to_string()));
        }
        properties.insert(name.clone(), Json::Object(property));
        required.push(Json::String(name.clone()));
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The last JSON object in an agent's free-text answer (whole, not one nested in another),
/// for agents that cannot be made to answer in JSON only: it may stand alone, end a
/// sentence or sit in a fenced code block.
pub(crate) fn last_json_object(text: &str) -> Option<Map<String, Json>> {
    let mut last = None;
    let mut at = 0;
    while let Some(found) = text[at..].find('{') {
        let start = at + found;
        let mut objects = serde_json::Deserializer::from_str(&text[start..]).into_iter::<Json>();
        match objects.next() {
            Some(Ok(Json::Object(object))) => {
                last = Some(object);
                at = start + objects.byte_offset();
            }
            _ => at = start + 1,
        }
    }
    last
}

/// What a run's agent answers add up to, from its journal.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Spent {
    /// Agent answers journaled (steps answered or failed, NL scripts finished).
    pub answers: usize,
    /// Their cost, as far as the agent reported it or mekara's price table estimated it.
    pub cost_usd: f64,
    /// Whether some of that cost is an estimate from the price table.
    pub cost_estimated: bool,
    /// The tokens they read and wrote.
    pub tokens: u64,
    /// The tokens of the last agent item, for `--max-step-tokens`.
    pub last_step_tokens: u64,
    /// The agent's session of the last answer that named one.
    pub session: Option<String>,
    /// What the answers in that session added up to (a resumed Claude Code session may
    /// report its earlier totals again: `agents::claude` takes them off).
    pub in_session: SessionSpent,
}

/// What the answers of one agent session cost, as journaled.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct SessionSpent {
    pub cost_usd: f64,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Spent {
    /// Adds up the agent reports of `events`.
    pub(crate) fn of(events: &[Event]) -> Spent {
        let mut spent = Spent::default();
        for event in events {
            let report = event.agent_report();
            if let Some(report) = report {
                // A task of a `parallel` group had an agent session of its own.
                let task = matches!(event, Event::Step(step) if step.record.parallel.is_some());
                spent.add(report, !task);
            }
        }
        spent
    }

    /// Adds one answer's report; `in_run_session` when the answer was in the run's own agent
    /// session (not a task of a `parallel` group, which has one of its own).
    pub(crate) fn add(&mut self, report: &AgentReport, in_run_session: bool) {
        self.answers += 1;
        self.cost_usd += report.cost_usd.unwrap_or(0.0);
        self.cost_estimated |= report.cost_estimated;
        let tokens = report.input_tokens.unwrap_or(0) + report.output_tokens.unwrap_or(0);
        self.tokens += tokens;
        self.last_step_tokens = tokens;
        if report.session.is_some() && in_run_session {
            if report.session != self.session {
                self.in_session = SessionSpent::default();
            }
            self.session.clone_from(&report.session);
            self.in_session.cost_usd += report.cost_usd.unwrap_or(0.0);
            self.in_session.input_tokens += report.input_tokens.unwrap_or(0);
            self.in_session.output_tokens += report.output_tokens.unwrap_or(0);
        }
    }
}

/// Why an agent process gave no answer to read.
pub(super) enum Stopped {
    /// It failed, hung or crashed, or could not be started: the error, and what it wrote
    /// (empty when it did not run).
    Failed(String, Said),
    /// The run was stopped (Ctrl-C).
    Cancelled,
}

/// What a failed agent process wrote, for its adapter to read its client's error in.
#[derive(Debug, Default)]
pub(super) struct Said {
    /// All of its stdout.
    pub stdout: String,
    /// The end of its stderr.
    pub stderr: String,
}

impl Stopped {
    fn failed(error: String) -> Stopped {
        Stopped::Failed(error, Said::default())
    }
}

impl From<Stopped> for Reply {
    fn from(stopped: Stopped) -> Reply {
        match stopped {
            Stopped::Failed(error, _) => Reply::Failed(error, AgentReport::default()),
            Stopped::Cancelled => Reply::Cancelled,
        }
    }
}

/// Runs `command` for `request` through the shell as shell steps run (in the request's
/// folder, its own process group noted and killed whole when it ends, times out or is
/// cancelled, or mekara ends: [`ShellRunner::tied`]), with `stdin` as its input. Its stdout
/// is the answer; its stderr goes on to mekara's, and when it fails the end of its stderr is
/// in the error.
pub(super) fn run_agent(
    command: &str,
    stdin: &[u8],
    request: &Request,
    timeout: Duration,
    cancel: &CancelToken,
) -> Result<String, Stopped> {
    let files = tempfile::Builder::new()
        .prefix("mekara-agent-")
        .tempdir()
        .map_err(|e| {
            Stopped::failed(format!("cannot make a folder for the agent's answer: {e}"))
        })?;
    let input = files.path().join("request");
    let answer = files.path().join("answer");
    std::fs::write(&input, stdin)
        .map_err(|e| Stopped::failed(format!("cannot write the agent's request: {e}")))?;
    // The shell's own stdout and stderr are the step's one pipe: the agent's stdout goes to
    // a file instead, so what it logs on stderr cannot mix into its answer.
    let step = ShellStep {
        command: format!(
            "{{ {command}\n}} <{} >{}",
            shell_quote(&input.display().to_string()),
            shell_quote(&answer.display().to_string())
        ),
        working_dir: request.working_dir.clone(),
        env: std::collections::BTreeMap::new(),
        timeout,
        group_note: request.group_note.clone(),
        number: None,
        shell: None,
    };
    let mut stderr = Vec::new();
    // The agent is stopped once its answer passes what a step keeps: `stop` is set by the
    // run's own token or by the watch on the answer's size.
    if cancel.is_cancelled() {
        return Err(Stopped::Cancelled);
    }
    let stop = CancelToken::default();
    let oversized = AtomicBool::new(false);
    // Dropping `done` wakes the watch at once, so the step does not wait out its pause.
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let ran = std::thread::scope(|scope| {
        scope.spawn(|| watch_answer(&answer, cancel, &stop, &oversized, finished));
        let ran = ShellRunner::new().tied().run_shell(
            &step,
            &mut |chunk| {
                use std::io::Write as _;
                let _ = std::io::stderr().write_all(chunk);
                keep_tail(&mut stderr, chunk);
            },
            &stop,
        );
        drop(done);
        ran
    });
    let stdout = read_answer_file(&answer);
    if oversized.load(Ordering::SeqCst) {
        // Stopped midway: what it had written then is not the size its answer would have
        // had, so say the limit it passed.
        return Err(Stopped::failed(format!(
            "the agent's answer passed the {MAX_KEPT} bytes a step keeps, so the agent was stopped before it finished writing it; have it give a smaller answer (a file's path instead of its text, for example)"
        )));
    }
    if stdout.len() > MAX_KEPT {
        let size = std::fs::metadata(&answer).map_or(stdout.len(), |m| {
            usize::try_from(m.len()).unwrap_or(usize::MAX)
        });
        return Err(Stopped::failed(too_large("the agent's answer", size)));
    }
    let result = match ran {
        Ran::Cancelled => return Err(Stopped::Cancelled),
        Ran::Done(result) => result,
    };
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    if let Some(error) = result.error {
        let error = error.replace("the command's process group", "its process group");
        let error = if error.starts_with("killed") {
            format!("the agent was {error}")
        } else {
            format!("the agent {error}")
        };
        let error = match crate::display::clipped(stdout.trim(), 2000) {
            said if said.is_empty() => error,
            said => format!("{error}; it wrote: {said}"),
        };
        let tail = stderr_tail(&stderr);
        let error = match &tail {
            Some(tail) => format!("{error}; on stderr it said: {tail}"),
            None => error,
        };
        let said = Said {
            stdout,
            stderr: tail.unwrap_or_default(),
        };
        return Err(Stopped::Failed(error, said));
    }
    Ok(stdout)
}

/// Every 10 ms until `finished` is dropped: passes a stop of the run (`cancel`) on to the
/// agent's step (`stop`), and stops the agent when its answer (`answer`) passes [`MAX_KEPT`],
/// noting it in `oversized`. The agent's stdout goes to a file, so its size is what was
/// written.
fn watch_answer(
    answer: &Path,
    cancel: &CancelToken,
    stop: &CancelToken,
    oversized: &AtomicBool,
    finished: std::sync::mpsc::Receiver<()>,
) {
    loop {
        if cancel.is_cancelled() {
            stop.cancel();
        }
        if std::fs::metadata(answer).is_ok_and(|m| m.len() > MAX_KEPT as u64) {
            oversized.store(true, Ordering::SeqCst);
            stop.cancel();
        }
        match finished.recv_timeout(Duration::from_millis(10)) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            Ok(()) | Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// The agent's answer as written, at most one byte past [`MAX_KEPT`]: never more is read.
fn read_answer_file(answer: &Path) -> Vec<u8> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    if let Ok(file) = std::fs::File::open(answer) {
        let _ = file.take(MAX_KEPT as u64 + 1).read_to_end(&mut bytes);
    }
    bytes
}

/// How much of the end of a failed agent's stderr its step's error keeps: agent CLIs print
/// their error there (Gemini CLI its JSON error), last.
const STDERR_TAIL: usize = 4096;

/// Appends `chunk` to `tail`, keeping only its last [`STDERR_TAIL`] bytes (and one more, to
/// tell that some were dropped).
fn keep_tail(tail: &mut Vec<u8>, chunk: &[u8]) {
    tail.extend_from_slice(chunk);
    if tail.len() > STDERR_TAIL + 1 {
        tail.drain(..tail.len() - STDERR_TAIL - 1);
    }
}

/// The kept end of an agent's stderr as text, `…` first when its start was dropped, or
/// `None` when it wrote nothing there.
fn stderr_tail(tail: &[u8]) -> Option<String> {
    let (cut, kept) = match tail.len().checked_sub(STDERR_TAIL) {
        Some(over) if over > 0 => (true, &tail[over..]),
        _ => (false, tail),
    };
    // The cut may fall inside a character: start at the next one.
    let start = kept.iter().take_while(|b| **b & 0xC0 == 0x80).count();
    let text = String::from_utf8_lossy(&kept[start..]);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(if cut {
        format!("…{text}")
    } else {
        text.to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_whole_json_object_of_an_answer_is_found() {
        let found = |text: &str| last_json_object(text).map(|o| Json::Object(o).to_string());
        assert_eq!(found(r#"{"a": 1}"#).as_deref(), Some(r#"{"a":1}"#));
        assert_eq!(
            found("Try {\"a\": 1}, then:\n```json\n{\"b\": {\"c\": 2}}\n```\nDone.").as_deref(),
            Some(r#"{"b":{"c":2}}"#)
        );
        // An unclosed brace or a set in prose is skipped, not a failure.
        assert_eq!(
            found(r#"{"a": 1} and {oops {not json"#).as_deref(),
            Some(r#"{"a":1}"#)
        );
        assert_eq!(found("red"), None);
        assert_eq!(found("[1, 2]"), None);
    }
}
