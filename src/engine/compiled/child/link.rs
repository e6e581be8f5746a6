//! [`Link`]: the child's line to its parent, which is the child's runner and observer; and
//! how the child ends when its parent is gone.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::sync::Mutex;

use super::protocol::{Answer, Ask, Shell, write_line};
use crate::engine::compiled::context::Holder;
use crate::engine::compiled::{Evaluation, Suspension};
use crate::engine::journal::JournalError;
use crate::engine::observer::Observer;
use crate::engine::observer::Recorded;
use crate::engine::runner::{CancelToken, Ran, ShellStep, StepRunner, ToolCall};
use crate::engine::step::{StepInput, StepRecord};

/// Ends the child when its parent is gone or no longer follows the protocol: nothing it
/// would do next could reach anyone.
fn parent_gone() -> ! {
    std::process::exit(2)
}

/// How long a child holding a suspended evaluation waits for the parent to take it up
/// before it ends on its own: the parent then starts a new one, as it would after any end.
pub(super) const IDLE: std::time::Duration = std::time::Duration::from_secs(10 * 60);

/// Sets [`IDLE`] in seconds, for tests (a test cannot wait ten minutes).
const IDLE_VAR: &str = "MEKARA_EVALUATOR_IDLE_SECS";

/// [`IDLE`], or the seconds `MEKARA_EVALUATOR_IDLE_SECS` gives.
fn idle() -> std::time::Duration {
    std::env::var(IDLE_VAR)
        .ok()
        .and_then(|secs| secs.parse().ok())
        .map_or(IDLE, std::time::Duration::from_secs)
}

/// Ends the process `idle` from now, unless dropped first: a thread waits that long for the
/// word to stand down. A blocking read of stdin cannot be given a timeout on every system (a
/// Windows anonymous pipe has none), so the wait is beside it, the same on all.
struct IdleWatch {
    /// Dropped, it ends the thread's wait at once.
    _stand_down: std::sync::mpsc::Sender<()>,
}

impl IdleWatch {
    fn start(idle: std::time::Duration) -> IdleWatch {
        let (stand_down, told) = std::sync::mpsc::channel::<()>();
        std::thread::spawn(move || {
            if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = told.recv_timeout(idle) {
                std::process::exit(0);
            }
        });
        IdleWatch {
            _stand_down: stand_down,
        }
    }
}

/// The child's line to its parent, which is its runner and its observer.
pub(super) struct Link(pub(super) Mutex<(BufReader<std::io::Stdin>, std::io::Stdout)>);

impl Link {
    /// Says `ask` and waits for the answer (see [`parent_gone`]).
    fn ask(&self, ask: &Ask) -> Answer {
        let mut link = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (from_parent, to_parent) = &mut *link;
        if write_line(to_parent, ask).is_err() {
            parent_gone();
        }
        Self::read(from_parent)
    }

    fn read(from_parent: &mut impl BufRead) -> Answer {
        let mut line = String::new();
        match from_parent.read_line(&mut line) {
            Ok(n) if n > 0 => {}
            _ => parent_gone(),
        }
        serde_json::from_str(&line).unwrap_or_else(|_| parent_gone())
    }

    /// Says `ask`, which takes no answer.
    pub(super) fn tell(&self, ask: &Ask) {
        let mut link = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if write_line(&mut link.1, ask).is_err() {
            parent_gone();
        }
    }

    fn ran(&self, ask: &Ask) -> Ran {
        match self.ask(ask) {
            Answer::Ran(ran) => ran,
            _ => parent_gone(),
        }
    }

    pub(super) fn journal(&self, record: &StepRecord) -> Result<(), JournalError> {
        match self.ask(&Ask::Journal(record.clone())) {
            Answer::Journaled(true) => Ok(()),
            // The parent keeps the real error; this one only ends the evaluation.
            _ => Err(JournalError::Io {
                path: PathBuf::from("(the parent's journal)"),
                source: std::io::Error::other("not written"),
            }),
        }
    }
}

impl Holder for Link {
    fn hold(&self, suspension: &Suspension, cursor: usize, printed: usize) -> Vec<StepRecord> {
        let mut link = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (from_parent, to_parent) = &mut *link;
        let said = Ask::Suspended {
            evaluation: Evaluation::Suspended(suspension.clone()),
            cursor,
            printed,
        };
        if write_line(to_parent, &said).is_err() {
            parent_gone();
        }
        // Idle past `IDLE`, or told nothing more (its stdin closed: the parent let the
        // evaluation go, or died), the child ends: holding it was a cache.
        let watch = IdleWatch::start(idle());
        let answer = Self::read(from_parent);
        drop(watch);
        match answer {
            Answer::Resume(steps) => steps,
            _ => parent_gone(),
        }
    }
}

impl StepRunner for Link {
    fn run_shell(
        &self,
        step: &ShellStep,
        _on_output: &mut dyn FnMut(&[u8]),
        _cancel: &CancelToken,
    ) -> Ran {
        self.ran(&Ask::Shell(Shell::of(step)))
    }

    fn run_shells(
        &self,
        steps: &[ShellStep],
        max: usize,
        _cancel: &CancelToken,
        on_done: &mut dyn FnMut(usize, Ran),
    ) {
        self.tell(&Ask::Shells {
            steps: steps.iter().map(Shell::of).collect(),
            max,
        });
        loop {
            // Not locked while `on_done` journals the step, which asks the parent.
            let answer = {
                let mut link = self
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                Self::read(&mut link.0)
            };
            match answer {
                Answer::Done { at, ran } => {
                    on_done(at, ran);
                    self.tell(&Ask::Next);
                }
                Answer::AllDone => return,
                _ => parent_gone(),
            }
        }
    }

    fn call_tool(&self, call: &ToolCall, _cancel: &CancelToken) -> Ran {
        self.ran(&Ask::Tool(call.clone()))
    }
}

impl Observer for Link {
    fn step_started(
        &self,
        frame: &str,
        index: usize,
        input: &StepInput,
        context: Option<&str>,
        recorded: Recorded,
    ) {
        self.tell(&Ask::StepStarted {
            frame: frame.to_string(),
            index,
            input: input.clone(),
            context: context.map(str::to_string),
            recorded,
        });
    }

    fn output(&self, chunk: &[u8]) {
        self.tell(&Ask::Output(String::from_utf8_lossy(chunk).into_owned()));
    }

    fn print(&self, frame: &str, text: &str) {
        self.tell(&Ask::Print {
            frame: frame.to_string(),
            text: text.to_string(),
        });
    }

    fn step_finished(&self, frame: &str, record: &StepRecord) {
        self.tell(&Ask::StepFinished {
            frame: frame.to_string(),
            record: record.clone(),
        });
    }
}
