//! What the step runner needs to know of processes beyond what POSIX promises everywhere:
//! a clock that process start times can be compared with, the group and start time of a
//! live process, the members of a process group, and a child's exit noticed without
//! reaping it.
//!
//! Two backends keep the same promises (see `group_note` and `shell`):
//!
//! - **Linux** reads `/proc/<pid>/stat` (start times in clock ticks, usually 10 ms, on the
//!   boot clock) and watches a child through a pidfd that `poll` wakes on.
//! - **portable**, every other Unix (macOS, the BSDs), and Linux built with the
//!   `force-portable` feature so that it is tested here: it asks `ps` (`pid`, `pgid`,
//!   `stat`, `etime`, which procps and the BSD `ps` both know), so start times are whole
//!   seconds on the wall clock, and it notices a child's exit with `waitid(WNOWAIT)` at each
//!   tick of the step's loop.
//!
//! Both leave an exited child a zombie until the runner reaps it after killing its group,
//! so the group's id cannot be handed to another process in between: killing the group
//! never reaches a process that is not the step's.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::process::Child;

use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};

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

pub(crate) use imp::{clock_ns, group_members, process};

/// The backend's name, for the tests.
#[cfg(test)]
const BACKEND: &str = imp::NAME;

#[cfg(all(target_os = "linux", not(feature = "force-portable")))]
mod imp {
    //! Linux: `/proc` and pidfds.

    use std::os::fd::OwnedFd;

    use nix::time::{ClockId, clock_gettime};
    use rustix::process::{Pid, PidfdFlags, pidfd_open};

    use super::Process;

    #[cfg(test)]
    pub(super) const NAME: &str = "linux";

    /// Nanoseconds on the boot clock, which `/proc/<pid>/stat` start times are counted on.
    pub(crate) fn clock_ns() -> u64 {
        let Ok(t) = clock_gettime(ClockId::CLOCK_BOOTTIME) else {
            return 0;
        };
        u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000
            + u64::try_from(t.tv_nsec()).unwrap_or(0)
    }

    /// `/proc` counts start times in clock ticks (100 a second on Linux).
    fn start_resolution_ns() -> u64 {
        let ticks = match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
            Ok(Some(ticks)) if ticks > 0 => ticks.unsigned_abs(),
            _ => 100,
        };
        1_000_000_000 / ticks
    }

    /// Process `pid`'s group and start time; `None` if there is no such process (a zombie
    /// counts as none: it runs nothing).
    pub(crate) fn process(pid: i32) -> Option<Process> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses; the fields follow the last `)`.
        let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
        // Field 3 of the file (the state) is the first after the name; the group is field
        // 5, the start time (in clock ticks) field 22.
        if matches!(fields.first(), Some(&"Z" | &"X")) {
            return None;
        }
        let ticks: u64 = fields.get(19)?.parse().ok()?;
        let tick = start_resolution_ns();
        Some(Process {
            pid,
            pgid: fields.get(2)?.parse().ok()?,
            started_ns: ticks * tick,
            started_by_ns: (ticks + 1) * tick,
        })
    }

    /// The live processes in group `pgid`.
    pub(crate) fn group_members(pgid: i32) -> Vec<Process> {
        std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<i32>().ok())
            .filter_map(process)
            .filter(|p| p.pgid == pgid)
            .collect()
    }

    /// A pidfd of `pid`: it polls readable once the process exited. Kernels older than 5.3
    /// have none; the step loop then asks at each tick.
    pub(super) fn exit_fd(pid: Pid) -> Option<OwnedFd> {
        pidfd_open(pid, PidfdFlags::empty()).ok()
    }
}

#[cfg(not(all(target_os = "linux", not(feature = "force-portable"))))]
mod imp {
    //! Every Unix: `ps`, the wall clock, and `waitid(WNOWAIT)`.

    use std::os::fd::OwnedFd;
    use std::process::{Command, Stdio};

    use rustix::process::Pid;

    use super::Process;

    #[cfg(test)]
    pub(super) const NAME: &str = "portable";

    /// Nanoseconds on the wall clock: `ps` gives a process's age, and its start is now
    /// minus that age.
    pub(crate) fn clock_ns() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    const SECOND_NS: u64 = 1_000_000_000;

    /// How far the age `ps` prints may be from the true one: a second, and a little more.
    /// procps takes the age as its uptime (in hundredths) less the start (in clock ticks),
    /// and prints the whole seconds of that, so it can be a second and a tick short: over
    /// 400 processes on Linux it printed between 1.0013 s less and 0.0025 s more than the
    /// age, so a window of exactly a second can miss a step's start by that tick.
    const SLACK_NS: u64 = SECOND_NS + SECOND_NS / 10;

    /// How many times `ps` is asked when it prints an age that cannot be right.
    const ATTEMPTS: u32 = 5;

    /// `ps -o pid=,pgid=,stat=,etime=` with `selection` (`-p PID` or `-A`), parsed, keeping
    /// the processes `wanted` by pid and group; a zombie counts as no process.
    ///
    /// procps reads a process in the tick it started as older than the epoch (its uptime
    /// less the start comes out below zero, and wraps: "441077234-00:18:40" for a `sleep`
    /// spawned a millisecond before): such a reading is asked again a little later. One that
    /// stays wrong counts as a process started before anything mekara noted, so nothing is
    /// killed on its word.
    fn ps(selection: &[&str], wanted: impl Fn(i32, i32) -> bool) -> Vec<Process> {
        let mut attempt = 1;
        loop {
            let asked = clock_ns();
            let Ok(out) = Command::new("ps")
                .args(selection)
                .args(["-o", "pid=", "-o", "pgid=", "-o", "stat=", "-o", "etime="])
                .stdin(Stdio::null())
                .stderr(Stdio::null())
                .output()
            else {
                return Vec::new();
            };
            let answered = clock_ns();
            let read: Vec<Read> = String::from_utf8_lossy(&out.stdout)
                .lines()
                .filter_map(|line| parse_line(line, asked, answered))
                .filter(|read| wanted(read.pid(), read.pgid()))
                .collect();
            let wrapped = read.iter().any(|r| matches!(r, Read::AgeWrapped { .. }));
            if wrapped && attempt < ATTEMPTS {
                attempt += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
                continue;
            }
            return read
                .into_iter()
                .map(|read| match read {
                    Read::Known(process) => process,
                    Read::AgeWrapped { pid, pgid } => {
                        tracing::warn!(
                            "`ps` gave process {pid} an age older than the clock {ATTEMPTS} times; it counts as one started long ago"
                        );
                        Process {
                            pid,
                            pgid,
                            started_ns: 0,
                            started_by_ns: 0,
                        }
                    }
                })
                .collect();
        }
    }

    /// What one line of [`ps`] says of a process.
    #[derive(Debug, PartialEq, Eq)]
    pub(super) enum Read {
        /// Its group, and when it started.
        Known(Process),
        /// Its age reaches back before the wall clock's epoch: not a true reading.
        AgeWrapped { pid: i32, pgid: i32 },
    }

    impl Read {
        fn pid(&self) -> i32 {
            match self {
                Read::Known(process) => process.pid,
                Read::AgeWrapped { pid, .. } => *pid,
            }
        }

        fn pgid(&self) -> i32 {
            match self {
                Read::Known(process) => process.pgid,
                Read::AgeWrapped { pgid, .. } => *pgid,
            }
        }
    }

    /// One line of [`ps`]'s output, asked for at `asked` and read at `answered`.
    ///
    /// `ps` measured the age somewhere in between, and rounds both the start and its own
    /// clock down, so the true age is within [`SLACK_NS`] of the one it prints: the process
    /// started between `asked - age - slack` and `answered - age + slack`. (A busy machine
    /// can take well over a second to run `ps`; a window from `asked` alone once took such
    /// a step for another process and left it running.)
    pub(super) fn parse_line(line: &str, asked: u64, answered: u64) -> Option<Read> {
        let mut fields = line.split_whitespace();
        let pid = fields.next()?.parse().ok()?;
        let pgid = fields.next()?.parse().ok()?;
        let stat = fields.next()?;
        let age = elapsed_secs(fields.next()?)?;
        if stat.starts_with('Z') || fields.next().is_some() {
            return None;
        }
        let age_ns = age.saturating_mul(SECOND_NS);
        if age_ns >= asked {
            return Some(Read::AgeWrapped { pid, pgid });
        }
        Some(Read::Known(Process {
            pid,
            pgid,
            started_ns: asked.saturating_sub(age_ns.saturating_add(SLACK_NS)),
            started_by_ns: answered.saturating_sub(age_ns).saturating_add(SLACK_NS),
        }))
    }

    /// `ps`'s `etime`: `[[dd-]hh:]mm:ss`, in seconds.
    pub(super) fn elapsed_secs(text: &str) -> Option<u64> {
        let (days, clock) = match text.split_once('-') {
            Some((days, clock)) => (days.parse::<u64>().ok()?, clock),
            None => (0, text),
        };
        let parts: Vec<u64> = clock
            .split(':')
            .map(|p| p.parse().ok())
            .collect::<Option<_>>()?;
        let (h, m, s) = match parts[..] {
            [m, s] => (0, m, s),
            [h, m, s] => (h, m, s),
            _ => return None,
        };
        (m < 60 && s < 60).then_some(((days * 24 + h) * 60 + m) * 60 + s)
    }

    pub(crate) fn process(pid: i32) -> Option<Process> {
        if pid <= 0 {
            return None;
        }
        ps(&["-p", &pid.to_string()], |p, _| p == pid).pop()
    }

    pub(crate) fn group_members(pgid: i32) -> Vec<Process> {
        ps(&["-A"], |_, g| g == pgid)
    }

    /// No descriptor: the step loop asks `waitid` at each tick.
    pub(super) fn exit_fd(_pid: Pid) -> Option<OwnedFd> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn force_portable_selects_the_portable_backend() {
        let portable = cfg!(feature = "force-portable") || !cfg!(target_os = "linux");
        assert_eq!(BACKEND, if portable { "portable" } else { "linux" });
    }

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

    #[cfg(not(all(target_os = "linux", not(feature = "force-portable"))))]
    #[test]
    fn ps_lines_and_ages_parse() {
        use super::imp::{Read, elapsed_secs, parse_line};
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
