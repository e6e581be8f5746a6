//! Claude Code hooks: `mekara hook reroute-user-commands` (UserPromptSubmit) and
//! `mekara hook reroute-agent-commands` (PreToolUse on the `Skill` tool, and on the
//! `SlashCommand` tool through which Claude Code before 2.0.73 offered commands), and for
//! mekara's plugin `mekara hook session-start` too.
//!
//! Both reroutes send a compiled script to `mcp__mekara__start` instead of letting the agent
//! follow its Markdown by hand. They run on every prompt, so this module only parses the hook's
//! JSON and resolves a name: no async runtime, no Starlark. It must never break a session:
//! whatever goes wrong, the hook says nothing (the caller exits 0) and the reason goes to the
//! log. It owns the hooks' answers; it does not touch the engine or the MCP server. Which
//! hooks there are ([`Hook`]) and the command files' text are Claude Code's, in
//! [`crate::agents::claude`], which registers the hooks; the tool's name comes from the
//! caller, as that file names it.

use std::path::Path;

use serde_json::{Value as Json, json};

pub(crate) use crate::agents::claude::Hook;
use crate::agents::reply::{AFTER_START, project_script_question};
use crate::display::SHOWN_ARGUMENTS;
use crate::paths::Locations;
use crate::script::{Level, Resolver, Script, Shadowing};

/// What a hook answers with depends on who registered it: `mekara install` (`plugin`: `None`)
/// or mekara's Claude Code plugin, whose tools and commands Claude Code names after it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Registered<'a> {
    /// The name Claude Code's model sees mekara's `start` tool under
    /// ([`crate::agents::claude::tool_name`]).
    pub start: &'a str,
    /// From the plugin: its name and the prefix of its tools.
    pub plugin: Option<PluginNames<'a>>,
}

/// How Claude Code names what mekara's plugin gives it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PluginNames<'a> {
    /// The plugin's name, which its commands are typed under: `/mekara:compile`.
    pub name: &'a str,
    /// What each of its tools' names starts with: `mcp__plugin_mekara_mekara__`.
    pub tools: &'a str,
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

/// Runs `hook` on its stdin text, with `cwd` the folder Claude Code ran it in, registered as
/// `by` says. Returns what to print on stdout (`None`: print nothing). `Err` means the input
/// was malformed; the caller logs it and still prints nothing.
pub(crate) fn run(
    hook: Hook,
    stdin: &str,
    cwd: &Path,
    by: Registered<'_>,
) -> Result<Option<String>, HookInputError> {
    let start = by.start;
    // A command of the plugin's is typed under its name (`/mekara:compile`): the script's
    // name is what follows.
    let unprefixed = |name: &'_ str| -> String {
        let prefix = by.plugin.map(|p| format!("{}:", p.name));
        match prefix.as_deref().and_then(|p| name.strip_prefix(p)) {
            Some(rest) if !rest.is_empty() => rest.to_string(),
            _ => name.to_string(),
        }
    };
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
    Ok(match hook {
        Hook::SessionStart => None,
        Hook::RerouteUserCommands => {
            let prompt = str_field(&input, "prompt")?;
            user_command(prompt).and_then(|(typed, args)| {
                let name = unprefixed(typed);
                let locations = Locations::discover(cwd);
                let resolver = Resolver::new(&locations);
                let script = resolve(&name, &resolver)?;
                if script.compiled.is_some() {
                    let shadowing = resolver.shadowing(&name, &script);
                    return Some(user_prompt_answer(
                        typed,
                        &name,
                        args,
                        start,
                        shadowing.as_ref(),
                    ));
                }
                // From the plugin, a bundled NL script typed without the plugin's name
                // (`/systematize`) has no command file, and Claude Code tells the model so:
                // its instructions come with the hook.
                let plugin = by.plugin?;
                (typed == name && is_bundled_without_command(&script, &name, &locations))
                    .then(|| bundled_nl_answer(plugin.name, &name, &script.instructions(args)))
            })
        }
        Hook::RerouteAgentCommands => {
            let tool = input.get("tool_name").and_then(Json::as_str);
            if let (Some(tool), Some(plugin)) = (tool, by.plugin)
                && tool.starts_with(plugin.tools)
            {
                // A `start` that runs a project's own script of a bundled script's name is
                // the person's to allow: Claude Code asks them, the agent's word is not enough.
                let shadowing = (tool == start)
                    .then(|| project_script_start(input.get("tool_input"), cwd))
                    .flatten();
                return Ok(Some(match shadowing {
                    Some(shadowing) => ask_answer(&shadowing),
                    None => allow_answer(plugin.name),
                }));
            }
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
            let skill = unprefixed(skill);
            let resolver = Resolver::new(&Locations::discover(cwd));
            resolve(&skill, &resolver)
                .filter(|script| script.compiled.is_some())
                .map(|script| {
                    let shadowing = resolver.shadowing(&skill, &script);
                    skill_answer(&skill, args, start, shadowing.as_ref())
                })
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

/// The script `name` resolves to. A name that is not a script name at all (`/usr/bin/env`,
/// `/help`) is simply not one.
fn resolve(name: &str, resolver: &Resolver) -> Option<Script> {
    match resolver.resolve(name) {
        Ok(script) => Some(script),
        Err(e) => {
            tracing::debug!("`{name}` is not a mekara script: {e}");
            None
        }
    }
}

/// Whether `script`, typed as `/name`, is a bundled NL script that the project has no
/// command file for (whose expansion would say it already).
fn is_bundled_without_command(script: &Script, name: &str, locations: &Locations) -> bool {
    let has_command = locations.project_root.as_ref().is_some_and(|root| {
        root.join(".claude/commands")
            .join(format!("{name}.md"))
            .exists()
    });
    script.compiled.is_none() && script.nl.level == Level::Bundled && !has_command
}

/// The UserPromptSubmit answer for the bundled NL script `name` typed without the plugin's
/// name: its `instructions`, arguments in place, to follow.
fn bundled_nl_answer(plugin: &str, name: &str, instructions: &str) -> String {
    let context = format!(
        "`/{name}` is mekara's bundled NL script, the command `/{plugin}:{name}`: follow its \
         instructions yourself (they are not a compiled script: there is nothing to start):\n\n\
         <instructions>\n{}\n</instructions>\n",
        instructions.trim_end()
    );
    json!({
        "hookSpecificOutput": {
            "hookEventName": Hook::RerouteUserCommands.event(),
            "additionalContext": context,
        }
    })
    .to_string()
}

/// How to call `mcp__mekara__start`, after "Call the `…` tool with": its arguments as JSON
/// (quoting that keeps any text intact), set apart by `gap`. Arguments longer than
/// [`SHOWN_ARGUMENTS`] are not repeated (the answer would carry megabytes back to the
/// model, which has them whole): the call names them by `source` instead.
fn start_call(name: &str, args: &str, source: &str, gap: &str, project_script: bool) -> String {
    let mut call = json!({ "name": name });
    if project_script {
        call["project_script"] = true.into();
    }
    if args.len() <= SHOWN_ARGUMENTS {
        call["arguments"] = args.into();
        return format!("exactly these arguments (JSON):{gap}{call}{gap}");
    }
    format!(
        "the arguments {call} plus `arguments`: {source}, exactly ({} bytes, too long to \
         repeat here);{gap}",
        args.len()
    )
}

/// What the person must agree to first when `/typed` runs the project's own script of a
/// bundled script's name, and the call to make only then; `None`: nothing to agree to.
fn project_script_first(typed: &str, shadowing: Option<&Shadowing>) -> Option<String> {
    let shadowing = shadowing?;
    Some(format!(
        "`/{typed}` here is this project's own script ({}), not mekara's bundled `{}`: it \
         would run this repository's own commands. Run nothing yet: first ask the user {} \
         If they say no, tell them that {}, and stop. Only if they say yes, ",
        shadowing.files_named(),
        shadowing.bundled,
        project_script_question(shadowing),
        shadowing.way_back(),
    ))
}

/// The UserPromptSubmit answer: context the model reads beside the expanded command,
/// `/typed` (`/mekara:compile`) for the script `name` (`compile`).
fn user_prompt_answer(
    typed: &str,
    name: &str,
    args: &str,
    start: &str,
    shadowing: Option<&Shadowing>,
) -> String {
    let source = format!("the text after `/{typed}` in the user's prompt");
    let what = if typed == name {
        format!("`/{name}` is a compiled mekara script.")
    } else {
        format!("`/{typed}` is the compiled mekara script `{name}`.")
    };
    let call = start_call(name, args, &source, "\n\n", shadowing.is_some());
    let context = match project_script_first(typed, shadowing) {
        Some(first) => format!(
            "{first}call the `{start}` tool with {call}{AFTER_START} Do not follow its \
             Markdown instructions by hand."
        ),
        None => format!(
            "{what} Do not follow its Markdown instructions by hand: mekara runs its \
             automatic steps itself. Call the `{start}` tool with {call}{AFTER_START}"
        ),
    };
    json!({
        "hookSpecificOutput": {
            "hookEventName": Hook::RerouteUserCommands.event(),
            "additionalContext": context,
        }
    })
    .to_string()
}

/// The PreToolUse answer of the plugin's hook for one of the plugin's own tools: allowed,
/// so that they run without a permission prompt, as `mekara install`'s
/// `permissions.allow` lets the configured server's run.
fn allow_answer(plugin: &str) -> String {
    json!({
        "hookSpecificOutput": {
            "hookEventName": Hook::RerouteAgentCommands.event(),
            "permissionDecision": "allow",
            "permissionDecisionReason": format!("one of mekara's own tools, allowed by the `{plugin}` plugin"),
        }
    })
    .to_string()
}

/// The PreToolUse answer of the plugin's hook for a `start` that runs the project's own
/// script of a bundled script's name: Claude Code asks the person, showing why.
fn ask_answer(shadowing: &Shadowing) -> String {
    json!({
        "hookSpecificOutput": {
            "hookEventName": Hook::RerouteAgentCommands.event(),
            "permissionDecision": "ask",
            "permissionDecisionReason": format!(
                "runs this project's own script `{}` ({}), not mekara's bundled `{}`",
                shadowing.name,
                shadowing.files_named(),
                shadowing.bundled
            ),
        }
    })
    .to_string()
}

/// The shadowing a `start` call's input (`project_script: true`) asks to run, seen from the
/// project of `cwd`; `None` for any other call.
fn project_script_start(input: Option<&Json>, cwd: &Path) -> Option<Shadowing> {
    let input = input?;
    if input.get("project_script") != Some(&Json::Bool(true)) {
        return None;
    }
    let name = input.get("name").and_then(Json::as_str)?;
    // The server resolves from its own folder, the session's, whatever `working_dir` says.
    let resolver = Resolver::new(&Locations::discover(cwd));
    let script = resolve(name, &resolver)?;
    resolver.shadowing(name, &script)
}

/// The PreToolUse answer: deny the Skill call, naming the call to make instead.
fn skill_answer(skill: &str, args: &str, start: &str, shadowing: Option<&Shadowing>) -> String {
    let call = start_call(
        skill,
        args,
        "the `args` of your Skill call",
        " ",
        shadowing.is_some(),
    );
    let reason = match project_script_first(skill, shadowing) {
        Some(first) => format!(
            "Run it through mekara, not the Skill tool. {first}call the `{start}` tool with \
             {call}and {AFTER_START}"
        ),
        None => format!(
            "`{skill}` is a compiled mekara script: run it through mekara, not the Skill tool. \
             Call the `{start}` tool with {call}and {AFTER_START}"
        ),
    };
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
