//! Linux: `/proc` and pidfds.

use std::os::fd::OwnedFd;

use nix::time::{ClockId, clock_gettime};
use rustix::process::{Pid, PidfdFlags, pidfd_open};

use super::Process;

/// Nanoseconds on the boot clock, which `/proc/<pid>/stat` start times are counted on.
pub(crate) fn clock_ns() -> u64 {
    let Ok(t) = clock_gettime(ClockId::CLOCK_BOOTTIME) else {
        return 0;
    };
    u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec()).unwrap_or(0)
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

/// The resident memory of `child`, from `/proc/<pid>/statm` (its second field, in pages).
pub(crate) fn resident(child: &std::process::Child) -> Option<u64> {
    let statm = std::fs::read_to_string(format!("/proc/{}/statm", child.id())).ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    let page = match nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE) {
        Ok(Some(bytes)) if bytes > 0 => bytes.unsigned_abs(),
        _ => 4096,
    };
    Some(pages * page)
}

/// A pidfd of `pid`: it polls readable once the process exited. Kernels older than 5.3
/// have none; the step loop then asks at each tick.
pub(super) fn exit_fd(pid: Pid) -> Option<OwnedFd> {
    pidfd_open(pid, PidfdFlags::empty()).ok()
}
