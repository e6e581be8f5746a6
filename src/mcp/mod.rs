//! `mekara mcp`: the MCP server agents drive (DESIGN §5, §7).
//!
//! - [`tools`]: the tool definitions and argument checks;
//! - [`session`]: one agent's session, the synchronous core every call goes through;
//! - [`reply`]: the Markdown replies;
//! - [`server`]: the rmcp handler (progress, cancellation, prompts);
//! - [`vcr`]: cassettes, recording and replay;
//! - this file: the stdio and Streamable HTTP transports.

pub mod reply;
pub mod server;
pub mod session;
pub mod stdio;
pub mod tools;
pub mod vcr;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use crate::engine::runs::RunStore;
use crate::engine::{EngineError, Settings, ShellRunner, StepRunner};
use crate::paths::Locations;
use crate::script::Resolver;
pub use server::Server;
pub use session::{Reply, Session};

/// Where a session's scripts, runs and default folder come from.
#[derive(Clone)]
pub struct SessionPlan {
    /// Finds scripts.
    pub resolver: Resolver,
    /// Keeps runs.
    pub store: RunStore,
    /// Knobs of runs.
    pub settings: Settings,
    /// The folder scripts run in when a call names none.
    pub cwd: PathBuf,
}

impl SessionPlan {
    /// The plan for a server started in `cwd`.
    pub fn discover(cwd: &Path, settings: Settings) -> Result<SessionPlan, EngineError> {
        let locations = Locations::discover(cwd);
        let store = locations
            .runs_dir()
            .map(RunStore::new)
            .ok_or(EngineError::NoRunsDir)?;
        Ok(SessionPlan {
            resolver: Resolver::new(&locations),
            store,
            settings,
            cwd: cwd.to_path_buf(),
        })
    }

    /// The real effect runner of a session: shell steps, and tool calls through an MCP
    /// client of its own (connections live as long as the session).
    pub fn runner(&self) -> Box<dyn StepRunner> {
        let client = crate::client::Client::for_locations(&Locations::discover(&self.cwd));
        Box::new(crate::client::ClientRunner::new(ShellRunner::new(), client))
    }

    /// A new session that runs effects with `runner`.
    pub fn session(&self, runner: Box<dyn StepRunner>) -> Session {
        Session::new(
            self.resolver.clone(),
            self.store.clone(),
            runner,
            self.settings.clone(),
            self.cwd.clone(),
        )
    }
}

/// Serves one session over stdin/stdout until the client goes away. With `cassette`, the
/// session is recorded there.
pub async fn serve_stdio(plan: SessionPlan, cassette: Option<&Path>) -> anyhow::Result<()> {
    let (runner, recorder) = match cassette {
        Some(path) => {
            let recorder = vcr::Recorder::create(path, &plan.cwd)?;
            (recorder.runner(plan.runner()), Some(recorder))
        }
        None => (plan.runner(), None),
    };
    let server = Server::new(plan.session(runner), recorder);
    let stopper = server.clone();
    let running = server
        .serve(stdio::Stdio::new())
        .await
        .context("the MCP handshake on stdio failed")?;
    let reason = running.waiting().await;
    tracing::info!("stdio session ended: {reason:?}");
    stopper.stop();
    Ok(())
}

/// What `--http` serves.
pub struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// Host names accepted in the `Host` header besides the loopback ones.
    pub allowed_hosts: Vec<String>,
}

/// Serves Streamable HTTP at `http://ADDR/mcp`, each MCP session with its own executor,
/// until the process is stopped.
pub async fn serve_http(plan: SessionPlan, options: HttpOptions) -> anyhow::Result<()> {
    serve_http_with("mekara mcp", options, move || {
        Server::new(plan.session(plan.runner()), None)
    })
    .await
}

/// Serves Streamable HTTP at `http://ADDR/mcp` with a handler made by `new_session` for each
/// MCP session, until the process is stopped; `label` starts the `listening on` line on
/// stderr. Only loopback names (and `options.allowed_hosts`) are accepted in `Host` and
/// `Origin`, against DNS rebinding. Shared by `mekara mcp` and `mekara serve`.
pub async fn serve_http_with<S>(
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
