//! What the step runner needs to know of processes beyond what POSIX promises everywhere:
//! a clock that process start times can be compared with, the group and start time of a
//! live process, the members of a process group, and a child's exit noticed without
//! reaping it.
//!
//! One backend per OS family, chosen here and nowhere else, keeps the same
//! promises (see `group_note` and `shell`):
//!
//! - **Linux** reads `/proc/<pid>/stat` (start times in clock ticks, usually 10 ms, on the
//!   boot clock) and watches a child through a pidfd that `poll` wakes on.
//! - **portable**, every other Unix (macOS, the BSDs), and Linux when the environment
//!   says `MEKARA_PROCESS_BACKEND=portable`, so that it is tested here on the binary the
//!   other tests use (`select.rs`): it asks `ps` (`pid`, `pgid`,
//!   `stat`, `etime`, which procps and the BSD `ps` both know), so start times are whole
//!   seconds on the wall clock, and it notices a child's exit with `waitid(WNOWAIT)` at each
//!   tick of the step's loop.
//!
//! - **Windows** puts a step's processes in a Job Object named after its first process
//!   (`windows.rs`): the Job is the group, killed whole with `TerminateJobObject` and with
//!   mekara (its last handle closes), and found again by name on resume; start times are
//!   the process's creation time on the wall clock.
//!
//! The Unix backends leave an exited child a zombie until the runner reaps it after killing
//! its group, so the group's id cannot be handed to another process in between: killing the
//! group never reaches a process that is not the step's. On Windows the Job's name keeps the
//! group apart from the pid: a Job outlives its first process while members are left.

/// A live process, as far as the runner needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Process {
    pub(crate) pid: i32,
    pub(crate) pgid: i32,
    /// The earliest it can have started, in nanoseconds on [`clock_ns`]'s clock.
    pub(crate) started_ns: u64,
    /// The latest it can have started: start times are known only to a clock tick on
    /// Linux, and to about two seconds (plus the time `ps` took) from `ps`.
    pub(crate) started_by_ns: u64,
}

impl Process {
    /// Whether it can have started between `after` and `before`.
    pub(crate) fn may_have_started_within(&self, after: u64, before: u64) -> bool {
        self.started_by_ns >= after && self.started_ns <= before
    }

    /// Whether it surely started before `t`.
    pub(crate) fn started_before(&self, t: u64) -> bool {
        self.started_by_ns < t
    }
}

#[cfg(windows)]
pub(crate) use imp::{
    FileAt, Job, delete_pending, in_own_group, interrupt, interruptible, kill_group,
    own_group_and_pid, resume,
};
pub(crate) use imp::{clock_ns, group_members, process, resident};
#[cfg(unix)]
pub(crate) use unix::{
    ExitWatch, FileAt, in_own_group, interrupt, interruptible, kill_group, own_group_and_pid,
};

/// What holds an evaluator child (`mekara __evaluate`) to its memory and to mekara's life
/// while it is kept, from [`EvaluatorLimit::hold`] until dropped.
///
/// On Windows it is a Job Object of the child's own, with `PROCESS_MEMORY` at the figure
/// given and `KILL_ON_JOB_CLOSE`: an allocation past the figure fails in the child (whose
/// allocator then says so, see `crate::memory`), and the child dies with mekara however
/// mekara dies. On Unix it is nothing: the allocator's cap bounds an evaluation (docs/design.md,
/// "Why not `RLIMIT_AS` in the child"), and a child whose parent died reads the end of its
/// stdin and ends.
#[derive(Debug)]
pub(crate) struct EvaluatorLimit {
    #[cfg(windows)]
    _job: Option<imp::Job>,
}

impl EvaluatorLimit {
    /// Holds `child` to `memory_bytes`. A system that refuses (a Windows older than 8, whose
    /// Jobs do not nest, under a Job of its own) leaves the child without it, with a warning:
    /// the allocator's cap still bounds the evaluation.
    pub(crate) fn hold(child: &std::process::Child, memory_bytes: usize) -> EvaluatorLimit {
        #[cfg(unix)]
        let _ = (child, memory_bytes);
        #[cfg(windows)]
        {
            let job = imp::Job::for_evaluator(child, memory_bytes)
                .inspect_err(|e| {
                    tracing::warn!(
                        "cannot put the evaluator child in a Job Object ({e}): it has no memory limit of the system's, and may outlive mekara until its stdin closes"
                    );
                })
                .ok();
            EvaluatorLimit { _job: job }
        }
        #[cfg(unix)]
        EvaluatorLimit {}
    }
}

// One backend per OS family, chosen here and nowhere else: on Linux at run time (`select.rs`),
// elsewhere at compile time.
#[cfg(target_os = "linux")]
#[path = "select.rs"]
mod imp;
#[cfg(target_os = "linux")]
mod linux;
#[cfg(unix)]
mod portable;
#[cfg(all(unix, not(target_os = "linux")))]
use portable as imp;
#[cfg(windows)]
#[path = "windows.rs"]
mod imp;
#[cfg(unix)]
mod unix;
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_is_the_one_the_system_and_environment_choose() {
        let asked = std::env::var("MEKARA_PROCESS_BACKEND").ok();
        let expected = if cfg!(windows) {
            "windows"
        } else if !cfg!(target_os = "linux") || asked.as_deref() == Some("portable") {
            "portable"
        } else {
            "linux"
        };
        assert_eq!(imp::name(), expected);
    }

    /// What keeps a suspended evaluator child only while it is small (`WARM_RSS`) reads this.
    #[test]
    fn a_childs_resident_memory_is_read_where_the_backend_reads_it() {
        use std::process::{Command, Stdio};
        let mut waiting = if cfg!(windows) {
            let mut pause = Command::new("cmd");
            pause.args(["/c", "pause"]);
            pause
        } else {
            Command::new("cat")
        }
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn");
        std::thread::sleep(std::time::Duration::from_millis(300));
        let read = resident(&waiting);
        let _ = waiting.kill();
        let _ = waiting.wait();
        if imp::name() == "portable" {
            assert_eq!(read, None);
        } else {
            let bytes = read.expect("the backend reads a child's resident memory");
            assert!((4096..1 << 30).contains(&bytes), "{bytes} bytes");
        }
    }

    #[cfg(unix)]
    #[test]
    fn our_own_process_is_read() {
        let me = i32::try_from(std::process::id()).expect("pid fits");
        let found = process(me).expect("our own process");
        assert_eq!(found.pid, me);
        assert_eq!(
            found.pgid,
            rustix::process::getpgrp().as_raw_nonzero().get()
        );
        let now = clock_ns();
        assert!(found.started_ns <= now, "{found:?} started after {now}");
        assert!(group_members(found.pgid).iter().any(|p| p.pid == me));
        assert_eq!(process(i32::MAX), None);
    }

    #[cfg(unix)]
    #[test]
    fn an_exit_is_noticed_and_the_child_left_to_reap() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .spawn()
            .expect("spawn");
        let watch = ExitWatch::new(&child);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let ready = watch.fd().is_some_and(|fd| {
                let mut fds = [rustix::event::PollFd::new(
                    &fd,
                    rustix::event::PollFlags::IN,
                )];
                rustix::event::poll(&mut fds, None).is_ok() && !fds[0].revents().is_empty()
            });
            if watch.exited(ready) {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "never exited");
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Still a zombie: the id stays ours until it is reaped here.
        let status = child.wait().expect("reap");
        assert_eq!(status.code(), Some(7));
    }

    #[cfg(unix)]
    #[test]
    fn ps_lines_and_ages_parse() {
        use super::portable::{Read, elapsed_secs, parse_line};
        assert_eq!(elapsed_secs("00:05"), Some(5));
        assert_eq!(elapsed_secs("01:02:03"), Some(3723));
        assert_eq!(elapsed_secs("2-01:02:03"), Some(2 * 86_400 + 3723));
        for bad in ["", "5", "1:2:3:4", "x:01", "00:61", "-1:00", "a-00:00"] {
            assert_eq!(elapsed_secs(bad), None, "{bad:?}");
        }
        let s = 1_000_000_000;
        let slack = s + s / 10;
        // `ps` was asked at 100 s and answered at 102 s: it measured 7 s at 100 s at the
        // earliest (true age up to 8.1 s) and at 102 s at the latest (true age down to 5.9 s).
        let (asked, answered) = (100 * s, 102 * s);
        assert_eq!(
            parse_line("  123   120 S+     00:07", asked, answered),
            Some(Read::Known(Process {
                pid: 123,
                pgid: 120,
                started_ns: 93 * s - slack,
                started_by_ns: 95 * s + slack,
            }))
        );
        // What procps printed for a `sleep` it read in the tick it started.
        assert_eq!(
            parse_line("27577 27577 S    441077234-00:18:40", asked, answered),
            Some(Read::AgeWrapped {
                pid: 27577,
                pgid: 27577
            })
        );
        for line in ["123 120 Z 00:07", "123 120 S", "123 120 S 00:07 extra"] {
            assert_eq!(parse_line(line, asked, answered), None, "{line:?}");
        }
    }
}
