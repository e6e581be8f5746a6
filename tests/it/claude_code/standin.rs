//! The stand-in model ([`crate::standin`]) speaking the Anthropic Messages API, for driving
//! the real Claude Code offline (`ANTHROPIC_BASE_URL=http://127.0.0.1:PORT`).
//!
//! Each main-conversation request (one that offers tools) is answered with the next scripted
//! turn, streamed as server-sent events the way the API streams them; when the script runs
//! out, the answer is a plain "Done." that ends the conversation. Side requests (titles,
//! token counts, quota checks, anything without tools) get a harmless short answer.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::{Value as Json, json};

pub use crate::standin::{Recorded, Session, StandIn, Turn};
use crate::standin::{json_response, sse_response};

/// Starts a stand-in answering as the Messages API with `turns`, in order.
pub fn start(turns: Vec<Turn>) -> StandIn {
    StandIn::start(turns, answer)
}

// The Messages API's shape of a recorded request.
impl Recorded {
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

/// A text block.
pub fn text(t: &str) -> Json {
    json!({"type": "text", "text": t})
}

/// A `tool_use` block.
pub fn tool_use(id: &str, name: &str, input: Json) -> Json {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

fn answer(recorded: &Recorded, turn: Option<Turn>) -> Response<Full<Bytes>> {
    let (path, body) = (&recorded.path, &recorded.body);
    if path.ends_with("/count_tokens") {
        return json_response(&json!({"input_tokens": 1}));
    }
    if !path.ends_with("/v1/messages") {
        return json_response(&json!({}));
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
    let mut sse = String::new();
    let mut event = |name: &str, data: Json| {
        sse.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    event(
        "message_start",
        json!({"type": "message_start", "message": message}),
    );
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
        event(
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": start}),
        );
        event(
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
        event(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": index}),
        );
    }
    event(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null},
               "usage": {"output_tokens": 1}}),
    );
    event("message_stop", json!({"type": "message_stop"}));
    sse_response(sse)
}
