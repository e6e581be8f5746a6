//! Claude Code: its model sees mekara's tools as `mcp__mekara__NAME`; every install sets it
//! up (the `mekara` server in `.mcp.json`, or `~/.claude.json` with `--user`, and in
//! `.claude/settings.json` the hooks of [`crate::hooks`] and every tool allowed); and
//! `--agent claude` runs it headless.
//!
//! Headless, each question is one `claude -p --output-format json` with the prompt on stdin;
//! an llm step that expects outputs gets `--json-schema`, so the outputs come back as
//! `structured_output`. The first question starts a session and the next ones `--resume`
//! it, so Claude keeps the context of the whole run, as over MCP.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value as Json, json};

use super::clients::{Client, Served};
use super::headless::{Agent, Reply, Request, Stopped, run_agent};
use super::rate_limit::{RateLimited, is_limit_status, says_final};
use super::reply::AFTER_START;
use super::tools::{self, AgentTool, SERVER_NAME};
use crate::display::shell_quote;
use crate::engine::CancelToken;
use crate::engine::step::AgentReport;
use crate::install::commands::CommandFile;
use crate::install::edits::{Edit, EditError, edit_json};
use crate::install::{Direction, InstallError, Setup};
use crate::paths::Locations;
use crate::script::bundled;
use crate::script::nl::{GENERATED_KEY, NlText};

/// Claude Code.
pub(crate) const CLIENT: Client = Client {
    name: "claude",
    help: "Claude Code",
    is_client_info: |name| name == "claude-code",
    tool_name,
    fills_only_required_arguments: false,
    always: true,
    install,
    left_for_you,
    note_rank: 0,
    headless: Some(|| Box::new(ClaudeAgent)),
};

/// `mcp__mekara__start`, or `mcp__plugin_mekara_mekara__start` from mekara's plugin.
pub(crate) fn tool_name(tool: AgentTool, served: Served) -> String {
    format!("mcp__{}__{}", server_key(served), tool.name())
}

/// The name of mekara's Claude Code plugin (`plugin/.claude-plugin/plugin.json`), which
/// serves mekara as its server [`SERVER_NAME`].
pub(crate) const PLUGIN: &str = "mekara";

/// What Claude Code puts between `mcp__` and a tool's name: the server's name, after the
/// plugin's when a plugin gave it.
fn server_key(served: Served) -> String {
    match served {
        Served::Configured => SERVER_NAME.to_string(),
        Served::ClaudePlugin => format!("plugin_{PLUGIN}_{SERVER_NAME}"),
    }
}

fn install(setup: &mut Setup<'_>) -> Result<(), InstallError> {
    setup.bundled_commands(bundled_commands())?;
    let base = setup.base();
    let mcp_file = if setup.user() {
        base.join(".claude.json")
    } else {
        base.join(".mcp.json")
    };
    let settings = base.join(".claude/settings.json");
    let direction = setup.direction();
    let entry = json!({"type": "stdio", "command": "mekara", "args": ["mcp"]});
    setup.server_entry(&mcp_file, "mcpServers", &entry)?;
    setup.edit(claude_settings(&settings, direction)?);
    Ok(())
}

fn left_for_you(user: bool) -> Option<String> {
    (!user).then(|| {
        "start `claude` in this folder once: trust the folder and approve the `mekara` \
         server from `.mcp.json` (Claude Code asks both the first time; until then it \
         ignores the project's permissions and servers)"
            .to_string()
    })
}

/// How `mekara hook` names mekara's tools, registered as `served` says: the `start` tool,
/// and from the plugin, the prefix of its tools.
pub(crate) fn hook_names(served: Served) -> (String, Option<String>) {
    let start = tool_name(AgentTool::Start, served);
    let plugin_tools =
        (served == Served::ClaudePlugin).then(|| format!("mcp__{}__", server_key(served)));
    (start, plugin_tools)
}

/// The file that gives Claude Code a `mekara` server of its own here, if any: the project's
/// `.mcp.json`, or `~/.claude.json` (for every project, or for this one). mekara's plugin
/// stands down where there is one (its server offers no tools), so that a project whose team
/// committed `mekara install`'s set-up does not get a second server from the plugin.
pub(crate) fn configured_server(locations: &Locations) -> Option<PathBuf> {
    let has_mekara = |servers: Option<&Json>| {
        servers
            .and_then(Json::as_object)
            .is_some_and(|s| s.contains_key(SERVER_NAME))
    };
    // A plugin's own `.mcp.json` (this one's, where a client starts its server in the
    // plugin's folder) declares the plugin's server, not a project's.
    if let Some(root) = locations
        .project_root
        .as_ref()
        .filter(|root| !is_plugin_folder(root))
    {
        let path = root.join(".mcp.json");
        if read_json(&path).is_some_and(|j| has_mekara(j.get("mcpServers"))) {
            return Some(path);
        }
    }
    let path = locations.home.as_ref()?.join(".claude.json");
    let user = read_json(&path)?;
    let for_project = locations
        .project_root
        .as_ref()
        .and_then(|root| user.get("projects")?.get(root.to_str()?)?.get("mcpServers"));
    (has_mekara(user.get("mcpServers")) || has_mekara(for_project)).then_some(path)
}

/// Whether `folder` is a plugin's own (it holds `.claude-plugin/plugin.json`), not a project.
pub(crate) fn is_plugin_folder(folder: &Path) -> bool {
    folder.join(".claude-plugin/plugin.json").is_file()
}

/// The settings file that registers `mekara install`'s hooks here, if any (the project's
/// shared or local settings, or the user's): mekara's plugin's hooks then say nothing, so
/// that a prompt is not answered twice.
pub(crate) fn configured_hooks(locations: &Locations) -> Option<PathBuf> {
    settings_files(locations).find(|path| {
        read_json(path).is_some_and(|settings| {
            settings
                .get("hooks")
                .and_then(Json::as_object)
                .into_iter()
                .flat_map(|events| events.values())
                .filter_map(Json::as_array)
                .flatten()
                .any(|entry| Hook::INSTALLED.iter().any(|hook| runs_hook(entry, *hook)))
        })
    })
}

/// The settings files Claude Code reads for a session here, each whether it is there or not:
/// the project's shared and local ones, then the user's.
fn settings_files(locations: &Locations) -> impl Iterator<Item = PathBuf> + '_ {
    let project = locations.project_root.iter().flat_map(|root| {
        [
            root.join(".claude/settings.json"),
            root.join(".claude/settings.local.json"),
        ]
    });
    let user = locations
        .home
        .iter()
        .map(|h| h.join(".claude/settings.json"));
    project.chain(user)
}

/// The JSON in the file at `path`, if it is there and parses.
fn read_json(path: &Path) -> Option<Json> {
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

/// The hook entry `install` adds for `hook`.
fn hook_entry(hook: Hook) -> Json {
    let command = json!({"type": "command", "command": hook.command()});
    match hook.matcher(None) {
        Some(matcher) => json!({"matcher": matcher, "hooks": [command]}),
        None => json!({"hooks": [command]}),
    }
}

/// Whether a hook entry (`{matcher?, hooks: [...]}`) runs `hook`'s command for its matcher.
fn runs_hook(entry: &Json, hook: Hook) -> bool {
    let matcher = entry.get("matcher").and_then(Json::as_str);
    matcher == hook.matcher(None).as_deref()
        && entry
            .get("hooks")
            .and_then(Json::as_array)
            .is_some_and(|hs| hs.iter().any(|h| is_hook_command(h, hook)))
}

fn is_hook_command(h: &Json, hook: Hook) -> bool {
    h.get("command").and_then(Json::as_str) == Some(hook.command().as_str())
}

/// `.claude/settings.json`: both hooks, and every mekara tool allowed.
fn claude_settings(path: &Path, direction: Direction) -> Result<Edit, EditError> {
    let allowed: Vec<String> = tools::ALL
        .into_iter()
        .map(|tool| tool_name(tool, Served::Configured))
        .collect();
    edit_json(path, direction, |state, root| {
        match direction {
            Direction::Install => {
                let hooks_map = state.object(root, "hooks", "hooks")?;
                let mut added = Vec::new();
                for hook in Hook::INSTALLED {
                    let dotted = format!("hooks.{}", hook.event());
                    let entries = state.array(hooks_map, hook.event(), &dotted)?;
                    for earlier in hook.earlier_matchers() {
                        if remove_hook(entries, hook, Some(earlier)) {
                            added.push(format!(
                                "- hook {} (matcher `{earlier}`, from an earlier mekara): `{}`",
                                hook.event(),
                                hook.command()
                            ));
                        }
                    }
                    if !entries.iter().any(|e| runs_hook(e, hook)) {
                        entries.push(hook_entry(hook));
                        added.push(format!("+ hook {}: `{}`", describe(hook), hook.command()));
                    }
                }
                let permissions = state.object(root, "permissions", "permissions")?;
                let allow = state.array(permissions, "allow", "permissions.allow")?;
                for name in &allowed {
                    if !allow.iter().any(|a| a.as_str() == Some(name)) {
                        allow.push(Json::String(name.clone()));
                        added.push(format!("+ allow `{name}`"));
                    }
                }
                state.details.extend(added);
            }
            Direction::Uninstall => {
                if let Some(Json::Object(hooks_map)) = root.get_mut("hooks") {
                    for hook in Hook::INSTALLED {
                        let Some(Json::Array(entries)) = hooks_map.get_mut(hook.event()) else {
                            continue;
                        };
                        let current = hook.matcher(None);
                        let matchers = std::iter::once(current.as_deref())
                            .chain(hook.earlier_matchers().iter().copied().map(Some));
                        for matcher in matchers {
                            if remove_hook(entries, hook, matcher) {
                                let shown = match matcher {
                                    Some(m) => format!("{} (matcher `{m}`)", hook.event()),
                                    None => hook.event().to_string(),
                                };
                                state
                                    .details
                                    .push(format!("- hook {shown}: `{}`", hook.command()));
                            }
                        }
                        if entries.is_empty() {
                            hooks_map.shift_remove(hook.event());
                        }
                    }
                    if hooks_map.is_empty() {
                        root.shift_remove("hooks");
                    }
                }
                if let Some(Json::Object(permissions)) = root.get_mut("permissions") {
                    if let Some(Json::Array(allow)) = permissions.get_mut("allow") {
                        for name in &allowed {
                            let before = allow.len();
                            allow.retain(|a| a.as_str() != Some(name));
                            if allow.len() != before {
                                state.details.push(format!("- allow `{name}`"));
                            }
                        }
                        if allow.is_empty() {
                            permissions.shift_remove("allow");
                        }
                    }
                    if permissions.is_empty() {
                        root.shift_remove("permissions");
                    }
                }
            }
        }
        Ok(())
    })
}

/// Takes `hook`'s command out of the entries for `matcher`, and entries it leaves empty.
/// Returns whether there was one to take.
fn remove_hook(entries: &mut Vec<Json>, hook: Hook, matcher: Option<&str>) -> bool {
    let mut removed = false;
    for entry in entries.iter_mut() {
        if entry.get("matcher").and_then(Json::as_str) != matcher {
            continue;
        }
        if let Some(Json::Array(hs)) = entry.get_mut("hooks") {
            let before = hs.len();
            hs.retain(|h| !is_hook_command(h, hook));
            removed |= hs.len() != before;
        }
    }
    entries.retain(|e| {
        e.get("hooks")
            .and_then(Json::as_array)
            .is_none_or(|hs| !hs.is_empty())
    });
    removed
}

fn describe(hook: Hook) -> String {
    match hook.matcher(None) {
        Some(m) => format!("{} (matcher `{m}`)", hook.event()),
        None => hook.event().to_string(),
    }
}

/// The program, found on `PATH`.
const PROGRAM: &str = "claude";

/// Claude Code, found as `claude` on `PATH`.
pub(crate) struct ClaudeAgent;

impl ClaudeAgent {
    /// The command line for `request` (the prompt goes on stdin).
    fn command(&self, request: &Request) -> String {
        let mut command = format!("{PROGRAM} -p --output-format json");
        if request.wants_outputs() {
            command.push_str(" --json-schema ");
            command.push_str(&shell_quote(&request.schema.to_string()));
        }
        if let Some(session) = &request.session {
            command.push_str(" --resume ");
            command.push_str(&shell_quote(session));
        }
        if let Some(budget) = request.budget_usd {
            command.push_str(&format!(" --max-budget-usd {budget:.4}"));
        }
        command.push_str(" --settings ");
        let without = without_mekara(&Locations::discover(&request.working_dir));
        command.push_str(&shell_quote(&without.to_string()));
        command
    }
}

/// The settings a step's agent runs with, on top of the person's: without mekara (neither
/// mekara's plugin, under any marketplace it was installed from, nor a project's `mekara`
/// server of `.mcp.json`). mekara is running the step: a second server per step would offer
/// the agent mekara's own tools inside it, and a plugin's hooks would reroute its commands.
fn without_mekara(locations: &Locations) -> Json {
    let mut plugins = serde_json::Map::new();
    plugins.insert(format!("{PLUGIN}@{PLUGIN}"), Json::Bool(false));
    for path in settings_files(locations) {
        let Some(Json::Object(enabled)) =
            read_json(&path).and_then(|s| s.get("enabledPlugins").cloned())
        else {
            continue;
        };
        for key in enabled.keys() {
            if key.split_once('@').is_some_and(|(name, _)| name == PLUGIN) {
                plugins.insert(key.clone(), Json::Bool(false));
            }
        }
    }
    json!({"enabledPlugins": plugins, "disabledMcpjsonServers": [SERVER_NAME]})
}

impl Agent for ClaudeAgent {
    fn ask(&mut self, request: &Request, timeout: Duration, cancel: &CancelToken) -> Reply {
        let prompt = super::reply::cli_prompt(request);
        match run_agent(
            &self.command(request),
            prompt.as_bytes(),
            request,
            timeout,
            cancel,
        ) {
            Ok(stdout) => read_result(&stdout, request.wants_outputs())
                .map_report(|report| this_answer_only(report, request)),
            // Claude Code exits 1 on an API error, with its JSON result on stdout: a rate
            // limit or an overload is told by the result's `api_error_status`.
            Err(Stopped::Failed(error, said)) => match read_result(&said.stdout, false) {
                limited @ Reply::RateLimited(..) => limited,
                _ => Reply::Failed(error, AgentReport::default()),
            },
            Err(stopped) => stopped.into(),
        }
    }
}

/// What an answer cost by itself. Claude Code's result gives the totals of its process; newer
/// versions restate a resumed session's earlier totals in the result of `--resume` (a
/// wrapper that added the figures up over-counted 16×). So a figure of a resumed session
/// that is at least what the session's earlier answers were journaled at is taken as
/// cumulative, and they are taken off (tokens too, as far as they reach). A version that
/// reports the answer alone gives less than that sum, unless this one answer cost more than
/// all the session's earlier ones together: then it is undercounted by at most those.
fn this_answer_only(mut report: AgentReport, request: &Request) -> AgentReport {
    let before = request.session_spent;
    let resumed = request.session.is_some() && report.session == request.session;
    let Some(cost) = report.cost_usd else {
        return report;
    };
    if !resumed || before.cost_usd <= 0.0 || cost < before.cost_usd {
        return report;
    }
    report.cost_usd = Some(cost - before.cost_usd);
    report.input_tokens = report
        .input_tokens
        .map(|n| n.saturating_sub(before.input_tokens));
    report.output_tokens = report
        .output_tokens
        .map(|n| n.saturating_sub(before.output_tokens));
    report
}

/// The API errors of Claude Code's result that are a rate limit (429, `rate_limit_error`) or
/// an overload (529, `overloaded_error`), after Claude Code's own retries
/// (`CLAUDE_CODE_MAX_RETRIES`, 10 by default) gave up.
fn rate_limited(result: &Json) -> Option<RateLimited> {
    let status = result.get("api_error_status").and_then(Json::as_u64);
    let kind = result.get("api_error_type").and_then(Json::as_str);
    let limited = status.is_some_and(is_limit_status)
        || matches!(kind, Some("rate_limit_error" | "overloaded_error"));
    if result.get("is_error").and_then(Json::as_bool) != Some(true) || !limited {
        return None;
    }
    let text = result.get("result").and_then(Json::as_str).unwrap_or("");
    // No credit, or a daily quota: waiting minutes does not lift it, so the step fails.
    if says_final(text) {
        return None;
    }
    Some(RateLimited::from_said(format!(
        "Claude Code: {}",
        text.trim()
    )))
}

/// Reads the result object `claude -p --output-format json` prints.
fn read_result(stdout: &str, wants_outputs: bool) -> Reply {
    let result: Json = match serde_json::from_str(stdout.trim()) {
        Ok(Json::Object(result)) => Json::Object(result),
        _ => {
            return Reply::Failed(
                format!(
                    "Claude Code did not print its JSON result; it wrote: {}",
                    crate::display::clipped(stdout.trim(), 2000)
                ),
                AgentReport::default(),
            );
        }
    };
    let usage = result.get("usage");
    let tokens = |names: &[&str]| -> Option<u64> {
        let usage = usage?;
        names
            .iter()
            .map(|n| usage.get(*n).and_then(Json::as_u64))
            .sum()
    };
    let report = AgentReport {
        session: result
            .get("session_id")
            .and_then(Json::as_str)
            .map(str::to_string),
        cost_usd: result.get("total_cost_usd").and_then(Json::as_f64),
        input_tokens: tokens(&[
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
        ])
        .or_else(|| tokens(&["input_tokens"])),
        output_tokens: tokens(&["output_tokens"]),
        ..AgentReport::default()
    };
    let text = result.get("result").and_then(Json::as_str).unwrap_or("");
    if let Some(limited) = rate_limited(&result) {
        return Reply::RateLimited(limited, report);
    }
    if result.get("is_error").and_then(Json::as_bool) == Some(true) {
        let subtype = result
            .get("subtype")
            .and_then(Json::as_str)
            .unwrap_or("error");
        let said = if text.is_empty() { subtype } else { text };
        return Reply::Failed(format!("Claude Code failed: {said}"), report);
    }
    if !wants_outputs {
        return Reply::Outputs(serde_json::Map::new(), report);
    }
    match result.get("structured_output") {
        Some(Json::Object(outputs)) => Reply::Outputs(outputs.clone(), report),
        _ => Reply::Malformed(
            format!(
                "Claude Code gave no structured output for the step's outputs; it said: {}",
                crate::display::clipped(text.trim(), 2000)
            ),
            report,
        ),
    }
}

/// The hooks mekara provides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hook {
    /// UserPromptSubmit: a typed `/name args` for a compiled script.
    RerouteUserCommands,
    /// PreToolUse (matcher `Skill|SlashCommand`): the agent reaching for a compiled script.
    RerouteAgentCommands,
    /// SessionStart, registered by mekara's plugin only: mekara itself says nothing; the
    /// plugin's launcher answers it when it finds no mekara to run (`plugin/bin/mekara`).
    SessionStart,
}

impl Hook {
    /// The hooks `mekara install` adds, in that order.
    pub(crate) const INSTALLED: [Hook; 2] = [Hook::RerouteUserCommands, Hook::RerouteAgentCommands];

    /// The subcommand name (`mekara hook <name>`).
    pub(crate) fn name(self) -> &'static str {
        match self {
            Hook::RerouteUserCommands => "reroute-user-commands",
            Hook::RerouteAgentCommands => "reroute-agent-commands",
            Hook::SessionStart => "session-start",
        }
    }

    /// The Claude Code hook event it answers.
    pub(crate) fn event(self) -> &'static str {
        match self {
            Hook::RerouteUserCommands => "UserPromptSubmit",
            Hook::RerouteAgentCommands => "PreToolUse",
            Hook::SessionStart => "SessionStart",
        }
    }

    /// The tool matcher it is registered with, for tool events. The plugin's also matches
    /// the plugin's own tools (`plugin_tools`: their prefix), which it lets run without a
    /// permission prompt.
    pub(crate) fn matcher(self, plugin_tools: Option<&str>) -> Option<String> {
        match (self, plugin_tools) {
            (Hook::RerouteAgentCommands, None) => Some("Skill|SlashCommand".to_string()),
            (Hook::RerouteAgentCommands, Some(tools)) => {
                Some(format!("Skill|SlashCommand|{tools}.*"))
            }
            (Hook::RerouteUserCommands | Hook::SessionStart, _) => None,
        }
    }

    /// Matchers earlier mekaras registered it with: `install` replaces them and `uninstall`
    /// removes them too.
    pub(crate) fn earlier_matchers(self) -> &'static [&'static str] {
        match self {
            Hook::RerouteUserCommands | Hook::SessionStart => &[],
            Hook::RerouteAgentCommands => &["Skill"],
        }
    }

    /// The command line Claude Code runs.
    pub(crate) fn command(self) -> String {
        format!("mekara hook {}", self.name())
    }
}

/// The body of the command file `mekara install` (or mekara's plugin) has for a bundled
/// compiled script `name` (`compile`), typed as `/typed` (`/compile`, or `/mekara:compile`
/// from the plugin): what the model reads when the person types it. It says the same as
/// the answer of the hook ([`crate::hooks`]), which adds the call as JSON, so the two never
/// disagree; without the hook it is still enough.
pub(crate) fn bundled_command_body(typed: &str, name: &str, start: &str) -> String {
    format!(
        "`/{typed}` is mekara's bundled compiled script `{name}`: mekara runs its automatic \
         steps itself. Call the `{start}` tool with `name` `{name}` and, as `arguments`, the \
         text typed after `/{typed}`, exactly; {AFTER_START}\n"
    )
}

/// The command files `mekara install` writes for every bundled script that is not a demo.
pub(crate) fn bundled_commands() -> Vec<CommandFile> {
    command_files(Served::Configured)
}

/// The command files of every bundled script that is not a demo, for Claude Code given
/// mekara's server as `served` says: `mekara install`'s (marked as generated), or the
/// commands of mekara's Claude Code plugin (`crate::install::plugin`).
pub(crate) fn command_files(served: Served) -> Vec<CommandFile> {
    bundled::FILES
        .iter()
        .filter_map(|f| {
            let name = f.path.strip_prefix("nl/")?.strip_suffix(".md")?;
            (!bundled::is_demo(name)).then(|| {
                let compiled = bundled::file(&format!("compiled/{name}.star")).is_some();
                CommandFile {
                    rel: PathBuf::from(format!("{name}.md")),
                    text: command_text(name, f.text, compiled, served),
                }
            })
        })
        .collect()
}

/// An NL-only script's file is its own text (Claude Code replaces `$ARGUMENTS`, as mekara
/// does); a compiled script's says to run it through mekara, which the hook says too.
fn command_text(name: &str, nl: &str, compiled: bool, served: Served) -> String {
    let parsed = NlText::parse(nl);
    // Claude Code types a command in a folder (`flow/commit.md`) as `/flow:commit`.
    let typed = match served {
        Served::Configured => name.replace('/', ":"),
        Served::ClaudePlugin => format!("{}:{}", PLUGIN, name.replace('/', ":")),
    };
    let body = if compiled {
        bundled_command_body(&typed, name, &tool_name(AgentTool::Start, served))
    } else {
        parsed.body.to_string()
    };
    let mut front = match served {
        Served::Configured => format!(
            "---\n# Written by `mekara install`, which rewrites it; to change the script, run\n\
             # `mekara scripts eject {name}` (it replaces this file with the script's own)\n"
        ),
        Served::ClaudePlugin => format!(
            "---\n# mekara's bundled script `{name}`, generated from scripts/nl/{name}.md (the\n\
             # test `install::plugin` checks it and `MEKARA_BLESS=1` rewrites it)\n"
        ),
    };
    // The script's own front matter lines, as written (quotes and all).
    if !parsed.front_matter.is_empty()
        && let Some(rest) = nl.strip_prefix("---\n")
        && let Some(end) = rest.find("\n---")
    {
        front.push_str(&rest[..=end]);
    }
    if served == Served::Configured {
        front.push_str(&format!("{GENERATED_KEY}: {name}\n"));
    }
    front.push_str("---\n\n");
    front + &body
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue 44): newer Claude Code versions restate a resumed session's earlier
    /// totals in the result of `--resume`; adding the figures up over-counted the run.
    #[test]
    fn a_resumed_sessions_restated_totals_count_once_and_a_per_process_figure_stays() {
        let report = |session: &str, cost: f64, input: u64| AgentReport {
            session: Some(session.to_string()),
            cost_usd: Some(cost),
            input_tokens: Some(input),
            output_tokens: Some(10),
            ..AgentReport::default()
        };
        let request = Request {
            run_id: "r".into(),
            step: "s[1]".into(),
            kind: super::super::headless::Kind::Llm,
            prompt: String::new(),
            schema: Json::Null,
            session: Some("abc".into()),
            session_spent: super::super::headless::SessionSpent {
                cost_usd: 0.30,
                input_tokens: 1000,
                output_tokens: 20,
            },
            attempt: 1,
            previous_error: None,
            budget_usd: None,
            working_dir: ".".into(),
            group_note: None,
        };
        // Cumulative: the session's $0.30 before, and $0.05 of its own.
        let own = this_answer_only(report("abc", 0.35, 1500), &request);
        assert!(
            (own.cost_usd.expect("a cost") - 0.05).abs() < 1e-9,
            "{own:?}"
        );
        assert_eq!((own.input_tokens, own.output_tokens), (Some(500), Some(0)));
        // Per process: less than what the session cost before, so the answer's own.
        let alone = report("abc", 0.04, 700);
        assert_eq!(this_answer_only(alone.clone(), &request), alone);
        // Another session (no resume, or Claude Code forked it): as reported.
        let other = report("def", 0.5, 900);
        assert_eq!(this_answer_only(other.clone(), &request), other);
        let fresh = Request {
            session: None,
            ..request
        };
        let first = report("abc", 0.5, 900);
        assert_eq!(this_answer_only(first.clone(), &fresh), first);
    }

    /// A 429 is waited out, unless its words say that waiting does not help.
    #[test]
    fn a_429_is_a_rate_limit_unless_it_says_no_credit_or_a_daily_quota() {
        let result = |text: &str| {
            serde_json::json!({
                "type": "result", "is_error": true, "api_error_status": 429, "result": text,
            })
        };
        assert!(rate_limited(&result("API Error: 429 rate_limit_error")).is_some());
        assert!(rate_limited(&result("API Error: 529 overloaded_error")).is_some());
        for text in [
            "API Error: 429 Your credit balance is too low to access the Anthropic API",
            "API Error: 429 You have used up your daily quota",
        ] {
            assert!(rate_limited(&result(text)).is_none(), "{text}");
        }
    }

    #[test]
    fn every_generated_command_file_is_marked_and_no_demo_gets_one() {
        let files = super::bundled_commands();
        let names: Vec<_> = files.iter().map(|f| f.rel.display().to_string()).collect();
        assert_eq!(names[..2], ["compile.md", "systematize.md"]);
        assert_eq!(names.len(), 12, "{names:?}");
        assert!(
            names[2..].iter().all(|n| n.starts_with("flow/")),
            "{names:?}"
        );
        assert!(
            files
                .iter()
                .all(|f| crate::script::nl::is_generated(&f.text))
        );
    }
}
