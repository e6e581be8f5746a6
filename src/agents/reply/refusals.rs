//! Refusals: why a call was refused, and what to call instead.

use super::start::project_script_question;
use super::{REFUSED, START_A_SCRIPT, Unchanged, refused, resume_call, sentence};
use crate::agents::tools::{AgentTool, ArgumentError};
use crate::display::quoted;
use crate::engine::{EngineError, Pending, Waiting};
use crate::script::ScriptError;

/// The refusal of a call whose arguments do not fit its tool.
pub(crate) fn argument_refusal(error: &ArgumentError) -> String {
    refused(&sentence(&argument_error(error)), Unchanged::Run)
}

fn argument_error(error: &ArgumentError) -> String {
    match error {
        ArgumentError::Unknown { tool, argument } => {
            let known = tool.argument_names();
            let expected = if known.is_empty() {
                "it takes no arguments".to_string()
            } else {
                format!("it takes {}", quoted(&known))
            };
            format!("`{}` has no argument `{argument}`: {expected}", tool.name())
        }
        ArgumentError::Missing { tool, argument } => {
            format!("`{}` needs the argument `{argument}` (a string)", tool.name())
        }
        ArgumentError::NotString {
            tool,
            argument,
            found,
        } => format!(
            "argument `{argument}` of `{}` must be a string, not {found}",
            tool.name()
        ),
        ArgumentError::EmptyName => {
            "argument `name` of `start` is empty: give a script's name (`list_scripts` lists them)"
                .to_string()
        }
        ArgumentError::NoOutputs => {
            "`continue_compiled_script` needs the argument `outputs` (an object; `{}` when no outputs are expected)"
                .to_string()
        }
        ArgumentError::OutputsNotObject { found } => format!(
            "argument `outputs` of `continue_compiled_script` must be an object of named outputs, not {found}"
        ),
        ArgumentError::RetryAndFrom => {
            "`resume` takes `retry` or `from`, not both: `retry: true` runs the failed (or changed) step again, `from` a step you name"
                .to_string()
        }
        ArgumentError::AnswerWithoutRun => {
            "`answer` of `resume` needs `run_id`, the handle of the run whose question the user answered. The way to answer is `continue_compiled_script` with `{\"run_id\": \"<run id>.<token>\", \"outputs\": {\"answer\": \"<the user's answer>\"}}`"
                .to_string()
        }
        ArgumentError::RewindWithoutRun => {
            "`retry` and `from` of `resume` need `run_id`, the handle of the run to go on with"
                .to_string()
        }
        ArgumentError::NotBoolean {
            tool,
            argument,
            found,
        } => format!(
            "argument `{argument}` of `{}` must be a boolean, not {found}",
            tool.name()
        ),
    }
}

/// Says why `error` stopped a call of `tool`, and what to call instead. `last` is the
/// pending item the agent was last shown; `run` the session's run.
pub(crate) fn refusal(
    tool: AgentTool,
    error: &EngineError,
    last: Option<&Pending>,
    run: Option<&str>,
) -> String {
    let pending_path = match last {
        Some(
            Pending::Llm { path, .. } | Pending::Nl { path, .. } | Pending::Tasks { path, .. },
        ) => format!(" `{path}`"),
        Some(Pending::Fallback { path, .. } | Pending::Ask { path, .. }) => format!(" `{path}`"),
        _ => String::new(),
    };
    match error {
        EngineError::WrongCall { waiting, .. } => {
            let instead = match waiting {
                Waiting::LlmStep => format!(
                    "An llm step{pending_path} is pending, not an NL script: do that one \
                     step, then call `continue_compiled_script` with its outputs. \
                     `finish_nl_script` is only for NL scripts and failed scripts finished \
                     by hand."
                ),
                Waiting::NlScript => format!(
                    "An NL script{pending_path} is pending, not an llm step: follow all of \
                     its instructions, then call `finish_nl_script`."
                ),
                Waiting::Fallback => format!(
                    "A failed script{pending_path} is waiting to be finished by hand: do \
                     what is left of it, then call `finish_nl_script`."
                ),
                Waiting::Answer => format!(
                    "A question for the user{pending_path} is pending: ask the user, then call \
                     `continue_compiled_script` with `{{\"outputs\": {{\"answer\": \"<the user's \
                     answer>\"}}}}`."
                ),
                Waiting::Nothing => {
                    format!("Nothing is pending: no script is running. {START_A_SCRIPT}.")
                }
            };
            refused(
                &format!("`{}` does not fit now. {instead}", tool.name()),
                Unchanged::Run,
            )
        }
        EngineError::Unfit { .. } => refused(
            &format!(
                "{error}. Call `continue_compiled_script` again with a number a script can \
                 hold, or with the number as a string."
            ),
            Unchanged::Run,
        ),
        EngineError::Oversize { .. } => refused(
            &format!(
                "{error}. It is too large: call `continue_compiled_script` again with a \
                 smaller value, at most {} bytes of JSON in all.",
                crate::engine::step::MAX_KEPT
            ),
            Unchanged::Run,
        ),
        EngineError::NotAChoice { .. } => refused(
            &format!(
                "{error}. Ask the user again, showing the choices, and call \
                 `continue_compiled_script` with their answer; do not choose for them."
            ),
            Unchanged::Run,
        ),
        EngineError::Outputs { .. } => refused(
            &format!(
                "{error}. Call `continue_compiled_script` again with every expected output in \
                 `outputs`."
            ),
            Unchanged::Run,
        ),
        EngineError::Script(ScriptError::NotFound { searched, .. })
            if searched.is_outside_project() =>
        {
            refused(
                &format!(
                    "{error}. mekara's server runs in the folder its client started it in: \
                     ask the user to start you in their project's folder, or to run `mekara \
                     install` in this one. `list_scripts` lists the scripts there are here."
                ),
                Unchanged::Run,
            )
        }
        EngineError::Script(ScriptError::NotFound { suggestions, .. })
            if suggestions.is_empty() =>
        {
            refused(
                &format!("{error}. Call `list_scripts` to see the scripts there are."),
                Unchanged::Run,
            )
        }
        EngineError::Script(ScriptError::Shadows(shadowing)) => refused(
            &format!(
                "{error}. It runs this repository's own commands, so the user decides: ask \
                 them {} If they say yes, call `start` again with the same `name` and \
                 `arguments` plus `\"project_script\": true`. If they say no, tell them that \
                 {}, and stop. Never set `project_script` without their yes.",
                project_script_question(shadowing),
                shadowing.way_back()
            ),
            Unchanged::Run,
        ),
        EngineError::Script(_)
        | EngineError::BadWorkingDir { .. }
        | EngineError::TooDeep { .. } => refused(&sentence(&error.to_string()), Unchanged::Run),
        EngineError::Cancelled { .. } => format!(
            "Stopped: {error}. The step that was running left no record and runs again when \
             the run is resumed: call {}.",
            resume_call(run.unwrap_or_default())
        ),
        // Its evaluator child died (the OOM killer, say): the journal holds every step that
        // ended, and the run goes on from it with its handle.
        EngineError::Evaluation { .. } => format!(
            "Stopped: {error}. Call {} to go on from the run's journal.",
            resume_call(run.unwrap_or_default())
        ),
        _ => format!("Error: {error}."),
    }
}

/// The error of a call that failed inside mekara itself (a panic: a bug).
pub(crate) fn internal_error(message: &str) -> String {
    format!(
        "Error: mekara failed inside this call ({message}); this is a bug in mekara. Steps that \
         finished are in the run's journal: call `status` to see where the run stands."
    )
}

/// The refusal of a call that arrived while another call of the session runs (`what`: the
/// step it is running). It has no line on what is unchanged: the other call may change the
/// run yet.
pub(crate) fn busy(what: Option<&str>) -> String {
    format!(
        "{REFUSED}another call of this session is still running{}. Wait for its reply, then \
         call again.",
        what.map(|w| format!(" ({w})")).unwrap_or_default()
    )
}
