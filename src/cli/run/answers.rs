//! The person's answers ([`Answers`]), read from stdin a line at a time while watching for
//! Ctrl-C, and how a question ended ([`Asked`]).

use std::time::Instant;

use super::ctrl_c::CtrlC;

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
/// stdin is read with `poll` and `read` on the descriptor, not through `std::io::Stdin`:
/// std retries a read that a signal interrupted, so a prompt could not notice Ctrl-C, and
/// its buffer would hide from `poll` the answers already read.
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
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        use rustix::io::Errno;
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
            let stdin = std::io::stdin();
            let mut fds = vec![PollFd::new(&stdin, PollFlags::IN)];
            if let Some(ctrl_c) = &self.ctrl_c {
                fds.push(PollFd::new(&ctrl_c.pressed, PollFlags::IN));
            }
            let wait = match deadline {
                None => None,
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(Asked::TimedOut);
                    }
                    // A millisecond more, so that the deadline has passed when poll returns.
                    Timespec::try_from(left + std::time::Duration::from_millis(1)).ok()
                }
            };
            match poll(&mut fds, wait.as_ref()) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            if fds.get(1).is_some_and(|fd| !fd.revents().is_empty()) {
                return Ok(Asked::Interrupted);
            }
            if fds[0].revents().is_empty() {
                continue;
            }
            drop(fds);
            let mut chunk = [0u8; 4096];
            match rustix::io::read(&stdin, &mut chunk) {
                Ok(0) => self.ended = true,
                Ok(n) => self.buffered.extend_from_slice(&chunk[..n]),
                Err(Errno::INTR | Errno::AGAIN) => {}
                // No stdin at all reads as an empty one, as std has it.
                Err(Errno::BADF) => self.ended = true,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn text_of(line: &[u8]) -> String {
    String::from_utf8_lossy(line)
        .trim_end_matches(['\n', '\r'])
        .to_string()
}
