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

use super::evaluation::{Suspension, Task};
use super::limits::Limits;
use crate::engine::error::EngineError;
use crate::engine::group_note::GroupNote;
use crate::engine::journal::JournalError;
use crate::engine::observer::Observer;
use crate::engine::observer::Recorded;
use crate::engine::runner::{CancelToken, Ran, ShellStep, StepRunner};
use crate::engine::step::{Kept, ParallelMember, StepInput, StepRecord, StepResult};

/// Appends a step to the run's journal.
pub(crate) type JournalWriter<'a> = dyn FnMut(&StepRecord) -> Result<(), JournalError> + 'a;

/// Keeps a suspended evaluation alive until the steps that answer it are journaled: how a
/// warm evaluator child waits for the parent (see `child`), instead of unwinding.
pub(crate) trait Holder {
    /// Says that the frame suspended at `suspension` (with the cursor and the count of
    /// prints reported there) and waits; returns the steps journaled in the frame since,
    /// the first of them the suspended step's own. Does not return when nobody will answer
    /// (the process ends).
    fn hold(&self, suspension: &Suspension, cursor: usize, printed: usize) -> Vec<StepRecord>;
}

/// Why the interpreter was unwound by a builtin.
pub(super) enum Interrupt {
    Suspend(Suspension),
    /// The llm steps the members of the `parallel` group at `group` stopped at.
    Tasks {
        group: usize,
        max: usize,
        tasks: Vec<Task>,
    },
    StepFailed(String),
    Engine(EngineError),
}

pub(super) use context_type::StepContext;

/// The member of a `parallel` group being called now (see `parallel`): its steps come from
/// its own records in the group, not from the frame's cursor.
pub(super) struct MemberRun {
    /// Where it belongs; new steps are journaled with it.
    pub(super) tag: ParallelMember,
    /// Its steps in the journal, in the order it took them.
    pub(super) recorded: Vec<StepRecord>,
    /// How many of them this call replayed (or recorded).
    pub(super) next: usize,
    /// The group's records end before other steps of the frame: it ran to its end before,
    /// so a new step of it means the script changed.
    pub(super) closed: bool,
    /// The shell step it reached without a record, which stopped it; run with the round.
    pub(super) planned: Option<Planned>,
    /// The llm step it reached without a record, which stopped it; asked with the others.
    pub(super) task: Option<Task>,
    /// Its prints outside function steps, reported once it returns.
    pub(super) prints: Vec<String>,
}

/// A shell step a member of a `parallel` group asked for, to run with the others.
pub(super) struct Planned {
    pub(super) step: ShellStep,
    pub(super) context: Option<String>,
    pub(super) allow_failure: bool,
}

mod context_type {
    //! Separate only so that the `unsafe impl` written by the `ProvidesStaticType` derive
    //! (needed to reach the context through `Evaluator::extra`) is allowed here and nowhere
    //! else.
    #![allow(unsafe_code)]

    use super::{
        CancelToken, Cell, Duration, GroupNote, Holder, Interrupt, JournalWriter, Kept, Limits,
        MemberRun, Observer, Path, ProvidesStaticType, RefCell, StepRecord, StepRunner,
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
        /// The member of a `parallel` group being called, if one is.
        pub(in crate::engine::compiled) member: RefCell<Option<MemberRun>>,
        /// Holds the evaluation where the frame suspends, when something does (a warm
        /// evaluator child); otherwise it unwinds there.
        pub(in crate::engine::compiled) holder: Option<&'a dyn Holder>,
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
        } else if let Some(member) = self.ctx.member.borrow_mut().as_mut() {
            // A member is called again each round: its prints count once, when it returns.
            member.prints.push(text.to_string());
        } else {
            self.ctx.print_outside(text);
        }
        Ok(())
    }
}

impl StepContext<'_> {
    /// A print outside function steps: reported unless it was already.
    pub(super) fn print_outside(&self, text: &str) {
        let n = self.prints.get();
        self.prints.set(n + 1);
        let replaying = self.cursor.get() < self.steps.borrow().len();
        if n >= self.printed.get() && !replaying {
            self.observer.print(self.path, text);
            self.printed.set(n + 1);
        }
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
    if ctx.member.borrow().is_some() && !matches!(builtin, "auto" | "mcp" | "llm") {
        anyhow::bail!(
            "`{builtin}` cannot run inside a `parallel` group, whose members may only run `auto`, `mcp` and `llm` steps; call it before or after the group"
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
        if let Some(member) = self.member.borrow_mut().as_mut() {
            let Some(recorded) = member.recorded.get(member.next) else {
                return Ok(None);
            };
            if recorded.input != *input {
                let (index, detail) = (recorded.index, input.difference(&recorded.input));
                return Err(self.interrupt(Interrupt::Engine(EngineError::Diverged {
                    script: self.path.to_string(),
                    index,
                    detail,
                })));
            }
            member.next += 1;
            return Ok(Some(recorded.result.clone()));
        }
        let index = self.cursor.get();
        let steps = self.steps.borrow();
        let Some(recorded) = steps.get(index) else {
            return Ok(None);
        };
        if recorded.parallel.is_some() || recorded.input != *input {
            let detail = if recorded.parallel.is_some() {
                format!(
                    "the script now runs {} outside a `parallel` group, where the journal has a step of one",
                    input.summary()
                )
            } else {
                input.difference(&recorded.input)
            };
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

    /// The index the next new step gets: the cursor, or past the end of the journal for a
    /// step of a `parallel` group (whose steps are appended as they come).
    pub(super) fn next_index(&self) -> usize {
        let tag = self.member.borrow().as_ref().map(|m| m.tag);
        match tag {
            Some(tag) => self.free_numbers(tag.group, 1)[0],
            None => self.cursor.get(),
        }
    }

    /// Journals a new step, then lets the script see it.
    fn record(
        &self,
        input: StepInput,
        context: Option<String>,
        allow_failure: bool,
        result: StepResult,
    ) -> anyhow::Result<StepResult> {
        let tag = match self.member.borrow().as_ref() {
            Some(member) if member.closed => {
                return Err(self.closed_group(member.tag));
            }
            Some(member) => Some(member.tag),
            None => None,
        };
        let record = self.append(input, context, allow_failure, result, tag, None)?;
        if let Some(member) = self.member.borrow_mut().as_mut() {
            member.recorded.push(record.clone());
            member.next += 1;
        } else {
            self.cursor.set(record.index + 1);
        }
        Ok(record.result)
    }

    /// Journals a new step (of the `parallel` member `tag`, if any) and tells the observer;
    /// the caller moves its cursor. The step is numbered `number` when given (a shell step
    /// of a `parallel` round, numbered in the members' order, whenever it finishes), else
    /// where it goes in the frame's steps.
    pub(super) fn append(
        &self,
        input: StepInput,
        context: Option<String>,
        allow_failure: bool,
        result: StepResult,
        tag: Option<ParallelMember>,
        number: Option<usize>,
    ) -> anyhow::Result<StepRecord> {
        let index = match (number, tag) {
            (Some(number), _) => number,
            (None, Some(tag)) => self.free_numbers(tag.group, 1)[0],
            (None, None) => self.cursor.get(),
        };
        let record = StepRecord {
            index,
            input,
            context,
            result,
            allow_failure,
            parallel: tag,
        };
        let written = (self.journal.borrow_mut())(&record);
        if let Err(e) = written {
            return Err(self.interrupt(Interrupt::Engine(e.into())));
        }
        self.observer.step_finished(self.path, &record);
        self.steps.borrow_mut().push(record.clone());
        Ok(record)
    }

    /// The numbers the next `count` steps of the `parallel` group at position `group` take:
    /// the lowest from `group` on that none of its steps has. In a group whose rounds all
    /// finished they are the positions past its steps; after a round a kill cut short, they
    /// fill the numbers its unfinished steps would have had.
    pub(super) fn free_numbers(&self, group: usize, count: usize) -> Vec<usize> {
        crate::engine::step::free_numbers(&self.steps.borrow(), group)
            .take(count)
            .collect()
    }

    /// The error for a new step of a `parallel` group whose journal shows it ended before.
    pub(super) fn closed_group(&self, tag: ParallelMember) -> anyhow::Error {
        self.interrupt(Interrupt::Engine(EngineError::Diverged {
            script: self.path.to_string(),
            index: tag.group,
            detail: format!(
                "member {} of the `parallel` group now takes more steps than the journal recorded",
                tag.member
            ),
        }))
    }

    /// A shell step of a `parallel` member: the recorded result, else the member stops here
    /// and the step runs with the group's round (see `parallel`).
    pub(super) fn member_shell(
        &self,
        step: ShellStep,
        context: Option<String>,
        allow_failure: bool,
    ) -> anyhow::Result<StepResult> {
        if let Some(result) = self.replay(&step.input())? {
            return Ok(result);
        }
        let mut member = self.member.borrow_mut();
        let member = member
            .as_mut()
            .expect("member_shell is called only while a member runs");
        if member.closed {
            let tag = member.tag;
            return Err(self.closed_group(tag));
        }
        member.planned = Some(Planned {
            step,
            context,
            allow_failure,
        });
        Err(anyhow::anyhow!("mekara: parallel member planned"))
    }

    /// An llm step of a `parallel` member without a record: the member stops here, and the
    /// step is asked with the group's other tasks (see `parallel`).
    pub(super) fn member_llm(
        &self,
        prompt: String,
        expects: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> anyhow::Error {
        let mut member = self.member.borrow_mut();
        let member = member
            .as_mut()
            .expect("member_llm is called only while a member runs");
        if member.closed {
            let tag = member.tag;
            return self.closed_group(tag);
        }
        member.task = Some(Task {
            member: member.tag.member,
            prompt,
            expects,
        });
        anyhow::anyhow!("mekara: parallel member asks")
    }

    /// Whether a member of a `parallel` group is being called.
    pub(super) fn in_member(&self) -> bool {
        self.member.borrow().is_some()
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
        let index = self.next_index();
        let recorded = Recorded {
            allow_failure,
            parallel: self.member.borrow().as_ref().map(|m| m.tag),
        };
        self.observer
            .step_started(self.path, index, input, context.as_deref(), recorded);
        match run() {
            Ran::Done(result) => self.record(input.clone(), context, allow_failure, result),
            Ran::Cancelled => Err(self.interrupt(Interrupt::Engine(EngineError::Cancelled {
                script: self.path.to_string(),
                index,
            }))),
        }
    }

    /// [`Self::replay_or_run`], then [`Self::check_failure`]: the result of an effect step
    /// the script goes on with.
    pub(super) fn effect(
        &self,
        input: &StepInput,
        context: Option<String>,
        allow_failure: bool,
        run: impl FnOnce() -> Ran,
    ) -> anyhow::Result<StepResult> {
        let index = self.cursor.get();
        let result = self.replay_or_run(input, context, allow_failure, run)?;
        self.check_failure(index, input, &result, allow_failure)?;
        Ok(result)
    }

    /// The result of a step someone else gives (an llm step, a question, a called script):
    /// the recorded one when the journal has it, checked as [`Self::check_failure`] does;
    /// else the evaluation suspends there. An llm step of a `parallel` member is asked with
    /// the group's other tasks instead.
    pub(super) fn replay_or_suspend(
        &self,
        suspension: Suspension,
        allow_failure: bool,
    ) -> anyhow::Result<StepResult> {
        let input = suspension.input();
        let index = self.cursor.get();
        let result = loop {
            if let Some(result) = self.replay(&input)? {
                break result;
            }
            match self.holder {
                // Held, the evaluation goes on from here as one from the top would over the
                // journal with the new steps; a step of a `parallel` member is asked with
                // the group's other tasks, which unwinds.
                Some(holder) if !self.in_member() => {
                    let new = holder.hold(&suspension, index, self.printed.get());
                    self.steps.borrow_mut().extend(new);
                }
                _ => {
                    return Err(match suspension {
                        Suspension::Llm { prompt, expects } if self.in_member() => {
                            self.member_llm(prompt, expects)
                        }
                        suspension => self.interrupt(Interrupt::Suspend(suspension)),
                    });
                }
            }
        };
        self.check_failure(index, &input, &result, allow_failure)?;
        Ok(result)
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
        // A member's steps are numbered where the journal put them.
        let index = match self.member.borrow().as_ref() {
            Some(member) => member
                .next
                .checked_sub(1)
                .and_then(|at| member.recorded.get(at))
                .map_or(index, |r| r.index),
            None => index,
        };
        let error = result.error.as_deref().unwrap_or("failed");
        Err(self.interrupt(Interrupt::StepFailed(format!(
            "step {}[{index}] `{}` failed: {error}",
            self.path,
            input.summary()
        ))))
    }
}
