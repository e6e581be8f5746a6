//! The handler's own words: its instructions, progress messages, and the errors of `tools/call`
//! and `prompts/get`.

use std::fmt::Display;
use std::path::Path;

use super::step_path;
use crate::agents::history::StepStarted;
use crate::agents::tools::{self, AgentTool};
use crate::display::quoted;

/// The server's instructions, given at `initialize`.
pub(crate) const INSTRUCTIONS: &str = "mekara runs workflow scripts. When the user asks for a script \
     (`/name args`), call `start`; then do exactly the one pending item each reply names, and \
     make the call it names (`continue_compiled_script` for an llm step, `finish_nl_script` \
     only when a whole NL script is done). Each reply gives the run's handle \
     (`<run id>.<token>`): pass it as `run_id` in every call for that run.";

/// A step starting, for progress notifications: `test:random[0] $ shuf -i 1-100 -n 1`.
impl Display for StepStarted<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let StepStarted {
            frame,
            index,
            input,
        } = *self;
        write!(f, "{} {}", step_path(frame, index), input.summary())
    }
}

/// A line the running step wrote, for progress notifications.
pub(crate) fn progress_line(step: &str, line: &str) -> String {
    format!("{step}: {line}")
}

/// The `tools/call` error for a tool mekara does not have.
pub(crate) fn unknown_tool(name: &str) -> String {
    format!(
        "unknown tool `{}`; mekara's tools are {}",
        crate::display::echoed(name),
        quoted(tools::ALL.map(AgentTool::name))
    )
}

/// The description of every prompt's one argument.
pub(crate) const PROMPT_ARGUMENT: &str = "Replaces `$ARGUMENTS` in the script's instructions.";

/// What mekara's plugin says, as its server's instructions and to any call, in a project
/// that sets its own `mekara` server up in `file`.
pub(crate) fn stood_down(file: &Path) -> String {
    format!(
        "mekara's Claude Code plugin offers no tools here: `{}` sets this project's own `mekara` \
         server up, so use that server's tools (`mcp__mekara__start` and the others). If they \
         are missing, approve the `mekara` server in `/mcp`.",
        file.display()
    )
}

/// The `prompts/get` error for a script that does not exist.
pub(crate) fn prompt_not_found(name: &str) -> String {
    format!("prompt `{name}` not found; `prompts/list` lists the prompts there are")
}

/// The `prompts/get` error for an `arguments` that is not a string.
pub(crate) const PROMPT_ARGUMENT_NOT_STRING: &str = "prompt argument `arguments` must be a string";

/// The `prompts/get` error for an argument other than `arguments`.
pub(crate) fn prompt_unknown_argument(prompt: impl Display, argument: &str) -> String {
    format!("prompt `{prompt}` has no argument `{argument}`: it takes `arguments`")
}
