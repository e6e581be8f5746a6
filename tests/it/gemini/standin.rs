//! The stand-in model ([`crate::standin`]) speaking Google's Gemini API, for driving the real
//! Gemini CLI offline (`GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT`, `GEMINI_API_KEY`).
//!
//! The conversation is `POST /v1beta/models/MODEL:streamGenerateContent?alt=sse`: the history
//! in `contents` (`text`, `functionCall` and `functionResponse` parts), the tools in
//! `tools[].functionDeclarations`; each answer is one server-sent event holding a candidate
//! whose `parts` are the scripted turn. Once the script has run out, the answer is a plain
//! "Done." that ends the conversation. `generateContent` (side requests) gets "Done." too,
//! `countTokens` a count.
//!
//! A scripted turn cannot know the run handle mekara will make, so a string argument
//! `{run_id}` is replaced by the handle found in the latest tool result of the request.

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::{Value as Json, json};

pub use crate::standin::Recorded;
use crate::standin::{Scripted, event_stream, fill_run_id, json_response};

/// One scripted answer of the model: its parts (`text` or `functionCall`).
pub type Turn = Vec<Json>;

/// The running stand-in; stops when dropped.
pub type StandIn = Scripted<Turn>;

/// What one `gemini -p` run left behind.
pub type Session = crate::standin::Session<Turn>;

/// Starts a stand-in answering as the Gemini API with `turns`, in order.
pub fn start(turns: Vec<Turn>) -> StandIn {
    Scripted::start_with(turns, Recorded::is_main, answer)
}

/// A text part.
pub fn text(t: &str) -> Json {
    json!({"text": t})
}

/// A turn the API refuses with HTTP `status` (429: `RESOURCE_EXHAUSTED`, 503: `UNAVAILABLE`,
/// the model overloaded) and its error body, as the Gemini API does.
pub fn http_error(status: u16) -> Turn {
    vec![json!({"http_error": status})]
}

/// A turn the API refuses with 429 because the project's daily quota is used up, as the
/// Gemini API says it: a `QuotaFailure` whose quota is a per-day one, and a `retryDelay`.
pub fn daily_quota() -> Turn {
    vec![
        json!({"http_error": 429, "quota_id": "GenerateRequestsPerDayPerProjectPerModel-FreeTier"}),
    ]
}

/// A `functionCall` part.
pub fn function_call(name: &str, args: Json) -> Json {
    json!({"functionCall": {"name": name, "args": args}})
}

// The Gemini API's shape of a recorded request.
impl Recorded {
    /// The conversation so far.
    pub fn contents(&self) -> &[Json] {
        self.body
            .get("contents")
            .and_then(Json::as_array)
            .map_or(&[], Vec::as_slice)
    }

    /// The names of the functions offered to the model.
    pub fn function_names(&self) -> Vec<String> {
        self.body
            .get("tools")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| t.get("functionDeclarations").and_then(Json::as_array))
            .flatten()
            .filter_map(|f| f.get("name").and_then(Json::as_str).map(str::to_string))
            .collect()
    }

    /// Every `text` part of the conversation, joined.
    pub fn contents_text(&self) -> String {
        let mut out = String::new();
        for t in self
            .parts()
            .filter_map(|p| p.get("text").and_then(Json::as_str))
        {
            out.push_str(t);
            out.push('\n');
        }
        out
    }

    /// The `functionResponse` parts, in order: (function name, `response` object).
    pub fn function_responses(&self) -> Vec<(String, Json)> {
        self.parts()
            .filter_map(|p| p.get("functionResponse"))
            .map(|r| {
                let name = r.get("name").and_then(Json::as_str).unwrap_or_default();
                (
                    name.to_string(),
                    r.get("response").cloned().unwrap_or_default(),
                )
            })
            .collect()
    }

    fn parts(&self) -> impl Iterator<Item = &Json> {
        self.contents()
            .iter()
            .filter_map(|c| c.get("parts").and_then(Json::as_array))
            .flatten()
    }
}

fn answer(recorded: &Recorded, turn: Option<Turn>) -> Response<Full<Bytes>> {
    let path = recorded.path();
    if path.ends_with(":countTokens") {
        return json_response(&json!({"totalTokens": 1}));
    }
    let streamed = path.ends_with(":streamGenerateContent");
    if !streamed && !path.ends_with(":generateContent") {
        return json_response(&json!({}));
    }
    if let Some(status) = turn
        .as_ref()
        .and_then(|t| t.first())
        .and_then(|p| p["http_error"].as_u64())
    {
        let (message, kind) = match status {
            503 => (
                "The model is overloaded. Please try again later.",
                "UNAVAILABLE",
            ),
            _ => (
                "Resource has been exhausted (e.g. check quota).",
                "RESOURCE_EXHAUSTED",
            ),
        };
        let quota = turn
            .as_ref()
            .and_then(|t| t.first())
            .and_then(|p| p["quota_id"].as_str());
        let body = match quota {
            None => json!({"error": {"code": status, "message": message, "status": kind}}),
            Some(quota_id) => json!({"error": {
                "code": status,
                "message": "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.\n* Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier_requests, limit: 250, model: gemini-2.5-flash\nPlease retry in 13.5s.",
                "status": kind,
                "details": [
                    {
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [{
                            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                            "quotaId": quota_id,
                            "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
                            "quotaValue": "250",
                        }],
                    },
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "13s"},
                ],
            }}),
        };
        let mut refused = json_response(&body);
        *refused.status_mut() =
            hyper::StatusCode::from_u16(u16::try_from(status).expect("a status"))
                .expect("a status");
        return refused;
    }
    let mut parts = Json::Array(turn.unwrap_or_else(|| vec![text("Done.")]));
    if let Some(handle) = latest_handle(recorded) {
        fill_run_id(&mut parts, &handle);
    }
    let candidate = json!({
        "candidates": [{
            "content": {"role": "model", "parts": parts},
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
        "modelVersion": "stand-in",
    });
    if streamed {
        event_stream(format!("data: {candidate}\r\n\r\n"))
    } else {
        json_response(&candidate)
    }
}

/// The run handle named in the latest tool result (`"run_id": "HANDLE"` in the call it asks
/// for next).
fn latest_handle(recorded: &Recorded) -> Option<String> {
    let (_, response) = recorded.function_responses().pop()?;
    let text = response.to_string().replace("\\\"", "\"");
    let (_, after) = text.split_once("\"run_id\": \"")?;
    after.split('"').next().map(str::to_string)
}
