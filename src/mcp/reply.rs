//! The Markdown an agent reads after each call: the steps executed since the last reply,
//! then exactly one pending item with the exact next call to make.
//!
//! Every shape here is pinned by snapshot tests (`tests/mcp_replies.rs`); change them on
//! purpose only.

use std::cell::RefCell;
use std::fmt::Write as _;

use serde_json::{Map, Value as Json};

use crate::engine::journal::Outcome;
use crate::engine::step::{StepInput, StepRecord};
use crate::engine::{FrameEvent, Observer, Pending};

/// The most lines of one step's output a reply shows; the rest stays in the journal.
const HEAD_LINES: usize = 40;
const TAIL_LINES: usize = 20;
/// The most characters of one output line a reply shows.
const MAX_LINE: usize = 400;

/// What happened during one call, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A step ran.
    Step {
        /// `test:nested[0] > test:random[2]`.
        path: String,
        /// What it asked, what came of it.
        record: Box<StepRecord>,
    },
    /// A script was pushed (by `call_script` or a nested `start`).
    Called {
        /// Its stack label.
        path: String,
    },
    /// A script ended.
    Returned {
        /// Its stack label.
        path: String,
        /// Whether it succeeded.
        success: bool,
    },
}

/// Collects [`Event`]s, and passes each step's start and output lines to `progress`.
pub struct History<'a> {
    events: RefCell<Vec<Event>>,
    progress: &'a dyn Fn(Progress<'_>),
    line: RefCell<Vec<u8>>,
}

/// Something worth a progress notification.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// A step started: `test:random[0] $ shuf -i 1-100 -n 1`.
    Started(&'a str),
    /// The running step wrote this line (the last complete one, or what it is writing now).
    Line(&'a str),
}

impl<'a> History<'a> {
    /// An empty history that reports progress to `progress`.
    pub fn new(progress: &'a dyn Fn(Progress<'_>)) -> History<'a> {
        History {
            events: RefCell::new(Vec::new()),
            progress,
            line: RefCell::new(Vec::new()),
        }
    }

    /// The events so far.
    pub fn into_events(self) -> Vec<Event> {
        self.events.into_inner()
    }
}

impl Observer for History<'_> {
    fn step_started(&self, frame: &str, index: usize, input: &StepInput, _context: Option<&str>) {
        self.line.borrow_mut().clear();
        (self.progress)(Progress::Started(&format!(
            "{frame}[{index}] {}",
            input.summary()
        )));
    }

    fn output(&self, chunk: &[u8]) {
        let mut line = self.line.borrow_mut();
        let mut last_complete = None;
        for piece in chunk.split_inclusive(|b| *b == b'\n') {
            if line.ends_with(b"\n") {
                line.clear();
            }
            line.extend_from_slice(piece);
            if line.ends_with(b"\n") {
                last_complete = Some(line.clone());
            }
        }
        let shown = last_complete.unwrap_or_else(|| line.clone());
        let text = String::from_utf8_lossy(&shown);
        let text = text.trim_end();
        if !text.is_empty() {
            (self.progress)(Progress::Line(text));
        }
    }

    fn step_finished(&self, frame: &str, record: &StepRecord) {
        self.events.borrow_mut().push(Event::Step {
            path: format!("{frame}[{}]", record.index),
            record: Box::new(record.clone()),
        });
    }

    fn frame_event(&self, event: FrameEvent<'_>) {
        self.events.borrow_mut().push(match event {
            FrameEvent::Pushed { path } => Event::Called {
                path: path.to_string(),
            },
            FrameEvent::Ended { path, success } => Event::Returned {
                path: path.to_string(),
                success,
            },
        });
    }
}

/// Where a step's full output can be read, for the line that says some was cut.
pub struct JournalRef<'a> {
    /// The run's id.
    pub run: &'a str,
}

/// The "steps executed" part of a reply; empty when nothing ran.
pub fn steps(events: &[Event], journal: Option<&JournalRef<'_>>) -> String {
    if events.is_empty() {
        return String::new();
    }
    let mut out = String::from("## Steps executed\n\n");
    for event in events {
        match event {
            Event::Called { path } => {
                let _ = writeln!(out, "- → `{path}` started");
            }
            Event::Returned { path, success } => {
                let _ = writeln!(
                    out,
                    "- {} `{path}` {}",
                    if *success { "←" } else { "✗" },
                    if *success { "returned" } else { "failed" }
                );
            }
            Event::Step { path, record } => step(&mut out, path, record, journal),
        }
    }
    out.push('\n');
    out
}

fn step(out: &mut String, path: &str, record: &StepRecord, journal: Option<&JournalRef<'_>>) {
    let mark = if record.result.success { "✓" } else { "✗" };
    let _ = write!(out, "- {mark} `{path}` ");
    match &record.input {
        StepInput::Shell { command, .. } if !command.contains('\n') => {
            let _ = write!(out, "`$ {command}`");
        }
        StepInput::Shell { command, .. } => {
            let _ = write!(
                out,
                "shell command:\n  ```sh\n{}  ```",
                indent(command, "  ")
            );
        }
        StepInput::Function { function, kwargs } => {
            let _ = write!(out, "`{}`", function_call(function, kwargs));
        }
        StepInput::Mcp { .. } => {
            let _ = write!(out, "`{}`", record.input.summary());
        }
        other => {
            let _ = write!(out, "{}", other.summary());
        }
    }
    if let Some(context) = &record.context {
        let _ = write!(out, " — {}", first_line(context));
    }
    out.push('\n');
    match (&record.result.error, record.result.exit_code) {
        (Some(error), _) => {
            let _ = writeln!(out, "  error: {}", indent(error.trim_end(), "  ").trim());
        }
        (None, Some(code)) if code != 0 => {
            let _ = writeln!(out, "  exit code {code}");
        }
        _ => {}
    }
    let mut output = record.result.output.clone();
    if let Some(value) = &record.result.value
        && !value.is_null()
    {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        let _ = writeln!(output, "→ {}", compact(value));
    }
    if !output.trim().is_empty() {
        let shown = shorten(&output, journal.map(|j| (j.run, path)));
        let _ = writeln!(out, "  <output>\n{}  </output>", indent(&shown, "  "));
    }
}

/// `verdict(guess="50", secret=57)`.
fn function_call(function: &str, kwargs: &Map<String, Json>) -> String {
    let args: Vec<String> = kwargs
        .iter()
        .map(|(k, v)| format!("{k}={}", compact(v)))
        .collect();
    format!("{function}({})", args.join(", "))
}

fn compact(value: &Json) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| value.to_string())
}

/// Keeps the head and tail of a long output, with a line saying what was cut and where
/// the whole of it is.
fn shorten(output: &str, source: Option<(&str, &str)>) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let clip = |line: &str| -> String {
        if line.chars().count() <= MAX_LINE {
            line.to_string()
        } else {
            let kept: String = line.chars().take(MAX_LINE).collect();
            format!("{kept}… [line cut at {MAX_LINE} characters]")
        }
    };
    let mut shown = String::new();
    if lines.len() <= HEAD_LINES + TAIL_LINES {
        for line in &lines {
            let _ = writeln!(shown, "{}", clip(line));
        }
        return shown;
    }
    for line in &lines[..HEAD_LINES] {
        let _ = writeln!(shown, "{}", clip(line));
    }
    let cut = lines.len() - HEAD_LINES - TAIL_LINES;
    let whole = match source {
        Some((run, step)) => {
            format!("the whole output is in the journal: `mekara runs show {run}`, step {step}")
        }
        None => "the whole output is in the run's journal".to_string(),
    };
    let _ = writeln!(
        shown,
        "… {cut} lines cut here (lines {}–{} of {}); {whole} …",
        HEAD_LINES + 1,
        HEAD_LINES + cut,
        lines.len()
    );
    for line in &lines[lines.len() - TAIL_LINES..] {
        let _ = writeln!(shown, "{}", clip(line));
    }
    shown
}

/// Indents every line of `text` by `by`; the result ends with a newline.
fn indent(text: &str, by: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{by}{line}");
        }
    }
    out
}

fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// The pending part of a reply. `nl_source` is the compiled script's NL text, given the
/// first time its frame needs the agent.
pub fn pending(pending: &Pending, nl_source: Option<(&str, &str)>) -> String {
    let mut out = String::new();
    match pending {
        Pending::Llm {
            path,
            prompt,
            expects,
        } => {
            let _ = writeln!(out, "## Your turn: llm step `{path}`\n");
            if let Some((name, source)) = nl_source {
                let _ = writeln!(
                    out,
                    "This step belongs to the compiled script `{name}`. Its NL source, for \
                     context only (mekara runs the other steps itself; do just this step):\n\n\
                     <nl-source>\n{}</nl-source>\n",
                    with_newline(source)
                );
            }
            let _ = writeln!(
                out,
                "<instructions>\n{}</instructions>\n",
                with_newline(prompt)
            );
            let expected: Vec<(&String, &Json)> = expects.iter().flat_map(|e| e.iter()).collect();
            if expected.is_empty() {
                out.push_str(
                    "No outputs are expected. When you have done this step, call \
                     `continue_compiled_script` with `{\"outputs\": {}}`.\n",
                );
            } else {
                out.push_str("Expected outputs:\n");
                for (name, description) in &expected {
                    match description.as_str() {
                        Some(d) if !d.trim().is_empty() => {
                            let _ = writeln!(out, "- `{name}`: {}", d.trim());
                        }
                        _ => {
                            let _ = writeln!(out, "- `{name}`");
                        }
                    }
                }
                let example: Vec<String> = expected
                    .iter()
                    .map(|(name, _)| format!("{}: …", compact(&Json::String((*name).clone()))))
                    .collect();
                let _ = writeln!(
                    out,
                    "\nWhen you have done this step, call `continue_compiled_script` with \
                     `{{\"outputs\": {{{}}}}}`, giving every expected output.",
                    example.join(", ")
                );
            }
            out.push_str(
                "Do only this step: mekara runs the rest. Do not call `finish_nl_script` here.\n",
            );
        }
        Pending::Nl { path, instructions } => {
            let _ = writeln!(
                out,
                "## Your turn: NL script `{path}`\n\nFollow all of these instructions \
                 yourself:\n\n<instructions>\n{}</instructions>\n\n\
                 Call `finish_nl_script` only when the whole script is done, not after each \
                 step.",
                with_newline(instructions)
            );
        }
        Pending::Fallback {
            path,
            error,
            instructions,
        } => {
            let _ = writeln!(
                out,
                "## Your turn: `{path}` failed; finish it by hand\n\n\
                 What failed:\n\n<error>\n{}</error>\n\n\
                 The steps listed as done above ran already: do not repeat them. Do what is \
                 left of the script's instructions yourself, fixing or working around what \
                 failed:\n\n<instructions>\n{}</instructions>\n\n\
                 Call `finish_nl_script` when the whole script is done.",
                with_newline(error),
                with_newline(instructions)
            );
        }
        Pending::Finished {
            run,
            outcome,
            fell_back,
        } => {
            let how = match (outcome, fell_back) {
                (_, true) => "failed and was finished by hand",
                (Outcome::Completed, false) => "completed",
                _ => "was finished by hand",
            };
            let _ = writeln!(
                out,
                "## Done\n\nThe script {how} (run `{run}`). Nothing is pending: do not call \
                 `continue_compiled_script` or `finish_nl_script` for it again."
            );
        }
    }
    out
}

fn with_newline(text: &str) -> String {
    let mut text = text.trim_end().to_string();
    text.push('\n');
    text
}
