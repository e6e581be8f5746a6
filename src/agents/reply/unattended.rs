//! Unattended runs: the same text, to an agent process mekara starts (`mekara run --agent`).

use std::fmt::Write as _;

use serde_json::Value as Json;

use super::with_newline;

/// What an agent process is told before the reply text: it has no mekara tools, and answers
/// by returning.
pub(crate) const UNATTENDED: &str = "mekara is running this workflow unattended and started \
     you for one item of it. You have no mekara tools: where the text below says to call \
     `continue_compiled_script`, end your turn giving the expected outputs as your \
     structured answer; where it says to call `finish_nl_script`, do the work, then end your \
     turn. Do not ask the user anything: nobody is watching.";

/// The prompt an agent's own CLI reads on stdin for `request`: the text of the step, told that
/// no one is there to answer, with why the previous answer was refused.
pub(crate) fn cli_prompt(request: &crate::agents::headless::Request) -> String {
    unattended_prompt(&request.prompt, request.previous_error.as_deref())
}

/// The whole prompt for an agent process: [`UNATTENDED`], why its last answer was refused
/// (when it was), then the reply text an agent over MCP would read.
pub(crate) fn unattended_prompt(reply: &str, previous_error: Option<&str>) -> String {
    let mut out = format!("{UNATTENDED}\n\n");
    if let Some(error) = previous_error {
        let _ = write!(
            out,
            "Your last answer for this item was refused:\n\n<error>\n{}</error>\n\n\
             Answer again, fixing that.\n\n",
            with_newline(error)
        );
    }
    out.push_str(reply);
    out
}

/// What an agent without a structured-output option (Gemini CLI) is told after the prompt:
/// end its answer with the outputs as one JSON object fitting `schema`.
pub(crate) fn json_answer_request(schema: &Json) -> String {
    let schema = serde_json::to_string_pretty(schema).unwrap_or_else(|_| schema.to_string());
    format!(
        "\n\nYour structured answer: end your reply with the expected outputs as one JSON \
         object, with nothing after it, that fits this JSON Schema:\n\n```json\n{schema}\n```\n"
    )
}
