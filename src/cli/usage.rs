//! What every command says of a command line it cannot take: the usage error (exit 2),
//! and the checks clap cannot make that several commands share.

/// A command line that asks for something impossible (the checks clap cannot make).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct UsageError(String);

/// Fails the command as a usage error (exit 2) with `message`.
pub(crate) fn usage<T>(message: impl Into<String>) -> anyhow::Result<T> {
    Err(UsageError(message.into()).into())
}

/// A timeout flag in seconds (`--timeout` of `run`, `mcp` and `serve`, `--agent-timeout`),
/// checked.
pub(crate) fn timeout_arg(flag: &str, secs: f64) -> anyhow::Result<std::time::Duration> {
    crate::engine::runner::timeout_from_secs(secs).map_or_else(
        || {
            usage(format!(
                "`{flag}` must be {}",
                crate::engine::runner::TIMEOUT_RULE
            ))
        },
        Ok,
    )
}
