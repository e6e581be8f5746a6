//! [`CtrlC`]: Ctrl-C in `mekara run`, which stops the running step or leaves a prompt; and
//! SIGTERM (a CI job cancelled) and SIGHUP (its terminal closed), which do the same; on
//! Windows the console's Ctrl-C and Ctrl-Break. [`read_stdin`] reads the person's answers
//! while watching for it, as each OS family allows.

use std::time::Instant;

use crate::engine::Executor;
use crate::exit::Exit;

#[cfg(unix)]
#[path = "ctrl_c/unix.rs"]
mod os;
#[cfg(windows)]
#[path = "ctrl_c/windows.rs"]
mod os;

pub(super) use os::read_stdin;

/// Ctrl-C, handled without a thread of its own: a sleeping thread in mekara was enough to
/// make the kernel start more of the steps' shells on the other CPU, where they start cold
/// (see `docs/design.md`).
///
/// The signal sets the executor's cancel flag, which stops a running step (its `poll` wakes
/// on the signal), or the next one before it starts; and it wakes a prompt ([`read_stdin`]),
/// so that Ctrl-C while the person is typing leaves at once (the journal is synced whenever
/// mekara waits for input). A second Ctrl-C before the first was acted on (say, during a
/// long evaluation between steps) leaves at once, exit code 130.
///
/// SIGTERM and SIGHUP do the same (see [`STOPPING_SIGNALS`](crate::exit::INTERRUPTING_SIGNALS)).
pub(super) struct CtrlC {
    /// Tells a prompt that Ctrl-C was pressed.
    pressed: os::Pressed,
}

/// What reading stdin came to.
pub(super) enum Stdin {
    /// Some bytes were read (into the buffer given).
    Read,
    /// stdin ended.
    Ended,
    /// Ctrl-C was pressed.
    Interrupted,
    /// The deadline passed first.
    TimedOut,
}

impl CtrlC {
    /// `None` (and a warning) when the handler cannot be installed: Ctrl-C then ends mekara
    /// the default way, and the run still resumes.
    pub(super) fn install(executor: &Executor) -> Option<CtrlC> {
        let installed = (|| -> std::io::Result<CtrlC> {
            let flag = executor.cancel_token().flag();
            let pressed = os::Pressed::new(&flag)?;
            for signal in crate::exit::INTERRUPTING_SIGNALS {
                // The order matters: the shutdown checks the flag before this press sets it.
                signal_hook::flag::register_conditional_shutdown(
                    signal,
                    Exit::Interrupted.code().into(),
                    flag.clone(),
                )?;
                signal_hook::flag::register(signal, flag.clone())?;
                pressed.register(signal)?;
            }
            Ok(CtrlC { pressed })
        })();
        installed
            .map_err(|e| tracing::warn!("cannot handle Ctrl-C: {e}"))
            .ok()
    }
}

/// The time left until a prompt's deadline.
enum Left {
    /// It has none.
    Forever,
    /// This much.
    For(std::time::Duration),
    /// It passed.
    Passed,
}

fn left(deadline: Option<Instant>) -> Left {
    match deadline {
        None => Left::Forever,
        Some(deadline) => match deadline.saturating_duration_since(Instant::now()) {
            left if left.is_zero() => Left::Passed,
            left => Left::For(left),
        },
    }
}
