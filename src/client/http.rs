//! The Streamable HTTP client transport: rmcp's [`StreamableHttpClient`] over `hyper`.
//!
//! rmcp's own client for this rides on `reqwest`, which would bring a second HTTP stack
//! and TLS into the build for what is, here, a handful of POST and GET requests; mekara
//! already serves HTTP with `hyper`. One HTTP/1.1 connection per request (as rmcp's Unix
//! socket client does): servers are local or behind a proxy, and a call is one request.
//! Plain `http://` only.
//!
//! A 401 or 403 is noted in [`AuthFailure`] so the caller can name the server, the headers
//! sent and the variables their values came from, without the values.

use std::borrow::Cow;
use std::collections::HashMap;
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
    /// The connection or the exchange failed.
    #[error("{0}")]
    Hyper(#[from] hyper::Error),
    /// The server could not be reached.
    #[error("cannot connect: {0}")]
    Io(#[from] std::io::Error),
    /// The request could not be built.
    #[error("bad request: {0}")]
    Http(#[from] http::Error),
    /// The URL cannot be used.
    #[error("{0}")]
    Url(String),
    /// The server refused the credentials.
    #[error("the server answered HTTP {0}")]
    Auth(StatusCode),
}

/// The status of a 401 or 403 answer, when one came.
pub(crate) type AuthFailure = Arc<Mutex<Option<StatusCode>>>;

/// A Streamable HTTP client with fixed extra headers.
#[derive(Clone)]
pub(crate) struct HyperClient {
    headers: Arc<Vec<(HeaderName, HeaderValue)>>,
    auth: AuthFailure,
}

impl HyperClient {
    /// A client that sends `headers` with every request and notes auth failures in `auth`.
    pub(crate) fn new(headers: Vec<(HeaderName, HeaderValue)>, auth: AuthFailure) -> HyperClient {
        HyperClient {
            headers: Arc::new(headers),
            auth,
        }
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

    async fn send(
        &self,
        request: Request<Full<Bytes>>,
    ) -> Result<http::Response<hyper::body::Incoming>, HttpError> {
        let uri = request.uri().clone();
        if uri.scheme_str() != Some("http") {
            return Err(HttpError::Url(format!(
                "`{uri}` is not an `http://` URL; mekara's MCP client speaks plain HTTP only (put a local proxy in front of HTTPS servers)"
            )));
        }
        let host = uri.host().unwrap_or("localhost").to_string();
        let port = uri.port_u16().unwrap_or(80);
        let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
        let _ = stream.set_nodelay(true);
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!("MCP HTTP connection ended: {e}");
            }
        });
        let response = sender.send_request(request).await?;
        let status = response.status();
        if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            if let Ok(mut slot) = self.auth.lock() {
                *slot = Some(status);
            }
            return Err(HttpError::Auth(status));
        }
        Ok(response)
    }
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
                let stream =
                    SseStream::from_bytes_stream(response.into_body().into_data_stream()).boxed();
                Ok(StreamableHttpPostResponse::Sse(stream, new_session))
            }
            Some(ct) if ct.starts_with(JSON) => {
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(|e| client_error(e.into()))?
                    .to_bytes();
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
