//! What `mekara run` asks the person: the outputs of an llm step, that a step done by hand is
//! done, the script's question; and how it leaves a prompt nobody answered.

use std::io::{IsTerminal, Write};
use std::time::Instant;

use serde_json::{Map, Value as Json};

use super::answers::{Answers, Asked};
use super::terminal::Terminal;
use crate::cli::output::{out, outln};
use crate::engine::step::AnsweredBy;
use crate::engine::{EngineError, Executor, Pending};
use crate::exit::Exit;

/// The moment a question asked at `asked_at` (Unix ms) times out, as an [`Instant`].
pub(super) fn deadline_of(asked_at: u64, timeout: std::time::Duration) -> Instant {
    let now_ms = crate::engine::journal::now_ms();
    let left = (asked_at.saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)))
        .saturating_sub(now_ms);
    Instant::now() + std::time::Duration::from_millis(left)
}

/// Asks the person the script's question (`ask`) until an answer fits its choices (at a
/// terminal; piped, a wrong answer ends the run, resumable) or its timeout passes. Returns
/// what the engine did with the answer, or how mekara leaves.
pub(super) fn ask_person(
    executor: &mut Executor,
    input: &mut Answers,
    path: &str,
    question: &str,
    choices: Option<&[String]>,
    deadline: Option<Instant>,
    terminal: &Terminal,
) -> anyhow::Result<Result<Result<Pending, EngineError>, Exit>> {
    outln!("\n── question {path} ──\n{}", question.trim_end())?;
    if let Some(choices) = choices {
        for (n, choice) in choices.iter().enumerate() {
            outln!("  {}. {choice}", n + 1)?;
        }
    }
    if choices.is_none() {
        outln!("{SEVERAL_LINES}")?;
    }
    loop {
        out!(
            "{}",
            if choices.is_some() {
                "answer (a choice or its number): "
            } else {
                "answer: "
            }
        )?;
        std::io::stdout().flush()?;
        let first = match input.line_until(deadline)? {
            Asked::Answered(line) => {
                echo(&line)?;
                Asked::Answered(line)
            }
            other => other,
        };
        // A choice is one line; a free answer may be a block of several.
        let answered = match first {
            Asked::Answered(line) if choices.is_none() => rest_of_block(input, line, deadline)?,
            other => other,
        };
        let line = match answered {
            Asked::Answered(line) => {
                terminal.at_line_start.set(true);
                line
            }
            Asked::TimedOut => {
                outln!("\nno answer within the question's timeout")?;
                terminal.at_line_start.set(true);
                // Past its deadline the question fails as the engine re-derives it.
                return Ok(Ok(executor.advance(terminal)));
            }
            unanswered => return left_at_prompt(executor, &unanswered).map(Err),
        };
        match executor.answer_ask(&line, AnsweredBy::Terminal, terminal) {
            Err(e @ EngineError::NotAChoice { .. }) if std::io::stdin().is_terminal() => {
                outln!("{e}")?;
            }
            Err(e @ EngineError::NotAChoice { .. }) => {
                let id = executor.run_id().unwrap_or_default();
                outln!(
                    "{e}\nthe run is saved: resume it with `mekara run --resume {id}`, or answer it with `mekara answer {id} VALUE`"
                )?;
                return Ok(Err(Exit::Failure));
            }
            next => return Ok(Ok(next)),
        }
    }
}

/// Leaves the run at a prompt nobody answered. The run was synced before mekara asked, so it
/// resumes from this prompt.
pub(super) fn left_at_prompt<T>(executor: &Executor, how: &Asked<T>) -> anyhow::Result<Exit> {
    let id = executor.run_id().unwrap_or_default();
    if let Asked::Interrupted = how {
        eprintln!("\ninterrupted; resume with `mekara run --resume {id}`");
        Ok(Exit::Interrupted)
    } else {
        outln!(
            "\nstdin closed before the run finished; it is saved: resume it with `mekara run --resume {id}`"
        )?;
        Ok(Exit::Failure)
    }
}

/// The line that opens and closes an answer of several lines, alone on its line.
const BLOCK: &str = "\"\"\"";

/// What the person is told before a prompt that takes free text.
const SEVERAL_LINES: &str = "(one line is the answer; for several lines, type \"\"\" alone on a \
     line, then the lines, then \"\"\" alone again)";

/// Echoes a piped answer's line, so the transcript reads as it would have on a terminal.
fn echo(line: &str) -> anyhow::Result<()> {
    if !std::io::stdin().is_terminal() {
        outln!("{line}")?;
    }
    Ok(())
}

/// The answer whose first line is `first`: that line, or, when it is [`BLOCK`], the lines up
/// to the next [`BLOCK`], joined with newlines.
fn rest_of_block(
    input: &mut Answers,
    first: String,
    deadline: Option<Instant>,
) -> anyhow::Result<Asked<String>> {
    if first.trim() != BLOCK {
        return Ok(Asked::Answered(first));
    }
    let mut lines = Vec::new();
    loop {
        match input.line_until(deadline)? {
            Asked::Answered(line) => {
                echo(&line)?;
                if line.trim() == BLOCK {
                    return Ok(Asked::Answered(lines.join("\n")));
                }
                lines.push(line);
            }
            unanswered => return Ok(unanswered),
        }
    }
}

/// Reads one line. Piped answers are echoed, so the transcript reads as it would have on a
/// terminal.
fn read_line(input: &mut Answers) -> anyhow::Result<Asked<String>> {
    std::io::stdout().flush()?;
    let line = input.line()?;
    if let Asked::Answered(line) = &line {
        echo(line)?;
    }
    Ok(line)
}

pub(super) fn ask_done(input: &mut Answers, prompt: &str) -> anyhow::Result<Asked<()>> {
    Ok(ask_line(input, prompt)?.map(|_| ()))
}

/// Asks `prompt`, and reads the line that answers it.
pub(super) fn ask_line(input: &mut Answers, prompt: &str) -> anyhow::Result<Asked<String>> {
    out!("{prompt} ")?;
    read_line(input)
}

/// What a piped `mekara run` types to say that a failed script was finished by hand.
pub(super) const DONE: &str = "done";

/// Leaves a run at the fallback of a failed step, with input that is not a terminal, when
/// the line read was not [`DONE`] (or stdin ended): a failure is never taken as finished by
/// hand from whatever line comes next. The run stops there, saved, as an unattended run
/// does, and mekara says how to run the failed step again.
pub(super) fn stopped_at_failure(
    executor: &Executor,
    read: &Asked<String>,
) -> anyhow::Result<Exit> {
    let id = executor.run_id().unwrap_or_default();
    let why = match read {
        Asked::Answered(line) => format!(
            "the line read was `{}`, not `{DONE}`",
            crate::display::echoed(line)
        ),
        _ => "stdin ended".to_string(),
    };
    outln!(
        "\nthe run stopped at the failure: with input that is not a terminal, only a line `{DONE}` says the script was finished by hand, and {why}\nthe run is saved: fix the cause, then run the failed step again and go on with `mekara run --resume {id} --retry` (or, once you have finished the script by hand, `mekara run --resume {id}` and answer `{DONE}`)"
    )?;
    Ok(Exit::Failure)
}

/// Asks for each expected output in turn.
pub(super) fn ask_outputs(
    input: &mut Answers,
    expects: Option<&Map<String, Json>>,
) -> anyhow::Result<Asked<Map<String, Json>>> {
    let mut outputs = Map::new();
    let Some(expects) = expects.filter(|e| !e.is_empty()) else {
        return Ok(ask_done(input, "Press Enter when done.")?.map(|()| outputs));
    };
    outln!("{SEVERAL_LINES}")?;
    for (name, description) in expects {
        match description.as_str().filter(|d| !d.is_empty()) {
            Some(d) => out!("{name} ({}): ", d.trim_end())?,
            None => out!("{name}: ")?,
        }
        let answered = match read_line(input)? {
            Asked::Answered(first) => rest_of_block(input, first, None)?,
            unanswered => unanswered,
        };
        match answered {
            Asked::Answered(answer) => outputs.insert(name.clone(), Json::String(answer)),
            unanswered => return Ok(unanswered.map(|_| Map::new())),
        };
    }
    Ok(Asked::Answered(outputs))
}
