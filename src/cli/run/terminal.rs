//! [`Terminal`]: what `mekara run` shows as steps run, their output indented under them.

use std::cell::{Cell, RefCell};
use std::io::Write;
use std::time::Instant;

use crate::engine::step::{StepInput, StepRecord};
use crate::engine::{CancelToken, Executor, FrameEvent, Observer};

/// Prints steps as they run, their output indented under them.
///
/// A step's closing line is not written at once: it waits in `pending` for the next thing
/// printed, so that it and the next step's header leave in one write (with a step that
/// takes a millisecond, the second write showed in the per-step cost). Anything that shows
/// a step running, or waits, flushes first: a step's header, its output, and the run loop.
#[derive(Default)]
pub(super) struct Terminal {
    /// Lines not written yet.
    pending: RefCell<String>,
    pub(super) at_line_start: Cell<bool>,
    started: RefCell<Option<Instant>>,
    /// Stops the running step when its output cannot be shown.
    cancel: RefCell<Option<CancelToken>>,
    /// Whether stdout was closed by its reader.
    pub(super) output_closed: Cell<bool>,
}

impl Terminal {
    pub(super) fn watch(&self, executor: &Executor) {
        *self.cancel.borrow_mut() = Some(executor.cancel_token());
    }

    /// Adds a line to what is written at the next [`Terminal::flush`].
    fn line(&self, line: std::fmt::Arguments<'_>) {
        let mut pending = self.pending.borrow_mut();
        let _ = std::fmt::Write::write_fmt(&mut *pending, line);
        pending.push('\n');
    }

    /// Writes the pending lines to stdout in one write, and empties them.
    pub(super) fn flush(&self) {
        let mut pending = self.pending.borrow_mut();
        if pending.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let written = out.write_all(pending.as_bytes()).and_then(|()| out.flush());
        pending.clear();
        if let Err(e) = written {
            self.write_failed(&e);
        }
    }

    /// A step whose output nobody reads any more (`mekara run ... | head`) is stopped, like
    /// one interrupted by Ctrl-C, instead of running on unseen.
    fn write_failed(&self, e: &std::io::Error) {
        if e.kind() == std::io::ErrorKind::BrokenPipe
            && !self.output_closed.replace(true)
            && let Some(cancel) = self.cancel.borrow().as_ref()
        {
            cancel.cancel();
        }
    }
}

const BAR: &str = "  │ ";

impl Observer for Terminal {
    fn step_started(
        &self,
        frame: &str,
        index: usize,
        input: &StepInput,
        context: Option<&str>,
        _recorded: crate::engine::observer::Recorded,
    ) {
        if let Some(context) = context {
            self.line(format_args!("# {context}"));
        }
        self.line(format_args!("▶ {frame}[{index}] {}", input.summary()));
        self.flush();
        self.at_line_start.set(true);
        *self.started.borrow_mut() = Some(Instant::now());
    }

    fn output(&self, chunk: &[u8]) {
        self.flush();
        let text = String::from_utf8_lossy(chunk);
        let mut out = std::io::stdout().lock();
        let mut written = Ok(());
        for piece in text.split_inclusive('\n') {
            if self.at_line_start.get() {
                written = written.and_then(|()| out.write_all(BAR.as_bytes()));
            }
            written = written.and_then(|()| out.write_all(piece.as_bytes()));
            self.at_line_start.set(piece.ends_with('\n'));
        }
        if let Err(e) = written.and_then(|()| out.flush()) {
            self.write_failed(&e);
        }
    }

    fn print(&self, _frame: &str, text: &str) {
        self.line(format_args!("{text}"));
    }

    fn step_finished(&self, frame: &str, record: &StepRecord) {
        if !self.at_line_start.get() {
            self.line(format_args!(""));
            self.at_line_start.set(true);
        }
        let ms = record.result.duration_ms.unwrap_or(0);
        let mark = record.mark();
        match &record.result.error {
            None => self.line(format_args!("{mark} {frame}[{}] ({ms} ms)", record.index)),
            Some(error) if record.failure_allowed() => self.line(format_args!(
                "{mark} {frame}[{}] {error} (allowed by `allow_failure`: the script goes on)",
                record.index
            )),
            Some(error) => self.line(format_args!("{mark} {frame}[{}] {error}", record.index)),
        }
    }

    fn frame_event(&self, event: FrameEvent<'_>) {
        match event {
            FrameEvent::Pushed { path } => self.line(format_args!("→ {path}")),
            FrameEvent::Ended {
                path,
                success,
                allow_failure,
            } => {
                let mark = crate::display::return_mark(success, allow_failure);
                if !success && allow_failure {
                    self.line(format_args!(
                        "{mark} {path} failed (allowed by `allow_failure`: the caller goes on)"
                    ));
                } else {
                    self.line(format_args!("{mark} {path} ended"));
                }
            }
        }
    }
}
