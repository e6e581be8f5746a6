//! Listing a server's tools and calling one on an open connection: the cached tool list,
//! policy and schema checks, timeouts, and what may be retried.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::{CallToolRequestParams, ContentBlock, Tool};
use rmcp::service::ServiceError;
use serde_json::{Map, Value as Json};

use super::answers::{ToolInfo, ToolOutput};
use super::auth::auth_error;
use super::error::ClientError;
use super::pool::{Conn, Inner};
use super::{http, schema};

impl Inner {
    /// The server's tools, from the cache unless the server said they changed.
    async fn tools(&self, name: &str, conn: &Conn) -> Result<Arc<Vec<Tool>>, ClientError> {
        let mut cache = conn.tools.lock().await;
        let stale = conn.stale.swap(false, Ordering::SeqCst);
        if let Some(tools) = cache.as_ref()
            && !stale
        {
            return Ok(tools.clone());
        }
        let (_, policy) = self.config(name)?;
        let timeout = policy.timeout(name);
        let listed = tokio::time::timeout(timeout, conn.service.peer().list_all_tools()).await;
        let tools = match listed {
            Err(_) => {
                return Err(ClientError::Timeout {
                    server: name.to_string(),
                    what: "`tools/list`".into(),
                    after: timeout,
                });
            }
            Ok(Err(e)) => return Err(service_error(name, "`tools/list`", e, conn)),
            Ok(Ok(tools)) => Arc::new(tools),
        };
        *cache = Some(tools.clone());
        Ok(tools)
    }

    pub(super) async fn list_one(&self, name: &str) -> Result<Vec<ToolInfo>, ClientError> {
        let (_, policy) = self.config(name)?;
        let conn = self.conn(name).await?;
        let tools = match self.tools(name, &conn).await {
            Err(e) if e.is_retryable() => {
                self.drop_conn(name).await;
                let conn = self.conn(name).await?;
                self.tools(name, &conn).await?
            }
            other => other?,
        };
        Ok(tools
            .iter()
            .map(|t| {
                let read_only = read_only(t);
                ToolInfo {
                    name: t.name.to_string(),
                    description: t
                        .description
                        .as_deref()
                        .and_then(|d| d.lines().find(|l| !l.trim().is_empty()))
                        .unwrap_or("")
                        .trim()
                        .to_string(),
                    read_only,
                    allowed: policy.check_tool(name, &t.name, read_only).map_err(|r| r.1),
                }
            })
            .collect())
    }

    pub(super) async fn call_once(
        &self,
        name: &str,
        tool: &str,
        arguments: Map<String, Json>,
        timeout: Option<Duration>,
    ) -> Result<ToolOutput, ClientError> {
        let (_, policy) = self.config(name)?;
        let timeout = timeout.unwrap_or_else(|| policy.timeout(name));
        let conn = self.conn(name).await?;
        let result = self.call_on(name, tool, arguments, timeout, &conn).await;
        if matches!(&result, Err(e) if e.is_retryable() || matches!(e, ClientError::OutcomeUnknown { .. }))
        {
            // The connection broke or is in an unknown state: the next call opens a new one.
            self.drop_conn(name).await;
        }
        result
    }

    async fn call_on(
        &self,
        name: &str,
        tool: &str,
        arguments: Map<String, Json>,
        timeout: Duration,
        conn: &Conn,
    ) -> Result<ToolOutput, ClientError> {
        let (_, policy) = self.config(name)?;
        let tools = self.tools(name, conn).await?;
        let Some(found) = tools.iter().find(|t| t.name == tool) else {
            let mut known: Vec<String> = tools.iter().map(|t| t.name.to_string()).collect();
            known.sort();
            return Err(ClientError::UnknownTool {
                server: name.to_string(),
                tool: tool.to_string(),
                known,
            });
        };
        policy
            .check_tool(name, tool, read_only(found))
            .map_err(|r| ClientError::Refused(r.0))?;
        schema::validate(&found.input_schema, &arguments).map_err(|reason| {
            ClientError::Invalid {
                server: name.to_string(),
                tool: tool.to_string(),
                reason,
            }
        })?;
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let what = format!("the call of `{tool}`");
        let answer =
            match tokio::time::timeout(timeout, conn.service.peer().call_tool(params)).await {
                Err(_) => Err(ClientError::Timeout {
                    server: name.to_string(),
                    what,
                    after: timeout,
                }),
                Ok(Err(e)) => Err(service_error(name, &what, e, conn)),
                Ok(Ok(answer)) => Ok(answer),
            };
        // From here on the call may have reached the server: trying again is safe only for
        // a tool that says a second call changes nothing.
        let answer = match answer {
            Err(e) if e.is_retryable() && !repeatable(found) => {
                let reason = match &e {
                    ClientError::Timeout { after, .. } => format!(
                        "no answer came within {}",
                        humantime::format_duration(*after)
                    ),
                    ClientError::Transport { reason, .. } => reason.clone(),
                    other => other.to_string(),
                };
                return Err(ClientError::OutcomeUnknown {
                    server: name.to_string(),
                    tool: tool.to_string(),
                    reason,
                });
            }
            other => other?,
        };
        Ok(ToolOutput {
            text: content_text(&answer.content),
            structured: answer.structured_content,
            is_error: answer.is_error.unwrap_or(false),
        })
    }
}

/// Whether calling `tool` twice does no more than calling it once: it is annotated
/// read-only, or idempotent.
fn repeatable(tool: &Tool) -> bool {
    read_only(tool)
        || tool
            .annotations
            .as_ref()
            .and_then(|a| a.idempotent_hint)
            .unwrap_or(false)
}

fn read_only(tool: &Tool) -> bool {
    tool.annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false)
}

fn service_error(server: &str, what: &str, e: ServiceError, conn: &Conn) -> ClientError {
    if let Some((auth, headers)) = &conn.auth
        && let Some(error) = auth_error(server, auth, headers)
    {
        return error;
    }
    match e {
        ServiceError::McpError(data) => ClientError::Rejected {
            server: server.to_string(),
            what: what.to_string(),
            message: data.message.to_string(),
        },
        ServiceError::TransportClosed => ClientError::Transport {
            server: server.to_string(),
            reason: format!("the connection closed during {what} (the server may have exited)"),
        },
        other => ClientError::Transport {
            server: server.to_string(),
            reason: format!("{what} failed: {}", http::explain(&other)),
        },
    }
}

/// A tool's content as text: text blocks as they are, other blocks named.
fn content_text(content: &[ContentBlock]) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(t) => t.text.clone(),
            other => match serde_json::to_value(other) {
                Ok(Json::Object(map)) => {
                    let kind = map.get("type").and_then(Json::as_str).unwrap_or("content");
                    let mime = map
                        .get("mimeType")
                        .and_then(Json::as_str)
                        .map(|m| format!(" {m}"))
                        .unwrap_or_default();
                    match map
                        .get("resource")
                        .and_then(|r| r.get("text"))
                        .and_then(Json::as_str)
                    {
                        Some(text) => text.to_string(),
                        None => format!("[{kind}{mime}]"),
                    }
                }
                _ => "[content]".to_string(),
            },
        })
        .collect();
    parts.join("\n")
}
