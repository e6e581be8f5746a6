//! Compiled scripts: loading a `.star` file, and evaluating `execute(request)` over the
//! journal of a frame (DESIGN §3).
//!
//! Evaluation always starts from the top. Each step builtin takes the next journal entry
//! when there is one (checking that it asks for the recorded input), and past the end of
//! the journal it either runs now and appends its result (auto steps) or suspends the
//! evaluation (llm steps, script calls). Suspending is an error that unwinds the
//! interpreter: Starlark cannot catch errors, so nothing in the script can swallow it.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::Path;
use std::rc::Rc;
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Map, Value as Json};
use starlark::any::ProvidesStaticType;
use starlark::codemap::{FileSpan, Pos, Span};
use starlark::environment::{FrozenModule, Globals, GlobalsBuilder, LibraryExtension, Module};
use starlark::eval::{BeforeStmtFunc, BeforeStmtFuncDyn, Evaluator};
use starlark::starlark_module;
use starlark::syntax::{AstModule, Dialect, DialectTypes};
use starlark::values::OwnedFrozenValue;
use starlark::values::dict::{AllocDict, DictRef};
use starlark::values::list::{AllocList, ListRef};
use starlark::values::structs::AllocStruct;
use starlark::values::{Heap, Value};

use super::error::EngineError;
use super::group_note::GroupNote;
use super::journal::JournalError;
use super::observer::Observer;
use super::shell::{CancelToken, Ran, ShellStep, StepRunner};
use super::step::{StepInput, StepRecord, StepResult};
use super::tool::{self, ToolCall};

/// Bounds on one evaluation, so a runaway script fails with its location instead of
/// hanging or eating the machine.
#[derive(Debug, Clone)]
pub struct Limits {
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
pub struct Program {
    module: FrozenModule,
    origin: String,
}

/// An error in a script's code, rendered with `file:line:col` and the source snippet.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct CodeError {
    /// The rendered error.
    pub message: String,
}

impl CodeError {
    fn new(message: impl Into<String>) -> CodeError {
        CodeError {
            message: message.into(),
        }
    }
}

/// `starlark::Error` does not implement `std::error::Error`; it is rendered by hand,
/// keeping its location and snippet. The traceback's outermost frame is mekara calling the
/// script's function (`File <builtin>, in <module>`), which says nothing to the script's
/// author, so it is left out.
fn render(e: &starlark::Error) -> String {
    let text = format!("{e}");
    let kept: Vec<&str> = text
        .lines()
        .filter(|line| line.trim() != "File <builtin>, in <module>")
        .collect();
    kept.join("\n").trim_end().to_string()
}

/// starlark 0.14 reports an error at the very end of a file that ends with a newline (such
/// as the newline it makes up when the file ends inside brackets) at a position it then
/// resolves as `1:1`, with an empty snippet. Such an error is moved to where the file's text
/// ends, and says that it is the end of the file.
fn at_end_of_file(e: starlark::Error, source: &str) -> starlark::Error {
    let Some(span) = e.span() else {
        return e;
    };
    let text_end = source.trim_end().len();
    let (begin, end) = (
        span.span.begin().get() as usize,
        span.span.end().get() as usize,
    );
    if begin != end || begin <= text_end || text_end == 0 {
        return e;
    }
    let at = Pos::new(u32::try_from(text_end).unwrap_or(0));
    let file = span.file.clone();
    let mut moved = starlark::Error::new_other(anyhow::anyhow!(
        "{}; the file ends with a bracket, string or block still open",
        e.without_diagnostic()
    ));
    moved.set_span(Span::new(at, at), &file);
    moved
}

/// Whether `e` is starlark's tick or heap limit, which it raises without a location.
fn is_limit(e: &starlark::Error) -> bool {
    let text = e.without_diagnostic().to_string();
    text.starts_with("Execution duration limit of") || text.starts_with("Heap memory limit of")
}

/// The statement that ran last in an evaluation, noted by a `before_stmt` hook.
#[derive(Default, Clone)]
struct LastStatement(Rc<RefCell<Option<FileSpan>>>);

impl LastStatement {
    /// Starts noting the statements `eval` runs. Only for the second evaluation that finds
    /// where a limit was hit: the hook runs before every instruction, which slows evaluation
    /// down.
    fn watch(&self, eval: &mut Evaluator<'_, '_, '_>) {
        // `before_stmt_for_dap` is starlark's only way to see statements as they run.
        eval.before_stmt_for_dap(BeforeStmtFunc::Dyn(Box::new(self.clone())));
    }

    /// Puts the noted statement's location on a limit error that has none.
    fn locate(&self, mut e: starlark::Error) -> starlark::Error {
        if let Some(span) = self.0.borrow().as_ref() {
            e.set_span(span.span, &span.file);
        }
        e
    }
}

impl<'e> BeforeStmtFuncDyn<'e> for LastStatement {
    fn call<'v>(
        &mut self,
        span: starlark::codemap::FileSpanRef,
        _continued: bool,
        _eval: &mut Evaluator<'v, '_, 'e>,
    ) -> starlark::Result<()> {
        *self.0.borrow_mut() = Some(span.to_file_span());
        Ok(())
    }
}

/// A function's keyword arguments, from JSON to values on `heap`.
fn keyword_values<'v, 'k>(
    heap: Heap<'v>,
    kwargs: &'k Map<String, Json>,
) -> Vec<(&'k str, Value<'v>)> {
    kwargs
        .iter()
        .map(|(k, v)| (k.as_str(), alloc_json(heap, v)))
        .collect()
}

/// The Starlark dialect of compiled scripts: Python-like `def`, lambdas, keyword-only
/// arguments, type annotations and f-strings; no `load` (scripts are single files).
pub fn dialect() -> Dialect {
    Dialect {
        enable_f_strings: true,
        enable_keyword_only_arguments: true,
        enable_types: DialectTypes::Enable,
        ..Dialect::Standard
    }
}

/// The global environment: the standard library, `json`, `struct`, `print` and the step
/// builtins.
pub fn globals() -> &'static Globals {
    static GLOBALS: OnceLock<Globals> = OnceLock::new();
    GLOBALS.get_or_init(|| {
        GlobalsBuilder::extended_by(&[
            LibraryExtension::StructType,
            LibraryExtension::RecordType,
            LibraryExtension::EnumType,
            LibraryExtension::Map,
            LibraryExtension::Filter,
            LibraryExtension::Partial,
            LibraryExtension::Print,
            LibraryExtension::Json,
            LibraryExtension::Typing,
            LibraryExtension::SetType,
        ])
        .with(step_builtins)
        .build()
    })
}

impl Program {
    /// Parses `source` and runs its top level, which may only define things: step builtins
    /// refuse to run there. `origin` names the file in error locations.
    pub fn load(origin: &str, source: &str, limits: &Limits) -> Result<Program, CodeError> {
        let ast = AstModule::parse(origin, source.to_string(), &dialect())
            .map_err(|e| CodeError::new(render(&at_end_of_file(e, source))))?;
        let module = freeze_module(origin, ast, limits)?;
        match module.get_option("execute") {
            Ok(Some(f)) if f.value().get_type() == "function" => Ok(Program {
                module,
                origin: origin.to_string(),
            }),
            Ok(Some(f)) => Err(CodeError::new(format!(
                "error: `execute` must be a function, but it is a `{}`\n --> {origin}\nhint: define `def execute(request):`",
                f.value().get_type()
            ))),
            _ => Err(CodeError::new(format!(
                "error: the script defines no `execute` function\n --> {origin}\nhint: define `def execute(request):`; mekara calls it with the script's arguments"
            ))),
        }
    }

    /// The file this program came from.
    pub fn origin(&self) -> &str {
        &self.origin
    }
}

/// Runs a parsed module's top level (where step builtins refuse to run) and freezes it.
pub fn freeze_module(
    origin: &str,
    ast: AstModule,
    limits: &Limits,
) -> Result<FrozenModule, CodeError> {
    Module::with_temp_heap(|module| -> Result<FrozenModule, CodeError> {
        {
            let printer = LogPrinter;
            let mut eval = Evaluator::new(&module);
            eval.set_print_handler(&printer);
            apply_limits(&mut eval, limits).map_err(CodeError::new)?;
            eval.eval_module(ast, globals())
                .map_err(|e| CodeError::new(render(&e)))?;
        }
        module
            .freeze()
            .map_err(|e| CodeError::new(format!("{origin}: {e:?}")))
    })
}

fn apply_limits(eval: &mut Evaluator<'_, '_, '_>, limits: &Limits) -> Result<(), String> {
    eval.set_max_tick_count(limits.max_ticks)
        .and_then(|()| eval.set_max_heap_size(limits.max_heap_bytes))
        .and_then(|()| eval.set_max_callstack_size(limits.max_call_depth))
        .map_err(|e| format!("cannot set evaluation limits: {e}"))
}

/// Where a suspended evaluation stopped: what the frame needs before it can go on.
#[derive(Debug, Clone, PartialEq)]
pub enum Suspension {
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
    },
}

/// How an evaluation ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Evaluation {
    /// The frame waits for the agent or a nested script.
    Suspended(Suspension),
    /// `execute` returned.
    Completed,
    /// A step failed without `allow_failure`, or the script raised an error.
    Failed(String),
}

/// Everything an evaluation needs from the executor.
pub struct FrameRun<'a> {
    /// The frame's stack path, for messages and the observer.
    pub path: &'a str,
    /// The script's arguments, passed to `execute`.
    pub request: &'a str,
    /// The folder relative paths are taken from.
    pub working_dir: &'a Path,
    /// The frame's journal: replayed, then appended to.
    pub steps: &'a mut Vec<StepRecord>,
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
}

/// Appends a step to the run's journal.
pub type JournalWriter<'a> = dyn FnMut(&StepRecord) -> Result<(), JournalError> + 'a;

/// Why the interpreter was unwound by a builtin.
enum Interrupt {
    Suspend(Suspension),
    StepFailed(String),
    Engine(EngineError),
}

use context_type::StepContext;

mod context_type {
    //! Separate only so that the `unsafe impl` written by the `ProvidesStaticType` derive
    //! (needed to reach the context through `Evaluator::extra`) is allowed here and nowhere
    //! else.
    #![allow(unsafe_code)]

    use super::*;

    #[derive(ProvidesStaticType)]
    pub(super) struct StepContext<'a> {
        pub(super) path: &'a str,
        pub(super) working_dir: &'a Path,
        pub(super) steps: RefCell<Vec<StepRecord>>,
        pub(super) cursor: Cell<usize>,
        pub(super) journal: RefCell<&'a mut JournalWriter<'a>>,
        pub(super) runner: &'a dyn StepRunner,
        pub(super) group_note: Option<&'a GroupNote>,
        pub(super) observer: &'a dyn Observer,
        pub(super) cancel: &'a CancelToken,
        pub(super) default_timeout: Duration,
        pub(super) limits: &'a Limits,
        pub(super) interrupt: RefCell<Option<Interrupt>>,
        /// `print` output of the running function step; `None` outside one.
        pub(super) capture: RefCell<Option<String>>,
    }
}

/// Evaluates `program` over the frame's journal until it completes, fails or suspends.
pub fn evaluate(program: &Program, run: FrameRun<'_>) -> Result<Evaluation, EngineError> {
    let FrameRun {
        path,
        request,
        working_dir,
        steps,
        journal,
        runner,
        group_note,
        observer,
        cancel,
        default_timeout,
        limits,
    } = run;
    let ctx = StepContext {
        path,
        working_dir,
        steps: RefCell::new(std::mem::take(steps)),
        cursor: Cell::new(0),
        journal: RefCell::new(journal),
        runner,
        group_note,
        observer,
        cancel,
        default_timeout,
        limits,
        interrupt: RefCell::new(None),
        capture: RefCell::new(None),
    };
    let execute = program
        .module
        .get("execute")
        .map_err(|e| EngineError::Diverged {
            script: path.to_string(),
            index: 0,
            detail: format!("the script lost its `execute` function: {e}"),
        })?;
    let result = call_with_steps(&ctx, &execute, &Arguments::Request(request));
    let cursor = ctx.cursor.get();
    let interrupt = ctx.interrupt.take();
    *steps = ctx.steps.into_inner();
    match (result, interrupt) {
        (_, Some(Interrupt::Engine(e))) => Err(e),
        (_, Some(Interrupt::Suspend(s))) => Ok(Evaluation::Suspended(s)),
        (_, Some(Interrupt::StepFailed(message))) => Ok(Evaluation::Failed(message)),
        (Err(message), None) => Ok(Evaluation::Failed(message)),
        (Ok(_), None) if cursor < steps.len() => Err(EngineError::Diverged {
            script: path.to_string(),
            index: cursor,
            detail: format!(
                "the script now ends after {cursor} steps, but the journal has {}",
                steps.len()
            ),
        }),
        (Ok(_), None) => Ok(Evaluation::Completed),
    }
}

/// What a function is called with by [`call_with_steps`].
enum Arguments<'a> {
    /// `execute(request)`; what it returns is not used.
    Request(&'a str),
    /// A served function's keyword arguments; what it returns is the result, as JSON.
    Keywords(&'a Map<String, Json>),
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
) -> Result<Json, String> {
    let call_once = |last: Option<&LastStatement>| {
        Module::with_temp_heap(|module| {
            let printer = StepPrinter { ctx };
            let mut eval = Evaluator::new(&module);
            eval.extra = Some(ctx);
            eval.set_print_handler(&printer);
            apply_limits(&mut eval, ctx.limits)?;
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
    };
    match call_once(None)? {
        Ok(value) => value,
        Err(e) if is_limit(&e) && ctx.interrupt.borrow().is_none() => {
            ctx.cursor.set(0);
            let last = LastStatement::default();
            let _ = call_once(Some(&last));
            *ctx.interrupt.borrow_mut() = None;
            Err(render(&last.locate(e)))
        }
        Err(e) => Err(render(&e)),
    }
}

/// A call of one function of a module outside any run: how `mekara serve` calls a tool.
/// The call gets a fresh step context over a journal that lives only as long as the call,
/// so the ordinary step builtins work in it: auto steps run, `llm()` and `call_script()`
/// suspend (and the caller decides what a suspension means for it).
pub struct DirectCall<'a> {
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
#[derive(Debug, Clone, PartialEq)]
pub enum Called {
    /// The function returned this value (`None` as `null`).
    Returned(Json),
    /// A step asked for the agent or another script.
    Suspended(Suspension),
    /// A step failed without `allow_failure`, or the function raised an error (with its
    /// traceback).
    Failed(String),
}

/// Calls `call.function` with `call.kwargs` in a fresh step context (see [`DirectCall`]).
pub fn call_directly(call: DirectCall<'_>) -> Result<Called, EngineError> {
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
    let mut forget = |_: &StepRecord| Ok(());
    let journal: &mut JournalWriter<'_> = &mut forget;
    let ctx = StepContext {
        path: function,
        working_dir,
        steps: RefCell::new(Vec::new()),
        cursor: Cell::new(0),
        journal: RefCell::new(journal),
        runner,
        group_note: None,
        observer: &super::observer::Quiet,
        cancel,
        default_timeout,
        limits,
        interrupt: RefCell::new(None),
        capture: RefCell::new(None),
    };
    let result = call_with_steps(&ctx, &callee, &Arguments::Keywords(kwargs));
    match (result, ctx.interrupt.take()) {
        (_, Some(Interrupt::Engine(e))) => Err(e),
        (_, Some(Interrupt::Suspend(s))) => Ok(Called::Suspended(s)),
        (_, Some(Interrupt::StepFailed(message))) => Ok(Called::Failed(message)),
        (Err(message), None) => Ok(Called::Failed(message)),
        (Ok(value), None) => Ok(Called::Returned(value)),
    }
}

/// Sends `print` to the running function step's output; elsewhere to the log.
struct StepPrinter<'c, 'a> {
    ctx: &'c StepContext<'a>,
}

impl starlark::PrintHandler for StepPrinter<'_, '_> {
    fn println(&self, text: &str) -> starlark::Result<()> {
        match self.ctx.capture.borrow_mut().as_mut() {
            Some(buffer) => {
                buffer.push_str(text);
                buffer.push('\n');
                self.ctx.observer.output(format!("{text}\n").as_bytes());
            }
            None => tracing::info!(target: "mekara::print", "{}: {text}", self.ctx.path),
        }
        Ok(())
    }
}

/// `print` while a module loads goes to the log: stdout may belong to a protocol.
struct LogPrinter;

impl starlark::PrintHandler for LogPrinter {
    fn println(&self, text: &str) -> starlark::Result<()> {
        tracing::info!(target: "mekara::print", "{text}");
        Ok(())
    }
}

fn step_context<'a, 'e>(
    eval: &Evaluator<'_, 'a, 'e>,
    builtin: &str,
) -> anyhow::Result<&'a StepContext<'e>> {
    let ctx = eval
        .extra
        .and_then(|e| e.downcast_ref::<StepContext>())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "`{builtin}` can only run while a script runs, inside `execute`; loading a script only defines things"
            )
        })?;
    if ctx.capture.borrow().is_some() {
        anyhow::bail!(
            "`{builtin}` cannot run inside a function step; call it from `execute` (or a plain function it calls) instead"
        );
    }
    Ok(ctx)
}

impl StepContext<'_> {
    /// Stores why the interpreter must unwind, and returns the error that unwinds it.
    fn interrupt(&self, why: Interrupt) -> anyhow::Error {
        *self.interrupt.borrow_mut() = Some(why);
        anyhow::anyhow!("mekara: evaluation interrupted")
    }

    /// The recorded result of the next step, when the journal has one. A recorded step
    /// that asked for something else stops the evaluation.
    fn replay(&self, input: &StepInput) -> anyhow::Result<Option<StepResult>> {
        let index = self.cursor.get();
        let steps = self.steps.borrow();
        let Some(recorded) = steps.get(index) else {
            return Ok(None);
        };
        if recorded.input != *input {
            let detail = input.difference(&recorded.input);
            drop(steps);
            return Err(self.interrupt(Interrupt::Engine(EngineError::Diverged {
                script: self.path.to_string(),
                index,
                detail,
            })));
        }
        self.cursor.set(index + 1);
        Ok(Some(recorded.result.clone()))
    }

    /// Journals a new step, then lets the script see it.
    fn record(
        &self,
        input: StepInput,
        context: Option<String>,
        result: StepResult,
    ) -> anyhow::Result<StepResult> {
        let index = self.cursor.get();
        let record = StepRecord {
            index,
            input,
            context,
            result,
        };
        let written = (self.journal.borrow_mut())(&record);
        if let Err(e) = written {
            return Err(self.interrupt(Interrupt::Engine(e.into())));
        }
        self.observer.step_finished(self.path, &record);
        let result = record.result.clone();
        self.steps.borrow_mut().push(record);
        self.cursor.set(index + 1);
        Ok(result)
    }

    /// Ends an effect that ran as step `index`: journals what it did, or, when it was
    /// cancelled, stops the evaluation without recording anything.
    fn finish(
        &self,
        ran: Ran,
        index: usize,
        input: &StepInput,
        context: Option<String>,
    ) -> anyhow::Result<StepResult> {
        match ran {
            Ran::Done(result) => self.record(input.clone(), context, result),
            Ran::Cancelled => Err(self.interrupt(Interrupt::Engine(EngineError::Cancelled {
                script: self.path.to_string(),
                index,
            }))),
        }
    }

    /// Stops the frame when a step failed and the script did not allow it.
    fn check_failure(
        &self,
        index: usize,
        input: &StepInput,
        result: &StepResult,
        allow_failure: bool,
    ) -> anyhow::Result<()> {
        if result.success || allow_failure {
            return Ok(());
        }
        let error = result.error.as_deref().unwrap_or("failed");
        Err(self.interrupt(Interrupt::StepFailed(format!(
            "step {}[{index}] `{}` failed: {error}",
            self.path,
            input.summary()
        ))))
    }
}

fn json_of(value: Value<'_>, what: &str) -> anyhow::Result<Json> {
    value.to_json_value().map_err(|e| {
        anyhow::anyhow!("{what} must be JSON data (None, bool, int, float, str, list, dict): {e}")
    })
}

/// JSON to Starlark. Written out because starlark's own conversion turns integers too big
/// for 64 bits into floats (serde_json's `arbitrary_precision` keeps their digits).
fn alloc_json<'v>(heap: Heap<'v>, json: &Json) -> Value<'v> {
    match json {
        Json::Number(n) if n.as_i64().is_none() && n.as_u64().is_none() => {
            let digits = n.to_string();
            match digits.parse::<num_bigint::BigInt>() {
                Ok(big) => heap.alloc(big),
                Err(_) => heap.alloc(json.clone()),
            }
        }
        Json::Array(items) => {
            heap.alloc(AllocList(items.iter().map(|item| alloc_json(heap, item))))
        }
        Json::Object(map) => heap.alloc(AllocDict(
            map.iter().map(|(k, v)| (k.as_str(), alloc_json(heap, v))),
        )),
        other => heap.alloc(other.clone()),
    }
}

/// A function's own name: its repr is `<module>.<name>`, and names cannot hold a `.`.
fn function_name(f: Value<'_>) -> String {
    let repr = f.to_repr();
    repr.rsplit('.').next().unwrap_or(&repr).to_string()
}

fn seconds(value: Value<'_>) -> anyhow::Result<Duration> {
    let secs = if let Some(i) = value.unpack_i32() {
        f64::from(i)
    } else if let Ok(Json::Number(n)) = value.to_json_value() {
        n.as_f64().unwrap_or(-1.0)
    } else {
        -1.0
    };
    if !(secs > 0.0 && secs.is_finite()) {
        anyhow::bail!(
            "`timeout` must be a positive number of seconds, got `{}`",
            value.to_repr()
        );
    }
    Ok(Duration::from_secs_f64(secs))
}

fn string_map(value: Value<'_>, what: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let dict = DictRef::from_value(value).ok_or_else(|| {
        anyhow::anyhow!(
            "`{what}` must be a dict of strings, got a value of type `{}`",
            value.get_type()
        )
    })?;
    dict.iter()
        .map(|(k, v)| {
            let key = k.unpack_str().ok_or_else(|| {
                anyhow::anyhow!("`{what}` keys must be strings, got `{}`", k.to_repr())
            })?;
            let value = v.unpack_str().map_or_else(|| v.to_str(), str::to_string);
            Ok((key.to_string(), value))
        })
        .collect()
}

fn result_struct<'v>(heap: Heap<'v>, fields: Vec<(&str, Value<'v>)>) -> Value<'v> {
    heap.alloc(AllocStruct(fields))
}

fn error_value<'v>(heap: Heap<'v>, result: &StepResult) -> Value<'v> {
    match &result.error {
        Some(e) => heap.alloc(e.as_str()),
        None => Value::new_none(),
    }
}

#[starlark_module]
fn step_builtins(builder: &mut GlobalsBuilder) {
    /// Runs an auto step: a shell command, or a function of the script with keyword
    /// arguments. Returns `.success`, `.output`, `.error` and `.exit_code` (shell) or
    /// `.value` (function).
    // The parameters are the user-facing script API, one Rust argument each.
    #[allow(clippy::too_many_arguments)]
    fn auto<'v>(
        #[starlark(require = pos)] step: Value<'v>,
        #[starlark(require = pos)] kwargs: Option<Value<'v>>,
        #[starlark(require = named)] context: Option<&str>,
        #[starlark(require = named)] working_dir: Option<&str>,
        #[starlark(require = named)] timeout: Option<Value<'v>>,
        #[starlark(require = named)] env: Option<Value<'v>>,
        #[starlark(require = named, default = false)] allow_failure: bool,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let ctx = step_context(eval, "auto")?;
        let heap = eval.heap();
        let context = context.map(str::to_string);
        if let Some(command) = step.unpack_str() {
            if kwargs.is_some() {
                anyhow::bail!(
                    "`auto` takes keyword arguments only for a function step; pass `env = {{...}}` to set variables of a command"
                );
            }
            let input = StepInput::Shell {
                command: command.to_string(),
                working_dir: working_dir.map_or_else(
                    || ctx.working_dir.to_path_buf(),
                    |d| ctx.working_dir.join(d),
                ),
                env: env
                    .map(|e| string_map(e, "env"))
                    .transpose()?
                    .unwrap_or_default(),
            };
            let timeout = timeout
                .map(seconds)
                .transpose()?
                .unwrap_or(ctx.default_timeout);
            let index = ctx.cursor.get();
            let result = match ctx.replay(&input)? {
                Some(result) => result,
                None => run_shell(ctx, &input, context, timeout)?,
            };
            ctx.check_failure(index, &input, &result, allow_failure)?;
            let exit_code = result
                .exit_code
                .map_or_else(Value::new_none, |c| heap.alloc(c));
            return Ok(result_struct(
                heap,
                vec![
                    ("success", Value::new_bool(result.success)),
                    ("exit_code", exit_code),
                    ("output", heap.alloc(result.output.as_str())),
                    ("error", error_value(heap, &result)),
                ],
            ));
        }
        if step.get_type() != "function" {
            anyhow::bail!(
                "`auto` takes a shell command (a string) or a function of the script, got a value of type `{}`",
                step.get_type()
            );
        }
        if working_dir.is_some() || timeout.is_some() || env.is_some() {
            anyhow::bail!(
                "`working_dir`, `timeout` and `env` apply to shell commands, not to function steps"
            );
        }
        let kwargs_json = match kwargs {
            None => Map::new(),
            Some(k) if k.is_none() => Map::new(),
            Some(k) => match json_of(k, "the keyword arguments of a function step")? {
                Json::Object(map) => map,
                other => anyhow::bail!(
                    "the keyword arguments of a function step must be a dict, got `{other}`"
                ),
            },
        };
        let input = StepInput::Function {
            function: function_name(step),
            kwargs: kwargs_json,
        };
        let index = ctx.cursor.get();
        let result = match ctx.replay(&input)? {
            Some(result) => result,
            None => {
                ctx.observer
                    .step_started(ctx.path, index, &input, context.as_deref());
                let result = call_function(ctx, eval, step, &input);
                ctx.record(input.clone(), context, result)?
            }
        };
        ctx.check_failure(index, &input, &result, allow_failure)?;
        let value = result
            .value
            .as_ref()
            .map_or_else(Value::new_none, |v| alloc_json(heap, v));
        Ok(result_struct(
            heap,
            vec![
                ("success", Value::new_bool(result.success)),
                ("value", value),
                ("output", heap.alloc(result.output.as_str())),
                ("error", error_value(heap, &result)),
            ],
        ))
    }

    /// Hands a step to the agent: suspends the script until the agent gives the outputs
    /// named in `expects` (a dict of name to description, or a list of names). Returns
    /// `.outputs`, a dict.
    fn llm<'v>(
        #[starlark(require = pos)] prompt: &str,
        #[starlark(require = named)] expects: Option<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let ctx = step_context(eval, "llm")?;
        // Tags become journaled mcp steps before the llm step, so re-deriving the pending
        // step answers them from the journal instead of calling again, and the journal
        // holds what the agent saw.
        let prompt = tool::expand(prompt, |server, tool, arguments| {
            let input = StepInput::Mcp {
                server: server.to_string(),
                tool: tool.to_string(),
                arguments,
            };
            mcp_step(
                ctx,
                &input,
                Some(tool::PROMPT_TAG_CONTEXT.to_string()),
                None,
            )
        })?;
        let prompt = prompt.as_str();
        let expects = match expects {
            None => None,
            Some(v) if v.is_none() => None,
            Some(v) => Some(expects_map(v)?),
        };
        let input = StepInput::Llm {
            prompt: prompt.to_string(),
            expects,
        };
        let Some(result) = ctx.replay(&input)? else {
            let StepInput::Llm { prompt, expects } = input else {
                unreachable!("built above as an llm step");
            };
            return Err(ctx.interrupt(Interrupt::Suspend(Suspension::Llm { prompt, expects })));
        };
        let heap = eval.heap();
        let outputs = Json::Object(result.outputs.unwrap_or_default());
        Ok(result_struct(
            heap,
            vec![
                ("success", Value::new_bool(true)),
                ("outputs", alloc_json(heap, &outputs)),
            ],
        ))
    }

    /// Calls `tool` of MCP server `server` (declared in `.mcp.json`) with `arguments` (a
    /// dict), under the policy of `.mekara/config.toml`. Returns `.success`, `.content`
    /// (the text), `.structured` (the structured content, or `None`), `.is_error` (the
    /// tool said it failed) and `.error`. A failed call stops the script unless
    /// `allow_failure`.
    fn mcp<'v>(
        #[starlark(require = pos)] server: &str,
        #[starlark(require = pos)] tool: &str,
        arguments: Option<Value<'v>>,
        #[starlark(require = named)] context: Option<&str>,
        #[starlark(require = named)] timeout: Option<Value<'v>>,
        #[starlark(require = named, default = false)] allow_failure: bool,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let ctx = step_context(eval, "mcp")?;
        let arguments = match arguments {
            None => Map::new(),
            Some(a) if a.is_none() => Map::new(),
            Some(a) => match json_of(a, "the arguments of an mcp step")? {
                Json::Object(map) => map,
                other => {
                    anyhow::bail!("the arguments of an mcp step must be a dict, got `{other}`")
                }
            },
        };
        let input = StepInput::Mcp {
            server: server.to_string(),
            tool: tool.to_string(),
            arguments,
        };
        let timeout = timeout.map(seconds).transpose()?;
        let index = ctx.cursor.get();
        let result = mcp_step(ctx, &input, context.map(str::to_string), timeout)?;
        ctx.check_failure(index, &input, &result, allow_failure)?;
        let heap = eval.heap();
        let structured = result
            .structured
            .as_ref()
            .map_or_else(Value::new_none, |v| alloc_json(heap, v));
        Ok(result_struct(
            heap,
            vec![
                ("success", Value::new_bool(result.success)),
                ("content", heap.alloc(result.output.as_str())),
                ("structured", structured),
                ("is_error", Value::new_bool(result.is_error)),
                ("error", error_value(heap, &result)),
            ],
        ))
    }

    /// Runs another script (compiled or NL) as a nested frame and waits for it. Returns
    /// `.success` and `.error`. A failed script stops this one unless `allow_failure`.
    fn call_script<'v>(
        #[starlark(require = pos)] name: &str,
        #[starlark(default = "")] request: &str,
        #[starlark(require = named)] working_dir: Option<&str>,
        #[starlark(require = named, default = false)] allow_failure: bool,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Value<'v>> {
        let ctx = step_context(eval, "call_script")?;
        let input = StepInput::Call {
            script: name.to_string(),
            request: request.to_string(),
            working_dir: working_dir.map_or_else(
                || ctx.working_dir.to_path_buf(),
                |d| ctx.working_dir.join(d),
            ),
        };
        let index = ctx.cursor.get();
        let Some(result) = ctx.replay(&input)? else {
            let StepInput::Call {
                script,
                request,
                working_dir,
            } = input
            else {
                unreachable!("built above as a call");
            };
            return Err(ctx.interrupt(Interrupt::Suspend(Suspension::Call {
                script,
                request,
                working_dir,
            })));
        };
        ctx.check_failure(index, &input, &result, allow_failure)?;
        let heap = eval.heap();
        Ok(result_struct(
            heap,
            vec![
                ("success", Value::new_bool(result.success)),
                ("error", error_value(heap, &result)),
            ],
        ))
    }
}

/// The result of an mcp step: from the journal, else by calling the tool now.
fn mcp_step(
    ctx: &StepContext<'_>,
    input: &StepInput,
    context: Option<String>,
    timeout: Option<Duration>,
) -> anyhow::Result<StepResult> {
    if let Some(result) = ctx.replay(input)? {
        return Ok(result);
    }
    let StepInput::Mcp {
        server,
        tool,
        arguments,
    } = input
    else {
        unreachable!("called for mcp steps only");
    };
    let index = ctx.cursor.get();
    ctx.observer
        .step_started(ctx.path, index, input, context.as_deref());
    let call = ToolCall {
        server: server.clone(),
        tool: tool.clone(),
        arguments: arguments.clone(),
        timeout,
    };
    let ran = ctx.runner.call_tool(&call, ctx.cancel);
    if let Ran::Done(result) = &ran
        && !result.output.is_empty()
    {
        ctx.observer.output(result.output.as_bytes());
        if !result.output.ends_with('\n') {
            ctx.observer.output(b"\n");
        }
    }
    ctx.finish(ran, index, input, context)
}

fn expects_map(v: Value<'_>) -> anyhow::Result<Map<String, Json>> {
    if let Some(list) = ListRef::from_value(v) {
        return list
            .iter()
            .map(|item| {
                item.unpack_str()
                    .map(|name| (name.to_string(), Json::String(String::new())))
                    .ok_or_else(|| {
                        anyhow::anyhow!("`expects` names must be strings, got `{}`", item.to_repr())
                    })
            })
            .collect();
    }
    match json_of(v, "`expects`")? {
        Json::Object(map) => Ok(map),
        other => {
            anyhow::bail!("`expects` must be a dict of output name to description, got `{other}`")
        }
    }
}

fn run_shell(
    ctx: &StepContext<'_>,
    input: &StepInput,
    context: Option<String>,
    timeout: Duration,
) -> anyhow::Result<StepResult> {
    let StepInput::Shell {
        command,
        working_dir,
        env,
    } = input
    else {
        unreachable!("called for shell steps only");
    };
    let index = ctx.cursor.get();
    ctx.observer
        .step_started(ctx.path, index, input, context.as_deref());
    let step = ShellStep {
        command: command.clone(),
        working_dir: working_dir.clone(),
        env: env.clone(),
        timeout,
        group_note: ctx.group_note.cloned(),
    };
    let ran = ctx
        .runner
        .run_shell(&step, &mut |chunk| ctx.observer.output(chunk), ctx.cancel);
    ctx.finish(ran, index, input, context)
}

/// Finds where function step `f` hit a limit: it is pure, so it runs again alone, in a
/// fresh evaluator that notes statements.
fn locate_in_function(
    f: Value<'_>,
    kwargs: &Map<String, Json>,
    limits: &Limits,
    e: starlark::Error,
) -> starlark::Error {
    let Some(f) = f.unpack_frozen() else {
        return e;
    };
    let last = LastStatement::default();
    Module::with_temp_heap(|module| {
        let printer = LogPrinter;
        let mut eval = Evaluator::new(&module);
        eval.set_print_handler(&printer);
        if apply_limits(&mut eval, limits).is_ok() {
            last.watch(&mut eval);
            let named = keyword_values(module.heap(), kwargs);
            let _ = eval.eval_function(f.to_value(), &[], &named);
        }
    });
    last.locate(e)
}

/// Calls a script function as a step: its `print`s are the output, its return value (as
/// JSON) the value, an error the failure.
fn call_function<'v>(
    ctx: &StepContext<'_>,
    eval: &mut Evaluator<'v, '_, '_>,
    f: Value<'v>,
    input: &StepInput,
) -> StepResult {
    let StepInput::Function { kwargs, .. } = input else {
        unreachable!("called for function steps only");
    };
    let named = keyword_values(eval.heap(), kwargs);
    *ctx.capture.borrow_mut() = Some(String::new());
    let started = std::time::Instant::now();
    let returned = eval.eval_function(f, &[], &named).map_err(|e| {
        if is_limit(&e) {
            locate_in_function(f, kwargs, ctx.limits, e)
        } else {
            e
        }
    });
    let output = ctx.capture.borrow_mut().take().unwrap_or_default();
    let duration_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
    let (value, error) = match returned {
        Ok(v) if v.is_none() => (None, None),
        Ok(v) => match json_of(v, "the value a function step returns") {
            Ok(json) => (Some(json), None),
            Err(e) => (None, Some(e.to_string())),
        },
        Err(e) => (None, Some(render(&e))),
    };
    StepResult {
        success: error.is_none(),
        output,
        value,
        error,
        duration_ms,
        ..StepResult::default()
    }
}
