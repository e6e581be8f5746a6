//! The Streamable HTTP transport: rmcp's service behind a small hyper server that answers
//! `/mcp` only, and accepts only loopback names (and the ones allowed by name) in `Host` and
//! `Origin`, against DNS rebinding.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

/// What `--http` serves.
pub(crate) struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Host names accepted in the `Host` header besides the loopback ones.
    pub allowed_hosts: Vec<String>,
}

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
    let service = StreamableHttpService::new(
        move || Ok(new_session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    eprintln!("{label}: listening on http://{local}/mcp");
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!("accept failed: {e}");
                continue;
            }
        };
        tracing::debug!("connection from {peer}");
        let service = service.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request| {
                let mut service = service.clone();
                async move {
                    if request.uri().path() != "/mcp" {
                        return Ok::<_, std::convert::Infallible>(not_found());
                    }
                    tower_service::Service::call(&mut service, request).await
                }
            });
            if let Err(e) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handler)
                .await
            {
                tracing::debug!("connection from {peer} ended: {e}");
            }
        });
    }
}

fn not_found()
-> hyper::Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>> {
    let body = Full::new(Bytes::from_static(b"mekara serves MCP at /mcp only\n"))
        .map_err(|never| match never {})
        .boxed();
    let mut response = hyper::Response::new(body);
    *response.status_mut() = hyper::StatusCode::NOT_FOUND;
    response
}
