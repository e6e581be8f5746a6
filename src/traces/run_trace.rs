//! [`RunTrace`]: one run's spans in the making, followed from its journal: the ids (the
//! trace's from the run id, a span's from the journal line that opens it) and the frames
//! open, through pushes, pops and rewinds.

use opentelemetry::trace::{SpanId, TraceId};
use sha2::Digest as _;

use super::exporter::Traces;
use crate::engine::journal::{Event, Origin, Outcome};
use crate::engine::step::{AgentReport, StepInput};

/// What the spans need of one journal event.
#[derive(Debug, Clone)]
pub(super) enum Mark {
    Push(Frame),
    Pop,
    Fail {
        at: u64,
        error: String,
    },
    /// A `call_script` step: the end of the call that pushed the frame popped last.
    CallStep,
    Supersede(usize),
    Other,
}

impl Mark {
    /// The mark of `event`, its line unknown yet.
    pub(super) fn of(event: &Event) -> Mark {
        match event {
            Event::Push(push) => Mark::Push(Frame {
                line: 0,
                epoch: 0,
                span: SpanId::INVALID,
                parent: SpanId::INVALID,
                script: push.script.clone(),
                compiled: push.compiled,
                origin: push.origin,
                request: push.request.clone(),
                at: push.at,
                fell_back: None,
                called: None,
            }),
            Event::Pop(_) => Mark::Pop,
            Event::Fail(fail) => Mark::Fail {
                at: fail.at,
                error: fail.error.clone(),
            },
            Event::Step(step) if matches!(step.record.input, StepInput::Call { .. }) => {
                Mark::CallStep
            }
            Event::Supersede(supersede) => Mark::Supersede(supersede.line),
            _ => Mark::Other,
        }
    }
}

/// A frame on the stack, as its span needs it.
#[derive(Debug, Clone)]
pub(super) struct Frame {
    /// The journal line (from 1) of its `push`.
    pub(super) line: usize,
    /// The line of the `supersede` that opened it again after it had been popped (its span
    /// was sent, so the frame reopened is a span of its own); 0 when none did.
    pub(super) epoch: usize,
    pub(super) span: SpanId,
    pub(super) parent: SpanId,
    pub(super) script: String,
    pub(super) compiled: bool,
    pub(super) origin: Origin,
    pub(super) request: String,
    pub(super) at: u64,
    /// When and why it fell back to its NL instructions.
    pub(super) fell_back: Option<(u64, String)>,
    /// The frame it called last, popped and not yet recorded as its `call_script` step:
    /// that frame's push line, epoch and time.
    pub(super) called: Option<(usize, usize, u64)>,
}

/// One run's spans in the making: a mark per journal line, and the frames open.
#[derive(Debug)]
pub(super) struct RunTrace {
    pub(super) id: String,
    pub(super) marks: Vec<Mark>,
    pub(super) stack: Vec<Frame>,
}

impl RunTrace {
    pub(super) fn trace_id(&self) -> TraceId {
        let digest = sha2::Sha256::digest(format!("mekara run {}", self.id));
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&digest[..16]);
        TraceId::from_bytes(bytes)
    }

    /// The id of the span `what` opened at journal line `line` (in `epoch`, see
    /// [`Frame::epoch`]).
    pub(super) fn span_id(&self, what: &str, line: usize, epoch: usize) -> SpanId {
        let digest = sha2::Sha256::digest(format!("mekara run {} {what} {line} {epoch}", self.id));
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        if bytes == [0; 8] {
            bytes[7] = 1;
        }
        SpanId::from_bytes(bytes)
    }

    /// Follows mark `index` (already in `marks`) on the stack.
    pub(super) fn follow(&mut self, index: usize) {
        let mark = self.marks[index].clone();
        if matches!(mark, Mark::Supersede(_)) {
            self.reopen(index);
        } else {
            let mut stack = std::mem::take(&mut self.stack);
            self.apply(&mut stack, index + 1, &mark);
            self.stack = stack;
        }
    }

    /// The stack again from the live marks up to the `supersede` at `index`, which took part
    /// of the history out. A frame popped and now open again gets a new epoch: its span, and
    /// the call step's, were sent already.
    fn reopen(&mut self, index: usize) {
        let marks = &self.marks[..=index];
        let live = crate::engine::runs::live_by(marks.len(), |i| match marks[i] {
            Mark::Supersede(line) => Some(line),
            _ => None,
        })
        .unwrap_or_else(|_| vec![true; marks.len()]);
        let mut stack = Vec::new();
        for (i, mark) in marks.iter().enumerate() {
            if live[i] {
                self.apply(&mut stack, i + 1, mark);
            }
        }
        for position in 0..stack.len() {
            let (below, rest) = stack.split_at_mut(position);
            let frame = &mut rest[0];
            frame.epoch = self
                .stack
                .iter()
                .find(|old| old.line == frame.line)
                .map_or(index + 1, |old| old.epoch);
            self.name(below.last(), frame);
        }
        self.stack = stack;
    }

    /// Gives `frame`, above `below`, its span id and its parent's.
    fn name(&self, below: Option<&Frame>, frame: &mut Frame) {
        frame.span = self.span_id("frame", frame.line, frame.epoch);
        frame.parent = match (below, frame.origin) {
            (None, _) => self.span_id("run", frame.line, frame.epoch),
            (Some(_), Origin::Call) => self.span_id("call", frame.line, frame.epoch),
            (Some(below), Origin::Start) => below.span,
        };
    }

    /// What the event of `line` does to `stack`.
    fn apply(&self, stack: &mut Vec<Frame>, line: usize, mark: &Mark) {
        match mark {
            Mark::Push(frame) => {
                let mut frame = Frame {
                    line,
                    epoch: 0,
                    ..frame.clone()
                };
                self.name(stack.last(), &mut frame);
                stack.push(frame);
            }
            Mark::Pop => {
                if let Some(popped) = stack.pop()
                    && popped.origin == Origin::Call
                    && let Some(caller) = stack.last_mut()
                {
                    caller.called = Some((popped.line, popped.epoch, popped.at));
                }
            }
            Mark::Fail { at, error } => {
                if let Some(top) = stack.last_mut() {
                    top.fell_back = Some((*at, error.clone()));
                }
            }
            Mark::CallStep => {
                if let Some(top) = stack.last_mut() {
                    top.called = None;
                }
            }
            Mark::Supersede(_) | Mark::Other => {}
        }
    }

    /// Exports what `event`, just appended, ends.
    pub(super) fn record(&mut self, traces: &Traces, event: &Event) {
        let line = self.marks.len() + 1;
        self.marks.push(Mark::of(event));
        match event {
            Event::Step(step) => {
                let frame = self.stack.get(step.depth).or(self.stack.last());
                if let Some(frame) = frame {
                    self.export_step(traces, frame, line, &step.record, step.at);
                }
            }
            Event::Wait(wait) => {
                let frame = self.stack.get(wait.depth).or(self.stack.last());
                if let Some(frame) = frame {
                    self.export_wait(traces, frame, line, wait);
                }
            }
            Event::Pop(pop) => {
                if let Some(frame) = self.stack.last() {
                    let span = FrameEnd {
                        at: pop.at,
                        outcome: pop.outcome,
                        error: pop.error.as_deref(),
                        agent: pop.agent.as_ref(),
                    };
                    self.export_frame(traces, frame, &span);
                    if self.stack.len() == 1 {
                        self.export_run(traces, frame, &span);
                    }
                }
            }
            _ => {}
        }
        self.follow(line - 1);
    }
}

/// How a frame ended, from its `pop`.
pub(super) struct FrameEnd<'a> {
    pub(super) at: u64,
    pub(super) outcome: Outcome,
    pub(super) error: Option<&'a str>,
    pub(super) agent: Option<&'a AgentReport>,
}
