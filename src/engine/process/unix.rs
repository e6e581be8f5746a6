//! What the Unix backends share: a child's exit noticed without reaping it, process groups
//! killed by number, and reads and writes at an offset of a file.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::Child;

use rustix::process::{Pid, Signal, WaitId, WaitIdOptions, kill_process_group, waitid};

use super::imp;

/// How a child's exit is noticed: a descriptor that polls readable once the child exited,
/// where the system has one, else a question asked at each tick.
#[derive(Debug)]
pub(crate) struct ExitWatch {
    pid: Pid,
    fd: Option<OwnedFd>,
}

impl ExitWatch {
    /// Watches `child`.
    pub(crate) fn new(child: &Child) -> ExitWatch {
        let pid = Pid::from_child(child);
        ExitWatch {
            pid,
            fd: imp::exit_fd(pid),
        }
    }

    /// The descriptor to poll with the step's output, when there is one; without it the
    /// loop must wake at least every [`ExitWatch::tick`].
    pub(crate) fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(AsFd::as_fd)
    }

    /// The longest the loop may sleep when nothing else wakes it: with a descriptor, `long`;
    /// without one, a millisecond once the output is closed (the child is about to exit),
    /// else `long`.
    pub(crate) fn tick(&self, long: std::time::Duration, output_open: bool) -> std::time::Duration {
        if self.fd.is_none() && !output_open {
            long.min(std::time::Duration::from_millis(1))
        } else {
            long
        }
    }

    /// Whether the child exited: `fd_ready` is what polling [`ExitWatch::fd`] said. The
    /// child is left a zombie either way (`WNOWAIT`), for the caller to reap.
    pub(crate) fn exited(&self, fd_ready: bool) -> bool {
        if self.fd.is_some() {
            return fd_ready;
        }
        // No such child (`ECHILD`: it was reaped already) counts as exited; an interrupted
        // call is asked again at the next tick.
        match waitid(
            WaitId::Pid(self.pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOHANG | WaitIdOptions::NOWAIT,
        ) {
            Ok(status) => status.is_some(),
            Err(e) => e != rustix::io::Errno::INTR,
        }
    }
}

/// Sends SIGKILL to process group `pgid`; false if there is no such group (or it is not
/// ours to signal).
pub(crate) fn kill_group(pgid: i32) -> bool {
    Pid::from_raw(pgid).is_some_and(|group| kill_process_group(group, Signal::KILL).is_ok())
}

/// mekara's own process group and process id, which no note may name.
pub(crate) fn own_group_and_pid() -> (i32, i32) {
    (
        rustix::process::getpgrp().as_raw_nonzero().get(),
        rustix::process::getpid().as_raw_nonzero().get(),
    )
}

/// Reads and writes at an offset, leaving the file's position alone (`pread`, `pwrite`).
pub(crate) trait FileAt {
    /// Reads what there is at `offset`, at most `buf.len()` bytes.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize>;
    /// Writes all of `buf` at `offset`.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()>;
}

impl FileAt for std::fs::File {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        std::os::unix::fs::FileExt::write_all_at(self, buf, offset)
    }
}

/// Spawns `command` in a process group of its own: a Ctrl-C at the terminal then reaches
/// mekara alone, which stops what the process is doing.
pub(crate) fn in_own_group(command: &mut std::process::Command) {
    std::os::unix::process::CommandExt::process_group(command, 0);
}

/// Nothing to do on Unix: [`interrupt`] signals the process itself.
pub(crate) fn interruptible(_command: &mut std::process::Command) {}

/// Asks a child `mekara` to stop as Ctrl-C does (SIGINT).
pub(crate) fn interrupt(child: &Child) {
    if let Some(pid) = i32::try_from(child.id()).ok().and_then(Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, Signal::INT);
    }
}
