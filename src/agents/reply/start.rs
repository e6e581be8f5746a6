//! What an agent is told about starting a script: what to do after `start`, the question to ask
//! before a project's own script that has a bundled one's name, and the prompt of a compiled
//! script.

/// What to do once `start` is called, said wherever an agent is sent to `start` (the
/// hooks, the command files `mekara install` writes, the prompts of compiled scripts), after
/// "Call the `start` tool with …": follow the replies, passing the run's handle on.
pub(crate) const AFTER_START: &str = "then do what its reply says, step by step, passing the \
     run's handle that the reply gives (`<run id>.<token>`) as `run_id` in every later call for \
     that run.";

/// The question an agent asks the user before it runs a project's own script that has the
/// name of a bundled one: the refusal of `start` and the hooks' reroute put it the same way.
pub(crate) fn project_script_question(shadowing: &crate::script::Shadowing) -> String {
    format!(
        "\"This project has its own `{}` script ({}), which would run instead of mekara's \
         bundled `{}`; {}. Run the project's script?\"",
        shadowing.name,
        shadowing.files_named(),
        shadowing.bundled,
        shadowing.what_runs()
    )
}

/// The text of `prompts/get` for compiled script `name`: the call to `start`, not the NL
/// instructions (which the agent follows by hand only when a step fails, as the reply then
/// says).
pub(crate) fn compiled_prompt(name: &str, arguments: &str) -> String {
    let call = serde_json::json!({ "name": name, "arguments": arguments });
    format!(
        "`{name}` is a compiled mekara script: mekara runs its automatic steps itself. Do not \
         follow its Markdown instructions by hand. Call mekara's `start` tool with exactly \
         these arguments (JSON):\n\n{call}\n\n{AFTER_START}\n"
    )
}
