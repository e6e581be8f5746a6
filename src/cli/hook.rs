//! `mekara hook NAME`: the Claude Code hooks. Whatever happens, exit 0: a hook must never
//! break a session. Stdout carries only the answer Claude Code reads.

use super::output::outln;
use std::io::Read;

use clap::{Args, ValueEnum};

use crate::agents::claude;
use crate::agents::clients::Served;
use crate::exit::Exit;
use crate::hooks::{self, Hook, PluginNames, Registered};
use crate::paths::Locations;

#[derive(Debug, Args)]
pub(super) struct HookArgs {
    /// Which hook to run (Claude Code passes its event's JSON on stdin).
    hook: HookName,
    /// Registered by mekara's Claude Code plugin: name its tools and commands as Claude Code
    /// names a plugin's, let its tools run without a permission prompt, and say nothing where
    /// `mekara install`'s own hooks are registered.
    #[arg(long)]
    plugin: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum HookName {
    /// UserPromptSubmit: send a typed `/name args` of a compiled script to mekara.
    RerouteUserCommands,
    /// PreToolUse (matcher `Skill|SlashCommand`): deny the Skill tool for a compiled script.
    RerouteAgentCommands,
    /// SessionStart (the plugin's): nothing to say when mekara is there.
    SessionStart,
}

pub(super) fn run(args: HookArgs) -> anyhow::Result<Exit> {
    let hook = match args.hook {
        HookName::RerouteUserCommands => Hook::RerouteUserCommands,
        HookName::RerouteAgentCommands => Hook::RerouteAgentCommands,
        HookName::SessionStart => Hook::SessionStart,
    };
    let mut stdin = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut stdin) {
        tracing::warn!("hook {}: cannot read stdin: {e}", hook.name());
        return Ok(Exit::Success);
    }
    let cwd = match std::env::current_dir() {
        Ok(cwd) => cwd,
        Err(e) => {
            tracing::warn!(
                "hook {}: cannot read the current directory: {e}",
                hook.name()
            );
            return Ok(Exit::Success);
        }
    };
    let served = if args.plugin {
        Served::ClaudePlugin
    } else {
        Served::Configured
    };
    if args.plugin
        && let Some(file) = claude::configured_hooks(&Locations::discover(&cwd))
    {
        tracing::debug!(
            "hook {}: the plugin's hook says nothing, `{}` registers mekara's own",
            hook.name(),
            file.display()
        );
        return Ok(Exit::Success);
    }
    let (start, plugin_tools) = claude::hook_names(served);
    let by = Registered {
        start: &start,
        plugin: plugin_tools.as_deref().map(|tools| PluginNames {
            name: claude::PLUGIN,
            tools,
        }),
    };
    match hooks::run(hook, &stdin, &cwd, by) {
        Ok(Some(answer)) => outln!("{answer}")?,
        Ok(None) => {}
        Err(e) => tracing::warn!("hook {}: {e}", hook.name()),
    }
    Ok(Exit::Success)
}
