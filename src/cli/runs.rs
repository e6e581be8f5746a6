//! `mekara runs`: the runs of this project, and one run's journal, readably.

use super::output::{out, outln};
use clap::{Args, Subcommand};

use crate::display::{format_time, step_mark};
use crate::engine::journal::{Event, Origin, Outcome, Reason};
use crate::engine::runs::{RunState, live};
use crate::engine::step::StepRecord;
use crate::exit::Exit;
use crate::mcp::reply::resume_call;

#[derive(Debug, Args)]
pub(super) struct RunsArgs {
    #[command(subcommand)]
    command: Option<RunsCommand>,
}

#[derive(Debug, Subcommand)]
enum RunsCommand {
    /// Print a run's journal: every frame and step, with outputs.
    Show {
        /// The run's id, as `mekara runs` lists it.
        id: String,
    },
}

pub(super) fn run(args: RunsArgs) -> anyhow::Result<Exit> {
    let (locations, _) = super::locate()?;
    let store = super::run_store(&locations)?;
    match args.command {
        None => {
            let runs = store.list();
            if runs.is_empty() {
                outln!("no runs yet in {}", store.dir().display())?;
                return Ok(Exit::Success);
            }
            outln!(
                "{:20}  {:24}  {:24}  {:20}  STEPS",
                "ID",
                "SCRIPT",
                "STATE",
                "STARTED"
            )?;
            for r in runs {
                let script = r.script.replace('/', ":");
                match r.problem {
                    Some(problem) => outln!("{:20}  unreadable: {problem}", r.id)?,
                    None => outln!(
                        "{:20}  {:24}  {:24}  {:20}  {}",
                        r.id,
                        script,
                        r.state.to_string(),
                        format_time(r.started_at),
                        r.steps
                    )?,
                }
            }
        }
        Some(RunsCommand::Show { id }) => {
            let contents = store.read(&id)?;
            let mut out = String::new();
            // An unreadable order of supersede events is said by the state below; here,
            // every event then counts as live.
            let live = live(&contents.events).unwrap_or_else(|_| vec![true; contents.events.len()]);
            for (event, live) in contents.events.iter().zip(live) {
                let mut text = String::new();
                show_event(&mut text, event);
                if !live && !matches!(event, Event::Supersede(_)) {
                    text = mark_superseded(&text);
                }
                out.push_str(&text);
            }
            if let Some(torn) = contents.torn {
                out.push_str(&format!(
                    "! torn last record ({} bytes at byte {}): the writer stopped mid-write; it is ignored\n",
                    torn.len, torn.offset
                ));
            }
            match store.summary(id.clone()).state {
                RunState::Interrupted => out.push_str(&format!(
                    "interrupted: resume it with `mekara run --resume {id}`, or from an agent with MCP {}\n",
                    resume_call(&id)
                )),
                RunState::Active => {
                    out.push_str("active: another mekara process is driving it now\n");
                }
                RunState::NotStarted => out.push_str(
                    "stopped before its script started: nothing ran, so there is nothing to resume\n",
                ),
                RunState::Completed | RunState::FinishedByAgent | RunState::FellBack => {}
            }
            out!("{out}")?;
        }
    }
    Ok(Exit::Success)
}

fn show_event(out: &mut String, event: &Event) {
    match event {
        Event::Run(run) => out.push_str(&format!(
            "run {} (mekara {}), started {}\n",
            run.id,
            run.mekara,
            format_time(run.at)
        )),
        Event::Push(push) => {
            let indent = "  ".repeat(push.depth);
            let how = match push.origin {
                Origin::Start => "started",
                Origin::Call => "called",
            };
            let kind = if push.compiled { "compiled" } else { "NL" };
            out.push_str(&format!(
                "{indent}▶ {} ({kind}, {how}) in {}",
                push.script.replace('/', ":"),
                push.working_dir.display()
            ));
            if !push.request.is_empty() {
                out.push_str(&format!(" with `{}`", push.request));
            }
            out.push('\n');
        }
        Event::Step(step) => show_step(out, step.depth, &step.record),
        Event::Fail(fail) => {
            let indent = "  ".repeat(fail.depth + 1);
            out.push_str(&format!(
                "{indent}✗ fell back to the NL instructions: {}\n",
                indent_lines(&fail.error, &indent)
            ));
        }
        Event::Supersede(supersede) => {
            let indent = "  ".repeat(supersede.depth + 1);
            let why = match supersede.reason {
                Reason::Retry => "retry",
                Reason::ScriptChanged => "the script changed",
                Reason::From => "--from",
            };
            out.push_str(&format!(
                "{indent}↺ superseded from {}[{}] ({why}, by mekara {}): the events marked superseded stay in the journal; the run went on from there\n",
                supersede.script.replace('/', ":"),
                supersede.index,
                supersede.mekara
            ));
        }
        Event::Pop(pop) => {
            let indent = "  ".repeat(pop.depth);
            let how = match pop.outcome {
                Outcome::Completed => "completed",
                Outcome::FinishedByAgent => "finished by hand",
                Outcome::Failed => "failed",
            };
            out.push_str(&format!("{indent}◀ {how}"));
            if let Some(error) = &pop.error {
                out.push_str(&format!(": {}", indent_lines(error, &indent)));
            }
            out.push('\n');
        }
    }
}

fn show_step(out: &mut String, depth: usize, record: &StepRecord) {
    let indent = "  ".repeat(depth + 1);
    let mark = step_mark(record);
    out.push_str(&format!(
        "{indent}{mark} [{}] {}",
        record.index,
        record.input.summary()
    ));
    if let Some(context) = &record.context {
        out.push_str(&format!("  # {context}"));
    }
    if let Some(ms) = record.result.duration_ms {
        out.push_str(&format!("  ({ms} ms)"));
    }
    out.push('\n');
    let body = format!("{indent}    ");
    if !record.result.output.is_empty() {
        out.push_str(&format!(
            "{body}{}\n",
            indent_lines(record.result.output.trim_end(), &body)
        ));
    }
    if let Some(value) = &record.result.value {
        out.push_str(&format!("{body}= {value}\n"));
    }
    if let Some(outputs) = &record.result.outputs {
        out.push_str(&format!(
            "{body}→ {}\n",
            serde_json::Value::Object(outputs.clone())
        ));
    }
    if let Some(error) = &record.result.error {
        let label = if record.failure_allowed() {
            "error (allowed by `allow_failure`: the script went on)"
        } else {
            "error"
        };
        out.push_str(&format!("{body}{label}: {}\n", indent_lines(error, &body)));
    }
}

/// An event's text with its first line marked as superseded by a retry or rewind.
fn mark_superseded(text: &str) -> String {
    match text.split_once('\n') {
        Some((first, rest)) => format!("{first}  (superseded)\n{rest}"),
        None => format!("{text}  (superseded)"),
    }
}

fn indent_lines(text: &str, indent: &str) -> String {
    text.replace('\n', &format!("\n{indent}"))
}
