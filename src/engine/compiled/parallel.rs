//! The `parallel` builtin: the shell steps of several functions run at once (DESIGN §12).
//!
//! Each member is a function that takes no arguments (`lambda: auto("make lint")`). The
//! group calls the members in order, each with its own steps of the journal (the records
//! tagged with the group and the member), so that replay does not depend on the order in
//! which the members' steps finished:
//!
//! 1. A member that reaches a shell step without a record stops there; the step is planned.
//!    Function steps and `mcp` steps run where the member reaches them, one after another.
//! 2. The planned steps run at once (at most `max`), and each is journaled as it finishes,
//!    tagged with its member: a kill loses only the steps still running.
//! 3. The members are called again, their finished steps now replaying, until every member
//!    returned.
//!
//! A member that reaches an llm step without a record stops there too. A round with shell
//! steps runs them first; a round with only llm steps left suspends the frame with them as
//! the group's independent tasks (`Evaluation::Tasks`), each answered on its own and
//! journaled tagged with its member, the next evaluation replaying it.
//!
//! A member that fails (a step without `allow_failure`, an error in its code) fails the
//! group as soon as it is called, before anything the members called so far planned can run:
//! so the same journal always gives the same failure, live or replayed, and the steps
//! that run are only ever the ones the journal lacks. The first failing member in the list
//! is the one reported.

use starlark::environment::GlobalsBuilder;
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::Value;
use starlark::values::list::{AllocList, ListRef};
use starlark::values::tuple::TupleRef;

use super::context::{Interrupt, MemberRun, Planned, StepContext, step_context};
use crate::engine::error::EngineError;
use crate::engine::observer::Recorded;
use crate::engine::runner::{Ran, ShellStep};
use crate::engine::step::{ParallelMember, StepRecord};

/// How many steps of a group run at once when the script does not say.
const DEFAULT_MAX: usize = 4;

#[starlark_module]
pub(super) fn parallel_builtin(builder: &mut GlobalsBuilder) {
    /// Calls the functions in `members` (each taking no arguments, such as
    /// `lambda: auto("make lint")`) as a group whose shell steps run at once, at most `max`
    /// at a time. Returns the list of what each returned, in the order given.
    fn parallel<'v>(
        #[starlark(require = pos)] members: Value<'v>,
        #[starlark(require = named)] max: Option<Value<'v>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> starlark::Result<Value<'v>> {
        let ctx = step_context(eval, "parallel")?;
        let max = match max {
            None => DEFAULT_MAX,
            Some(v) => v
                .unpack_i32()
                .and_then(|n| usize::try_from(n).ok())
                .filter(|n| *n >= 1)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "`max` of `parallel` must be a whole number at least 1 (how many steps run at once), got `{v}`"
                    )
                })?,
        };
        let members = member_list(members)?;
        let returned = run_group(ctx, eval, &members, max)?;
        Ok(eval.heap().alloc(AllocList(returned)))
    }
}

/// The members, checked: a list or tuple of functions.
fn member_list(members: Value<'_>) -> anyhow::Result<Vec<Value<'_>>> {
    let items: Vec<Value<'_>> = if let Some(list) = ListRef::from_value(members) {
        list.content().to_vec()
    } else if let Some(tuple) = TupleRef::from_value(members) {
        tuple.content().to_vec()
    } else {
        anyhow::bail!(
            "`parallel` takes a list of functions that take no arguments, such as `[lambda: auto(\"make lint\"), lambda: auto(\"make test\")]`; got a value of type `{}`",
            members.get_type()
        );
    };
    for (at, item) in items.iter().enumerate() {
        if !matches!(item.get_type(), "function" | "partial") {
            anyhow::bail!(
                "item {at} of the list given to `parallel` is a `{}`, not a function; wrap each step in a function that takes no arguments, such as `lambda: auto(\"make lint\")`",
                item.get_type()
            );
        }
    }
    Ok(items)
}

/// The records of member `member` of the group at `group`, in the order it took them.
fn member_records(steps: &[StepRecord], group: usize, member: usize) -> Vec<StepRecord> {
    group_records(steps, group)
        .iter()
        .filter(|r| r.parallel.is_some_and(|t| t.member == member))
        .cloned()
        .collect()
}

/// The records of the group that starts at position `group`: the steps from there on that
/// are tagged with it.
fn group_records(steps: &[StepRecord], group: usize) -> &[StepRecord] {
    let rest = steps.get(group..).unwrap_or_default();
    let len = rest
        .iter()
        .take_while(|r| r.parallel.is_some_and(|t| t.group == group))
        .count();
    &rest[..len]
}

/// Calls the members round after round until each returned (see the module's header).
fn run_group<'v>(
    ctx: &StepContext<'_>,
    eval: &mut Evaluator<'v, '_, '_>,
    members: &[Value<'v>],
    max: usize,
) -> starlark::Result<Vec<Value<'v>>> {
    let group = ctx.cursor.get();
    let closed = {
        let steps = ctx.steps.borrow();
        group + group_records(&steps, group).len() < steps.len()
    };
    let mut returned: Vec<Option<(Value<'v>, MemberRun)>> = members.iter().map(|_| None).collect();
    loop {
        let mut planned = Vec::new();
        let mut tasks = Vec::new();
        for (member, callee) in members.iter().enumerate() {
            if returned[member].is_some() {
                continue;
            }
            let tag = ParallelMember { group, member };
            let recorded = member_records(&ctx.steps.borrow(), group, member);
            *ctx.member.borrow_mut() = Some(MemberRun {
                tag,
                recorded,
                next: 0,
                closed,
                planned: None,
                task: None,
                prints: Vec::new(),
            });
            let outcome = eval.eval_function(*callee, &[], &[]);
            let mut run = ctx
                .member
                .borrow_mut()
                .take()
                .expect("the member's run is set until it returns");
            match outcome {
                Ok(value) => returned[member] = Some((value, run)),
                Err(_) if ctx.interrupt.borrow().is_none() && run.planned.is_some() => {
                    planned.push((tag, run.planned.take().expect("checked")));
                }
                Err(_) if ctx.interrupt.borrow().is_none() && run.task.is_some() => {
                    tasks.push(run.task.take().expect("checked"));
                }
                Err(e) => {
                    let ended = group_records(&ctx.steps.borrow(), group).len();
                    ctx.cursor.set(group + ended);
                    return Err(e);
                }
            }
        }
        if !planned.is_empty() {
            // The shell steps first: a member stopped at an llm step stops there again.
            run_round(ctx, group, &planned, max)?;
        } else if !tasks.is_empty() {
            ctx.cursor.set(group);
            return Err(ctx.interrupt(Interrupt::Tasks { group, max, tasks }).into());
        } else {
            break;
        }
    }
    let ended = group_records(&ctx.steps.borrow(), group).len();
    let used: usize = returned.iter().flatten().map(|(_, run)| run.next).sum();
    if used != ended && used != 0 {
        return Err(ctx
            .interrupt(Interrupt::Engine(EngineError::Diverged {
                script: ctx.path.to_string(),
                index: group,
                detail: format!(
                    "the members of the `parallel` group now take {used} {}, but the journal recorded {ended}",
                    if used == 1 { "step" } else { "steps" }
                ),
            }))
            .into());
    }
    // A group whose members took no steps leaves the records there to a later group.
    ctx.cursor.set(group + used);
    // Prints count once, in the members' order, now that each returned.
    let mut values = Vec::with_capacity(members.len());
    for (value, run) in returned.into_iter().flatten() {
        for text in &run.prints {
            ctx.print_outside(text);
        }
        values.push(value);
    }
    Ok(values)
}

/// Runs the steps the members planned, at once, journaling each as it finishes.
fn run_round(
    ctx: &StepContext<'_>,
    group: usize,
    planned: &[(ParallelMember, Planned)],
    max: usize,
) -> starlark::Result<()> {
    // The round's steps are journaled as they finish (a kill loses only those still
    // running), and numbered in the members' order: the numbers a run shows (and `--from`
    // takes) are the same in every run, whichever step finishes first. Each step's number
    // goes with it, to be noted beside its group for a resume that kills it.
    let numbers = ctx.free_numbers(group, planned.len());
    let steps: Vec<ShellStep> = planned
        .iter()
        .zip(&numbers)
        .map(|((_, p), number)| ShellStep {
            number: Some(*number),
            ..p.step.clone()
        })
        .collect();
    let mut cancelled = false;
    let mut broken: Option<anyhow::Error> = None;
    ctx.runner
        .run_shells(&steps, max, ctx.cancel, &mut |at, ran| {
            let (tag, planned) = &planned[at];
            match ran {
                // Once the journal cannot be written, nothing more is recorded.
                Ran::Done(_) if broken.is_some() => {}
                Ran::Done(result) => {
                    let input = planned.step.input();
                    let index = numbers[at];
                    let context = planned.context.as_deref();
                    let recorded = Recorded {
                        allow_failure: planned.allow_failure,
                        parallel: Some(*tag),
                    };
                    ctx.observer
                        .step_started(ctx.path, index, &input, context, recorded);
                    if !result.output.is_empty() {
                        ctx.observer.output(result.output.as_bytes());
                    }
                    let appended = ctx.append(
                        input,
                        planned.context.clone(),
                        planned.allow_failure,
                        result,
                        Some(*tag),
                        Some(index),
                    );
                    if let Err(e) = appended {
                        broken = Some(e);
                    }
                }
                Ran::Cancelled => cancelled = true,
            }
        });
    if let Some(e) = broken {
        return Err(e.into());
    }
    if cancelled {
        return Err(ctx
            .interrupt(Interrupt::Engine(EngineError::Cancelled {
                script: ctx.path.to_string(),
                index: group,
            }))
            .into());
    }
    Ok(())
}
