//! Evaluation in a child process: a script that asks for more memory than an evaluation may
//! have ends as that script's failure, not as the end of the mekara that runs it.
//!
//! starlark 0.14 cannot survive a refused allocation (see `crate::memory`): the process
//! stops. So the parent (a terminal run, an MCP server with many sessions, a worker) does
//! not evaluate scripts itself. It starts `mekara __evaluate`, sends it the script, its
//! helper modules and the frame's journal ([`Start`]), and does what the child asks
//! ([`Ask`]): run a shell step or a tool call, journal a step, tell the observer. The child
//! has no effect of its own (it only evaluates Starlark), so a child that stops halfway has
//! done nothing the journal does not hold, and one orphaned by a killed parent does nothing
//! at all. When it stops with the memory cap's message, the parent makes that message the
//! script's failure, with the statement's line; when it stops any other way, the run is kept
//! as it was and the error says so.
//!
//! The two talk in lines of JSON over the child's stdin and stdout; the child's stderr is
//! kept for what it says when it stops.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use starlark::syntax::AstModule;

use super::modules::{FindModule, ModuleGraph};
use super::{Called, CodeError, Evaluation, FrameRun, Limits, Program, evaluate_counted};
use crate::engine::error::EngineError;
use crate::engine::journal::JournalError;
use crate::engine::observer::Observer;
use crate::engine::runner::{CancelToken, Ran, ShellStep, StepRunner, ToolCall};
use crate::engine::step::{StepInput, StepRecord};
use crate::script::{HelperError, ScriptFile};

/// The hidden subcommand the child runs.
pub(crate) const SUBCOMMAND: &str = "__evaluate";

/// The `mekara` binary that evaluates scripts in child processes: the one that runs now.
/// `None` (scripts are then evaluated in this process) when `MEKARA_EVALUATE_IN_PROCESS` is
/// set (a little faster, but a script past the memory cap then stops mekara), or, with a
/// warning, when the binary cannot be found.
///
/// On Linux it is reached through a descriptor this process keeps open (`/proc/self/fd/N`):
/// that is this binary even once an upgrade replaced the file at its path (a long-lived
/// `mekara mcp` must not start a newer mekara that speaks otherwise), and, unlike
/// `/proc/self/exe`, also under valgrind or an emulator, whose own binary that is.
pub(crate) fn evaluator() -> Option<PathBuf> {
    static OWN: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    if std::env::var_os("MEKARA_EVALUATE_IN_PROCESS").is_some_and(|v| !v.is_empty()) {
        return None;
    }
    OWN.get_or_init(|| {
        let exe = std::env::current_exe()
            .inspect_err(|e| {
                tracing::warn!(
                    "cannot find mekara's own binary ({e}): scripts are evaluated in this process"
                );
            })
            .ok()?;
        if cfg!(target_os = "linux")
            && let Ok(file) = std::fs::File::open(&exe)
        {
            // Kept open for the life of the process (it is closed on exec).
            let fd = std::os::fd::IntoRawFd::into_raw_fd(file);
            let kept = PathBuf::from(format!("/proc/self/fd/{fd}"));
            if kept.exists() {
                return Some(kept);
            }
        }
        Some(exe)
    })
    .clone()
}

/// What a child needs to load a script: its text and every helper module it loads, read
/// by the parent (so the child reads no file), and the text of their string literals.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Sources {
    /// The script's file, in error locations.
    origin: String,
    /// Its text.
    text: String,
    /// The helper modules, by the `load` path that names them.
    helpers: BTreeMap<String, ScriptFile>,
    /// The text of the string literals of the script and its helpers: where the author
    /// writes the prompt tags that may call tools (see `Program::authored`).
    authored: String,
}

impl Sources {
    /// Reads `source` and, through `find`, the helper modules it loads, parsing them (which
    /// finds syntax errors, missing modules and cycles, as loading them would) without
    /// running any of them.
    pub(crate) fn collect(
        origin: &str,
        source: &str,
        find: &FindModule<'_>,
    ) -> Result<Sources, CodeError> {
        let helpers = RefCell::new(BTreeMap::new());
        let recording = |path: &str| -> Result<ScriptFile, HelperError> {
            let file = find(path)?;
            helpers.borrow_mut().insert(path.to_string(), file.clone());
            Ok(file)
        };
        let authored = ModuleGraph::collect(origin, source, &recording)?.authored();
        Ok(Sources {
            origin: origin.to_string(),
            text: source.to_string(),
            helpers: helpers.into_inner(),
            authored,
        })
    }

    /// The text of the string literals of the script and its helpers.
    pub(crate) fn authored(&self) -> &str {
        &self.authored
    }
}

/// What the parent sends first: the job.
#[derive(Serialize, Deserialize)]
enum Start {
    /// Evaluate a frame of a run.
    Frame(FrameJob),
    /// Call a function of a tool module (`mekara serve`).
    Call(CallJob),
}

/// A frame to evaluate: its script, and its journal.
#[derive(Serialize, Deserialize)]
struct FrameJob {
    sources: Sources,
    path: String,
    request: String,
    working_dir: PathBuf,
    steps: Vec<StepRecord>,
    printed: usize,
    default_timeout: Duration,
    limits: Limits,
}

/// A function of a tool module to call.
#[derive(Serialize, Deserialize)]
struct CallJob {
    origin: String,
    source: String,
    function: String,
    kwargs: Map<String, Json>,
    working_dir: PathBuf,
    default_timeout: Duration,
    limits: Limits,
}

/// A shell step as the child asks for it; the parent adds where its group is noted.
#[derive(Serialize, Deserialize)]
struct Shell {
    command: String,
    working_dir: PathBuf,
    env: BTreeMap<String, String>,
    timeout: Duration,
}

impl Shell {
    fn of(step: &ShellStep) -> Shell {
        Shell {
            command: step.command.clone(),
            working_dir: step.working_dir.clone(),
            env: step.env.clone(),
            timeout: step.timeout,
        }
    }

    fn into_step(self, run: &FrameRun<'_>) -> ShellStep {
        ShellStep {
            command: self.command,
            working_dir: self.working_dir,
            env: self.env,
            timeout: self.timeout,
            group_note: run.group_note.cloned(),
        }
    }
}

/// What the child asks of the parent, or tells it.
#[derive(Serialize, Deserialize)]
enum Ask {
    /// Run a shell step; the answer is [`Answer::Ran`]. Its output goes to the parent's
    /// observer as it comes, which is all the step builtins do with it.
    Shell(Shell),
    /// Run the shell steps of a round of a `parallel` group, at most `max` at once; the
    /// answers are an [`Answer::Done`] for each as it ends, then [`Answer::AllDone`]. The
    /// child journals each (which the parent answers while the others run) and says
    /// [`Ask::Next`] before the next one comes.
    Shells {
        steps: Vec<Shell>,
        max: usize,
    },
    /// The child is ready for the next [`Answer::Done`].
    Next,
    /// Call a tool; the answer is [`Answer::Ran`].
    Tool(ToolCall),
    /// Journal a step; the answer is [`Answer::Journaled`].
    Journal(StepRecord),
    /// The observer's calls, which take no answer.
    StepStarted {
        frame: String,
        index: usize,
        input: StepInput,
        context: Option<String>,
    },
    /// Output for the observer, as text (what it shows of it).
    Output(String),
    Print {
        frame: String,
        text: String,
    },
    StepFinished {
        frame: String,
        record: StepRecord,
    },
    /// The evaluation ended; the child says nothing more.
    Finished {
        outcome: Outcome,
        cursor: usize,
        printed: usize,
    },
}

/// The parent's answers.
#[derive(Serialize, Deserialize)]
enum Answer {
    Ran(Ran),
    Done {
        at: usize,
        ran: Ran,
    },
    AllDone,
    /// Whether the step was journaled (when not, the parent keeps why).
    Journaled(bool),
}

/// How an evaluation ended, as the child tells it: the errors an evaluation can end with
/// (see `evaluate_counted`).
#[derive(Serialize, Deserialize)]
enum Outcome {
    Evaluated(Evaluation),
    Called(Called),
    Diverged {
        script: String,
        index: usize,
        detail: String,
    },
    Cancelled {
        script: String,
        index: usize,
    },
    /// The journal could not be written: the parent knows why.
    Journal,
    /// Any other error, as its message.
    Other(String),
}

impl Outcome {
    fn of<T>(result: Result<T, EngineError>, ok: impl FnOnce(T) -> Outcome) -> Outcome {
        match result {
            Ok(value) => ok(value),
            Err(EngineError::Diverged {
                script,
                index,
                detail,
            }) => Outcome::Diverged {
                script,
                index,
                detail,
            },
            Err(EngineError::Cancelled { script, index }) => Outcome::Cancelled { script, index },
            Err(EngineError::Journal(_)) => Outcome::Journal,
            Err(e) => Outcome::Other(e.to_string()),
        }
    }

    /// The error of an outcome that is one, or that is not the job's (for frame `path`).
    fn into_error(self, path: &str, journal_error: Option<JournalError>) -> EngineError {
        match self {
            Outcome::Diverged {
                script,
                index,
                detail,
            } => EngineError::Diverged {
                script,
                index,
                detail,
            },
            Outcome::Cancelled { script, index } => EngineError::Cancelled { script, index },
            Outcome::Journal => journal_error.map_or_else(
                || stopped(path, "the journal could not be written"),
                EngineError::Journal,
            ),
            Outcome::Other(message) => stopped(path, &message),
            Outcome::Evaluated(_) | Outcome::Called(_) => {
                stopped(path, "the child answered another job than it was given")
            }
        }
    }
}

// The parent.

/// Evaluates the script of `sources` over the frame's journal in a child process `exe
/// __evaluate`, doing what it asks with `run`'s runner, journal and observer; ends as
/// [`evaluate_counted`] does.
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
/// [`super::call_directly`] does, in a child process `exe __evaluate` that loads the module
/// again (its top level only defines things) and asks for the steps the call runs.
pub(crate) fn call(
    exe: &Path,
    origin: &str,
    source: &str,
    call: super::DirectCall<'_>,
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
    let run = FrameRun {
        path: call.function,
        request: "",
        working_dir: call.working_dir,
        steps: &mut steps,
        printed: &mut printed,
        journal: &mut forget,
        runner: call.runner,
        group_note: None,
        observer: &crate::engine::observer::Quiet,
        cancel: call.cancel,
        default_timeout: call.default_timeout,
        limits: call.limits,
        source: "",
    };
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

/// The error of an evaluation that stopped in the child for a reason that is not the
/// script's.
fn stopped(path: &str, detail: &str) -> EngineError {
    EngineError::Evaluation {
        script: path.to_string(),
        detail: detail.to_string(),
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

/// Writes `message` as one line of JSON.
fn write_line(out: &mut impl Write, message: &impl Serialize) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).map_err(std::io::Error::other)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

// The child.

/// The child's end: reads the [`Start`] from stdin, evaluates, and says how it ended.
pub(crate) fn serve_parent() -> anyhow::Result<()> {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() {
        anyhow::bail!(
            "`mekara {SUBCOMMAND}` is the process mekara evaluates scripts in, not a command \
             for people; `mekara --help` lists those"
        );
    }
    let mut from_parent = BufReader::new(std::io::stdin());
    let mut line = String::new();
    from_parent.read_line(&mut line)?;
    let start: Start = serde_json::from_str(&line).map_err(|e| {
        anyhow::anyhow!(
            "`mekara {SUBCOMMAND}` is mekara's own, and this one ({}) does not understand the \
             mekara that started it ({e}): was mekara upgraded under it? Restart it",
            env!("CARGO_PKG_VERSION")
        )
    })?;
    let link = Link(Mutex::new((from_parent, std::io::stdout())));
    let finished = match start {
        Start::Frame(job) => evaluate_frame(job, &link),
        Start::Call(job) => call_function(job, &link),
    };
    link.tell(&finished);
    Ok(())
}

/// Evaluates the frame of `job`, asking `link` for its steps.
fn evaluate_frame(job: FrameJob, link: &Link) -> Ask {
    let FrameJob {
        sources,
        path,
        request,
        working_dir,
        mut steps,
        mut printed,
        default_timeout,
        limits,
    } = job;
    let find = |name: &str| -> Result<ScriptFile, HelperError> {
        sources
            .helpers
            .get(name)
            .cloned()
            .ok_or_else(|| HelperError::BadPath {
                path: name.to_string(),
                reason: "the parent sent no such module".to_string(),
            })
    };
    let (outcome, cursor) = match Program::load(&sources.origin, &sources.text, &find, &limits) {
        Err(code) => (Outcome::Evaluated(Evaluation::Failed(code.message)), 0),
        Ok(program) => {
            let cancel = CancelToken::default();
            let mut journal = |record: &StepRecord| link.journal(record);
            let (result, cursor) = evaluate_counted(
                &program,
                FrameRun {
                    path: &path,
                    request: &request,
                    working_dir: &working_dir,
                    steps: &mut steps,
                    printed: &mut printed,
                    journal: &mut journal,
                    runner: link,
                    // The parent notes the groups of the shell steps it runs for the child.
                    group_note: None,
                    observer: link,
                    cancel: &cancel,
                    default_timeout,
                    limits: &limits,
                    source: &sources.authored,
                },
            );
            (Outcome::of(result, Outcome::Evaluated), cursor)
        }
    };
    Ask::Finished {
        outcome,
        cursor,
        printed,
    }
}

/// Calls the function of `job`, asking `link` for its steps.
fn call_function(job: CallJob, link: &Link) -> Ask {
    let loaded = AstModule::parse(&job.origin, job.source, &super::dialect())
        .map_err(|e| e.to_string())
        .and_then(|ast| {
            super::freeze_module(&job.origin, ast, &job.limits, &HashMap::new())
                .map_err(|e| e.message)
        });
    let outcome = match loaded {
        Err(message) => Outcome::Called(Called::Failed(message)),
        Ok(module) => {
            let cancel = CancelToken::default();
            let called = super::call_directly(super::DirectCall {
                module: &module,
                function: &job.function,
                kwargs: &job.kwargs,
                working_dir: &job.working_dir,
                runner: link,
                cancel: &cancel,
                default_timeout: job.default_timeout,
                limits: &job.limits,
            });
            Outcome::of(called, Outcome::Called)
        }
    };
    Ask::Finished {
        outcome,
        cursor: 0,
        printed: 0,
    }
}

/// Ends the child when its parent is gone or no longer follows the protocol: nothing it
/// would do next could reach anyone.
fn parent_gone() -> ! {
    std::process::exit(2)
}

/// The child's line to its parent, which is its runner and its observer.
struct Link(Mutex<(BufReader<std::io::Stdin>, std::io::Stdout)>);

impl Link {
    /// Says `ask` and waits for the answer (see [`parent_gone`]).
    fn ask(&self, ask: &Ask) -> Answer {
        let mut link = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (from_parent, to_parent) = &mut *link;
        if write_line(to_parent, ask).is_err() {
            parent_gone();
        }
        Self::read(from_parent)
    }

    fn read(from_parent: &mut impl BufRead) -> Answer {
        let mut line = String::new();
        match from_parent.read_line(&mut line) {
            Ok(n) if n > 0 => {}
            _ => parent_gone(),
        }
        serde_json::from_str(&line).unwrap_or_else(|_| parent_gone())
    }

    /// Says `ask`, which takes no answer.
    fn tell(&self, ask: &Ask) {
        let mut link = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if write_line(&mut link.1, ask).is_err() {
            parent_gone();
        }
    }

    fn ran(&self, ask: &Ask) -> Ran {
        match self.ask(ask) {
            Answer::Ran(ran) => ran,
            _ => parent_gone(),
        }
    }

    fn journal(&self, record: &StepRecord) -> Result<(), JournalError> {
        match self.ask(&Ask::Journal(record.clone())) {
            Answer::Journaled(true) => Ok(()),
            // The parent keeps the real error; this one only ends the evaluation.
            _ => Err(JournalError::Io {
                path: PathBuf::from("(the parent's journal)"),
                source: std::io::Error::other("not written"),
            }),
        }
    }
}

impl StepRunner for Link {
    fn run_shell(
        &self,
        step: &ShellStep,
        _on_output: &mut dyn FnMut(&[u8]),
        _cancel: &CancelToken,
    ) -> Ran {
        self.ran(&Ask::Shell(Shell::of(step)))
    }

    fn run_shells(
        &self,
        steps: &[ShellStep],
        max: usize,
        _cancel: &CancelToken,
        on_done: &mut dyn FnMut(usize, Ran),
    ) {
        self.tell(&Ask::Shells {
            steps: steps.iter().map(Shell::of).collect(),
            max,
        });
        loop {
            // Not locked while `on_done` journals the step, which asks the parent.
            let answer = {
                let mut link = self
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                Self::read(&mut link.0)
            };
            match answer {
                Answer::Done { at, ran } => {
                    on_done(at, ran);
                    self.tell(&Ask::Next);
                }
                Answer::AllDone => return,
                _ => parent_gone(),
            }
        }
    }

    fn call_tool(&self, call: &ToolCall, _cancel: &CancelToken) -> Ran {
        self.ran(&Ask::Tool(call.clone()))
    }
}

impl Observer for Link {
    fn step_started(&self, frame: &str, index: usize, input: &StepInput, context: Option<&str>) {
        self.tell(&Ask::StepStarted {
            frame: frame.to_string(),
            index,
            input: input.clone(),
            context: context.map(str::to_string),
        });
    }

    fn output(&self, chunk: &[u8]) {
        self.tell(&Ask::Output(String::from_utf8_lossy(chunk).into_owned()));
    }

    fn print(&self, frame: &str, text: &str) {
        self.tell(&Ask::Print {
            frame: frame.to_string(),
            text: text.to_string(),
        });
    }

    fn step_finished(&self, frame: &str, record: &StepRecord) {
        self.tell(&Ask::StepFinished {
            frame: frame.to_string(),
            record: record.clone(),
        });
    }
}
