//! mekara as an MCP client (DESIGN §8): the servers of `.mcp.json`, the policy of
//! `.mekara/config.toml`, and a pool of connections that `mcp()` steps, prompt tags and
//! `mekara tools` call tools through.
//!
//! - [`config`]: which servers exist, `${VAR}` expansion, what came from the environment;
//! - [`policy`]: allow, deny, read-only, timeouts, retries;
//! - [`schema`]: arguments checked against a tool's input schema before the call;
//! - [`http`]: the Streamable HTTP transport;
//! - this file: [`McpClient`], the pool, and [`ClientRunner`], the engine's effect runner with
//!   tool calls.
//!
//! The engine never sees rmcp: it asks its [`StepRunner`] to `call_tool`, and this module
//! answers with a [`StepResult`]. The dependency points one way, client → engine.
//!
//! **Runtime.** The engine is synchronous (it runs on a blocking thread inside `mekara mcp`),
//! rmcp is async. The client owns a small tokio runtime of its own (one worker thread,
//! created on first use): connections live on it for as long as the client does, whichever
//! thread or runtime the caller is on. A sync call spawns its future there and waits on a
//! channel, checking the step's cancel token meanwhile; it never blocks inside the caller's
//! runtime, and dropping the client shuts its runtime down in the background.

pub(crate) mod config;
pub(crate) mod error;
pub(crate) mod http;
pub(crate) mod policy;
pub(crate) mod schema;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ContentBlock, Implementation, Tool,
};
use rmcp::service::{NotificationContext, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::{Map, Value as Json};

pub(crate) use config::Secrets;
pub(crate) use error::ClientError;
pub(crate) use policy::Policy;

use crate::engine::compiled::unfit;
use crate::engine::runner::{Ran, ShellStep};
use crate::engine::step::StepResult;
use crate::engine::{CancelToken, ShellRunner, StepRunner, ToolCall};
use config::{ServerConfig, Transport};

/// What a tool answered.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Its content as text: text blocks joined by newlines, other blocks described.
    pub text: String,
    /// Its structured content.
    pub structured: Option<Json>,
    /// Whether the tool said it failed.
    pub is_error: bool,
}

/// A tool as `mekara tools list` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// Its name.
    pub name: String,
    /// Its description's first line.
    pub description: String,
    /// Whether it is annotated `readOnlyHint: true`.
    pub read_only: bool,
    /// Whether policy lets scripts call it; the setting that refuses it otherwise.
    pub allowed: Result<(), String>,
}

/// One server in a listing: its tools, or why they could not be had.
#[derive(Debug, Clone)]
pub struct ServerListing {
    /// The server.
    pub name: String,
    /// Its tools.
    pub tools: Result<Vec<ToolInfo>, ClientError>,
}

/// The servers and policy of a project, read once.
struct Loaded {
    servers: BTreeMap<String, Result<ServerConfig, ClientError>>,
    policy: Policy,
    secrets: Secrets,
}

/// The client's handler: notes `notifications/tools/list_changed` so the cached tool list
/// is fetched again before the next call.
#[derive(Clone)]
struct Handler {
    stale: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mekara", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::SeqCst);
    }
}

/// An open connection.
struct Conn {
    service: RunningService<RoleClient, Handler>,
    stale: Arc<AtomicBool>,
    tools: tokio::sync::Mutex<Option<Arc<Vec<Tool>>>>,
    /// For HTTP servers: where a 401/403 is noted, and the headers sent.
    auth: Option<(http::AuthFailure, Vec<config::Header>)>,
}

type Slot = Arc<tokio::sync::Mutex<Option<Arc<Conn>>>>;

struct Inner {
    root: Option<PathBuf>,
    home: Option<PathBuf>,
    loaded: OnceLock<Result<Loaded, ClientError>>,
    slots: Mutex<HashMap<String, Slot>>,
}

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
        McpClient {
            inner: Arc::new(Inner {
                root: root.map(Path::to_path_buf),
                home: home.map(Path::to_path_buf),
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
            Ok(output) if let Some(found) = output.structured.as_ref().and_then(unfit) => {
                StepResult {
                    success: false,
                    error: Some(found.describe(&format!(
                        "the structured content of `{}/{}`",
                        call.server, call.tool
                    ))),
                    output: output.text,
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
                output: output.text,
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

impl Inner {
    fn loaded(&self) -> Result<&Loaded, ClientError> {
        self.loaded
            .get_or_init(|| {
                let decls = config::discover(self.root.as_deref(), self.home.as_deref())?;
                let policy = Policy::load(self.root.as_deref())?;
                let env = |name: &str| std::env::var(name).ok();
                let mut secrets = Secrets::default();
                let mut servers = BTreeMap::new();
                for decl in decls {
                    let resolved = decl.resolve(&env).map(|(config, s)| {
                        secrets.extend(&s);
                        config
                    });
                    servers.insert(decl.name.clone(), resolved);
                }
                Ok(Loaded {
                    servers,
                    policy,
                    secrets,
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    fn config(&self, name: &str) -> Result<(&ServerConfig, &Policy), ClientError> {
        let loaded = self.loaded()?;
        match loaded.servers.get(name) {
            None => Err(ClientError::UnknownServer {
                name: name.to_string(),
                known: loaded.servers.keys().cloned().collect(),
            }),
            Some(Err(e)) => Err(e.clone()),
            Some(Ok(config)) => {
                loaded
                    .policy
                    .check_server(name)
                    .map_err(|r| ClientError::Refused(r.0))?;
                Ok((config, &loaded.policy))
            }
        }
    }

    fn slot(&self, name: &str) -> Slot {
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slots.entry(name.to_string()).or_default().clone()
    }

    /// The open connection to `name`, opened now if there is none (or it closed).
    async fn conn(&self, name: &str) -> Result<Arc<Conn>, ClientError> {
        let (config, policy) = self.config(name)?;
        let slot = self.slot(name);
        let mut guard = slot.lock().await;
        if let Some(conn) = guard.as_ref()
            && !conn.service.is_closed()
        {
            return Ok(conn.clone());
        }
        let conn = Arc::new(self.connect(config, policy).await?);
        *guard = Some(conn.clone());
        Ok(conn)
    }

    /// Forgets the connection to `name` (it broke); the next call opens a new one.
    async fn drop_conn(&self, name: &str) {
        let slot = self.slot(name);
        let old = slot.lock().await.take();
        if let Some(conn) = old
            && let Ok(conn) = Arc::try_unwrap(conn)
        {
            let _ = conn.service.cancel().await;
        }
    }

    async fn connect(&self, config: &ServerConfig, policy: &Policy) -> Result<Conn, ClientError> {
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
                let (transport, stderr) = TokioChildProcess::builder(cmd)
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .map_err(|e| start_failed(format!("cannot run `{command}`: {e}")))?;
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

    /// The server's tools, from the cache unless the server said they changed.
    async fn tools(&self, name: &str, conn: &Conn) -> Result<Arc<Vec<Tool>>, ClientError> {
        let mut cache = conn.tools.lock().await;
        let stale = conn.stale.swap(false, Ordering::SeqCst);
        if let Some(tools) = cache.as_ref()
            && !stale
        {
            return Ok(tools.clone());
        }
        let (_, policy) = self.config(name)?;
        let timeout = policy.timeout(name);
        let listed = tokio::time::timeout(timeout, conn.service.peer().list_all_tools()).await;
        let tools = match listed {
            Err(_) => {
                return Err(ClientError::Timeout {
                    server: name.to_string(),
                    what: "`tools/list`".into(),
                    after: timeout,
                });
            }
            Ok(Err(e)) => return Err(service_error(name, "`tools/list`", e, conn)),
            Ok(Ok(tools)) => Arc::new(tools),
        };
        *cache = Some(tools.clone());
        Ok(tools)
    }

    async fn list_one(&self, name: &str) -> Result<Vec<ToolInfo>, ClientError> {
        let (_, policy) = self.config(name)?;
        let conn = self.conn(name).await?;
        let tools = match self.tools(name, &conn).await {
            Err(e) if e.is_retryable() => {
                self.drop_conn(name).await;
                let conn = self.conn(name).await?;
                self.tools(name, &conn).await?
            }
            other => other?,
        };
        Ok(tools
            .iter()
            .map(|t| {
                let read_only = read_only(t);
                ToolInfo {
                    name: t.name.to_string(),
                    description: t
                        .description
                        .as_deref()
                        .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
                        .unwrap_or("")
                        .trim()
                        .to_string(),
                    read_only,
                    allowed: policy.check_tool(name, &t.name, read_only).map_err(|r| r.1),
                }
            })
            .collect())
    }

    async fn call_once(
        &self,
        name: &str,
        tool: &str,
        arguments: Map<String, Json>,
        timeout: Option<Duration>,
    ) -> Result<ToolOutput, ClientError> {
        let (_, policy) = self.config(name)?;
        let timeout = timeout.unwrap_or_else(|| policy.timeout(name));
        let conn = self.conn(name).await?;
        let result = self.call_on(name, tool, arguments, timeout, &conn).await;
        if matches!(&result, Err(e) if e.is_retryable() || matches!(e, ClientError::OutcomeUnknown { .. }))
        {
            // The connection broke or is in an unknown state: the next call opens a new one.
            self.drop_conn(name).await;
        }
        result
    }

    async fn call_on(
        &self,
        name: &str,
        tool: &str,
        arguments: Map<String, Json>,
        timeout: Duration,
        conn: &Conn,
    ) -> Result<ToolOutput, ClientError> {
        let (_, policy) = self.config(name)?;
        let tools = self.tools(name, conn).await?;
        let Some(found) = tools.iter().find(|t| t.name == tool) else {
            let mut known: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
            known.sort();
            return Err(ClientError::UnknownTool {
                server: name.to_string(),
                tool: tool.to_string(),
                known,
            });
        };
        policy
            .check_tool(name, tool, read_only(found))
            .map_err(|r| ClientError::Refused(r.0))?;
        schema::validate(&found.input_schema, &arguments).map_err(|reason| {
            ClientError::Invalid {
                server: name.to_string(),
                tool: tool.to_string(),
                reason,
            }
        })?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let what = format!("the call of `{tool}`");
        let answer =
            match tokio::time::timeout(timeout, conn.service.peer().call_tool(params)).await {
                Err(_) => Err(ClientError::Timeout {
                    server: name.to_string(),
                    what,
                    after: timeout,
                }),
                Ok(Err(e)) => Err(service_error(name, &what, e, conn)),
                Ok(Ok(answer)) => Ok(answer),
            };
        // From here on the call may have reached the server: trying again is safe only for
        // a tool that says a second call changes nothing.
        let answer = match answer {
            Err(e) if e.is_retryable() && !repeatable(found) => {
                let reason = match &e {
                    ClientError::Timeout { after, .. } => format!(
                        "no answer came within {}",
                        humantime::format_duration(*after)
                    ),
                    ClientError::Transport { reason, .. } => reason.clone(),
                    other => other.to_string(),
                };
                return Err(ClientError::OutcomeUnknown {
                    server: name.to_string(),
                    tool: tool.to_string(),
                    reason,
                });
            }
            other => other?,
        };
        Ok(ToolOutput {
            text: content_text(&answer.content),
            structured: answer.structured_content,
            is_error: answer.is_error.unwrap_or(false),
        })
    }
}

/// Whether calling `tool` twice does no more than calling it once: it is annotated
/// read-only, or idempotent.
fn repeatable(tool: &Tool) -> bool {
    read_only(tool)
        || tool
            .annotations
            .as_ref()
            .and_then(|a| a.idempotent_hint)
            .unwrap_or(false)
}

fn read_only(tool: &Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false)
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

fn auth_error(
    server: &str,
    auth: &http::AuthFailure,
    headers: &[config::Header],
) -> Option<ClientError> {
    let refusal = auth.lock().ok()?.clone()?;
    if refusal.wants_oauth() {
        return Some(ClientError::NeedsOAuth {
            server: server.to_string(),
            status: refusal.status.as_u16(),
            sent: oauth_hint(server, headers),
        });
    }
    let status = refusal.status;
    let sent = if headers.is_empty() {
        format!(
            "no headers were sent; add `headers` (e.g. `\"Authorization\": \"Bearer ${{TOKEN}}\"`) to server `{server}` in `.mcp.json`"
        )
    } else {
        let parts: Vec<String> = headers
            .iter()
            .map(|h| {
                if h.from_vars.is_empty() {
                    format!("`{}` (a literal value, from no variable)", h.name)
                } else {
                    format!("`{}` (from `${{{}}}`)", h.name, h.from_vars.join("}`, `${"))
                }
            })
            .collect();
        format!(
            "sent header {}; check the value of that variable",
            parts.join(", ")
        )
    };
    Some(ClientError::Unauthorized {
        server: server.to_string(),
        status: status.as_u16(),
        sent,
    })
}

/// What to do about a server that wants an OAuth token, given the headers sent.
fn oauth_hint(server: &str, headers: &[config::Header]) -> String {
    let sent_auth = headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("authorization"));
    match sent_auth {
        Some(h) if !h.from_vars.is_empty() => format!(
            "the token sent in header `{}` (from `${{{}}}`) was refused; check that the variable holds a valid, unexpired access token for this server",
            h.name,
            h.from_vars.join("}`, `${")
        ),
        Some(h) => format!(
            "the token sent in header `{}` (a literal value in `.mcp.json`) was refused; put a valid access token there, preferably through a variable (`\"Bearer ${{TOKEN}}\"`)",
            h.name
        ),
        None => {
            let var: String = server
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() {
                        c.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            format!(
                "get an access token for it (from the service's settings or its OAuth flow) and pass it as a header: add `\"headers\": {{\"Authorization\": \"Bearer ${{{var}_TOKEN}}\"}}` to server `{server}` in `.mcp.json`, and set `{var}_TOKEN`"
            )
        }
    }
}

fn service_error(server: &str, what: &str, e: ServiceError, conn: &Conn) -> ClientError {
    if let Some((auth, headers)) = &conn.auth
        && let Some(error) = auth_error(server, auth, headers)
    {
        return error;
    }
    match e {
        ServiceError::McpError(data) => ClientError::Rejected {
            server: server.to_string(),
            what: what.to_string(),
            message: data.message.to_string(),
        },
        ServiceError::TransportClosed => ClientError::Transport {
            server: server.to_string(),
            reason: format!("the connection closed during {what} (the server may have exited)"),
        },
        other => ClientError::Transport {
            server: server.to_string(),
            reason: format!("{what} failed: {}", http::explain(&other)),
        },
    }
}

/// A tool's content as text: text blocks as they are, other blocks named.
fn content_text(content: &[ContentBlock]) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            other => match serde_json::to_value(other) {
                Ok(Json::Object(map)) => {
                    let kind = map.get("type").and_then(Json::as_str).unwrap_or("content");
                    let mime = map
                        .get("mimeType")
                        .and_then(Json::as_str)
                        .map(|m| format!(" {m}"))
                        .unwrap_or_default();
                    match map
                        .get("resource")
                        .and_then(|r| r.get("text"))
                        .and_then(Json::as_str)
                    {
                        Some(text) => text.to_string(),
                        None => format!("[{kind}{mime}]"),
                    }
                }
                _ => "[content]".to_string(),
            },
        })
        .collect();
    parts.join("\n")
}

/// The effect runner of runs that may call MCP tools: shell steps as [`ShellRunner`] runs
/// them, tool calls through an [`McpClient`].
pub(crate) struct ClientRunner {
    shell: ShellRunner,
    client: McpClient,
}

impl ClientRunner {
    /// Runs shell steps with `shell` and tool calls with `client`.
    pub(crate) fn new(shell: ShellRunner, client: McpClient) -> ClientRunner {
        ClientRunner { shell, client }
    }
}

impl StepRunner for ClientRunner {
    fn run_shell(
        &self,
        step: &ShellStep,
        on_output: &mut dyn FnMut(&[u8]),
        cancel: &CancelToken,
    ) -> Ran {
        self.shell.run_shell(step, on_output, cancel)
    }

    fn call_tool(&self, call: &ToolCall, cancel: &CancelToken) -> Ran {
        self.client.step(call, cancel)
    }
}
