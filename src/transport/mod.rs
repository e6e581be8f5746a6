//! What `mekara mcp` ([`crate::mcp`]) and `mekara serve` ([`crate::serve`]) share below
//! their rmcp handlers:
//!
//! - [`stdio`]: newline-delimited JSON-RPC on stdin and stdout, answering malformed lines;
//! - [`http`]: Streamable HTTP at `/mcp`, with the loopback `Host` and `Origin` checks and
//!   bounds on what clients can make it hold;
//! - this file: the protocol errors both handlers give for requests they cannot take (and
//!   for a request before `initialize`), and the debug line each logs for a request (its
//!   method and protocol version).
//!
//! It knows nothing of scripts, runs or served functions: a handler is any
//! [`rmcp::ServerHandler`].

pub(crate) mod http;
pub(crate) mod stdio;

use rmcp::ErrorData as McpError;
use rmcp::model::{CallToolRequestParams, CustomRequest, GetPromptRequestParams};

pub(crate) use http::{HttpLimits, HttpOptions, serve_http};
pub(crate) use stdio::serve_stdio;

/// The debug log line for a message a client sent: its method and the protocol version it
/// speaks, which tells which MCP version a client chose (`header` is HTTP's
/// `MCP-Protocol-Version`): the header's, else the one in the message's `_meta`
/// (`2026-07-28` and later). An `initialize` says the version it asks for instead (the
/// answer may be an older one: rmcp answers `2026-07-28` with `2025-11-25`).
pub(crate) fn log_request(message: Option<&serde_json::Value>, header: Option<&str>) {
    if !tracing::enabled!(tracing::Level::DEBUG) {
        return;
    }
    let method = message
        .and_then(|m| m.get("method"))
        .and_then(serde_json::Value::as_str);
    let version = |pointer: &str| {
        message
            .and_then(|m| m.pointer(pointer))
            .and_then(serde_json::Value::as_str)
    };
    let named =
        header.or_else(|| version("/params/_meta/io.modelcontextprotocol~1protocolVersion"));
    let shown = method.map(|m| format!(" `{m}`")).unwrap_or_default();
    match (method, named) {
        (Some("initialize"), _) => tracing::debug!(
            "request{shown}, asking for protocol `{}`",
            version("/params/protocolVersion").unwrap_or("?")
        ),
        (_, Some(named)) => tracing::debug!("request{shown}, protocol `{named}`"),
        (_, None) => {
            tracing::debug!("request{shown}, protocol not named (the one `initialize` agreed on)");
        }
    }
}

/// Methods of the protocol that rmcp would pass on as custom requests only when their
/// params are malformed.
const KNOWN_METHODS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
];

/// The error for a request rmcp handed over as a custom request, which it does for any
/// request it could not read, including a known method whose params do not fit: that one is
/// `-32602 Invalid params`, saying what does not fit, not "method not found".
pub(crate) fn refuse_custom_request(request: &CustomRequest) -> McpError {
    let method = request.method.as_str();
    if method.trim().is_empty() {
        // "method `` not found" would read as a server that lost a name.
        return McpError::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            "the request's `method` is empty; name the method to call, such as `tools/list` \
             or `tools/call`",
            None,
        );
    }
    if !KNOWN_METHODS.contains(&method) {
        return McpError::new(
            rmcp::model::ErrorCode::METHOD_NOT_FOUND,
            format!("method `{method}` not found"),
            None,
        );
    }
    let Some(params) = request.params.clone() else {
        return McpError::invalid_params(format!("`{method}` needs params"), None);
    };
    let reason = match method {
        "tools/call" => serde_json::from_value::<CallToolRequestParams>(params)
            .err()
            .map(|e| e.to_string()),
        "prompts/get" => serde_json::from_value::<GetPromptRequestParams>(params)
            .err()
            .map(|e| e.to_string()),
        _ => None,
    };
    McpError::invalid_params(
        format!(
            "invalid params for `{method}`: {}",
            reason.unwrap_or_else(|| "they do not fit the method".to_string())
        ),
        None,
    )
}

/// The error for a tool call whose blocking thread panicked.
pub(crate) fn call_panicked(error: &tokio::task::JoinError) -> McpError {
    McpError::internal_error(format!("the call panicked: {error}"), None)
}

/// Whether `message`, sent before `initialize`, is a request of a protocol version that has
/// sessions (so it needed an `initialize` first): requests of `2026-07-28` and later carry
/// their version in `_meta` and need none.
pub(crate) fn needs_initialize(message: &serde_json::Value) -> bool {
    let Some(method) = message.get("method").and_then(serde_json::Value::as_str) else {
        return false;
    };
    if message.get("id").is_none() || method == "initialize" || method == "server/discover" {
        return false;
    }
    let versioned = message
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("io.modelcontextprotocol/protocolVersion"))
        .is_some();
    !versioned
}

/// The JSON-RPC error for a request sent before `initialize` (see [`needs_initialize`]):
/// `how` says, after the method, what the transport needs first.
pub(crate) fn initialize_first(
    message: Option<&serde_json::Value>,
    how: &str,
) -> serde_json::Value {
    let id = message
        .and_then(|m| m.get("id"))
        .cloned()
        .unwrap_or(serde_json::Value::Null);
    let method = message
        .and_then(|m| m.get("method"))
        .and_then(serde_json::Value::as_str)
        .unwrap_or("?");
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32600, "message": format!("initialize first: `{method}` {how}")},
    })
}
