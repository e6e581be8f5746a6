//! The person's answers ([`Answers`]), read from stdin a line at a time while watching for
//! Ctrl-C, and how a question ended ([`Asked`]).

use std::time::Instant;

use super::ctrl_c::{CtrlC, Stdin};

/// How a question to the person ended.
pub(super) enum Asked<T> {
    Answered(T),
    /// stdin ended first.
    Closed,
    /// Ctrl-C was pressed.
    Interrupted,
    /// The question's timeout passed first.
    TimedOut,
}

impl<T> Asked<T> {
    pub(super) fn map<U>(self, answered: impl FnOnce(T) -> U) -> Asked<U> {
        match self {
            Asked::Answered(answer) => Asked::Answered(answered(answer)),
            Asked::Closed => Asked::Closed,
            Asked::Interrupted => Asked::Interrupted,
            Asked::TimedOut => Asked::TimedOut,
        }
    }
}

/// The person's answers, read from stdin a line at a time while watching for Ctrl-C.
///
/// How stdin is read while Ctrl-C is watched is the OS's (see `ctrl_c::read_stdin`).
pub(super) struct Answers {
    ctrl_c: Option<CtrlC>,
    /// Read, not yet taken.
    buffered: Vec<u8>,
    ended: bool,
}

impl Answers {
    pub(super) fn new(ctrl_c: Option<CtrlC>) -> Answers {
        Answers {
            ctrl_c,
            buffered: Vec::new(),
            ended: false,
        }
    }

    /// The next line, without its line ending.
    pub(super) fn line(&mut self) -> std::io::Result<Asked<String>> {
        self.line_until(None)
    }

    /// The next line, without its line ending, when it comes before `deadline`.
    pub(super) fn line_until(
        &mut self,
        deadline: Option<Instant>,
    ) -> std::io::Result<Asked<String>> {
        loop {
            if let Some(end) = self.buffered.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffered.drain(..=end).collect();
                return Ok(Asked::Answered(text_of(&line)));
            }
            if self.ended {
                return Ok(if self.buffered.is_empty() {
                    Asked::Closed
                } else {
                    Asked::Answered(text_of(&std::mem::take(&mut self.buffered)))
                });
            }
            match super::ctrl_c::read_stdin(self.ctrl_c.as_ref(), deadline, &mut self.buffered)? {
                Stdin::Read => {}
                Stdin::Ended => self.ended = true,
                Stdin::Interrupted => return Ok(Asked::Interrupted),
                Stdin::TimedOut => return Ok(Asked::TimedOut),
            }
        }
    }
}

fn text_of(line: &[u8]) -> String {
    String::from_utf8_lossy(line)
        .trim_end_matches(['\n', '\r'])
        .to_string()
}
