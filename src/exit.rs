//! The one map from outcomes to process exit codes.

use std::process::ExitCode;

/// How a `mekara` command ended, as a process exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Everything asked for was done.
    Success,
    /// The workflow or the input failed: a step failed and fell back, a script has errors,
    /// an answer was missing.
    Failure,
    /// The command line was wrong, or mekara itself failed.
    Usage,
    /// Interrupted by Ctrl-C; the run can be resumed.
    Interrupted,
    /// Whoever read the output went away (`mekara runs | head`); a run stopped this way
    /// can be resumed. 141 is how a shell reports a process ended by `SIGPIPE`.
    OutputClosed,
}

impl Exit {
    /// The numeric code for this outcome.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Failure => 1,
            Exit::Usage => 2,
            Exit::Interrupted => 130,
            Exit::OutputClosed => 141,
        }
    }
}

/// The signals that interrupt a run as Ctrl-C does ([`Exit::Interrupted`]): SIGINT, SIGTERM
/// (a CI job cancelled) and SIGHUP (its terminal closed). Each stops the running step's
/// process group and leaves the run resumable; left to their default, the last two ended
/// mekara and left that group (one of its own, which neither reaches) running on.
#[cfg(unix)]
pub(crate) const INTERRUPTING_SIGNALS: [std::ffi::c_int; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGHUP,
];

/// On Windows the C runtime turns the console's Ctrl-C into SIGINT and its Ctrl-Break into
/// SIGBREAK (21, which `signal_hook` does not name); SIGTERM is what `raise` sends.
#[cfg(windows)]
pub(crate) const INTERRUPTING_SIGNALS: [std::ffi::c_int; 3] = [
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGTERM,
    21,
];

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}
