//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout.
//!
//! rmcp's own stdio transport drops a line that is not JSON without a word, and answers a
//! message that is not JSON-RPC without an `id`. JSON-RPC 2.0 asks for a `-32700 Parse
//! error` and a `-32600 Invalid Request` with `"id": null` when the id cannot be read, and
//! a client that sent garbage learns more from an answer than from silence. So mekara reads
//! the lines itself and answers those, and hands everything else to rmcp.

use std::io::IsTerminal as _;
use std::sync::Arc;

use anyhow::Context as _;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::ServerInitializeError;
use rmcp::transport::Transport;
use rmcp::{RoleServer, ServerHandler, ServiceExt as _};
use serde_json::{Value as Json, json};
use tokio::io::{
    AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader, Stdin, Stdout,
};
use tokio::sync::Mutex;

/// Serves `handler` over stdin and stdout until the client goes away.
pub(crate) async fn serve_stdio(handler: impl ServerHandler) -> anyhow::Result<()> {
    let running = match handler.serve(Stdio::new()).await {
        Ok(running) => running,
        // A person who started the server in a terminal ended it with Ctrl-D, as they were
        // told they could (`cli::mcp`): not a failed handshake.
        Err(ServerInitializeError::ConnectionClosed(_)) if std::io::stdin().is_terminal() => {
            return Ok(());
        }
        Err(e) => return Err(e).context("the MCP handshake on stdio failed"),
    };
    let reason = running.waiting().await;
    tracing::info!("stdio session ended: {reason:?}");
    Ok(())
}

/// The longest message read (as rmcp's own transport): longer lines are refused.
const MAX_LINE: usize = 16 * 1024 * 1024;

/// stdin and stdout as an rmcp transport.
pub(crate) struct Stdio {
    input: BufReader<Stdin>,
    output: Arc<Mutex<Stdout>>,
    /// The line being read.
    line: Vec<u8>,
    /// Whether the rest of an overlong line is being skipped.
    skipping: bool,
}

impl Stdio {
    /// The process's stdin and stdout.
    pub(crate) fn new() -> Stdio {
        Stdio {
            input: BufReader::new(tokio::io::stdin()),
            output: Arc::new(Mutex::new(tokio::io::stdout())),
            line: Vec::new(),
            skipping: false,
        }
    }

    /// Writes an error response of the transport's own, whole, beside rmcp's messages.
    fn answer(&self, response: Json) {
        let output = self.output.clone();
        tokio::spawn(async move {
            if let Err(e) = write_line(&output, response.to_string().into_bytes()).await {
                tracing::warn!("cannot write stdout: {e}");
            }
        });
    }
}

impl Default for Stdio {
    fn default() -> Self {
        Stdio::new()
    }
}

async fn write_line(output: &Mutex<Stdout>, mut line: Vec<u8>) -> std::io::Result<()> {
    line.push(b'\n');
    let mut out = output.lock().await;
    out.write_all(&line).await?;
    out.flush().await
}

impl Transport<RoleServer> for Stdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = self.output.clone();
        async move {
            let line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            write_line(&output, line).await
        }
    }

    /// Cancel-safe, as rmcp needs (it polls `receive` in a `select!`): a partly read line
    /// stays in `self.line` and the next call goes on with it.
    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            let room = if self.skipping {
                1 << 20
            } else {
                MAX_LINE + 1 - self.line.len()
            };
            let read = (&mut self.input)
                .take(room as u64)
                .read_until(b'\n', &mut self.line)
                .await;
            let at_end = match read {
                Ok(n) => n == 0,
                Err(e) => {
                    tracing::warn!("cannot read stdin: {e}");
                    return None;
                }
            };
            if at_end && self.line.is_empty() {
                return None;
            }
            let complete = at_end || self.line.ends_with(b"\n");
            if self.skipping {
                self.line.clear();
                if complete {
                    self.skipping = false;
                    tracing::info!("stdin: a line over {MAX_LINE} bytes was dropped");
                    self.answer(error_response(
                        Json::Null,
                        -32600,
                        format!("Invalid Request: the message is longer than {MAX_LINE} bytes"),
                    ));
                }
                continue;
            }
            if !complete {
                if self.line.len() > MAX_LINE {
                    self.skipping = true;
                    self.line.clear();
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let text = String::from_utf8_lossy(&line);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            match read_message(text) {
                Ok(message) => return Some(message),
                Err(Some(answer)) => self.answer(answer),
                Err(None) => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.output.lock().await.flush().await
    }
}

/// The message on `line`, or the error response it deserves (`None`: it deserves none,
/// like a malformed notification or response).
fn read_message(line: &str) -> Result<ClientJsonRpcMessage, Option<Json>> {
    let parsed = serde_json::from_str::<ClientJsonRpcMessage>(line);
    let error = match parsed {
        Ok(message) => return Ok(message),
        Err(error) => error,
    };
    let value: Json = match serde_json::from_str(line) {
        Ok(value) => value,
        Err(e) => {
            tracing::info!("stdin: a line that is not JSON: {e}");
            return Err(Some(error_response(
                Json::Null,
                -32700,
                format!("Parse error: the line is not JSON ({e})"),
            )));
        }
    };
    let id = value
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let is_request = value.get("method").is_some_and(Json::is_string) && id.is_some();
    let is_notification_or_response = value.get("id").is_none()
        && value.get("method").is_some_and(Json::is_string)
        || value.get("result").is_some()
        || value.get("error").is_some();
    if is_notification_or_response && !is_request {
        tracing::info!("stdin: a malformed notification or response was dropped: {error}");
        return Err(None);
    }
    tracing::info!("stdin: not a JSON-RPC request: {error}");
    let what = match &value {
        Json::Array(_) => "a batch; MCP takes one message per line".to_string(),
        Json::Object(_) if value.get("jsonrpc") != Some(&json!("2.0")) => {
            "`jsonrpc` must be \"2.0\"".to_string()
        }
        Json::Object(_) => error.to_string(),
        _ => "a JSON-RPC message is an object".to_string(),
    };
    Err(Some(error_response(
        id.unwrap_or(Json::Null),
        -32600,
        format!("Invalid Request: {what}"),
    )))
}

fn error_response(id: Json, code: i32, message: String) -> Json {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}
