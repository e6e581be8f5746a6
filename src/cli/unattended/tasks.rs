//! The llm steps of a `parallel` group in an unattended run: each task goes to an agent
//! process of its own (its own agent session, not the run's), at most
//! `--max-parallel-agents` at once (the group's `max` by default). Each answer is checked
//! and asked again once when it does not fit, in the worker that asked it, and journaled on
//! this thread as it arrives, tagged with its member: a kill loses only the answers still
//! out, and a resume asks only those.

use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::{Map, Value as Json};

use super::args::UnattendedArgs;
use super::ask::{Asked, Bounds, Waited, add, at_limit, cost_note, deadline, wait_out};
use super::end::End;
use crate::agents::headless::{Agent, Kind, Reply as AgentReply, Request, Spent, outputs_schema};
use crate::agents::history::Progress;
use crate::agents::rate_limit::Backoff;
use crate::agents::reply;
use crate::agents::session::Session;
use crate::agents::tools::AgentTool;
use crate::engine::step::AgentReport;
use crate::engine::{CancelToken, Task};

/// The tasks pending in frame `path`, and the bound of its group (`parallel(…, max = N)`).
pub(super) struct Group<'a> {
    pub path: &'a str,
    /// The frame's step position where the group's steps begin.
    pub position: usize,
    pub max: usize,
    pub tasks: &'a [Task],
    /// What the run's agents had spent before the group.
    pub spent: &'a Spent,
    /// When the run (this process's part of it) started, for `--max-duration`.
    pub started: Instant,
    /// The run's limits and spend caps.
    pub limits: &'a super::limits::Limits,
    /// What models' tokens cost, for agents that report no cost.
    pub prices: &'a crate::agents::prices::Prices,
}

/// What the workers share: the next task to start, and what the run has spent with the
/// tasks started so far, so that a limit stops the next task from starting.
struct Budget {
    next: usize,
    spent: Spent,
    /// Why no more tasks start, once a limit is reached: the task, and the limit.
    limit: Option<(String, super::limits::Reached)>,
}

impl Budget {
    /// The next task to start, unless the tasks are all started or a limit is reached. A
    /// started task counts as an agent answer at once (it will be journaled as one).
    fn take<'t>(&mut self, group: &Group<'t>) -> Option<&'t Task> {
        let task = group.tasks.get(self.next)?;
        if self.limit.is_some() {
            return None;
        }
        if let Some(reached) = group.limits.reached(&self.spent, group.started.elapsed()) {
            self.limit = Some((reply::task_label(group.path, task.member), reached));
            return None;
        }
        self.next += 1;
        self.spent.answers += 1;
        Some(task)
    }
}

/// What one worker came back with: the member, its label, and the answer (`None` when the
/// run was stopped).
type Answer = (usize, String, Option<Answered>);

/// What a worker tells the thread that journals.
enum Message {
    /// Task `step` met a rate limit; its worker waits `wait` before asking again
    /// (`attempt`).
    Wait {
        step: String,
        attempt: u32,
        wait: Duration,
        said: String,
    },
    /// A task's answer.
    Answer(Answer),
}

/// A task's outputs or why it failed, with what the agent reported over every attempt.
type Answered = (Result<Map<String, Json>, String>, AgentReport);

/// Asks the agents for every task of `group` at once, journals each answer as it arrives,
/// then lets the run go on.
pub(super) fn ask_tasks(
    args: &UnattendedArgs,
    session: &mut Session,
    group: &Group<'_>,
    base: &Request,
    timeout: Duration,
    cancel: &CancelToken,
    progress: &dyn Fn(Progress<'_>),
) -> Asked {
    let Group {
        path, max, tasks, ..
    } = *group;
    let workers = args
        .max_parallel_agents
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(max)
        .clamp(1, tasks.len().max(1));
    eprintln!(
        "… asking {} at once: {} of the `parallel` group in `{path}`",
        crate::display::count(workers, "agent"),
        crate::display::count(tasks.len(), "llm step"),
    );
    // The frame the group runs in: its NL source is every task's context.
    let source = session
        .frames()
        .last()
        .filter(|frame| frame.is_compiled())
        .map(|frame| (frame.script.name.to_string(), frame.script.nl.text.clone()));
    let source = source
        .as_ref()
        .map(|(name, text)| (name.as_str(), text.as_str()));
    // The number each task's answer will take in the frame (the tasks take the numbers the
    // group leaves free, in the members' order, whichever answer comes first): noted beside
    // its agent's group, so that a resume that kills the agent journals which step it was.
    let numbers: Vec<usize> = session.frames().last().map_or_else(Vec::new, |frame| {
        crate::engine::step::free_numbers(&frame.steps, group.position)
            .take(tasks.len())
            .collect()
    });
    let number_of = |task: &Task| {
        tasks
            .iter()
            .position(|t| t.member == task.member)
            .and_then(|at| numbers.get(at).copied())
    };
    let budget = Mutex::new(Budget {
        next: 0,
        spent: group.spent.clone(),
        limit: None,
    });
    let lock = || {
        budget
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    };
    let (sender, answers) = mpsc::channel::<Message>();
    let deadline = deadline(group.limits, group.started);
    let mut stopped = false;
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let (sender, lock, number_of) = (sender.clone(), &lock, &number_of);
            scope.spawn(move || {
                let mut agent = args.agent();
                // Limits are checked before each task starts: the tasks started finish.
                loop {
                    // The guard is dropped here, before the task runs.
                    let Some(task) = lock().take(group) else {
                        break;
                    };
                    if cancel.is_cancelled() {
                        break;
                    }
                    let mut request = Request {
                        step: reply::task_label(path, task.member),
                        kind: Kind::Llm,
                        prompt: reply::task_prompt(path, task, source),
                        schema: outputs_schema(task.expects.as_ref()),
                        // Its own agent session, not the run's.
                        session: None,
                        // Each running agent notes its process group on a line of its own.
                        group_note: base
                            .group_note
                            .as_ref()
                            .map(|n| n.member_slot(worker + 1, number_of(task))),
                        ..base.clone()
                    };
                    let bounds = Bounds {
                        timeout,
                        deadline,
                        max_step_tokens: None,
                    };
                    let answer = ask_one(
                        agent.as_mut(),
                        &mut request,
                        task,
                        bounds,
                        group.prices,
                        cancel,
                        &sender,
                    );
                    if let Some((_, report)) = &answer {
                        let mut budget = lock();
                        // Counted as an answer when it started.
                        budget.spent.add(report, false);
                        budget.spent.answers -= 1;
                    }
                    if let Some(note) = &request.group_note {
                        note.clear();
                    }
                    if sender
                        .send(Message::Answer((task.member, request.step, answer)))
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
        drop(sender);
        for message in answers {
            let (member, step, answer) = match message {
                Message::Answer(answer) => answer,
                Message::Wait {
                    step,
                    attempt,
                    wait,
                    said,
                } => {
                    if let Err(error) = session.note_wait(step.clone(), attempt, wait, said) {
                        eprintln!("  `{step}`: the wait could not be journaled: {error}");
                    }
                    continue;
                }
            };
            let Some((answer, report)) = answer else {
                stopped = true;
                continue;
            };
            match &answer {
                Ok(_) => eprintln!("  `{step}` answered{}", cost_note(&report)),
                Err(error) => {
                    eprintln!("  `{step}` failed: {}", error.trim().replace('\n', "\n  "));
                }
            }
            // A refusal here means the group moved on meanwhile (a member failed): the
            // reply that goes on says what is pending now.
            if let Err(refused) = session.answer_task(member, answer, report, progress) {
                eprintln!(
                    "  `{step}` not kept: {}",
                    refused.trim().replace('\n', "\n  ")
                );
            }
        }
    });
    if stopped || cancel.is_cancelled() {
        return Asked::Stop(End::Interrupted);
    }
    if let Some((step, reached)) = lock().limit.take() {
        return Asked::Stop(at_limit(session, group.limits, &step, reached));
    }
    Asked::Next(session.go_on(progress))
}

/// Asks one task, and once more when its answer does not fit; `None` when the run was
/// stopped meanwhile. The outputs are checked as the journal will check them.
fn ask_one(
    agent: &mut dyn Agent,
    request: &mut Request,
    task: &Task,
    bounds: Bounds,
    prices: &crate::agents::prices::Prices,
    cancel: &CancelToken,
    sender: &mpsc::Sender<Message>,
) -> Option<Answered> {
    let started = Instant::now();
    let mut total = AgentReport::default();
    let mut backoff = Backoff::new();
    loop {
        eprintln!("… asking an agent: llm step `{}`", request.step);
        let (answer, report) = match agent
            .ask(request, bounds.timeout, cancel)
            .map_report(|r| prices.estimate(r))
        {
            AgentReply::Cancelled => return None,
            AgentReply::Outputs(outputs, report) => {
                let checked =
                    crate::engine::executor::check_outputs(task.expects.as_ref(), &outputs)
                        .map(|()| outputs)
                        .map_err(|e| (reply::refusal(AgentTool::Continue, &e, None, None), true));
                (checked, report)
            }
            AgentReply::Malformed(error, report) => (Err((error, true)), report),
            AgentReply::Failed(error, report) => (Err((error, false)), report),
            AgentReply::RateLimited(limited, mut report) => {
                // Asked again in a session of its own, not one the turned-away attempt began.
                report.session = None;
                let step = request.step.clone();
                // The journaling thread writes the wait; a closed channel means the run
                // stopped, and the wait is cut short by the cancel anyway.
                let mut note = |attempt, wait, said| {
                    let _ = sender.send(Message::Wait {
                        step: step.clone(),
                        attempt,
                        wait,
                        said,
                    });
                    Ok(())
                };
                match wait_out(
                    &mut backoff,
                    &limited,
                    &step,
                    bounds.deadline,
                    cancel,
                    &mut note,
                ) {
                    Waited::Again => {
                        add(&mut total, &report, request.attempt, started.elapsed());
                        continue;
                    }
                    Waited::Cancelled => return None,
                    Waited::GaveUp(error) => (Err((error, false)), report),
                }
            }
        };
        add(&mut total, &report, request.attempt, started.elapsed());
        if total.session.is_some() {
            request.session.clone_from(&total.session);
        }
        match answer {
            Ok(outputs) => return Some((Ok(outputs), total)),
            Err((error, true)) if request.attempt == 1 => {
                eprintln!(
                    "  `{}`: {}\n… asking the agent again",
                    request.step,
                    error.trim().replace('\n', "\n  ")
                );
                request.attempt = 2;
                request.previous_error = Some(error);
            }
            Err((error, _)) => return Some((Err(error), total)),
        }
    }
}
