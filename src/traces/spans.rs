//! The spans exported: a step's when it is journaled, a frame's when it is popped, the
//! run's when its root frame is; with their attributes, and text as a span may carry it.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt as _, TraceFlags, TraceState,
    Tracer as _,
};
use opentelemetry::{Context, KeyValue};

use super::exporter::Traces;
use super::run_trace::{Frame, FrameEnd, RunTrace};
use crate::engine::journal::{Origin, Outcome, WaitEvent};
use crate::engine::runs::RunState;
use crate::engine::step::{AgentReport, StepInput, StepRecord};
use crate::secrets::redact;

/// The most of one text (a prompt, an output) a span carries, head kept.
const MAX_TEXT: usize = 16 * 1024;

impl RunTrace {
    /// A context whose parent is span `parent` of this run's trace.
    fn under(&self, parent: SpanId) -> Context {
        Context::new().with_remote_span_context(SpanContext::new(
            self.trace_id(),
            parent,
            TraceFlags::SAMPLED,
            true,
            TraceState::default(),
        ))
    }

    pub(super) fn export_step(
        &self,
        traces: &Traces,
        frame: &Frame,
        line: usize,
        record: &StepRecord,
        at: u64,
    ) {
        let result = &record.result;
        let (span_id, start) = match (&record.input, frame.called) {
            (StepInput::Call { .. }, Some((child, epoch, child_at))) => {
                (self.span_id("call", child, epoch), child_at)
            }
            _ => (
                self.span_id("step", line, 0),
                at.saturating_sub(result.duration_ms.unwrap_or(0)),
            ),
        };
        let kind = record.input.kind();
        let mut attributes = vec![
            KeyValue::new("mekara.run.id", self.id.clone()),
            KeyValue::new("mekara.script", frame.script.clone()),
            KeyValue::new("mekara.step.index", index(record.index)),
            KeyValue::new("mekara.step.kind", kind),
            KeyValue::new(
                "mekara.step.label",
                text(&label(record, traces.include_text)),
            ),
            KeyValue::new("mekara.step.success", result.success),
        ];
        if let Some(code) = result.exit_code {
            attributes.push(KeyValue::new("mekara.step.exit_code", i64::from(code)));
        }
        if let Some(ms) = result.duration_ms {
            attributes.push(KeyValue::new("mekara.step.duration_ms", index_u64(ms)));
        }
        if record.allow_failure {
            attributes.push(KeyValue::new("mekara.step.allow_failure", true));
        }
        if let Some(member) = record.parallel {
            attributes.push(KeyValue::new(
                "mekara.step.parallel.group",
                index(member.group),
            ));
            attributes.push(KeyValue::new(
                "mekara.step.parallel.member",
                index(member.member),
            ));
        }
        if let StepInput::Call { script, .. } = &record.input {
            attributes.push(KeyValue::new("mekara.call.script", script.clone()));
        }
        if let Some(agent) = &result.agent {
            agent_attributes(&mut attributes, agent);
        }
        if traces.include_text {
            step_text(&mut attributes, record);
        }
        let mut span = traces
            .tracer
            .span_builder(format!("step {kind}"))
            .with_kind(SpanKind::Internal)
            .with_span_id(span_id)
            .with_start_time(time(start))
            .with_attributes(attributes)
            .start_with_context(&traces.tracer, &self.under(frame.span));
        if !result.success {
            let error = result
                .error
                .clone()
                .unwrap_or_else(|| "the step failed".to_string());
            fail(&mut span, &error, at);
        }
        span.end_with_timestamp(time(at));
    }

    /// A wait for a rate limit, as a span of its own under its frame: from when it started
    /// for as long as it was to last (it is exported when it starts).
    pub(super) fn export_wait(
        &self,
        traces: &Traces,
        frame: &Frame,
        line: usize,
        wait: &WaitEvent,
    ) {
        let mut attributes = vec![
            KeyValue::new("mekara.run.id", self.id.clone()),
            KeyValue::new("mekara.script", frame.script.clone()),
            KeyValue::new("mekara.wait.reason", "rate-limit"),
            KeyValue::new("mekara.wait.step", wait.step.clone()),
            KeyValue::new("mekara.wait.attempt", i64::from(wait.attempt)),
            KeyValue::new("mekara.wait.duration_ms", index_u64(wait.wait_ms)),
        ];
        if traces.include_text {
            attributes.push(KeyValue::new("mekara.wait.said", text(&wait.said)));
        }
        let mut span = traces
            .tracer
            .span_builder("wait rate-limit")
            .with_kind(SpanKind::Internal)
            .with_span_id(self.span_id("wait", line, 0))
            .with_start_time(time(wait.at))
            .with_attributes(attributes)
            .start_with_context(&traces.tracer, &self.under(frame.span));
        span.end_with_timestamp(time(wait.at.saturating_add(wait.wait_ms)));
    }

    pub(super) fn export_frame(&self, traces: &Traces, frame: &Frame, end: &FrameEnd<'_>) {
        let path: Vec<&str> = self.stack.iter().map(|f| f.script.as_str()).collect();
        let mut attributes = vec![
            KeyValue::new("mekara.run.id", self.id.clone()),
            KeyValue::new("mekara.script", frame.script.clone()),
            KeyValue::new("mekara.frame.path", path.join(" > ")),
            KeyValue::new("mekara.frame.depth", index(self.stack.len() - 1)),
            KeyValue::new("mekara.frame.compiled", frame.compiled),
            KeyValue::new(
                "mekara.frame.origin",
                match frame.origin {
                    Origin::Start => "start",
                    Origin::Call => "call",
                },
            ),
            KeyValue::new("mekara.frame.outcome", outcome(end.outcome)),
        ];
        if let Some(agent) = end.agent {
            agent_attributes(&mut attributes, agent);
        }
        if traces.include_text && !frame.request.is_empty() {
            attributes.push(KeyValue::new("mekara.frame.request", text(&frame.request)));
        }
        let mut span = traces
            .tracer
            .span_builder(format!("script {}", frame.script))
            .with_kind(SpanKind::Internal)
            .with_span_id(frame.span)
            .with_start_time(time(frame.at))
            .with_attributes(attributes)
            .start_with_context(&traces.tracer, &self.under(frame.parent));
        if let Some((at, error)) = &frame.fell_back {
            span.set_attribute(KeyValue::new("mekara.frame.fell_back", true));
            span.add_event_with_timestamp(
                "fallback",
                time(*at),
                vec![KeyValue::new("mekara.error", text(error))],
            );
        }
        if matches!(end.outcome, Outcome::Failed | Outcome::Stopped) {
            let error = end.error.unwrap_or("the script failed");
            fail(&mut span, error, end.at);
        }
        span.end_with_timestamp(time(end.at));
    }

    pub(super) fn export_run(&self, traces: &Traces, root: &Frame, end: &FrameEnd<'_>) {
        let state = match end.outcome {
            Outcome::Completed => RunState::Completed,
            Outcome::Stopped => RunState::Stopped,
            _ if root.fell_back.is_some() => RunState::FellBack,
            _ => RunState::FinishedByAgent,
        };
        let attributes = vec![
            KeyValue::new("mekara.run.id", self.id.clone()),
            KeyValue::new("mekara.script", root.script.clone()),
            KeyValue::new("mekara.run.state", state.to_string()),
            KeyValue::new("mekara.host", traces.host.clone()),
            KeyValue::new("mekara.user", traces.user.clone()),
        ];
        let builder = traces
            .tracer
            .span_builder(format!("run {}", root.script))
            .with_kind(SpanKind::Internal)
            .with_trace_id(self.trace_id())
            .with_span_id(root.parent)
            .with_start_time(time(root.at))
            .with_attributes(attributes);
        let mut span = builder.start_with_context(&traces.tracer, &Context::new());
        if state == RunState::FellBack {
            span.set_status(Status::error(text(
                root.fell_back.as_ref().map_or("", |(_, e)| e.as_str()),
            )));
        }
        span.end_with_timestamp(time(end.at));
    }
}

/// Marks `span` failed with `error`: its status, and an exception event at `at`.
fn fail(span: &mut opentelemetry_sdk::trace::Span, error: &str, at: u64) {
    let error = text(error);
    span.add_event_with_timestamp(
        "exception",
        time(at),
        vec![
            KeyValue::new("exception.type", "mekara.StepFailed"),
            KeyValue::new("exception.message", error.clone()),
        ],
    );
    span.set_status(Status::error(error));
}

fn agent_attributes(attributes: &mut Vec<KeyValue>, agent: &AgentReport) {
    if let Some(session) = &agent.session {
        attributes.push(KeyValue::new("mekara.agent.session", session.clone()));
    }
    if let Some(cost) = agent.cost_usd {
        attributes.push(KeyValue::new("mekara.agent.cost_usd", cost));
    }
    if let Some(tokens) = agent.input_tokens {
        attributes.push(KeyValue::new(
            "gen_ai.usage.input_tokens",
            index_u64(tokens),
        ));
    }
    if let Some(tokens) = agent.output_tokens {
        attributes.push(KeyValue::new(
            "gen_ai.usage.output_tokens",
            index_u64(tokens),
        ));
    }
    if let Some(ms) = agent.wall_ms {
        attributes.push(KeyValue::new("mekara.agent.wall_ms", index_u64(ms)));
    }
    attributes.push(KeyValue::new(
        "mekara.agent.attempts",
        i64::from(agent.attempts),
    ));
}

/// The text of a step, for `include_text`: what it was asked and what it gave.
fn step_text(attributes: &mut Vec<KeyValue>, record: &StepRecord) {
    let result = &record.result;
    match &record.input {
        StepInput::Llm { prompt, .. } => {
            attributes.push(KeyValue::new("mekara.step.prompt", text(prompt)));
        }
        StepInput::Ask { question, .. } => {
            attributes.push(KeyValue::new("mekara.step.prompt", text(question)));
        }
        _ => {}
    }
    if !result.output.is_empty() {
        attributes.push(KeyValue::new("mekara.step.output", text(&result.output)));
    }
    if let Some(outputs) = &result.outputs {
        let json = serde_json::Value::Object(outputs.clone()).to_string();
        attributes.push(KeyValue::new("mekara.step.outputs", text(&json)));
    }
    if let Some(answer) = &result.answer {
        attributes.push(KeyValue::new("mekara.step.answer", text(answer)));
    }
}

/// A step's label: the script's `context` for it, else what it does, without the text of a
/// prompt or question unless `include_text`.
fn label(record: &StepRecord, include_text: bool) -> String {
    if let Some(context) = &record.context {
        return context.clone();
    }
    match &record.input {
        StepInput::Llm { .. } | StepInput::Ask { .. } if !include_text => {
            record.input.kind().to_string()
        }
        StepInput::Shell { command, .. } => command.clone(),
        input => input.summary(),
    }
}

fn outcome(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Completed => "completed",
        Outcome::FinishedByAgent => "finished_by_agent",
        Outcome::Failed => "failed",
        Outcome::Stopped => "stopped",
    }
}

/// `text` as a span may carry it: redacted of this process's secrets, at most
/// [`MAX_TEXT`] bytes.
fn text(text: &str) -> String {
    let mut text = redact(text);
    if text.len() > MAX_TEXT {
        let mut cut = MAX_TEXT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
        text.push_str(" [...]");
    }
    text
}

fn time(ms: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms)
}

fn index(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn index_u64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}
