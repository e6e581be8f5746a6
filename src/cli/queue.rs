//! `mekara submit` and `mekara worker`: a queue of unattended runs in the shared run store
//! (`crate::store::postgres::Worker` claims them), drained by workers on any host with a
//! checkout of the project. `mekara runs cancel` is here too, for `cli::runs`.
//!
//! A worker runs each run as a child `mekara run … --agent…` (never in its own process): a
//! run that crashes or is killed takes only its child down, and the worker puts it back for
//! a resume from its journal. The child stops its run resumably when the worker's end closes
//! its stdin, so a worker killed outright leaves no run going on behind it.

use std::collections::{HashMap, HashSet};
use std::io::Read as _;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args};

use super::output::outln;
use crate::agents::CLIENTS;
use crate::display::count;
use crate::engine::journal::JournalError;
use crate::engine::runner::StepRunner;
use crate::engine::runs::RunState;
use crate::exit::Exit;
use crate::paths::Locations;
use crate::store::config::QueueLimits;
use crate::store::postgres::{Cancel, Job, JobState, NewJob, PgStore, Worker};

/// The queue a run goes to, and a worker drains, unless told otherwise.
const DEFAULT_QUEUE: &str = "default";

/// How often a worker marks its claims alive and looks for cancels.
const BEAT: Duration = Duration::from_millis(500);

/// How long a worker waits before it looks at an empty queue again.
const IDLE: Duration = Duration::from_millis(250);

/// How long a worker leaves a run alone that another process still holds.
const BUSY_SKIP: Duration = Duration::from_secs(2);

/// How many times a run's process may die before the worker gives it up as failed.
const MAX_ATTEMPTS: i32 = 5;

/// Queue an unattended run in the shared run store, for `mekara worker` to run.
#[derive(Debug, Args)]
#[command(
    group(ArgGroup::new("submit_agent").required(true).args(["agent", "agent_command"])),
    after_help = "Prints the run's id on stdout. Follow it with `mekara runs show ID`; stop it with `mekara runs cancel ID`.\nNeeds the shared run store (`[store] url` in .mekara/config.toml, or MEKARA_STORE_URL)."
)]
pub(super) struct SubmitArgs {
    /// The script to run (`test/random` or `test:random`).
    name: String,
    /// The script's arguments.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    arguments: Vec<String>,
    /// The agent that does the llm steps and NL scripts on the worker: `claude`, `codex` or
    /// `gemini` (on the worker's PATH).
    #[arg(long, value_name = "AGENT", value_parser = clap::builder::PossibleValuesParser::new(queued_agents()))]
    agent: Option<String>,
    /// The command that does the llm steps and NL scripts on the worker (docs/agent-command.md).
    #[arg(long, value_name = "CMD")]
    agent_command: Option<String>,
    /// The queue (`[queue.NAME]` of .mekara/config.toml sets its limits).
    #[arg(long, value_name = "NAME", default_value = DEFAULT_QUEUE, value_parser = queue_name)]
    queue: String,
    /// Pause the run before an agent step once its agents spent this much (US dollars).
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
    /// Pause the run before an agent step once its agents used this many tokens.
    #[arg(long, value_name = "N")]
    max_tokens: Option<u64>,
    /// Pause the run before the next agent step once one step used this many tokens.
    #[arg(long, value_name = "N")]
    max_step_tokens: Option<u64>,
    /// What a reached spend cap does: `pause` the run for a person (`mekara answer`), or
    /// `stop` it.
    #[arg(long, value_name = "WHAT", value_parser = ["pause", "stop"])]
    on_cap: Option<String>,
    /// Stop the run before an agent step once it has had this many agent answers.
    #[arg(long, value_name = "N")]
    max_agent_steps: Option<usize>,
    /// Stop the run before an agent step once a worker has run it this long (`20m`).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    max_duration: Option<Duration>,
    /// How long one agent answer may take, in seconds.
    #[arg(long, value_name = "SECONDS")]
    agent_timeout: Option<super::Seconds>,
    /// What a failed step does: `stop` the run (the default), or hand the rest of the script
    /// to the `agent`.
    #[arg(long, value_name = "WHAT", value_parser = ["stop", "agent"])]
    fallback: Option<String>,
}

/// Run the queued runs of the shared run store, as they come.
#[derive(Debug, Args)]
#[command(
    after_help = "Run it in a checkout of the project, on as many hosts as you like. It prints a line per run claimed, finished, failed, paused for a person or released.\nCtrl-C or SIGTERM: no new runs; the runs in hand stop resumably and go back to the queue for another worker. A second one stops at once (the runs are still resumed elsewhere)."
)]
pub(super) struct WorkerArgs {
    /// How many runs this worker runs at once.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    concurrency: u64,
    /// A queue to drain (repeat it for several).
    #[arg(long = "queue", value_name = "NAME", default_value = DEFAULT_QUEUE, value_parser = queue_name)]
    queues: Vec<String>,
    /// Stop when the queues are empty and nothing runs (for scripts and CI).
    #[arg(long)]
    until_empty: bool,
    /// An agent command this worker runs for queued runs (repeat it for several). A run
    /// submitted with another `--agent-command` fails without running: whoever can write
    /// to the queue must not choose the commands a worker's host runs.
    #[arg(long = "allow-agent-command", value_name = "CMD")]
    allowed_agent_commands: Vec<String>,
}

/// The agents `--agent` of `mekara submit` names, which a worker runs as `mekara run
/// --agent NAME`: the clients with a headless adapter, from the one list of clients.
fn queued_agents() -> Vec<&'static str> {
    CLIENTS
        .into_iter()
        .filter(|client| client.headless.is_some())
        .map(|client| client.name)
        .collect()
}

/// The limits a queued run may carry to its worker's `mekara run`, each with a value.
const QUEUED_LIMITS: [&str; 8] = [
    "--max-cost",
    "--max-tokens",
    "--max-step-tokens",
    "--on-cap",
    "--max-agent-steps",
    "--max-duration",
    "--agent-timeout",
    "--fallback",
];

/// The words a worker adds to its `mekara run` for queued `job`'s agent and limits, or why
/// it does not run the job. The queue's rows are data anyone who can write to the table
/// controls, so nothing of them becomes a word of the command line unchecked: the agent is
/// one of [`queued_agents`] or an agent command in `allowed`, word for word, and each limit is
/// one of [`QUEUED_LIMITS`]; each is passed as `--flag=value`, so a value is never read as
/// a flag of its own.
fn queued_words(job: &Job, allowed: &[String]) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    match job.agent.as_slice() {
        [flag, name] if flag == "--agent" && queued_agents().contains(&name.as_str()) => {
            words.push(format!("--agent={name}"));
        }
        [flag, command] if flag == "--agent-command" => {
            if !allowed.contains(command) {
                return Err(format!(
                    "this worker does not run the agent command `{}`: a worker runs only the agent commands its host allows with `--allow-agent-command`; start the worker with `--allow-agent-command '{}'` if this host should run it, or submit the run with a command the workers allow",
                    crate::display::clipped(command, 200),
                    crate::display::clipped(command, 200)
                ));
            }
            words.push(format!("--agent-command={command}"));
        }
        other => {
            return Err(format!(
                "its agent ({}) is neither `--agent` with one of {} nor `--agent-command`; the queue's row was not written by `mekara submit`",
                crate::display::clipped(&other.join(" "), 200),
                queued_agents().join(", ")
            ));
        }
    }
    for pair in job.limits.chunks(2) {
        match pair {
            [flag, value] if QUEUED_LIMITS.contains(&flag.as_str()) => {
                words.push(format!("{flag}={value}"));
            }
            _ => {
                return Err(format!(
                    "its limits ({}) are not pairs of {} and a value; the queue's row was not written by `mekara submit`",
                    crate::display::clipped(&job.limits.join(" "), 200),
                    QUEUED_LIMITS.join(", ")
                ));
            }
        }
    }
    Ok(words)
}

/// A queue's name: what `[queue.NAME]` can hold unquoted, and a worker's log lines can show
/// plainly (letters, digits, `-`, `_`; 64 at most).
fn queue_name(value: &str) -> Result<String, String> {
    let fits = !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if fits {
        Ok(value.to_string())
    } else {
        Err(format!(
            "`{}` is not a queue name; use letters, digits, `-` and `_` (64 at most), as in `[queue.NAME]` of .mekara/config.toml",
            crate::display::clipped(value, 200)
        ))
    }
}

/// The shared store of a queue command, or the usage error that says how to set one.
fn shared_store(locations: &Locations, command: &str) -> anyhow::Result<PgStore> {
    match crate::store::config::shared(locations)? {
        Some(store) => Ok(store),
        None => super::usage(format!(
            "`mekara {command}` needs the shared run store, and this project keeps its runs in files; set `[store] url = \"postgres://USER:PASSWORD@HOST/DATABASE\"` in `.mekara/config.toml` or `MEKARA_STORE_URL`"
        )),
    }
}

pub(super) fn submit(args: SubmitArgs) -> anyhow::Result<Exit> {
    let (locations, resolver) = super::locate()?;
    let store = shared_store(&locations, "submit")?;
    let name = super::script_named(&resolver, &args.name, "submit")?;
    // A script this checkout cannot run is refused now, not by a worker later.
    resolver.resolve(&name)?;
    if let Some(cost) = args.max_cost
        && !(cost.is_finite() && cost >= 0.0)
    {
        return super::usage(format!(
            "`--max-cost` must be a number of US dollars, 0 or more, not `{cost}`"
        ));
    }
    if let Some(secs) = &args.agent_timeout {
        super::timeout_arg("--agent-timeout", secs)?;
    }
    // clap requires one of the two (the `submit_agent` group).
    let agent = match (&args.agent, &args.agent_command) {
        (_, Some(command)) => vec!["--agent-command".to_string(), command.clone()],
        (agent, None) => vec![
            "--agent".to_string(),
            agent.clone().unwrap_or_else(|| "claude".to_string()),
        ],
    };
    let mut limits = Vec::new();
    let mut limit = |flag: &str, value: Option<String>| {
        if let Some(value) = value {
            limits.extend([flag.to_string(), value]);
        }
    };
    limit("--max-cost", args.max_cost.map(|v| v.to_string()));
    limit("--max-tokens", args.max_tokens.map(|v| v.to_string()));
    limit(
        "--max-step-tokens",
        args.max_step_tokens.map(|v| v.to_string()),
    );
    limit("--on-cap", args.on_cap.clone());
    limit(
        "--max-agent-steps",
        args.max_agent_steps.map(|v| v.to_string()),
    );
    limit(
        "--max-duration",
        args.max_duration
            .map(|d| humantime::format_duration(d).to_string()),
    );
    limit(
        "--agent-timeout",
        args.agent_timeout.as_ref().map(ToString::to_string),
    );
    limit("--fallback", args.fallback.clone());
    let id = store.submit(&NewJob {
        queue: args.queue.clone(),
        script: name.clone(),
        arguments: args.arguments.join(" "),
        agent,
        limits,
    })?;
    outln!("{id}")?;
    eprintln!(
        "queued run {id} (`{}`) in queue `{}` of {}; follow it with `mekara runs show {id}`, stop it with `mekara runs cancel {id}`",
        crate::script::name::shown(&name),
        args.queue,
        crate::engine::store::Store::place(&store)
    );
    Ok(Exit::Success)
}

/// `mekara runs cancel ID`.
pub(super) fn cancel(locations: &Locations, id: &str) -> anyhow::Result<Exit> {
    let store = shared_store(locations, "runs cancel")?;
    match store.cancel(id)? {
        Cancel::Dequeued => {
            outln!("cancelled run {id}: no worker runs it, and none will")?;
            Ok(Exit::Success)
        }
        Cancel::Asked { worker_host } => {
            eprintln!("asked the worker on {worker_host} to stop run {id}…");
            // The worker looks every half second; its run stops within the step in flight.
            let deadline = Instant::now() + Duration::from_secs(30);
            while Instant::now() < deadline {
                let row = store.queue_rows(Some(id))?.pop();
                if row.as_ref().is_none_or(|r| r.state != JobState::Claimed) {
                    let how = row.map_or(JobState::Cancelled, |r| r.state);
                    if how == JobState::Cancelled {
                        outln!("cancelled run {id}: its worker stopped it")?;
                    } else {
                        outln!("run {id} ended ({how}) before its worker could stop it")?;
                    }
                    return Ok(Exit::Success);
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            outln!(
                "asked the worker on {worker_host} to stop run {id}; it has not yet: `mekara runs show {id}` tells when it has"
            )?;
            Ok(Exit::Success)
        }
        Cancel::Ended(state) => {
            eprintln!("run {id} has ended ({state}): there is nothing to cancel");
            Ok(Exit::Failure)
        }
        Cancel::NotQueued => {
            eprintln!(
                "run {id} was not submitted to a queue: the `mekara run` (or agent) that drives it stops it (Ctrl-C)"
            );
            Ok(Exit::Failure)
        }
    }
}

/// A run a worker has in hand: its child `mekara run`.
struct Running {
    job: Job,
    child: Child,
    /// Kept open: the child stops its run when this closes (the worker died).
    _stdin: Option<ChildStdin>,
    log: PathBuf,
    started: Instant,
    /// `mekara runs cancel` asked for it to stop.
    cancelled: bool,
}

pub(super) fn worker(args: WorkerArgs) -> anyhow::Result<Exit> {
    let (locations, _) = super::locate()?;
    if locations.project_root.is_none() {
        return super::usage(
            "`mekara worker` runs queued runs in a checkout of their project, and this folder is in none; `cd` into the project's folder (the one with `.mekara/`) first",
        );
    }
    let store = shared_store(&locations, "worker")?;
    let limits = crate::store::config::queue_limits(&locations)?;
    let runs_dir = locations
        .runs_dir()
        .ok_or(crate::engine::EngineError::NoRunsDir)?;
    crate::store::file::make_runs_dir(&runs_dir)?;
    let queues: Vec<(String, Option<usize>)> = args
        .queues
        .iter()
        .map(|q| (q.clone(), limits.get(q).and_then(|l| l.concurrency)))
        .collect();
    let name = format!("{}:{}", crate::host::this_host(), std::process::id());
    let mut worker = store.worker(&name)?;
    let here = Here {
        exe: std::env::current_exe()?,
        runs_dir,
        allowed: args.allowed_agent_commands.clone(),
    };

    // The first Ctrl-C or SIGTERM sets `stop`; a second one ends the worker at once (exit
    // 130). Either way its runs are resumed: the children stop when their stdin closes.
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop))?;
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    let shown: Vec<String> = queues
        .iter()
        .map(|(q, limit)| match limit {
            Some(n) => format!("`{q}` (at most {n} at once across workers)"),
            None => format!("`{q}`"),
        })
        .collect();
    eprintln!(
        "worker {name}: running the runs of {} from {}, {} at a time; Ctrl-C or SIGTERM stops it",
        shown.join(", "),
        crate::engine::store::Store::place(&store),
        args.concurrency
    );
    let slots = usize::try_from(args.concurrency).unwrap_or(usize::MAX);
    let mut running: HashMap<String, Running> = HashMap::new();
    let mut skip: HashMap<String, Instant> = HashMap::new();
    let mut stopping = false;
    let mut last_beat = Instant::now();
    let mut next_claim = Instant::now();
    let mut idle = false;
    loop {
        if stop.load(Ordering::SeqCst) && !stopping {
            stopping = true;
            eprintln!(
                "stopping: no new runs; {} in hand {} resumably and {} back to the queue (a second Ctrl-C or SIGTERM stops at once)",
                count(running.len(), "run"),
                if running.len() == 1 { "stops" } else { "stop" },
                if running.len() == 1 { "goes" } else { "go" }
            );
            for r in running.values() {
                interrupt(&r.child);
            }
        }
        let ended: Vec<(String, ExitStatus)> = running
            .iter_mut()
            .filter_map(|(id, r)| match r.child.try_wait() {
                Ok(Some(status)) => Some((id.clone(), status)),
                _ => None,
            })
            .collect();
        for (id, status) in ended {
            if let Some(r) = running.remove(&id) {
                if ended_run(&store, &mut worker, r, status, stopping)? == Retry::Later {
                    skip.insert(id.clone(), Instant::now() + BUSY_SKIP);
                }
                idle = false;
            }
        }
        if stopping && running.is_empty() {
            eprintln!("worker {name} stopped");
            return Ok(Exit::Success);
        }
        if last_beat.elapsed() >= BEAT {
            last_beat = Instant::now();
            for id in worker.beat()? {
                if let Some(r) = running.get_mut(&id)
                    && !r.cancelled
                {
                    r.cancelled = true;
                    eprintln!("cancelling run {id}: stopping it within the step in flight");
                    interrupt(&r.child);
                }
            }
        }
        let skipped = skip.len();
        skip.retain(|_, until| *until > Instant::now());
        if skip.len() < skipped {
            // A run left alone is claimable again: the queue is not known to be empty.
            idle = false;
        }
        while !stopping && running.len() < slots && (!idle || Instant::now() >= next_claim) {
            let skipped: HashSet<String> = skip.keys().cloned().collect();
            let Some(job) = worker.claim(&queues, &skipped)? else {
                idle = true;
                next_claim = Instant::now() + IDLE;
                break;
            };
            idle = false;
            let limits = limits.get(&job.queue).cloned().unwrap_or_default();
            if let Some(r) = start(&store, &mut worker, &here, job, &limits, &mut skip)? {
                running.insert(r.job.run_id.clone(), r);
            }
        }
        if args.until_empty && idle && running.is_empty() && skip.is_empty() {
            eprintln!("worker {name}: the queue is empty; stopping");
            return Ok(Exit::Success);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Asks a child `mekara run` to stop its run resumably (its Ctrl-C; a Ctrl-Break on
/// Windows).
pub(super) fn interrupt(child: &Child) {
    crate::engine::process::interrupt(child);
}

/// What a worker's host gives each run it starts.
struct Here {
    /// This `mekara`, run as each run's child.
    exe: PathBuf,
    /// Where the children's logs go.
    runs_dir: PathBuf,
    /// The agent commands this host runs (`--allow-agent-command`).
    allowed: Vec<String>,
}

/// Starts the child that runs claimed `job` (or ends the claim when the job must not run).
fn start(
    store: &PgStore,
    worker: &mut Worker,
    here: &Here,
    job: Job,
    limits: &QueueLimits,
    skip: &mut HashMap<String, Instant>,
) -> anyhow::Result<Option<Running>> {
    let id = job.run_id.clone();
    if job.cancelled {
        worker.end(
            &id,
            JobState::Cancelled,
            Some("cancelled before a worker ran it"),
        )?;
        eprintln!("cancelled run {id} before it started");
        return Ok(None);
    }
    if job.started && worker.run_busy(&id)? {
        // Its last process is still letting go of it (or another host's is still running):
        // not an attempt.
        worker.give_back(&id)?;
        skip.insert(id, Instant::now() + BUSY_SKIP);
        return Ok(None);
    }
    if job.started
        && let Some(ended) = ended_meanwhile(store, &id)?
    {
        // The child of a worker that died went on to the run's end before it noticed.
        let (state, note) = match ended {
            RunState::Completed | RunState::FinishedByAgent => (JobState::Done, None),
            state => (JobState::Failed, Some(format!("its run ended {state}"))),
        };
        worker.end(&id, state, note.as_deref())?;
        eprintln!("run {id} had ended ({ended}) by the time a worker took it up again");
        return Ok(None);
    }
    if job.attempts > MAX_ATTEMPTS {
        let note = format!("its process died {MAX_ATTEMPTS} times; the worker gave it up");
        worker.end(&id, JobState::Failed, Some(&note))?;
        eprintln!("failed run {id}: {note}; resume it by hand with `mekara run --resume {id}`");
        return Ok(None);
    }
    let words = match queued_words(&job, &here.allowed) {
        Ok(words) => words,
        Err(why) => {
            worker.end(&id, JobState::Failed, Some(&why))?;
            eprintln!("refused run {id}: {why}");
            return Ok(None);
        }
    };
    let mut command = Command::new(&here.exe);
    command.arg("run");
    if job.started {
        command.args(["--resume", &id]);
    } else {
        command.args(["--run-id", &id]);
    }
    command
        .args(&words)
        .args(limits.flags(&job.limits))
        .args(["--json", "--stop-when-stdin-closes"]);
    if !job.started {
        command.arg("--").arg(&job.script);
        if !job.arguments.is_empty() {
            command.arg(&job.arguments);
        }
    }
    // Its progress goes to a log, its JSON summary to a file of its own (read at its end).
    let log = here.runs_dir.join(format!("{id}.worker.log"));
    let open = |path: &std::path::Path, append: bool| {
        std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot write `{}`: {e}", path.display()))
    };
    let files = open(&log, true).and_then(|output| Ok((output, open(&summary_path(&log), false)?)));
    let (stderr, stdout) = match files {
        Ok(files) => files,
        Err(e) => {
            // The host's fault (a full disk, the folder not writable), not the run's: it goes
            // back to the queue for a worker that can write, and this one stops.
            worker.give_back(&id)?;
            return Err(e.context(format!(
                "the worker stops: it cannot keep the output of the runs it starts (run {id} is back in the queue)"
            )));
        }
    };
    crate::engine::process::interruptible(&mut command);
    let mut child = match command
        .stdin(Stdio::piped())
        .stdout(stdout)
        .stderr(stderr)
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            // This run's failure, not the worker's (its arguments too long for a command
            // line, say): the worker goes on with the next.
            let why = format!("cannot start `{}`: {e}", here.exe.display());
            worker.end(&id, JobState::Failed, Some(&why))?;
            eprintln!("failed run {id}: {why}");
            return Ok(None);
        }
    };
    let how = if job.started { "resuming" } else { "claimed" };
    let again = if job.attempts > 1 {
        format!(", attempt {}", job.attempts)
    } else {
        String::new()
    };
    eprintln!(
        "{how} run {id} (`{}` from queue `{}`{again})",
        crate::script::name::shown(&job.script),
        job.queue
    );
    Ok(Some(Running {
        _stdin: child.stdin.take(),
        job,
        child,
        log,
        started: Instant::now(),
        cancelled: false,
    }))
}

/// The state run `id` ended in, if its script ended: a run a worker gave up when it died
/// may still have been finished by that worker's child. (A run stopped before its script
/// started is left to its resume, which says what is wrong.)
fn ended_meanwhile(store: &PgStore, id: &str) -> anyhow::Result<Option<RunState>> {
    let summary = match crate::engine::store::Store::list(store, Some(id)) {
        Ok(summary) => summary,
        // Its process stopped before the run existed (a word of its command line was
        // refused): nothing of it ended.
        Err(crate::engine::EngineError::RunNotFound { .. }) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    Ok(summary.into_iter().map(|r| r.state).find(|state| {
        matches!(
            state,
            RunState::Completed
                | RunState::FinishedByAgent
                | RunState::FellBack
                | RunState::Stopped
        )
    }))
}

/// Records how the child of `r` ended, and says so.
fn ended_run(
    store: &PgStore,
    worker: &mut Worker,
    r: Running,
    status: ExitStatus,
    stopping: bool,
) -> anyhow::Result<Retry> {
    let id = &r.job.run_id;
    let took = r.started.elapsed().as_secs_f64();
    let interrupted = status.code() == Some(i32::from(Exit::Interrupted.code()));
    if status.success() {
        worker.end(id, JobState::Done, None)?;
        eprintln!("finished run {id}: completed in {took:.1} s");
    } else if r.cancelled {
        worker.end(
            id,
            JobState::Cancelled,
            Some("cancelled by `mekara runs cancel`"),
        )?;
        eprintln!("cancelled run {id} after {took:.1} s");
    } else if stopping || interrupted || status.code().is_none() {
        let why = match status.code() {
            None => "its process was killed",
            Some(_) if stopping => "the worker is stopping",
            Some(_) => "its process was interrupted",
        };
        worker.end(id, JobState::Queued, None)?;
        eprintln!("released run {id}: {why}; a worker resumes it from its journal");
    } else if let Some(waits) = waits_for_a_person(&r.log) {
        // The worker's part is done: what is left is a person's answer, then a resume.
        worker.end(id, JobState::Done, Some(&waits))?;
        eprintln!("paused run {id}: {waits}");
    } else if matches!(
        ended_meanwhile(store, id)?,
        Some(RunState::Completed | RunState::FinishedByAgent)
    ) {
        // Its child found the run finished: the child of a worker that died ended it.
        worker.end(id, JobState::Done, None)?;
        eprintln!("finished run {id}: it had ended by the time its process started");
    } else {
        let note = why_it_stopped(&r.log).unwrap_or_else(|| format!("exit code {status}"));
        let held = [
            JournalError::Busy { id: id.clone() },
            JournalError::Taken { id: id.clone() },
        ]
        .iter()
        .any(|e| note.contains(&e.to_string()));
        if held {
            // The child of a worker that died took the run up after this worker's check, or
            // was still making it when this worker claimed it as not started: not an
            // attempt; it is tried again, as a resume once its journal exists, when that
            // process let go of it.
            worker.give_back(id)?;
            eprintln!("released run {id}: another process still holds it; it is tried again");
            return Ok(Retry::Later);
        }
        worker.end(id, JobState::Failed, Some(&note))?;
        eprintln!("failed run {id}: {note} (its output: {})", r.log.display());
    }
    Ok(Retry::No)
}

/// Whether a run a worker let go of is to be left alone for a while before it is claimed
/// again.
#[derive(Debug, PartialEq, Eq)]
enum Retry {
    No,
    Later,
}

/// Where a child's JSON summary goes, beside its log.
fn summary_path(log: &std::path::Path) -> PathBuf {
    log.with_extension("json")
}

/// The text of file `path`, if it can be read.
fn read_text(path: &std::path::Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The JSON summary a child wrote beside its log, if it wrote one.
fn summary_of(log: &std::path::Path) -> Option<serde_json::Value> {
    read_text(&summary_path(log)).and_then(|t| serde_json::from_str(&t).ok())
}

/// What a child's run waits for when it stopped for a person (an answer to `ask`, a spend
/// cap to raise), in a line: what it asks, how to answer it, and the command that goes on
/// after; `None` when it stopped any other way.
fn waits_for_a_person(log: &std::path::Path) -> Option<String> {
    let summary = summary_of(log)?;
    if summary["state"] != "waiting" {
        return None;
    }
    // Its lines in one: a line that ends with `:` (the question follows) runs on.
    let mut why = String::new();
    for line in summary["stopped_by"]
        .as_str()?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
    {
        if !why.is_empty() {
            why.push_str(if why.ends_with(':') { " " } else { "; " });
        }
        why.push_str(line);
    }
    Some(match summary["resume"].as_str() {
        Some(resume) => format!("{why}; then go on with `{resume}`"),
        None => why,
    })
}

/// Why a child's run did not complete: what stopped it, from its JSON summary, else the
/// last line of its log (an error before the run started).
fn why_it_stopped(log: &std::path::Path) -> Option<String> {
    let summary = summary_of(log).and_then(|s| {
        let state = s["state"].as_str()?.replace('_', " ");
        Some(match s["stopped_by"].as_str() {
            Some(why) => format!("{state}: {}", why.lines().next().unwrap_or_default()),
            None => state,
        })
    });
    summary.or_else(|| {
        read_text(log)?
            .lines()
            .rev()
            .map(str::trim)
            .find(|l| !l.is_empty())
            .map(str::to_string)
    })
}

/// A runner whose new run takes the id it was given: a worker's child starts the run that
/// `mekara submit` named. Everything else is the inner runner's.
pub(super) struct NamedRun {
    pub inner: Box<dyn StepRunner>,
    pub id: String,
}

impl StepRunner for NamedRun {
    fn inner(&self) -> Option<&dyn StepRunner> {
        Some(self.inner.as_ref())
    }

    fn new_run_id(&self, attempt: u32) -> String {
        // A second attempt means the id is taken (by the child of a worker that died, still
        // making the run): a fresh id would run the script twice. The same id again makes
        // the store refuse it as taken, and the worker gives the run back for a resume.
        let _ = attempt;
        self.id.clone()
    }
}

/// Stops the run (as Ctrl-C does) when stdin reaches its end: the worker that started this
/// `mekara run` has gone.
pub(super) fn stop_when_stdin_closes(flag: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("mekara-stdin-watch".to_string())
        .spawn(move || {
            let mut buf = [0u8; 64];
            let mut stdin = std::io::stdin();
            while matches!(stdin.read(&mut buf), Ok(n) if n > 0) {}
            flag.store(true, Ordering::SeqCst);
        });
}
