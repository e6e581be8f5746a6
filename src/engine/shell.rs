//! Shell steps: the [`StepRunner`] that really spawns processes.
//!
//! A command runs as `bash -c` (or `sh -c` where there is no bash) in its own process
//! group, with stdin from `/dev/null` and stdout and stderr sharing one pipe, so the output
//! keeps the order in which it was written. The runner reads the pipe and watches the child
//! (through a pidfd on Linux, see `process`) in one `poll` loop, which gives live output,
//! timeouts and cancellation without a thread per step. When the command ends, is timed out or is cancelled, the whole
//! group is killed: a step leaves nothing running behind it in its group. A process that
//! leaves the group (`setsid`, a daemon) is out of reach; a timeout's message says so, and
//! says it survived when it still holds the output pipe after the group died.

use std::ffi::OsString;
use std::io::{Read, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use rustix::event::{PollFd, PollFlags, Timespec, poll};
use rustix::process::{Pid, Signal, kill_process_group};

use super::process::{ExitWatch, clock_ns};
use super::runner::{CancelToken, Ran, ShellStep, StepRunner};
use super::step::{Kept, StepResult};

/// A step's output is read in pieces of at most this.
const READ_SIZE: usize = 16 * 1024;

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

/// How often a running step checks for cancellation while it is silent.
const TICK: Duration = Duration::from_millis(50);

/// How long to wait for the pipe to close once the group is dead (a process that left the
/// group with `setsid` may hold it open forever).
const DRAIN_GRACE: Duration = Duration::from_millis(200);

/// Spawns real processes.
#[derive(Debug, Clone)]
pub(crate) struct ShellRunner {
    shell: PathBuf,
    /// `/dev/null`, opened once: every step's stdin is a duplicate of it, which is cheaper
    /// than opening the device again for each step.
    dev_null: Option<Arc<std::fs::File>>,
    /// Whether its steps' groups die with mekara (see [`ShellRunner::tied`]).
    tied: bool,
}

impl Default for ShellRunner {
    fn default() -> Self {
        ShellRunner::new()
    }
}

impl ShellRunner {
    /// Uses `bash` from `PATH`, else `sh`.
    pub(crate) fn new() -> ShellRunner {
        ShellRunner::with_shell(find_in_path("bash").unwrap_or_else(|| PathBuf::from("/bin/sh")))
    }

    /// Uses the given shell; it is called as `SHELL -c COMMAND`.
    pub(crate) fn with_shell(shell: impl Into<PathBuf>) -> ShellRunner {
        ShellRunner {
            shell: shell.into(),
            dev_null: std::fs::File::open("/dev/null").ok().map(Arc::new),
            tied: false,
        }
    }

    /// This runner, with each step's process group killed when mekara ends however it ends,
    /// SIGKILL included (see [`TIED_GATE`]): for an agent's process (an unattended run's
    /// `claude -p`), which must not go on working, and spending, for a mekara that is gone.
    /// Shell steps are not tied: a step left running is found and killed by the resume
    /// (`group_note`), and the watcher would cost every step a process.
    pub(crate) fn tied(self) -> ShellRunner {
        ShellRunner { tied: true, ..self }
    }
}

fn find_in_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// What every shell step gets in its environment so that it finds the mekara running it (a
/// step may call `mekara check`, as the bundled `/compile` does, although mekara was started
/// by an absolute path and is not on `PATH`: a plugin, `npx`, a wheel's virtualenv):
/// `MEKARA`, the running binary, and, when the `mekara` on `PATH` is not that binary, `PATH`
/// with a folder first that holds only a link named `mekara` to it. The folder is not the
/// binary's own, which may hold other programs (a virtualenv's `python`) that must not take
/// the place of the ones on `PATH`. It is made once per binary, under the user's cache
/// folder, and can be removed at any time. A step's own `env` still wins. Worked out once
/// per process.
static RUNNING_MEKARA: LazyLock<Vec<(OsString, OsString)>> = LazyLock::new(running_mekara);

fn running_mekara() -> Vec<(OsString, OsString)> {
    let Ok(exe) = std::env::current_exe() else {
        return Vec::new();
    };
    let mut env = vec![(OsString::from("MEKARA"), exe.clone().into_os_string())];
    let same = |p: &Path| std::fs::canonicalize(p).ok() == std::fs::canonicalize(&exe).ok();
    if find_in_path("mekara").is_some_and(|found| same(&found)) {
        return env;
    }
    match link_folder(&exe) {
        Ok(folder) => {
            let mut path = OsString::from(folder.as_os_str());
            if let Some(rest) = std::env::var_os("PATH").filter(|p| !p.is_empty()) {
                path.push(":");
                path.push(rest);
            }
            env.push((OsString::from("PATH"), path));
        }
        Err(e) => tracing::debug!(
            "shell steps get `MEKARA` but no `mekara` on `PATH`: cannot link `{}`: {e}",
            exe.display()
        ),
    }
    env
}

/// `<cache>/mekara/path/<hash of exe's path>/`, holding the link `mekara` → `exe`.
fn link_folder(exe: &Path) -> std::io::Result<PathBuf> {
    use sha2::Digest as _;
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })
        .ok_or_else(|| std::io::Error::other("neither XDG_CACHE_HOME nor HOME is set"))?;
    let digest = sha2::Sha256::digest(exe.as_os_str().as_encoded_bytes());
    let key = super::handle::hex(&digest[..8]);
    let folder = cache.join("mekara/path").join(key);
    let link = folder.join("mekara");
    if std::fs::read_link(&link).is_ok_and(|target| target == exe) {
        return Ok(folder);
    }
    std::fs::create_dir_all(&folder)?;
    // Another process may be making the same link: make it under a name of this process's,
    // then rename it into place, which replaces whatever is there at once.
    let temporary = folder.join(format!(".mekara.{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    std::os::unix::fs::symlink(exe, &temporary)?;
    std::fs::rename(&temporary, &link)?;
    Ok(folder)
}

impl StepRunner for ShellRunner {
    /// Runs the step; its output is redacted of the secrets this process knows, as it
    /// streams and in the result: a script can hand the shell a redacted `${VAR}`, which the
    /// shell expands.
    fn run_shell(
        &self,
        step: &ShellStep,
        on_output: &mut dyn FnMut(&[u8]),
        cancel: &CancelToken,
    ) -> Ran {
        let secrets = crate::secrets::known();
        if secrets.is_empty() {
            return self.spawn_and_wait(step, on_output, cancel);
        }
        let mut redacted = |chunk: &[u8]| match std::str::from_utf8(chunk) {
            Ok(text) => on_output(secrets.redact(text).as_bytes()),
            // A chunk may end inside a character; such a chunk is shown as it is (the
            // result, redacted whole, is what is kept).
            Err(_) => on_output(chunk),
        };
        match self.spawn_and_wait(step, &mut redacted, cancel) {
            Ran::Done(mut result) => {
                result.redact(&secrets);
                Ran::Done(result)
            }
            Ran::Cancelled => Ran::Cancelled,
        }
    }
}

impl ShellRunner {
    /// Spawns the step's shell in its own process group and waits for it.
    fn spawn_and_wait(
        &self,
        step: &ShellStep,
        on_output: &mut dyn FnMut(&[u8]),
        cancel: &CancelToken,
    ) -> Ran {
        // A stop asked for before the step began (say, its header could not be shown)
        // starts nothing.
        if cancel.is_cancelled() {
            return Ran::Cancelled;
        }
        let started = Instant::now();
        // The folder is only looked at when the spawn fails, so a step does not pay for a
        // `stat` it nearly never needs.
        let failed_to_start = |e: std::io::Error| {
            let error = if step.working_dir.is_dir() {
                format!(
                    "cannot start `{}` in `{}`: {e}",
                    self.shell.display(),
                    step.working_dir.display()
                )
            } else {
                format!(
                    "working_dir `{}` is not a folder",
                    step.working_dir.display()
                )
            };
            Ran::Done(StepResult {
                success: false,
                error: Some(error),
                duration_ms: Some(millis(started.elapsed())),
                ..StepResult::default()
            })
        };
        let (mut reader, writer) = match std::io::pipe() {
            Ok(pair) => pair,
            Err(e) => return failed_to_start(e),
        };
        let stderr = match writer.try_clone() {
            Ok(w) => w,
            Err(e) => return failed_to_start(e),
        };
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
        let mut command = Command::new(&self.shell);
        command.arg("-c");
        let stdin = if let Some((gate_in, gate_out)) = gate {
            let gate = if self.tied { TIED_GATE } else { GATE };
            command.arg(gated(gate, &step.command));
            gate_release = Some(gate_out);
            Stdio::from(gate_in)
        } else {
            command.arg(&step.command);
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
        let group = Pid::from_child(&child);
        let kill_group = || {
            let _ = kill_process_group(group, Signal::KILL);
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
        let duration_ms = Some(millis(started.elapsed()));
        if matches!(stopped, Some(Stop::Cancelled)) {
            // Nothing of a cancelled step is journaled, so the journal cannot tell that it
            // ended: the note is cleared instead. (A step that ran to an end is told by its
            // result in the journal; see `group_note`.)
            if let Some(note) = &step.group_note {
                note.clear();
            }
            return Ran::Cancelled;
        }
        let exit_code = status
            .as_ref()
            .ok()
            .and_then(std::process::ExitStatus::code);
        let error = match (&stopped, &status) {
            // Only the process group is killed: a process that left it (`setsid`, a
            // daemon) lives on, and is known to only when it still holds the output pipe.
            (Some(Stop::TimedOut), _) if pipe_open => Some(format!(
                "timed out after {}; the command's process group was killed, but a process it started outside that group (with `setsid`, or as a daemon) still holds its output open and was not killed",
                humantime::format_duration(step.timeout)
            )),
            (Some(Stop::TimedOut), _) => Some(format!(
                "timed out after {}; the command's process group was killed (a process it moved out of the group, with `setsid` or as a daemon, is not)",
                humantime::format_duration(step.timeout)
            )),
            (_, Err(e)) => Some(format!("cannot wait for the command: {e}")),
            (_, Ok(s)) => match s.code() {
                Some(0) => None,
                Some(code) => Some(format!("exited with code {code}")),
                None => Some(format!(
                    "killed by signal {}",
                    std::os::unix::process::ExitStatusExt::signal(s).unwrap_or(0)
                )),
            },
        };
        Ran::Done(StepResult {
            success: error.is_none(),
            exit_code,
            output: output.into_string(),
            error,
            duration_ms,
            ..StepResult::default()
        })
    }
}

enum Stop {
    Cancelled,
    TimedOut,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
