//! [`McpClient`]: the MCP client of one run or session, and its own runtime, on which every
//! call runs while the calling thread waits, watching the step's cancel token.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value as Json};

use super::answers::{ServerListing, ToolOutput};
use super::config::Secrets;
use super::error::ClientError;
use super::pool::Inner;
use crate::engine::compiled::unfit;
use crate::engine::runner::Ran;
use crate::engine::step::StepResult;
use crate::engine::step::{Kept, oversize};
use crate::engine::{CancelToken, ToolCall};

/// The MCP client of one run or session: servers and policy are read on first use, each
/// server is connected on its first call and the connection reused after.
pub struct McpClient {
    inner: Arc<Inner>,
    runtime: OnceLock<Result<tokio::runtime::Runtime, String>>,
}

impl Drop for McpClient {
    fn drop(&mut self) {
        // Dropping a runtime blocks, which tokio forbids inside another runtime (where
        // `mekara mcp` may drop its session): let it wind down on its own.
        if let Some(Ok(runtime)) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl McpClient {
    /// A client for the project at `root` (its `.mcp.json` and `.mekara/config.toml`; the
    /// folder stdio servers start in) and the user at `home` (`~/.claude.json`).
    pub fn new(root: Option<&Path>, home: Option<&Path>) -> McpClient {
        McpClient::with_trust(root, home, false)
    }

    /// The client for `root` and `home` ([`McpClient::new`]) that contacts the servers of the
    /// project's `.mcp.json` whether or not the person approved them in Claude Code, when
    /// `trusted`: the person said so on the command line.
    pub fn with_trust(root: Option<&Path>, home: Option<&Path>, trusted: bool) -> McpClient {
        McpClient {
            inner: Arc::new(Inner {
                root: root.map(Path::to_path_buf),
                home: home.map(Path::to_path_buf),
                trusted,
                loaded: OnceLock::new(),
                slots: Mutex::new(HashMap::new()),
            }),
            runtime: OnceLock::new(),
        }
    }

    /// The client of the project around `locations`.
    pub fn for_locations(locations: &crate::paths::Locations) -> McpClient {
        McpClient::new(locations.project_root.as_deref(), locations.home.as_deref())
    }

    /// The names of the declared servers, in order.
    pub fn servers(&self) -> Result<Vec<String>, ClientError> {
        Ok(self.inner.loaded()?.servers.keys().cloned().collect())
    }

    /// The values that came from the environment, to redact text with.
    pub fn secrets(&self) -> Secrets {
        self.inner
            .loaded()
            .map(|l| l.secrets.clone())
            .unwrap_or_default()
    }

    /// Lists the tools of every server (or only `only`), contacting them in parallel.
    /// Disabled servers are listed without being contacted.
    pub fn list(&self, only: Option<&str>) -> Result<Vec<ServerListing>, ClientError> {
        let loaded = self.inner.loaded()?;
        let names: Vec<String> = match only {
            Some(name) if !loaded.servers.contains_key(name) => {
                return Err(ClientError::UnknownServer {
                    name: name.to_string(),
                    known: loaded.servers.keys().cloned().collect(),
                });
            }
            Some(name) => vec![name.to_string()],
            None => loaded.servers.keys().cloned().collect(),
        };
        let inner = self.inner.clone();
        let listings = self.block(&CancelToken::default(), async move {
            let jobs = names.into_iter().map(|name| {
                let inner = inner.clone();
                async move {
                    let tools = inner.list_one(&name).await;
                    ServerListing { name, tools }
                }
            });
            Ok(futures::future::join_all(jobs).await)
        })?;
        let secrets = &loaded.secrets;
        Ok(listings
            .into_iter()
            .map(|l| ServerListing {
                tools: l.tools.map_err(|e| redact_error(secrets, &e)),
                ..l
            })
            .collect())
    }

    /// Calls `tool` of `server` under policy: checked, validated, timed out and retried
    /// after transport failures. Values from the environment are redacted from the answer.
    pub fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Map<String, Json>,
        timeout: Option<Duration>,
        cancel: &CancelToken,
    ) -> Result<ToolOutput, ClientError> {
        let loaded = self.inner.loaded()?;
        let retries = loaded.policy.retries(server);
        let mut attempt = 0;
        loop {
            let inner = self.inner.clone();
            let (s, t, a) = (server.to_string(), tool.to_string(), arguments.clone());
            let result = self.block(
                cancel,
                async move { inner.call_once(&s, &t, a, timeout).await },
            );
            match result {
                Err(e) if e.is_retryable() && attempt < retries => {
                    attempt += 1;
                    tracing::info!(
                        "retrying `{server}/{tool}` ({attempt} of {retries}) after: {}",
                        loaded.secrets.redact(&e.to_string())
                    );
                }
                Err(e) => return Err(redact_error(&loaded.secrets, &e)),
                Ok(mut output) => {
                    output.text = loaded.secrets.redact(&output.text);
                    if let Some(s) = output.structured.as_mut() {
                        loaded.secrets.redact_json(s);
                    }
                    return Ok(output);
                }
            }
        }
    }

    /// A call as the result of an mcp step.
    pub fn step(&self, call: &ToolCall, cancel: &CancelToken) -> Ran {
        let started = Instant::now();
        let result = self.call(
            &call.server,
            &call.tool,
            call.arguments.clone(),
            call.timeout,
            cancel,
        );
        let duration_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
        Ran::Done(match result {
            Err(ClientError::Cancelled) => return Ran::Cancelled,
            Err(e) => StepResult {
                success: false,
                error: Some(e.to_string()),
                duration_ms,
                ..StepResult::default()
            },
            Ok(output) if let Some(refused) = refusal(call, output.structured.as_ref()) => {
                StepResult {
                    success: false,
                    error: Some(refused),
                    output: Kept::text(&output.text),
                    duration_ms,
                    ..StepResult::default()
                }
            }
            Ok(output) => StepResult {
                success: !output.is_error,
                error: output.is_error.then(|| {
                    let first = output.text.lines().next().unwrap_or("").trim();
                    if first.is_empty() {
                        "the tool reported an error".to_string()
                    } else {
                        format!("the tool reported an error: {first}")
                    }
                }),
                output: Kept::text(&output.text),
                structured: output.structured,
                is_error: output.is_error,
                duration_ms,
                ..StepResult::default()
            },
        })
    }

    /// Runs `job` on the client's runtime and waits for it, giving up when `cancel` is set.
    fn block<T: Send + 'static>(
        &self,
        cancel: &CancelToken,
        job: impl Future<Output = Result<T, ClientError>> + Send + 'static,
    ) -> Result<T, ClientError> {
        let runtime = self
            .runtime
            .get_or_init(|| {
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(1)
                    .thread_name("mekara-mcp-client")
                    .enable_all()
                    .build()
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| ClientError::Transport {
                server: "(all)".into(),
                reason: format!("cannot start the MCP client's runtime: {e}"),
            })?;
        let (tx, rx) = std::sync::mpsc::channel();
        let task = runtime.spawn(async move {
            let _ = tx.send(job.await);
        });
        loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(result) => return result,
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    if cancel.is_cancelled() {
                        task.abort();
                        return Err(ClientError::Cancelled);
                    }
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    return Err(ClientError::Transport {
                        server: "(all)".into(),
                        reason: "the MCP client's task ended without an answer".into(),
                    });
                }
            }
        }
    }
}

fn redact_error(secrets: &Secrets, e: &ClientError) -> ClientError {
    match e {
        ClientError::Start { server, reason } => ClientError::Start {
            server: server.clone(),
            reason: secrets.redact(reason),
        },
        ClientError::Transport { server, reason } => ClientError::Transport {
            server: server.clone(),
            reason: secrets.redact(reason),
        },
        ClientError::Unreachable { server, reason } => ClientError::Unreachable {
            server: server.clone(),
            reason: secrets.redact(reason),
        },
        ClientError::OutcomeUnknown {
            server,
            tool,
            reason,
        } => ClientError::OutcomeUnknown {
            server: server.clone(),
            tool: tool.clone(),
            reason: secrets.redact(reason),
        },
        ClientError::Rejected {
            server,
            what,
            message,
        } => ClientError::Rejected {
            server: server.clone(),
            what: what.clone(),
            message: secrets.redact(message),
        },
        ClientError::Invalid {
            server,
            tool,
            reason,
        } => ClientError::Invalid {
            server: server.clone(),
            tool: tool.clone(),
            reason: secrets.redact(reason),
        },
        other => other.clone(),
    }
}

/// Why a tool's structured content cannot be given to a script, if it cannot: a number
/// no script can hold, nesting too deep, or more than a step keeps. It is not kept then.
fn refusal(call: &ToolCall, structured: Option<&Json>) -> Option<String> {
    let structured = structured?;
    let what = format!("the structured content of `{}/{}`", call.server, call.tool);
    unfit(structured)
        .map(|found| found.describe(&what))
        .or_else(|| oversize(structured, &what))
}
