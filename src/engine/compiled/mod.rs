//! Compiled scripts: loading a `.star` file, and evaluating `execute(request)` over the
//! journal of a frame (DESIGN §3).
//!
//! Evaluation always starts from the top. Each step builtin takes the next journal entry
//! when there is one (checking that it asks for the recorded input), and past the end of
//! the journal it either runs now and appends its result (auto steps) or suspends the
//! evaluation (llm steps, script calls). Suspending is an error that unwinds the
//! interpreter: Starlark cannot catch errors, so nothing in the script can swallow it.
//!
//! One file per concern: `builtins` (the step builtins and the global environment),
//! `context` (what the builtins reach while a function runs: the journal, the runner, where
//! `print` goes), `values` (Starlark to JSON and back) and `diagnostics` (errors in script
//! code, with their location). This file holds the entry points the executor and
//! `mekara serve` use: [`Program`], [`evaluate`] and [`call_directly`].

mod builtins;
pub(crate) mod child;
mod context;
mod declared;
mod diagnostics;
mod modules;
mod parallel;
mod static_check;
mod step_results;
mod values;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value as Json};
use starlark::environment::{FrozenModule, Module};
use starlark::eval::Evaluator;
use starlark::syntax::AstModule;
use starlark::values::OwnedFrozenValue;

pub(crate) use builtins::{dialect, globals};
pub(crate) use context::JournalWriter;
pub(crate) use diagnostics::CodeError;
pub(crate) use modules::FindModule;
pub(crate) use static_check::{person_warnings, planned_steps, target_problems, typecheck};
pub(crate) use values::unfit;

use context::{Interrupt, LogPrinter, StepContext, StepPrinter};
use diagnostics::{LastStatement, MemoryCheck, is_limit, overflow_as_limit, render};
use modules::{Loads, ModuleGraph};
use values::{json_of, keyword_values};

use crate::memory::Budget;

use super::error::EngineError;
use super::group_note::GroupNote;
use super::observer::Observer;
use super::runner::{CancelToken, StepRunner};
use super::step::{StepInput, StepRecord};

/// Bounds on one evaluation, so a runaway script fails with its location instead of
/// hanging or eating the machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Limits {
    /// Interpreter ticks (roughly, bytecode instructions) per evaluation.
    pub max_ticks: u64,
    /// Bytes of Starlark heap.
    pub max_heap_bytes: usize,
    /// Depth of Starlark calls.
    pub max_call_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_ticks: 50_000_000,
            max_heap_bytes: 256 * 1024 * 1024,
            max_call_depth: 200,
        }
    }
}

/// A `.star` file that parsed and whose top level ran.
pub(crate) struct Program {
    module: FrozenModule,
    /// The text of its string literals: where the author writes the prompt tags that may
    /// call tools (see `tool::expand`).
    authored: String,
}

impl Program {
    /// Parses `source` and the helper modules it loads (found through `find`), and runs
    /// their top levels, which may only define things: step builtins refuse to run there.
    /// `origin` names the file in error locations.
    pub(crate) fn load(
        origin: &str,
        source: &str,
        find: &FindModule<'_>,
        limits: &Limits,
    ) -> Result<Program, CodeError> {
        let graph = ModuleGraph::collect(origin, source, find)?;
        let signature = static_check::execute_signature(&graph.root().ast);
        let authored = graph.authored();
        let module = graph.freeze(limits)?;
        match module.get_option("execute") {
            Ok(Some(f)) if f.value().get_type() == "function" => match signature {
                Some(problem) => Err(problem),
                None => Ok(Program { module, authored }),
            },
            Ok(Some(f)) => Err(CodeError::new(format!(
                "error: `execute` must be a function, but it is a `{}`\n --> {origin}\nhint: define `def execute(request):`",
                f.value().get_type()
            ))),
            _ => Err(CodeError::new(format!(
                "error: the script defines no `execute` function\n --> {origin}\nhint: define `def execute(request):`; mekara calls it with the script's arguments"
            ))),
        }
    }
}

impl Program {
    /// The text of the script's string literals (see [`modules::string_literals`]).
    pub(crate) fn authored(&self) -> &str {
        &self.authored
    }
}

/// A compiled script ready to evaluate: loaded in this process, or read for a child process
/// to load and evaluate (see [`child`]).
pub(crate) enum Loaded {
    /// Loaded here; evaluated here.
    Here(Program),
    /// Read and parsed here; loaded and evaluated by `exe __evaluate`.
    InChild {
        /// The `mekara` binary.
        exe: std::path::PathBuf,
        /// The script and its helper modules.
        sources: child::Sources,
    },
}

impl Loaded {
    /// Loads the script `source` (with the helper modules `find` finds) for evaluation
    /// here, or, with `evaluator`, reads it for evaluation by that `mekara` binary.
    pub(crate) fn load(
        origin: &str,
        source: &str,
        find: &FindModule<'_>,
        limits: &Limits,
        evaluator: Option<&Path>,
    ) -> Result<Loaded, CodeError> {
        match evaluator {
            None => Program::load(origin, source, find, limits).map(Loaded::Here),
            Some(exe) => {
                child::Sources::collect(origin, source, find).map(|sources| Loaded::InChild {
                    exe: exe.to_path_buf(),
                    sources,
                })
            }
        }
    }

    /// The text of the string literals of the script and its helpers.
    pub(crate) fn authored(&self) -> &str {
        match self {
            Loaded::Here(program) => program.authored(),
            Loaded::InChild { sources, .. } => sources.authored(),
        }
    }

    /// Evaluates the script over the frame's journal until it completes, fails or
    /// suspends, here or in a child process.
    pub(crate) fn evaluate(&self, run: FrameRun<'_>) -> Result<Evaluation, EngineError> {
        self.evaluate_counted(run).0
    }

    /// [`Loaded::evaluate`], with how many of the frame's steps the evaluation went
    /// through (see [`evaluate_counted`]).
    pub(crate) fn evaluate_counted(
        &self,
        run: FrameRun<'_>,
    ) -> (Result<Evaluation, EngineError>, usize) {
        match self {
            Loaded::Here(program) => evaluate_counted(program, run),
            Loaded::InChild { exe, sources } => child::evaluate(exe, sources, run),
        }
    }
}

/// Runs a parsed module's top level (where step builtins refuse to run), with the modules
/// its `load` statements name, and freezes it.
pub(crate) fn freeze_module(
    origin: &str,
    ast: AstModule,
    limits: &Limits,
    loads: &HashMap<&str, &FrozenModule>,
) -> Result<FrozenModule, CodeError> {
    let _budget = limits.budget();
    let frozen = overflow_as_limit(limits, || {
        Module::with_temp_heap(|module| -> Result<FrozenModule, CodeError> {
            {
                let printer = LogPrinter;
                let loader = Loads(loads);
                let mut eval = Evaluator::new(&module);
                eval.set_print_handler(&printer);
                eval.set_loader(&loader);
                apply_limits(&mut eval, limits).map_err(CodeError::new)?;
                MemoryCheck::watch(&mut eval, limits);
                eval.eval_module(ast, globals())
                    .map_err(|e| CodeError::new(render(&e)))?;
            }
            module
                .freeze()
                .map_err(|e| CodeError::new(format!("{origin}: {e:?}")))
        })
    });
    // starlark computes some constant expressions as it compiles, before any statement runs.
    frozen.unwrap_or_else(|limit| {
        Err(CodeError::new(format!(
            "error: {}\n --> {origin}",
            render(&limit)
        )))
    })
}

/// Puts `limits` on `eval`.
fn apply_limits(eval: &mut Evaluator<'_, '_, '_>, limits: &Limits) -> Result<(), String> {
    eval.set_max_tick_count(limits.max_ticks)
        .and_then(|()| eval.set_max_heap_size(limits.max_heap_bytes))
        .and_then(|()| eval.set_max_callstack_size(limits.max_call_depth))
        .map_err(|e| format!("cannot set evaluation limits: {e}"))
}

impl Limits {
    /// The memory budget of an evaluation on this thread, held while it runs: what its
    /// statements allocate is checked against the heap limit, and one allocation that
    /// would take it past four times the limit stops the process (see [`crate::memory`]).
    fn budget(&self) -> Budget {
        Budget::enter(self.memory_cap())
    }

    /// The memory cap of an evaluation: four times the heap limit (1 GiB by default).
    pub(crate) fn memory_cap(&self) -> usize {
        self.max_heap_bytes.saturating_mul(4)
    }
}

/// Where a suspended evaluation stopped: what the frame needs before it can go on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Suspension {
    /// The agent must do an llm step.
    Llm {
        /// The instruction.
        prompt: String,
        /// The outputs it must give, with their descriptions.
        expects: Option<Map<String, Json>>,
    },
    /// Another script must run as a nested frame.
    Call {
        /// Its name as written.
        script: String,
        /// Its arguments.
        request: String,
        /// The folder it runs in.
        working_dir: std::path::PathBuf,
        /// Whether its failure goes to the caller, which goes on.
        allow_failure: bool,
    },
    /// The person must answer a question (`ask`).
    Ask {
        /// The question.
        question: String,
        /// The answers it takes, when it takes only some.
        choices: Option<Vec<String>>,
        /// How long after it is asked an answer may come.
        timeout: Option<Duration>,
        /// Whether a timed-out answer goes to the script as a failed result.
        allow_failure: bool,
    },
}

impl Suspension {
    /// What the journal records for this step once it is answered.
    pub(crate) fn input(&self) -> StepInput {
        match self {
            Suspension::Llm { prompt, expects } => StepInput::Llm {
                prompt: prompt.clone(),
                expects: expects.clone(),
            },
            Suspension::Call {
                script,
                request,
                working_dir,
                ..
            } => StepInput::Call {
                script: script.clone(),
                request: request.clone(),
                working_dir: working_dir.clone(),
            },
            Suspension::Ask {
                question, choices, ..
            } => StepInput::Ask {
                question: question.clone(),
                choices: choices.clone(),
            },
        }
    }
}

/// An llm step that a member of a `parallel` group stopped at: one of the independent
/// tasks the group waits for (see `parallel`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Task {
    /// The member that asks, from 0: its answer is journaled tagged with it.
    pub member: usize,
    /// The instruction.
    pub prompt: String,
    /// The outputs it must give, with their descriptions.
    pub expects: Option<Map<String, Json>>,
}

/// How an evaluation ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Evaluation {
    /// The frame waits for the agent or a nested script.
    Suspended(Suspension),
    /// The frame waits for the llm steps the members of the `parallel` group at step
    /// position `group` stopped at, in the members' order; `max` is the group's own bound
    /// on what runs at once.
    Tasks {
        group: usize,
        max: usize,
        tasks: Vec<Task>,
    },
    /// `execute` returned.
    Completed,
    /// A step failed without `allow_failure`, or the script raised an error.
    Failed(String),
    /// The script stopped itself: it called `fail(message)` outside a function step (after
    /// a person's "no", say). The run ends there; nobody finishes it by hand.
    Stopped(String),
}

/// Everything an evaluation needs from the executor.
pub(crate) struct FrameRun<'a> {
    /// The frame's stack path, for messages and the observer.
    pub path: &'a str,
    /// The script's arguments, passed to `execute`.
    pub request: &'a str,
    /// The folder relative paths are taken from.
    pub working_dir: &'a Path,
    /// The frame's journal: replayed, then appended to.
    pub steps: &'a mut Vec<StepRecord>,
    /// How many of the frame's prints outside function steps were reported already.
    pub printed: &'a mut usize,
    /// Writes a new record to the run's journal, before the script sees it.
    pub journal: &'a mut JournalWriter<'a>,
    /// Runs shell steps.
    pub runner: &'a dyn StepRunner,
    /// Where shell steps note their process group while they run, if anywhere.
    pub group_note: Option<&'a GroupNote>,
    /// Hears about new steps.
    pub observer: &'a dyn Observer,
    /// Stops a running step.
    pub cancel: &'a CancelToken,
    /// Timeout of shell steps that do not set one.
    pub default_timeout: Duration,
    /// Evaluation bounds.
    pub limits: &'a Limits,
    /// The text of the script's string literals, where the prompt tags that may call
    /// tools are written.
    pub source: &'a str,
    /// Where an evaluator child that holds the frame's suspended evaluation is kept between
    /// evaluations, if anywhere (see [`child::Warm`]).
    pub warm: Option<&'a mut Option<child::Warm>>,
    /// Holds the evaluation where it suspends (a warm child's own side).
    holder: Option<&'a dyn context::Holder>,
}

impl<'a> FrameRun<'a> {
    /// The run of frame `path` in `working_dir` over its journal `steps` (of whose prints
    /// `printed` were reported already), each new step written with `journal` and run by
    /// `runner`, stopped by `cancel`, within `limits`. Until set otherwise: no request,
    /// nobody observes it, no group note, shell steps have no default timeout, and no text
    /// holds tags that may call tools.
    #[allow(clippy::too_many_arguments)] // what every frame run has its own of; the rest is set
    pub(crate) fn new(
        path: &'a str,
        working_dir: &'a Path,
        steps: &'a mut Vec<StepRecord>,
        printed: &'a mut usize,
        journal: &'a mut JournalWriter<'a>,
        runner: &'a dyn StepRunner,
        cancel: &'a CancelToken,
        limits: &'a Limits,
    ) -> FrameRun<'a> {
        FrameRun {
            path,
            request: "",
            working_dir,
            steps,
            printed,
            journal,
            runner,
            group_note: None,
            observer: &super::observer::Quiet,
            cancel,
            default_timeout: Duration::ZERO,
            limits,
            source: "",
            warm: None,
            holder: None,
        }
    }

    /// With the script's arguments, passed to `execute`.
    #[must_use]
    pub(crate) fn request(self, request: &'a str) -> FrameRun<'a> {
        FrameRun { request, ..self }
    }

    /// Heard by `observer`.
    #[must_use]
    pub(crate) fn observer(self, observer: &'a dyn Observer) -> FrameRun<'a> {
        FrameRun { observer, ..self }
    }

    /// With shell steps noting their process group in `group_note`.
    #[must_use]
    pub(crate) fn group_note(self, group_note: &'a GroupNote) -> FrameRun<'a> {
        FrameRun {
            group_note: Some(group_note),
            ..self
        }
    }

    /// With `default_timeout` for the shell steps that set none.
    #[must_use]
    pub(crate) fn default_timeout(self, default_timeout: Duration) -> FrameRun<'a> {
        FrameRun {
            default_timeout,
            ..self
        }
    }

    /// With `source`, the text of the script's string literals, where the prompt tags that
    /// may call tools are written.
    #[must_use]
    pub(crate) fn source(self, source: &'a str) -> FrameRun<'a> {
        FrameRun { source, ..self }
    }

    /// Keeping an evaluator child that holds the frame's suspended evaluation in `warm`,
    /// where the next evaluation of the frame takes it up (see [`child::Warm`]).
    #[must_use]
    pub(crate) fn warm(self, warm: &'a mut Option<child::Warm>) -> FrameRun<'a> {
        FrameRun {
            warm: Some(warm),
            ..self
        }
    }

    /// With `holder` keeping the evaluation where it suspends.
    #[must_use]
    fn holder(self, holder: &'a dyn context::Holder) -> FrameRun<'a> {
        FrameRun {
            holder: Some(holder),
            ..self
        }
    }

    /// The context the run's functions are called in, the frame's steps moved into it; with
    /// the run's request, and where the steps and the count of prints reported go back when
    /// the evaluation ends.
    fn into_context(
        self,
    ) -> (
        StepContext<'a>,
        &'a str,
        &'a mut Vec<StepRecord>,
        &'a mut usize,
    ) {
        let ctx = StepContext {
            path: self.path,
            working_dir: self.working_dir,
            steps: RefCell::new(std::mem::take(self.steps)),
            cursor: Cell::new(0),
            journal: RefCell::new(self.journal),
            runner: self.runner,
            group_note: self.group_note,
            observer: self.observer,
            cancel: self.cancel,
            default_timeout: self.default_timeout,
            limits: self.limits,
            source: self.source,
            interrupt: RefCell::new(None),
            capture: RefCell::new(None),
            prints: Cell::new(0),
            printed: Cell::new(*self.printed),
            member: RefCell::new(None),
            holder: self.holder,
        };
        (ctx, self.request, self.steps, self.printed)
    }
}

/// Evaluates `program` over the frame's journal until it completes, fails or suspends,
/// with how many of the frame's steps the evaluation went through (replayed
/// or new) when it stopped: a rewind compares it with the steps the journal recorded.
fn evaluate_counted(
    program: &Program,
    run: FrameRun<'_>,
) -> (Result<Evaluation, EngineError>, usize) {
    let path = run.path;
    let (ctx, request, steps, printed) = run.into_context();
    let execute = match program.module.get("execute") {
        Ok(execute) => execute,
        Err(e) => {
            *steps = ctx.steps.into_inner();
            let lost = EngineError::Diverged {
                script: path.to_string(),
                index: 0,
                detail: format!("the script lost its `execute` function: {e}"),
            };
            return (Err(lost), 0);
        }
    };
    let result = call_with_steps(&ctx, &execute, &Arguments::Request(request));
    let cursor = ctx.cursor.get();
    let interrupt = ctx.interrupt.take();
    *printed = ctx.printed.get();
    *steps = ctx.steps.into_inner();
    let evaluation = match (result, interrupt) {
        (_, Some(Interrupt::Engine(e))) => Err(e),
        (_, Some(Interrupt::Suspend(s))) => Ok(Evaluation::Suspended(s)),
        (_, Some(Interrupt::Tasks { group, max, tasks })) => {
            Ok(Evaluation::Tasks { group, max, tasks })
        }
        (_, Some(Interrupt::StepFailed(message))) => Ok(Evaluation::Failed(message)),
        (
            Err(Raised {
                fail: Some(message),
                ..
            }),
            None,
        ) => Ok(Evaluation::Stopped(message)),
        (Err(raised), None) => Ok(Evaluation::Failed(raised.rendered)),
        (Ok(_), None) if cursor < steps.len() => Err(EngineError::Diverged {
            script: path.to_string(),
            index: cursor,
            detail: format!(
                "the script now ends after {cursor} steps, but the journal has {}",
                steps.len()
            ),
        }),
        (Ok(_), None) => Ok(Evaluation::Completed),
    };
    (evaluation, cursor)
}

/// What a function is called with by [`call_with_steps`].
enum Arguments<'a> {
    /// `execute(request)`; what it returns is not used.
    Request(&'a str),
    /// A served function's keyword arguments; what it returns is the result, as JSON.
    Keywords(&'a Map<String, Json>),
}

/// An error that script code raised.
struct Raised {
    /// The error, rendered with its location.
    rendered: String,
    /// The message the script gave `fail(...)`, when that is what raised: the script stopped
    /// itself, which the frame tells from an error in its code.
    fail: Option<String>,
}

impl Raised {
    fn of(e: &starlark::Error) -> Raised {
        let fail = match e.kind() {
            starlark::ErrorKind::Fail(message) => Some(message.to_string().trim().to_string()),
            _ => None,
        };
        Raised {
            rendered: render(e),
            fail,
        }
    }

    fn other(rendered: String) -> Raised {
        Raised {
            rendered,
            fail: None,
        }
    }
}

/// Calls `callee` in a fresh module whose step builtins reach `ctx`, and renders a failure
/// with its location.
///
/// starlark raises its tick and heap limits without a location. Evaluation is
/// deterministic over the steps recorded in `ctx` (which by then hold every step that ran),
/// so on such an error the call is made a second time with a statement hook: it replays
/// those steps and stops at the same place, and the last statement is the location. The
/// hook slows evaluation, so only that second pass pays for it.
fn call_with_steps(
    ctx: &StepContext<'_>,
    callee: &OwnedFrozenValue,
    args: &Arguments<'_>,
) -> Result<Json, Raised> {
    let call_once = |last: Option<&LastStatement>| {
        let _budget = ctx.limits.budget();
        overflow_as_limit(ctx.limits, || {
            Module::with_temp_heap(|module| {
                let printer = StepPrinter { ctx };
                let mut eval = Evaluator::new(&module);
                eval.extra = Some(ctx);
                eval.set_print_handler(&printer);
                apply_limits(&mut eval, ctx.limits)?;
                // Before the statement hook: at the statement that went past the limit,
                // that hook has not noted the one that would follow.
                MemoryCheck::watch(&mut eval, ctx.limits);
                if let Some(last) = last {
                    last.watch(&mut eval);
                }
                let heap = module.heap();
                let callee = heap.access_owned_frozen_value(callee);
                let returned = match args {
                    Arguments::Request(request) => eval
                        .eval_function(callee, &[heap.alloc(*request)], &[])
                        .map(|_| Ok(Json::Null)),
                    Arguments::Keywords(kwargs) => {
                        let named = keyword_values(heap, kwargs);
                        eval.eval_function(callee, &[], &named).map(|v| {
                            if v.is_none() {
                                Ok(Json::Null)
                            } else {
                                json_of(v, "the value a tool returns").map_err(|e| e.to_string())
                            }
                        })
                    }
                };
                Ok::<_, String>(returned)
            })
        })
        .unwrap_or_else(|limit| Ok(Err(limit)))
    };
    match call_once(None).map_err(Raised::other)? {
        Ok(value) => value.map_err(Raised::other),
        Err(e) if is_limit(&e) && ctx.interrupt.borrow().is_none() => {
            ctx.cursor.set(0);
            let last = LastStatement::default();
            let _ = call_once(Some(&last));
            *ctx.interrupt.borrow_mut() = None;
            Err(Raised::other(render(&last.locate(e))))
        }
        Err(e) => Err(Raised::of(&e)),
    }
}

/// A call of one function of a module outside any run: how `mekara serve` calls a tool.
/// The call gets a fresh step context over a journal that lives only as long as the call,
/// so the ordinary step builtins work in it: auto steps run, `llm()` and `call_script()`
/// suspend (and the caller decides what a suspension means for it).
pub(crate) struct DirectCall<'a> {
    /// The loaded module.
    pub module: &'a FrozenModule,
    /// The function's name in the module.
    pub function: &'a str,
    /// Its keyword arguments, as JSON.
    pub kwargs: &'a Map<String, Json>,
    /// The folder relative paths of shell steps are taken from.
    pub working_dir: &'a Path,
    /// Runs shell steps.
    pub runner: &'a dyn StepRunner,
    /// Stops a running step.
    pub cancel: &'a CancelToken,
    /// Timeout of shell steps that do not set one.
    pub default_timeout: Duration,
    /// Evaluation bounds.
    pub limits: &'a Limits,
}

/// How a [`DirectCall`] ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) enum Called {
    /// The function returned this value (`None` as `null`).
    Returned(Json),
    /// A step asked for the agent or another script.
    Suspended(Suspension),
    /// A step failed without `allow_failure`, or the function raised an error (with its
    /// traceback).
    Failed(String),
}

/// Calls `call.function` with `call.kwargs` in a fresh step context (see [`DirectCall`]).
pub(crate) fn call_directly(call: DirectCall<'_>) -> Result<Called, EngineError> {
    let DirectCall {
        module,
        function,
        kwargs,
        working_dir,
        runner,
        cancel,
        default_timeout,
        limits,
    } = call;
    let Ok(callee) = module.get(function) else {
        return Ok(Called::Failed(format!(
            "the module defines no function `{function}`"
        )));
    };
    // Nothing outlives the call, so the journal is a vector that is dropped with it.
    let (mut steps, mut printed) = (Vec::new(), 0);
    let mut forget = |_: &StepRecord| Ok(());
    // A served tool cannot hand an llm step to anyone (it is refused), so the tags of its
    // prompt are not the author's to call: the run has no `source`.
    let run = FrameRun::new(
        function,
        working_dir,
        &mut steps,
        &mut printed,
        &mut forget,
        runner,
        cancel,
        limits,
    )
    .default_timeout(default_timeout);
    let (ctx, ..) = run.into_context();
    let result = call_with_steps(&ctx, &callee, &Arguments::Keywords(kwargs));
    match (result, ctx.interrupt.take()) {
        (_, Some(Interrupt::Engine(e))) => Err(e),
        (_, Some(Interrupt::Suspend(s))) => Ok(Called::Suspended(s)),
        // A served tool has no agent to hand the group's llm steps to.
        (_, Some(Interrupt::Tasks { .. })) => Ok(Called::Failed(
            "the tool reached `llm()` steps inside `parallel`, but served tools cannot hand work to the agent; move them into a compiled script".to_string(),
        )),
        (_, Some(Interrupt::StepFailed(message))) => Ok(Called::Failed(message)),
        (Err(raised), None) => Ok(Called::Failed(raised.rendered)),
        (Ok(value), None) => Ok(Called::Returned(value)),
    }
}
