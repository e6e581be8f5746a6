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
//!
//! How the shell is spawned and watched is the OS family's: `unix.rs` (a process group and a
//! `poll` loop) and `windows.rs` (a Job Object, and a thread that reads the pipe); which
//! shell runs a step is `program.rs`'s (Git for Windows' bash on Windows).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use super::runner::{CancelToken, Ran, ShellStep, StepRunner};
use super::step::{Kept, StepResult};

#[cfg(unix)]
#[path = "unix.rs"]
mod os;
#[cfg(windows)]
#[path = "windows.rs"]
mod os;
mod program;
pub(crate) use program::{named, one_line};

/// A step's output is read in pieces of at most this.
const READ_SIZE: usize = 16 * 1024;

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
    /// Whether its steps' groups die with mekara (see [`ShellRunner::tied`]). On Windows
    /// every step's Job does.
    #[cfg_attr(windows, allow(dead_code))]
    tied: bool,
}

impl Default for ShellRunner {
    fn default() -> Self {
        ShellRunner::new()
    }
}

impl ShellRunner {
    /// Uses `bash` (on Unix from `PATH`, else `sh`; on Windows Git for Windows' bash, see
    /// `program`).
    pub(crate) fn new() -> ShellRunner {
        ShellRunner::with_shell(program::default_shell())
    }

    /// Uses the given shell; it is called as `SHELL -c COMMAND`.
    pub(crate) fn with_shell(shell: impl Into<PathBuf>) -> ShellRunner {
        ShellRunner {
            shell: shell.into(),
            dev_null: std::fs::File::open(if cfg!(windows) { "NUL" } else { "/dev/null" })
                .ok()
                .map(Arc::new),
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
    if program::find_in_path("mekara").is_some_and(|found| same(&found)) {
        return env;
    }
    match link_folder(&exe) {
        Ok(folder) => {
            let rest = std::env::var_os("PATH").unwrap_or_default();
            let folders = std::iter::once(folder).chain(std::env::split_paths(&rest));
            match std::env::join_paths(folders) {
                Ok(path) => env.push((OsString::from("PATH"), path)),
                Err(e) => tracing::debug!("shell steps get no `mekara` on `PATH`: {e}"),
            }
        }
        Err(e) => tracing::debug!(
            "shell steps get `MEKARA` but no `mekara` on `PATH`: cannot link `{}`: {e}",
            exe.display()
        ),
    }
    env
}

/// `<cache>/mekara/path/<hash of exe's path>/`, holding the link `mekara` → `exe` (on
/// Windows `mekara.exe`, a hard link, or a copy where the cache is on another volume).
fn link_folder(exe: &Path) -> std::io::Result<PathBuf> {
    use sha2::Digest as _;
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|c| !c.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("LOCALAPPDATA")
                .filter(|c| cfg!(windows) && !c.is_empty())
                .map(PathBuf::from)
        })
        .or_else(|| crate::paths::home_dir().map(|h| h.join(".cache")))
        .ok_or_else(|| std::io::Error::other("neither XDG_CACHE_HOME nor HOME is set"))?;
    let digest = sha2::Sha256::digest(exe.as_os_str().as_encoded_bytes());
    let key = super::handle::hex(&digest[..8]);
    let folder = cache.join("mekara/path").join(key);
    let link = folder.join(format!("mekara{}", std::env::consts::EXE_SUFFIX));
    if os::links_to(&link, exe) {
        return Ok(folder);
    }
    std::fs::create_dir_all(&folder)?;
    // Another process may be making the same link: make it under a name of this process's,
    // then rename it into place, which replaces whatever is there at once.
    let temporary = folder.join(format!(".mekara.{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    os::link(exe, &temporary)?;
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

/// One pipe for a step's stdout and stderr together, so the output keeps the order in which
/// it was written: the end mekara reads, and the shell's two copies of the other.
struct Output {
    reader: std::io::PipeReader,
    stdout: std::io::PipeWriter,
    stderr: std::io::PipeWriter,
}

impl ShellRunner {
    /// Spawns the step's shell in a group of its own (`os`) and waits for it.
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
        let output = std::io::pipe().and_then(|(reader, stdout)| {
            Ok(Output {
                stderr: stdout.try_clone()?,
                reader,
                stdout,
            })
        });
        match output {
            Ok(output) => self.spawn_and_watch(step, started, output, on_output, cancel),
            Err(e) => self.failed_to_start(step, started, &e),
        }
    }

    /// The failed result of a step whose shell could not be started. The folder is only
    /// looked at then, so a step does not pay for a `stat` it nearly never needs.
    fn failed_to_start(&self, step: &ShellStep, started: Instant, e: &std::io::Error) -> Ran {
        let error = if step.working_dir.is_dir()
            && cfg!(windows)
            && e.kind() == std::io::ErrorKind::NotFound
        {
            format!(
                "cannot start `{}`: it was not found; {}",
                self.shell.display(),
                program::NO_GIT_BASH_HINT
            )
        } else if step.working_dir.is_dir() {
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
        failed(started, error)
    }
}

/// The failed result of a step that did not start: `error` says why.
fn failed(started: Instant, error: String) -> Ran {
    Ran::Done(StepResult {
        success: false,
        error: Some(error),
        duration_ms: Some(millis(started.elapsed())),
        ..StepResult::default()
    })
}

/// The result of a step that ran to an end, was timed out or cancelled: `pipe_open` says
/// whether a process outside its group still held its output when it was given up on.
fn finish(
    step: &ShellStep,
    started: Instant,
    stopped: Option<&Stop>,
    pipe_open: bool,
    status: std::io::Result<std::process::ExitStatus>,
    output: Kept,
) -> Ran {
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
    let error = match (stopped, &status) {
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
            None => Some(format!("killed by signal {}", os::signal_of(*s))),
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
enum Stop {
    Cancelled,
    TimedOut,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}
