//! Linux runs the Linux backend, or the portable one (what macOS and the BSDs run) when the
//! environment says `MEKARA_PROCESS_BACKEND=portable`: so that `.ci/run` tests the portable
//! backend on this machine with the binary the other tests use, instead of building mekara a
//! second time with a feature (which cost CI about eight minutes). The variable is read once;
//! a run and its resume must see the same one, since the two backends count start times on
//! different clocks (the boot clock, the wall clock).

use std::os::fd::OwnedFd;
use std::sync::OnceLock;

use rustix::process::Pid;

use super::{Process, linux, portable};

/// Whether the portable backend runs; another value than `portable` or `linux` is said once
/// and the Linux backend runs.
fn portable() -> bool {
    static PORTABLE: OnceLock<bool> = OnceLock::new();
    *PORTABLE.get_or_init(|| {
        let portable = match std::env::var("MEKARA_PROCESS_BACKEND") {
            Ok(name) if name == "portable" => true,
            Ok(name) if name == "linux" || name.is_empty() => false,
            Ok(name) => {
                tracing::warn!(
                    "MEKARA_PROCESS_BACKEND={name:?} is not a process backend (`linux` or `portable`): the Linux one runs"
                );
                false
            }
            Err(_) => false,
        };
        tracing::debug!(
            "process backend: {}",
            if portable { "portable" } else { "linux" }
        );
        portable
    })
}

/// The backend's name, for the tests.
#[cfg(test)]
pub(super) fn name() -> &'static str {
    if portable() { "portable" } else { "linux" }
}

/// Nanoseconds on the running backend's clock.
pub(crate) fn clock_ns() -> u64 {
    if portable() {
        portable::clock_ns()
    } else {
        linux::clock_ns()
    }
}

/// Process `pid`'s group and start time, as the running backend reads them.
pub(crate) fn process(pid: i32) -> Option<Process> {
    if portable() {
        portable::process(pid)
    } else {
        linux::process(pid)
    }
}

/// The live processes in group `pgid`, as the running backend reads them.
pub(crate) fn group_members(pgid: i32) -> Vec<Process> {
    if portable() {
        portable::group_members(pgid)
    } else {
        linux::group_members(pgid)
    }
}

/// The resident memory of `child`, when the running backend reads it.
pub(crate) fn resident(child: &std::process::Child) -> Option<u64> {
    if portable() {
        portable::resident(child)
    } else {
        linux::resident(child)
    }
}

/// What polls readable once `pid` exited, if the running backend has one.
pub(super) fn exit_fd(pid: Pid) -> Option<OwnedFd> {
    if portable() {
        portable::exit_fd(pid)
    } else {
        linux::exit_fd(pid)
    }
}
