//! `docs/tutorial.md`, followed literally: its files are written and its commands typed as
//! the page gives them, so a change of the page that no longer works fails here. The Claude
//! Code part (`/compile`, `/describe`) is followed by
//! `claude_code::the_first_hour_in_claude_code`.

use crate::common::{Project, Run, run_with_stdin};

/// The tutorial's text.
pub(crate) const TUTORIAL: &str = include_str!("../../docs/tutorial.md");

/// A fenced block of the tutorial: its info string (`sh`, `markdown file=PATH`, ...) and text.
pub(crate) struct Block {
    pub info: String,
    pub text: String,
}

impl Block {
    /// The file a block is the content of (`file=PATH` in its info string).
    pub(crate) fn file(&self) -> Option<&str> {
        self.info
            .split_whitespace()
            .find_map(|w| w.strip_prefix("file="))
    }

    /// The lines of a block, without blank ones.
    pub(crate) fn lines(&self) -> impl Iterator<Item = &str> {
        self.text.lines().filter(|l| !l.trim().is_empty())
    }
}

/// Every fenced block of the tutorial, in order.
pub(crate) fn blocks() -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = TUTORIAL.lines();
    while let Some(line) = lines.next() {
        let Some(info) = line.strip_prefix("```") else {
            continue;
        };
        let mut text = String::new();
        for line in lines.by_ref() {
            if line == "```" {
                break;
            }
            text.push_str(line);
            text.push('\n');
        }
        blocks.push(Block {
            info: info.to_string(),
            text,
        });
    }
    blocks
}

/// The tutorial's file of that path.
pub(crate) fn file(path: &str) -> String {
    blocks()
        .into_iter()
        .find(|b| b.file() == Some(path))
        .unwrap_or_else(|| panic!("docs/tutorial.md has no block `file={path}`"))
        .text
}

/// The prompts the tutorial types in Claude Code, in order.
pub(crate) fn claude_code_prompts() -> Vec<String> {
    blocks()
        .iter()
        .filter(|b| b.info == "text claude-code")
        .flat_map(|b| b.lines().map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// The run id in `resume it with `mekara run --resume ID``.
fn resumable_id(run: &Run) -> String {
    let text = format!("{}{}", run.stdout, run.stderr);
    let at = text
        .find("mekara run --resume ")
        .unwrap_or_else(|| panic!("no resume hint:\n{text}"));
    text[at + "mekara run --resume ".len()..]
        .split(|c: char| c == '`' || c.is_whitespace())
        .next()
        .expect("an id")
        .to_string()
}

#[test]
fn the_tutorial_works_as_written_in_the_terminal() {
    let project = Project::new();
    // What the person types at the questions: the file the page says to answer, then Enter.
    let answers = "notes.txt\n\n";
    let mut runs_of_describe = 0;
    let mut completed_id = None;
    let mut interrupted_id = None;
    let mut typed = Vec::new();
    for block in blocks() {
        if let Some(path) = block.file() {
            project.write(path, &block.text);
            continue;
        }
        if block.info != "sh" {
            continue;
        }
        for line in block.lines() {
            let mut line = line.to_string();
            let stdin = match line.as_str() {
                "mekara run describe" => {
                    runs_of_describe += 1;
                    // The second run is the one the page interrupts with Ctrl-D.
                    if runs_of_describe == 1 { answers } else { "" }
                }
                "mekara run --resume ID" => {
                    line = line.replace("ID", interrupted_id.as_deref().expect("interrupted"));
                    answers
                }
                "mekara runs show ID" => {
                    line = line.replace("ID", completed_id.as_deref().expect("a run"));
                    ""
                }
                _ => "",
            };
            let run = run_with_stdin(project.shell(&line), stdin);
            let out = project.scrub(&format!("{}{}", run.stdout, run.stderr));
            match (line.as_str(), runs_of_describe) {
                ("mekara check describe", _) => {
                    run.expect_code(0);
                    insta::assert_snapshot!("tutorial_check", out);
                }
                ("mekara run describe", 1) => {
                    run.expect_code(0);
                    insta::assert_snapshot!("tutorial_first_run", out);
                    completed_id = project.run_ids().first().cloned();
                }
                ("mekara run describe", _) => {
                    run.expect_code(1);
                    insta::assert_snapshot!("tutorial_interrupted_run", out);
                    interrupted_id = Some(resumable_id(&run));
                }
                ("mekara runs", _) => {
                    run.expect_code(0);
                    insta::assert_snapshot!("tutorial_runs", out);
                }
                (l, _) if l.starts_with("mekara runs show ") => {
                    run.expect_code(0);
                    insta::assert_snapshot!("tutorial_runs_show", out);
                }
                (l, _) if l.starts_with("mekara run --resume ") => {
                    run.expect_code(0);
                    // `ls` ran once, before the interruption; the resumed run asked on.
                    assert!(!out.contains("▶ describe[0] $ ls"), "{out}");
                    insta::assert_snapshot!("tutorial_resumed", out);
                }
                _ => {
                    assert!(run.code == Some(0), "`{line}` failed:\n{out}");
                }
            }
            typed.push(
                line.split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
    }
    // Every stage of the page was walked.
    for stage in [
        "mekara install",
        "mekara check describe",
        "mekara run describe",
        "mekara runs",
        "mekara runs show",
        "mekara run --resume",
    ] {
        assert!(
            typed.iter().any(|t| t == stage),
            "the page no longer types `{stage}`: {typed:?}"
        );
    }
    assert_eq!(runs_of_describe, 2, "{typed:?}");
    assert_eq!(claude_code_prompts(), ["/compile describe", "/describe"]);
}
