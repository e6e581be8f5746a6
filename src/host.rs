//! Who and where mekara runs: the host and user names that runs in a shared store, queue
//! workers and exported traces are labelled with, read in one place so they agree.

/// This host's name: `MEKARA_HOST`, else the system's.
pub(crate) fn this_host() -> String {
    std::env::var("MEKARA_HOST")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| whoami::hostname().ok())
        .unwrap_or_else(|| "unknown".to_string())
}

/// This user's name: `USER`, else the system's.
pub(crate) fn this_user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| whoami::username().ok())
        .unwrap_or_else(|| "unknown".to_string())
}
