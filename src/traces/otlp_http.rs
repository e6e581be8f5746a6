//! The OTLP exporter's HTTP client ([`Client`]): mekara's hyper client, with failures told
//! in words about the collector.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};

/// The OTLP exporter's HTTP client: mekara's hyper client, on a small runtime of its own
/// (the SDK exports from its own thread, outside any runtime), each export bounded by the
/// timeout. The first failure is logged; later ones are not.
pub(super) struct Client {
    pub(super) hyper: crate::client::http::HyperClient,
    pub(super) runtime: tokio::runtime::Runtime,
    pub(super) timeout: Duration,
    pub(super) endpoint: String,
    pub(super) warned: AtomicBool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Client {
    fn warn_once(&self, reason: &str) {
        if !self.warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "traces: cannot export to `{}`: {reason}; runs go on, and this is not said again",
                self.endpoint
            );
        }
    }

    fn exchange(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, Box<dyn std::error::Error + Send + Sync>> {
        let (mut parts, body) = request.into_parts();
        if let Some(authority) = parts.uri.authority() {
            let host = http::HeaderValue::from_str(authority.as_str())?;
            parts.headers.insert(http::header::HOST, host);
        }
        let request = http::Request::from_parts(parts, Full::new(body));
        self.runtime.block_on(async {
            let exchange = async {
                let response = self.hyper.send(request).await.map_err(collector_error)?;
                let (parts, body) = response.into_parts();
                let body = body.collect().await?.to_bytes();
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(http::Response::from_parts(
                    parts, body,
                ))
            };
            match tokio::time::timeout(self.timeout, exchange).await {
                Ok(result) => result,
                Err(_) => Err(format!("no answer within {:?}", self.timeout).into()),
            }
        })
    }
}

/// The client's error in words about the collector (its own name MCP servers and
/// `.mcp.json`).
fn collector_error(e: crate::client::http::HttpError) -> Box<dyn std::error::Error + Send + Sync> {
    use crate::client::http::HttpError;
    match e {
        HttpError::Connect { target, source } => format!(
            "cannot connect to `{target}`: {source}; check that the collector is running and that `OTEL_EXPORTER_OTLP_ENDPOINT` is right"
        )
        .into(),
        HttpError::Tls { target, source } => crate::client::tls::handshake_failure(
            &target,
            &source,
            "a PEM bundle in `SSL_CERT_FILE`",
        )
        .into(),
        other => other.into(),
    }
}

#[async_trait::async_trait]
impl opentelemetry_http::HttpClient for Client {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, opentelemetry_http::HttpError> {
        let result = self.exchange(request);
        match &result {
            Err(e) => self.warn_once(&crate::client::http::explain(e.as_ref())),
            Ok(response) if !response.status().is_success() => {
                self.warn_once(&format!("the collector answered {}", response.status()));
            }
            Ok(_) => {}
        }
        result
    }
}
