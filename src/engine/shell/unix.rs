//! Shell steps on Unix: the shell in its own process group, read and watched in one `poll`
//! loop (see the parent module).

use std::io::{Read as _, Write as _};
use std::process::{Command, Stdio};
use std::time::Instant;

use rustix::event::{PollFd, PollFlags, Timespec, poll};

use super::super::process::{ExitWatch, clock_ns, kill_group};
use super::super::runner::{CancelToken, Ran, ShellStep};
use super::super::step::Kept;
use super::program::{self, Program};
use super::{
    DRAIN_GRACE, Output, READ_SIZE, RUNNING_MEKARA, ShellRunner, Stop, TICK, failed, finish,
};

thread_local! {
    /// The read buffer of the steps run on this thread, made once and handed from step to
    /// step: zeroing a fresh one for every step showed in the per-step profile, and sweeping
    /// 16 KiB through the cache for every step costs the shells too.
    static READ_BUFFER: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Put before the command of a step whose process group is noted: the shell waits for
/// mekara to write a line to its stdin, which mekara does once the note is on disk, then
/// takes `/dev/null` as stdin as an ungated step has. If mekara dies before that, the pipe
/// closes, `read` fails and the shell leaves without running the command. It shares the
/// command's first line, so line numbers in the shell's messages stay the user's.
/// (Spawning the child stopped would need a `pre_exec` hook, which turns `posix_spawn`
/// into a `fork`; see `group_note`.)
const GATE: &str = "read -r _ || exit 125; exec </dev/null; ";

/// The [`GATE`] of a step that must not outlive mekara (see [`ShellRunner::tied`]): past it,
/// the shell hands the gate's pipe to a watcher in its group, which kills the group when the
/// pipe reaches its end. mekara holds the other end until the step returns, so the pipe
/// ends when mekara does, however it ends (SIGKILL, the OOM killer): the kernel closes a
/// dead process's descriptors. The watcher writes nowhere, so it never holds the step's
/// output open, and dies with the group when the step ends.
const TIED_GATE: &str = "read -r _ || exit 125; exec 3<&0 </dev/null; \
                         { read -r _ <&3; kill -s KILL 0; } >/dev/null 2>&1 & exec 3<&-; ";

/// `command` held at `gate`.
fn gated(gate: &str, command: &str) -> String {
    let mut text = String::with_capacity(gate.len() + command.len());
    text.push_str(gate);
    text.push_str(command);
    text
}

impl ShellRunner {
    /// Spawns the step's shell in its own process group and waits for it.
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
        // A step whose group is noted starts held at a gate (see `GATE`): it runs nothing
        // until its group is on disk, so a mekara killed in between leaves nothing running
        // that a resume could not find.
        let gate = if step.group_note.is_some() || self.tied {
            match std::io::pipe() {
                Ok(pair) => Some(pair),
                Err(e) => return failed_to_start(e),
            }
        } else {
            None
        };
        let mut gate_release = None;
        // Another shell than bash is started by the gate's bash (`exec "$@"`), so that it is
        // held at the gate as well.
        let named = match program::for_step(step.shell.as_deref()) {
            Ok(Program::Default) => None,
            Ok(Program::Named { program, args, .. }) => Some((program, args)),
            Err(error) => return failed(started, error),
        };
        let mut command = if let (Some((program, args)), None) = (&named, &gate) {
            let mut command = Command::new(program);
            command.args(*args).arg(&step.command);
            command
        } else {
            let mut command = Command::new(&self.shell);
            command.arg("-c");
            command
        };
        let stdin = if let Some((gate_in, gate_out)) = gate {
            let gate = if self.tied { TIED_GATE } else { GATE };
            match &named {
                Some((program, args)) => {
                    command
                        .arg(gated(gate, "exec \"$@\""))
                        .arg("mekara")
                        .arg(program)
                        .args(*args)
                        .arg(&step.command);
                }
                None => {
                    command.arg(gated(gate, &step.command));
                }
            }
            gate_release = Some(gate_out);
            Stdio::from(gate_in)
        } else {
            if named.is_none() {
                command.arg(&step.command);
            }
            self.dev_null
                .as_ref()
                .and_then(|f| f.try_clone().ok())
                .map_or_else(Stdio::null, Stdio::from)
        };
        command
            .current_dir(&step.working_dir)
            .envs(RUNNING_MEKARA.iter().map(|(k, v)| (k, v)))
            .envs(&step.env)
            .stdin(stdin)
            .stdout(writer)
            .stderr(stderr);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let spawned_after = step.group_note.as_ref().map(|_| clock_ns());
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => return failed_to_start(e),
        };
        if let (Some(note), Some(after)) = (&step.group_note, spawned_after) {
            let pid = i32::try_from(child.id()).unwrap_or(0);
            note.note(pid, after, clock_ns());
        }
        // The note is written: open the gate. A shell that already died of a syntax error
        // closed its end, which only makes this write fail. A tied step's gate stays open
        // until the step returns (its end is the watcher's signal).
        let _lifeline = gate_release.take().and_then(|mut release| {
            let _ = release.write_all(b"\n");
            self.tied.then_some(release)
        });
        // The parent's copies of the write end must be gone for the pipe to reach EOF.
        drop(command);
        let group = i32::try_from(child.id()).unwrap_or(0);
        let kill_group = || {
            kill_group(group);
        };

        let mut output = Kept::default();
        let mut buf = READ_BUFFER.take();
        if buf.is_empty() {
            buf = vec![0; READ_SIZE];
        }
        let mut pipe_open = true;
        let mut exited = false;
        let mut stopped: Option<Stop> = None;
        let deadline = started + step.timeout;
        let watch = ExitWatch::new(&child);
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
                    kill_group();
                }
            }
            if exited && drain_until.is_some_and(|until| now >= until) {
                break;
            }
            let wait = match (exited, drain_until) {
                (true, Some(until)) => until.saturating_duration_since(now),
                _ => watch
                    .tick(TICK, pipe_open)
                    .min(deadline.saturating_duration_since(now)),
            };
            let timeout = Timespec {
                tv_sec: wait.as_secs().try_into().unwrap_or(i64::MAX),
                tv_nsec: wait.subsec_nanos().into(),
            };
            let mut fds = Vec::with_capacity(2);
            let pipe_at = pipe_open.then(|| {
                fds.push(PollFd::new(&reader, PollFlags::IN));
                fds.len() - 1
            });
            let exit_fd = watch.fd();
            let exit_at = match (&exit_fd, exited) {
                (Some(fd), false) => {
                    fds.push(PollFd::new(fd, PollFlags::IN));
                    Some(fds.len() - 1)
                }
                _ => None,
            };
            if poll(&mut fds, Some(&timeout)).is_err() {
                // EINTR: go round again; the checks above run first.
                continue;
            }
            let ready = |at: Option<usize>| at.is_some_and(|i| !fds[i].revents().is_empty());
            let (pipe_ready, child_ready) = (ready(pipe_at), ready(exit_at));
            drop(fds);
            if pipe_ready {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => pipe_open = false,
                    Ok(n) => {
                        on_output(&buf[..n]);
                        output.push(&buf[..n]);
                    }
                }
            }
            if !exited {
                // The child stays a zombie until `wait` below, so its group id cannot be
                // handed to another process before the group is killed.
                exited = watch.exited(child_ready);
            }
            if exited && drain_until.is_none() {
                kill_group();
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            }
        }
        READ_BUFFER.set(buf);
        // The group was killed when the exit was noticed; reaping now frees its id.
        let status = child.wait();
        finish(step, started, stopped.as_ref(), pipe_open, status, output)
    }
}

/// The signal that ended a process, for its step's error.
pub(super) fn signal_of(status: std::process::ExitStatus) -> i32 {
    std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0)
}

/// Whether `link` is a symbolic link to `exe`.
pub(super) fn links_to(link: &std::path::Path, exe: &std::path::Path) -> bool {
    std::fs::read_link(link).is_ok_and(|target| target == exe)
}

/// A symbolic link at `link` to `exe`.
pub(super) fn link(exe: &std::path::Path, link: &std::path::Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(exe, link)
}
