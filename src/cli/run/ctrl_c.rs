//! [`CtrlC`]: Ctrl-C in `mekara run`, which stops the running step or leaves a prompt; and
//! SIGTERM (a CI job cancelled) and SIGHUP (its terminal closed), which do the same.

use std::os::unix::net::UnixStream;

use crate::engine::Executor;
use crate::exit::Exit;

/// Ctrl-C, handled without a thread of its own: a sleeping thread in mekara was enough to
/// make the kernel start more of the steps' shells on the other CPU, where they start cold
/// (see `docs/design.md`).
///
/// The signal sets the executor's cancel flag, which stops a running step (its `poll` wakes
/// on the signal), or the next one before it starts; and it writes a byte to `pressed`,
/// which wakes a prompt, so that Ctrl-C while the person is typing leaves at once (the
/// journal is synced whenever mekara waits for input). A second Ctrl-C before the first was
/// acted on (say, during a long evaluation between steps) leaves at once, exit code 130.
///
/// SIGTERM and SIGHUP do the same (see [`STOPPING_SIGNALS`](crate::exit::INTERRUPTING_SIGNALS)).
pub(super) struct CtrlC {
    /// Readable once Ctrl-C was pressed.
    pub(super) pressed: UnixStream,
}

impl CtrlC {
    /// `None` (and a warning) when the handler cannot be installed: Ctrl-C then ends mekara
    /// the default way, and the run still resumes.
    pub(super) fn install(executor: &Executor) -> Option<CtrlC> {
        let installed = (|| -> std::io::Result<CtrlC> {
            let (pressed, wake) = UnixStream::pair()?;
            pressed.set_nonblocking(true)?;
            let flag = executor.cancel_token().flag();
            for signal in crate::exit::INTERRUPTING_SIGNALS {
                // The order matters: the shutdown checks the flag before this press sets it.
                signal_hook::flag::register_conditional_shutdown(
                    signal,
                    Exit::Interrupted.code().into(),
                    flag.clone(),
                )?;
                signal_hook::flag::register(signal, flag.clone())?;
                signal_hook::low_level::pipe::register(signal, wake.try_clone()?)?;
            }
            Ok(CtrlC { pressed })
        })();
        installed
            .map_err(|e| tracing::warn!("cannot handle Ctrl-C: {e}"))
            .ok()
    }
}
