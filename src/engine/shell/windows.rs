//! Shell steps on Windows: the shell spawned suspended, put in a Job Object of its own,
//! noted, then let run; its output read by a thread (Windows cannot `poll` a pipe), and the
//! Job terminated when the shell ends, is timed out or is cancelled.
//!
//! A step's processes cannot leave its Job (it allows no breakaway), and the Job dies with
//! mekara's handle to it: every step is "tied" as an agent's is on Unix
//! (`ShellRunner::tied`), which costs nothing more here. Cost per step: a Job, a thread,
//! and one snapshot of the system's threads to resume the shell.

use std::io::Read as _;
use std::os::windows::process::CommandExt as _;
use std::process::Stdio;
use std::sync::mpsc::{RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use windows_sys::Win32::System::Threading::{CREATE_NEW_PROCESS_GROUP, CREATE_SUSPENDED};

use super::super::process::{Job, clock_ns, resume};
use super::super::runner::{CancelToken, Ran, ShellStep};
use super::super::step::Kept;
use super::program::{self, Program};
use super::{
    DRAIN_GRACE, Output, READ_SIZE, RUNNING_MEKARA, ShellRunner, Stop, TICK, failed, finish,
};

impl ShellRunner {
    /// Spawns the step's shell in a Job of its own and waits for it.
    pub(super) fn spawn_and_watch(
        &self,
        step: &ShellStep,
        started: Instant,
        output: Output,
        on_output: &mut dyn FnMut(&[u8]),
        cancel: &CancelToken,
    ) -> Ran {
        let failed_to_start = |e: std::io::Error| self.failed_to_start(step, started, &e);
        let Output {
            mut reader,
            stdout: writer,
            stderr,
        } = output;
        let stdin = self
            .dev_null
            .as_ref()
            .and_then(|f| f.try_clone().ok())
            .map_or_else(Stdio::null, Stdio::from);
        let mut command = match program::for_step(step.shell.as_deref()) {
            Ok(Program::Default) => {
                program::with_command(&self.shell, &["-c"], false, &step.command)
            }
            Ok(Program::Named { program, args, raw }) => {
                program::with_command(&program, args, raw, &step.command)
            }
            Err(error) => return failed(started, error),
        };
        command
            .current_dir(&step.working_dir)
            .envs(RUNNING_MEKARA.iter().map(|(k, v)| (k, v)))
            .envs(&step.env)
            .stdin(stdin)
            .stdout(writer)
            .stderr(stderr)
            // Suspended until it is in its Job and noted; a group of its own, so that the
            // console's Ctrl-C reaches mekara, which ends the step, and not the step itself.
            .creation_flags(CREATE_SUSPENDED | CREATE_NEW_PROCESS_GROUP);
        let spawned_after = clock_ns();
        let spawned = command.spawn();
        // The parent's copies of the write end must be gone for the pipe to reach its end.
        drop(command);
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => return failed_to_start(e),
        };
        let job = match Job::for_step(child.id()).and_then(|job| job.assign(&child).map(|()| job)) {
            Ok(job) => job,
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return failed_to_start(e);
            }
        };
        if let Some(note) = &step.group_note {
            let pid = i32::try_from(child.id()).unwrap_or(0);
            note.note(pid, spawned_after, clock_ns());
        }
        if let Err(e) = resume(&child) {
            job.terminate();
            let _ = child.wait();
            return failed_to_start(e);
        }

        // The pipe is read on a thread of its own, which hands the chunks over.
        let (chunks, read) = channel::<Vec<u8>>();
        let _reading = std::thread::Builder::new()
            .name("mekara-step-output".into())
            .spawn(move || {
                let mut buf = vec![0; READ_SIZE];
                while let Ok(n @ 1..) = reader.read(&mut buf) {
                    if chunks.send(buf[..n].to_vec()).is_err() {
                        break;
                    }
                }
            });

        let mut output = Kept::default();
        let mut pipe_open = true;
        let mut exited = false;
        let mut stopped: Option<Stop> = None;
        let deadline = started + step.timeout;
        let mut drain_until: Option<Instant> = None;
        while pipe_open || !exited {
            let now = Instant::now();
            if stopped.is_none() {
                if cancel.is_cancelled() {
                    stopped = Some(Stop::Cancelled);
                } else if now >= deadline {
                    stopped = Some(Stop::TimedOut);
                }
                if stopped.is_some() {
                    job.terminate();
                }
            }
            if exited && drain_until.is_some_and(|until| now >= until) {
                break;
            }
            let wait = match (exited, drain_until, pipe_open) {
                (true, Some(until), _) => until.saturating_duration_since(now),
                // The output is closed: the shell is about to exit.
                (false, _, false) => Duration::from_millis(1),
                _ => TICK.min(deadline.saturating_duration_since(now)),
            };
            if pipe_open {
                match read.recv_timeout(wait) {
                    Ok(chunk) => {
                        on_output(&chunk);
                        output.push(&chunk);
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => pipe_open = false,
                }
            } else {
                std::thread::sleep(wait);
            }
            if !exited {
                exited = !matches!(child.try_wait(), Ok(None));
            }
            if exited && drain_until.is_none() {
                job.terminate();
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            }
        }
        let status = child.wait();
        finish(step, started, stopped.as_ref(), pipe_open, status, output)
    }
}

/// Never called: a Windows process always ends with an exit code.
pub(super) fn signal_of(_status: std::process::ExitStatus) -> i32 {
    0
}

/// Whether `link` is the same file as `exe` (a hard link, or a copy of the same length).
pub(super) fn links_to(link: &std::path::Path, exe: &std::path::Path) -> bool {
    match (std::fs::metadata(link), std::fs::metadata(exe)) {
        (Ok(a), Ok(b)) => a.len() == b.len() && a.modified().ok() == b.modified().ok(),
        _ => false,
    }
}

/// `exe` at `link`: a hard link (symbolic links need a privilege on Windows), else a copy.
pub(super) fn link(exe: &std::path::Path, link: &std::path::Path) -> std::io::Result<()> {
    std::fs::hard_link(exe, link).or_else(|_| std::fs::copy(exe, link).map(|_| ()))
}
