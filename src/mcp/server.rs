//! `Server`: the MCP face of a [`Registry`] of runs, for one connection (stdio, or one
//! HTTP session or stateless request). It turns requests into tool calls, runs them on a
//! blocking thread (auto steps block), forwards progress and cancellation, and serves NL
//! scripts as prompts.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
    InitializeRequestParams, InitializeResult, JsonObject, ListPromptsResult, ListToolsResult,
    PaginatedRequestParams, ProgressNotificationParam, Prompt, PromptArgument, PromptMessage, Role,
    ServerCapabilities, ServerConfig, ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio::sync::watch;

use super::registry::{Driving, Registry, Slot};
use super::vcr::Recorder;
use crate::agents::clients::{AgentClient, Served};
use crate::agents::history::Progress;
use crate::agents::reply::{self, Reply};
use crate::agents::session::Session;
use crate::agents::tools::{self, AgentTool};
use crate::engine::CancelToken;
use crate::transport;

/// How often progress notifications go out at most, per call.
const PROGRESS_EVERY: Duration = Duration::from_millis(100);

/// Serves one connection's calls on the server's runs. Cloned by the transport; clones
/// share the connection.
#[derive(Clone)]
pub(crate) struct Server {
    registry: Arc<Registry>,
    /// The runs this connection drives: where calls without `run_id` go.
    driving: Arc<Mutex<Driving>>,
    recorder: Option<Arc<Recorder>>,
}

impl Server {
    /// A connection to the runs of `registry`, recording to `recorder` when given.
    pub(crate) fn new(registry: Arc<Registry>, recorder: Option<Arc<Recorder>>) -> Server {
        Server {
            registry,
            driving: Arc::default(),
            recorder,
        }
    }

    /// Stops the steps running now, if any: the server is going away.
    pub(crate) fn stop(&self) {
        self.registry.stop();
    }

    /// Runs a call of `tool` on a blocking thread (recording it when VCR is on), with
    /// progress notifications when the request asked for them, and the request's
    /// cancellation stopping the running step of its run.
    async fn run(
        &self,
        tool: AgentTool,
        input: Option<JsonObject>,
        context: &RequestContext<RoleServer>,
    ) -> Result<Reply, McpError> {
        let (progress_tx, progress_rx) = watch::channel(None::<String>);
        let forwarder = context
            .meta
            .get_progress_token()
            .map(|token| tokio::spawn(forward_progress(context.peer.clone(), token, progress_rx)));
        // The run's token, once the call knows which run it goes to.
        let target: Arc<Mutex<Option<CancelToken>>> = Arc::default();
        let ct = context.ct.clone();
        let this_call = context.ct.clone();
        let canceller = {
            let target = target.clone();
            tokio::spawn(async move {
                ct.cancelled().await;
                tracing::info!("call cancelled by the client: stopping the running step");
                if let Some(cancel) = target.lock().ok().and_then(|t| t.clone()) {
                    cancel.cancel();
                }
            })
        };
        let recorder = self.recorder.clone();
        let registry = self.registry.clone();
        let driving = self.driving.clone();
        let result = tokio::task::spawn_blocking(move || {
            // The run the call went to, once it is known.
            let current: Mutex<Option<Arc<Slot>>> = Mutex::new(None);
            let step = Mutex::new(String::new());
            let progress = |p: Progress<'_>| {
                let message = match p {
                    Progress::Started(started) => {
                        let what = started.to_string();
                        if let Some(slot) = current.lock().ok().and_then(|c| c.clone())
                            && let Ok(mut r) = slot.running.lock()
                        {
                            *r = Some(what.clone());
                        }
                        if let Ok(mut s) = step.lock() {
                            s.clone_from(&what);
                        }
                        what
                    }
                    Progress::Line(line) => {
                        let step = step.lock().map(|s| s.clone()).unwrap_or_default();
                        reply::progress_line(&step, line)
                    }
                    // A script's print is in the log; progress is about steps.
                    Progress::Printed(_) => return,
                };
                let _ = progress_tx.send(Some(message));
            };
            if let Some(recorder) = &recorder {
                recorder.call(tool.name(), input.as_ref());
            }
            let reply = registry.handle(tool, input.as_ref(), &driving, &progress, &|slot| {
                let session = enter(slot, &this_call)?;
                if let Ok(mut t) = target.lock() {
                    *t = Some(slot.cancel.clone());
                }
                if let Ok(mut c) = current.lock() {
                    *c = Some(slot.clone());
                }
                Ok(session)
            });
            if let Some(recorder) = &recorder {
                recorder.reply(&reply);
            }
            reply
        })
        .await;
        canceller.abort();
        if let Some(forwarder) = forwarder {
            forwarder.abort();
        }
        result.map_err(|e| transport::call_panicked(&e))
    }
}

/// Holds `slot`'s session for `this_call`, or says the run is busy with another call.
///
/// Once the client has cancelled the call holding the session, it gets no reply to wait
/// for, so a call that arrives while the cancelled one winds down (its step being killed,
/// the run synced) waits the moment that takes instead of being refused. rmcp cancels the
/// token as it reads the notification, before it reads the next request, so the next call
/// always sees it.
fn enter<'a>(
    slot: &'a Arc<Slot>,
    this_call: &CancellationToken,
) -> Result<MutexGuard<'a, Session>, Reply> {
    let given_up = || {
        slot.holder
            .lock()
            .is_ok_and(|h| h.as_ref().is_some_and(CancellationToken::is_cancelled))
    };
    let session = match slot.session.try_lock() {
        Ok(session) => session,
        // A call that panicked is caught in the registry, so this is belt and braces: a
        // poisoned session is still the session (its run's truth is the journal).
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        Err(_) if given_up() => slot
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
        Err(_) => {
            let what = slot.running.lock().map(|r| r.clone()).unwrap_or_default();
            return Err(Reply::error(reply::busy(what.as_deref())));
        }
    };
    // A cancellation that reached the run after its step had ended must not stop this
    // call's steps; one of this call's own is kept.
    slot.cancel.reset();
    if this_call.is_cancelled() {
        slot.cancel.cancel();
    }
    if let Ok(mut h) = slot.holder.lock() {
        *h = Some(this_call.clone());
    }
    Ok(session)
}

/// Sends the latest progress message at most every [`PROGRESS_EVERY`].
async fn forward_progress(
    peer: rmcp::Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
    mut messages: watch::Receiver<Option<String>>,
) {
    let mut count = 0u32;
    while messages.changed().await.is_ok() {
        let Some(message) = messages.borrow_and_update().clone() else {
            continue;
        };
        count += 1;
        let sent = peer
            .notify_progress(
                ProgressNotificationParam::new(token.clone(), f64::from(count))
                    .with_message(message),
            )
            .await;
        if let Err(e) = sent {
            tracing::debug!("progress notification not sent: {e}");
            return;
        }
        tokio::time::sleep(PROGRESS_EVERY).await;
    }
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_prompts()
                .build(),
        )
        .with_server_info(
            Implementation::new("mekara", env!("CARGO_PKG_VERSION"))
                .with_title("mekara: workflows as code"),
        )
        .with_instructions(match &self.registry.plan().stood_down {
            Some(file) => reply::stood_down(file),
            None => reply::INSTRUCTIONS.to_string(),
        })
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let client = AgentClient::from_client_info(&request.client_info.name, self.served());
        tracing::debug!(
            "client `{}` {} ({client:?})",
            request.client_info.name,
            request.client_info.version
        );
        let mut result = self.negotiate_initialize(&request)?;
        result.instructions = result
            .instructions
            .map(|text| reply::for_client(&text, client));
        Ok(result)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        if self.registry.plan().stood_down.is_some() {
            return Ok(ListToolsResult::with_all_items(Vec::new()));
        }
        let client = self.client(&context);
        Ok(ListToolsResult::with_all_items(
            tools::ALL
                .iter()
                .map(|t| tool_definition(*t, client))
                .collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        AgentTool::named(name).map(|tool| tool_definition(tool, AgentClient::OTHER))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let Some(tool) = AgentTool::named(&request.name) else {
            return Err(McpError::invalid_params(
                reply::unknown_tool(&request.name),
                None,
            ));
        };
        if let Some(file) = &self.registry.plan().stood_down {
            return Err(McpError::invalid_request(reply::stood_down(file), None));
        }
        let reply = self.run(tool, request.arguments, &context).await?;
        let content = vec![ContentBlock::text(reply::for_client(
            &reply.text,
            self.client(&context),
        ))];
        // The run's handle is in the text only, never in `structuredContent`: Claude Code
        // gives the model a result's structured content *instead of* its text, so the reply
        // (what ran, what is pending, how to go on) would not reach the agent.
        let result = if reply.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        Ok(result.into())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        Err(transport::refuse_custom_request(&request))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        let required = context.peer.peer_info().is_some_and(|info| {
            AgentClient::from_client_info(&info.client_info.name, self.served())
                .fills_only_required_arguments()
        });
        let prompts = self
            .registry
            .resolver()
            // The bundled demos are for mekara's own tests, never offered as prompts.
            .list(crate::script::Listing::Usual)
            .into_iter()
            .map(|entry| {
                Prompt::new(
                    entry.name.to_string(),
                    Some(entry.description).filter(|d| !d.is_empty()),
                    Some(vec![
                        PromptArgument::new("arguments")
                            .with_description(reply::PROMPT_ARGUMENT)
                            .with_required(required),
                    ]),
                )
            })
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        let script = match self.registry.resolver().resolve(&request.name) {
            Ok(script) => script,
            Err(crate::script::ScriptError::NotFound {
                name, suggestions, ..
            }) if suggestions.is_empty() => {
                return Err(McpError::invalid_params(
                    reply::prompt_not_found(&name),
                    None,
                ));
            }
            Err(e) => return Err(McpError::invalid_params(format!("{e}"), None)),
        };
        let arguments = match request.arguments.as_ref().and_then(|a| a.get("arguments")) {
            None | Some(serde_json::Value::Null) => String::new(),
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(_) => {
                return Err(McpError::invalid_params(
                    reply::PROMPT_ARGUMENT_NOT_STRING,
                    None,
                ));
            }
        };
        if let Some(unknown) = request
            .arguments
            .iter()
            .flat_map(|a| a.keys())
            .find(|k| *k != "arguments")
        {
            return Err(McpError::invalid_params(
                reply::prompt_unknown_argument(&script.name, unknown),
                None,
            ));
        }
        let description = script.description();
        let text = if script.compiled.is_some() {
            reply::for_client(
                &reply::compiled_prompt(&script.name.to_string(), &arguments),
                self.client(&context),
            )
        } else {
            script.instructions(&arguments)
        };
        let result = GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]);
        Ok(if description.is_empty() {
            result
        } else {
            result.with_description(description)
        }
        .into())
    }
}

impl Server {
    /// How the client was given this server.
    fn served(&self) -> Served {
        self.registry.plan().served
    }

    /// The client on the other end of `context`'s connection: named by the request's own
    /// `_meta` (`2026-07-28` has no handshake: Claude Code 2.1 and Copilot CLI name themselves
    /// in each request; over HTTP such a request comes with a stand-in `initialize` of the
    /// transport's), else by the connection's `initialize` (up to protocol `2025-11-25`).
    fn client(&self, context: &RequestContext<RoleServer>) -> AgentClient {
        let named = context
            .meta
            .client_info()
            .map(|info| info.name)
            .or_else(|| {
                context
                    .peer
                    .peer_info()
                    .map(|info| info.client_info.name.clone())
            });
        named.map_or(AgentClient::OTHER, |name| {
            AgentClient::from_client_info(&name, self.served())
        })
    }
}

/// A tool as `tools/list` gives it to `client` (its description names the other tools as
/// the client's model sees them).
fn tool_definition(tool: AgentTool, client: AgentClient) -> rmcp::model::Tool {
    let annotations = if tool.read_only() {
        ToolAnnotations::with_title(tool.title())
            .read_only(true)
            .idempotent(true)
            .open_world(false)
    } else {
        ToolAnnotations::with_title(tool.title())
            .read_only(false)
            .destructive(true)
            .idempotent(false)
            .open_world(true)
    };
    rmcp::model::Tool::new(
        tool.name(),
        reply::for_client(tool.description(), client),
        tool.input_schema(),
    )
    .with_title(tool.title())
    .with_annotations(annotations)
}
