//! What a script author reads when their code is wrong: [`CodeError`], the rendering of
//! starlark's errors with their `file:line:col` and snippet, and the location of the tick
//! and heap limits, which starlark raises without one.
//!
//! It renders errors; it does not decide what an error means for the frame (that is the
//! evaluation's, in the parent module).

use std::cell::RefCell;
use std::rc::Rc;

use serde_json::{Map, Value as Json};
use starlark::codemap::{FileSpan, Pos, Span};
use starlark::environment::Module;
use starlark::eval::{BeforeStmtFunc, BeforeStmtFuncDyn, Evaluator};
use starlark::values::Value;

use super::context::LogPrinter;
use super::limits::{Limits, apply_limits};
use super::values::keyword_values;
use crate::memory::{Budget, Statement};

/// An error in a script's code, rendered with `file:line:col` and the source snippet.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub(crate) struct CodeError {
    /// The rendered error.
    pub message: String,
}

impl CodeError {
    pub(super) fn new(message: impl Into<String>) -> CodeError {
        CodeError {
            message: message.into(),
        }
    }
}

/// `starlark::Error` does not implement `std::error::Error`; it is rendered by hand,
/// keeping its location and snippet. The traceback's outermost frame is mekara calling the
/// script's function (`File <builtin>, in <module>`), which says nothing to the script's
/// author, so it is left out, and with it the traceback's header when no frame is left
/// under it (an error at the top of `execute`, such as the heap limit).
pub(super) fn render(e: &starlark::Error) -> String {
    const HEADER: &str = "Traceback (most recent call last):";
    let text = format!("{e}");
    let mut kept: Vec<&str> = text
        .lines()
        .filter(|line| line.trim() != "File <builtin>, in <module>")
        .collect();
    // Frames are indented under the header; the error line that ends them is not.
    if let Some(at) = kept.iter().position(|line| *line == HEADER)
        && !kept.get(at + 1).is_some_and(|next| next.starts_with(' '))
    {
        kept.remove(at);
    }
    kept.join("\n").trim_end().to_string()
}

/// starlark 0.14 reports an error at the very end of a file that ends with a newline (such
/// as the newline it makes up when the file ends inside brackets) at a position it then
/// resolves as `1:1`, with an empty snippet. Such an error is moved to where the file's text
/// ends, and says that it is the end of the file.
pub(super) fn at_end_of_file(e: starlark::Error, source: &str) -> starlark::Error {
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

/// Whether `e` is starlark's tick or heap limit, which it raises without a location
/// (the heap limit of a [`MemoryCheck`] comes with one).
pub(super) fn is_limit(e: &starlark::Error) -> bool {
    let text = e.without_diagnostic().to_string();
    e.span().is_none()
        && (text.starts_with("Execution duration limit of")
            || text.starts_with("Heap memory limit of"))
}

/// Runs `evaluate`, turning starlark's panic on a value of 4 GiB or more (past any heap
/// limit; see [`crate::memory::is_size_overflow`]) into the heap limit error, without a
/// location (it is found as for starlark's own limits). Any other panic goes on.
pub(super) fn overflow_as_limit<T>(
    limits: &Limits,
    evaluate: impl FnOnce() -> T,
) -> Result<T, starlark::Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(evaluate)).map_err(|panic| {
        let message = crate::display::panic_message(panic.as_ref());
        if !crate::memory::is_size_overflow(message) {
            std::panic::resume_unwind(panic);
        }
        starlark::Error::new_other(anyhow::anyhow!(
            "Heap memory limit of {} bytes exceeded: this statement made a value of 4 GiB or more",
            limits.max_heap_bytes
        ))
    })
}

/// The heap limit, checked before every statement against what the evaluating thread
/// holds (see [`crate::memory`]): starlark checks its own only every thousand or so
/// instructions, after a loop of a few statements may have doubled a string thirty times.
/// The statement that ran last is the one that went past the limit, and the error says so.
pub(super) struct MemoryCheck {
    /// The limit, in bytes.
    limit: usize,
    /// The statement that ran last.
    last: Statement,
}

impl MemoryCheck {
    /// Checks the memory of `eval`'s thread against `limits` before every statement.
    pub(super) fn watch(eval: &mut Evaluator<'_, '_, '_>, limits: &Limits) {
        let check = MemoryCheck {
            limit: limits.max_heap_bytes,
            last: Statement::new(),
        };
        eval.before_stmt_for_dap(BeforeStmtFunc::Dyn(Box::new(check)));
    }
}

impl<'e> BeforeStmtFuncDyn<'e> for MemoryCheck {
    fn call<'v>(
        &mut self,
        span: starlark::codemap::FileSpanRef,
        _continued: bool,
        _eval: &mut Evaluator<'v, '_, 'e>,
    ) -> starlark::Result<()> {
        if let Some(spent) = Budget::spent().filter(|&spent| spent > self.limit) {
            let mut e = starlark::Error::new_other(anyhow::anyhow!(
                "Heap memory limit of {} bytes exceeded: this statement took the script's \
                 memory to {spent} bytes",
                self.limit
            ));
            if let Some(last) = self.last.get() {
                e.set_span(last.span, &last.file);
            }
            return Err(e);
        }
        // An allocation this statement makes past the memory cap names it (see `memory`).
        self.last.set(span);
        Ok(())
    }
}

/// The statement that ran last in an evaluation, noted by a `before_stmt` hook.
#[derive(Default, Clone)]
pub(super) struct LastStatement(Rc<RefCell<Option<FileSpan>>>);

impl LastStatement {
    /// Starts noting the statements `eval` runs. Only for the second evaluation that finds
    /// where a limit was hit: the hook runs before every instruction, which slows evaluation
    /// down.
    pub(super) fn watch(&self, eval: &mut Evaluator<'_, '_, '_>) {
        // `before_stmt_for_dap` is starlark's only way to see statements as they run.
        eval.before_stmt_for_dap(BeforeStmtFunc::Dyn(Box::new(self.clone())));
    }

    /// Puts the noted statement's location on a limit error that has none.
    pub(super) fn locate(&self, mut e: starlark::Error) -> starlark::Error {
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

/// Finds where function step `f` hit a limit: it is pure, so it runs again alone, in a
/// fresh evaluator that notes statements.
pub(super) fn locate_in_function(
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

/// Of `names`, the one `wrong` is most likely a misspelling of (for a "did you mean"): the
/// closest by edit distance, when close enough for its length.
pub(super) fn closest<'a>(wrong: &str, names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    names
        .map(|n| (strsim::damerau_levenshtein(wrong, n), n))
        .filter(|(distance, n)| *distance <= (n.len() / 3).max(2))
        .min()
        .map(|(_, n)| n)
}

/// "did you mean `x`?" for the closest of `names` to `wrong`, else all of them.
pub(super) fn closest_or_all<'a>(
    wrong: &str,
    names: impl Iterator<Item = &'a str> + Clone,
    what: &str,
) -> String {
    if let Some(n) = closest(wrong, names.clone()) {
        return format!("did you mean `{n}`?");
    }
    let all: Vec<&str> = names.collect();
    if all.is_empty() {
        format!("it has no {what}")
    } else {
        format!("its {what} are {}", crate::display::quoted(&all))
    }
}
