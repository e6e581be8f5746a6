//! Steps as the journal records them: what a step asked for and what came of it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};

/// What a step asked for. On replay, a step call must ask for exactly the recorded input;
/// anything else means the script changed under the run.
///
/// Descriptions (`context`) and timeouts are kept in [`StepRecord`] instead: changing them
/// does not change what the step does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepInput {
    /// `auto("command")`: a shell command.
    Shell {
        /// The command line given to the shell.
        command: String,
        /// Absolute folder it runs in.
        working_dir: PathBuf,
        /// Extra environment variables.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        env: BTreeMap<String, String>,
        /// The shell the step named (`auto(..., shell = "pwsh")`); none for the default bash.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        shell: Option<String>,
    },
    /// `auto(function, kwargs)`: a Starlark function of the script.
    Function {
        /// The function's name.
        function: String,
        /// Its keyword arguments, as JSON.
        #[serde(default)]
        kwargs: Map<String, Json>,
    },
    /// `llm(prompt, expects = ...)`: work handed to the agent.
    Llm {
        /// The instruction.
        prompt: String,
        /// Output names and what each should hold.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expects: Option<Map<String, Json>>,
    },
    /// `call_script(name, request)`: another script run as a nested frame.
    Call {
        /// The script's name as written.
        script: String,
        /// Its arguments.
        request: String,
        /// Absolute folder it runs in.
        working_dir: PathBuf,
    },
    /// `ask(question, choices = ...)`: a question for the person, never for the agent.
    Ask {
        /// The question, as the person reads it.
        question: String,
        /// The answers it takes, when it takes only some.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        choices: Option<Vec<String>>,
    },
    /// `mcp(server, tool, arguments)`: a tool of another MCP server.
    Mcp {
        /// The server's name in `.mcp.json`.
        server: String,
        /// The tool's name.
        tool: String,
        /// Its arguments.
        #[serde(default)]
        arguments: Map<String, Json>,
    },
}

impl StepInput {
    /// The step's kind as the journal writes it (its `kind` field): `shell`, `function`,
    /// `llm`, `call`, `ask`, `mcp`.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            StepInput::Shell { .. } => "shell",
            StepInput::Function { .. } => "function",
            StepInput::Llm { .. } => "llm",
            StepInput::Call { .. } => "call",
            StepInput::Ask { .. } => "ask",
            StepInput::Mcp { .. } => "mcp",
        }
    }

    /// A short description for people: the command, the call, the prompt.
    pub fn summary(&self) -> String {
        match self {
            StepInput::Shell { command, .. } => format!("$ {command}"),
            StepInput::Function { function, kwargs } => {
                format!("{function}({})", Json::Object(kwargs.clone()))
            }
            StepInput::Llm { prompt, .. } => format!("llm: {}", crate::display::first_line(prompt)),
            StepInput::Call {
                script, request, ..
            } => {
                if request.is_empty() {
                    format!("call {script}")
                } else {
                    format!("call {script} {request}")
                }
            }
            StepInput::Mcp {
                server,
                tool,
                arguments,
            } => format!("mcp {server}/{tool} {}", Json::Object(arguments.clone())),
            StepInput::Ask { question, .. } => {
                format!("ask: {}", crate::display::first_line(question))
            }
        }
    }

    /// Names the differences from `recorded`, for the divergence error.
    pub fn difference(&self, recorded: &StepInput) -> String {
        let kind = |i: &StepInput| match i {
            StepInput::Shell { .. } => "a shell step",
            StepInput::Function { .. } => "a function step",
            StepInput::Llm { .. } => "an llm step",
            StepInput::Call { .. } => "a script call",
            StepInput::Mcp { .. } => "an mcp step",
            StepInput::Ask { .. } => "a question (`ask`)",
        };
        match (self, recorded) {
            (
                StepInput::Shell {
                    command: a,
                    working_dir: wa,
                    env: ea,
                    shell: sa,
                },
                StepInput::Shell {
                    command: b,
                    working_dir: wb,
                    env: eb,
                    shell: sb,
                },
            ) => differing(&[
                ("command", a.as_str(), b.as_str()),
                (
                    "working_dir",
                    &wa.display().to_string(),
                    &wb.display().to_string(),
                ),
                ("env", &format!("{ea:?}"), &format!("{eb:?}")),
                (
                    "shell",
                    sa.as_deref().unwrap_or("bash"),
                    sb.as_deref().unwrap_or("bash"),
                ),
            ]),
            (
                StepInput::Function {
                    function: a,
                    kwargs: ka,
                },
                StepInput::Function {
                    function: b,
                    kwargs: kb,
                },
            ) => differing(&[
                ("function", a.as_str(), b.as_str()),
                (
                    "kwargs",
                    &Json::Object(ka.clone()).to_string(),
                    &Json::Object(kb.clone()).to_string(),
                ),
            ]),
            (
                StepInput::Llm {
                    prompt: a,
                    expects: xa,
                },
                StepInput::Llm {
                    prompt: b,
                    expects: xb,
                },
            ) => differing(&[
                ("prompt", a.as_str(), b.as_str()),
                ("expects", &format!("{xa:?}"), &format!("{xb:?}")),
            ]),
            (
                StepInput::Call {
                    script: a,
                    request: ra,
                    working_dir: wa,
                },
                StepInput::Call {
                    script: b,
                    request: rb,
                    working_dir: wb,
                },
            ) => differing(&[
                ("script", a.as_str(), b.as_str()),
                ("request", ra.as_str(), rb.as_str()),
                (
                    "working_dir",
                    &wa.display().to_string(),
                    &wb.display().to_string(),
                ),
            ]),
            (
                StepInput::Mcp {
                    server: a,
                    tool: ta,
                    arguments: xa,
                },
                StepInput::Mcp {
                    server: b,
                    tool: tb,
                    arguments: xb,
                },
            ) => differing(&[
                ("server", a.as_str(), b.as_str()),
                ("tool", ta.as_str(), tb.as_str()),
                (
                    "arguments",
                    &Json::Object(xa.clone()).to_string(),
                    &Json::Object(xb.clone()).to_string(),
                ),
            ]),
            (
                StepInput::Ask {
                    question: a,
                    choices: ca,
                },
                StepInput::Ask {
                    question: b,
                    choices: cb,
                },
            ) => differing(&[
                ("question", a.as_str(), b.as_str()),
                ("choices", &format!("{ca:?}"), &format!("{cb:?}")),
            ]),
            _ => format!(
                "the script now asks for {} where the journal has {}",
                kind(self),
                kind(recorded)
            ),
        }
    }
}

fn differing(fields: &[(&str, &str, &str)]) -> String {
    fields
        .iter()
        .filter(|(_, now, was)| now != was)
        .map(|(field, now, was)| format!("{field} is now `{now}` but was `{was}`"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// What came of a step.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepResult {
    /// Whether the step did what it was asked.
    pub success: bool,
    /// The shell's exit code; absent for other steps or when killed by a signal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Everything written: stdout and stderr interleaved, or a function's `print`s.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub output: String,
    /// A function step's return value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<Json>,
    /// An llm step's outputs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outputs: Option<Map<String, Json>>,
    /// An mcp step's structured content (`structuredContent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Json>,
    /// Whether an mcp step's tool answered with `isError` (the call itself went through).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// Why the step failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long the step ran, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// An llm step answered by an agent process (`mekara run --agent …`): what it reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentReport>,
    /// An `ask` step: the person's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<String>,
    /// An `ask` step: who gave the answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<AnsweredBy>,
}

/// Who gave the answer of an `ask` step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnsweredBy {
    /// The person at `mekara run`.
    Terminal,
    /// The agent over MCP, passing on what the user said.
    Agent,
    /// `mekara answer RUN_ID VALUE`.
    Command,
    /// The run viewer, `mekara ui`.
    Viewer,
}

impl fmt::Display for AnsweredBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AnsweredBy::Terminal => "at the terminal",
            AnsweredBy::Agent => "through the agent",
            AnsweredBy::Command => "with `mekara answer`",
            AnsweredBy::Viewer => "in `mekara ui`",
        })
    }
}

/// What an agent process that answered a step (or finished an NL frame) reported about
/// itself, as far as it did, and how long it took.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AgentReport {
    /// The agent's own session, continued by its next step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// What the answer cost, in US dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// Tokens the model read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Tokens the model wrote.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// The agent's wall time for this answer, every attempt, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ms: Option<u64>,
    /// How many times the agent was asked (a wrong answer is asked again once).
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub attempts: u32,
    /// The model that answered, when the agent said (its price gives the cost of agents
    /// that report only tokens).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Whether `cost_usd` is mekara's estimate from its price table, not what the agent
    /// reported (`agents::prices`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cost_estimated: bool,
}

fn one() -> u32 {
    1
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's `skip_serializing_if` passes a reference
fn is_one(n: &u32) -> bool {
    *n == 1
}

/// The numbers a `parallel` group that starts at index `group` of a frame gives its steps,
/// in its members' order: those of `steps` (the frame's records) from `group` on that no
/// record has taken yet, so that a round cut short by a kill fills its gaps.
pub(crate) fn free_numbers(steps: &[StepRecord], group: usize) -> impl Iterator<Item = usize> {
    let taken: std::collections::HashSet<usize> = steps
        .get(group..)
        .unwrap_or_default()
        .iter()
        .map(|r| r.index)
        .collect();
    (group..).filter(move |n| !taken.contains(n))
}

/// One journaled step of a compiled frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct StepRecord {
    /// Position among the frame's steps, from 0.
    pub index: usize,
    /// What was asked.
    pub input: StepInput,
    /// The `context` the script gave, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
    /// What came of it.
    pub result: StepResult,
    /// The script said `allow_failure = True`: a failure of this step went to the script,
    /// which received the result and went on, instead of stopping the frame.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_failure: bool,
    /// The step was run by a member of a `parallel` group: which group and which member.
    /// Members' steps are journaled as they finish, in any order; replay looks them up by
    /// member, so the order does not matter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<ParallelMember>,
}

/// Where a step of a `parallel` group belongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ParallelMember {
    /// The group: the frame's step position where the group's steps begin.
    pub group: usize,
    /// The member: its position in the list given to `parallel`, from 0.
    pub member: usize,
}

impl fmt::Display for ParallelMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parallel group [{}], member {}", self.group, self.member)
    }
}

impl StepRecord {
    /// Whether the step failed but the script had allowed it (`allow_failure = True`).
    pub(crate) fn failure_allowed(&self) -> bool {
        !self.result.success && self.allow_failure
    }
}

impl fmt::Display for StepRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.index, self.input.summary())
    }
}

/// The most kept of one step's text (a shell step's output, a function step's prints, an
/// llm step's prompt), head and tail; the rest is counted and dropped. Also the most a value
/// a step takes or gives may hold as JSON.
pub(crate) const MAX_KEPT: usize = 8 * 1024 * 1024;

/// The one refusal of a value past [`MAX_KEPT`]: `what` (e.g. "the value a function step
/// returns") is `size` bytes of JSON. Every door a value comes in or goes out by (a
/// function step's arguments and value, llm outputs, answers to `ask`, an agent's answer,
/// a tool's structured content) says it the same way.
pub(crate) fn too_large(what: &str, size: usize) -> String {
    format!(
        "{what} is {size} bytes of JSON, more than the {MAX_KEPT} bytes a step keeps; pass a smaller value (a file's path instead of its text, for example)"
    )
}

/// [`too_large`] when `value` is more than [`MAX_KEPT`] bytes of JSON, measured without
/// writing it out.
pub(crate) fn oversize(value: &impl serde::Serialize, what: &str) -> Option<String> {
    let size = json_len(value);
    (size > MAX_KEPT).then(|| too_large(what, size))
}

/// The length of `value` as JSON text, without writing it out.
pub(crate) fn json_len(value: &impl serde::Serialize) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing to a counter cannot fail, and the values measured (JSON values and maps of
    // them, strings) always serialize.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// Text collected up to [`MAX_KEPT`]: all of it, else its head and tail with a note of how
/// much was dropped between them.
#[derive(Debug, Default)]
pub(crate) struct Kept {
    head: Vec<u8>,
    tail: Vec<u8>,
    dropped: usize,
}

impl Kept {
    /// `text` kept as [`Kept`] keeps it.
    pub(crate) fn text(text: &str) -> String {
        if text.len() <= MAX_KEPT {
            return text.to_string();
        }
        let mut kept = Kept::default();
        kept.push(text.as_bytes());
        kept.into_string()
    }

    /// Adds `bytes` at the end.
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        let half = MAX_KEPT / 2;
        if self.head.len() < half {
            let take = bytes.len().min(half - self.head.len());
            self.head.extend_from_slice(&bytes[..take]);
            bytes = &bytes[take..];
        }
        self.tail.extend_from_slice(bytes);
        if self.tail.len() > 2 * half {
            let excess = self.tail.len() - half;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
    }

    /// What was kept, with the note where text was dropped.
    pub(crate) fn into_string(mut self) -> String {
        if self.tail.len() > MAX_KEPT / 2 {
            let excess = self.tail.len() - MAX_KEPT / 2;
            self.tail.drain(..excess);
            self.dropped += excess;
        }
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        if self.dropped > 0 {
            text.push_str(&format!("\n[... {} bytes not kept ...]\n", self.dropped));
        }
        text.push_str(&String::from_utf8_lossy(&self.tail));
        text
    }
}

impl StepRecord {
    /// The mark of the step's outcome: `✓` it succeeded, `⚠` it failed but the script had
    /// said `allow_failure = True` (it received the result and went on), `✗` it failed.
    pub(crate) fn mark(&self) -> &'static str {
        crate::display::outcome_mark(self.result.success, self.allow_failure)
    }
}

impl StepResult {
    /// Replaces every value of `secrets` in the result's texts and values by `${VAR}`,
    /// before it is journaled and before the script sees it.
    pub(crate) fn redact(&mut self, secrets: &crate::secrets::Secrets) {
        if secrets.is_empty() {
            return;
        }
        self.output = secrets.redact(&self.output);
        for text in [&mut self.error, &mut self.answer].into_iter().flatten() {
            *text = secrets.redact(text);
        }
        for value in [&mut self.value, &mut self.structured]
            .into_iter()
            .flatten()
        {
            secrets.redact_json(value);
        }
        if let Some(outputs) = &mut self.outputs {
            let mut all = Json::Object(std::mem::take(outputs));
            secrets.redact_json(&mut all);
            if let Json::Object(all) = all {
                *outputs = all;
            }
        }
    }

    /// `answer (through the agent)`: the label of an `ask` step's answer, saying who gave it.
    pub(crate) fn answer_label(&self) -> String {
        match self.answered_by {
            Some(by) => format!("answer ({by})"),
            None => "answer".to_string(),
        }
    }
}

impl AgentReport {
    /// What an agent answer cost, as far as the agent said, and how long it took: `$0.0123,
    /// 1200 tokens in, 300 out, 2 attempts, session 5d1c… (4210 ms)`.
    pub(crate) fn summary(&self) -> String {
        let mut parts = Vec::new();
        if let Some(cost) = self.cost_usd {
            parts.push(crate::display::usd(cost, self.cost_estimated));
        }
        match (self.input_tokens, self.output_tokens) {
            (Some(input), Some(output)) => parts.push(format!("{input} tokens in, {output} out")),
            (Some(input), None) => parts.push(format!("{input} tokens in")),
            (None, Some(output)) => parts.push(format!("{output} tokens out")),
            (None, None) => {}
        }
        if self.attempts > 1 {
            parts.push(crate::display::count(self.attempts as usize, "attempt"));
        }
        if let Some(session) = &self.session {
            parts.push(format!("session {session}"));
        }
        let mut text = if parts.is_empty() {
            "no cost reported".to_string()
        } else {
            parts.join(", ")
        };
        if let Some(ms) = self.wall_ms {
            text.push_str(&format!(" ({ms} ms)"));
        }
        text
    }
}
