//! What happened during one tool call: the engine's [`Observer`] of a session, which keeps
//! the steps and frame changes for the reply and passes progress on as it happens. It holds
//! what happened, not words: those are [`super::reply`]'s (which reads this module, never the
//! other way).

use std::cell::RefCell;

use crate::engine::step::{StepInput, StepRecord};
use crate::engine::{FrameEvent, Observer};

/// What happened during one call, in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum CallEvent {
    /// A step ran.
    Step {
        /// The stack label of its frame: `test:nested[0] > test:random`.
        frame: String,
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
        /// Its caller allowed it to fail.
        allow_failure: bool,
    },
}

/// Collects [`CallEvent`]s, and passes each step's start and output lines to `progress`.
pub(crate) struct History<'a> {
    events: RefCell<Vec<CallEvent>>,
    progress: &'a dyn Fn(Progress<'_>),
    line: RefCell<Vec<u8>>,
}

/// Something worth a progress notification.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Progress<'a> {
    /// A step started (shown as `test:random[0] $ shuf -i 1-100 -n 1`).
    Started(StepStarted<'a>),
    /// The running step wrote this line (the last complete one, or what it is writing now).
    Line(&'a str),
    /// The script printed this (`print` outside a function step); still logged as well.
    Printed(&'a str),
}

/// The step that started, as a progress message shows it (the words are [`super::reply`]'s
/// `Display`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct StepStarted<'a> {
    /// The stack label of its frame.
    pub frame: &'a str,
    /// Its index in the frame.
    pub index: usize,
    /// What it asks.
    pub input: &'a StepInput,
}

impl<'a> History<'a> {
    /// An empty history that reports progress to `progress`.
    pub(crate) fn new(progress: &'a dyn Fn(Progress<'_>)) -> History<'a> {
        History {
            events: RefCell::new(Vec::new()),
            progress,
            line: RefCell::new(Vec::new()),
        }
    }

    /// The events so far.
    pub(crate) fn into_events(self) -> Vec<CallEvent> {
        self.events.into_inner()
    }
}

impl Observer for History<'_> {
    fn step_started(
        &self,
        frame: &str,
        index: usize,
        input: &StepInput,
        _context: Option<&str>,
        _recorded: crate::engine::observer::Recorded,
    ) {
        self.line.borrow_mut().clear();
        (self.progress)(Progress::Started(StepStarted {
            frame,
            index,
            input,
        }));
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

    fn print(&self, frame: &str, text: &str) {
        tracing::info!(target: "mekara::print", "{frame}: {text}");
        (self.progress)(Progress::Printed(text));
    }

    fn step_finished(&self, frame: &str, record: &StepRecord) {
        self.events.borrow_mut().push(CallEvent::Step {
            frame: frame.to_string(),
            record: Box::new(record.clone()),
        });
    }

    fn frame_event(&self, event: FrameEvent<'_>) {
        self.events.borrow_mut().push(match event {
            FrameEvent::Pushed { path } => CallEvent::Called {
                path: path.to_string(),
            },
            FrameEvent::Ended {
                path,
                success,
                allow_failure,
            } => CallEvent::Returned {
                path: path.to_string(),
                success,
                allow_failure,
            },
        });
    }
}
