//! Every Unix: `ps`, the wall clock, and `waitid(WNOWAIT)`.

use std::os::fd::OwnedFd;
use std::process::{Command, Stdio};

use rustix::process::Pid;

use super::Process;

/// The backend's name, for the tests (on Linux `select.rs` says which one runs).
#[cfg(all(test, not(target_os = "linux")))]
pub(super) fn name() -> &'static str {
    "portable"
}

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

/// The resident memory of a child: not read. `ps -o rss=` would tell it, at the cost of a
/// process each time an evaluator child suspends, which is every llm step.
pub(crate) fn resident(_child: &std::process::Child) -> Option<u64> {
    None
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
