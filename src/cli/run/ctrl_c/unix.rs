//! Ctrl-C at a prompt on Unix: the signal writes a byte to a socket pair that `poll` watches
//! beside stdin. stdin is read with `poll` and `read` on the descriptor, not through
//! `std::io::Stdin`: std retries a read that a signal interrupted, so a prompt could not
//! notice Ctrl-C, and its buffer would hide from `poll` the answers already read.

use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use super::{CtrlC, Left, Stdin, left};

/// Readable once Ctrl-C was pressed.
pub(super) struct Pressed {
    pressed: UnixStream,
    wake: UnixStream,
}

impl Pressed {
    pub(super) fn new(_flag: &Arc<AtomicBool>) -> std::io::Result<Pressed> {
        let (pressed, wake) = UnixStream::pair()?;
        pressed.set_nonblocking(true)?;
        Ok(Pressed { pressed, wake })
    }

    /// Makes `signal` wake a prompt.
    pub(super) fn register(&self, signal: std::ffi::c_int) -> std::io::Result<()> {
        signal_hook::low_level::pipe::register(signal, self.wake.try_clone()?)?;
        Ok(())
    }
}

/// Reads what stdin has into `buffered`, waiting for it until `deadline`, or Ctrl-C.
pub(crate) fn read_stdin(
    ctrl_c: Option<&CtrlC>,
    deadline: Option<Instant>,
    buffered: &mut Vec<u8>,
) -> std::io::Result<Stdin> {
    use rustix::event::{PollFd, PollFlags, Timespec, poll};
    use rustix::io::Errno;
    loop {
        let stdin = std::io::stdin();
        let mut fds = vec![PollFd::new(&stdin, PollFlags::IN)];
        if let Some(ctrl_c) = ctrl_c {
            fds.push(PollFd::new(&ctrl_c.pressed.pressed, PollFlags::IN));
        }
        // A millisecond more, so that the deadline has passed when poll returns.
        let wait = match left(deadline) {
            Left::Passed => return Ok(Stdin::TimedOut),
            Left::Forever => None,
            Left::For(left) => Timespec::try_from(left + std::time::Duration::from_millis(1)).ok(),
        };
        match poll(&mut fds, wait.as_ref()) {
            Ok(_) => {}
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
        if fds.get(1).is_some_and(|fd| !fd.revents().is_empty()) {
            return Ok(Stdin::Interrupted);
        }
        if fds[0].revents().is_empty() {
            continue;
        }
        drop(fds);
        let mut chunk = [0u8; 4096];
        return match rustix::io::read(&stdin, &mut chunk) {
            Ok(0) => Ok(Stdin::Ended),
            Ok(n) => {
                buffered.extend_from_slice(&chunk[..n]);
                Ok(Stdin::Read)
            }
            Err(Errno::INTR | Errno::AGAIN) => continue,
            // No stdin at all reads as an empty one, as std has it.
            Err(Errno::BADF) => Ok(Stdin::Ended),
            Err(e) => Err(e.into()),
        };
    }
}
