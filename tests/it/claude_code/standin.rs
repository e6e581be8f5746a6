//! A scripted stand-in for the Anthropic Messages API, for driving the real Claude Code
//! offline (`ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`).
//!
//! Each main-conversation request (one that offers tools) is answered with the next scripted
//! turn, streamed as server-sent events the way the API streams them; when the script runs
//! out, the answer is a plain "Done." that ends the conversation. Side requests (titles,
//! token counts, quota checks, anything without tools) get a harmless short answer. Every
//! request is recorded, in order (by the shared server of [`crate::standin`]).

use serde_json::{Value as Json, json};

use crate::standin::{Answer, Recorded, Scripted, json_response, sse_response};

/// What a request means in the Messages API.
impl Recorded {
    /// Whether this is a turn of the main conversation (it offers tools).
    pub fn is_main(&self) -> bool {
        self.body
            .get("tools")
            .and_then(Json::as_array)
            .is_some_and(|t| !t.is_empty())
    }

    /// The names of the tools offered to the model (not MCP tools Claude Code defers behind
    /// its ToolSearch).
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect()
    }

    /// Whether this main request asks about a new prompt, rather than going on after a tool
    /// result: its last message does not end with a `tool_result` (a prompt given after one,
    /// as a resumed session's is, comes in the same message after it).
    pub fn is_new_prompt(&self) -> bool {
        self.is_main()
            && !self
                .messages()
                .last()
                .and_then(|m| m.get("content"))
                .and_then(Json::as_array)
                .and_then(|c| c.last())
                .is_some_and(|b| b["type"] == "tool_result")
    }

    /// The conversation's messages.
    pub fn messages(&self) -> &[Json] {
        self.body
            .get("messages")
            .and_then(Json::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// Every text the model was shown in messages (user and system turns alike), joined.
    pub fn message_text(&self) -> String {
        let mut out = String::new();
        for m in self.messages() {
            collect_text(m.get("content").unwrap_or(&Json::Null), &mut out);
        }
        out
    }

    /// The run handle the latest tool result of the conversation shows, if any.
    pub fn latest_handle(&self) -> Option<String> {
        self.messages()
            .iter()
            .rev()
            .filter_map(|m| m.get("content").and_then(Json::as_array))
            .flat_map(|c| c.iter().rev())
            .filter(|c| c.get("type").and_then(Json::as_str) == Some("tool_result"))
            .find_map(|c| {
                let mut text = String::new();
                collect_text(c.get("content").unwrap_or(&Json::Null), &mut text);
                crate::mcp::client::find_handle(&text)
            })
    }

    /// The `tool_result` blocks of the messages, by `tool_use_id`: (text, is_error).
    pub fn tool_result(&self, id: &str) -> Option<(String, bool)> {
        self.messages()
            .iter()
            .filter_map(|m| m.get("content").and_then(Json::as_array))
            .flatten()
            .find(|c| {
                c.get("type").and_then(Json::as_str) == Some("tool_result")
                    && c.get("tool_use_id").and_then(Json::as_str) == Some(id)
            })
            .map(|c| {
                let mut text = String::new();
                collect_text(c.get("content").unwrap_or(&Json::Null), &mut text);
                let is_error = c.get("is_error").and_then(Json::as_bool) == Some(true);
                (text, is_error)
            })
    }
}

fn collect_text(content: &Json, out: &mut String) {
    match content {
        Json::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Json::Array(items) => {
            for item in items {
                match item.get("type").and_then(Json::as_str) {
                    Some("text") => {
                        out.push_str(item.get("text").and_then(Json::as_str).unwrap_or(""));
                        out.push('\n');
                    }
                    Some("tool_result") => {
                        collect_text(item.get("content").unwrap_or(&Json::Null), out);
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// One scripted answer of the model: its content blocks (`text` or `tool_use`). A string
/// [`HANDLE`] in a block is replaced, when the turn is given, by the mekara run handle that
/// the latest tool result shows, as a model copies it from the reply.
pub type Turn = Vec<Json>;

/// The place of the run handle in a [`Turn`].
pub const HANDLE: &str = "<the handle from the latest tool result>";

/// A text block.
pub fn text(t: &str) -> Json {
    json!({"type": "text", "text": t})
}

/// A `tool_use` block.
pub fn tool_use(id: &str, name: &str, input: Json) -> Json {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

/// A turn the API refuses with HTTP `status` and its error body, as Anthropic's API does:
/// 429 `rate_limit_error`, 529 `overloaded_error`.
pub fn http_error(status: u16) -> Turn {
    vec![json!({"type": "http_error", "status": status})]
}

/// The running stand-in; stops when dropped.
pub type StandIn = Scripted<Turn>;

impl StandIn {
    /// Starts a stand-in on 127.0.0.1 answering the main conversation with `turns`, in order.
    pub fn start(turns: Vec<Turn>) -> StandIn {
        Scripted::start_with(turns, Recorded::is_main, answer)
    }

    /// A stand-in whose `turns` answer only the requests that bring a new prompt
    /// ([`Recorded::is_new_prompt`]): what Claude Code sends after a tool result gets the
    /// usual "Done.", so a turn is the answer to one `claude -p` whatever the tools did.
    pub fn start_on_prompts(turns: Vec<Turn>) -> StandIn {
        Scripted::start_with(turns, Recorded::is_new_prompt, answer)
    }

    /// The main-conversation requests so far.
    pub fn main_requests(&self) -> Vec<Recorded> {
        self.recorded()
            .into_iter()
            .filter(Recorded::is_main)
            .collect()
    }
}

fn answer(request: &Recorded, turn: Option<Turn>) -> Answer {
    let path = request.path();
    let body = &request.body;
    let handle = request.latest_handle();
    let turn = turn.map(|blocks| {
        blocks
            .into_iter()
            .map(|block| with_handle(block, handle.as_deref()))
            .collect::<Turn>()
    });
    if path.ends_with("/count_tokens") {
        return json_response(&json!({"input_tokens": 1}));
    }
    if !path.ends_with("/v1/messages") {
        return json_response(&json!({}));
    }
    if let Some(status) = turn
        .as_ref()
        .and_then(|t| t.first())
        .filter(|b| b["type"] == "http_error")
        .and_then(|b| b["status"].as_u64())
    {
        let (kind, message) = match status {
            529 => ("overloaded_error", "Overloaded"),
            _ => (
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            ),
        };
        let mut refused = json_response(&json!({
            "type": "error", "error": {"type": kind, "message": message},
        }));
        *refused.status_mut() =
            hyper::StatusCode::from_u16(u16::try_from(status).expect("a status"))
                .expect("a status");
        return refused;
    }
    let content = turn.unwrap_or_else(|| vec![text("Done.")]);
    let stop = if content
        .iter()
        .any(|c| c.get("type").and_then(Json::as_str) == Some("tool_use"))
    {
        "tool_use"
    } else {
        "end_turn"
    };
    let model = body.get("model").cloned().unwrap_or(json!("stand-in"));
    let message = json!({
        "id": "msg_standin", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    });
    if body.get("stream").and_then(Json::as_bool) != Some(true) {
        let mut message = message;
        message["content"] = Json::Array(content);
        message["stop_reason"] = json!(stop);
        return json_response(&message);
    }
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": message}),
    )];
    for (index, block) in content.iter().enumerate() {
        let (start, delta) = if block.get("type").and_then(Json::as_str) == Some("tool_use") {
            let mut start = block.clone();
            start["input"] = json!({});
            let partial = block.get("input").cloned().unwrap_or(json!({})).to_string();
            (
                start,
                json!({"type": "input_json_delta", "partial_json": partial}),
            )
        } else {
            (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": block.get("text").cloned().unwrap_or(json!(""))}),
            )
        };
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        ));
        events.push((
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        ));
        events.push((
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        ));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 1}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    sse_response(&events)
}

/// `value` with every string [`HANDLE`] replaced by `handle` (left as it is when there is
/// none, so that mekara refuses it and the test shows why).
fn with_handle(value: Json, handle: Option<&str>) -> Json {
    match value {
        Json::String(s) if s == HANDLE => Json::String(handle.map_or(s, str::to_string)),
        Json::Array(items) => {
            Json::Array(items.into_iter().map(|v| with_handle(v, handle)).collect())
        }
        Json::Object(map) => Json::Object(
            map.into_iter()
                .map(|(k, v)| (k, with_handle(v, handle)))
                .collect(),
        ),
        other => other,
    }
}
