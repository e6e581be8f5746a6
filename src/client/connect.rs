//! Opening a connection to a server: a stdio server started as a child process, or a
//! Streamable HTTP session, each with its MCP handshake under the server's timeout.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::ServiceExt as _;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::auth::auth_error;
use super::config::{ServerConfig, Transport};
use super::error::ClientError;
use super::http;
use super::policy::Policy;
use super::pool::{Conn, Handler, Inner};

impl Inner {
    pub(super) async fn connect(
        &self,
        config: &ServerConfig,
        policy: &Policy,
    ) -> Result<Conn, ClientError> {
        let name = &config.name;
        let timeout = policy.timeout(name);
        let stale = Arc::new(AtomicBool::new(false));
        let handler = Handler {
            stale: stale.clone(),
        };
        let start_failed = |reason: String| ClientError::Start {
            server: name.clone(),
            reason,
        };
        let handshake_timeout = || ClientError::Timeout {
            server: name.clone(),
            what: "the MCP handshake".into(),
            after: timeout,
        };
        match &config.transport {
            Transport::Stdio { command, args, env } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).envs(env).kill_on_drop(true);
                if let Some(root) = &self.root {
                    cmd.current_dir(root);
                }
                let spawned = super::stdio::spawn(cmd, name)
                    .map_err(|e| start_failed(format!("cannot run `{command}`: {e}")))?;
                let (transport, stderr) = ((spawned.read, spawned.write), spawned.stderr);
                let tail = Arc::new(Mutex::new(Vec::<String>::new()));
                let reader = stderr.map(|stderr| {
                    let tail = tail.clone();
                    let server = name.clone();
                    tokio::spawn(read_stderr(server, stderr, tail))
                });
                match tokio::time::timeout(timeout, handler.serve(transport)).await {
                    Ok(Ok(service)) => Ok(Conn {
                        service,
                        stale,
                        tools: tokio::sync::Mutex::new(None),
                        auth: None,
                    }),
                    Ok(Err(e)) => {
                        // The process is gone or going: give its last words a moment.
                        if let Some(reader) = reader {
                            let _ = tokio::time::timeout(Duration::from_millis(500), reader).await;
                        }
                        let said = tail.lock().map(|t| t.join("\n")).unwrap_or_default();
                        let reason = if said.trim().is_empty() {
                            format!("the MCP handshake failed: {e}")
                        } else {
                            format!(
                                "the MCP handshake failed: {e}; its stderr ends with:\n{}",
                                said.trim_end()
                            )
                        };
                        Err(start_failed(reason))
                    }
                    Err(_) => Err(handshake_timeout()),
                }
            }
            Transport::Http { url, headers } => {
                let mut sent = Vec::new();
                for h in headers {
                    let header_name = ::http::HeaderName::from_bytes(h.name.as_bytes())
                        .map_err(|e| start_failed(format!("header `{}`: {e}", h.name)))?;
                    let value = ::http::HeaderValue::from_str(&h.value).map_err(|e| {
                        start_failed(format!("the value of header `{}`: {e}", h.name))
                    })?;
                    sent.push((header_name, value));
                }
                let auth = http::AuthFailure::default();
                let ca_file = policy.ca_file(name).map(|f| match &self.root {
                    Some(root) => root.join(f),
                    None => f,
                });
                let client = http::HyperClient::new(
                    sent,
                    auth.clone(),
                    url.starts_with("https://"),
                    ca_file.as_deref(),
                )
                .map_err(start_failed)?;
                let transport = StreamableHttpClientTransport::with_client(
                    client,
                    StreamableHttpClientTransportConfig::with_uri(url.as_str()),
                );
                match tokio::time::timeout(timeout, handler.serve(transport)).await {
                    Ok(Ok(service)) => Ok(Conn {
                        service,
                        stale,
                        tools: tokio::sync::Mutex::new(None),
                        auth: Some((auth, headers.clone())),
                    }),
                    Ok(Err(e)) => Err(auth_error(name, &auth, headers).unwrap_or_else(|| {
                        ClientError::Unreachable {
                            server: name.clone(),
                            reason: format!(
                                "cannot open an MCP session at `{url}`: {}",
                                http::explain(&e)
                            ),
                        }
                    })),
                    Err(_) => Err(handshake_timeout()),
                }
            }
        }
    }
}

/// Keeps the last lines a stdio server wrote to stderr (for start-up errors) and passes
/// them to the log.
async fn read_stderr(
    server: String,
    stderr: tokio::process::ChildStderr,
    tail: Arc<Mutex<Vec<String>>>,
) {
    use tokio::io::AsyncBufReadExt as _;
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        tracing::debug!(target: "mekara::client", "{server} stderr: {line}");
        if let Ok(mut tail) = tail.lock() {
            tail.push(line);
            if tail.len() > 20 {
                tail.remove(0);
            }
        }
    }
}
