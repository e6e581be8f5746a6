//! The child's side: `mekara __evaluate` reads its job from stdin, evaluates it, and asks
//! its parent, through a [`Link`], for every effect.

use std::collections::HashMap;
use std::io::BufRead;
use std::io::BufReader;
use std::sync::Mutex;

use starlark::syntax::AstModule;

use super::evaluator::SUBCOMMAND;
use super::link::Link;
use super::protocol::{Ask, CallJob, FrameJob, LoadJob, Opened, Outcome, Start};
use super::sources::Sources;
use crate::engine::compiled::program::evaluate_counted;
use crate::engine::compiled::{Called, DirectCall, Evaluation, FrameRun, Program};
use crate::engine::runner::CancelToken;
use crate::engine::step::StepRecord;
use crate::script::{HelperError, ScriptFile};

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
    let not_understood = |e: serde_json::Error| {
        anyhow::anyhow!(
            "`mekara {SUBCOMMAND}` is mekara's own, and this one ({}) does not understand the \
             mekara that started it ({e}): was mekara upgraded under it? Restart it",
            env!("CARGO_PKG_VERSION")
        )
    };
    let start = match serde_json::from_str::<Opened<Start>>(&line).map_err(not_understood)? {
        Opened::Job(start) => start,
        Opened::Refused(refused) => anyhow::bail!(refused),
    };
    let link = Link(Mutex::new((from_parent, std::io::stdout())));
    let finished = match start {
        Start::Frame(job) => evaluate_frame(job, &link),
        Start::Call(job) => call_function(job, &link),
        Start::Load(job) => load_module(job),
    };
    link.tell(&finished);
    Ok(())
}

/// The helper module `name` of those the parent sent.
fn helper(sources: &Sources, name: &str) -> Result<ScriptFile, HelperError> {
    sources
        .helpers
        .get(name)
        .cloned()
        .ok_or_else(|| HelperError::BadPath {
            path: name.to_string(),
            reason: "the parent sent no such module".to_string(),
        })
}

/// Runs the top level of `job`'s module and says whether it loaded. A statement past the
/// memory cap stops this process with the cap's message, as an evaluation does.
fn load_module(job: LoadJob) -> Ask {
    let LoadJob {
        sources,
        limits,
        script,
    } = job;
    let loaded = if script {
        let find = |name: &str| helper(&sources, name);
        Program::load(&sources.origin, &sources.text, &find, &limits).map(drop)
    } else {
        AstModule::parse(
            &sources.origin,
            sources.text.clone(),
            &crate::engine::compiled::dialect(),
        )
        .map_err(|e| crate::engine::compiled::CodeError::new(e.to_string()))
        .and_then(|ast| {
            crate::engine::compiled::freeze_module(&sources.origin, ast, &limits, &HashMap::new())
                .map(drop)
        })
    };
    Ask::Finished {
        outcome: Outcome::Loaded(loaded.err().map(|e| e.message)),
        cursor: 0,
        printed: 0,
    }
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
        warm,
    } = job;
    let find = |name: &str| helper(&sources, name);
    let (outcome, cursor) = match Program::load(&sources.origin, &sources.text, &find, &limits) {
        Err(code) => (Outcome::Evaluated(Evaluation::Failed(code.message)), 0),
        Ok(program) => {
            let cancel = CancelToken::default();
            let mut journal = |record: &StepRecord| link.journal(record);
            // The parent notes the groups of the shell steps it runs for the child.
            let run = FrameRun::new(
                &path,
                &working_dir,
                &mut steps,
                &mut printed,
                &mut journal,
                link,
                &cancel,
                &limits,
            );
            let run = run
                .request(&request)
                .observer(link)
                .default_timeout(default_timeout)
                .source(&sources.authored);
            let run = if warm { run.holder(link) } else { run };
            let (result, cursor) = evaluate_counted(&program, run);
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
    let loaded = AstModule::parse(&job.origin, job.source, &crate::engine::compiled::dialect())
        .map_err(|e| e.to_string())
        .and_then(|ast| {
            crate::engine::compiled::freeze_module(&job.origin, ast, &job.limits, &HashMap::new())
                .map_err(|e| e.message)
        });
    let outcome = match loaded {
        Err(message) => Outcome::Called(Called::Failed(message)),
        Ok(module) => {
            let cancel = CancelToken::default();
            let called = crate::engine::compiled::call_directly(DirectCall {
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
