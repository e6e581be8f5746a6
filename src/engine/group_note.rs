//! `GroupNote`: the process group of the shell step running now, noted beside the run's
//! journal, so that a resume can kill what a killed mekara left running.
//!
//! mekara kills a step's whole process group when the step ends, times out or is cancelled.
//! If mekara itself is killed (SIGKILL, a crash, the machine's OOM killer), nothing is left
//! to do that, and the step goes on without it. The kernel's own remedy,
//! `PR_SET_PDEATHSIG`, does not fit: it needs a `pre_exec` hook (which turns the cheap
//! `posix_spawn` into a `fork`, costing more than the whole per-step budget), and it fires
//! when the *thread* that spawned the child ends, which in `mekara mcp` is a pooled worker
//! thread that may be retired between steps. An agent's process, which must not outlive
//! mekara, is tied to it another way, through a pipe (`ShellRunner::tied`), which also
//! reaches the agent the shell starts (`PR_SET_PDEATHSIG` reaches only the shell).
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
//!
//! The steps of a `parallel` group run at once, so one line cannot hold them: each runs in
//! a slot of its own (a line after the first, one per concurrent step). The journal grows as
//! members finish while others still run, so its length cannot tell a member's end: a slot
//! keeps no length, and is cleared when its step returns (one more write, paid only by
//! parallel steps). A slot keeps its step's number in the frame instead, so that a resume
//! kills the group of every slot still written and journals which step it killed (a slot
//! written by a mekara from before the number was kept is killed, and nothing journaled).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::process::{self, FileAt as _, clock_ns, kill_group};

/// The note of one run: where its running step's process group is written down.
#[derive(Debug, Clone)]
pub(crate) struct GroupNote {
    file: Arc<File>,
    path: Arc<PathBuf>,
    /// The length of the run's journal, kept up to date by the journal (0 for a new one).
    journal_len: Arc<AtomicU64>,
    /// Which line this handle writes: 0 for sequential steps, from 1 for the steps of a
    /// `parallel` group that run at once.
    slot: u64,
    /// The number in its frame of the step a slot line is of, noted beside its group.
    step: Option<usize>,
    /// The groups this handle notes are an agent's (an unattended run's llm step), not a
    /// shell step's: line 0 says so, for the viewer.
    agent: bool,
}

/// Fixed width, so every note overwrites the last one whole: `pgid lo hi journal_len` padded.
const WIDTH: usize = 64;

/// The note file of run `id` in the runs folder `dir`.
pub(crate) fn path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.group"))
}

impl GroupNote {
    /// Opens (creating it empty) the note of run `id` in `dir`.
    pub(crate) fn open(dir: &Path, id: &str) -> std::io::Result<GroupNote> {
        let path = path(dir, id);
        // A link in its place is not a note mekara wrote, and writing notes through it
        // would overwrite whatever it points at: it is removed, and a note made afresh.
        if path
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            tracing::warn!(
                "`{}` is a symbolic link, not a note mekara wrote; it is replaced",
                path.display()
            );
            std::fs::remove_file(&path)?;
        }
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
            slot: 0,
            step: None,
            agent: false,
        })
    }

    /// The same note, writing line `slot` (from 1): where one of the steps of a `parallel`
    /// group that run at once notes its group, with `step`, its number in the frame (when
    /// known), for a resume that kills it to journal. Such a line is cleared when its step
    /// returns.
    pub(crate) fn member_slot(&self, slot: usize, step: Option<usize>) -> GroupNote {
        GroupNote {
            slot: u64::try_from(slot).unwrap_or(u64::MAX),
            step,
            ..self.clone()
        }
    }

    /// The same note, for the process group of an agent that mekara starts to answer an
    /// llm step (unattended runs): line 0 marks it `agent`, so that a reader tells an llm
    /// step from a shell step.
    pub(crate) fn for_agent(&self) -> GroupNote {
        GroupNote {
            agent: true,
            ..self.clone()
        }
    }

    /// Notes that the run handed an llm step to its agent at `at_ms` (Unix ms) and waits for
    /// the answer. Not cleared when the answer comes: the answer is journaled, and a journal
    /// longer than the note says tells that the wait ended (as for a step's group).
    pub(crate) fn note_llm(&self, at_ms: u64) {
        let mut line = [b' '; WIDTH];
        line[WIDTH - 1] = b'\n';
        let mut cursor = std::io::Cursor::new(&mut line[..WIDTH - 1]);
        let journal_len = self.journal_len.load(Ordering::Relaxed);
        let _ = write!(cursor, "0 0 0 {journal_len} llm {at_ms}");
        if let Err(e) = self.file.write_all_at(&line, 0) {
            tracing::debug!("cannot note the llm step handed out: {e}");
        }
    }

    /// Tells the note how long the run's journal is (the journal calls this when it opens).
    pub(crate) fn set_journal_len(&self, len: u64) {
        self.journal_len.store(len, Ordering::Relaxed);
    }

    /// Tells the note that `bytes` were appended to the run's journal.
    pub(crate) fn journal_grew(&self, bytes: u64) {
        self.journal_len.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Deletes the note: the run has ended, so no step of it can be running.
    pub(crate) fn remove(self) {
        let _ = std::fs::remove_file(self.path.as_ref());
    }

    /// Notes that group `pgid` runs now; its leader was spawned between the boot-clock
    /// times `spawned_after` and `spawned_before` (nanoseconds).
    pub(crate) fn note(&self, pgid: i32, spawned_after: u64, spawned_before: u64) {
        // Written on the stack: this runs for every step.
        let mut line = [b' '; WIDTH];
        line[WIDTH - 1] = b'\n';
        let mut cursor = std::io::Cursor::new(&mut line[..WIDTH - 1]);
        let _ = if self.slot == 0 {
            let journal_len = self.journal_len.load(Ordering::Relaxed);
            let agent = if self.agent && pgid > 0 { " agent" } else { "" };
            write!(
                cursor,
                "{pgid} {spawned_after} {spawned_before} {journal_len}{agent}"
            )
        } else if let Some(step) = self.step.filter(|_| pgid > 0) {
            // No journal length: the step is in flight until its line is cleared. Its number
            // takes the length's place (a mekara that does not know it reads a length, which
            // it does not use in a slot).
            write!(cursor, "{pgid} {spawned_after} {spawned_before} {step}")
        } else {
            write!(cursor, "{pgid} {spawned_after} {spawned_before}")
        };
        // A note that cannot be written only loses the clean-up after a crash; the step
        // itself must not fail for it.
        let offset = self.slot.saturating_mul(WIDTH as u64);
        if let Err(e) = self.file.write_all_at(&line, offset) {
            tracing::debug!("cannot note the step's process group: {e}");
        }
    }

    /// Notes that no step runs.
    pub(crate) fn clear(&self) {
        self.note(0, 0, 0);
    }

    /// Kills the process group noted, if its step had not ended and the group is still the
    /// one noted, and clears the note. Call it only while holding the run (its journal
    /// lock), after telling the note the journal's length: then whoever wrote the note is
    /// gone, and the journal says whether the step ended.
    ///
    /// The groups of `parallel` steps noted in the lines after the first are killed too
    /// (each said in the log), and given back with their step's number when the line kept
    /// it.
    pub(crate) fn kill_leftover(&self) -> Leftovers {
        let journal_len = self.journal_len.load(Ordering::Relaxed);
        let mut members = Vec::new();
        let mut slot = 1;
        loop {
            let mut line = [0u8; WIDTH];
            let read = self
                .file
                .read_at(&mut line, slot * WIDTH as u64)
                .unwrap_or(0);
            if read == 0 {
                break;
            }
            let text = String::from_utf8_lossy(&line[..read]);
            if let Some(note) = parse(&text) {
                let found = self.kill_noted(&note);
                tracing::info!("a parallel step's noted process group: {found:?}");
                // In a slot, the field after the window is the step's number.
                let step = (note.journal_len != u64::MAX)
                    .then(|| usize::try_from(note.journal_len).ok())
                    .flatten();
                if let Some(step) = step {
                    members.push((step, found));
                }
            }
            slot += 1;
        }
        let mut line = [0u8; WIDTH];
        let read = self.file.read_at(&mut line, 0).unwrap_or(0);
        let text = String::from_utf8_lossy(&line[..read]);
        let step = parse(&text)
            .filter(|note| note.journal_len >= journal_len)
            .map_or(Leftover::None, |note| self.kill_noted(&note));
        if slot > 1 {
            let _ = self.file.set_len(WIDTH as u64);
        }
        self.clear();
        Leftovers { step, members }
    }

    /// Kills the group of `note` if it is still the one noted.
    fn kill_noted(&self, note: &Noted) -> Leftover {
        match ours(note, clock_ns()) {
            Err(why) => {
                tracing::warn!(
                    "`{}` names process group {}, which is not one mekara started: {why}; nothing was killed",
                    self.path.display(),
                    note.pgid
                );
                Leftover::NotOurs(note.pgid)
            }
            Ok(false) => Leftover::Reused(note.pgid),
            Ok(true) if !kill_group(note.pgid) => Leftover::None,
            Ok(true) if gone(note.pgid, GONE_WITHIN) => Leftover::Killed(note.pgid),
            Ok(true) => {
                tracing::warn!(
                    "process group {} (a step left running when mekara stopped) was killed but still has processes after {} s (one in uninterruptible sleep, on a hung disk or network file system?); what it holds (files, locks) may still be held while the run goes on",
                    note.pgid,
                    GONE_WITHIN.as_secs()
                );
                Leftover::Lingers(note.pgid)
            }
        }
    }
}

/// What a run held by a process is doing now, as its note says: read by the viewer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Doing {
    /// What it waits on.
    pub kind: DoingKind,
    /// Since when (Unix ms).
    pub since: u64,
}

/// What a run waits on now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum DoingKind {
    /// An llm step handed to the agent (over MCP, a person at the terminal, or an agent
    /// process of an unattended run), not answered yet.
    Llm,
    /// A shell step running.
    Shell,
}

/// What the note of run `id` in `dir` says the run is doing, when its journal is
/// `journal_len` bytes long: nothing when the journal grew since the note was written (the
/// step ended), or when there is no note. Only worth asking of a run a process holds: the
/// note of a run nobody holds is what a stopped mekara left.
pub(crate) fn doing(dir: &Path, id: &str, journal_len: u64) -> Option<Doing> {
    let path = path(dir, id);
    if !path.symlink_metadata().ok()?.is_file() {
        return None;
    }
    let file = File::open(&path).ok()?;
    let mut line = [0u8; WIDTH];
    let read = file.read_at(&mut line, 0).ok()?;
    let text = std::str::from_utf8(&line[..read]).ok()?;
    let mut fields = text.split_whitespace();
    let pgid: i32 = fields.next()?.parse().ok()?;
    let after: u64 = fields.next()?.parse().ok()?;
    let _before: u64 = fields.next()?.parse().ok()?;
    let noted_len: u64 = fields.next()?.parse().ok()?;
    if noted_len != journal_len {
        return None;
    }
    let now = crate::engine::journal::now_ms();
    // A group's spawn time is on the boot clock: its age, taken from now, on the wall clock.
    let since_spawn = || now.saturating_sub(clock_ns().saturating_sub(after) / 1_000_000);
    match (pgid, fields.next()) {
        (0, Some("llm")) => Some(Doing {
            kind: DoingKind::Llm,
            since: fields.next()?.parse().ok()?,
        }),
        (2.., Some("agent")) => Some(Doing {
            kind: DoingKind::Llm,
            since: since_spawn(),
        }),
        (2.., None) => Some(Doing {
            kind: DoingKind::Shell,
            since: since_spawn(),
        }),
        _ => None,
    }
}

/// How long a killed group may take to be gone. A process ends some time after SIGKILL
/// (it frees its memory first, and lets go of its files and locks as it goes); one that
/// does not end within this is stuck in the kernel.
const GONE_WITHIN: Duration = Duration::from_secs(5);

/// Waits until no live process is left in group `pgid` (zombies are gone: they hold
/// nothing), at most `within`; says whether it went. A resume that ran the step again
/// while the killed one was still ending found its file lock held (for 2 to 4 ms).
fn gone(pgid: i32, within: Duration) -> bool {
    let started = std::time::Instant::now();
    let mut pause = Duration::from_millis(1);
    loop {
        if process::group_members(pgid).is_empty() {
            return true;
        }
        if started.elapsed() >= within {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// What a resume found of the steps a killed mekara left running.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leftovers {
    /// The sequential step's (the note's first line).
    pub step: Leftover,
    /// Each `parallel` step whose line kept its number: the number in its frame, and what
    /// was found of it.
    pub members: Vec<(usize, Leftover)>,
}

/// What a resume found of one step a killed mekara left running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Leftover {
    /// No step was running, or its group is gone.
    None,
    /// The group was still there, and was killed.
    Killed(i32),
    /// A process now holds the noted pid but started at another time: the number was
    /// reused, so nothing was killed.
    Reused(i32),
    /// The group was killed, but some of its processes had not ended after a while (a
    /// warning in the log says so).
    Lingers(i32),
    /// The note cannot be of a group mekara started (it was edited or crafted): nothing
    /// was killed.
    NotOurs(i32),
}

/// The longest a spawn can take between the two clock readings a note keeps. Real ones
/// take microseconds; a wider window is not a note mekara wrote.
const MAX_WINDOW_NS: u64 = 10 * 1_000_000_000;

/// Whether the noted group is one a step of mekara's started: `Ok(true)` to kill it,
/// `Ok(false)` when its pid was reused, `Err` (why) when the note cannot be mekara's.
///
/// The note is read from disk, so it is checked as input: the group is never mekara's own,
/// init's or 0, the spawn window is a short one in the past, a live leader still leads the
/// group and started inside the window, and with the leader gone every member left of the
/// group started after the window opened (a step's processes start after its spawn).
fn ours(note: &Noted, now: u64) -> Result<bool, String> {
    let (own_group, own_pid) = process::own_group_and_pid();
    if note.pgid <= 1 || note.pgid == own_group || note.pgid == own_pid {
        return Err("it is init, 0, or mekara's own".into());
    }
    if note.after > note.before || note.before - note.after > MAX_WINDOW_NS || note.before > now {
        return Err("its spawn window is not one mekara could have noted".into());
    }
    match process::process(note.pgid) {
        Some(leader) if !leader.may_have_started_within(note.after, note.before) => Ok(false),
        Some(leader) if leader.pgid != note.pgid => {
            Err("its leader no longer leads that group".into())
        }
        Some(_) => Ok(true),
        None => {
            match process::group_members(note.pgid)
                .into_iter()
                .find(|member| member.started_before(note.after))
            {
                Some(member) => Err(format!(
                    "its member {} started before the step was spawned",
                    member.pid
                )),
                None => Ok(true),
            }
        }
    }
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

    #[cfg(unix)]
    #[test]
    fn a_group_is_killed_only_while_the_journal_says_its_step_had_not_ended() {
        use std::os::unix::process::CommandExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let note = GroupNote::open(dir.path(), "r1").expect("open");
        let after = clock_ns();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pgid = i32::try_from(child.id()).expect("pid fits");
        note.set_journal_len(100);
        note.note(pgid, after, clock_ns());

        // The step's result was journaled after the note: its group is not touched.
        note.set_journal_len(180);
        assert_eq!(note.kill_leftover().step, Leftover::None);
        assert!(
            child.try_wait().expect("try_wait").is_none(),
            "sleep was killed"
        );

        // Nothing was journaled after the note: the step was in flight, so it is killed.
        note.set_journal_len(100);
        note.note(pgid, after, clock_ns());
        assert_eq!(note.kill_leftover().step, Leftover::Killed(pgid));
        let status = child.wait().expect("wait");
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(9)
        );
    }

    /// Regression (issue 31): a resume killed a leftover step's group and ran the step
    /// again at once, while the killed process was still ending (its file lock was seen
    /// held 2 to 4 ms after). When `kill_leftover` returns, no process of the group is
    /// left running, even one that takes a while to end (it frees 200 MB first).
    #[cfg(unix)]
    #[test]
    fn a_killed_group_is_gone_when_the_kill_returns() {
        use std::os::unix::process::CommandExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let note = GroupNote::open(dir.path(), "r1").expect("open");
        let ready = dir.path().join("ready");
        let after = clock_ns();
        let mut child = std::process::Command::new("python3")
            .args([
                "-c",
                "import sys, time\nx = b'x' * 200_000_000\nopen(sys.argv[1], 'w').close()\ntime.sleep(60)",
            ])
            .arg(&ready)
            .process_group(0)
            .spawn()
            .expect("spawn python3");
        let pgid = i32::try_from(child.id()).expect("pid fits");
        note.set_journal_len(100);
        note.note(pgid, after, clock_ns());
        while !ready.exists() {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(note.kill_leftover().step, Leftover::Killed(pgid));
        assert!(
            process::group_members(pgid).is_empty(),
            "a process of the killed group still runs"
        );
        child.wait().expect("wait");
    }

    #[cfg(unix)]
    #[test]
    fn the_groups_of_parallel_steps_are_killed_though_the_journal_grew_until_cleared() {
        use std::os::unix::process::CommandExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let note = GroupNote::open(dir.path(), "r1").expect("open");
        let spawn = || {
            let after = clock_ns();
            let child = std::process::Command::new("sleep")
                .arg("30")
                .process_group(0)
                .spawn()
                .expect("spawn sleep");
            let pgid = i32::try_from(child.id()).expect("pid fits");
            (child, pgid, after)
        };
        let (mut running, running_pgid, after) = spawn();
        let (mut ended, ended_pgid, ended_after) = spawn();
        let (mut unnumbered, unnumbered_pgid, unnumbered_after) = spawn();
        note.set_journal_len(100);
        note.member_slot(1, Some(4))
            .note(running_pgid, after, clock_ns());
        let slot = note.member_slot(2, Some(5));
        slot.note(ended_pgid, ended_after, clock_ns());
        // The second step returned: its line is cleared.
        slot.clear();
        // A line as a mekara from before the step's number was kept wrote it.
        note.member_slot(3, None)
            .note(unnumbered_pgid, unnumbered_after, clock_ns());
        // Other members finished meanwhile: the journal grew, which says nothing of the
        // step of line 1.
        note.set_journal_len(500);
        assert_eq!(
            note.kill_leftover(),
            Leftovers {
                step: Leftover::None,
                members: vec![(4, Leftover::Killed(running_pgid))],
            }
        );
        for child in [&mut running, &mut unnumbered] {
            let status = child.wait().expect("wait");
            assert_eq!(
                std::os::unix::process::ExitStatusExt::signal(&status),
                Some(9)
            );
        }
        assert!(ended.try_wait().expect("try_wait").is_none(), "killed");
        ended.kill().expect("kill");
        ended.wait().expect("reap");
        // The note is back to one line.
        let text = std::fs::read_to_string(path(dir.path(), "r1")).expect("read");
        assert_eq!(text.len(), WIDTH);
    }

    #[test]
    fn notes_that_cannot_be_ours_are_refused() {
        let now = clock_ns();
        let me = i32::try_from(std::process::id()).expect("pid fits");
        let note = |pgid, after, before| Noted {
            pgid,
            after,
            before,
            journal_len: 0,
        };
        for (noted, what) in [
            (note(me, now - 10, now), "mekara's own group"),
            (note(1, now - 10, now), "init"),
            (note(0, now - 10, now), "0"),
            (note(-5, now - 10, now), "a negative group"),
            (note(123_456, 0, now), "a window from boot"),
            (
                note(123_456, now - 10, u64::MAX),
                "a window into the future",
            ),
            (
                note(123_456, now, now - 10),
                "a window that ends before it starts",
            ),
        ] {
            assert!(ours(&noted, now).is_err(), "{what}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn a_crafted_note_does_not_kill_a_process_it_did_not_start() {
        use std::os::unix::process::CommandExt as _;
        let dir = tempfile::tempdir().expect("tempdir");
        let note = GroupNote::open(dir.path(), "r1").expect("open");
        let mut bystander = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .expect("spawn sleep");
        let pgid = i32::try_from(bystander.id()).expect("pid fits");
        // Noted as spawned a while after it was: later than the latest start any reading of
        // the start time can give (one reading's bound may be tight and the next as loose
        // as its window is wide).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let later = loop {
            let now = clock_ns();
            let read = process::process(pgid).expect("bystander");
            let width = read.started_by_ns - read.started_ns;
            if now > read.started_by_ns + width.max(1_000_000_000) {
                break now;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the clock stood still"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        };
        note.note(pgid, later, clock_ns());
        assert_eq!(note.kill_leftover().step, Leftover::Reused(pgid));
        // A window as wide as the uptime.
        note.note(pgid, 1, clock_ns());
        assert_eq!(note.kill_leftover().step, Leftover::NotOurs(pgid));
        assert!(bystander.try_wait().expect("try_wait").is_none(), "killed");
        bystander.kill().expect("kill");
        bystander.wait().expect("reap");
    }

    #[cfg(unix)]
    #[test]
    fn a_note_file_that_is_a_link_is_replaced_not_written_through() {
        let dir = tempfile::tempdir().expect("tempdir");
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "precious\n").expect("write");
        std::os::unix::fs::symlink(&victim, path(dir.path(), "r1")).expect("symlink");
        let note = GroupNote::open(dir.path(), "r1").expect("open");
        note.note(12345, 1, 2);
        assert_eq!(
            std::fs::read_to_string(&victim).expect("read"),
            "precious\n"
        );
        assert!(
            !path(dir.path(), "r1")
                .symlink_metadata()
                .expect("note")
                .file_type()
                .is_symlink()
        );
    }

    #[test]
    fn our_own_start_time_is_read_and_a_reused_pid_is_told_apart() {
        let me = i32::try_from(std::process::id()).expect("pid fits");
        let found = process::process(me).expect("our own process");
        let started = found.started_ns;
        assert!(started <= clock_ns());
        assert!(found.may_have_started_within(started, started));
        assert!(found.may_have_started_within(found.started_by_ns, found.started_by_ns));
        // A note from long after we started is not us.
        let later = started + 60 * 1_000_000_000;
        assert!(!found.may_have_started_within(later, later + 1));
        assert!(found.started_before(later));
    }
}
