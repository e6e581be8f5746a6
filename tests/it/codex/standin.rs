//! A scripted stand-in for the OpenAI Responses API, for driving the real Codex CLI offline
//! (a `[model_providers.*]` with `base_url = "http://127.0.0.1:PORT/v1"` and
//! `wire_api = "responses"`, the one wire API Codex 0.169 speaks).
//!
//! Each `POST /v1/responses` is answered with the next scripted turn, streamed as server-sent
//! events (`response.created`, one `response.output_item.done` per item,
//! `response.completed`); when the script runs out, the answer is a plain "Done." message,
//! which ends `codex exec`. A turn is computed from the request it answers, so the model can
//! use what a tool result said (a run's handle). Every request is recorded, in order (by the
//! shared server of [`crate::standin`]).

use serde_json::{Value as Json, json};

use crate::standin::{Answer, Recorded, Scripted, json_response, sse_response};

/// What a request means in the Responses API.
impl Recorded {
    /// Whether this asks the model for its next turn (`POST /v1/responses`).
    pub fn is_model_request(&self) -> bool {
        self.path().ends_with("/responses")
    }

    /// The conversation so far: messages, function calls and their outputs.
    pub fn input(&self) -> &[Json] {
        self.body
            .get("input")
            .and_then(Json::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// The text of the `function_call_output` for `call_id`, when the request carries it.
    pub fn function_output(&self, call_id: &str) -> Option<String> {
        let item = self.input().iter().find(|item| {
            item.get("type").and_then(Json::as_str) == Some("function_call_output")
                && item.get("call_id").and_then(Json::as_str) == Some(call_id)
        })?;
        Some(match item.get("output") {
            Some(Json::String(text)) => text.clone(),
            Some(Json::Array(parts)) => parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Json::as_str))
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
    }

    /// The text of the last `function_call_output` of the conversation.
    pub fn last_function_output(&self) -> Option<String> {
        let call_id = self
            .input()
            .iter()
            .rev()
            .find(|item| item.get("type").and_then(Json::as_str) == Some("function_call_output"))?
            .get("call_id")?
            .as_str()?;
        self.function_output(call_id)
    }

    /// The functions offered to the model, as `(namespace, name)`: a namespace groups the
    /// tools of one MCP server (`mcp__mekara`); built-in tools have none.
    pub fn functions(&self) -> Vec<(Option<String>, String)> {
        let mut out = Vec::new();
        let tools = self.body.get("tools").and_then(Json::as_array);
        for tool in tools.into_iter().flatten() {
            let name = tool.get("name").and_then(Json::as_str).unwrap_or_default();
            match tool.get("type").and_then(Json::as_str) {
                Some("function") => out.push((None, name.to_string())),
                Some("namespace") => {
                    let inner = tool.get("tools").and_then(Json::as_array);
                    for function in inner.into_iter().flatten() {
                        let function = function.get("name").and_then(Json::as_str);
                        out.push((
                            Some(name.to_string()),
                            function.unwrap_or_default().to_string(),
                        ));
                    }
                }
                _ => {}
            }
        }
        out
    }
}

/// One scripted answer of the model: its output items, from the request it answers.
pub type Turn = Box<dyn FnOnce(&Recorded) -> Vec<Json> + Send>;

/// A turn that only says `text`.
pub fn say(text: &str) -> Turn {
    let text = text.to_string();
    Box::new(move |_| vec![message(&text)])
}

/// A turn that calls `name` in `namespace` (an MCP server's tools, `mcp__mekara`) with the
/// arguments `arguments` makes from the request (for example, with the run handle the last
/// tool result gave).
pub fn call(
    call_id: &str,
    namespace: &str,
    name: &str,
    arguments: impl FnOnce(&Recorded) -> Json + Send + 'static,
) -> Turn {
    let (call_id, namespace, name) = (call_id.to_string(), namespace.to_string(), name.to_string());
    Box::new(move |request| {
        vec![json!({
            "type": "function_call", "id": format!("fc_{call_id}"), "call_id": call_id,
            "namespace": namespace, "name": name,
            "arguments": arguments(request).to_string(),
        })]
    })
}

/// A turn the API refuses with HTTP `status` (429: a rate limit) and its error body, as
/// OpenAI's API does.
pub fn http_error(status: u16) -> Turn {
    Box::new(move |_| vec![json!({"type": "http_error", "status": status})])
}

/// An assistant message item.
fn message(text: &str) -> Json {
    json!({
        "type": "message", "role": "assistant", "id": "msg_standin",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    })
}

/// The running stand-in; stops when dropped.
pub type StandIn = Scripted<Turn>;

impl StandIn {
    /// Starts a stand-in on 127.0.0.1 answering the model requests with `turns`, in order.
    pub fn start(turns: Vec<Turn>) -> StandIn {
        Scripted::start_with(turns, Recorded::is_model_request, answer)
    }

    /// The provider's `base_url`: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url())
    }

    /// The model requests so far.
    pub fn responses(&self) -> Vec<Recorded> {
        self.recorded()
            .into_iter()
            .filter(Recorded::is_model_request)
            .collect()
    }
}

fn answer(request: &Recorded, turn: Option<Turn>) -> Answer {
    if !request.is_model_request() {
        return json_response(&json!({}));
    }
    let items = match turn {
        Some(turn) => turn(request),
        None => vec![message("Done.")],
    };
    if let Some(status) = items
        .first()
        .filter(|i| i["type"] == "http_error")
        .and_then(|i| i["status"].as_u64())
    {
        let mut refused = json_response(&json!({"error": {
            "message": "Rate limit reached for requests per min. Please try again in 1s.",
            "type": "requests", "param": null, "code": "rate_limit_exceeded",
        }}));
        *refused.status_mut() =
            hyper::StatusCode::from_u16(u16::try_from(status).expect("a status"))
                .expect("a status");
        return refused;
    }
    let id = "resp_standin";
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "response": {"id": id}}),
    )];
    for (index, item) in items.into_iter().enumerate() {
        events.push((
            "response.output_item.done",
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ));
    }
    events.push((
        "response.completed",
        json!({"type": "response.completed", "response": {"id": id, "usage": {
            "input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
            "output_tokens_details": null, "total_tokens": 2,
        }}}),
    ));
    sse_response(&events)
}
