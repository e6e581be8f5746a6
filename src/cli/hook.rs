//! `mekara hook NAME`: the Claude Code hooks. Whatever happens, exit 0: a hook must never
//! break a session. Stdout carries only the answer Claude Code reads.

use super::output::outln;
use std::io::Read;

use clap::{Args, ValueEnum};

use crate::agents::claude;
use crate::agents::tools::AgentTool;
use crate::exit::Exit;
use crate::hooks::{self, Hook};

#[derive(Debug, Args)]
pub(super) struct HookArgs {
    /// Which hook to run (Claude Code passes its event's JSON on stdin).
    hook: HookName,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum HookName {
    /// UserPromptSubmit: send a typed `/name args` of a compiled script to mekara.
    RerouteUserCommands,
    /// PreToolUse (matcher `Skill`): deny the Skill tool for a compiled script.
    RerouteAgentCommands,
}

pub(super) fn run(args: HookArgs) -> anyhow::Result<Exit> {
    let hook = match args.hook {
        HookName::RerouteUserCommands => Hook::RerouteUserCommands,
        HookName::RerouteAgentCommands => Hook::RerouteAgentCommands,
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
    let start = claude::tool_name(AgentTool::Start);
    match hooks::run(hook, &stdin, &cwd, &start) {
        Ok(Some(answer)) => outln!("{answer}")?,
        Ok(None) => {}
        Err(e) => tracing::warn!("hook {}: {e}", hook.name()),
    }
    Ok(Exit::Success)
}
