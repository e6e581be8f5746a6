//! Claude Code hooks: `mekara hook reroute-user-commands` (UserPromptSubmit) and
//! `mekara hook reroute-agent-commands` (PreToolUse on the `Skill` tool, and on the
//! `SlashCommand` tool through which Claude Code before 2.0.73 offered commands).
//!
//! Both send a compiled script to `mcp__mekara__start` instead of letting the agent follow
//! its Markdown by hand. They run on every prompt, so this module only parses the hook's
//! JSON and resolves a name: no async runtime, no Starlark. It must never break a session:
//! whatever goes wrong, the hook says nothing (the caller exits 0) and the reason goes to the
//! log. It owns the hook text; it does not touch the engine or the MCP server. The tool's
//! name comes from its caller, as Claude Code's file in [`crate::agents`] names it (that
//! file registers the hooks, so this module does not import it).

use std::path::Path;

use serde_json::{Value as Json, json};

use crate::agents::reply::AFTER_START;
use crate::display::SHOWN_ARGUMENTS;
use crate::paths::Locations;
use crate::script::Resolver;

/// The hooks mekara provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hook {
    /// UserPromptSubmit: a typed `/name args` for a compiled script.
    RerouteUserCommands,
    /// PreToolUse (matcher `Skill|SlashCommand`): the agent reaching for a compiled script.
    RerouteAgentCommands,
}

impl Hook {
    /// Every hook, in the order `mekara install` adds them.
    pub(crate) const ALL: [Hook; 2] = [Hook::RerouteUserCommands, Hook::RerouteAgentCommands];

    /// The subcommand name (`mekara hook <name>`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Hook::RerouteUserCommands => "reroute-user-commands",
            Hook::RerouteAgentCommands => "reroute-agent-commands",
        }
    }

    /// The Claude Code hook event it answers.
    pub(crate) fn event(self) -> &'static str {
        match self {
            Hook::RerouteUserCommands => "UserPromptSubmit",
            Hook::RerouteAgentCommands => "PreToolUse",
        }
    }

    /// The tool matcher it is registered with, for tool events.
    pub(crate) fn matcher(self) -> Option<&'static str> {
        match self {
            Hook::RerouteUserCommands => None,
            Hook::RerouteAgentCommands => Some("Skill|SlashCommand"),
        }
    }

    /// Matchers earlier mekaras registered it with: `install` replaces them and `uninstall`
    /// removes them too.
    pub(crate) fn earlier_matchers(self) -> &'static [&'static str] {
        match self {
            Hook::RerouteUserCommands => &[],
            Hook::RerouteAgentCommands => &["Skill"],
        }
    }

    /// The command line Claude Code runs.
    pub(crate) fn command(self) -> String {
        format!("mekara hook {}", self.name())
    }
}

/// Why a hook said nothing although it was given something: logged, never shown.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HookInputError {
    /// Stdin was empty.
    #[error("the hook's input is empty; expected Claude Code's hook JSON on stdin")]
    Empty,
    /// Stdin was not JSON.
    #[error("the hook's input is not JSON ({0}); expected Claude Code's hook JSON on stdin")]
    NotJson(serde_json::Error),
    /// A field the hook needs is missing or has the wrong type.
    #[error("the hook's input has no string `{0}`; is the hook registered for the right event?")]
    MissingField(&'static str),
}

/// Runs `hook` on its stdin text, with `cwd` the folder Claude Code ran it in and `start`
/// the name Claude Code's model sees mekara's `start` tool under
/// ([`crate::agents::claude::tool_name`]). Returns what to print on stdout (`None`: print
/// nothing). `Err` means the input was malformed; the caller logs it and still prints
/// nothing.
pub(crate) fn run(
    hook: Hook,
    stdin: &str,
    cwd: &Path,
    start: &str,
) -> Result<Option<String>, HookInputError> {
    if stdin.trim().is_empty() {
        return Err(HookInputError::Empty);
    }
    let input: Json = serde_json::from_str(stdin).map_err(HookInputError::NotJson)?;
    // The session's folder decides the project, as for the server Claude Code starts there.
    let cwd = input
        .get("cwd")
        .and_then(Json::as_str)
        .filter(|c| !c.is_empty())
        .map_or(cwd, Path::new);
    let compiled = |name: &str| is_compiled(name, cwd);
    Ok(match hook {
        Hook::RerouteUserCommands => {
            let prompt = str_field(&input, "prompt")?;
            user_command(prompt)
                .filter(|(name, _)| compiled(name))
                .map(|(name, args)| user_prompt_answer(name, args, start))
        }
        Hook::RerouteAgentCommands => {
            let tool = input.get("tool_name").and_then(Json::as_str);
            if !matches!(tool, Some("Skill" | "SlashCommand")) {
                return Ok(None);
            }
            let tool_input = input
                .get("tool_input")
                .ok_or(HookInputError::MissingField("tool_input"))?;
            let (skill, args) = if tool == Some("Skill") {
                let skill = str_field(tool_input, "skill")?;
                let args = tool_input.get("args").and_then(Json::as_str).unwrap_or("");
                (skill.trim().trim_start_matches('/'), args.trim())
            } else {
                // `SlashCommand` takes the command as typed: `/name args`.
                match user_command(str_field(tool_input, "command")?) {
                    Some(command) => command,
                    None => return Ok(None),
                }
            };
            compiled(skill).then(|| skill_answer(skill, args, start))
        }
    })
}

fn str_field<'a>(input: &'a Json, field: &'static str) -> Result<&'a str, HookInputError> {
    input
        .get(field)
        .and_then(Json::as_str)
        .ok_or(HookInputError::MissingField(field))
}

/// `/name args` → (`name`, `args`): the name runs to the first whitespace, the arguments are
/// the rest (any number of lines), trimmed as Claude Code trims `<command-args>`. A doubled
/// slash (`//name args`) is the same command: the second `/` is not part of the name.
pub(crate) fn user_command(prompt: &str) -> Option<(&str, &str)> {
    let rest = prompt.trim_start().strip_prefix('/')?;
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
    let (name, args) = rest.split_at(end);
    (!name.is_empty()).then(|| (name, args.trim()))
}

/// Whether `name` resolves, from `cwd`'s project, to a compiled script. A name that is not a
/// script name at all (`/usr/bin/env`, `/help`) is simply not one.
fn is_compiled(name: &str, cwd: &Path) -> bool {
    let resolver = Resolver::new(&Locations::discover(cwd));
    match resolver.resolve(name) {
        Ok(script) => script.compiled.is_some(),
        Err(e) => {
            tracing::debug!("`{name}` is not a mekara script: {e}");
            false
        }
    }
}

/// How to call `mcp__mekara__start`, after "Call the `…` tool with": its arguments as JSON
/// (quoting that keeps any text intact), set apart by `gap`. Arguments longer than
/// [`SHOWN_ARGUMENTS`] are not repeated (the answer would carry megabytes back to the
/// model, which has them whole): the call names them by `source` instead.
fn start_call(name: &str, args: &str, source: &str, gap: &str) -> String {
    if args.len() <= SHOWN_ARGUMENTS {
        let call = json!({ "name": name, "arguments": args });
        return format!("exactly these arguments (JSON):{gap}{call}{gap}");
    }
    format!(
        "the arguments {} plus `arguments`: {source}, exactly ({} bytes, too long to repeat \
         here);{gap}",
        json!({ "name": name }),
        args.len()
    )
}

/// The UserPromptSubmit answer: context the model reads beside the expanded command.
fn user_prompt_answer(name: &str, args: &str, start: &str) -> String {
    let source = format!("the text after `/{name}` in the user's prompt");
    let context = format!(
        "`/{name}` is a compiled mekara script. Do not follow its Markdown instructions by \
         hand: mekara runs its automatic steps itself. Call the `{start}` tool with {}{AFTER_START}",
        start_call(name, args, &source, "\n\n")
    );
    json!({
        "hookSpecificOutput": {
            "hookEventName": Hook::RerouteUserCommands.event(),
            "additionalContext": context,
        }
    })
    .to_string()
}

/// The body of the command file `mekara install` generates for a bundled compiled script
/// (`/compile`): what the model reads when the person types `/name`. It says the same as
/// [`user_prompt_answer`], which adds the call as JSON, so the two never disagree; without the
/// hook it is still enough.
pub(crate) fn bundled_command_body(name: &str, start: &str) -> String {
    format!(
        "`/{name}` is mekara's bundled compiled script `{name}`: mekara runs its automatic \
         steps itself. Call the `{start}` tool with `name` `{name}` and, as `arguments`, the \
         text typed after `/{name}`, exactly; {AFTER_START}\n"
    )
}

/// The PreToolUse answer: deny the Skill call, naming the call to make instead.
fn skill_answer(skill: &str, args: &str, start: &str) -> String {
    let reason = format!(
        "`{skill}` is a compiled mekara script: run it through mekara, not the Skill tool. \
         Call the `{start}` tool with {}and {AFTER_START}",
        start_call(skill, args, "the `args` of your Skill call", " ")
    );
    json!({
        "hookSpecificOutput": {
            "hookEventName": Hook::RerouteAgentCommands.event(),
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::user_command;

    #[test]
    fn splits_a_command_from_its_arguments() {
        assert_eq!(user_command("/test/random 7"), Some(("test/random", "7")));
        assert_eq!(user_command("/test:random"), Some(("test:random", "")));
        assert_eq!(user_command("//test:random 7"), Some(("test:random", "7")));
        assert_eq!(
            user_command("/a\nline one\n  line \"two\"\n"),
            Some(("a", "line one\n  line \"two\""))
        );
        assert_eq!(user_command("  /x\targs"), Some(("x", "args")));
        assert_eq!(user_command("hello /x"), None);
        assert_eq!(user_command("/ x"), None);
        assert_eq!(user_command("//"), None);
        assert_eq!(user_command(""), None);
    }
}
