//! The process's allocator, and the memory budget of a Starlark evaluation.
//!
//! starlark checks its heap limit every thousand or so instructions, after the fact: one
//! loop of forty statements, or one expression (`"x" * 2147483647`), can take gigabytes
//! before the next check. [`Allocator`] wraps the system allocator and counts, per thread,
//! the bytes allocated (net of those freed) while a [`Budget`] is held there:
//!
//! - [`Budget::spent`] is read before every statement of the evaluation, which fails with
//!   the heap limit at the statement that went past it (see `engine::compiled`);
//! - an allocation that would take the count past the budget's hard cap is refused (null).
//!   starlark 0.14 cannot recover from a refused allocation (its arena and the standard
//!   collections it builds call `handle_alloc_error`, which aborts the process), so a
//!   refusal says why on stderr first, naming the statement ([`Statement`]): it bounds
//!   what one statement can take, at the price of the process, which is why scripts are
//!   evaluated in a child process (`engine::compiled::child`; docs/design.md, "Memory of a
//!   script");
//! - an allocation under a budget that the system refuses (the machine has no more, or a
//!   limit on the process: the evaluator child's Job Object on Windows) says so the same
//!   way: starlark aborts there as at the cap.
//!
//! An allocator must not unwind, and must not allocate: the counts are thread-local cells.
#![allow(unsafe_code)] // A global allocator is an `unsafe` trait; this one only adds counts.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::fmt::Write as _;

use starlark::codemap::FileSpan;

/// The system allocator, counting what a thread allocates under a [`Budget`].
pub struct Allocator;

thread_local! {
    /// The statement the evaluation on this thread runs (see [`Statement`]).
    static STATEMENT: Cell<Option<*const FileSpan>> = const { Cell::new(None) };
    /// The bytes this thread may still hold under its budget's hard cap (`None`: no budget).
    static LEFT: Cell<Option<isize>> = const { Cell::new(None) };
    /// The hard cap of this thread's budget.
    static CAP: Cell<isize> = const { Cell::new(0) };
}

/// Charges `bytes` to this thread's budget, if it has one; false if they do not fit
/// (nothing is charged then).
fn charge(bytes: usize) -> bool {
    LEFT.try_with(|left| match left.get() {
        None => true,
        Some(have) => {
            let want = isize::try_from(bytes).unwrap_or(isize::MAX);
            if want > have {
                // Over the cap once: the process stops, so no later allocation is refused
                // (the message, the abort) and the message is written once.
                left.set(None);
                say_refused(bytes, CAP.try_with(Cell::get).unwrap_or(0));
                false
            } else {
                left.set(Some(have - want));
                true
            }
        }
    })
    .unwrap_or(true)
}

/// The statement an evaluation on this thread runs, noted so that a refusal names it: the
/// statement hook sets it before each statement. The allocator reads it through a pointer
/// (it must not allocate, so it cannot hold a clone); this type keeps that sound by owning
/// the span at an address of its own, taking the note back before it changes or drops the
/// span, and staying on its thread (it is neither `Send` nor `Sync`).
pub(crate) struct Statement {
    /// The span, boxed so that its address stays when the `Statement` moves.
    span: Box<Option<FileSpan>>,
    _on_this_thread: std::marker::PhantomData<*const ()>,
}

impl Statement {
    /// No statement yet.
    pub(crate) fn new() -> Statement {
        Statement {
            span: Box::new(None),
            _on_this_thread: std::marker::PhantomData,
        }
    }

    /// The statement set last.
    pub(crate) fn get(&self) -> Option<&FileSpan> {
        self.span.as_ref().as_ref()
    }

    /// Sets `span` as the statement this thread's evaluation runs, and notes it. Called
    /// before every statement: the file is cloned only when it changes.
    pub(crate) fn set(&mut self, span: starlark::codemap::FileSpanRef) {
        note(None);
        match self.span.as_mut() {
            Some(last) if last.file == *span.file => last.span = span.span,
            last => *last = Some(span.to_file_span()),
        }
        note(self.get());
    }
}

impl Drop for Statement {
    fn drop(&mut self) {
        note(None);
    }
}

/// Notes `statement` as the one a refusal names (`None`: none). Only [`Statement`] notes,
/// and only spans it owns.
fn note(statement: Option<&FileSpan>) {
    let _ = STATEMENT.try_with(|cell| cell.set(statement.map(std::ptr::from_ref)));
}

/// Writes where the statement noted last is, as `file:line:col` and its text, without
/// allocating.
fn write_statement(out: &mut Text) {
    let Some(at) = STATEMENT.try_with(Cell::get).ok().flatten() else {
        return;
    };
    // SAFETY: only a `Statement` notes, a span it owns; it takes the note back before it
    // changes or drops that span, and never leaves this thread: the span noted is alive
    // and unchanged.
    let at = unsafe { &*at };
    let begin = at.file.resolve_span(at.span).begin;
    let _ = write!(
        out,
        "\n --> {}:{}:{}\n  | {}",
        at.file.filename(),
        begin.line + 1,
        begin.column + 1,
        at.file.source_line(begin.line).trim()
    );
}

/// The first line of the message of a refusal: a child evaluation's parent finds it in the
/// child's stderr (see `engine::compiled::child`).
pub(crate) const REFUSED: &str = "error: a statement of the Starlark script asked for";

/// The last line of the message of a refusal, which only a process that stops with it says.
pub(crate) const STOPS: &str =
    "mekara stops here; the run is kept: fix the script, then resume the run";

/// Says on stderr, without allocating, why the allocation that follows fails.
fn say_refused(bytes: usize, cap: isize) {
    let mut text = Text::default();
    let _ = write!(
        text,
        "{REFUSED} {bytes} bytes at once, past the memory cap of an evaluation ({cap} bytes: four times the heap limit)"
    );
    say_stop(text);
}

/// The system refused `bytes` to a thread under a budget, within its cap: the machine has
/// no more, or a limit on the process (Windows' Job of an evaluator child, a `ulimit -v`)
/// was reached. starlark aborts as at the cap, so the refusal says why as it does (once: the
/// budget is gone after it), and the parent makes it the script's failure.
fn system_refused(bytes: usize) {
    let Ok(Some(left)) = LEFT.try_with(|left| left.replace(None)) else {
        return;
    };
    let cap = CAP.try_with(Cell::get).unwrap_or(0);
    let mut text = Text::default();
    let _ = write!(
        text,
        "{REFUSED} {bytes} bytes at once, which the system refused: the evaluation held {} bytes, under its memory cap ({cap} bytes), and the system gives the evaluator no more",
        cap.saturating_sub(left)
    );
    say_stop(text);
}

/// Ends `text` with the statement and [`STOPS`], and writes it to stderr.
fn say_stop(mut text: Text) {
    write_statement(&mut text);
    let _ = writeln!(text, "\n{STOPS}");
    write_stderr(&text.bytes[..text.len]);
}

/// Writes `bytes` to stderr without allocating: the descriptor itself on Unix.
#[cfg(unix)]
fn write_stderr(bytes: &[u8]) {
    use std::os::fd::AsFd as _;
    // `stderr()` is a handle to a static (nothing allocated), and its descriptor is written
    // to without taking its lock.
    let stderr = std::io::stderr();
    let _ = rustix::io::write(stderr.as_fd(), bytes);
}

/// Writes `bytes` to stderr without allocating: std's stderr is unbuffered, and turns text
/// for a console into UTF-16 in a buffer on the stack.
#[cfg(windows)]
fn write_stderr(bytes: &[u8]) {
    let _ = std::io::Write::write_all(&mut std::io::stderr(), bytes);
}

/// A few lines of text on the stack (the allocator must not allocate); what does not fit is cut.
struct Text {
    bytes: [u8; 1024],
    len: usize,
}

impl Default for Text {
    fn default() -> Self {
        Text {
            bytes: [0; 1024],
            len: 0,
        }
    }
}

impl std::fmt::Write for Text {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        let end = (self.len + s.len()).min(self.bytes.len());
        self.bytes[self.len..end].copy_from_slice(&s.as_bytes()[..end - self.len]);
        self.len = end;
        Ok(())
    }
}

/// Gives `bytes` back to this thread's budget, if it has one, up to its cap: memory
/// allocated before the budget and freed under it gives the budget nothing to spend.
fn credit(bytes: usize) {
    let _ = LEFT.try_with(|left| {
        if let Some(have) = left.get() {
            let back = isize::try_from(bytes).unwrap_or(isize::MAX);
            let cap = CAP.try_with(Cell::get).unwrap_or(0);
            left.set(Some(have.saturating_add(back).min(cap)));
        }
    });
}

// SAFETY: every call goes to `System` with the caller's own arguments; the counting only
// reads and writes thread-local cells that need no allocation (const-initialised, no
// destructor), and a refusal returns null, which callers must handle.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !charge(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: the caller's contract for `alloc` holds for `System` too.
        let p = unsafe { System.alloc(layout) };
        if p.is_null() {
            credit(layout.size());
            system_refused(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !charge(layout.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if p.is_null() {
            credit(layout.size());
            system_refused(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        credit(layout.size());
        // SAFETY: `ptr` came from `System` with `layout` (every allocation goes there).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let old = layout.size();
        if new_size > old && !charge(new_size - old) {
            return std::ptr::null_mut();
        }
        // SAFETY: as for `dealloc`, and the caller's contract for `realloc`.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        match (p.is_null(), new_size > old) {
            (true, true) => {
                credit(new_size - old);
                system_refused(new_size);
            }
            (false, false) => credit(old - new_size),
            _ => {}
        }
        p
    }
}

/// A memory budget on the current thread, from [`Budget::enter`] until it is dropped.
/// Budgets do not nest: under one, another is the same one.
pub(crate) struct Budget {
    /// Whether this one set the thread's budget (and so clears it).
    outer: bool,
}

impl Budget {
    /// Lets this thread allocate at most `cap` bytes (net of what it frees) until the
    /// budget is dropped, if it has no budget yet.
    pub(crate) fn enter(cap: usize) -> Budget {
        let cap = isize::try_from(cap).unwrap_or(isize::MAX);
        let outer = LEFT.with(|left| {
            if left.get().is_some() {
                return false;
            }
            left.set(Some(cap));
            CAP.with(|c| c.set(cap));
            true
        });
        Budget { outer }
    }

    /// The bytes this thread holds under its budget (net of what it freed), if it has one.
    pub(crate) fn spent() -> Option<usize> {
        let left = LEFT.with(Cell::get)?;
        let cap = CAP.with(Cell::get);
        Some(usize::try_from(cap.saturating_sub(left)).unwrap_or(0))
    }
}

impl Drop for Budget {
    fn drop(&mut self) {
        if self.outer {
            LEFT.with(|left| left.set(None));
        }
    }
}

/// Whether a panic with `message` is starlark refusing a value of 4 GiB or more (its sizes
/// are 32-bit), which it checks with an assertion before it allocates: under a [`Budget`],
/// that is the heap limit, not a bug.
pub(crate) fn is_size_overflow(message: &str) -> bool {
    ["AlignedSize must not exceed u32::MAX", "len overflow"].contains(&message)
}

/// Keeps the panic hook from printing the panics of [`is_size_overflow`] raised under a
/// budget: the evaluation reports them as the heap limit, with the script's line.
pub(crate) fn quiet_size_overflows() {
    let print = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let message = crate::display::panic_message(info.payload());
        let expected = Budget::spent().is_some() && is_size_overflow(message);
        if !expected {
            print(info);
        }
    }));
}

/// Hands memory the process has freed back to the system where the allocator keeps it:
/// glibc keeps freed blocks, large ones too once its mmap threshold has grown, for later
/// allocations, so a process that once held a whole journal would go on holding its size.
/// Called after such a peak (the viewer, once a request that read a journal is answered).
pub(crate) fn give_back_freed() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        unsafe extern "C" {
            fn malloc_trim(pad: usize) -> std::ffi::c_int;
        }
        // SAFETY: `malloc_trim` takes no pointer and only returns free pages of glibc's
        // own heaps to the kernel; it is safe to call from any thread at any time.
        unsafe {
            malloc_trim(0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Budget, charge, credit};

    #[test]
    fn memory_freed_under_a_budget_that_it_did_not_charge_gives_it_nothing() {
        let _budget = Budget::enter(1000);
        assert!(charge(400));
        // 400 bytes charged, and 5,000 the thread held before the budget, freed.
        credit(5400);
        assert_eq!(Budget::spent(), Some(0));
        assert!(charge(900));
        assert_eq!(Budget::spent(), Some(900));
    }
}
