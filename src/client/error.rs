//! What can go wrong in the MCP client, with what a user needs to fix it.

use std::path::PathBuf;
use std::time::Duration;

/// An error of the MCP client. Messages never hold values that came from the environment
/// (the pool redacts them before they leave).
#[derive(Debug, Clone, thiserror::Error)]
pub enum ClientError {
    /// `.mcp.json`, `~/.claude.json` or `.mekara/config.toml` is malformed.
    #[error("`{}`: {reason}", .file.display())]
    Config {
        /// The file.
        file: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// No server of that name is declared.
    #[error("no MCP server `{name}` in `.mcp.json` or `~/.claude.json`{}", known_list(.known))]
    UnknownServer {
        /// The name asked for.
        name: String,
        /// The names that exist.
        known: Vec<String>,
    },
    /// The server has no tool of that name.
    #[error("server `{server}` has no tool `{tool}`{}", known_list(.known))]
    UnknownTool {
        /// The server.
        server: String,
        /// The tool asked for.
        tool: String,
        /// The tools it has.
        known: Vec<String>,
    },
    /// Policy refuses the call.
    #[error("{0}")]
    Refused(String),
    /// A server of the project's `.mcp.json` the person has not approved: never started.
    #[error(
        "not approved: `{server}` comes from the project's `{}`, which mekara contacts only once you approve it: in Claude Code (approve the server when it asks, or list it in `enabledMcpjsonServers` of `.claude/settings.local.json`), or with `--trust` on `mekara tools list` or `mekara tools call`",
        .file.display()
    )]
    NotApproved {
        /// The server.
        server: String,
        /// The `.mcp.json` that declares it.
        file: PathBuf,
    },
    /// The arguments do not fit the tool's input schema.
    #[error("arguments of `{server}/{tool}` do not fit its input schema: {reason}")]
    Invalid {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The first field that does not fit.
        reason: String,
    },
    /// The server could not be started or did not complete the MCP handshake.
    #[error("server `{server}` failed to start: {reason}")]
    Start {
        /// The server.
        server: String,
        /// Why, with the end of its stderr when there is one.
        reason: String,
    },
    /// An HTTP server could not be reached, or did not complete the MCP handshake.
    #[error("server `{server}`: {reason}")]
    Unreachable {
        /// The server.
        server: String,
        /// The URL, what failed, and what to do.
        reason: String,
    },
    /// An HTTP server refused the credentials.
    #[error("server `{server}` answered HTTP {status}: its credentials were refused; {sent}")]
    Unauthorized {
        /// The server.
        server: String,
        /// 401 or 403.
        status: u16,
        /// Which headers were sent, and where their values came from.
        sent: String,
    },
    /// An HTTP server asked for an OAuth token (`WWW-Authenticate: Bearer`).
    #[error(
        "server `{server}` requires OAuth (it answered HTTP {status} with `WWW-Authenticate: Bearer`), and mekara does not run the OAuth flow; {sent}"
    )]
    NeedsOAuth {
        /// The server.
        server: String,
        /// 401 or 403.
        status: u16,
        /// What was sent, and what to do.
        sent: String,
    },
    /// The server did not answer in time.
    #[error("server `{server}` did not answer {what} within {}; raise `timeout` in `[servers.{server}]` of `.mekara/config.toml` if it needs longer", humantime::format_duration(*.after))]
    Timeout {
        /// The server.
        server: String,
        /// What it was asked.
        what: String,
        /// How long mekara waited.
        after: Duration,
    },
    /// The connection broke (the server died, the network failed).
    #[error("server `{server}`: {reason}")]
    Transport {
        /// The server.
        server: String,
        /// What happened.
        reason: String,
    },
    /// A call of a tool that may write was sent, and then the connection broke or the time
    /// ran out: it may have run or not, so it is not retried.
    #[error(
        "server `{server}`: the call of `{tool}` was sent, then {reason}, so it may or may not have run; it was not retried because `{tool}` may write (it is not annotated `readOnlyHint` or `idempotentHint`) and a second call could write twice. Check whether it took effect before calling it again"
    )]
    OutcomeUnknown {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// What happened after the call was sent.
        reason: String,
    },
    /// The server answered the request with a JSON-RPC error (not a transport failure).
    #[error("server `{server}` rejected {what}: {message}")]
    Rejected {
        /// The server.
        server: String,
        /// What it was asked.
        what: String,
        /// Its error message.
        message: String,
    },
    /// The call was cancelled.
    #[error("the call was cancelled")]
    Cancelled,
}

impl ClientError {
    /// Whether trying again may help: transport failures and timeouts (a call that may
    /// have reached the server is made one of these only when repeating it is harmless) and
    /// HTTP servers that could not be reached; never a tool's own error, a refusal, bad
    /// arguments, or a call whose outcome is unknown.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            ClientError::Transport { .. }
                | ClientError::Timeout { .. }
                | ClientError::Unreachable { .. }
        )
    }
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        String::new()
    } else {
        format!("; known: `{}`", known.join("`, `"))
    }
}
