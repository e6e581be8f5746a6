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

/// A number of seconds as the command line gave it (`--timeout`, `--agent-timeout`): the
/// number, and the text it was read from, which the error that refuses it quotes (`1e400`
/// reads as infinity, and "`inf`" would not be what the person typed).
#[derive(Debug, Clone)]
pub(crate) struct Seconds {
    secs: f64,
    given: String,
}

impl std::str::FromStr for Seconds {
    type Err = std::num::ParseFloatError;

    fn from_str(given: &str) -> Result<Seconds, Self::Err> {
        Ok(Seconds {
            secs: given.parse()?,
            given: given.to_string(),
        })
    }
}

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.given)
    }
}

/// A timeout flag in seconds (`--timeout` of `run`, `mcp` and `serve`, `--agent-timeout`),
/// checked.
pub(crate) fn timeout_arg(flag: &str, seconds: &Seconds) -> anyhow::Result<std::time::Duration> {
    crate::engine::runner::timeout_from_secs(seconds.secs).map_or_else(
        || {
            usage(format!(
                "`{flag}` must be {}, not `{}`",
                crate::engine::runner::TIMEOUT_RULE,
                seconds.given
            ))
        },
        Ok,
    )
}
