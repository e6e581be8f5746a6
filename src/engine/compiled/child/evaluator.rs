//! Which binary evaluates scripts in child processes ([`evaluator`]), and the hidden
//! subcommand it runs ([`SUBCOMMAND`]).

use std::path::PathBuf;

/// The hidden subcommand the child runs.
pub(crate) const SUBCOMMAND: &str = "__evaluate";

/// The `mekara` binary that evaluates scripts in child processes: the one that runs now.
/// `None` (scripts are then evaluated in this process) when `MEKARA_EVALUATE_IN_PROCESS` is
/// set (a little faster, but a script past the memory cap then stops mekara), or, with a
/// warning, when the binary cannot be found.
///
/// On Linux it is reached through a descriptor this process keeps open (`/proc/self/fd/N`):
/// that is this binary even once an upgrade replaced the file at its path (a long-lived
/// `mekara mcp` must not start a newer mekara that speaks otherwise), and, unlike
/// `/proc/self/exe`, also under valgrind or an emulator, whose own binary that is.
pub(crate) fn evaluator() -> Option<PathBuf> {
    static OWN: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    if std::env::var_os("MEKARA_EVALUATE_IN_PROCESS").is_some_and(|v| !v.is_empty()) {
        return None;
    }
    OWN.get_or_init(|| {
        let exe = std::env::current_exe()
            .inspect_err(|e| {
                tracing::warn!(
                    "cannot find mekara's own binary ({e}): scripts are evaluated in this process"
                );
            })
            .ok()?;
        #[cfg(target_os = "linux")]
        if let Ok(file) = std::fs::File::open(&exe) {
            // Kept open for the life of the process (it is closed on exec).
            let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
            let kept = PathBuf::from(format!("/proc/self/fd/{fd}"));
            if kept.exists() {
                return Some(kept);
            }
        }
        Some(exe)
    })
    .clone()
}
