//! `mekara run`: drive a script from the terminal. Auto steps run here with their output
//! streamed live; the person does the llm steps and NL scripts, typing each expected output.
//! With stdin not a terminal, answers are read line by line, so tests and CI can drive it.

use super::output::{out, outln};
use std::cell::{Cell, RefCell};
use std::io::{IsTerminal, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use serde_json::{Map, Value as Json};

use crate::display::{count, rewind_summary, step_mark};
use crate::engine::journal::Outcome;
use crate::engine::runs::{RunHistory, RunStore};
use crate::engine::step::{AnsweredBy, StepInput, StepRecord};
use crate::engine::{
    CancelToken, EngineError, Executor, FrameEvent, Observer, Pending, Rewind, Settings,
    ShellRunner,
};
use crate::exit::Exit;

#[derive(Debug, Args)]
pub(super) struct RunArgs {
    /// The script to run (`test/random` or `test:random`).
    #[arg(required_unless_present = "resume")]
    name: Option<String>,
    /// The script's arguments (`$ARGUMENTS`, and `request` of `execute`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    arguments: Vec<String>,
    /// Continue an interrupted run instead; auto steps that finished do not run again.
    #[arg(long, value_name = "ID", conflicts_with_all = ["name", "arguments"])]
    resume: Option<String>,
    /// With `--resume`: run the failed step again and go on; when a script changed since the
    /// run recorded its steps, go on from the first step whose inputs changed.
    #[arg(long, requires = "resume", conflicts_with = "from")]
    retry: bool,
    /// With `--resume`: run again from this recorded step (a label as `mekara runs show`
    /// shows it, e.g. `deploy[4]`); the steps before it are answered from the journal.
    #[arg(long, value_name = "STEP", requires = "resume")]
    from: Option<String>,
    /// The folder the script runs in (default: the current one).
    #[arg(long, short = 'C', value_name = "DIR")]
    working_dir: Option<PathBuf>,
    /// The id of the new run: a worker starts the run `mekara submit` queued under this id.
    #[arg(
        long,
        value_name = "ID",
        hide = true,
        conflicts_with = "resume",
        requires = "name"
    )]
    run_id: Option<String>,
    /// Default timeout of shell steps, in seconds (a step's own `timeout` wins).
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    timeout: f64,
    #[command(flatten)]
    pub(super) unattended: super::unattended::UnattendedArgs,
}

pub(super) fn run(args: RunArgs) -> anyhow::Result<Exit> {
    let (locations, resolver) = super::locate()?;
    let store = super::run_store(&locations)?;
    let default_timeout = super::timeout_arg("--timeout", args.timeout)?;
    let settings = Settings {
        default_timeout,
        ..Settings::default()
    }
    .evaluating_in_children();
    let client = crate::client::McpClient::for_locations(&locations);
    let mut runner: Box<dyn crate::engine::StepRunner> =
        Box::new(crate::client::ClientRunner::new(ShellRunner::new(), client));
    if let Some(id) = &args.run_id {
        if !crate::engine::runs::is_run_id(id) {
            return super::usage(format!("`--run-id {id}` is not a run id"));
        }
        runner = Box::new(super::queue::NamedRun {
            inner: runner,
            id: id.clone(),
        });
    }
    if args.unattended.dry_run {
        let name = super::script_named(&resolver, args.name.as_deref().unwrap_or_default(), "run")?;
        return super::unattended::dry_run(&resolver, &name);
    }
    let how = match (&args.from, args.retry) {
        (Some(step), _) => Some(Rewind::From(step.clone())),
        (None, true) => Some(Rewind::Retry),
        (None, false) => None,
    };
    if args.unattended.agent_given() {
        let start = if let Some(id) = &args.resume {
            super::unattended::Start::Resume(id.clone(), how)
        } else {
            let name =
                super::script_named(&resolver, args.name.as_deref().unwrap_or_default(), "run")?;
            // A script that is not there is the same mistake with or without an agent: said
            // as the terminal says it (close names, exit code), before any run.
            resolver.resolve(&name)?;
            super::unattended::Start::New {
                name,
                arguments: args.arguments.join(" "),
                working_dir: args.working_dir.clone(),
            }
        };
        let cwd = std::env::current_dir()?;
        let session = super::unattended::Parts {
            resolver,
            store,
            runner,
            settings,
            cwd,
        };
        return super::unattended::run(&args.unattended, session, start);
    }
    let terminal = Terminal::default();
    let started = Instant::now();

    let ctrl_c;
    let mut counter = StepCounter {
        store: store.clone(),
        before: args
            .resume
            .as_deref()
            .map_or(0, |id| journaled_steps(&store, id)),
    };
    let (mut executor, first) = if let Some(id) = &args.resume {
        let (mut executor, torn, plan) =
            Executor::resume(resolver, store, runner, settings, id, how.as_ref())?;
        let said = torn
            .map_or(Ok(()), |torn| {
                outln!(
                    "! the last record of run `{id}` was torn ({} bytes at byte {}): mekara stopped mid-write; it was dropped and that step runs again",
                    torn.len, torn.offset
                )
            })
            .and_then(|()| outln!("resuming run {id}"))
            .and_then(|()| match &plan {
                Some(plan) => out!("{}", rewind_summary(plan)),
                None => Ok(()),
            });
        if let Err(e) = said {
            return left_with_output_closed(&executor, Err(e.into()));
        }
        // The steps a rewind superseded do not count as the run's any more.
        counter.before = journaled_steps(&counter.store, id);
        terminal.watch(&executor);
        ctrl_c = CtrlC::install(&executor);
        let first = executor.advance(&terminal);
        (executor, first)
    } else {
        let name = super::script_named(&resolver, args.name.as_deref().unwrap_or_default(), "run")?;
        let name = name.as_str();
        let mut executor = Executor::new(resolver, store, runner, settings);
        let cwd = std::env::current_dir()?;
        let working_dir = args
            .working_dir
            .as_ref()
            .map_or_else(|| cwd.clone(), |d| cwd.join(d));
        terminal.watch(&executor);
        ctrl_c = CtrlC::install(&executor);
        let first = executor.start(name, &args.arguments.join(" "), &working_dir, &terminal);
        (executor, first)
    };
    let played = play(
        &mut executor,
        first,
        &terminal,
        Answers::new(ctrl_c),
        &Clock { started, counter },
    );
    left_with_output_closed(&executor, played)
}

/// `played`, unless it failed because stdout was closed: then mekara says on stderr how to
/// resume (the run is saved: steps are journaled before they are shown) and ends quietly.
fn left_with_output_closed(
    executor: &Executor,
    played: anyhow::Result<Exit>,
) -> anyhow::Result<Exit> {
    match played {
        Err(e) if super::output::closed(&e) => {
            if let Some(id) = executor.run_id() {
                eprintln!(
                    "mekara: the output was closed; the run is saved: resume it with `mekara run --resume {id}`"
                );
            }
            Ok(Exit::OutputClosed)
        }
        played => played,
    }
}

/// Counts a run's steps the way `mekara runs` does (every journaled step, in every frame:
/// auto, llm, mcp steps and script calls), so the closing line and the STEPS column agree.
struct StepCounter {
    store: RunStore,
    /// Steps the run had journaled before this session (a resumed run).
    before: usize,
}

fn journaled_steps(store: &RunStore, id: &str) -> usize {
    store
        .read(id)
        .ok()
        .and_then(|contents| RunHistory::replay(Path::new(""), &contents.events).ok())
        .map_or(0, |history| history.steps)
}

/// What the closing line reports: the steps and the time of this session.
struct Clock {
    started: Instant,
    counter: StepCounter,
}

impl Clock {
    /// `3 steps in 0.1 s`, or for a resumed run `3 steps (1 in this session) in 0.1 s`: the
    /// time is this session's.
    fn summary(&self, run: &str) -> String {
        let all = journaled_steps(&self.counter.store, run);
        let seconds = self.started.elapsed().as_secs_f64();
        if self.counter.before == 0 {
            format!("{} in {seconds:.1} s", count(all, "step"))
        } else {
            format!(
                "{} ({} in this session) in {seconds:.1} s",
                count(all, "step"),
                all.saturating_sub(self.counter.before)
            )
        }
    }
}

/// Plays the run from `first` on: reports each pending step, asks the person for what the
/// engine waits for, and goes on until the run ends or is left.
fn play(
    executor: &mut Executor,
    first: Result<Pending, EngineError>,
    terminal: &Terminal,
    mut input: Answers,
    clock: &Clock,
) -> anyhow::Result<Exit> {
    let mut pending = first;
    loop {
        // Whatever the engine printed last (a step's closing line, a frame ending) goes out
        // before mekara reports, asks or leaves.
        terminal.flush();
        let next = match pending {
            Err(EngineError::Cancelled { script, index }) if terminal.output_closed.get() => {
                let id = executor.run_id().unwrap_or_default();
                eprintln!(
                    "mekara: the output was closed, so step {script}[{index}] was stopped; resume with `mekara run --resume {id}`"
                );
                return Ok(Exit::OutputClosed);
            }
            Err(EngineError::Cancelled { script, index }) => {
                let id = executor.run_id().unwrap_or_default().to_string();
                outln!(
                    "\ninterrupted: step {script}[{index}] was stopped; resume with `mekara run --resume {id}`"
                )?;
                return Ok(Exit::Interrupted);
            }
            Err(e) => return Err(e.into()),
            Ok(Pending::Finished {
                run,
                outcome,
                fell_back,
            }) => {
                let how = match (outcome, fell_back) {
                    (_, true) => "failed and was finished by hand",
                    (Outcome::Completed, false) => "completed",
                    _ => "finished",
                };
                outln!("\n── run {run} {how}: {} ──", clock.summary(&run))?;
                return Ok(if fell_back {
                    Exit::Failure
                } else {
                    Exit::Success
                });
            }
            Ok(Pending::Llm {
                path,
                prompt,
                expects,
            }) => {
                outln!("\n── llm step {path} ──\n{}", prompt.trim_end())?;
                match ask_outputs(&mut input, expects.as_ref())? {
                    Asked::Answered(outputs) => executor.continue_llm(outputs, terminal),
                    unanswered => return left_at_prompt(executor, &unanswered),
                }
            }
            // The independent llm steps of a `parallel` group: one person asks them one
            // after another, each journaled as it is answered.
            Ok(Pending::Tasks { path, tasks, .. }) => {
                for task in &tasks {
                    let label = crate::agents::reply::task_label(&path, task.member);
                    outln!("\n── llm step {label} ──\n{}", task.prompt.trim_end())?;
                    match ask_outputs(&mut input, task.expects.as_ref())? {
                        Asked::Answered(outputs) => {
                            executor.answer_task(task.member, outputs, None, terminal)?;
                        }
                        unanswered => return left_at_prompt(executor, &unanswered),
                    }
                }
                executor.advance(terminal)
            }
            Ok(Pending::Ask {
                path,
                question,
                choices,
                timeout,
                asked_at,
            }) => {
                let deadline = timeout.map(|t| deadline_of(asked_at, t));
                match ask_person(
                    executor,
                    &mut input,
                    &path,
                    &question,
                    choices.as_deref(),
                    deadline,
                    terminal,
                )? {
                    Ok(next) => next,
                    Err(left) => return Ok(left),
                }
            }
            Ok(Pending::Nl { path, instructions }) => {
                outln!(
                    "\n── NL script {path}: do all of this by hand ──\n{}",
                    instructions.trim_end()
                )?;
                match ask_done(
                    &mut input,
                    "Press Enter when you have done all of the above.",
                )? {
                    Asked::Answered(()) => executor.finish_nl(terminal),
                    unanswered => return left_at_prompt(executor, &unanswered),
                }
            }
            Ok(Pending::Fallback {
                path,
                error,
                instructions,
                failed_call,
            }) => {
                let done = executor
                    .frames()
                    .last()
                    .map_or(0, |frame| steps_before_failure(&frame.steps));
                let ran = if done == 0 {
                    "no step of it was done before the failure".to_string()
                } else {
                    format!(
                        "{} of it {} done before the failure, shown above",
                        count(done, "step"),
                        if done == 1 { "was" } else { "were" }
                    )
                };
                outln!(
                    "\n── {path} failed; finish it by hand ──\nWhat failed:\n{}\n\nThe script's instructions ({ran}):\n{}",
                    error.trim_end(),
                    instructions.trim_end()
                )?;
                if let Some(call) = failed_call {
                    outln!(
                        "\nThe failure was in {}, which it called; its own instructions (for the part of it that did not run):\n{}",
                        call.name,
                        call.instructions.trim_end()
                    )?;
                }
                match ask_done(
                    &mut input,
                    "Press Enter when you have finished the script by hand.",
                )? {
                    Asked::Answered(()) => executor.finish_nl(terminal),
                    unanswered => return left_at_prompt(executor, &unanswered),
                }
            }
        };
        pending = next;
    }
}

/// The moment a question asked at `asked_at` (Unix ms) times out, as an [`Instant`].
fn deadline_of(asked_at: u64, timeout: std::time::Duration) -> Instant {
    let now_ms = crate::engine::journal::now_ms();
    let left = (asked_at.saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)))
        .saturating_sub(now_ms);
    Instant::now() + std::time::Duration::from_millis(left)
}

/// Asks the person the script's question (`ask`) until an answer fits its choices (at a
/// terminal; piped, a wrong answer ends the run, resumable) or its timeout passes. Returns
/// what the engine did with the answer, or how mekara leaves.
fn ask_person(
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
        let line = match input.line_until(deadline)? {
            Asked::Answered(line) => {
                if !std::io::stdin().is_terminal() {
                    outln!("{line}")?;
                }
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

/// The steps of a frame that fell back which did their work: all of them, but the step
/// whose failure stopped the frame (when a step stopped it, not the script's own code).
fn steps_before_failure(steps: &[StepRecord]) -> usize {
    let stopped_by_last = steps
        .last()
        .is_some_and(|step| !step.result.success && !step.allow_failure);
    steps.len() - usize::from(stopped_by_last)
}

/// How a question to the person ended.
enum Asked<T> {
    Answered(T),
    /// stdin ended first.
    Closed,
    /// Ctrl-C was pressed.
    Interrupted,
    /// The question's timeout passed first.
    TimedOut,
}

impl<T> Asked<T> {
    fn map<U>(self, answered: impl FnOnce(T) -> U) -> Asked<U> {
        match self {
            Asked::Answered(answer) => Asked::Answered(answered(answer)),
            Asked::Closed => Asked::Closed,
            Asked::Interrupted => Asked::Interrupted,
            Asked::TimedOut => Asked::TimedOut,
        }
    }
}

/// Leaves the run at a prompt nobody answered. The run was synced before mekara asked, so it
/// resumes from this prompt.
fn left_at_prompt<T>(executor: &Executor, how: &Asked<T>) -> anyhow::Result<Exit> {
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

/// The person's answers, read from stdin a line at a time while watching for Ctrl-C.
///
/// stdin is read with `poll` and `read` on the descriptor, not through `std::io::Stdin`:
/// std retries a read that a signal interrupted, so a prompt could not notice Ctrl-C, and
/// its buffer would hide from `poll` the answers already read.
struct Answers {
    ctrl_c: Option<CtrlC>,
    /// Read, not yet taken.
    buffered: Vec<u8>,
    ended: bool,
}

impl Answers {
    fn new(ctrl_c: Option<CtrlC>) -> Answers {
        Answers {
            ctrl_c,
            buffered: Vec::new(),
            ended: false,
        }
    }

    /// The next line, without its line ending.
    fn line(&mut self) -> std::io::Result<Asked<String>> {
        self.line_until(None)
    }

    /// The next line, without its line ending, when it comes before `deadline`.
    fn line_until(&mut self, deadline: Option<Instant>) -> std::io::Result<Asked<String>> {
        use rustix::event::{PollFd, PollFlags, Timespec, poll};
        use rustix::io::Errno;
        loop {
            if let Some(end) = self.buffered.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buffered.drain(..=end).collect();
                return Ok(Asked::Answered(text_of(&line)));
            }
            if self.ended {
                return Ok(if self.buffered.is_empty() {
                    Asked::Closed
                } else {
                    Asked::Answered(text_of(&std::mem::take(&mut self.buffered)))
                });
            }
            let stdin = std::io::stdin();
            let mut fds = vec![PollFd::new(&stdin, PollFlags::IN)];
            if let Some(ctrl_c) = &self.ctrl_c {
                fds.push(PollFd::new(&ctrl_c.pressed, PollFlags::IN));
            }
            let wait = match deadline {
                None => None,
                Some(deadline) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Ok(Asked::TimedOut);
                    }
                    // A millisecond more, so that the deadline has passed when poll returns.
                    Timespec::try_from(left + std::time::Duration::from_millis(1)).ok()
                }
            };
            match poll(&mut fds, wait.as_ref()) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            if fds.get(1).is_some_and(|fd| !fd.revents().is_empty()) {
                return Ok(Asked::Interrupted);
            }
            if fds[0].revents().is_empty() {
                continue;
            }
            drop(fds);
            let mut chunk = [0u8; 4096];
            match rustix::io::read(&stdin, &mut chunk) {
                Ok(0) => self.ended = true,
                Ok(n) => self.buffered.extend_from_slice(&chunk[..n]),
                Err(Errno::INTR | Errno::AGAIN) => {}
                // No stdin at all reads as an empty one, as std has it.
                Err(Errno::BADF) => self.ended = true,
                Err(e) => return Err(e.into()),
            }
        }
    }
}

fn text_of(line: &[u8]) -> String {
    String::from_utf8_lossy(line)
        .trim_end_matches(['\n', '\r'])
        .to_string()
}

/// Reads one line. Piped answers are echoed, so the transcript reads as it would have on a
/// terminal.
fn read_line(input: &mut Answers) -> anyhow::Result<Asked<String>> {
    std::io::stdout().flush()?;
    let line = input.line()?;
    if let Asked::Answered(line) = &line
        && !std::io::stdin().is_terminal()
    {
        outln!("{line}")?;
    }
    Ok(line)
}

fn ask_done(input: &mut Answers, prompt: &str) -> anyhow::Result<Asked<()>> {
    out!("{prompt} ")?;
    Ok(read_line(input)?.map(|_| ()))
}

/// Asks for each expected output in turn.
fn ask_outputs(
    input: &mut Answers,
    expects: Option<&Map<String, Json>>,
) -> anyhow::Result<Asked<Map<String, Json>>> {
    let mut outputs = Map::new();
    let Some(expects) = expects.filter(|e| !e.is_empty()) else {
        return Ok(ask_done(input, "Press Enter when done.")?.map(|()| outputs));
    };
    for (name, description) in expects {
        match description.as_str().filter(|d| !d.is_empty()) {
            Some(d) => out!("{name} ({}): ", d.trim_end())?,
            None => out!("{name}: ")?,
        }
        match read_line(input)? {
            Asked::Answered(answer) => outputs.insert(name.clone(), Json::String(answer)),
            unanswered => return Ok(unanswered.map(|_| Map::new())),
        };
    }
    Ok(Asked::Answered(outputs))
}

/// Prints steps as they run, their output indented under them.
///
/// A step's closing line is not written at once: it waits in `pending` for the next thing
/// printed, so that it and the next step's header leave in one write (with a step that
/// takes a millisecond, the second write showed in the per-step cost). Anything that shows
/// a step running, or waits, flushes first: a step's header, its output, and the run loop.
#[derive(Default)]
struct Terminal {
    /// Lines not written yet.
    pending: RefCell<String>,
    at_line_start: Cell<bool>,
    started: RefCell<Option<Instant>>,
    /// Stops the running step when its output cannot be shown.
    cancel: RefCell<Option<CancelToken>>,
    /// Whether stdout was closed by its reader.
    output_closed: Cell<bool>,
}

impl Terminal {
    fn watch(&self, executor: &Executor) {
        *self.cancel.borrow_mut() = Some(executor.cancel_token());
    }

    /// Adds a line to what is written at the next [`Terminal::flush`].
    fn line(&self, line: std::fmt::Arguments<'_>) {
        let mut pending = self.pending.borrow_mut();
        let _ = std::fmt::Write::write_fmt(&mut *pending, line);
        pending.push('\n');
    }

    /// Writes the pending lines to stdout in one write, and empties them.
    fn flush(&self) {
        let mut pending = self.pending.borrow_mut();
        if pending.is_empty() {
            return;
        }
        let mut out = std::io::stdout().lock();
        let written = out.write_all(pending.as_bytes()).and_then(|()| out.flush());
        pending.clear();
        if let Err(e) = written {
            self.write_failed(&e);
        }
    }

    /// A step whose output nobody reads any more (`mekara run ... | head`) is stopped, like
    /// one interrupted by Ctrl-C, instead of running on unseen.
    fn write_failed(&self, e: &std::io::Error) {
        if e.kind() == std::io::ErrorKind::BrokenPipe
            && !self.output_closed.replace(true)
            && let Some(cancel) = self.cancel.borrow().as_ref()
        {
            cancel.cancel();
        }
    }
}

const BAR: &str = "  │ ";

impl Observer for Terminal {
    fn step_started(&self, frame: &str, index: usize, input: &StepInput, context: Option<&str>) {
        if let Some(context) = context {
            self.line(format_args!("# {context}"));
        }
        self.line(format_args!("▶ {frame}[{index}] {}", input.summary()));
        self.flush();
        self.at_line_start.set(true);
        *self.started.borrow_mut() = Some(Instant::now());
    }

    fn output(&self, chunk: &[u8]) {
        self.flush();
        let text = String::from_utf8_lossy(chunk);
        let mut out = std::io::stdout().lock();
        let mut written = Ok(());
        for piece in text.split_inclusive('\n') {
            if self.at_line_start.get() {
                written = written.and_then(|()| out.write_all(BAR.as_bytes()));
            }
            written = written.and_then(|()| out.write_all(piece.as_bytes()));
            self.at_line_start.set(piece.ends_with('\n'));
        }
        if let Err(e) = written.and_then(|()| out.flush()) {
            self.write_failed(&e);
        }
    }

    fn print(&self, _frame: &str, text: &str) {
        self.line(format_args!("{text}"));
    }

    fn step_finished(&self, frame: &str, record: &StepRecord) {
        if !self.at_line_start.get() {
            self.line(format_args!(""));
            self.at_line_start.set(true);
        }
        let ms = record.result.duration_ms.unwrap_or(0);
        let mark = step_mark(record);
        match &record.result.error {
            None => self.line(format_args!("{mark} {frame}[{}] ({ms} ms)", record.index)),
            Some(error) if record.failure_allowed() => self.line(format_args!(
                "{mark} {frame}[{}] {error} (allowed by `allow_failure`: the script goes on)",
                record.index
            )),
            Some(error) => self.line(format_args!("{mark} {frame}[{}] {error}", record.index)),
        }
    }

    fn frame_event(&self, event: FrameEvent<'_>) {
        match event {
            FrameEvent::Pushed { path } => self.line(format_args!("→ {path}")),
            FrameEvent::Ended {
                path,
                success,
                allow_failure,
            } => {
                let mark = crate::display::return_mark(success, allow_failure);
                if !success && allow_failure {
                    self.line(format_args!(
                        "{mark} {path} failed (allowed by `allow_failure`: the caller goes on)"
                    ));
                } else {
                    self.line(format_args!("{mark} {path} ended"));
                }
            }
        }
    }
}

/// Ctrl-C, handled without a thread of its own: a sleeping thread in mekara was enough to
/// make the kernel start more of the steps' shells on the other CPU, where they start cold
/// (see `docs/design.md`).
///
/// The signal sets the executor's cancel flag, which stops a running step (its `poll` wakes
/// on the signal), or the next one before it starts; and it writes a byte to `pressed`,
/// which wakes a prompt, so that Ctrl-C while the person is typing leaves at once (the
/// journal is synced whenever mekara waits for input). A second Ctrl-C before the first was
/// acted on (say, during a long evaluation between steps) leaves at once, exit code 130.
struct CtrlC {
    /// Readable once Ctrl-C was pressed.
    pressed: UnixStream,
}

impl CtrlC {
    /// `None` (and a warning) when the handler cannot be installed: Ctrl-C then ends mekara
    /// the default way, and the run still resumes.
    fn install(executor: &Executor) -> Option<CtrlC> {
        let installed = (|| -> std::io::Result<CtrlC> {
            use signal_hook::consts::SIGINT;
            let (pressed, wake) = UnixStream::pair()?;
            pressed.set_nonblocking(true)?;
            let flag = executor.cancel_token().flag();
            // The order matters: the shutdown checks the flag before this press sets it.
            signal_hook::flag::register_conditional_shutdown(
                SIGINT,
                Exit::Interrupted.code().into(),
                flag.clone(),
            )?;
            signal_hook::flag::register(SIGINT, flag)?;
            signal_hook::low_level::pipe::register(SIGINT, wake)?;
            Ok(CtrlC { pressed })
        })();
        installed
            .map_err(|e| tracing::warn!("cannot handle Ctrl-C: {e}"))
            .ok()
    }
}
