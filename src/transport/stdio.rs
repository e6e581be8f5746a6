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
    AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, AsyncWriteExt as _, BufReader, Stdin,
    Stdout,
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
    input: LineReader<Stdin>,
    output: Arc<Mutex<Stdout>>,
    /// Whether `initialize` has come: before it, rmcp takes a request as one of the
    /// session-less protocol and answers with an error about its missing `_meta`.
    initialized: bool,
}

impl Stdio {
    /// The process's stdin and stdout.
    pub(crate) fn new() -> Stdio {
        Stdio {
            input: LineReader::new(tokio::io::stdin(), MAX_LINE),
            output: Arc::new(Mutex::new(tokio::io::stdout())),
            initialized: false,
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

    /// Cancel-safe, as rmcp needs (it polls `receive` in a `select!`): see
    /// [`LineReader::next`].
    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        loop {
            match self.input.next().await? {
                Ok(message) if self.initialized => return Some(message),
                Ok(message) => {
                    let value = serde_json::to_value(&message).unwrap_or_default();
                    if super::needs_initialize(&value) {
                        self.answer(super::initialize_first(
                            Some(&value),
                            "came before `initialize`; send `initialize` first, then \
                             `notifications/initialized`, then other requests",
                        ));
                        continue;
                    }
                    self.initialized = value.get("method") == Some(&json!("initialize"));
                    return Some(message);
                }
                Err(answer) => self.answer(answer),
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.output.lock().await.flush().await
    }
}

/// Newline-delimited JSON-RPC messages read from `R`, with lines over a bound refused.
struct LineReader<R> {
    input: BufReader<R>,
    /// The longest line read.
    max: usize,
    /// The line being read.
    line: Vec<u8>,
    /// Whether the rest of an overlong line is being skipped.
    skipping: bool,
}

impl<R: AsyncRead + Unpin> LineReader<R> {
    fn new(input: R, max: usize) -> LineReader<R> {
        LineReader {
            input: BufReader::new(input),
            max,
            line: Vec::new(),
            skipping: false,
        }
    }

    /// The next message (`Ok`), or the error response a bad line deserves (`Err`); `None`
    /// at the end of the input. Cancel-safe: a partly read line stays in `self.line` and
    /// the next call goes on with it.
    async fn next(&mut self) -> Option<Result<ClientJsonRpcMessage, Json>> {
        loop {
            let room = if self.skipping {
                1 << 20
            } else {
                self.max + 1 - self.line.len()
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
                if std::mem::take(&mut self.skipping) {
                    // The input ended inside an overlong line: it still gets its answer.
                    return Some(Err(too_long(self.max)));
                }
                return None;
            }
            let complete = at_end || self.line.ends_with(b"\n");
            if self.skipping {
                self.line.clear();
                if complete {
                    self.skipping = false;
                    tracing::info!("stdin: a line over {} bytes was dropped", self.max);
                    return Some(Err(too_long(self.max)));
                }
                continue;
            }
            if !complete {
                if self.line.len() > self.max {
                    self.skipping = true;
                    self.line.clear();
                }
                continue;
            }
            let line = std::mem::take(&mut self.line);
            let content = line.strip_suffix(b"\n").unwrap_or(&line);
            if content.len() > self.max {
                // The last line of the input, without a newline, one byte over.
                return Some(Err(too_long(self.max)));
            }
            let text = String::from_utf8_lossy(content);
            let text = text.trim();
            if text.is_empty() {
                continue;
            }
            match read_message(text) {
                Ok(message) => return Some(Ok(message)),
                Err(Some(answer)) => return Some(Err(answer)),
                Err(None) => {}
            }
        }
    }
}

/// The message on `line`, or the error response it deserves (`None`: it deserves none,
/// like a malformed notification or response).
fn read_message(line: &str) -> Result<ClientJsonRpcMessage, Option<Json>> {
    let parsed = serde_json::from_str::<ClientJsonRpcMessage>(line);
    let error = match parsed {
        Ok(message) => {
            if matches!(message, ClientJsonRpcMessage::Request(_))
                && tracing::enabled!(tracing::Level::DEBUG)
            {
                super::log_request(serde_json::from_str(line).ok().as_ref(), None);
            }
            return Ok(message);
        }
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

fn too_long(max: usize) -> Json {
    error_response(
        Json::Null,
        -32600,
        format!("Invalid Request: the message is longer than {max} bytes"),
    )
}

fn error_response(id: Json, code: i32, message: String) -> Json {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

#[cfg(test)]
mod tests {
    //! A bounded fuzz of the line reader: whatever bytes come in, it never panics, answers
    //! every line that is not a message with a JSON-RPC error, and refuses lines over its
    //! bound.

    use super::*;
    use proptest::prelude::*;

    /// The bound used here: small, so that generated lines cross it often.
    const MAX: usize = 64;

    /// Everything the reader makes of `input`, with lines bounded by `max`.
    fn read_all(input: &[u8], max: usize) -> Vec<Result<ClientJsonRpcMessage, Json>> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let mut reader = LineReader::new(input, max);
            let mut out = Vec::new();
            while let Some(read) = reader.next().await {
                out.push(read);
            }
            out
        })
    }

    /// Lines that look like JSON-RPC more often than random bytes would.
    fn line() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..200),
            "[ -~]{0,100}".prop_map(String::into_bytes),
            Just(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.to_vec()),
            Just(br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_vec()),
            Just(br#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#.to_vec()),
            Just(br#"{"jsonrpc":"1.0","id":{},"method":7}"#.to_vec()),
            "\\{\"jsonrpc\":\"2.0\",\"id\":[0-9]{1,3},\"method\":\"[a-z/]{0,12}\"\\}"
                .prop_map(String::into_bytes),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn any_input_is_read_without_a_panic_and_every_answer_is_a_json_rpc_error(
            lines in proptest::collection::vec(line(), 0..12),
            newline_at_end in any::<bool>(),
        ) {
            let mut input = lines.join(&b'\n');
            if newline_at_end {
                input.push(b'\n');
            }
            let read = read_all(&input, MAX);
            let non_empty = input
                .split(|&b| b == b'\n')
                .filter(|l| !String::from_utf8_lossy(l).trim().is_empty())
                .count();
            prop_assert!(read.len() <= non_empty, "{} results from {non_empty} lines", read.len());
            for result in &read {
                if let Err(answer) = result {
                    prop_assert_eq!(&answer["jsonrpc"], "2.0");
                    prop_assert!(answer["error"]["code"].is_i64(), "{}", answer);
                    prop_assert!(answer["error"]["message"].is_string(), "{}", answer);
                }
            }
        }

        #[test]
        fn a_line_over_the_bound_is_refused_and_the_next_one_read(
            extra in 1usize..300,
            fill in any::<u8>().prop_filter("not a newline", |b| *b != b'\n'),
            newline_at_end in any::<bool>(),
        ) {
            let mut input = vec![fill; MAX + extra];
            input.push(b'\n');
            input.extend_from_slice(br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#);
            if newline_at_end {
                input.push(b'\n');
            }
            let read = read_all(&input, MAX);
            prop_assert_eq!(read.len(), 2, "{:?}", read);
            match &read[0] {
                Err(answer) => prop_assert!(
                    answer["error"]["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("longer than 64 bytes")),
                    "{}",
                    answer
                ),
                Ok(message) => prop_assert!(false, "an overlong line was read: {:?}", message),
            }
            prop_assert!(read[1].is_ok(), "{:?}", read[1]);
        }
    }

    #[test]
    fn a_last_line_one_byte_over_the_bound_without_a_newline_is_refused() {
        let read = read_all(&[b'x'; MAX + 1], MAX);
        assert_eq!(read.len(), 1);
        assert!(read[0].is_err(), "{:?}", read[0]);
        let read = read_all(&[b' '; MAX], MAX);
        assert!(read.is_empty(), "{read:?}");
    }
}
