//! `mekara answer RUN_ID VALUE`: answers the question a run stopped at (`ask` in an
//! unattended run, or one left at a prompt), or the spend cap an unattended run paused at
//! (`stop`, or the caps raised: `max-cost=USD`, `max-tokens=N`, `max-step-tokens=N`). The answer is journaled under the run's lock,
//! as a resume takes it; nothing of the script runs here: the next `mekara run --resume`
//! goes on with it.

use clap::Args;

use super::output::outln;
use crate::engine::step::AnsweredBy;
use crate::engine::{Answer, Executor};
use crate::exit::Exit;

#[derive(Debug, Args)]
pub(super) struct AnswerArgs {
    /// The run's id, as `mekara runs` lists it.
    id: String,
    /// The answer: any text, or one of the question's choices (as written, or its number);
    /// to a run paused at a spend cap, `stop` or the caps raised (`max-cost=2`,
    /// `max-tokens=N`, `max-step-tokens=N`, several separated by spaces).
    value: String,
}

pub(super) fn run(args: &AnswerArgs) -> anyhow::Result<Exit> {
    let (locations, resolver) = super::locate()?;
    let store = super::run_store(&locations)?;
    let id = args.id.as_str();
    if let Some(answered) = crate::engine::caps::answer_cap(
        resolver.clone(),
        store.clone(),
        id,
        &args.value,
        AnsweredBy::Command,
    )? {
        return match answered {
            Err(error) => super::usage(error),
            Ok(answer) => {
                outln!("{}", answer.said(id, &store.resume_command(id, false)))?;
                Ok(Exit::Success)
            }
        };
    }
    let (path, answered) = Executor::answer_run(
        resolver,
        store.clone(),
        id,
        &args.value,
        AnsweredBy::Command,
    )?;
    match answered {
        Answer::Given(answer) => {
            let resume = store.resume_command(id, false);
            // Said when the journal does not name the agent that drove the run.
            let hint = if resume.contains(" --agent") {
                ""
            } else {
                " (to go on unattended, add the run's `--agent NAME` or `--agent-command CMD`)"
            };
            outln!("answered `{path}` with `{answer}`; go on with `{resume}`{hint}")?;
            Ok(Exit::Success)
        }
        Answer::TooLate(late) => {
            outln!(
                "the answer came too late: {} after the question's timeout, so `{path}` failed and the answer was not kept; `mekara run --resume {id}` goes on as from any failed step, and `mekara run --resume {id} --retry` after that asks again",
                humantime::format_duration(std::time::Duration::from_secs(late.as_secs()))
            )?;
            Ok(Exit::Failure)
        }
    }
}
