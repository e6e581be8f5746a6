//! The parent's side: starts `mekara __evaluate`, sends it the job, does what it asks with
//! the frame's runner, journal and observer, and makes of how it ended the evaluation's end.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde::Serialize;

use super::evaluator::SUBCOMMAND;
use super::protocol::{Answer, Ask, CallJob, FrameJob, Outcome, Start, stopped, write_line};
use super::sources::Sources;
use crate::engine::compiled::{Called, DirectCall, Evaluation, FrameRun};
use crate::engine::error::EngineError;
use crate::engine::journal::JournalError;
use crate::engine::runner::ShellStep;
use crate::engine::step::StepRecord;

/// Evaluates the script of `sources` over the frame's journal in a child process `exe
/// __evaluate`, doing what it asks with `run`'s runner, journal and observer; ends as
/// [`evaluate_counted`](crate::engine::compiled::evaluate_counted) does.
pub(crate) fn evaluate(
    exe: &Path,
    sources: &Sources,
    run: FrameRun<'_>,
) -> (Result<Evaluation, EngineError>, usize) {
    let start = Start::Frame(FrameJob {
        sources: sources.clone(),
        path: run.path.to_string(),
        request: run.request.to_string(),
        working_dir: run.working_dir.to_path_buf(),
        steps: run.steps.clone(),
        printed: *run.printed,
        default_timeout: run.default_timeout,
        limits: run.limits.clone(),
    });
    let Ended {
        run,
        end,
        journal_error,
    } = converse(exe, &start, run);
    match end {
        End::Finished {
            outcome,
            cursor,
            printed,
        } => {
            *run.printed = printed;
            let result = match outcome {
                Outcome::Evaluated(evaluation) => Ok(evaluation),
                outcome => Err(outcome.into_error(run.path, journal_error)),
            };
            (result, cursor)
        }
        End::Refused(message) => (Ok(Evaluation::Failed(message)), run.steps.len()),
        // A journal that could not be written says more than the child's end.
        End::Stopped(e) => (
            Err(journal_error.map_or(e, EngineError::Journal)),
            run.steps.len(),
        ),
    }
}

/// Calls a function of the module `source` (named `origin` in error locations) as
/// [`call_directly`](crate::engine::compiled::call_directly) does, in a child process `exe __evaluate` that loads the module
/// again (its top level only defines things) and asks for the steps the call runs.
pub(crate) fn call(
    exe: &Path,
    origin: &str,
    source: &str,
    call: DirectCall<'_>,
) -> Result<Called, EngineError> {
    let start = Start::Call(CallJob {
        origin: origin.to_string(),
        source: source.to_string(),
        function: call.function.to_string(),
        kwargs: call.kwargs.clone(),
        working_dir: call.working_dir.to_path_buf(),
        default_timeout: call.default_timeout,
        limits: call.limits.clone(),
    });
    // Nothing of the call is journaled or observed (as in `call_directly`).
    let (mut steps, mut printed) = (Vec::new(), 0);
    let mut forget = |_: &StepRecord| Ok(());
    let run = FrameRun::new(
        call.function,
        call.working_dir,
        &mut steps,
        &mut printed,
        &mut forget,
        call.runner,
        call.cancel,
        call.limits,
    )
    .default_timeout(call.default_timeout);
    let ended = converse(exe, &start, run);
    match ended.end {
        End::Finished {
            outcome: Outcome::Called(called),
            ..
        } => Ok(called),
        End::Finished { outcome, .. } => {
            Err(outcome.into_error(call.function, ended.journal_error))
        }
        End::Refused(message) => Ok(Called::Failed(message)),
        End::Stopped(e) => Err(e),
    }
}

/// How a conversation with a child ended.
struct Ended<'a> {
    /// The frame it was about, given back.
    run: FrameRun<'a>,
    /// How.
    end: End,
    /// Why the journal could not be written, when it could not.
    journal_error: Option<JournalError>,
}

/// How a child ended.
enum End {
    /// It said how the evaluation ended, where its cursor was and how many prints it
    /// reported.
    Finished {
        outcome: Outcome,
        cursor: usize,
        printed: usize,
    },
    /// It stopped at the memory cap: the script's failure, with the cap's message and the
    /// statement.
    Refused(String),
    /// It stopped any other way before it said: the run is kept as it was.
    Stopped(EngineError),
}

/// Starts `exe __evaluate`, sends it `start` and does what it asks with `run` until it says
/// how the evaluation ended or stops.
fn converse<'a>(exe: &Path, start: &Start, run: FrameRun<'a>) -> Ended<'a> {
    let mut child = match spawn(exe) {
        Ok(child) => child,
        Err(e) => {
            let detail = format!("cannot start `{} {SUBCOMMAND}`: {e}", exe.display());
            return Ended {
                end: End::Stopped(stopped(run.path, &detail)),
                run,
                journal_error: None,
            };
        }
    };
    let stderr = child.stderr.take().map(keep_stderr);
    let mut parent = Parent {
        run,
        to_child: child.stdin.take(),
        from_child: child.stdout.take().map(BufReader::new),
        journal_error: None,
    };
    let finished = parent.serve(start);
    // The child says nothing after `Finished`; closing its stdin lets it go.
    drop(parent.to_child.take());
    drop(parent.from_child.take());
    let status = child.wait();
    let said = stderr
        .and_then(|reader| reader.join().ok())
        .unwrap_or_default();
    let Parent {
        run, journal_error, ..
    } = parent;
    let end = if let Some((outcome, cursor, printed)) = finished {
        End::Finished {
            outcome,
            cursor,
            printed,
        }
    } else if let Some(refused) = refusal(&said) {
        End::Refused(refused)
    } else {
        let how = match status {
            Ok(status) => status.to_string(),
            Err(e) => format!("cannot wait for it: {e}"),
        };
        let said = said.trim();
        let detail = if said.is_empty() {
            format!("its process ended ({how}) before the evaluation did")
        } else {
            format!("its process ended ({how}) before the evaluation did, saying: {said}")
        };
        End::Stopped(stopped(run.path, &detail))
    };
    Ended {
        run,
        end,
        journal_error,
    }
}

/// Starts `exe __evaluate`, in a process group of its own: a Ctrl-C at the terminal goes to
/// the parent, which stops the step in flight and so the evaluation.
fn spawn(exe: &Path) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt as _;
    Command::new(exe)
        .arg(SUBCOMMAND)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
}

/// The most of the child's stderr that is kept.
const STDERR_KEPT: usize = 64 * 1024;

/// Reads the child's stderr to its end on a thread of its own, keeping its beginning.
fn keep_stderr(mut stderr: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut kept = Vec::new();
        let mut buffer = [0u8; 8192];
        while let Ok(n) = stderr.read(&mut buffer) {
            if n == 0 {
                break;
            }
            let room = STDERR_KEPT.saturating_sub(kept.len());
            kept.extend_from_slice(&buffer[..n.min(room)]);
        }
        String::from_utf8_lossy(&kept).into_owned()
    })
}

/// The memory cap's message in what a child said, without the line that says the process
/// stops (here only the evaluation does).
fn refusal(said: &str) -> Option<String> {
    let at = said.find(crate::memory::REFUSED)?;
    let message = &said[at..];
    let end = message.find(crate::memory::STOPS).unwrap_or(message.len());
    Some(message[..end].trim_end().to_string())
}

/// The parent's side of the conversation.
struct Parent<'a> {
    run: FrameRun<'a>,
    to_child: Option<ChildStdin>,
    from_child: Option<BufReader<ChildStdout>>,
    /// Why the journal could not be written, when it could not.
    journal_error: Option<JournalError>,
}

impl Parent<'_> {
    /// Sends `start`, then does what the child asks until it says how the evaluation ended
    /// (`None`: it stopped first).
    fn serve(&mut self, start: &Start) -> Option<(Outcome, usize, usize)> {
        self.send(start)?;
        loop {
            match self.next_ask()? {
                Ask::Finished {
                    outcome,
                    cursor,
                    printed,
                } => return Some((outcome, cursor, printed)),
                ask => self.answer(ask)?,
            }
        }
    }

    /// What the child says next (`None`: it stopped, or said something that is not its
    /// protocol).
    fn next_ask(&mut self) -> Option<Ask> {
        let mut line = String::new();
        match self.from_child.as_mut()?.read_line(&mut line) {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
        serde_json::from_str(&line)
            .inspect_err(|e| {
                tracing::warn!("the evaluating child said something that is not its protocol: {e}");
            })
            .ok()
    }

    /// Does what the child asks until it says [`Ask::Next`].
    fn until_next(&mut self) -> Option<()> {
        loop {
            match self.next_ask()? {
                Ask::Next => return Some(()),
                Ask::Finished { .. } => return None,
                ask => self.answer(ask)?,
            }
        }
    }

    /// Does what `ask` asks, and answers when it takes an answer.
    fn answer(&mut self, ask: Ask) -> Option<()> {
        let run = &self.run;
        match ask {
            Ask::Shell(shell) => {
                let step = shell.into_step(run);
                let ran = run.runner.run_shell(
                    &step,
                    &mut |chunk| run.observer.output(chunk),
                    run.cancel,
                );
                self.send(&Answer::Ran(ran))
            }
            Ask::Shells { steps, max } => {
                let steps: Vec<ShellStep> = steps.into_iter().map(|s| s.into_step(run)).collect();
                let (runner, cancel) = (run.runner, run.cancel);
                let mut gone = false;
                // Each result goes to the child as it comes, and the child journals it while
                // the others run, as an evaluation here would. A child that is gone leaves
                // the others to end unrecorded, as after a kill.
                runner.run_shells(&steps, max, cancel, &mut |at, ran| {
                    gone = gone
                        || self.send(&Answer::Done { at, ran }).is_none()
                        || self.until_next().is_none();
                });
                if gone {
                    return None;
                }
                self.send(&Answer::AllDone)
            }
            Ask::Tool(call) => {
                let ran = run.runner.call_tool(&call, run.cancel);
                self.send(&Answer::Ran(ran))
            }
            Ask::Journal(record) => {
                let written = (self.run.journal)(&record);
                let ok = match written {
                    Ok(()) => {
                        self.run.steps.push(record);
                        true
                    }
                    Err(e) => {
                        self.journal_error = Some(e);
                        false
                    }
                };
                self.send(&Answer::Journaled(ok))
            }
            Ask::StepStarted {
                frame,
                index,
                input,
                context,
            } => {
                run.observer
                    .step_started(&frame, index, &input, context.as_deref());
                Some(())
            }
            Ask::Output(text) => {
                run.observer.output(text.as_bytes());
                Some(())
            }
            Ask::Print { frame, text } => {
                run.observer.print(&frame, &text);
                Some(())
            }
            Ask::StepFinished { frame, record } => {
                run.observer.step_finished(&frame, &record);
                Some(())
            }
            Ask::Next | Ask::Finished { .. } => Some(()),
        }
    }

    /// Sends `message` to the child (`None`: it is gone).
    fn send(&mut self, message: &impl Serialize) -> Option<()> {
        write_line(self.to_child.as_mut()?, message).ok()
    }
}
