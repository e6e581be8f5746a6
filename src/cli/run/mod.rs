//! `mekara run`: drive a script from the terminal. Auto steps run here with their output
//! streamed live; the person does the llm steps and NL scripts, typing each expected output.
//! With stdin not a terminal, answers are read line by line, so tests and CI can drive it.
//!
//! - this file: the command's arguments and how a run starts or resumes;
//! - [`play`](mod@play): the loop that reports each pending step and asks the person, with [`prompts`];
//! - [`answers`]: the person's answers, read from stdin; [`ctrl_c`]: Ctrl-C while they type;
//! - [`terminal`]: the steps as they run, their output under them;
//! - [`clock`]: the steps and time the closing line reports.

mod answers;
mod clock;
mod ctrl_c;
mod play;
mod prompts;
mod terminal;

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use super::output::{out, outln};
use crate::engine::{Executor, Rewind, Settings, ShellRunner};
use crate::exit::Exit;
use answers::Answers;
use clock::{Clock, StepCounter, journaled_steps};
use ctrl_c::CtrlC;
use play::play;
use terminal::Terminal;

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
    /// Take scripts from this folder (holding `scripts/`) before any other: a trial of an
    /// eval's baseline (`mekara eval --baseline`).
    #[arg(long, value_name = "DIR", hide = true)]
    scripts_dir: Option<PathBuf>,
    /// Run this project's own script although it has the name of one of mekara's bundled
    /// scripts (without it, mekara asks at a terminal and refuses elsewhere).
    #[arg(long)]
    project_script: bool,
    /// Default timeout of shell steps, in seconds (a step's own `timeout` wins).
    #[arg(long, value_name = "SECONDS", default_value = "600")]
    timeout: super::Seconds,
    #[command(flatten)]
    pub(super) unattended: super::unattended::UnattendedArgs,
    /// How many of `arguments` came after a `--` on the command line (they are the
    /// script's even when they look like options).
    #[arg(skip)]
    pub(super) escaped: usize,
}

impl RunArgs {
    /// Refuses an option of `mekara run` written after the script's arguments without `--`: clap
    /// hands it to the script as an argument, so `mekara run x --retry` would run `x`
    /// afresh with the request `--retry`.
    ///
    /// Also refuses `--retry` and `--from` without `--resume`: clap's `requires` does not
    /// hold for them, and they were dropped without a word.
    fn check_options(&self) -> anyhow::Result<()> {
        use clap::Args as _;
        if self.resume.is_none() {
            let rewind = match (&self.from, self.retry) {
                (Some(_), _) => Some("--from"),
                (None, true) => Some("--retry"),
                (None, false) => None,
            };
            if let Some(flag) = rewind {
                return super::usage(format!(
                    "`{flag}` goes with `--resume ID` (`mekara run --resume ID {flag} …`): it says how to go on with a run; to start a script afresh, leave it out"
                ));
            }
        }
        let unescaped = &self.arguments[..self.arguments.len().saturating_sub(self.escaped)];
        let command = RunArgs::augment_args(clap::Command::new("run"));
        let is_option = |word: &str| {
            command.get_arguments().any(|a| {
                let long = a.get_long().is_some_and(|long| {
                    word.strip_prefix("--").is_some_and(|w| {
                        w == long || w.strip_prefix(long).is_some_and(|r| r.starts_with('='))
                    })
                });
                let short = a.get_short().is_some_and(|short| {
                    word.strip_prefix('-') == Some(short.encode_utf8(&mut [0; 4]))
                });
                long || short
            })
        };
        let Some(option) = unescaped.iter().find(|w| is_option(w)) else {
            return Ok(());
        };
        let name = self.name.as_deref().unwrap_or_default();
        let bare = option.split('=').next().unwrap_or(option);
        super::usage(format!(
            "`{}` comes after the script name `{}`, so it would be one of the script's arguments, not an option of `mekara run`; put mekara's options before the script name (`mekara run {bare} … {}`), or after `--` to pass it to the script (`mekara run {} -- {}`)",
            crate::display::echoed(option),
            crate::display::echoed(name),
            crate::display::echoed(name),
            crate::display::echoed(name),
            crate::display::echoed(option),
        ))
    }
}

pub(super) fn run(args: RunArgs) -> anyhow::Result<Exit> {
    args.check_options()?;
    let (locations, resolver) = super::locate()?;
    let resolver = match &args.scripts_dir {
        Some(dir) => resolver.preferring(dir),
        None => resolver,
    };
    let store = super::run_store(&locations)?;
    let default_timeout = super::timeout_arg("--timeout", &args.timeout)?;
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
        return super::unattended::dry_run(&resolver, &store, &name);
    }
    let how = match (&args.from, args.retry) {
        (Some(step), _) => Some(Rewind::From(step.clone())),
        (None, true) => Some(Rewind::Retry),
        (None, false) => None,
    };
    // A project's own script of a bundled script's name runs on the person's word only,
    // asked before anything of it runs; a script that is not there is the same mistake with
    // or without an agent: said as the terminal says it (close names, exit code).
    let project_script = match (&args.resume, &args.name) {
        (None, Some(name)) => {
            let name = super::script_named(&resolver, name, "run")?;
            project_script_agreed(&resolver, &name, args.project_script)?
        }
        _ => args.project_script,
    };
    if args.unattended.agent_given() {
        let start = if let Some(id) = &args.resume {
            super::unattended::Start::Resume(id.clone(), how)
        } else {
            let name =
                super::script_named(&resolver, args.name.as_deref().unwrap_or_default(), "run")?;
            super::unattended::Start::New {
                name,
                arguments: args.arguments.join(" "),
                working_dir: args.working_dir.clone(),
                project_script,
            }
        };
        let cwd = std::env::current_dir()?;
        let session = super::unattended::Parts {
            resolver,
            store,
            runner,
            settings,
            cwd,
            project_root: locations.project_root.clone(),
            estimate: args.run_id.is_none(),
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
                Some(plan) => out!("{}", plan.summary()),
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
        let first = executor.start(
            name,
            &args.arguments.join(" "),
            &working_dir,
            project_script,
            &terminal,
        );
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

/// Whether script `name` may run as the project's own although it has a bundled script's
/// name: `given` (`--project-script`), or the person's yes at a terminal. Without either the
/// resolver's refusal is the error; a name that is no shadowing script is simply resolved.
fn project_script_agreed(
    resolver: &crate::script::Resolver,
    name: &str,
    given: bool,
) -> anyhow::Result<bool> {
    use std::io::{BufRead, IsTerminal, Write};
    let script = resolver.resolve(name)?;
    let Some(shadowing) = resolver.shadowing(name, &script) else {
        return Ok(given);
    };
    if given {
        return Ok(true);
    }
    // Stdin that is not a terminal carries the answers of the run's steps: a line of it is
    // no consent.
    if std::io::stdin().is_terminal() {
        let mut stderr = std::io::stderr();
        write!(
            stderr,
            "`{}` here is this project's own script ({}), not mekara's bundled `{}`.\nRun the project's script? [y/N] ",
            shadowing.name,
            shadowing.files_named(),
            shadowing.bundled
        )?;
        stderr.flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if matches!(answer.trim(), "y" | "Y" | "yes" | "Yes") {
            return Ok(true);
        }
    }
    Err(crate::script::ScriptError::Shadows(Box::new(shadowing)).into())
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
