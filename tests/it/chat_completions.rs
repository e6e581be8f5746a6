//! The stand-in model ([`crate::standin`]) speaking the OpenAI Chat Completions API, which
//! Qwen Code (`OPENAI_BASE_URL`), OpenCode (an `@ai-sdk/openai-compatible` provider) and
//! Copilot CLI (`COPILOT_PROVIDER_BASE_URL`) can be pointed at.
//!
//! The conversation is `POST …/chat/completions`: the history in `messages` (an assistant
//! message's `tool_calls`, then one `tool` message per call with its result), the tools in
//! `tools[].function`. A request that offers tools takes the next scripted turn; the answer is
//! streamed as server-sent `chat.completion.chunk`s when the request asks for a stream, one
//! `chat.completion` otherwise. Once the script has run out (and for requests without tools,
//! such as a client's title or summary requests), the answer is a plain "Done.".
//!
//! A scripted call cannot know the run handle mekara will make, so a string argument
//! `{run_id}` ([`crate::standin::RUN_ID`]) is replaced by the handle in the latest tool result of the request.

use std::fmt::Write as _;

use serde_json::{Value as Json, json};

use crate::common::{Project, journal_events};
use crate::standin::{Answer, Recorded, Scripted, event_stream, fill_run_id, json_response};

/// One scripted answer of the model.
#[derive(Debug, Clone)]
pub enum Turn {
    /// A text message, which ends the agent's turn.
    Say(String),
    /// A call of the function `name` with `arguments`.
    Call(String, Json),
}

/// The running stand-in; stops when dropped.
pub type StandIn = Scripted<Turn>;

/// What one run of a client left behind.
pub type Session = crate::standin::Session<Turn>;

/// Starts a stand-in answering as the Chat Completions API with `turns`, in order.
pub fn start(turns: Vec<Turn>) -> StandIn {
    Scripted::start_with(turns, takes_turn, answer)
}

/// A call of `name` with `arguments`.
pub fn call(name: &str, arguments: Json) -> Turn {
    Turn::Call(name.to_string(), arguments)
}

/// A text answer.
pub fn say(text: &str) -> Turn {
    Turn::Say(text.to_string())
}

/// The turns of an agent that runs `test/nested` to its end, calling mekara's tools by the
/// names `named` gives them, then says it is done.
pub fn nested_turns(named: impl Fn(&str) -> String) -> Vec<Turn> {
    crate::standin::nested_calls()
        .into_iter()
        .map(|(tool, args)| call(&named(tool), args))
        .chain([say("All done.")])
        .collect()
}

impl Session {
    /// Every function offered to the model, in any request.
    pub fn offered(&self) -> Vec<String> {
        self.standin
            .recorded()
            .iter()
            .flat_map(Recorded::chat_tool_names)
            .collect()
    }

    /// The tool results the model got, from the last request that offered tools (it carries
    /// the whole conversation).
    pub fn tool_results(&self) -> Vec<(String, String)> {
        self.standin
            .recorded()
            .iter()
            .rev()
            .find(|r| !r.chat_tool_names().is_empty())
            .unwrap_or_else(|| panic!("no request offered tools\n{self}"))
            .chat_tool_results()
    }

    /// Asserts that the agent of [`nested_turns`] ran `test/nested` in `project` to its end:
    /// every call (named by `named`) reached mekara and got the reply it should, each reply
    /// names the tools as the client offered them, and the journal says the run completed.
    pub fn assert_nested_run(&self, project: &Project, named: impl Fn(&str) -> String) {
        assert_eq!(
            self.standin.turns_left(),
            0,
            "not every turn was asked for\n{self}"
        );
        let offered = self.offered();
        assert!(
            offered.contains(&named("start")),
            "mekara's tools were not offered: {offered:?}\n{self}"
        );
        let calls = crate::standin::nested_calls();
        let results = self.tool_results();
        assert_eq!(results.len(), calls.len(), "{results:#?}\n{self}");
        for (((tool, _), want), (name, output)) in calls
            .iter()
            .zip(crate::standin::NESTED_REPLIES)
            .zip(&results)
        {
            assert_eq!(name, &named(tool));
            assert!(
                output.contains(want),
                "`{tool}` did not reply `{want}`:\n{output}\n{self}"
            );
            crate::standin::assert_names_offered_tools(output, &offered);
        }
        crate::standin::assert_completed(&journal_events(project));
    }
}

fn takes_turn(request: &Recorded) -> bool {
    request.path().ends_with("/chat/completions") && !request.chat_tool_names().is_empty()
}

// The Chat Completions shape of a recorded request.
impl Recorded {
    /// The names of the functions offered to the model.
    pub fn chat_tool_names(&self) -> Vec<String> {
        self.body
            .get("tools")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
            .collect()
    }

    /// The tool results of the conversation, in order: (the name of the function called,
    /// the result's text).
    pub fn chat_tool_results(&self) -> Vec<(String, String)> {
        let messages = self
            .body
            .get("messages")
            .and_then(Json::as_array)
            .map_or(&[][..], Vec::as_slice);
        let name_of = |id: &str| {
            messages
                .iter()
                .filter_map(|m| m.get("tool_calls").and_then(Json::as_array))
                .flatten()
                .find(|c| c["id"] == id)
                .and_then(|c| c["function"]["name"].as_str())
                .unwrap_or_default()
                .to_string()
        };
        messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                let id = m["tool_call_id"].as_str().unwrap_or_default();
                (name_of(id), content_text(&m["content"]))
            })
            .collect()
    }

    /// Every text of the conversation (system, user and tool messages), joined.
    pub fn chat_text(&self) -> String {
        self.body
            .get("messages")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .map(|m| content_text(&m["content"]))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// A message's content: a string, or parts whose `text` is joined.
fn content_text(content: &Json) -> String {
    match content {
        Json::String(text) => text.clone(),
        Json::Array(parts) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Json::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn answer(request: &Recorded, turn: Option<Turn>) -> Answer {
    if !request.path().ends_with("/chat/completions") {
        // Model listings and the like: an empty list is enough for the clients tested.
        return json_response(&json!({"object": "list", "data": []}));
    }
    let calls = request.chat_tool_results().len();
    let (message, finish) = match turn.unwrap_or_else(|| say("Done.")) {
        Turn::Say(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Turn::Call(name, mut arguments) => {
            if let Some(handle) = request
                .chat_tool_results()
                .last()
                .and_then(|(_, text)| crate::common::run_handle(text))
            {
                fill_run_id(&mut arguments, &handle);
            }
            let call = json!({
                "id": format!("call_{}", calls + 1),
                "type": "function",
                "function": {"name": name, "arguments": arguments.to_string()},
            });
            (
                json!({"role": "assistant", "content": null, "tool_calls": [call]}),
                "tool_calls",
            )
        }
    };
    let usage = json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2});
    let model = request.body["model"].as_str().unwrap_or("stand-in");
    if request.body["stream"] != json!(true) {
        return json_response(&json!({
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }));
    }
    // The tool calls of a streamed delta carry their index.
    let mut delta = message;
    if let Some(calls) = delta["tool_calls"].as_array_mut() {
        for (i, call) in calls.iter_mut().enumerate() {
            call["index"] = json!(i);
        }
    }
    let chunk = |choices: Json, usage: Json| {
        json!({
            "id": "chatcmpl-standin",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": model,
            "choices": choices,
            "usage": usage,
        })
    };
    let events = [
        chunk(
            json!([{"index": 0, "delta": delta, "finish_reason": null}]),
            Json::Null,
        ),
        chunk(
            json!([{"index": 0, "delta": {}, "finish_reason": finish}]),
            Json::Null,
        ),
        chunk(json!([]), usage),
    ];
    let mut body = String::new();
    for event in events {
        let _ = write!(body, "data: {event}\n\n");
    }
    body.push_str("data: [DONE]\n\n");
    event_stream(body)
}
