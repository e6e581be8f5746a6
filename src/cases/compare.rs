//! What a case expects against what its run gave: each difference as text a person reads
//! (a line diff for texts and the step list), and the step where the run parted from the
//! case.
//!
//! Paths of the scratch project in what the run printed are written `{project}` (and its
//! home `{home}`) before they are compared, so a case never names a temporary folder.

use std::path::Path;

use super::case::{Expect, Text};
use super::run::{Report, StepRun, Unanswered, same_step};

/// What came of comparing.
#[derive(Debug, Default)]
pub(crate) struct Verdict {
    /// Each difference, in words and diffs; none when the case passed.
    pub failures: Vec<String>,
    /// The step where the run parted from the case, when that can be told.
    pub parted: Option<String>,
}

impl Verdict {
    pub(crate) fn passed(&self) -> bool {
        self.failures.is_empty()
    }
}

/// The scratch paths to hide in what a run printed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Places<'a> {
    pub project: &'a Path,
    pub home: &'a Path,
}

impl Places<'_> {
    /// `text` with the scratch project's path written `{project}` and its home `{home}`.
    pub(crate) fn hide(&self, text: &str) -> String {
        let mut text = text.to_string();
        for (path, name) in [(self.project, "{project}"), (self.home, "{home}")] {
            for form in [Some(path.to_path_buf()), path.canonicalize().ok()]
                .into_iter()
                .flatten()
            {
                let shown = form.display().to_string();
                if !shown.is_empty() {
                    text = text.replace(&shown, name);
                }
            }
        }
        text
    }
}

impl Places<'_> {
    /// `step` with the scratch paths hidden in its summary and output.
    pub(crate) fn hide_step(&self, step: &StepRun) -> StepRun {
        StepRun {
            summary: self.hide(&step.summary),
            output: self.hide(&step.output),
            ..step.clone()
        }
    }
}

/// The state a case expects when it names none.
pub(crate) const DEFAULT_END: &str = "completed";

/// What a command of `[[expect.command]]` gave: its exit code (`None`: it could not run, or
/// a signal ended it) and its output.
pub(crate) type Ran = (Option<i32>, String);

/// Compares the run `report` (its project at `places.project`) with `expect`; `commands` are
/// what the commands of `expect.command` gave, in order.
pub(crate) fn compare(
    expect: &Expect,
    report: &Report,
    places: Places<'_>,
    commands: &[Ran],
) -> Verdict {
    let mut verdict = Verdict::default();
    let steps: Vec<StepRun> = report.steps.iter().map(|s| places.hide_step(s)).collect();
    for item in &report.unanswered {
        verdict.failures.push(unanswered(item));
        verdict.parted.get_or_insert_with(|| item.step.clone());
    }
    let end = expect.end.as_deref().unwrap_or(DEFAULT_END);
    // An unanswered item already says why the run did not end as it should.
    if report.end != end && report.unanswered.is_empty() {
        let why = report
            .why
            .as_deref()
            .map(|w| format!(":\n{}", indent(&places.hide(w))))
            .unwrap_or_default();
        verdict.failures.push(format!(
            "the run ended `{}`, the case expects `{end}`{why}",
            report.end
        ));
    }
    if let Some(expected) = &expect.steps {
        let actual: Vec<String> = steps.iter().map(StepRun::line).collect();
        if *expected != actual {
            let at = expected
                .iter()
                .zip(&actual)
                .position(|(e, a)| e != a)
                .unwrap_or(expected.len().min(actual.len()));
            let parted = match (expected.get(at), actual.get(at)) {
                (Some(e), Some(a)) => {
                    format!("step {} ran `{a}` where the case expects `{e}`", at + 1)
                }
                (Some(e), None) => format!("the run ended before step {}, `{e}`", at + 1),
                (None, Some(a)) => {
                    format!("step {}, `{a}`, is one more than the case expects", at + 1)
                }
                (None, None) => String::new(),
            };
            verdict.failures.push(format!(
                "the steps differ from `[expect] steps`: {parted}\n{}",
                diff(&lines(expected), &lines(&actual))
            ));
            let label = actual
                .get(at)
                .or(expected.get(at))
                .and_then(|l| l.split(' ').next())
                .unwrap_or_default()
                .to_string();
            verdict.parted.get_or_insert(label);
        }
    }
    if verdict.parted.is_none() && !verdict.failures.is_empty() {
        verdict.parted = steps
            .iter()
            .rev()
            .find(|s| !s.success)
            .or(steps.last())
            .map(|s| s.label.clone());
    }
    for (path, text) in &expect.files {
        let content = std::fs::read(places.project.join(path))
            .ok()
            .map(|b| String::from_utf8_lossy(&b).into_owned());
        if let Some(problem) = differs(text, content.as_deref()) {
            verdict.failures.push(format!("file `{path}` {problem}"));
        }
    }
    for step in &expect.step {
        let Some(ran) = steps.iter().find(|s| same_step(&s.label, &step.step)) else {
            verdict.failures.push(format!(
                "`[[expect.step]]` `{}`: the run has no such step (its steps: {})",
                step.step,
                crate::display::quoted(steps.iter().map(|s| &s.label))
            ));
            continue;
        };
        if let Some(code) = step.exit_code
            && ran.exit_code != Some(code)
        {
            let got = ran
                .exit_code
                .map_or_else(|| "no exit code".to_string(), |c| format!("exit code {c}"));
            verdict.failures.push(format!(
                "step `{}` (`{}`) ended with {got}, the case expects {code}",
                ran.label, ran.summary
            ));
        }
        if let Some(text) = &step.output
            && let Some(problem) = differs(text, Some(&ran.output))
        {
            verdict
                .failures
                .push(format!("the output of step `{}` {problem}", ran.label));
        }
    }
    for (command, (code, output)) in expect.command.iter().zip(commands) {
        let output = places.hide(output);
        if *code != Some(command.exit_code) {
            let got = code.map_or_else(|| "no exit code".to_string(), |c| format!("exit code {c}"));
            verdict.failures.push(format!(
                "the command `{}` ended with {got}, the case expects {}; it printed:\n{}",
                command.run,
                command.exit_code,
                indent(&crate::display::clipped(&output, 2000))
            ));
        } else if let Some(text) = &command.output
            && let Some(problem) = differs(text, Some(&output))
        {
            verdict
                .failures
                .push(format!("the output of `{}` {problem}", command.run));
        }
    }
    verdict
}

/// What is wrong with `actual` (`None`: no such file) against `expected`, or `None`.
fn differs(expected: &Text, actual: Option<&str>) -> Option<String> {
    match (expected, actual) {
        (Text::Absent, None) => None,
        (Text::Absent, Some(_)) => Some("exists, and the case expects it not to".to_string()),
        (_, None) => Some("does not exist".to_string()),
        (Text::Exact(e), Some(a)) if e == a => None,
        (Text::Exact(e), Some(a)) => Some(format!(
            "differs from what the case expects:\n{}",
            diff(e, a)
        )),
        (Text::Matches(p), Some(a)) if p.is_match(a) => None,
        (Text::Matches(p), Some(a)) => Some(format!(
            "does not match `{}`; it holds:\n{}",
            p.as_str(),
            indent(&crate::display::clipped(a, 2000))
        )),
        (Text::Contains(part), Some(a)) if a.contains(part.as_str()) => None,
        (Text::Contains(part), Some(a)) => Some(format!(
            "does not contain `{part}`; it holds:\n{}",
            indent(&crate::display::clipped(a, 2000))
        )),
    }
}

/// What a failure says of an item the case did not answer.
fn unanswered(item: &Unanswered) -> String {
    let asked = indent(&crate::display::clipped(&item.asked, 1200));
    if item.what == "question" {
        return if item.problem.is_empty() {
            format!(
                "the case gives no answer to the question of `{}`:\n{asked}\n  give it with an `[[ask]]` answer",
                item.step
            )
        } else {
            format!(
                "the question of `{}` is not the one the case answers next ({}):\n{asked}",
                item.step, item.problem
            )
        };
    }
    if item.problem.is_empty() {
        format!(
            "the case gives no answer to {} `{}`:\n{asked}\n  give it with an `[[agent]]` answer: `step = \"{}\"` or a `prompt` pattern of its instructions, and its `outputs`",
            item.what, item.step, item.step
        )
    } else {
        format!("{} `{}`: {}", item.what, item.step, item.problem)
    }
}

/// Lines joined with a newline after each.
fn lines(lines: &[String]) -> String {
    lines.iter().flat_map(|l| [l.as_str(), "\n"]).collect()
}

/// A line diff of `expected` against `actual`, indented.
pub(crate) fn diff(expected: &str, actual: &str) -> String {
    let diff = similar::TextDiff::from_lines(expected, actual);
    let text = diff
        .unified_diff()
        .context_radius(3)
        .missing_newline_hint(true)
        .header("expected", "actual")
        .to_string();
    indent(text.trim_end())
}

/// `text` indented by two spaces.
fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_differing_step_list_says_where_the_run_parted_with_a_diff() {
        let step = |label: &str, summary: &str| StepRun {
            label: label.to_string(),
            summary: summary.to_string(),
            success: true,
            ..StepRun::default()
        };
        let report = Report {
            end: "completed".to_string(),
            steps: vec![step("x[0]", "$ true"), step("x[1]", "$ echo b")],
            ..Report::default()
        };
        let expect = Expect {
            steps: Some(vec!["x[0] $ true".to_string(), "x[1] $ echo a".to_string()]),
            ..Expect::default()
        };
        let dir = tempfile::tempdir().expect("tempdir");
        let places = Places {
            project: dir.path(),
            home: dir.path(),
        };
        let verdict = compare(&expect, &report, places, &[]);
        assert_eq!(verdict.parted.as_deref(), Some("x[1]"));
        assert_eq!(
            verdict.failures,
            [
                "the steps differ from `[expect] steps`: step 2 ran `x[1] $ echo b` where the case expects `x[1] $ echo a`\n  --- expected\n  +++ actual\n  @@ -1,2 +1,2 @@\n   x[0] $ true\n  -x[1] $ echo a\n  +x[1] $ echo b"
            ]
        );
    }
}
