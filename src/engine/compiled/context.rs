//! The evaluation context: what the step builtins reach through `Evaluator::extra` while a
//! function runs ([`StepContext`]): the frame's journal with its cursor, the runner of
//! effects, the observer, and why the interpreter was unwound ([`Interrupt`]). Also where
//! `print` goes.
//!
//! This is the one place that reads and appends journal entries during an evaluation; it
//! decides nothing about what the script means (that is the builtins').

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::time::Duration;

use starlark::any::ProvidesStaticType;
use starlark::eval::Evaluator;

use super::{Limits, Suspension};
use crate::engine::error::EngineError;
use crate::engine::group_note::GroupNote;
use crate::engine::journal::JournalError;
use crate::engine::observer::Observer;
use crate::engine::runner::{CancelToken, Ran, StepRunner};
use crate::engine::step::{Kept, StepInput, StepRecord, StepResult};

/// Appends a step to the run's journal.
pub(crate) type JournalWriter<'a> = dyn FnMut(&StepRecord) -> Result<(), JournalError> + 'a;

/// Why the interpreter was unwound by a builtin.
pub(super) enum Interrupt {
    Suspend(Suspension),
    StepFailed(String),
    Engine(EngineError),
}

pub(super) use context_type::StepContext;

mod context_type {
    //! Separate only so that the `unsafe impl` written by the `ProvidesStaticType` derive
    //! (needed to reach the context through `Evaluator::extra`) is allowed here and nowhere
    //! else.
    #![allow(unsafe_code)]

    use super::{
        CancelToken, Cell, Duration, GroupNote, Interrupt, JournalWriter, Kept, Limits, Observer,
        Path, ProvidesStaticType, RefCell, StepRecord, StepRunner,
    };

    #[derive(ProvidesStaticType)]
    pub(in crate::engine::compiled) struct StepContext<'a> {
        pub(in crate::engine::compiled) path: &'a str,
        pub(in crate::engine::compiled) working_dir: &'a Path,
        pub(in crate::engine::compiled) steps: RefCell<Vec<StepRecord>>,
        pub(in crate::engine::compiled) cursor: Cell<usize>,
        pub(in crate::engine::compiled) journal: RefCell<&'a mut JournalWriter<'a>>,
        pub(in crate::engine::compiled) runner: &'a dyn StepRunner,
        pub(in crate::engine::compiled) group_note: Option<&'a GroupNote>,
        pub(in crate::engine::compiled) observer: &'a dyn Observer,
        pub(in crate::engine::compiled) cancel: &'a CancelToken,
        pub(in crate::engine::compiled) default_timeout: Duration,
        pub(in crate::engine::compiled) limits: &'a Limits,
        /// The script's source: the author's own text, the only place prompt tags that
        /// call tools may come from (see `tool::expand`).
        pub(in crate::engine::compiled) source: &'a str,
        pub(in crate::engine::compiled) interrupt: RefCell<Option<Interrupt>>,
        /// `print` output of the running function step; `None` outside one.
        pub(in crate::engine::compiled) capture: RefCell<Option<Kept>>,
        /// Prints outside function steps in this evaluation so far.
        pub(in crate::engine::compiled) prints: Cell<usize>,
        /// How many of the frame's prints were reported, in this evaluation or before.
        pub(in crate::engine::compiled) printed: Cell<usize>,
    }
}

/// Sends `print` to the running function step's output; elsewhere to the observer, once.
///
/// Evaluation starts from the top each time, so a print comes again: the same `n`-th print
/// of the frame, since evaluation is deterministic. One the frame reported already (this
/// process counts them), or one made while journaled steps replay (it ran in an earlier
/// process, and was shown there), is not reported again.
pub(super) struct StepPrinter<'c, 'a> {
    pub(super) ctx: &'c StepContext<'a>,
}

impl starlark::PrintHandler for StepPrinter<'_, '_> {
    fn println(&self, text: &str) -> starlark::Result<()> {
        if let Some(buffer) = self.ctx.capture.borrow_mut().as_mut() {
            buffer.push(text.as_bytes());
            buffer.push(b"\n");
            self.ctx.observer.output(format!("{text}\n").as_bytes());
        } else {
            let n = self.ctx.prints.get();
            self.ctx.prints.set(n + 1);
            let replaying = self.ctx.cursor.get() < self.ctx.steps.borrow().len();
            if n >= self.ctx.printed.get() && !replaying {
                self.ctx.observer.print(self.ctx.path, text);
                self.ctx.printed.set(n + 1);
            }
        }
        Ok(())
    }
}

/// `print` while a module loads goes to the log: stdout may belong to a protocol.
pub(super) struct LogPrinter;

impl starlark::PrintHandler for LogPrinter {
    fn println(&self, text: &str) -> starlark::Result<()> {
        tracing::info!(target: "mekara::print", "{text}");
        Ok(())
    }
}

/// The context of the running evaluation, for builtin `builtin`; an error where a step
/// cannot run (while a module loads, inside a function step).
pub(super) fn step_context<'a, 'e>(
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
    pub(super) fn interrupt(&self, why: Interrupt) -> anyhow::Error {
        *self.interrupt.borrow_mut() = Some(why);
        anyhow::anyhow!("mekara: evaluation interrupted")
    }

    /// The recorded result of the next step, when the journal has one. A recorded step
    /// that asked for something else stops the evaluation.
    pub(super) fn replay(&self, input: &StepInput) -> anyhow::Result<Option<StepResult>> {
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
        allow_failure: bool,
        result: StepResult,
    ) -> anyhow::Result<StepResult> {
        let index = self.cursor.get();
        let record = StepRecord {
            index,
            input,
            context,
            result,
            allow_failure,
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

    /// The result of an effect step (a shell command, a function, a tool call): the recorded
    /// one when the journal has it, else what `run` gives now, journaled before the script
    /// sees it. A step that was cancelled stops the evaluation without recording anything.
    /// `allow_failure` is journaled with the step, so every reader can tell a failure the
    /// script went on from with one that stopped it.
    pub(super) fn replay_or_run(
        &self,
        input: &StepInput,
        context: Option<String>,
        allow_failure: bool,
        run: impl FnOnce() -> Ran,
    ) -> anyhow::Result<StepResult> {
        if let Some(result) = self.replay(input)? {
            return Ok(result);
        }
        let index = self.cursor.get();
        self.observer
            .step_started(self.path, index, input, context.as_deref());
        match run() {
            Ran::Done(result) => self.record(input.clone(), context, allow_failure, result),
            Ran::Cancelled => Err(self.interrupt(Interrupt::Engine(EngineError::Cancelled {
                script: self.path.to_string(),
                index,
            }))),
        }
    }

    /// Stops the frame when a step failed and the script did not allow it.
    pub(super) fn check_failure(
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
