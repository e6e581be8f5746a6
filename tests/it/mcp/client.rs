//! A test client: `mekara mcp` (or `mekara serve`) spawned in a [`Project`], spoken to with
//! `rmcp`.

use std::path::Path;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    ProgressNotificationParam, RequestParamsMeta as _,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, RoleClient, ServiceExt as _};
use serde_json::Value as Json;

use crate::common::Project;

/// Collects progress notifications.
#[derive(Clone, Default)]
pub struct Handler {
    pub progress: Arc<Mutex<Vec<String>>>,
    /// The `clientInfo.name` it gives at `initialize` (`mekara-tests` when `None`).
    pub name: Option<String>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new(self.name.as_deref().unwrap_or("mekara-tests"), "0"),
        )
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        if let Ok(mut p) = self.progress.lock() {
            p.push(params.message.unwrap_or_default());
        }
    }
}

/// A connected client.
pub struct Client {
    pub service: RunningService<RoleClient, Handler>,
    pub handler: Handler,
    pub pid: u32,
}

/// A tool call's reply: the text, and whether it is an error.
#[derive(Debug, Clone)]
pub struct Reply {
    pub text: String,
    pub is_error: bool,
    /// `structuredContent`.
    pub structured: Option<Json>,
}

impl Reply {
    /// Panics unless the call succeeded.
    pub fn ok(self) -> String {
        assert!(
            !self.is_error,
            "expected success, got an error:\n{}",
            self.text
        );
        self.text
    }

    /// Panics unless the call was refused.
    pub fn err(self) -> String {
        assert!(self.is_error, "expected an error, got:\n{}", self.text);
        self.text
    }
}

impl Client {
    /// Spawns `mekara mcp` in the project root, with `env` added.
    pub async fn start(project: &Project, env: &[(&str, &Path)]) -> Client {
        Client::start_in(project, &project.root(), env).await
    }

    /// Spawns `mekara mcp` in `dir`.
    pub async fn start_in(project: &Project, dir: &Path, env: &[(&str, &Path)]) -> Client {
        Client::start_command(project, dir, &["mcp"], env).await
    }

    /// Spawns `mekara mcp` in the project root and introduces itself as the client `name`
    /// (`clientInfo.name`: `claude-code`, `opencode`, ...).
    pub async fn start_as(project: &Project, name: &str) -> Client {
        Client::start_as_with(project, name, &[]).await
    }

    /// [`Client::start_as`], with `env` added.
    pub async fn start_as_with(project: &Project, name: &str, env: &[(&str, &Path)]) -> Client {
        let handler = Handler {
            name: Some(name.to_string()),
            ..Handler::default()
        };
        Client::spawn(project, &project.root(), &["mcp"], env, handler).await
    }

    /// Spawns `mekara ARGS` (a stdio MCP server: `mcp`, `serve ...`) in `dir`.
    pub async fn start_command(
        project: &Project,
        dir: &Path,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> Client {
        Client::spawn(project, dir, args, env, Handler::default()).await
    }

    async fn spawn(
        project: &Project,
        dir: &Path,
        args: &[&str],
        env: &[(&str, &Path)],
        handler: Handler,
    ) -> Client {
        let mut command = tokio::process::Command::from(project.command_in(dir, args));
        for (key, value) in env {
            command.env(key, value);
        }
        let (transport, _stderr) = TokioChildProcess::builder(command)
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .expect("spawn mekara");
        let pid = transport.id().expect("pid");
        let service = handler.clone().serve(transport).await.expect("initialize");
        Client {
            service,
            handler,
            pid,
        }
    }

    /// Calls `tool` with `arguments` (a JSON object).
    pub async fn call(&self, tool: &str, arguments: Json) -> Reply {
        self.call_params(params(tool, arguments)).await
    }

    /// Calls `continue_compiled_script` with `outputs` (a JSON object) for the session's run.
    pub async fn continue_with(&self, outputs: Json) -> Reply {
        self.call(
            "continue_compiled_script",
            serde_json::json!({ "outputs": outputs }),
        )
        .await
    }

    /// Calls `tool` with a progress token.
    pub async fn call_with_progress(&self, tool: &str, arguments: Json) -> Reply {
        let mut params = params(tool, arguments);
        params.set_progress_token(rmcp::model::ProgressToken(
            rmcp::model::NumberOrString::String("p1".into()),
        ));
        self.call_params(params).await
    }

    async fn call_params(&self, params: CallToolRequestParams) -> Reply {
        let result = self.service.call_tool(params).await.expect("tools/call");
        let text = result
            .content
            .iter()
            .filter_map(|c| match c {
                rmcp::model::ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            })
            .collect::<Vec<_>>()
            .join("\n");
        Reply {
            text,
            is_error: result.is_error == Some(true),
            structured: result.structured_content,
        }
    }
}

/// What an agent read in a run of tool calls: each reply headed by the call that got it
/// (`> tool {arguments}`) and marked `(refused)` when it is an error, so one snapshot pins a
/// whole conversation.
#[derive(Default)]
pub struct Conversation(String);

impl Conversation {
    /// Calls `tool` with `arguments`, records the call and its reply, and returns the reply.
    pub async fn call(&mut self, client: &Client, tool: &str, arguments: Json) -> Reply {
        let reply = client.call(tool, arguments.clone()).await;
        self.record(&format!("{tool} {arguments}"), &reply);
        reply
    }

    /// Records `reply`, headed by `call`.
    pub fn record(&mut self, call: &str, reply: &Reply) {
        let refused = if reply.is_error { " (refused)" } else { "" };
        if !self.0.is_empty() {
            self.0.push('\n');
        }
        self.0
            .push_str(&format!("> {call}{refused}\n{}\n", reply.text.trim_end()));
    }

    /// The conversation so far, scrubbed by [`Project::scrub`].
    pub fn text(&self, project: &Project) -> String {
        project.scrub(&self.0)
    }
}

/// A `PATH` for `mekara mcp` with a `shuf` first that always picks the lowest number of its
/// range (`shuf -i LO-HI -n 1` prints `LO`): the bundled demos' random numbers, and so their
/// replies, are the same on every run. Give it as `("PATH", &path)`.
pub fn fixed_shuf_path(project: &Project) -> std::path::PathBuf {
    let bin = project.dir.path().join("fixed-shuf");
    let shuf = crate::common::write_file(
        &bin.join("shuf"),
        "#!/bin/sh\nrange=$2\necho \"${range%-*}\"\n",
    );
    std::fs::set_permissions(&shuf, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
    .into()
}

/// `tools/call` parameters.
pub fn params(tool: &str, arguments: Json) -> CallToolRequestParams {
    let Json::Object(map) = arguments else {
        panic!("arguments must be an object");
    };
    CallToolRequestParams::new(tool.to_string()).with_arguments(map)
}

/// The run id a reply names (the first).
pub fn run_id(text: &str) -> String {
    text.split('`')
        .find(|w| w.len() == 20 && w.as_bytes()[8] == b'-' && w.as_bytes()[15] == b'-')
        .unwrap_or_else(|| panic!("no run id in:\n{text}"))
        .to_string()
}

/// The run handle a reply names (the first `<run id>.<token>`).
pub fn handle(text: &str) -> String {
    find_handle(text).unwrap_or_else(|| panic!("no run handle in:\n{text}"))
}

/// The first run handle (`<run id>.<token>`, in backticks) in `text`, if any.
pub fn find_handle(text: &str) -> Option<String> {
    text.split('`')
        .find(|w| {
            w.split_once('.').is_some_and(|(run, token)| {
                run.len() == 20 && token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit())
            })
        })
        .map(str::to_string)
}

/// SIGKILLs the server of `client` (no chance to clean up) and waits until it is gone: the
/// run's lock goes with the process, which a loaded machine may take a moment to end, and
/// before that the run is still held.
pub async fn kill_server(client: Client) {
    let pid = client.pid;
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(i32::try_from(pid).expect("a pid fits an i32"))
            .expect("pid"),
        rustix::process::Signal::KILL,
    )
    .expect("kill");
    drop(client);
    for _ in 0..400 {
        if !alive(pid) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("the killed server {pid} is still alive");
}

/// Whether process `pid` is alive.
pub fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .split(") ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with('Z'))
}
