//! The flags of an unattended run (`mekara run --agent …`), and what they build: the agent,
//! the limits given, the journal's note of who drives the run.

use std::path::PathBuf;
use std::time::Duration;

use clap::{ArgGroup, Args};

use super::limits;
use crate::agents::claude::ClaudeAgent;
use crate::agents::clients::Headless;
use crate::agents::command::CommandAgent;
use crate::agents::headless::Agent;
use crate::engine::journal::AgentEvent;

/// The flags of an unattended run.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("unattended_agent").args(["agent", "agent_command"])))]
pub(in crate::cli) struct UnattendedArgs {
    /// Run unattended: this agent does the llm steps and NL scripts (Claude Code, the Codex
    /// CLI or Gemini CLI headless, `claude`, `codex` or `gemini` on PATH).
    #[arg(long, value_enum, value_name = "AGENT")]
    pub(super) agent: Option<Headless>,
    /// Run unattended: this command does the llm steps and NL scripts, through the JSON
    /// contract of docs/agent-command.md (run through the shell, once per step).
    #[arg(long, value_name = "CMD")]
    pub(super) agent_command: Option<String>,
    /// How long one agent answer may take, in seconds, before the agent and everything it
    /// started are killed and the step fails.
    #[arg(
        long,
        value_name = "SECONDS",
        default_value = "1200",
        requires = "unattended_agent"
    )]
    pub(super) agent_timeout: crate::cli::Seconds,
    /// How many agent processes answer the llm steps of a `parallel` group at once (the
    /// group's own `max` when not given).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..), requires = "unattended_agent")]
    pub(super) max_parallel_agents: Option<u64>,
    /// Stop before an agent step once the run has had this many agent answers.
    #[arg(long, value_name = "N", requires = "unattended_agent")]
    pub(super) max_agent_steps: Option<usize>,
    /// Pause before an agent step once the run's agents spent this much (US dollars: as
    /// reported, or estimated from the price table for agents that report only tokens);
    /// what is left is passed on as the agent's own budget where it has one.
    #[arg(long, value_name = "USD", requires = "unattended_agent")]
    pub(super) max_cost: Option<f64>,
    /// Pause before an agent step once the run's agents used this many tokens (in and out).
    #[arg(long, value_name = "N", requires = "unattended_agent")]
    pub(super) max_tokens: Option<u64>,
    /// Pause before the next agent step once one agent step used this many tokens (in and
    /// out); a step's agent is not asked again once its own tokens reached it.
    #[arg(long, value_name = "N", requires = "unattended_agent")]
    pub(super) max_step_tokens: Option<u64>,
    /// What a reached `--max-cost`, `--max-tokens` or `--max-step-tokens` does: `pause` the
    /// run for a person to raise the cap or stop it with `mekara answer`, or `stop` it (for
    /// CI); `[limits] on_cap` of the config, else `pause`.
    #[arg(long, value_enum, value_name = "WHAT", requires = "unattended_agent")]
    pub(super) on_cap: Option<limits::OnCap>,
    /// Stop before an agent step once this invocation has run this long (`90s`, `20m`, `1h`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "unattended_agent")]
    pub(super) max_duration: Option<Duration>,
    /// Print a JSON summary of the run on stdout instead of the closing line.
    #[arg(long, requires = "unattended_agent")]
    pub(super) json: bool,
    /// Write a JUnit XML report of the run's steps to FILE.
    #[arg(long, value_name = "FILE", requires = "unattended_agent")]
    pub(super) junit: Option<PathBuf>,
    /// What a failed step does: `stop` the run there, resumable (fix the cause, then run
    /// the step again with `--resume ID --retry`), or hand what is left of the script to the
    /// `agent` to finish by hand.
    #[arg(long, value_enum, value_name = "WHAT", default_value_t = Fallback::Stop, requires = "unattended_agent")]
    pub(super) fallback: Fallback,
    /// Stop the run resumably, as Ctrl-C does, when stdin closes (a worker's child run).
    #[arg(long, hide = true, requires = "unattended_agent")]
    pub(super) stop_when_stdin_closes: bool,
    /// Run nothing: list the steps the script's source calls, and which go to the agent.
    #[arg(long, conflicts_with = "resume")]
    pub(in crate::cli) dry_run: bool,
}

/// `--fallback`: what an unattended run does when a step fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
// The values have no help of their own (the flag's says what each does): a description per
// value would turn `mekara run --help` into clap's long form.
pub(super) enum Fallback {
    // Stop the run at the failed step, resumable: nobody is watching to say whether the
    // script's own failure handling ("if the tests fail, stop") allows working around it.
    Stop,
    // The agent finishes the script by hand from its NL instructions.
    Agent,
}

impl UnattendedArgs {
    /// Whether the run is unattended.
    pub(in crate::cli) fn agent_given(&self) -> bool {
        self.agent.is_some() || self.agent_command.is_some()
    }

    /// The limits given as flags.
    pub(super) fn given(&self) -> limits::Given {
        limits::Given {
            caps: crate::engine::journal::Caps {
                max_cost: self.max_cost,
                max_tokens: self.max_tokens,
                max_step_tokens: self.max_step_tokens,
            },
            max_agent_steps: self.max_agent_steps,
            max_duration: self.max_duration,
            on_cap: self.on_cap,
        }
    }

    pub(super) fn agent(&self) -> Box<dyn Agent> {
        match (&self.agent, &self.agent_command) {
            (_, Some(command)) => Box::new(CommandAgent::new(command.clone())),
            (Some(headless), None) => (headless.start)(),
            // Not reached: the run is unattended only with one of the two.
            (None, None) => Box::new(ClaudeAgent),
        }
    }

    /// The note that says which agent drives the run, for the journal: the command that
    /// resumes it names the same agent ([`crate::engine::runs::resume_command`]).
    pub(super) fn note(&self) -> AgentEvent {
        AgentEvent {
            agent: match (&self.agent, &self.agent_command) {
                (Some(headless), None) => Some(headless.client.name.to_string()),
                _ => None,
            },
            command: self.agent_command.clone(),
            ignorable: true,
            at: crate::engine::journal::now_ms(),
        }
    }
}
