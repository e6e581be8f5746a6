//! Clipping long text for a reply: an output's head and tail ([`head_and_tail`]), a line cut at
//! [`MAX_LINE`] characters, indenting.

use std::fmt::Write as _;

/// The most lines of one step's output a reply shows; the rest stays in the journal.
pub(super) const HEAD_LINES: usize = 40;

pub(super) const TAIL_LINES: usize = 20;

/// How many lines of a long output are shown, first and last, where nothing else crowds
/// it: the newest steps of a reply, and the viewer.
pub(crate) const SHOWN_LINES: (usize, usize) = (HEAD_LINES, TAIL_LINES);

/// The most characters of one output line (or of a function step's echoed call) a reply
/// shows.
const MAX_LINE: usize = 400;

/// `line` whole, or its first [`MAX_LINE`] characters and a note that it was cut.
pub(super) fn clip_line(line: &str) -> String {
    if line.chars().count() <= MAX_LINE {
        line.to_string()
    } else {
        let kept: String = line.chars().take(MAX_LINE).collect();
        format!("{kept}… [line cut at {MAX_LINE} characters]")
    }
}

/// Keeps the head and tail of a long output (`lines`: how many of each), with a line saying
/// what was cut and where the whole of it is.
pub(super) fn shorten(output: &str, source: Option<(&str, &str)>, lines: (usize, usize)) -> String {
    let whole = match source {
        Some((run, step)) => {
            format!("the whole output is in the journal: `mekara runs show {run}`, step {step}")
        }
        None => "the whole output is in the run's journal".to_string(),
    };
    head_and_tail(output, &whole, lines)
}

/// `output`'s first `head` and last `tail` lines (each line cut at [`MAX_LINE`] characters),
/// with a line saying what was cut and, in `whole`, where the whole of it is: what MCP
/// replies and the viewer show of a step's output.
pub(crate) fn head_and_tail(output: &str, whole: &str, (head, tail): (usize, usize)) -> String {
    let lines: Vec<&str> = output.lines().collect();
    let mut shown = String::new();
    if lines.len() <= head + tail {
        for line in &lines {
            let _ = writeln!(shown, "{}", clip_line(line));
        }
        return shown;
    }
    for line in &lines[..head] {
        let _ = writeln!(shown, "{}", clip_line(line));
    }
    let cut = lines.len() - head - tail;
    let _ = writeln!(
        shown,
        "… {cut} lines cut here (lines {}–{} of {}); {whole} …",
        head + 1,
        head + cut,
        lines.len()
    );
    for line in &lines[lines.len() - tail..] {
        let _ = writeln!(shown, "{}", clip_line(line));
    }
    shown
}

/// Indents every line of `text` by `by`; the result ends with a newline.
pub(super) fn indent(text: &str, by: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.is_empty() {
            out.push('\n');
        } else {
            let _ = writeln!(out, "{by}{line}");
        }
    }
    out
}
