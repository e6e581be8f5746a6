//! The stdio transport to a server started as a child process: its stdin, and its stdout
//! with every line screened for depth before rmcp reads it.
//!
//! rmcp parses each line with serde_json, whose recursion limit (128) makes it drop a line
//! nested deeper without a word ("ignoring unparsable incoming message"): a tool answering
//! with such a value left its call to time out. Nothing nested that deep could be taken by a
//! script anyway (values stop at `MAX_DEPTH`, 100 levels), so a line deeper than
//! [`MAX_LINE_DEPTH`] is turned into a JSON-RPC error answer to the same request, which
//! fails the call at once, saying why.

use std::process::Stdio;

use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader, DuplexStream};
use tokio::process::{Child, ChildStderr, ChildStdin, Command};

/// The deepest line passed on: a tool's structured content sits 3 levels down in its
/// answer, so this lets through every value a script can take, and stays under serde_json's
/// 128.
pub(super) const MAX_LINE_DEPTH: usize = 110;

/// The spawned server: what rmcp reads (the screened stdout), what it writes, and stderr.
pub(super) struct Spawned {
    pub read: Screened,
    pub write: ChildStdin,
    pub stderr: Option<ChildStderr>,
}

/// The screened stdout of a server, which holds its process: dropping it (rmcp drops its
/// transport when the connection closes) kills the process, as `kill_on_drop` asks.
pub(super) struct Screened {
    inner: DuplexStream,
    _child: Child,
}

impl tokio::io::AsyncRead for Screened {
    fn poll_read(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

/// Starts `command` with piped stdin, stdout and stderr, and screens its stdout on a task.
pub(super) fn spawn(mut command: Command, server: &str) -> std::io::Result<Spawned> {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn()?;
    let (Some(stdout), Some(write)) = (child.stdout.take(), child.stdin.take()) else {
        return Err(std::io::Error::other("the child's pipes were not opened"));
    };
    let stderr = child.stderr.take();
    let (read, screened) = tokio::io::duplex(1 << 16);
    tokio::spawn(screen(stdout, screened, server.to_string()));
    Ok(Spawned {
        read: Screened {
            inner: read,
            _child: child,
        },
        write,
        stderr,
    })
}

/// Copies `stdout` to `out` line by line, a line nested too deep replaced by an error
/// answer to its request; ends when either side closes.
async fn screen(stdout: tokio::process::ChildStdout, mut out: DuplexStream, server: String) {
    let mut lines = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let written = match deeper_than(&line, MAX_LINE_DEPTH) {
            None => out.write_all(&line).await,
            Some(depth) => {
                let Some(answer) = refusal(&line, depth) else {
                    tracing::warn!(
                        "server `{server}` sent a message nested {depth} levels deep; it was dropped"
                    );
                    continue;
                };
                out.write_all(answer.as_bytes()).await
            }
        };
        if written.is_err() {
            return;
        }
    }
}

/// How deep `line` nests, when deeper than `limit` (brackets outside strings).
pub(super) fn deeper_than(line: &[u8], limit: usize) -> Option<usize> {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in line {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    (deepest > limit).then_some(deepest)
}

/// The JSON-RPC error answer to the request a too-deep `line` answers (its top-level `id`),
/// or `None` when it has none (a notification).
pub(super) fn refusal(line: &[u8], depth: usize) -> Option<String> {
    let id = top_level_id(line)?;
    let message = format!(
        "its answer is nested {depth} levels deep; no script can take a value nested more than 100 levels, and mekara reads none deeper than {MAX_LINE_DEPTH}"
    );
    let answer = serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message},
    });
    Some(format!("{answer}\n"))
}

/// The value of the `id` key of the object `line` holds, read without parsing the rest.
fn top_level_id(line: &[u8]) -> Option<serde_json::Value> {
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut string_start = 0;
    let mut last_key: Option<&[u8]> = None;
    for (i, &b) in line.iter().enumerate() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => {
                    in_string = false;
                    if depth == 1 {
                        last_key = Some(&line[string_start..i]);
                    }
                }
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                string_start = i + 1;
            }
            b':' if depth == 1 && last_key == Some(b"id".as_slice()) => {
                let rest = &line[i + 1..];
                let end = rest
                    .iter()
                    .position(|&c| c == b',' || c == b'}')
                    .unwrap_or(rest.len());
                return serde_json::from_slice(&rest[..end]).ok();
            }
            b'[' | b'{' => depth += 1,
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}
