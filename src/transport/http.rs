//! The Streamable HTTP transport: rmcp's service behind a small hyper server that answers
//! `/mcp` only, and accepts only loopback names (and the ones allowed by name) in `Host` and
//! `Origin`, against DNS rebinding.
//!
//! Everything a client can make the server hold is bounded ([`HttpLimits`]): connections
//! (one over the cap is answered 503 and closed), MCP sessions (an `initialize` over the cap
//! is answered 503; a session idle too long is closed), and the time a request's headers and
//! body may take to arrive. A failing `accept` (out of file descriptors) backs off instead
//! of spinning, and is logged once per burst.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use bytes::Bytes;
use http::{HeaderMap, HeaderName, Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::{TokioIo, TokioTimer};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value as Json;
use tokio::io::AsyncWriteExt as _;
use tokio::sync::Semaphore;

/// What `--http` serves.
pub(crate) struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Host names accepted in the `Host` header besides the loopback ones.
    pub allowed_hosts: Vec<String>,
    /// What one client, or many, may make the server hold.
    pub limits: HttpLimits,
}

/// The bounds of `--http`, each with a flag and a `MEKARA_HTTP_…` variable (`cli::mcp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HttpLimits {
    /// MCP sessions open at once; an `initialize` beyond them is answered 503.
    pub max_sessions: usize,
    /// TCP connections open at once; one beyond them is answered 503 and closed.
    pub max_connections: usize,
    /// A session that gets no request for this long is closed.
    pub session_idle: Duration,
    /// How long a request's headers may take, and then its body; an open connection with
    /// no request for this long is closed too.
    pub read_timeout: Duration,
}

impl HttpLimits {
    /// Sessions open at once by default: far more than the agents of one person.
    pub(crate) const DEFAULT_MAX_SESSIONS: usize = 100;
    /// Connections open at once by default: well under the usual 1,024 file descriptors.
    pub(crate) const DEFAULT_MAX_CONNECTIONS: usize = 256;
    /// A session's idle time before it is closed, by default (rmcp's own default).
    pub(crate) const DEFAULT_SESSION_IDLE: Duration = Duration::from_secs(5 * 60);
    /// The time a request may take to arrive, by default.
    pub(crate) const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(30);
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            max_sessions: Self::DEFAULT_MAX_SESSIONS,
            max_connections: Self::DEFAULT_MAX_CONNECTIONS,
            session_idle: Self::DEFAULT_SESSION_IDLE,
            read_timeout: Self::DEFAULT_READ_TIMEOUT,
        }
    }
}

/// The largest request body read (as the stdio transport's longest line).
const MAX_BODY: usize = 16 * 1024 * 1024;

/// How much more of a body over [`MAX_BODY`] is read and dropped so that the 413 reaches
/// a client still writing; past it the connection is closed.
const MAX_DRAINED: usize = 64 * 1024 * 1024;

type Body = BoxBody<Bytes, std::convert::Infallible>;

/// Serves Streamable HTTP at `http://ADDR/mcp` with a handler made by `new_session` for each
/// MCP session, until the process is stopped; `label` starts the `listening on` line on
/// stderr. Only loopback names (and `options.allowed_hosts`) are accepted in `Host` and
/// `Origin`, against DNS rebinding.
pub(crate) async fn serve_http<S>(
    label: &str,
    options: HttpOptions,
    new_session: impl Fn() -> S + Send + Sync + 'static,
) -> anyhow::Result<()>
where
    S: rmcp::ServerHandler,
{
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .with_context(|| format!("cannot listen on {}", options.addr))?;
    let local = listener.local_addr()?;
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(options.allowed_hosts.iter().cloned());
    let origins: Vec<String> = hosts
        .iter()
        .map(|h| {
            if h.contains(':') && !h.starts_with('[') {
                format!("http://[{h}]:*")
            } else {
                format!("http://{h}:*")
            }
        })
        .collect();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins);
    let limits = options.limits;
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(limits.session_idle);
    let sessions = Arc::new(sessions);
    let service = StreamableHttpService::new(move || Ok(new_session()), sessions.clone(), config);
    let gate = Arc::new(Gate {
        sessions,
        limits,
        opening: tokio::sync::Mutex::new(()),
    });
    let connections = Arc::new(Semaphore::new(limits.max_connections));
    let mut accept_errors = AcceptErrors::default();
    eprintln!("{label}: listening on http://{local}/mcp");
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => {
                accept_errors.recovered();
                accepted
            }
            Err(e) => {
                tokio::time::sleep(accept_errors.failed(&e)).await;
                continue;
            }
        };
        let Ok(permit) = connections.clone().try_acquire_owned() else {
            tracing::debug!(
                "connection from {peer} refused: {} open",
                limits.max_connections
            );
            tokio::spawn(refuse_connection(stream, limits.max_connections));
            continue;
        };
        tracing::debug!("connection from {peer}");
        let service = service.clone();
        let gate = gate.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request| {
                let service = service.clone();
                let gate = gate.clone();
                async move { Ok::<_, std::convert::Infallible>(gate.answer(request, service).await) }
            });
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(limits.read_timeout);
            if let Err(e) = builder
                .serve_connection(TokioIo::new(stream), handler)
                .await
            {
                tracing::debug!("connection from {peer} ended: {e}");
            }
            drop(permit);
        });
    }
}

/// What every request passes before rmcp sees it.
struct Gate {
    sessions: Arc<LocalSessionManager>,
    limits: HttpLimits,
    /// Held while an `initialize` is counted and then served, so that two at once cannot
    /// both take the last free session.
    opening: tokio::sync::Mutex<()>,
}

impl Gate {
    async fn answer<S>(
        &self,
        request: Request<hyper::body::Incoming>,
        mut service: StreamableHttpService<S, LocalSessionManager>,
    ) -> Response<Body>
    where
        S: rmcp::ServerHandler,
    {
        if request.uri().path() != "/mcp" {
            return text(StatusCode::NOT_FOUND, "mekara serves MCP at /mcp only");
        }
        if let Some(name) = repeated_header(request.headers()) {
            return text(
                StatusCode::BAD_REQUEST,
                &format!("the request has more than one `{name}` header; send exactly one"),
            );
        }
        let (parts, body) = request.into_parts();
        let body = match read_body(body, self.limits.read_timeout).await {
            Ok(body) => body,
            Err(refused) => return refused,
        };
        let opening = parts.method == Method::POST && !parts.headers.contains_key(SESSION_ID);
        let message: Option<Json> = if opening {
            serde_json::from_slice(&body).ok()
        } else {
            None
        };
        let method = message
            .as_ref()
            .and_then(|m| m.get("method"))
            .and_then(Json::as_str);
        if parts.method == Method::POST && tracing::enabled!(tracing::Level::DEBUG) {
            // A request in a session is read here only for the log.
            let read = message
                .is_none()
                .then(|| serde_json::from_slice::<Json>(&body).ok())
                .flatten();
            let header = parts.headers.get("mcp-protocol-version");
            super::log_request(
                message.as_ref().or(read.as_ref()),
                header.and_then(|h| h.to_str().ok()),
            );
        }
        let _opening = match method {
            Some("initialize") => {
                let guard = self.opening.lock().await;
                let open = self.sessions.sessions.read().await.len();
                if open >= self.limits.max_sessions {
                    tracing::info!("initialize refused: {open} sessions open");
                    let mut refused = text(
                        StatusCode::SERVICE_UNAVAILABLE,
                        &format!(
                            "mekara has {open} MCP sessions open, its limit (`--max-sessions`); \
                             try again later, or end a session you no longer use (HTTP DELETE \
                             with its `Mcp-Session-Id`)"
                        ),
                    );
                    refused.headers_mut().insert(
                        http::header::RETRY_AFTER,
                        http::HeaderValue::from_static("5"),
                    );
                    return refused;
                }
                Some(guard)
            }
            Some(_) if message.as_ref().is_some_and(super::needs_initialize) => {
                return initialize_first(message.as_ref());
            }
            _ => None,
        };
        let given = |name| {
            parts
                .headers
                .get(name)
                .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
        };
        let (host, origin) = (given(http::header::HOST), given(http::header::ORIGIN));
        let request = Request::from_parts(parts, Full::new(body));
        let response = tower_service::Service::call(&mut service, request)
            .await
            .unwrap_or_else(|never| match never {});
        if response.status() == StatusCode::FORBIDDEN {
            return refused_name(response, host.as_deref(), origin.as_deref()).await;
        }
        response
    }
}

/// rmcp's refusal of a `Host` or `Origin` it does not allow (the checks against DNS
/// rebinding, its only 403), said as mekara says it elsewhere: what was refused and how to
/// allow a name (`--allow-host`). Which header it was is read from rmcp's own words; a 403
/// whose words name neither header is passed on as rmcp gave it.
async fn refused_name(
    response: Response<Body>,
    host: Option<&str>,
    origin: Option<&str>,
) -> Response<Body> {
    let (parts, body) = response.into_parts();
    let said = body
        .collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .unwrap_or_default();
    let said = String::from_utf8_lossy(&said);
    let shown =
        |value: Option<&str>| crate::display::clipped(value.unwrap_or(""), 200).into_owned();
    let reason = if said.contains("Host header") {
        format!(
            "mekara answers only to `localhost`, `127.0.0.1` and `::1` (and the names given with \
             `--allow-host`), not to `Host: {}`; connect to the address mekara printed, or \
             start it with `--allow-host NAME` to serve that name",
            shown(host)
        )
    } else if said.contains("Origin header") {
        format!(
            "a page of `{}` may not use mekara: only pages of `localhost`, `127.0.0.1`, `::1` \
             (and of the names given with `--allow-host`) may; start it with \
             `--allow-host NAME` to allow pages of that name",
            shown(origin)
        )
    } else {
        return Response::from_parts(
            parts,
            Full::new(Bytes::from(said.into_owned()))
                .map_err(|never| match never {})
                .boxed(),
        );
    };
    text(StatusCode::FORBIDDEN, &reason)
}

const SESSION_ID: &str = "mcp-session-id";

/// The first header that a request may carry once and carries more often: the checks
/// against DNS rebinding read one value, so a second could slip past them.
fn repeated_header(headers: &HeaderMap) -> Option<&'static str> {
    let once: [(HeaderName, &'static str); 3] = [
        (http::header::HOST, "Host"),
        (http::header::ORIGIN, "Origin"),
        (HeaderName::from_static(SESSION_ID), "Mcp-Session-Id"),
    ];
    once.into_iter()
        .find(|(name, _)| headers.get_all(name).iter().nth(1).is_some())
        .map(|(_, shown)| shown)
}

/// The answer to a request sent before `initialize`: a JSON-RPC error naming what to do.
fn initialize_first(message: Option<&Json>) -> Response<Body> {
    let body = super::initialize_first(
        message,
        "came without an `Mcp-Session-Id` header; send `initialize`, then send the session id \
         it answers with in the `Mcp-Session-Id` header of every later request",
    );
    let mut response = Response::new(
        Full::new(Bytes::from(body.to_string()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = StatusCode::BAD_REQUEST;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// The whole body, or the answer when it is too slow or too long.
///
/// A body over [`MAX_BODY`] is read to its end (up to [`MAX_DRAINED`] more, and within the
/// timeout) and dropped before the 413 goes out: a client that writes its whole request
/// before reading would otherwise meet a connection closed under its feet (the kernel
/// resets a socket closed with unread data), and never see the answer.
async fn read_body(
    body: hyper::body::Incoming,
    timeout: Duration,
) -> Result<Bytes, Response<Body>> {
    let read = async {
        let mut body = std::pin::pin!(body);
        let mut kept = Vec::new();
        let mut length = 0usize;
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame?.into_data() else {
                continue;
            };
            length = length.saturating_add(data.len());
            if length <= MAX_BODY {
                kept.extend_from_slice(&data);
            } else if length > MAX_BODY + MAX_DRAINED {
                break;
            }
        }
        Ok::<_, hyper::Error>((kept, length))
    };
    match tokio::time::timeout(timeout, read).await {
        Err(_) => Err(text(
            StatusCode::REQUEST_TIMEOUT,
            &format!(
                "the request body did not arrive within {} (`--read-timeout`)",
                humantime::format_duration(timeout)
            ),
        )),
        Ok(Ok((_, length))) if length > MAX_BODY => Err(text(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!(
                "the request body is longer than mekara's limit of {MAX_BODY} bytes (16 MiB); \
                 send a smaller request (pass large data as a file path instead)"
            ),
        )),
        Ok(Err(e)) => Err(text(
            StatusCode::BAD_REQUEST,
            &format!("cannot read the request body: {e}"),
        )),
        Ok(Ok((kept, _))) => Ok(Bytes::from(kept)),
    }
}

/// A plain-text answer of the server's own.
fn text(status: StatusCode, reason: &str) -> Response<Body> {
    let body = Full::new(Bytes::from(format!("{reason}\n")))
        .map_err(|never| match never {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// Answers a connection over the cap with a 503 and closes it, without reading its request
/// (it may never come).
async fn refuse_connection(mut stream: tokio::net::TcpStream, max: usize) {
    let reason = format!(
        "mekara has {max} connections open, its limit (`--max-connections`); try again later\n"
    );
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
         content-length: {}\r\nretry-after: 5\r\nconnection: close\r\n\r\n{reason}",
        reason.len()
    );
    let write = async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// Failed `accept`s: how long to wait before the next try, and one log line per burst.
#[derive(Default)]
struct AcceptErrors {
    /// Errors since the last accepted connection.
    count: u64,
    /// The current pause.
    pause: Duration,
}

impl AcceptErrors {
    const FIRST_PAUSE: Duration = Duration::from_millis(10);
    const LONGEST_PAUSE: Duration = Duration::from_secs(1);

    /// Notes a failure; the pause to take before accepting again. Out of file descriptors,
    /// `accept` fails at once, every time: without a pause the loop spins and the log floods.
    fn failed(&mut self, error: &std::io::Error) -> Duration {
        if self.count == 0 {
            tracing::warn!(
                "accept failed: {error}; pausing new connections until it succeeds (further failures are counted, not logged)"
            );
            self.pause = Self::FIRST_PAUSE;
        } else {
            self.pause = (self.pause * 2).min(Self::LONGEST_PAUSE);
        }
        self.count += 1;
        self.pause
    }

    /// Notes a success, ending a burst of failures.
    fn recovered(&mut self) {
        if self.count > 0 {
            tracing::warn!("accepting again after {} failed accepts", self.count);
            self.count = 0;
        }
    }
}
