//! The tasks of a `parallel` group (the llm steps its members stopped at, in unattended runs):
//! answered all at once or one by one, journaled in the members' order.

use serde_json::{Map, Value as Json};

use super::outputs::{check_names, check_outputs};
use super::{Executor, Pending};
use crate::engine::compiled::Task;
use crate::engine::error::{EngineError, Waiting};
use crate::engine::observer::Observer;
use crate::engine::step::{AgentReport, ParallelMember, StepInput, StepResult};

impl Executor {
    /// Gives the outputs of every task of the pending `parallel` group at once, keyed by
    /// task (the member's number), and runs on. All are checked before any is journaled.
    pub(super) fn answer_tasks(
        &mut self,
        group: usize,
        tasks: Vec<Task>,
        outputs: &Map<String, Json>,
        observer: &dyn Observer,
    ) -> Result<Pending, EngineError> {
        let expected: Vec<String> = tasks.iter().map(|t| t.member.to_string()).collect();
        check_names(expected, outputs)?;
        let mut given = Vec::with_capacity(tasks.len());
        for task in tasks {
            let key = task.member.to_string();
            let own = match outputs.get(&key) {
                Some(Json::Object(own)) => own.clone(),
                _ => {
                    return Err(EngineError::Unfit {
                        detail: format!(
                            "the outputs of task `{key}` must be an object of its outputs (`{{}}` when it expects none)"
                        ),
                    });
                }
            };
            check_outputs(task.expects.as_ref(), &own).map_err(|e| match e {
                EngineError::Outputs {
                    missing,
                    unexpected,
                    expected,
                } => {
                    let named = |names: Vec<String>| {
                        names.into_iter().map(|n| format!("{key}.{n}")).collect()
                    };
                    EngineError::Outputs {
                        missing: named(missing),
                        unexpected: named(unexpected),
                        expected: named(expected),
                    }
                }
                other => other,
            })?;
            given.push((task, own));
        }
        // In the members' order: each is the first of the tasks left.
        for (task, own) in given {
            let result = StepResult {
                success: true,
                outputs: Some(own),
                ..StepResult::default()
            };
            self.record_task(group, task, 0, result, observer)?;
        }
        self.advance(observer)
    }

    /// Gives the outputs of the task of `member` in the pending `parallel` group (with what
    /// the agent process that answered reported, if one did), journaled tagged with the
    /// member. The run does not go on: the group's other tasks may still be out;
    /// [`Executor::advance`] goes on.
    pub(crate) fn answer_task(
        &mut self,
        member: usize,
        outputs: Map<String, Json>,
        agent: Option<AgentReport>,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let (group, task, rank) = self.pending_task(member, observer)?;
        check_outputs(task.expects.as_ref(), &outputs)?;
        let result = StepResult {
            success: true,
            outputs: Some(outputs),
            duration_ms: agent.as_ref().and_then(|a| a.wall_ms),
            agent,
            ..StepResult::default()
        };
        self.record_task(group, task, rank, result, observer)
    }

    /// Fails the task of `member` in the pending `parallel` group: the agent process could
    /// not do it. The member fails when the group is called again, and with it the group.
    pub(crate) fn fail_task(
        &mut self,
        member: usize,
        error: String,
        agent: AgentReport,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let (group, task, rank) = self.pending_task(member, observer)?;
        let result = StepResult {
            success: false,
            error: Some(error),
            duration_ms: agent.wall_ms,
            agent: Some(agent),
            ..StepResult::default()
        };
        self.record_task(group, task, rank, result, observer)
    }

    /// The pending task of `member`, with its group's position and its rank among the
    /// tasks still pending (in the members' order).
    fn pending_task(
        &mut self,
        member: usize,
        observer: &dyn Observer,
    ) -> Result<(usize, Task, usize), EngineError> {
        let pending = self.advance(observer)?;
        if let Pending::Tasks { group, tasks, .. } = &pending
            && let Some(rank) = tasks.iter().position(|t| t.member == member)
        {
            return Ok((*group, tasks[rank].clone(), rank));
        }
        Err(EngineError::WrongCall {
            expected: Waiting::LlmStep,
            waiting: pending.waiting(),
        })
    }

    /// Journals the answer of a task of the group at `group`, tagged with its member; `rank`
    /// is its place among the tasks still pending. Answers are journaled as they come, and
    /// numbered in the members' order: the task of rank `r` takes the `r`-th number the
    /// group's steps leave free, so the numbers are the same whichever answer comes first.
    fn record_task(
        &mut self,
        group: usize,
        task: Task,
        rank: usize,
        result: StepResult,
        observer: &dyn Observer,
    ) -> Result<(), EngineError> {
        let tag = ParallelMember {
            group,
            member: task.member,
        };
        let input = StepInput::Llm {
            prompt: task.prompt,
            expects: task.expects,
        };
        let number = self.stack.last().map(|top| {
            super::step::free_numbers(&top.steps, group)
                .nth(rank)
                .unwrap_or(group)
        });
        let record = self.record_step_tagged(input, None, result, false, Some(tag), number)?;
        observer.step_finished(&self.label(), &record);
        Ok(())
    }
}
