//! `ToolServer`: the rmcp handler of `mekara serve`. `tools/list` gives the loaded tools with
//! their schemas; `tools/call` checks the arguments and runs the function on a blocking
//! thread, each call in its own step context, so calls do not wait for each other.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value as Json;

use super::{EnvRunner, ServedFunction, ToolSet};
use crate::display::quoted;
use crate::engine::CancelToken;
use crate::engine::compiled::{self, Called, DirectCall, Limits, Suspension};
use crate::transport;

/// What every call shares.
struct Shared {
    tools: ToolSet,
    runner: EnvRunner,
    working_dir: PathBuf,
    default_timeout: Duration,
    limits: Limits,
    /// The `mekara` binary that calls the tools in a child process (see
    /// `engine::compiled::child`); `None`: they are called in this process.
    evaluator: Option<PathBuf>,
}

/// Serves a [`ToolSet`]. Clones share it (one per HTTP session, all alike).
#[derive(Clone)]
pub(crate) struct ToolServer {
    shared: Arc<Shared>,
}

impl ToolServer {
    /// A server of `tools`, whose shell steps run in `working_dir` with `runner`.
    pub(crate) fn new(
        tools: ToolSet,
        runner: EnvRunner,
        working_dir: PathBuf,
        default_timeout: Duration,
        limits: Limits,
        evaluator: Option<PathBuf>,
    ) -> ToolServer {
        ToolServer {
            shared: Arc::new(Shared {
                tools,
                runner,
                working_dir,
                default_timeout,
                limits,
                evaluator,
            }),
        }
    }

    /// Calls tool `index` with checked arguments, on this (blocking) thread.
    fn call(
        &self,
        index: usize,
        arguments: &serde_json::Map<String, Json>,
        cancel: &CancelToken,
    ) -> CallToolResult {
        let shared = &self.shared;
        let tool = &shared.tools.tools()[index];
        let call = DirectCall {
            module: &tool.module.module,
            function: &tool.function,
            kwargs: arguments,
            working_dir: &shared.working_dir,
            runner: &shared.runner,
            cancel,
            default_timeout: shared.default_timeout,
            limits: &shared.limits,
        };
        let called = match &shared.evaluator {
            Some(exe) => compiled::child::call(exe, &tool.module.origin, &tool.module.source, call),
            None => compiled::call_directly(call),
        };
        match called {
            Ok(Called::Returned(value)) => returned(tool, value),
            Ok(Called::Suspended(Suspension::Llm { .. })) => error(format!(
                "tool `{}` reached an `llm()` step, but served tools cannot hand work to the agent: \
                 only `auto()` (and `mcp()`) steps run in a served tool; move the `llm()` step into a \
                 compiled script",
                tool.name
            )),
            Ok(Called::Suspended(Suspension::Call { script, .. })) => error(format!(
                "tool `{}` called script `{script}`, but served tools cannot run scripts: a script may \
                 need the agent; call the script from the agent instead",
                tool.name
            )),
            Ok(Called::Suspended(Suspension::Ask { .. })) => error(format!(
                "tool `{}` reached an `ask()` step, but a served tool has nobody to ask: move the \
                 question into a compiled script",
                tool.name
            )),
            Ok(Called::Failed(message)) => {
                error(format!("tool `{}` failed:\n{message}", tool.name))
            }
            Err(e) => error(format!("tool `{}` failed: {e}", tool.name)),
        }
    }
}

/// A successful call: a dict is also `structuredContent` when the function declares it
/// returns one; a string is the text itself; other values are their JSON; `None` is no
/// content.
fn returned(tool: &ServedFunction, value: Json) -> CallToolResult {
    match value {
        Json::Object(_) if tool.output.is_some() => CallToolResult::structured(value),
        Json::Null => CallToolResult::success(Vec::new()),
        Json::String(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        other => CallToolResult::success(vec![ContentBlock::text(other.to_string())]),
    }
}

fn error(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// A tool as `tools/list` gives it.
fn definition(tool: &ServedFunction) -> rmcp::model::Tool {
    let definition = rmcp::model::Tool::new_with_raw(
        tool.name.clone(),
        tool.description.clone().map(Cow::Owned),
        Arc::new(tool.input_schema()),
    );
    match tool.output_schema() {
        Some(schema) => definition.with_raw_output_schema(Arc::new(schema)),
        None => definition,
    }
}

impl ServerHandler for ToolServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("mekara", env!("CARGO_PKG_VERSION"))
                .with_title("mekara serve: Starlark functions as tools"),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(
            self.shared.tools.tools().iter().map(definition).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        self.shared.tools.get(name).map(definition)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let tools = self.shared.tools.tools();
        let Some(index) = tools.iter().position(|t| t.name == request.name) else {
            return Err(McpError::invalid_params(
                format!(
                    "unknown tool `{}`; the tools are {}",
                    crate::display::echoed(&request.name),
                    quoted(self.shared.tools.names())
                ),
                None,
            ));
        };
        // A call with wrong arguments is a tool error, not a protocol error, so that the
        // model sees what to fix (as the MCP spec advises since 2025-11-25).
        let arguments = match tools[index].check_arguments(request.arguments.as_ref()) {
            Ok(arguments) => arguments,
            Err(message) => return Ok(error(message).into()),
        };
        let cancel = CancelToken::default();
        let stopper = cancel.clone();
        let ct = context.ct.clone();
        let canceller = tokio::spawn(async move {
            ct.cancelled().await;
            stopper.cancel();
        });
        let server = self.clone();
        let result =
            tokio::task::spawn_blocking(move || server.call(index, &arguments, &cancel)).await;
        canceller.abort();
        result
            .map(Into::into)
            .map_err(|e| transport::call_panicked(&e))
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(transport::refuse_custom_request(&request))
    }
}
