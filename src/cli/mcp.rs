//! `mekara mcp`: serve the engine to agents over MCP (stdio, or Streamable HTTP).

use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::agents::claude;
use crate::agents::clients::Served;
use crate::engine::Settings;
use crate::exit::Exit;
use crate::mcp::{self, SessionPlan};
use crate::paths::Locations;
use crate::transport::{HttpLimits, HttpOptions};

#[derive(Debug, Args)]
pub(super) struct McpArgs {
    #[command(flatten)]
    http: HttpArgs,
    /// Default timeout of shell steps, in seconds (a step's own `timeout` wins).
    #[arg(long, value_name = "SECONDS", default_value = "600")]
    timeout: super::Seconds,
    /// Record the session into this VCR cassette (stdio only).
    #[arg(long, value_name = "FILE", env = "MEKARA_VCR_CASSETTE")]
    cassette: Option<PathBuf>,
    /// Started by mekara's Claude Code plugin: name the tools as Claude Code names a
    /// plugin's (`mcp__plugin_mekara_mekara__start`), and offer none in a project that sets
    /// its own `mekara` server up (`.mcp.json`).
    #[arg(long)]
    plugin: bool,
}

pub(super) fn run(args: McpArgs) -> anyhow::Result<Exit> {
    let default_timeout = super::timeout_arg("--timeout", &args.timeout)?;
    let settings = Settings {
        default_timeout,
        ..Settings::default()
    }
    .evaluating_in_children();
    let cwd = std::env::current_dir()
        .map_err(|e| anyhow::anyhow!("cannot read the current directory: {e}"))?;
    let mut locations = Locations::discover(&cwd);
    // Claude Code starts a plugin's server in the project it opened: a project with no
    // `.mekara/` (nor `.claude/`) yet is that folder all the same, so that the scripts
    // `/mekara:systematize` and `/compile` write there are found by this server, which lives
    // as long as the session.
    // Not in a plugin's own folder, where Copilot CLI starts plugin servers.
    if args.plugin
        && locations.project_root.is_none()
        && locations.home.as_ref() != Some(&cwd)
        && !claude::is_plugin_folder(&cwd)
    {
        locations.project_root = Some(cwd.clone());
    }
    let mut plan = SessionPlan::at(&locations, settings)?;
    if args.plugin {
        plan.served = Served::ClaudePlugin;
        plan.stood_down = claude::configured_server(&locations);
        if let Some(file) = &plan.stood_down {
            tracing::info!(
                "the plugin's server stands down: `{}` sets mekara up",
                file.display()
            );
        }
    }
    if args.http.http.is_some() && args.cassette.is_some() {
        return super::usage(
            "VCR recording (`MEKARA_VCR_CASSETTE` / `--cassette`) works over stdio only: one cassette cannot hold several HTTP sessions",
        );
    }
    let http = args.http.options()?;
    if http.is_none() {
        tell_a_person_at_the_terminal(
            "mekara mcp",
            "For Claude Code, install mekara's plugin (`claude plugin install mekara@mekara`, \
             see the README) or run `mekara install` in your project: Claude Code then starts \
             `mekara mcp` itself.",
        );
    }
    let cassette = args.cassette;
    serve_until_done(http.is_some(), async move {
        match http {
            Some(options) => mcp::serve_http(plan, options).await,
            None => mcp::serve_stdio(plan, cassette.as_deref()).await,
        }
    })
}

/// `--http ADDR`, `--allow-host HOST` and the limits of the HTTP server, shared with
/// `mekara serve`.
#[derive(Debug, Args)]
pub(super) struct HttpArgs {
    /// Serve Streamable HTTP at `http://ADDR/mcp` instead of stdio (port 0 picks a free
    /// one; the address is printed on stderr).
    #[arg(long, value_name = "ADDR", value_parser = http_addr)]
    http: Option<SocketAddr>,
    /// With `--http`: also accept this host name in the `Host` and `Origin` headers
    /// (loopback names always are). Needed to listen on a non-loopback address.
    #[arg(long = "allow-host", value_name = "HOST", requires = "http")]
    allow_hosts: Vec<String>,
    /// With `--http`: MCP sessions open at once; an `initialize` beyond them is answered
    /// HTTP 503.
    #[arg(long, value_name = "N", env = "MEKARA_HTTP_MAX_SESSIONS",
          default_value_t = HttpLimits::DEFAULT_MAX_SESSIONS)]
    max_sessions: usize,
    /// With `--http`: connections open at once; one beyond them is answered HTTP 503 and
    /// closed.
    #[arg(long, value_name = "N", env = "MEKARA_HTTP_MAX_CONNECTIONS",
          default_value_t = HttpLimits::DEFAULT_MAX_CONNECTIONS)]
    max_connections: usize,
    /// With `--http`: a session that gets no request for this long is closed.
    #[arg(long, value_name = "DURATION", env = "MEKARA_HTTP_SESSION_IDLE",
          default_value = "5m", value_parser = humantime::parse_duration)]
    session_idle: Duration,
    /// With `--http`: how long a request's headers, then its body, may take to arrive (an
    /// open connection with no request for this long is closed too).
    #[arg(long, value_name = "DURATION", env = "MEKARA_HTTP_READ_TIMEOUT",
          default_value = "30s", value_parser = humantime::parse_duration)]
    read_timeout: Duration,
}

/// `--http`'s address: `IP:PORT`, or `localhost:PORT` for the loopback address (the one
/// name read without asking DNS, which could answer anything).
pub(super) fn http_addr(value: &str) -> Result<SocketAddr, String> {
    if let Ok(addr) = value.parse() {
        return Ok(addr);
    }
    if let Some(port) = value.strip_prefix("localhost:")
        && let Ok(port) = port.parse::<u16>()
    {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    Err(format!(
        "`{}` is not an address to listen on; write `IP:PORT` or `localhost:PORT`, for example `127.0.0.1:8080` (port 0 picks a free one)",
        crate::display::clipped(value, 200)
    ))
}

impl HttpArgs {
    /// What `--http` asks for (`None`: stdio). A non-loopback address is refused unless a
    /// host is allowed by name: the server runs shell commands for whoever connects.
    pub(super) fn options(self) -> anyhow::Result<Option<HttpOptions>> {
        let Some(addr) = self.http else {
            return Ok(None);
        };
        if !addr.ip().is_loopback() && self.allow_hosts.is_empty() {
            return super::usage(format!(
                "`{addr}` is not a loopback address: mekara runs shell commands for whoever connects. To serve other machines anyway, name the host they will use with `--allow-host HOST`"
            ));
        }
        for (value, what) in [
            (self.max_sessions, "--max-sessions"),
            (self.max_connections, "--max-connections"),
        ] {
            if value == 0 {
                return super::usage(format!("`{what}` must be at least 1"));
            }
        }
        for (value, what) in [
            (self.session_idle, "--session-idle"),
            (self.read_timeout, "--read-timeout"),
        ] {
            if value.is_zero() {
                return super::usage(format!(
                    "`{what}` must be longer than zero, for example `30s` or `5m`"
                ));
            }
        }
        Ok(Some(HttpOptions {
            addr,
            allowed_hosts: self.allow_hosts,
            limits: HttpLimits {
                max_sessions: self.max_sessions,
                max_connections: self.max_connections,
                session_idle: self.session_idle,
                read_timeout: self.read_timeout,
            },
        }))
    }
}

/// When a stdio server's stdin is a terminal, a person started it by hand and would see
/// nothing happen: say on stderr that it waits for an MCP client, and how to use it (`setup`)
/// or try it. Said nowhere else: stdout is the protocol's, and a client's pipe gets no words.
pub(super) fn tell_a_person_at_the_terminal(command: &str, setup: &str) {
    if !std::io::stdin().is_terminal() {
        return;
    }
    eprintln!(
        "`{command}` is an MCP server on stdin and stdout: it waits for an MCP client to \
         speak JSON-RPC to it, not for typed commands.\n{setup}\nTo try it by hand, open \
         the MCP Inspector on it: `npx @modelcontextprotocol/inspector {command}`.\n\
         Ctrl-D or Ctrl-C ends it."
    );
}

/// The stack of the threads that evaluate scripts for a server (its blocking pool): the
/// main thread's usual 8 MiB rather than tokio's 2 MiB, so that a value nested as deep as
/// the engine allows (100 levels) converts in a debug build too.
/// Only the pages a thread touches are taken.
const EVALUATION_STACK: usize = 8 * 1024 * 1024;

/// Runs a server on a current-thread runtime until it ends (stdio: the client went away),
/// or, for HTTP (which never ends by itself), until Ctrl-C. Start-up cost matters more than
/// parallelism here; blocking work goes to the runtime's blocking pool. Shared with
/// `mekara serve`.
pub(super) fn serve_until_done(
    http: bool,
    server: impl Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Exit> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .thread_stack_size(EVALUATION_STACK)
        .build()?;
    let result = runtime.block_on(async {
        if !http {
            return server.await;
        }
        tokio::select! {
            // The server first: `mekara mcp` watches Ctrl-C itself, to stop its steps.
            biased;
            served = server => served,
            _ = tokio::signal::ctrl_c() => Ok(()),
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(2));
    result.map(|()| Exit::Success)
}
