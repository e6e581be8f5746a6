//! Small display helpers shared by the command line, the MCP servers and `mekara install`:
//! times, kinds of JSON values, lists of names. They only format; what a message says is
//! up to its caller, and nothing here depends on the command line or the servers.

use std::fmt::Display;

use serde_json::Value as Json;

use crate::engine::step::StepRecord;

/// `2026-11-22T03:05:12Z` from Unix milliseconds.
pub(crate) fn format_time(ms: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(time).to_string()
}

/// `512 B`, `12.3 KiB`, `4.0 MiB`: a size in bytes, for people.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    #[allow(clippy::cast_precision_loss)] // a size shown to one decimal
    let mut size = n as f64 / 1024.0;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    format!("{size:.1} {}", UNITS[unit])
}

/// `a string`, `an array`, … for error messages.
pub(crate) fn json_type(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// `` `a`, `b` ``: names in backticks, joined by commas.
pub(crate) fn quoted<T: Display>(names: impl IntoIterator<Item = T>) -> String {
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `1 step`, `3 steps`: a count and its noun, plural when it is not one.
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The mark of a step's outcome: `✓` it succeeded, `⚠` it failed but the script had said
/// `allow_failure = True` (it received the result and went on), `✗` it failed.
pub(crate) fn step_mark(record: &StepRecord) -> &'static str {
    outcome_mark(record.result.success, record.allow_failure)
}

/// The mark of a called script's end: `←` it returned, `⚠` it failed but its caller had said
/// `allow_failure = True`, `✗` it failed.
pub(crate) fn return_mark(success: bool, allow_failure: bool) -> &'static str {
    if success {
        "←"
    } else {
        outcome_mark(success, allow_failure)
    }
}

fn outcome_mark(success: bool, allow_failure: bool) -> &'static str {
    if success {
        "✓"
    } else if allow_failure {
        "⚠"
    } else {
        "✗"
    }
}

/// The most of a script's arguments a reply or a hook repeats back (`status`, the hooks): the
/// arguments themselves may be megabytes, and whoever reads the reply has them already.
pub(crate) const SHOWN_ARGUMENTS: usize = 4096;

/// `text` whole when it is at most `max` bytes; else its first `max` bytes (to a character
/// boundary) and a note of how many bytes were cut.
pub(crate) fn clipped(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… [{} more bytes not shown]",
        &text[..end],
        text.len() - end
    )
    .into()
}

/// The message a panic was raised with (`panic!("...")` gives a `&str` or a `String`), or
/// "no message".
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("no message")
}

/// `answer (through the agent)`: the label of an `ask` step's answer, saying who gave it.
pub(crate) fn answer_label(result: &crate::engine::step::StepResult) -> String {
    match result.answered_by {
        Some(by) => format!("answer ({by})"),
        None => "answer".to_string(),
    }
}

/// What an agent answer cost, as far as the agent said, and how long it took: `$0.0123,
/// 1200 tokens in, 300 out, 2 attempts, session 5d1c… (4210 ms)`.
pub(crate) fn agent_report(report: &crate::engine::step::AgentReport) -> String {
    let mut parts = Vec::new();
    if let Some(cost) = report.cost_usd {
        parts.push(format!("${cost:.4}"));
    }
    match (report.input_tokens, report.output_tokens) {
        (Some(input), Some(output)) => parts.push(format!("{input} tokens in, {output} out")),
        (Some(input), None) => parts.push(format!("{input} tokens in")),
        (None, Some(output)) => parts.push(format!("{output} tokens out")),
        (None, None) => {}
    }
    if report.attempts > 1 {
        parts.push(count(report.attempts as usize, "attempt"));
    }
    if let Some(session) = &report.session {
        parts.push(format!("session {session}"));
    }
    let mut text = if parts.is_empty() {
        "no cost reported".to_string()
    } else {
        parts.join(", ")
    };
    if let Some(ms) = report.wall_ms {
        text.push_str(&format!(" ({ms} ms)"));
    }
    text
}

/// What a retry or rewind does, said before anything runs: the step it goes on from and
/// why, the recorded steps kept and those superseded, and that those ran before.
pub(crate) fn rewind_summary(plan: &crate::engine::RewindPlan) -> String {
    use crate::engine::journal::Reason;
    let detail = plan
        .detail
        .as_deref()
        .map(|d| format!(" ({})", d.trim_end()))
        .unwrap_or_default();
    let step = &plan.step;
    let mut text = match plan.reason {
        Reason::Retry => format!("retry: step {step} failed{detail}; it runs again\n"),
        Reason::ScriptChanged => format!(
            "rewind: the script changed since this run recorded step {step}{detail}; the run goes on from there with the scripts as they are now\n"
        ),
        Reason::From => format!("rewind: from step {step}, as asked\n"),
    };
    let list = |spans: &[String]| {
        if spans.is_empty() {
            "none".to_string()
        } else {
            spans.join(", ")
        }
    };
    text.push_str(&format!(
        "kept, answered from the journal ({}): {}\n",
        count(plan.kept_steps, "step"),
        list(&plan.kept)
    ));
    text.push_str(&format!(
        "superseded, run again as far as the script asks for them ({}): {}\n",
        count(plan.again_steps, "step"),
        list(&plan.again)
    ));
    if plan.again_steps > 0 {
        text.push_str(
            "! the superseded steps ran before: what they did (files written, commands sent) may be there already\n",
        );
    }
    text
}
