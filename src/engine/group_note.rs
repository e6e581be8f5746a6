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
//! for the run). Whoever takes the run up again holds its journal lock, so the writer is
//! gone; it reads the note and kills that group, unless the step had ended.
//!
//! A step's end is told by the journal, not by clearing the note (which would cost a second
//! write for every step): the note keeps the journal's length when the step started, and
//! the step's result is the next thing appended. A journal longer than the note says means
//! the step ended and its group was killed then. A cancelled step records nothing, so the
//! runner clears the note for it.
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
use std::sync::atomic::{AtomicU64, Ordering};

use nix::time::{ClockId, clock_gettime};
use rustix::process::{Pid, Signal, kill_process_group};

/// The note of one run: where its running step's process group is written down.
#[derive(Debug, Clone)]
pub struct GroupNote {
    file: Arc<File>,
    path: Arc<PathBuf>,
    /// The length of the run's journal, kept up to date by the journal (0 for a new one).
    journal_len: Arc<AtomicU64>,
}

/// Fixed width, so every note overwrites the last one whole: `pgid lo hi journal_len` padded.
const WIDTH: usize = 64;

/// The note file of run `id` in the runs folder `dir`.
fn path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.group"))
}

/// Nanoseconds on the boot clock, which `/proc/<pid>/stat` start times are counted on.
pub(crate) fn boot_clock_ns() -> u64 {
    let Ok(t) = clock_gettime(ClockId::CLOCK_BOOTTIME) else {
        return 0;
    };
    u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000_000 + u64::try_from(t.tv_nsec()).unwrap_or(0)
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
            journal_len: Arc::new(AtomicU64::new(0)),
        })
    }

    /// Tells the note how long the run's journal is (the journal calls this when it opens).
    pub fn set_journal_len(&self, len: u64) {
        self.journal_len.store(len, Ordering::Relaxed);
    }

    /// Tells the note that `bytes` were appended to the run's journal.
    pub fn journal_grew(&self, bytes: u64) {
        self.journal_len.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Deletes the note: the run has ended, so no step of it can be running.
    pub fn remove(self) {
        let _ = std::fs::remove_file(self.path.as_ref());
    }

    /// Notes that group `pgid` runs now; its leader was spawned between the boot-clock
    /// times `spawned_after` and `spawned_before` (nanoseconds).
    pub fn note(&self, pgid: i32, spawned_after: u64, spawned_before: u64) {
        // Written on the stack: this runs for every step.
        let mut line = [b' '; WIDTH];
        line[WIDTH - 1] = b'\n';
        let mut cursor = std::io::Cursor::new(&mut line[..WIDTH - 1]);
        let journal_len = self.journal_len.load(Ordering::Relaxed);
        let _ = write!(
            cursor,
            "{pgid} {spawned_after} {spawned_before} {journal_len}"
        );
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

    /// Kills the process group noted, if its step had not ended and the group is still the
    /// one noted, and clears the note. Call it only while holding the run (its journal
    /// lock), after telling the note the journal's length: then whoever wrote the note is
    /// gone, and the journal says whether the step ended.
    pub fn kill_leftover(&self) -> Leftover {
        let mut line = [0u8; WIDTH];
        let read = self.file.read_at(&mut line, 0).unwrap_or(0);
        let text = String::from_utf8_lossy(&line[..read]);
        let journal_len = self.journal_len.load(Ordering::Relaxed);
        let found = parse(&text)
            .filter(|note| note.journal_len >= journal_len)
            .map_or(
                Leftover::None,
                |Noted {
                     pgid,
                     after,
                     before,
                     ..
                 }| match leader_start_ns(pgid) {
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

/// What a note says.
#[derive(Debug, PartialEq, Eq)]
struct Noted {
    pgid: i32,
    after: u64,
    before: u64,
    /// The journal's length when the step started.
    journal_len: u64,
}

fn parse(text: &str) -> Option<Noted> {
    let mut fields = text.split_whitespace();
    let pgid: i32 = fields.next()?.parse().ok()?;
    let after = fields.next()?.parse().ok()?;
    let before = fields.next()?.parse().ok()?;
    // Notes written before the journal's length was kept were cleared when their step
    // ended, so one without it is of a step still in flight.
    let journal_len = match fields.next() {
        Some(field) => field.parse().ok()?,
        None => u64::MAX,
    };
    (pgid > 1).then_some(Noted {
        pgid,
        after,
        before,
        journal_len,
    })
}

/// `/proc` counts start times in clock ticks (usually 10 ms), so the window is widened by
/// a tick on each side.
fn started_within(started_ns: u64, after: u64, before: u64) -> bool {
    let tick = 1_000_000_000 / clock_ticks_per_second();
    started_ns + tick >= after && started_ns <= before + tick
}

/// The unit of `/proc` times, per second (100 on Linux).
fn clock_ticks_per_second() -> u64 {
    match nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK) {
        Ok(Some(ticks)) if ticks > 0 => ticks.unsigned_abs(),
        _ => 100,
    }
}

/// When process `pid` started, on the boot clock; `None` if there is no such process.
fn leader_start_ns(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses; the fields follow the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    // Field 22 of the file is the 20th after the name (state is field 3).
    let ticks: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    Some(ticks * (1_000_000_000 / clock_ticks_per_second()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_round_trips_and_clears() {
        let dir = tempfile::tempdir().expect("tempdir");
        let note = GroupNote::open(dir.path(), "r1").expect("open");
        note.set_journal_len(345);
        note.note(12345, 10, 20);
        let text = std::fs::read_to_string(path(dir.path(), "r1")).expect("read");
        assert_eq!(text.len(), WIDTH);
        assert_eq!(
            parse(&text),
            Some(Noted {
                pgid: 12345,
                after: 10,
                before: 20,
                journal_len: 345
            })
        );
        note.clear();
        let text = std::fs::read_to_string(path(dir.path(), "r1")).expect("read");
        assert_eq!(parse(&text), None);
    }

    #[test]
    fn malformed_notes_are_ignored() {
        for text in [
            "",
            "x y z",
            "12",
            "1 2 3",
            "-5 1 2",
            "99999999999 1 2",
            "123 1 2 x",
        ] {
            assert_eq!(parse(text), None, "{text:?}");
        }
        // The form without the journal's length counts as a step in flight.
        assert_eq!(parse("123 1 2").map(|n| n.journal_len), Some(u64::MAX));
    }

    #[test]
    fn a_group_is_killed_only_while_the_journal_says_its_step_had_not_ended() {
        use std::os::unix::process::CommandExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let note = GroupNote::open(dir.path(), "r1").expect("open");
        let after = boot_clock_ns();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pgid = i32::try_from(child.id()).expect("pid fits");
        note.set_journal_len(100);
        note.note(pgid, after, boot_clock_ns());

        // The step's result was journaled after the note: its group is not touched.
        note.set_journal_len(180);
        assert_eq!(note.kill_leftover(), Leftover::None);
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "sleep was killed"
        );

        // Nothing was journaled after the note: the step was in flight, so it is killed.
        note.set_journal_len(100);
        note.note(pgid, after, boot_clock_ns());
        assert_eq!(note.kill_leftover(), Leftover::Killed(pgid));
        let status = child.wait().expect("wait");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
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
