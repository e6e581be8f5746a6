//! A compiled script loaded in this process ([`Program`]), and its evaluation: `execute`
//! over a frame's journal ([`evaluate_counted`]), or one function called outside any run
//! ([`call_directly`], how `mekara serve` calls a tool).

use std::path::Path;
use std::time::Duration;

use serde_json::{Map, Value as Json};
use starlark::environment::{FrozenModule, Module};
use starlark::eval::Evaluator;
use starlark::values::OwnedFrozenValue;

use super::context::{Interrupt, StepContext, StepPrinter};
use super::diagnostics::{
    CodeError, LastStatement, MemoryCheck, is_limit, overflow_as_limit, render,
};
use super::evaluation::{Called, Evaluation};
use super::frame_run::FrameRun;
use super::limits::{Limits, apply_limits};
use super::modules::{FindModule, ModuleGraph};
use super::static_check;
use super::values::{json_of, keyword_values};
use crate::engine::error::EngineError;
use crate::engine::runner::{CancelToken, StepRunner};
use crate::engine::step::StepRecord;

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

/// Evaluates `program` over the frame's journal until it completes, fails or suspends,
/// with how many of the frame's steps the evaluation went through (replayed
/// or new) when it stopped: a rewind compares it with the steps the journal recorded.
pub(super) fn evaluate_counted(
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
