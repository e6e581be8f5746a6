//! The command line: argument parsing and the commands that are not a subsystem of their
//! own. Errors become messages on stderr and an exit code from [`crate::exit`] here, and
//! nowhere else.

mod answer;
mod check;
mod eval;
mod hook;
mod install;
mod mcp;
mod output;
mod project;
mod queue;
mod run;
mod runs;
mod scripts;
mod serve;
mod store;
mod test;
mod tools;
mod ui;
mod unattended;
mod usage;
mod vcr;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::engine::EngineError;
use crate::exit::Exit;
use crate::script::ScriptError;
use crate::script::eject::EjectError;

pub(crate) use project::{locate, orphan_hint, run_store, script_named};
pub(crate) use usage::{Seconds, UsageError, timeout_arg, usage};

/// Workflows as code for coding agents.
#[derive(Debug, Parser)]
#[command(name = "mekara", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Write diagnostics to this file instead of stderr (also `MEKARA_LOG_FILE`).
    #[arg(long, global = true, value_name = "FILE", env = "MEKARA_LOG_FILE")]
    log_file: Option<PathBuf>,

    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a script in the terminal: auto steps run here, you do the llm steps.
    Run(run::RunArgs),
    /// Answer the question a run waits on (a script's `ask`), to resume it after.
    Answer(answer::AnswerArgs),
    /// List the scripts mekara finds, or show where one resolves from.
    Scripts(scripts::ScriptsArgs),
    /// Parse compiled scripts and report errors, without running anything.
    Check(check::CheckArgs),
    /// Run a script's cases many times with real agents: pass rates, cost, time, failures.
    Eval(eval::EvalArgs),
    /// List runs, show one run's journal, or prune old runs.
    Runs(runs::RunsArgs),
    /// The shared run store (PostgreSQL): migrate its schema, import or export runs.
    Store(store::StoreArgs),
    /// Serve a live viewer of the runs in the browser (local, with a printed token).
    Ui(ui::UiArgs),
    /// Queue an unattended run in the shared run store, for a `mekara worker` to run.
    Submit(queue::SubmitArgs),
    /// Run the queued runs of the shared run store, on this host, as they come.
    Worker(queue::WorkerArgs),
    /// Serve mekara to agents over MCP (stdio, or Streamable HTTP with `--http`).
    Mcp(mcp::McpArgs),
    /// Replay recorded MCP sessions (VCR cassettes).
    Vcr(vcr::VcrArgs),
    /// Run workflows' test cases (`.mekara/tests/`) with no agent, each in a scratch copy.
    Test(test::TestArgs),
    /// Use the tools of the MCP servers in `.mcp.json`: list, call, write a policy file.
    Tools(tools::ToolsArgs),
    /// Serve the functions of Starlark tool modules as MCP tools (stdio, or `--http`).
    Serve(serve::ServeArgs),
    /// Set Claude Code (and, with `--client`, other agent clients) up to use mekara.
    Install(install::InstallArgs),
    /// Remove what `mekara install` added.
    // The flags are install's; their help says what they mean for uninstall.
    #[command(
        mut_arg("clients", |a| a.help(
            "Also remove mekara from this client (repeatable); Claude Code's setup is always removed"
        )),
        mut_arg("dry_run", |a| a.help("Show what would be removed without removing it")),
    )]
    Uninstall(install::InstallArgs),
    /// Claude Code hooks (run by Claude Code, not by hand).
    Hook(hook::HookArgs),
}

/// Runs the `mekara` command line with `args` (the program name first).
pub fn run(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let args: Vec<OsString> = args.into_iter().collect();
    if args
        .get(1)
        .is_some_and(|a| a == crate::engine::compiled::child::SUBCOMMAND)
    {
        return evaluate_for_parent();
    }
    // What follows the first `--` is the script's, whatever it looks like; clap drops the
    // `--` itself, so `run` is told how many arguments came after it.
    let escaped = args
        .iter()
        .position(|a| a == "--")
        .map(|at| args.len() - at - 1);
    let mut cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let exit = if e.use_stderr() {
                Exit::Usage
            } else {
                Exit::Success
            };
            let _ = e.print();
            return exit.into();
        }
    };
    if let Command::Run(run) = &mut cli.command {
        run.escaped = escaped.unwrap_or(0);
    }
    init_logging(cli.log_file.as_deref());
    crate::memory::quiet_size_overflows();
    // A panic is a bug; it must still end like any other internal error (exit 2, a message
    // saying so), never with Rust's 101. The panic's own message, printed by the standard
    // hook, says where.
    let dispatched =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| dispatch(cli.command)));
    // Spans not yet sent go now, within a bounded wait, whatever the command's result.
    crate::traces::shutdown();
    crate::notify::shutdown();
    let result = match dispatched {
        Ok(result) => result,
        Err(payload) => {
            let what = crate::display::panic_message(payload.as_ref());
            eprintln!(
                "mekara failed: {what}; this is a bug in mekara, please report it with the \
                 command that caused it"
            );
            return Exit::Usage.into();
        }
    };
    match result {
        Ok(exit) => exit.into(),
        // `mekara runs | head`: the reader has what it wanted; nothing to say.
        Err(e) if output::closed(&e) => Exit::OutputClosed.into(),
        Err(e) => {
            let hint = hint(&e).map(|h| format!("; {h}")).unwrap_or_default();
            let message = format!("{e:#}{hint}");
            eprintln!("error: {}", crate::display::clip_echoes(&message));
            exit_for(&e).into()
        }
    }
}

/// `mekara __evaluate`: the child process a mekara evaluates a script in (see
/// `engine::compiled::child`); not a command for people, so not in the help.
fn evaluate_for_parent() -> ExitCode {
    crate::memory::quiet_size_overflows();
    let served = std::panic::catch_unwind(crate::engine::compiled::child::serve_parent);
    match served {
        Ok(Ok(())) => Exit::Success.into(),
        Ok(Err(e)) => {
            eprintln!("error: {e:#}");
            Exit::Usage.into()
        }
        Err(payload) => {
            let what = crate::display::panic_message(payload.as_ref());
            eprintln!(
                "mekara failed evaluating a script: {what}; this is a bug in mekara, please report it with the script"
            );
            Exit::Usage.into()
        }
    }
}

/// Runs one command.
fn dispatch(command: Command) -> anyhow::Result<Exit> {
    // The tests' way to reach the panic handling in `run`, in the build that ships (a release
    // build is what CI tests): a variable nobody sets by chance, asking for exactly this.
    assert!(
        std::env::var_os("MEKARA_DEBUG_PANIC").is_none(),
        "`MEKARA_DEBUG_PANIC` is set"
    );
    match command {
        Command::Run(args) => run::run(args),
        Command::Answer(args) => answer::run(&args),
        Command::Scripts(args) => scripts::run(args),
        Command::Check(args) => check::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Runs(args) => runs::run(args),
        Command::Ui(args) => ui::run(args),
        Command::Store(args) => store::run(args),
        Command::Submit(args) => queue::submit(args),
        Command::Worker(args) => queue::worker(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Vcr(args) => vcr::run(args),
        Command::Test(args) => test::run(args),
        Command::Tools(args) => tools::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Install(args) => install::run(args, install::Direction::Install),
        Command::Uninstall(args) => install::run(args, install::Direction::Uninstall),
        Command::Hook(args) => hook::run(args),
    }
}

/// The exit code of a command that failed with `e`: the first error in its chain that
/// knows its own ([`EngineError::exit_code`] and its kin); anything else failed (exit 1),
/// as `docs/cli.md` says: 2 is for the command line and for mekara's own bugs.
fn exit_for(e: &anyhow::Error) -> Exit {
    e.chain()
        .find_map(|cause| {
            if cause.is::<UsageError>() {
                Some(Exit::Usage)
            } else if let Some(e) = cause.downcast_ref::<EngineError>() {
                Some(e.exit_code())
            } else if let Some(e) = cause.downcast_ref::<ScriptError>() {
                Some(e.exit_code())
            } else if let Some(e) = cause.downcast_ref::<crate::serve::ServeError>() {
                Some(e.exit_code())
            } else {
                cause
                    .downcast_ref::<EjectError>()
                    .map(EjectError::exit_code)
            }
        })
        .unwrap_or(Exit::Failure)
}

/// What to do next, for the errors whose next step is a command: the engine and the
/// resolver state the fact, and each adapter (this one, and `mcp`) names its own way on.
fn hint(e: &anyhow::Error) -> Option<String> {
    e.chain().find_map(|cause| {
        let script = cause.downcast_ref::<ScriptError>().or_else(|| {
            match cause.downcast_ref::<EngineError>() {
                Some(EngineError::Script(e)) => Some(e),
                _ => None,
            }
        });
        if let Some(script) = script {
            return script_hint(script);
        }
        if let Some(EngineError::RunNotFound { .. }) = cause.downcast_ref::<EngineError>() {
            return Some("`mekara runs` lists the runs there are".to_string());
        }
        match cause.downcast_ref::<EjectError>() {
            Some(EjectError::Exists { .. }) => {
                Some("overwrite it with `--force`, or edit it in place".to_string())
            }
            _ => None,
        }
    })
}

/// What to do next about a script that cannot be had: write the NL file of an orphan; outside
/// a project, get into one; else list the scripts, unless the error already suggests close
/// names.
fn script_hint(e: &ScriptError) -> Option<String> {
    match e {
        ScriptError::NotFound {
            orphan: Some(orphan),
            ..
        } => Some(orphan_hint(orphan)),
        ScriptError::NotFound { searched, .. } if searched.is_outside_project() => Some(
            "run mekara in your project's folder, or `mekara install` to make this folder a \
             project"
                .to_string(),
        ),
        ScriptError::NotFound { suggestions, .. } => suggestions
            .is_empty()
            .then(|| "`mekara scripts` lists the scripts there are".to_string()),
        ScriptError::Shadows(shadowing) => Some(format!(
            "read `{}` first; to run it, `mekara run --project-script {}`; {}",
            shadowing.runs,
            shadowing.name,
            shadowing.way_back()
        )),
        _ => None,
    }
}

/// What is logged when `MEKARA_LOG` does not say otherwise. rmcp logs every error response
/// it sends at `warn`; those are answers, not problems of the server. Its client transport
/// logs a failure the MCP client reports itself, with more to act on.
const DEFAULT_LOG: &str = "warn,rmcp::service=error,rmcp::transport=off";

/// The log filter for `MEKARA_LOG` (`None` when unset): the default, then the user's
/// directives on top. A bare level (`debug`) is mekara's own: dependencies keep the default
/// unless named (`rmcp=debug`). Naming a target drops the default's directives for it and
/// for the targets inside it (`rmcp=debug` hears `rmcp::service` too), since a more specific
/// directive would otherwise win.
fn log_filter(user: Option<&str>) -> String {
    let user: Vec<String> = user
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            if d.parse::<tracing_subscriber::filter::LevelFilter>().is_ok() {
                format!("mekara={d}")
            } else {
                d.to_string()
            }
        })
        .collect();
    let named: Vec<&str> = user
        .iter()
        .map(|d| d.split(['=', '[']).next().unwrap_or_default())
        .collect();
    let inside = |target: &str, of: &str| {
        target == of || target.strip_prefix(of).is_some_and(|t| t.starts_with("::"))
    };
    DEFAULT_LOG
        .split(',')
        .filter(|d| {
            let target = d.split('=').next().unwrap_or_default();
            !d.contains('=') || !named.iter().any(|n| inside(target, n))
        })
        .map(str::to_string)
        .chain(user.iter().cloned())
        .collect::<Vec<_>>()
        .join(",")
}

/// Diagnostics go to stderr (or a file), never stdout; `MEKARA_LOG` sets the filter. Every
/// record is redacted of the secrets taken from the environment before it is written.
fn init_logging(file: Option<&std::path::Path>) {
    let user = std::env::var("MEKARA_LOG").ok();
    let filter = tracing_subscriber::EnvFilter::try_new(log_filter(user.as_deref()))
        .unwrap_or_else(|e| {
            eprintln!("warning: `MEKARA_LOG` is not a log filter ({e}); using the default");
            tracing_subscriber::EnvFilter::new(DEFAULT_LOG)
        });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false);
    let opened = file.map(|path| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
    });
    let target: Box<dyn Write + Send> = match opened {
        Some(Ok(f)) => Box::new(f),
        Some(Err(e)) => {
            eprintln!("warning: cannot open log file: {e}; logging to stderr");
            Box::new(std::io::stderr())
        }
        None => Box::new(std::io::stderr()),
    };
    let target = std::sync::Arc::new(std::sync::Mutex::new(target));
    let _ = builder
        .with_writer(move || Redacted {
            record: Vec::new(),
            target: target.clone(),
        })
        .try_init();
}

/// One log record, gathered and written redacted when it is complete (the formatter writes
/// a record, then drops its writer).
struct Redacted {
    record: Vec<u8>,
    target: std::sync::Arc<std::sync::Mutex<Box<dyn Write + Send>>>,
}

impl Write for Redacted {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.record.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.record.is_empty() {
            return Ok(());
        }
        let text = crate::secrets::redact(&String::from_utf8_lossy(&self.record));
        self.record.clear();
        let mut target = self
            .target
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        target.write_all(text.as_bytes())?;
        target.flush()
    }
}

impl Drop for Redacted {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

#[cfg(test)]
mod log_filter_tests {
    use super::log_filter;

    #[test]
    fn a_bare_level_is_mekaras_and_a_named_target_replaces_the_defaults_inside_it() {
        assert_eq!(
            log_filter(Some("debug")),
            "warn,rmcp::service=error,rmcp::transport=off,mekara=debug"
        );
        assert_eq!(
            log_filter(Some("debug, rmcp=debug")),
            "warn,mekara=debug,rmcp=debug"
        );
        assert_eq!(
            log_filter(Some("rmcp::transport=info")),
            "warn,rmcp::service=error,rmcp::transport=info"
        );
        // `rmcpx` is not inside `rmcp`.
        assert_eq!(
            log_filter(Some("rmcpx=debug")),
            "warn,rmcp::service=error,rmcp::transport=off,rmcpx=debug"
        );
        assert_eq!(log_filter(None), super::DEFAULT_LOG);
    }
}
