//! `GroupNote`: the process group of the shell step running now, noted beside the run's
//! journal, so that a resume can kill what a killed mekara left running.
//!
//! mekara kills a step's whole process group when the step ends, times out or is cancelled.
//! If mekara itself is killed (SIGKILL, a crash, the machine's OOM killer), nothing is left
//! to do that, and the step goes on without it. The kernel's own remedy,
//! `PR_SET_PDEATHSIG`, does not fit: it needs a `pre_exec` hook (which turns the cheap
//! `posix_spawn` into a `fork`, costing more than the whole per-step budget), and it fires
//! when the *thread* that spawned the child ends, which in `mekara mcp` is a pooled worker
//! thread that may be retired between steps.
//!
//! So the runner notes each step's group in `<run>.group` (one `pwrite` on a file kept open
//! for the run) and clears the note when the step ends. Whoever takes the run up again
//! holds its journal lock, so the writer is gone; it reads the note and kills that group.
//!
//! Killing a group by number is only safe while the number still means our group. The note
//! keeps the boot-clock window in which the group's leader was started: a live process with
//! that pid must have started inside the window (else the pid was reused and the group is
//! someone else's). With the leader gone, the group id cannot have been handed out again
//! while members of our group are alive (Linux keeps a pid allocated while it names a
//! process group), so what is left in that group is ours.

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::process::{Pid, Signal, kill_process_group};
use rustix::time::{ClockId, clock_gettime};

/// The note of one run: where its running step's process group is written down.
#[derive(Debug, Clone)]
pub struct GroupNote {
    file: Arc<File>,
    path: Arc<PathBuf>,
}

/// Fixed width, so every note overwrites the last one whole: `pgid lo hi` padded.
const WIDTH: usize = 64;

/// The note file of run `id` in the runs folder `dir`.
fn path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.group"))
}

/// Nanoseconds on the boot clock, which `/proc/<pid>/stat` start times are counted on.
pub fn boot_clock_ns() -> u64 {
    let t = clock_gettime(ClockId::Boottime);
    u64::try_from(t.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec).unwrap_or(0)
}

impl GroupNote {
    /// Opens (creating it empty) the note of run `id` in `dir`.
    pub fn open(dir: &Path, id: &str) -> std::io::Result<GroupNote> {
        let path = path(dir, id);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        Ok(GroupNote {
            file: Arc::new(file),
            path: Arc::new(path),
        })
    }

    /// Deletes the note: the run has ended, so no step of it can be running.
    pub fn remove(self) {
        let _ = std::fs::remove_file(self.path.as_ref());
    }

    /// Notes that group `pgid` runs now; its leader was spawned between the boot-clock
    /// times `spawned_after` and `spawned_before` (nanoseconds).
    pub fn note(&self, pgid: i32, spawned_after: u64, spawned_before: u64) {
        // Written on the stack: this runs twice for every step.
        let mut line = [b' '; WIDTH];
        line[WIDTH - 1] = b'\n';
        let mut cursor = std::io::Cursor::new(&mut line[..WIDTH - 1]);
        let _ = write!(cursor, "{pgid} {spawned_after} {spawned_before}");
        // A note that cannot be written only loses the clean-up after a crash; the step
        // itself must not fail for it.
        if let Err(e) = self.file.write_all_at(&line, 0) {
            tracing::debug!("cannot note the step's process group: {e}");
        }
    }

    /// Notes that no step runs.
    pub fn clear(&self) {
        self.note(0, 0, 0);
    }

    /// Kills the process group noted, if it is still the one noted, and clears the note.
    /// Call it only while holding the run (its journal lock): then whoever wrote the note
    /// is gone.
    pub fn kill_leftover(&self) -> Leftover {
        let mut line = [0u8; WIDTH];
        let read = self.file.read_at(&mut line, 0).unwrap_or(0);
        let text = String::from_utf8_lossy(&line[..read]);
        let found =
            parse(&text).map_or(
                Leftover::None,
                |(pgid, after, before)| match leader_start_ns(pgid) {
                    Some(started) if !started_within(started, after, before) => {
                        Leftover::Reused(pgid)
                    }
                    _ => match Pid::from_raw(pgid) {
                        Some(group) if kill_process_group(group, Signal::KILL).is_ok() => {
                            Leftover::Killed(pgid)
                        }
                        _ => Leftover::None,
                    },
                },
            );
        self.clear();
        found
    }
}

/// What a resume found of the step a killed mekara left running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leftover {
    /// No step was running, or its group is gone.
    None,
    /// The group was still there, and was killed.
    Killed(i32),
    /// A process now holds the noted pid but started at another time: the number was
    /// reused, so nothing was killed.
    Reused(i32),
}

fn parse(text: &str) -> Option<(i32, u64, u64)> {
    let mut fields = text.split_whitespace();
    let pgid: i32 = fields.next()?.parse().ok()?;
    let after = fields.next()?.parse().ok()?;
    let before = fields.next()?.parse().ok()?;
    (pgid > 1).then_some((pgid, after, before))
}

/// `/proc` counts start times in clock ticks (usually 10 ms), so the window is widened by
/// a tick on each side.
fn started_within(started_ns: u64, after: u64, before: u64) -> bool {
    let tick = 1_000_000_000 / rustix::param::clock_ticks_per_second().max(1);
    started_ns + tick >= after && started_ns <= before + tick
}

/// When process `pid` started, on the boot clock; `None` if there is no such process.
fn leader_start_ns(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the fields follow the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 22 of the file is the 20th after the name (state is field 3).
    let ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    let per_second = rustix::param::clock_ticks_per_second().max(1);
    Some(ticks * (1_000_000_000 / per_second))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_round_trips_and_clears() {
        let dir = tempfile::tempdir().expect("tempdir");
        let note = GroupNote::open(dir.path(), "r1").expect("open");
        note.note(12345, 10, 20);
        let text = std::fs::read_to_string(path(dir.path(), "r1")).expect("read");
        assert_eq!(text.len(), WIDTH);
        assert_eq!(parse(&text), Some((12345, 10, 20)));
        note.clear();
        let text = std::fs::read_to_string(path(dir.path(), "r1")).expect("read");
        assert_eq!(parse(&text), None);
    }

    #[test]
    fn malformed_notes_are_ignored() {
        for text in ["", "x y z", "12", "1 2 3", "-5 1 2", "99999999999 1 2"] {
            assert_eq!(parse(text), None, "{text:?}");
        }
    }

    #[test]
    fn our_own_start_time_is_read_and_a_reused_pid_is_told_apart() {
        let me = i32::try_from(std::process::id()).expect("pid fits");
        let started = leader_start_ns(me).expect("our own /proc entry");
        assert!(started <= boot_clock_ns());
        assert!(started_within(started, started, started));
        // A note from long after we started is not us.
        let later = started + 60 * 1_000_000_000;
        assert!(!started_within(started, later, later + 1));
    }
}
