//! What each run's events add up to: the frames of its live history ([`RunHistory`]), its
//! state and summary as `mekara runs` lists it, run ids, and the rules of `runs prune`.

use std::hash::{BuildHasher, Hasher};
use std::path::Path;

use super::journal::{
    self, AgentEvent, AskEvent, Contents, Event, HandedEvent, JournalError, Outcome, PushEvent,
};
use super::step::{StepInput, StepRecord};
use super::tool::NL_TAG_CONTEXT;

/// A frame as its events describe it.
#[derive(Debug, Clone)]
pub(crate) struct FrameState {
    /// How it was pushed.
    pub push: PushEvent,
    /// Its journaled steps.
    pub steps: Vec<StepRecord>,
    /// The failure it fell back on, if it did.
    pub failure: Option<String>,
    /// The last question its `ask` steps put to the person.
    pub asked: Option<AskEvent>,
    /// When the last script it called failed: that script, and the ones under it that
    /// failed with it (see [`failed_calls`]).
    pub failed_calls: Vec<FailedCallee>,
    /// The last llm step it handed to the agent.
    pub handed: Option<HandedEvent>,
}

/// A script called with `call_script` that failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FailedCallee {
    /// Its name, as resolved when it was pushed.
    pub script: String,
    /// Its arguments.
    pub request: String,
}

/// The frame's own last step: the steps journaled for the prompt tags of its NL
/// instructions, when it fell back, come after the step that failed.
pub(crate) fn last_own_step(steps: &[StepRecord]) -> Option<&StepRecord> {
    steps
        .iter()
        .rev()
        .find(|s| s.context.as_deref() != Some(NL_TAG_CONTEXT))
}

/// What the caller of a frame that ended failed keeps of it: the chain of failed calls
/// from that frame (`script` with `request`) down to the script whose own step failed. The
/// frame's failure was a script it called when its last step is a call that failed and
/// that it did not allow to fail: `below` is what it kept of that one.
pub(crate) fn failed_calls(
    script: String,
    request: String,
    steps: &[StepRecord],
    below: Vec<FailedCallee>,
) -> Vec<FailedCallee> {
    let through = last_own_step(steps).is_some_and(|last| {
        matches!(last.input, StepInput::Call { .. }) && !last.result.success && !last.allow_failure
    });
    let mut chain = vec![FailedCallee { script, request }];
    if through {
        chain.extend(below);
    }
    chain
}

impl FrameState {
    /// The question the frame waits on: asked, and not answered yet.
    pub(crate) fn waiting_question(&self) -> Option<&AskEvent> {
        self.asked
            .as_ref()
            .filter(|ask| ask.index == self.steps.len() && self.failure.is_none())
    }

    /// The llm step the frame waits on, as journaled: handed out, and not answered yet.
    pub(crate) fn waiting_llm(&self) -> Option<&HandedEvent> {
        self.handed
            .as_ref()
            .filter(|h| h.index == self.steps.len() && self.failure.is_none())
    }
}

/// What a run's events add up to.
#[derive(Debug, Clone)]
pub(crate) struct RunHistory {
    /// The frames still on the stack, root first. Empty when the run ended.
    pub frames: Vec<FrameState>,
    /// The root script's name.
    pub script: Option<String>,
    /// When the run started (Unix ms).
    pub started_at: u64,
    /// How many steps were journaled, in all frames.
    pub steps: usize,
    /// How the root frame ended, once it has.
    pub outcome: Option<Outcome>,
    /// What the script that stopped the run gave `fail()`, when one did.
    pub stop_message: Option<String>,
    /// Whether the root frame fell back to its NL instructions.
    pub root_fell_back: bool,
    /// The digest of the run's handle token, from its header.
    pub token_sha256: Option<String>,
    /// Whether a script was ever pushed. A journal without (an empty file, or a header alone
    /// from a mekara that wrote them apart) was stopped before its script started.
    pub started: bool,
    /// How many journaled steps a retry or rewind superseded (kept in the file, not counted
    /// in `steps`).
    pub superseded: usize,
}

/// Which of `events` make up the live history: every event but those a later `supersede`
/// took out, and the `supersede` events themselves (they only say so). A `supersede` takes
/// out the live events from its `line` on; events it took out stay out, whatever a later
/// one says. A `supersede` that points at the header or past itself is reported with its
/// line.
pub(crate) fn live(events: &[Event]) -> Result<Vec<bool>, (usize, String)> {
    live_by(events.len(), |index| match &events[index] {
        Event::Supersede(supersede) => Some(supersede.line),
        _ => None,
    })
}

/// [`live`] for `len` events of which `supersede_line` tells the `supersede` events, and
/// the line each supersedes from.
pub(crate) fn live_by(
    len: usize,
    supersede_line: impl Fn(usize) -> Option<usize>,
) -> Result<Vec<bool>, (usize, String)> {
    let mut live = vec![false; len];
    // The live events so far, in order: a supersede cuts the tail of this list.
    let mut kept: Vec<usize> = Vec::with_capacity(len);
    for index in 0..len {
        let Some(line) = supersede_line(index) else {
            live[index] = true;
            kept.push(index);
            continue;
        };
        if line < 2 || line > index {
            return Err((
                index + 1,
                format!(
                    "a `supersede` event from line {line}, which is not a line between the header and itself"
                ),
            ));
        }
        while kept.last().is_some_and(|&k| k + 1 >= line) {
            if let Some(k) = kept.pop() {
                live[k] = false;
            }
        }
    }
    Ok(live)
}

impl RunHistory {
    /// Replays the `events` of the journal at `path` into the stack they describe. An event
    /// that does not fit the stack is reported with its line in the file (the events are
    /// its lines, in order).
    pub(crate) fn replay(path: &Path, events: &[Event]) -> Result<RunHistory, JournalError> {
        let mut history = RunHistory {
            frames: Vec::new(),
            script: None,
            started_at: 0,
            steps: 0,
            outcome: None,
            stop_message: None,
            root_fell_back: false,
            token_sha256: None,
            started: false,
            superseded: 0,
        };
        let live = live(events).map_err(|(line, reason)| JournalError::Corrupt {
            path: path.to_path_buf(),
            line,
            reason,
        })?;
        history.superseded = live
            .iter()
            .zip(events)
            .filter(|(live, event)| !**live && matches!(event, Event::Step(_)))
            .count();
        for (index, event) in events.iter().enumerate() {
            if !live[index] {
                continue;
            }
            let corrupt = |reason: String| JournalError::Corrupt {
                path: path.to_path_buf(),
                line: index + 1,
                reason,
            };
            let deep = history.frames.len();
            // A push opens a frame at the stack's depth; the other events belong to its top
            // frame, one less.
            let depth_ok = |depth: usize, expected: usize| {
                if depth == expected {
                    Ok(())
                } else {
                    Err(corrupt(format!(
                        "a `{}` event at depth {depth}, but the stack is {deep} deep there, so it should be at depth {expected}",
                        event.kind()
                    )))
                }
            };
            let top = history.frames.len().checked_sub(1);
            match event {
                Event::Run(run) => {
                    history.started_at = run.at;
                    history.token_sha256.clone_from(&run.token_sha256);
                }
                Event::Push(push) => {
                    history.started = true;
                    depth_ok(push.depth, history.frames.len())?;
                    if push.depth == 0 {
                        history.script.get_or_insert_with(|| push.script.clone());
                        history.outcome = None;
                        history.root_fell_back = false;
                    }
                    history.frames.push(FrameState {
                        push: push.clone(),
                        steps: Vec::new(),
                        failure: None,
                        asked: None,
                        failed_calls: Vec::new(),
                        handed: None,
                    });
                }
                Event::Step(step) => {
                    let top = top.ok_or_else(|| corrupt("a step with no frame".into()))?;
                    depth_ok(step.depth, top)?;
                    history.frames[top].steps.push(step.record.clone());
                    history.steps += 1;
                }
                Event::Fail(fail) => {
                    let top = top.ok_or_else(|| corrupt("a failure with no frame".into()))?;
                    depth_ok(fail.depth, top)?;
                    history.frames[top].failure = Some(fail.error.clone());
                    if top == 0 {
                        history.root_fell_back = true;
                    }
                }
                Event::Ask(ask) => {
                    let top = top.ok_or_else(|| corrupt("a question with no frame".into()))?;
                    depth_ok(ask.depth, top)?;
                    history.frames[top].asked = Some(ask.clone());
                }
                Event::Handed(handed) => {
                    let top = top.ok_or_else(|| corrupt("an llm step with no frame".into()))?;
                    depth_ok(handed.depth, top)?;
                    history.frames[top].handed = Some(handed.clone());
                }
                // Not live: `live` left it out.
                Event::Supersede(_) => {}
                // Notes: a wait is not a step result, and an ignorable event changes nothing.
                Event::Wait(_) | Event::Ignored(_) | Event::Agent(_) | Event::Cap(_) => {}
                // An attempt that recorded nothing: only the history's readers show it.
                Event::Killed(_) => {}
                Event::Pop(pop) => {
                    let top = top.ok_or_else(|| corrupt("a pop with no frame".into()))?;
                    depth_ok(pop.depth, top)?;
                    let popped = history.frames.pop().expect("`top` is a frame");
                    // As the executor keeps it when it pops a called frame.
                    if let Some(caller) = history.frames.last_mut() {
                        caller.failed_calls = if pop.outcome == Outcome::Failed {
                            failed_calls(
                                popped.push.script,
                                popped.push.request,
                                &popped.steps,
                                popped.failed_calls,
                            )
                        } else {
                            Vec::new()
                        };
                    }
                    if top == 0 {
                        history.outcome = Some(pop.outcome);
                        history.stop_message = pop
                            .error
                            .clone()
                            .filter(|_| pop.outcome == Outcome::Stopped);
                    }
                }
            }
        }
        Ok(history)
    }
}

/// The state of a run, for `mekara runs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) enum RunState {
    /// Another process is driving it now.
    Active,
    /// Nobody drives it and it has not ended: it can be resumed.
    Interrupted,
    /// Nobody drives it, and its script asked the person a question (`ask`) that has no
    /// answer yet, or it paused at a spend cap (`engine::caps`): `mekara answer` gives one,
    /// then the run can be resumed.
    WaitingForAnswer,
    /// The root script completed.
    Completed,
    /// The root script was finished by hand (an NL script, or after a failure).
    FinishedByAgent,
    /// The root script stopped itself (`fail()`, after a person's "no", say), or a script it
    /// called did: the run ended there, unfinished on purpose.
    Stopped,
    /// The root script failed and was finished by hand.
    FellBack,
    /// mekara was stopped after it created the run and before the script started: nothing
    /// ran, and there is nothing to resume.
    NotStarted,
    /// Submitted to a queue of the shared store (`mekara submit`), waiting for a worker.
    Queued,
    /// Stopped by `mekara runs cancel`.
    Cancelled,
}

impl RunState {
    /// Whether a run in this state has ended for good: its root script's frame was popped,
    /// or it was cancelled.
    pub(crate) fn has_ended(self) -> bool {
        matches!(
            self,
            RunState::Completed
                | RunState::FinishedByAgent
                | RunState::FellBack
                | RunState::Stopped
                | RunState::Cancelled
        )
    }
}

impl std::fmt::Display for RunState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunState::Active => "active",
            RunState::Interrupted => "interrupted",
            RunState::WaitingForAnswer => "waiting for an answer",
            RunState::Completed => "completed",
            RunState::FinishedByAgent => "finished by hand",
            RunState::Stopped => "stopped by the script",
            RunState::FellBack => "failed, finished by hand",
            RunState::NotStarted => "stopped before its script started",
            RunState::Queued => "queued",
            RunState::Cancelled => "cancelled",
        })
    }
}

/// One line of `mekara runs` (kept as JSON in the file store's index of runs).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub(crate) struct RunSummary {
    /// The id.
    pub id: String,
    /// The root script.
    pub script: String,
    /// Its state.
    pub state: RunState,
    /// Start time (Unix ms).
    pub started_at: u64,
    /// Steps journaled.
    pub steps: usize,
    /// When the last event was journaled (Unix ms): the run's last activity.
    pub last_at: u64,
    /// What its files take on disk, in bytes (the journal and the step group note).
    pub bytes: u64,
    /// Why the journal cannot be read, when it cannot.
    pub problem: Option<String>,
    /// The host that created it, in a shared store.
    pub host: Option<String>,
    /// The user who created it, in a shared store.
    pub user: Option<String>,
    /// The queue it was submitted to (`mekara submit`), in a shared store.
    pub queue: Option<String>,
    /// The host of the worker running it now, for a queued run.
    pub worker: Option<String>,
    /// What it does now, for a run a process holds, as the step group note on this host
    /// says (none when it says nothing current, or the run is held on another host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<super::group_note::Doing>,
}

/// What a run's events add up to, as `mekara runs` lists it: `contents` read from `label`
/// (or why they could not be), `busy` telling whether another process holds the run
/// (asked only of a run that has not ended), and what it takes in the store.
pub(crate) fn summarize(
    id: String,
    label: &Path,
    contents: Result<Contents, JournalError>,
    busy: &dyn Fn() -> bool,
    bytes: u64,
) -> RunSummary {
    let history = contents
        .and_then(|c| {
            let last_at = c.events.last().map_or(0, Event::at);
            // A run paused at a spend cap waits for a person, as one at a question does.
            let at_cap = super::journal::waiting_at_cap(&c.events).is_some();
            RunHistory::replay(label, &c.events).map(|h| (h, last_at, at_cap))
        })
        .map_err(|e| e.to_string());
    match history {
        Ok((h, last_at, at_cap)) => RunSummary {
            state: match h.outcome {
                _ if !h.started => RunState::NotStarted,
                _ if !h.frames.is_empty() && busy() => RunState::Active,
                _ if h
                    .frames
                    .last()
                    .is_some_and(|f| f.waiting_question().is_some()) =>
                {
                    RunState::WaitingForAnswer
                }
                _ if !h.frames.is_empty() && at_cap => RunState::WaitingForAnswer,
                _ if !h.frames.is_empty() => RunState::Interrupted,
                _ if h.root_fell_back => RunState::FellBack,
                Some(Outcome::Completed) => RunState::Completed,
                Some(Outcome::Stopped) => RunState::Stopped,
                _ => RunState::FinishedByAgent,
            },
            script: h.script.unwrap_or_default(),
            started_at: h.started_at,
            steps: h.steps,
            last_at,
            bytes,
            problem: None,
            host: None,
            user: None,
            queue: None,
            worker: None,
            now: None,
            id,
        },
        Err(problem) => RunSummary {
            id,
            script: String::new(),
            state: RunState::Interrupted,
            started_at: 0,
            steps: 0,
            last_at: 0,
            bytes,
            problem: Some(problem),
            host: None,
            user: None,
            queue: None,
            worker: None,
            now: None,
        },
    }
}

/// Which runs `mekara runs prune` removes.
#[derive(Debug, Clone, Default)]
pub(crate) struct PruneRule {
    /// Only runs whose last activity is at least this old.
    pub older_than: Option<std::time::Duration>,
    /// Keep this many of the newest runs (by start) among those the states select.
    pub keep: Option<usize>,
    /// Only runs in these states; empty means every ended run (interrupted runs can still
    /// be resumed, so they go only when asked for by name).
    pub states: Vec<RunState>,
}

impl PruneRule {
    /// The states a rule without `states` selects: every ended run.
    pub(crate) const ENDED: [RunState; 5] = [
        RunState::Completed,
        RunState::FinishedByAgent,
        RunState::FellBack,
        RunState::Stopped,
        RunState::NotStarted,
    ];

    /// The runs of `runs` (oldest first, as [`RunStore::list`] gives them) this rule
    /// removes at time `now_ms`, oldest first. Active and unreadable runs are never chosen.
    pub(crate) fn select<'a>(&self, runs: &'a [RunSummary], now_ms: u64) -> Vec<&'a RunSummary> {
        let states: &[RunState] = if self.states.is_empty() {
            &Self::ENDED
        } else {
            &self.states
        };
        let mut chosen: Vec<&RunSummary> = runs
            .iter()
            .filter(|r| r.problem.is_none() && r.state != RunState::Active)
            .filter(|r| states.contains(&r.state))
            .collect();
        chosen.sort_by_key(|r| (r.started_at, r.id.clone()));
        if let Some(keep) = self.keep {
            chosen.truncate(chosen.len().saturating_sub(keep));
        }
        if let Some(age) = self.older_than {
            let age = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
            chosen.retain(|r| now_ms.saturating_sub(r.last_at.max(r.started_at)) >= age);
        }
        chosen
    }
}

/// Whether `id` can be a run's id: a plain file name of ASCII letters, digits, `-` and `_`
/// (at most 64), so that `<id>.jsonl` and `<id>.group` stay in the runs folder. Every id
/// read from outside (a command line, an MCP call, a cassette) is checked with this.
pub(crate) fn is_run_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// `YYYYMMDD-HHMMSS-xxxx`: sortable by time, readable, and unlikely to collide.
pub(crate) fn new_id(attempt: u32) -> String {
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let digits: String = stamp.chars().filter(char::is_ascii_digit).collect();
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u32(attempt);
    hasher.write_u64(journal::now_ms());
    format!(
        "{}-{}-{:04x}",
        &digits[..8],
        &digits[8..14],
        hasher.finish() & 0xffff
    )
}

/// The agent that drove the run last, as the latest `agent` note of its `events` names it:
/// none for a terminal or MCP run, or a journal from before the note.
pub(crate) fn driven_by(events: &[Event]) -> Option<&AgentEvent> {
    events.iter().rev().find_map(|e| match e {
        Event::Agent(agent) => Some(agent),
        _ => None,
    })
}

/// The command that goes on with run `id` at the terminal (`--retry`: running its failed
/// step again), with `agent` (see [`driven_by`]), so that an unattended run goes on
/// unattended; without one, the plain command.
pub(crate) fn resume_command(id: &str, agent: Option<&AgentEvent>, retry: bool) -> String {
    let agent = agent.map(AgentEvent::flags).unwrap_or_default();
    let retry = if retry { " --retry" } else { "" };
    format!("mekara run --resume {id}{agent}{retry}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::journal::{
        FORMAT, Origin, PopEvent, Reason, RunEvent, StepEvent, SupersedeEvent,
    };
    use crate::engine::step::{StepInput, StepResult};

    fn header() -> Event {
        Event::Run(RunEvent {
            format: FORMAT.into(),
            mekara: "0".into(),
            id: "r".into(),
            token_sha256: None,
            at: 0,
        })
    }

    fn push() -> Event {
        Event::Push(PushEvent {
            depth: 0,
            script: "s".into(),
            compiled: true,
            request: String::new(),
            working_dir: "/".into(),
            origin: Origin::Start,
            called_as: None,
            allow_failure: false,
            at: 0,
        })
    }

    fn step(index: usize) -> Event {
        Event::Step(StepEvent {
            depth: 0,
            record: StepRecord {
                index,
                input: StepInput::Shell {
                    command: format!("echo {index}"),
                    working_dir: "/".into(),
                    env: std::collections::BTreeMap::new(),
                    shell: None,
                },
                context: None,
                result: StepResult::default(),
                allow_failure: false,
                parallel: None,
            },
            at: 0,
        })
    }

    fn supersede(line: usize) -> Event {
        Event::Supersede(SupersedeEvent {
            line,
            depth: 0,
            script: "s".into(),
            index: 0,
            reason: Reason::From,
            mekara: "0".into(),
            at: 0,
        })
    }

    fn pop() -> Event {
        Event::Pop(PopEvent {
            depth: 0,
            outcome: Outcome::Completed,
            error: None,
            agent: None,
            at: 0,
        })
    }

    fn steps_of(events: &[Event]) -> Vec<String> {
        let history = RunHistory::replay(Path::new("j"), events).expect("replay");
        history
            .frames
            .iter()
            .flat_map(|f| f.steps.iter().map(|s| s.input.summary()))
            .collect()
    }

    #[test]
    fn a_journal_without_supersede_replays_every_event() {
        let events = [header(), push(), step(0), step(1), pop()];
        assert_eq!(live(&events), Ok(vec![true; 5]));
        let history = RunHistory::replay(Path::new("j"), &events).expect("replay");
        assert_eq!((history.steps, history.superseded), (2, 0));
        assert_eq!(history.outcome, Some(Outcome::Completed));
    }

    #[test]
    fn supersede_takes_the_events_from_its_line_out_and_reopens_the_frame() {
        // Lines: 1 header, 2 push, 3 step 0, 4 step 1, 5 pop, 6 supersede from line 4.
        let events = [
            header(),
            push(),
            step(0),
            step(1),
            pop(),
            supersede(4),
            step(1),
        ];
        assert_eq!(
            live(&events),
            Ok(vec![true, true, true, false, false, false, true])
        );
        let history = RunHistory::replay(Path::new("j"), &events).expect("replay");
        assert_eq!((history.steps, history.superseded), (2, 1));
        assert_eq!(history.outcome, None, "the root frame is open again");
        assert_eq!(history.frames.len(), 1);
    }

    #[test]
    fn a_later_supersede_never_brings_superseded_events_back() {
        // 1 header, 2 push, 3 step 0, 4 step 1, 5 supersede from 3, 6 step 0', 7 supersede
        // from 4 (before line 6: it cuts only what is live from there), 8 step 0''.
        let events = [
            header(),
            push(),
            step(0),
            step(1),
            supersede(3),
            step(0),
            supersede(4),
            step(0),
        ];
        let live = live(&events).expect("live");
        assert_eq!(
            live,
            vec![true, true, false, false, false, false, false, true]
        );
        assert_eq!(steps_of(&events), ["$ echo 0"]);
    }

    #[test]
    fn a_supersede_pointing_at_the_header_or_past_itself_is_damage() {
        for line in [0, 1, 4] {
            let events = [header(), push(), step(0), supersede(line)];
            let err = RunHistory::replay(Path::new("j"), &events).expect_err("corrupt");
            assert!(
                err.to_string().contains("is damaged at line 4"),
                "{line}: {err}"
            );
        }
    }
}
