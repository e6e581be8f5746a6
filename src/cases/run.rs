//! One run of a case: what the runner is asked to run ([`Drive`]), the in-process stand-ins
//! for the agent ([`CaseAgent`], behind the same [`Agent`] trait `mekara run --agent` drives
//! real agents through) and for the person ([`CasePerson`]), and what the run gave
//! ([`Report`]).
//!
//! The stand-ins never guess: a step or question the case gives no answer to is noted (and
//! fails the case, naming the step), never answered with something made up.

use std::collections::VecDeque;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Map;

use super::case::{AgentAnswer, AskAnswer, Case, compile};
use crate::agents::headless::{Agent, Kind, Reply, Request};
use crate::engine::CancelToken;
use crate::engine::step::AgentReport;

/// What the runner runs: the case's script, arguments and answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Drive {
    pub script: String,
    pub arguments: String,
    /// The script is the project's own (a project case), even with a bundled script's name.
    pub project_script: bool,
    pub agent: Vec<AgentAnswer>,
    pub ask: Vec<AskAnswer>,
}

impl Drive {
    /// What runs `case`.
    pub(crate) fn of(case: &Case) -> Drive {
        Drive {
            script: case.script.clone(),
            arguments: case.arguments.clone(),
            project_script: matches!(case.origin, super::case::Origin::Project(_)),
            agent: case.agent.clone(),
            ask: case.ask.clone(),
        }
    }
}

/// What a run of a case gave.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Report {
    /// Its end state (`completed`, `waiting`, ...), or `not_started`.
    pub end: String,
    /// What the run said when it did not complete.
    pub why: Option<String>,
    pub run_id: Option<String>,
    /// The steps, in journal order.
    pub steps: Vec<StepRun>,
    /// What the case gave no answer to, or answered wrongly.
    pub unanswered: Vec<Unanswered>,
}

/// A step of the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct StepRun {
    /// Its label (`flow:commit[3]`).
    pub label: String,
    /// What it was, in one line (`$ git status --porcelain`).
    pub summary: String,
    pub success: bool,
    pub exit_code: Option<i32>,
    pub output: String,
    pub error: Option<String>,
}

impl StepRun {
    /// Its line in a case's `[expect] steps`.
    pub(crate) fn line(&self) -> String {
        format!("{} {}", self.label, self.summary)
    }
}

/// An item of the run the case did not answer as it should have.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Unanswered {
    /// The step's label.
    pub step: String,
    /// `llm step`, `NL script`, `failed script to finish by hand`, `question`.
    pub what: String,
    /// What was asked (the step's instructions, the question).
    pub asked: String,
    /// Why the case's answer did not do (empty when there was none).
    pub problem: String,
}

/// The agent of a case: answers each llm step (or NL script) from the case's `[[agent]]`
/// answers, running an answer's `run` in the project first.
pub(crate) struct CaseAgent {
    answers: Vec<AgentAnswer>,
    patterns: Vec<Option<regex::Regex>>,
    /// The next answer with neither `step` nor `prompt` to give.
    next_in_order: usize,
    /// What it could not answer.
    pub unanswered: Vec<Unanswered>,
}

impl CaseAgent {
    pub(crate) fn new(answers: Vec<AgentAnswer>) -> CaseAgent {
        // The case was checked when it was read: its patterns compile.
        let patterns = answers
            .iter()
            .map(|a| a.prompt.as_deref().and_then(|p| compile(p).ok()))
            .collect();
        CaseAgent {
            answers,
            patterns,
            next_in_order: 0,
            unanswered: Vec::new(),
        }
    }

    /// The answer for the step `label` with `instructions`: the first whose `step` and
    /// `prompt` both fit, else the next one that names neither.
    fn find(&mut self, label: &str, instructions: &str) -> Option<AgentAnswer> {
        let keyed = self.answers.iter().zip(&self.patterns).position(|(a, p)| {
            let by_label = a.step.as_deref().map(|s| same_step(label, s));
            let by_prompt = p.as_ref().map(|p| p.is_match(instructions));
            match (by_label, by_prompt) {
                (None, None) => false,
                (l, p) => l.unwrap_or(true) && p.unwrap_or(true),
            }
        });
        if let Some(at) = keyed {
            return Some(self.answers[at].clone());
        }
        let unkeyed = self
            .answers
            .iter()
            .enumerate()
            .filter(|(_, a)| a.step.is_none() && a.prompt.is_none())
            .map(|(at, _)| at)
            .nth(self.next_in_order)?;
        self.next_in_order += 1;
        Some(self.answers[unkeyed].clone())
    }
}

/// Whether the step with stack path `path` (`test:nested[0] > test:random[1]`) is the one a
/// case names `label` (its whole path, or its last part).
pub(crate) fn same_step(path: &str, label: &str) -> bool {
    let label = label.trim().replace('/', ":");
    path == label || path.ends_with(&format!(" > {label}"))
}

/// The pending item in the text an agent would be given: what follows its last `## Your
/// turn` heading (what a case's `prompt` pattern is matched against).
pub(crate) fn your_turn(prompt: &str) -> &str {
    prompt
        .rfind("## Your turn")
        .map_or(prompt, |at| &prompt[at..])
}

/// What a person reads of an item nobody answered: its heading and its `<instructions>`,
/// without the NL source shown for context.
fn shown(turn: &str) -> String {
    let heading = turn.lines().next().unwrap_or_default();
    let between = turn.find("<instructions>").and_then(|start| {
        let rest = &turn[start + "<instructions>".len()..];
        rest.find("</instructions>").map(|end| rest[..end].trim())
    });
    match between {
        Some(instructions) => format!("{heading}\n{instructions}"),
        None => turn.trim().to_string(),
    }
}

impl Agent for CaseAgent {
    fn ask(&mut self, request: &Request, timeout: Duration, cancel: &CancelToken) -> Reply {
        if cancel.is_cancelled() {
            return Reply::Cancelled;
        }
        let what = match request.kind {
            Kind::Llm => "llm step",
            Kind::Nl => "NL script",
            Kind::Fallback => "failed script to finish by hand",
        };
        let asked = your_turn(&request.prompt);
        let Some(answer) = self.find(&request.step, asked) else {
            self.unanswered.push(Unanswered {
                step: request.step.clone(),
                what: what.to_string(),
                asked: shown(asked),
                problem: String::new(),
            });
            return Reply::Failed(
                format!("the test case gives no answer to {what} `{}`", request.step),
                AgentReport::default(),
            );
        };
        if let Some(command) = &answer.run
            && let Err(problem) = run(command, request, timeout)
        {
            self.unanswered.push(Unanswered {
                step: request.step.clone(),
                what: what.to_string(),
                asked: shown(asked),
                problem: problem.clone(),
            });
            return Reply::Failed(problem, AgentReport::default());
        }
        match answer.error {
            Some(error) => Reply::Failed(error, AgentReport::default()),
            None if request.kind == Kind::Llm => Reply::Outputs(answer.outputs, report()),
            None => Reply::Outputs(Map::new(), report()),
        }
    }
}

/// What a case's answer reports: no cost, no session.
fn report() -> AgentReport {
    AgentReport {
        attempts: 1,
        ..AgentReport::default()
    }
}

/// Runs an answer's `run` in the step's folder, at most `timeout`.
fn run(command: &str, request: &Request, timeout: Duration) -> Result<(), String> {
    use std::io::Read as _;
    let mut child = std::process::Command::new("sh")
        .arg("-c")
        .arg(command)
        .current_dir(&request.working_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("the case's answer could not run `{command}`: {e}"))?;
    let started = std::time::Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < timeout => {
                std::thread::sleep(Duration::from_millis(2));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the case's answer `{command}` did not end within {} s",
                    timeout.as_secs()
                ));
            }
        }
    };
    if status.success() {
        return Ok(());
    }
    let mut said = String::new();
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read>),
    ]
    .into_iter()
    .flatten()
    {
        let _ = pipe.take(4096).read_to_string(&mut said);
    }
    let code = status
        .code()
        .map_or_else(|| "a signal".to_string(), |c| format!("exit code {c}"));
    Err(format!(
        "the case's answer `{command}` failed ({code}): {}",
        said.trim()
    ))
}

/// The person of a case: answers the questions (`ask()`) with the case's `[[ask]]` answers,
/// in order.
pub(crate) struct CasePerson {
    answers: VecDeque<AskAnswer>,
    /// What it could not answer.
    pub unanswered: Vec<Unanswered>,
}

impl CasePerson {
    pub(crate) fn new(answers: Vec<AskAnswer>) -> CasePerson {
        CasePerson {
            answers: answers.into(),
            unanswered: Vec::new(),
        }
    }

    /// The answer to the question `question` of step `path`, or `None` (noted) when the case
    /// has none left, or its next one is for another question.
    pub(crate) fn answer(
        &mut self,
        path: &str,
        question: &str,
        choices: Option<&[String]>,
    ) -> Option<String> {
        let mut asked = question.trim().to_string();
        if let Some(choices) = choices {
            asked.push_str(&format!(" (choices: {})", crate::display::quoted(choices)));
        }
        let mut refused = |problem: String| {
            self.unanswered.push(Unanswered {
                step: path.to_string(),
                what: "question".to_string(),
                asked: asked.clone(),
                problem,
            });
            None
        };
        let Some(next) = self.answers.pop_front() else {
            return refused(String::new());
        };
        if let Some(pattern) = &next.question
            && !compile(pattern).is_ok_and(|p| p.is_match(question))
        {
            return refused(format!(
                "the case's next `[[ask]]` answer is for a question matching `{pattern}`"
            ));
        }
        Some(next.answer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(step: Option<&str>, prompt: Option<&str>, n: i64) -> AgentAnswer {
        AgentAnswer {
            step: step.map(String::from),
            prompt: prompt.map(String::from),
            outputs: Map::from_iter([("n".to_string(), n.into())]),
            ..AgentAnswer::default()
        }
    }

    #[test]
    fn answers_are_found_by_label_by_prompt_then_in_order() {
        let mut agent = CaseAgent::new(vec![
            answer(None, None, 1),
            answer(Some("x:y[2]"), None, 2),
            answer(None, Some("Step [34]"), 3),
            answer(None, None, 4),
        ]);
        let n = |a: Option<AgentAnswer>| a.map(|a| a.outputs["n"].clone());
        assert_eq!(n(agent.find("a[0] > x:y[2]", "Step 3")), Some(2.into()));
        assert_eq!(n(agent.find("x:y[5]", "do Step 4 now")), Some(3.into()));
        assert_eq!(n(agent.find("x:y[6]", "other")), Some(1.into()));
        assert_eq!(n(agent.find("x:y[7]", "other")), Some(4.into()));
        assert_eq!(n(agent.find("x:y[8]", "other")), None);
        assert!(same_step("flow:commit[3]", "flow/commit[3]"));
        assert!(!same_step("flow:commit[31]", "commit[3]"));
    }

    #[test]
    fn the_person_answers_in_order_and_notes_a_question_it_has_no_answer_for() {
        let mut person = CasePerson::new(vec![
            AskAnswer {
                question: Some("bump".to_string()),
                answer: "minor".to_string(),
            },
            AskAnswer {
                question: Some("Tag".to_string()),
                answer: "yes".to_string(),
            },
        ]);
        assert_eq!(
            person.answer("r[1]", "Which bump?", None).as_deref(),
            Some("minor")
        );
        assert_eq!(person.answer("r[4]", "Commit it?", None), None);
        assert_eq!(person.answer("r[5]", "Again?", None), None);
        assert_eq!(person.unanswered.len(), 2);
        assert!(person.unanswered[0].problem.contains("matching `Tag`"));
        assert_eq!(person.unanswered[1].problem, "");
    }
}
