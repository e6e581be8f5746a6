//! The Streamable HTTP client transport: rmcp's [`StreamableHttpClient`] over `hyper`, for
//! `http://` and `https://` servers.
//!
//! rmcp's own client for this rides on `reqwest`, which would bring a second HTTP stack
//! into the build for what is, here, a handful of POST and GET requests; mekara already
//! serves HTTP with `hyper`. One HTTP/1.1 connection per request (as rmcp's Unix socket
//! client does): servers are local or behind a proxy, and a call is one request. HTTPS goes
//! through rustls (the `ring` provider), set up by [`tls`](super::tls).
//!
//! A 401 or 403 is noted in [`AuthFailure`] so the caller can name the server, the headers
//! sent and the variables their values came from, without the values, and say when the
//! server asks for OAuth. [`explain`] turns rmcp's errors around this client's into words,
//! without the Rust type names rmcp puts in them.

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use http::{HeaderName, HeaderValue, Method, Request, StatusCode};
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
};
use sse_stream::{Error as SseError, Sse, SseStream};

const SESSION_ID: &str = "mcp-session-id";
const LAST_EVENT_ID: &str = "last-event-id";
const EVENT_STREAM: &str = "text/event-stream";
const JSON: &str = "application/json";

/// Why a request failed below MCP.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HttpError {
    /// The HTTP exchange failed after the connection was made.
    #[error("the HTTP exchange failed: {0}")]
    Hyper(#[from] hyper::Error),
    /// The server could not be reached.
    #[error(
        "cannot connect to `{target}`: {source}; check that the server is running and that the `url` in `.mcp.json` is right"
    )]
    Connect {
        /// `host:port`.
        target: String,
        /// Why.
        source: std::io::Error,
    },
    /// The TLS handshake failed.
    #[error(
        "{}",
        crate::client::tls::handshake_failure(
            target,
            source,
            "`ca_file = \"cert.pem\"` in the server's section of `.mekara/config.toml` (or a PEM bundle in `SSL_CERT_FILE`)"
        )
    )]
    Tls {
        /// `host:port`.
        target: String,
        /// Why (an unknown issuer, a name that does not match, ...).
        source: std::io::Error,
    },
    /// The request could not be built.
    #[error("bad request: {0}")]
    Http(#[from] http::Error),
    /// The URL or the TLS set-up cannot be used.
    #[error("{0}")]
    Setup(String),
    /// The server refused the credentials.
    #[error("the server answered HTTP {0}")]
    Auth(StatusCode),
}

/// A 401 or 403 answer: its status, and the `WWW-Authenticate` challenge when there was one.
#[derive(Debug, Clone)]
pub(crate) struct Refusal {
    /// 401 or 403.
    pub status: StatusCode,
    /// The `WWW-Authenticate` header.
    pub challenge: Option<String>,
}

impl Refusal {
    /// Whether the server asks for an OAuth bearer token (RFC 6750, as MCP's authorization
    /// spec uses it).
    pub(crate) fn wants_oauth(&self) -> bool {
        self.challenge.as_deref().is_some_and(|c| {
            c.trim_start()
                .get(..6)
                .is_some_and(|scheme| scheme.eq_ignore_ascii_case("bearer"))
        })
    }
}

/// The 401 or 403 answer, when one came.
pub(crate) type AuthFailure = Arc<Mutex<Option<Refusal>>>;

/// A Streamable HTTP client with fixed extra headers.
#[derive(Clone)]
pub(crate) struct HyperClient {
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
    auth: AuthFailure,
    tls: Option<Arc<rustls::ClientConfig>>,
}

impl HyperClient {
    /// A client that sends `headers` with every request and notes auth failures in `auth`;
    /// for `https://` URLs (`https`), it trusts the system's roots and `ca_file`.
    pub(crate) fn new(
        headers: Vec<(HeaderName, HeaderValue)>,
        auth: AuthFailure,
        https: bool,
        ca_file: Option<&Path>,
    ) -> Result<HyperClient, String> {
        let tls = if https {
            Some(crate::client::tls::tls_config(ca_file, "ca_file")?)
        } else {
            None
        };
        Ok(HyperClient {
            headers: Arc::new(headers),
            auth,
            tls,
        })
    }

    fn request(
        &self,
        method: Method,
        uri: &str,
        session_id: Option<&str>,
        auth_token: Option<String>,
        custom: HashMap<HeaderName, HeaderValue>,
    ) -> http::request::Builder {
        let mut builder = Request::builder().method(method).uri(uri);
        if let Some(host) = uri
            .parse::<http::Uri>()
            .ok()
            .and_then(|u| u.authority().map(|a| a.as_str().to_string()))
        {
            builder = builder.header(http::header::HOST, host);
        }
        builder = builder.header(http::header::ACCEPT, format!("{EVENT_STREAM}, {JSON}"));
        for (name, value) in self.headers.iter() {
            builder = builder.header(name, value);
        }
        for (name, value) in custom {
            builder = builder.header(name, value);
        }
        if let Some(token) = auth_token {
            builder = builder.header(http::header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(sid) = session_id {
            builder = builder.header(SESSION_ID, sid);
        }
        builder
    }

    /// Sends `request` on a new connection; a 401 or 403 is an error, noted in the client's
    /// [`AuthFailure`].
    pub(crate) async fn send(
        &self,
        mut request: Request<Full<Bytes>>,
    ) -> Result<http::Response<hyper::body::Incoming>, HttpError> {
        let uri = request.uri().clone();
        let (tls, default_port) = match (uri.scheme_str(), &self.tls) {
            (Some("http"), _) => (None, 80),
            (Some("https"), Some(tls)) => (Some(tls.clone()), 443),
            _ => {
                return Err(HttpError::Setup(format!(
                    "`{uri}` is not an `http://` or `https://` URL"
                )));
            }
        };
        let host = uri.host().unwrap_or("localhost").to_string();
        let port = uri.port_u16().unwrap_or(default_port);
        let target = format!("{host}:{port}");
        // The origin form (`POST /mcp`), as a client talking to the server itself sends; the
        // absolute form (`POST http://host/mcp`) is for proxies, and servers such as the
        // Python SDK's answer it with 404.
        *request.uri_mut() = uri.path_and_query().map_or_else(
            || http::Uri::from_static("/"),
            |p| http::Uri::from(p.clone()),
        );
        let stream = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|source| HttpError::Connect {
                target: target.clone(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let response = match tls {
            None => exchange(stream, request).await?,
            Some(tls) => {
                let name = rustls::pki_types::ServerName::try_from(
                    host.trim_matches(['[', ']']).to_string(),
                )
                .map_err(|e| HttpError::Setup(format!("`{host}` is not a server name: {e}")))?;
                let stream = tokio_rustls::TlsConnector::from(tls)
                    .connect(name, stream)
                    .await
                    .map_err(|source| HttpError::Tls { target, source })?;
                exchange(stream, request).await?
            }
        };
        let status = response.status();
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            let challenge = response
                .headers()
                .get(http::header::WWW_AUTHENTICATE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            if let Ok(mut slot) = self.auth.lock() {
                *slot = Some(Refusal { status, challenge });
            }
            return Err(HttpError::Auth(status));
        }
        Ok(response)
    }
}

/// Sends `request` on a new HTTP/1.1 connection over `io`.
async fn exchange<Io>(
    io: Io,
    request: Request<Full<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, HttpError>
where
    Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("MCP HTTP connection ended: {e}");
        }
    });
    Ok(sender.send_request(request).await?)
}

/// What failed, in words, from an error of rmcp around this client's: the wrappers that
/// name Rust types (`Transport [WorkerTransport<…>] error`) are looked through.
pub(crate) fn explain(error: &(dyn std::error::Error + 'static)) -> String {
    use rmcp::service::{ClientInitializeError, ServiceError};
    use rmcp::transport::DynamicTransportError;
    if let Some(e) = error.downcast_ref::<ClientInitializeError>() {
        return match e {
            ClientInitializeError::TransportError { error, .. } => explain(error),
            ClientInitializeError::ConnectionClosed(_) => {
                "the connection closed during the MCP handshake".to_string()
            }
            other => other.to_string(),
        };
    }
    if let Some(ServiceError::TransportSend(e)) = error.downcast_ref::<ServiceError>() {
        return explain(e);
    }
    if let Some(e) = error.downcast_ref::<DynamicTransportError>() {
        let inner: &(dyn std::error::Error + 'static) = e.error.as_ref();
        return explain(inner);
    }
    if let Some(e) = error.downcast_ref::<StreamableHttpError<HttpError>>() {
        return match e {
            StreamableHttpError::Client(e) => e.to_string(),
            StreamableHttpError::UnexpectedServerResponse(what) if what.starts_with("HTTP 404") => {
                format!(
                    "the server answered {what}; check the path of the `url` in `.mcp.json` (MCP servers usually answer at `/mcp`)"
                )
            }
            StreamableHttpError::UnexpectedServerResponse(what) => {
                format!("the server answered {what}")
            }
            StreamableHttpError::UnexpectedContentType(what) => format!(
                "the server answered with {}, not JSON or an event stream; is the URL its MCP endpoint?",
                what.as_deref().map_or_else(
                    || "no content type".to_string(),
                    |t| format!("content type `{t}`")
                )
            ),
            StreamableHttpError::SessionExpired => "the server ended the MCP session".to_string(),
            StreamableHttpError::Deserialize(e) => {
                format!("the server's answer is not an MCP message: {e}")
            }
            other => other.to_string(),
        };
    }
    error.to_string()
}

/// The error answer that stands for `message` when it nests deeper than serde_json reads
/// (rmcp would call it "not an MCP message", or drop it from an event stream and wait for
/// the call's timeout), as the stdio transport answers ([`super::stdio::refusal`]).
fn too_deep(message: &[u8]) -> Option<String> {
    super::stdio::deeper_than(message, super::stdio::MAX_LINE_DEPTH)
        .and_then(|depth| super::stdio::refusal(message, depth))
}

/// `body`, or the error answer that stands for it ([`too_deep`]).
fn screened(body: Bytes) -> Bytes {
    too_deep(&body).map_or(body, Bytes::from)
}

/// An event of a stream, or one whose data is the error answer that stands for it.
fn screened_event(mut event: Sse) -> Sse {
    if let Some(answer) = event.data.as_deref().and_then(|d| too_deep(d.as_bytes())) {
        event.data = Some(answer.trim_end().to_string());
    }
    event
}

fn client_error(e: HttpError) -> StreamableHttpError<HttpError> {
    StreamableHttpError::Client(e)
}

fn is_notification_like(message: &ClientJsonRpcMessage) -> bool {
    matches!(
        message,
        ClientJsonRpcMessage::Notification(_)
            | ClientJsonRpcMessage::Response(_)
            | ClientJsonRpcMessage::Error(_)
    )
}

impl StreamableHttpClient for HyperClient {
    type Error = HttpError;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let body = serde_json::to_vec(&message)?;
        let request = self
            .request(
                Method::POST,
                &uri,
                session_id.as_deref(),
                auth_token,
                custom_headers,
            )
            .header(http::header::CONTENT_TYPE, JSON)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| client_error(e.into()))?;
        let response = self.send(request).await.map_err(client_error)?;
        let status = response.status();
        if matches!(status, StatusCode::ACCEPTED | StatusCode::NO_CONTENT) {
            return Ok(StreamableHttpPostResponse::Accepted);
        }
        if status == StatusCode::NOT_FOUND && session_id.is_some() {
            return Err(StreamableHttpError::SessionExpired);
        }
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let new_session = response
            .headers()
            .get(SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        if !status.is_success() {
            let body = response
                .into_body()
                .collect()
                .await
                .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                .unwrap_or_default();
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {status}: {}", body.trim()),
            )));
        }
        match content_type.as_deref() {
            Some(ct) if ct.starts_with(EVENT_STREAM) => {
                let stream = SseStream::from_bytes_stream(response.into_body().into_data_stream())
                    .map(|event| event.map(screened_event))
                    .boxed();
                Ok(StreamableHttpPostResponse::Sse(stream, new_session))
            }
            Some(ct) if ct.starts_with(JSON) => {
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| client_error(e.into()))?
                    .to_bytes();
                let body = screened(body);
                match serde_json::from_slice::<ServerJsonRpcMessage>(&body) {
                    Ok(parsed) => Ok(StreamableHttpPostResponse::Json(parsed, new_session)),
                    Err(_) if is_notification_like(&message) => {
                        Ok(StreamableHttpPostResponse::Accepted)
                    }
                    Err(e) => Err(e.into()),
                }
            }
            _ if is_notification_like(&message) => Ok(StreamableHttpPostResponse::Accepted),
            other => Err(StreamableHttpError::UnexpectedContentType(
                other.map(str::to_string),
            )),
        }
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        let request = self
            .request(
                Method::DELETE,
                &uri,
                Some(&session_id),
                auth_token,
                custom_headers,
            )
            .body(Full::new(Bytes::new()))
            .map_err(|e| client_error(e.into()))?;
        // Ending a session is a courtesy: whatever the server says, it is over for us.
        let _ = self.send(request).await;
        Ok(())
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_token: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let mut builder = self.request(
            Method::GET,
            &uri,
            session_id.as_deref(),
            auth_token,
            custom_headers,
        );
        if let Some(id) = last_event_id {
            builder = builder.header(LAST_EVENT_ID, id);
        }
        let request = builder
            .body(Full::new(Bytes::new()))
            .map_err(|e| client_error(e.into()))?;
        let response = self.send(request).await.map_err(client_error)?;
        if response.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Err(StreamableHttpError::ServerDoesNotSupportSse);
        }
        if !response.status().is_success() {
            return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
                format!("HTTP {} to the event stream request", response.status()),
            )));
        }
        Ok(SseStream::from_bytes_stream(response.into_body().into_data_stream()).boxed())
    }
}
