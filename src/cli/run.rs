//! `mekara run`: drive a script from the terminal. Auto steps run here with their output
//! streamed live; the person does the llm steps and NL scripts, typing each expected output.
//! With stdin not a terminal, answers are read line by line, so tests and CI can drive it.

use std::cell::{Cell, RefCell};
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Args;
use serde_json::{Map, Value as Json};

use crate::engine::journal::Outcome;
use crate::engine::step::{StepInput, StepRecord};
use crate::engine::{
    CancelToken, EngineError, Executor, FrameEvent, Observer, Pending, Settings, ShellRunner,
};
use crate::exit::Exit;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The script to run (`test/random` or `test:random`).
    #[arg(required_unless_present = "resume")]
    name: Option<String>,
    /// The script's arguments (`$ARGUMENTS`, and `request` of `execute`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    arguments: Vec<String>,
    /// Continue an interrupted run instead; auto steps that finished do not run again.
    #[arg(long, value_name = "ID", conflicts_with_all = ["name", "arguments"])]
    resume: Option<String>,
    /// The folder the script runs in (default: the current one).
    #[arg(long, short = 'C', value_name = "DIR")]
    working_dir: Option<PathBuf>,
    /// Default timeout of shell steps, in seconds (a step's own `timeout` wins).
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    timeout: f64,
}

pub fn run(args: RunArgs) -> anyhow::Result<Exit> {
    let (locations, resolver) = super::locate()?;
    let store = super::run_store(&locations)?;
    if !(args.timeout > 0.0 && args.timeout.is_finite()) {
        return super::usage("`--timeout` must be a positive number of seconds");
    }
    let settings = Settings {
        default_timeout: Duration::from_secs_f64(args.timeout),
        ..Settings::default()
    };
    let client = crate::client::Client::for_locations(&locations);
    let runner = Box::new(crate::client::ClientRunner::new(ShellRunner::new(), client));
    let terminal = Terminal::default();
    let started = Instant::now();
    handle_ctrl_c(&terminal);

    let (mut executor, first) = match &args.resume {
        Some(id) => {
            let (mut executor, torn) = Executor::resume(resolver, store, runner, settings, id)?;
            if let Some(torn) = torn {
                println!(
                    "! the last record of run `{id}` was torn ({} bytes at byte {}): mekara stopped mid-write; it was dropped and that step runs again",
                    torn.len, torn.offset
                );
            }
            println!("resuming run {id}");
            super::set_run_in_progress(id);
            terminal.watch(&executor);
            let first = executor.advance(&terminal);
            (executor, first)
        }
        None => {
            let mut executor = Executor::new(resolver, store, runner, settings);
            let name = args.name.as_deref().unwrap_or_default();
            let cwd = std::env::current_dir()?;
            let working_dir = args
                .working_dir
                .as_ref()
                .map_or_else(|| cwd.clone(), |d| cwd.join(d));
            terminal.watch(&executor);
            let first = executor.start(name, &args.arguments.join(" "), &working_dir, &terminal);
            (executor, first)
        }
    };
    if let Some(id) = executor.run_id() {
        super::set_run_in_progress(id);
    }
    let mut pending = first;
    let mut input = std::io::stdin().lock();
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
                println!(
                    "\ninterrupted: step {script}[{index}] was stopped; resume with `mekara run --resume {id}`"
                );
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
                println!(
                    "\n── run {run} {how}: {} steps ran here in {:.1} s ──",
                    terminal.steps_run.get(),
                    started.elapsed().as_secs_f64()
                );
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
                println!("\n── llm step {path} ──\n{}", prompt.trim_end());
                let Some(outputs) = ask_outputs(&mut input, expects.as_ref())? else {
                    return Ok(closed(&executor));
                };
                executor.continue_llm(outputs, &terminal)
            }
            Ok(Pending::Nl { path, instructions }) => {
                println!(
                    "\n── NL script {path}: do all of this by hand ──\n{}",
                    instructions.trim_end()
                );
                if !ask_done(
                    &mut input,
                    "Press Enter when you have done all of the above.",
                )? {
                    return Ok(closed(&executor));
                }
                executor.finish_nl(&terminal)
            }
            Ok(Pending::Fallback {
                path,
                error,
                instructions,
            }) => {
                println!(
                    "\n── {path} failed; finish it by hand ──\nWhat failed:\n{}\n\nThe script's instructions (the steps above already ran):\n{}",
                    error.trim_end(),
                    instructions.trim_end()
                );
                if !ask_done(
                    &mut input,
                    "Press Enter when you have finished the script by hand.",
                )? {
                    return Ok(closed(&executor));
                }
                executor.finish_nl(&terminal)
            }
        };
        pending = next;
    }
}

fn closed(executor: &Executor) -> Exit {
    let id = executor.run_id().unwrap_or_default();
    println!(
        "\nstdin closed before the run finished; it is saved: resume it with `mekara run --resume {id}`"
    );
    Exit::Failure
}

/// Reads one line; `None` at end of input.
/// Reads one line; `None` at end of input. Piped answers are echoed, so the transcript
/// reads as it would have on a terminal.
fn read_line(input: &mut impl BufRead) -> anyhow::Result<Option<String>> {
    std::io::stdout().flush()?;
    let mut line = String::new();
    if input.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let line = line.trim_end_matches(['\n', '\r']).to_string();
    if !std::io::stdin().is_terminal() {
        println!("{line}");
    }
    Ok(Some(line))
}

fn ask_done(input: &mut impl BufRead, prompt: &str) -> anyhow::Result<bool> {
    print!("{prompt} ");
    Ok(read_line(input)?.is_some())
}

/// Asks for each expected output in turn; `None` when input ends first.
fn ask_outputs(
    input: &mut impl BufRead,
    expects: Option<&Map<String, Json>>,
) -> anyhow::Result<Option<Map<String, Json>>> {
    let mut outputs = Map::new();
    let Some(expects) = expects.filter(|e| !e.is_empty()) else {
        return Ok(ask_done(input, "Press Enter when done.")?.then_some(outputs));
    };
    for (name, description) in expects {
        match description.as_str().filter(|d| !d.is_empty()) {
            Some(d) => print!("{name} ({}): ", d.trim_end()),
            None => print!("{name}: "),
        }
        let Some(answer) = read_line(input)? else {
            return Ok(None);
        };
        outputs.insert(name.clone(), Json::String(answer));
    }
    Ok(Some(outputs))
}

/// Prints steps as they run, their output indented under them.
///
/// A step's closing line is not written at once: it waits in `pending` for the next thing
/// printed, so that it and the next step's header leave in one write (with a step that
/// takes a millisecond, the second write showed in the per-step cost). Anything that shows
/// a step running, or waits, flushes first: a step's header, its output, the run loop, and
/// Ctrl-C.
#[derive(Default)]
struct Terminal {
    /// Lines not written yet.
    pending: Arc<Mutex<String>>,
    /// Whether a step is running now, which decides what Ctrl-C does.
    step_running: Arc<AtomicBool>,
    at_line_start: Cell<bool>,
    steps_run: Cell<usize>,
    started: RefCell<Option<Instant>>,
    /// Stops the running step (when its output cannot be shown, or on Ctrl-C).
    cancel: Arc<Mutex<Option<CancelToken>>>,
    /// Whether stdout was closed by its reader.
    output_closed: Cell<bool>,
}

impl Terminal {
    fn watch(&self, executor: &Executor) {
        if let Ok(mut cancel) = self.cancel.lock() {
            *cancel = Some(executor.cancel_token());
        }
    }

    /// Adds a line to what is written at the next [`Terminal::flush`].
    fn line(&self, line: std::fmt::Arguments<'_>) {
        if let Ok(mut pending) = self.pending.lock() {
            let _ = std::fmt::Write::write_fmt(&mut *pending, line);
            pending.push('\n');
        }
    }

    /// Writes the pending lines in one write.
    fn flush(&self) {
        if let Err(e) = write_pending(&self.pending) {
            self.write_failed(&e);
        }
    }

    /// A step whose output nobody reads any more (`mekara run ... | head`) is stopped, like
    /// one interrupted by Ctrl-C, instead of running on unseen.
    fn write_failed(&self, e: &std::io::Error) {
        if e.kind() == std::io::ErrorKind::BrokenPipe
            && !self.output_closed.replace(true)
            && let Ok(cancel) = self.cancel.lock()
            && let Some(cancel) = cancel.as_ref()
        {
            cancel.cancel();
        }
    }
}

/// Writes `pending` to stdout in one write, and empties it.
fn write_pending(pending: &Mutex<String>) -> std::io::Result<()> {
    let Ok(mut pending) = pending.lock() else {
        return Ok(());
    };
    if pending.is_empty() {
        return Ok(());
    }
    let mut out = std::io::stdout().lock();
    let written = out.write_all(pending.as_bytes()).and_then(|()| out.flush());
    pending.clear();
    written
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
        self.step_running.store(true, Ordering::SeqCst);
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

    fn step_finished(&self, frame: &str, record: &StepRecord) {
        self.step_running.store(false, Ordering::SeqCst);
        if !self.at_line_start.get() {
            self.line(format_args!(""));
            self.at_line_start.set(true);
        }
        self.steps_run.set(self.steps_run.get() + 1);
        let ms = record.result.duration_ms.unwrap_or(0);
        match &record.result.error {
            None => self.line(format_args!("✓ {frame}[{}] ({ms} ms)", record.index)),
            Some(error) => self.line(format_args!("✗ {frame}[{}] {error}", record.index)),
        }
    }

    fn frame_event(&self, event: FrameEvent<'_>) {
        match event {
            FrameEvent::Pushed { path } => self.line(format_args!("→ {path}")),
            FrameEvent::Ended { path, success } => {
                let mark = if success { "←" } else { "✗" };
                self.line(format_args!("{mark} {path} ended"));
            }
        }
    }
}

/// Ctrl-C: stops a running step (the run stays resumable), or, while the person is
/// typing, leaves at once: the journal is synced whenever mekara waits for input.
fn handle_ctrl_c(terminal: &Terminal) {
    let running = terminal.step_running.clone();
    let cancel = terminal.cancel.clone();
    let pending = terminal.pending.clone();
    let installed = ctrlc::set_handler(move || {
        if running.load(Ordering::SeqCst)
            && let Ok(cancel) = cancel.lock()
            && let Some(cancel) = cancel.as_ref()
        {
            cancel.cancel();
            return;
        }
        let _ = write_pending(&pending);
        match super::run_in_progress() {
            Some(id) => eprintln!("\ninterrupted; resume with `mekara run --resume {id}`"),
            None => eprintln!("\ninterrupted"),
        }
        std::process::exit(Exit::Interrupted.code().into());
    });
    if let Err(e) = installed {
        tracing::warn!("cannot handle Ctrl-C: {e}");
    }
}
