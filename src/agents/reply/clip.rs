//! Clipping long text for a reply: an output's head and tail ([`head_and_tail`]), a line cut at
//! [`MAX_LINE`] characters, indenting.

use std::fmt::Write as _;

/// The most lines of one step's output a reply shows; the rest stays in the journal.
pub(super) const HEAD_LINES: usize = 40;

pub(super) const TAIL_LINES: usize = 20;

/// How many lines of a long output are shown, first and last, where nothing else crowds
/// it: the newest steps of a reply, and the viewer.
pub(crate) const SHOWN_LINES: (usize, usize) = (HEAD_LINES, TAIL_LINES);

/// The most lines that carry an error ([`error_lines`]) a long output's cut part keeps.
const KEPT_ERROR_LINES: usize = 30;

/// Words of an output line that carries an error or a warning (a compiler's `error[E0425]`
/// and its `--> src/lib.rs:3:5`, a test runner's `FAILED`, a panic, a traceback; Go's
/// `--- FAIL: TestX` and the `x_test.go:12: got 1, want 2` lines under it).
const ERROR_MARKERS: [&str; 12] = [
    "error",
    "Error",
    "ERROR",
    "warning:",
    "FAILED",
    "FAIL ",
    "-->",
    "panicked",
    "Traceback",
    "assert",
    "--- FAIL",
    "_test.go:",
];

/// The indices of the first `most` of `lines` that carry an error ([`ERROR_MARKERS`]): what
/// a long output's clipping keeps from the part it cuts.
fn error_lines(lines: &[&str], most: usize) -> Vec<usize> {
    lines
        .iter()
        .enumerate()
        .filter(|(_, line)| ERROR_MARKERS.iter().any(|m| line.contains(m)))
        .map(|(index, _)| index)
        .take(most)
        .collect()
}

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
    // The lines that carry an error are kept from the cut part: the error a check printed
    // after many lines of downloads is what the agent needs, not what clipping may hide. Not
    // where a reply over its budget shortens older outputs further.
    let end = lines.len() - tail;
    let most = if head >= HEAD_LINES {
        KEPT_ERROR_LINES
    } else {
        0
    };
    let kept = error_lines(&lines[head..end], most);
    let mut from = head;
    for index in kept.iter().map(|k| k + head).chain([end]) {
        let cut = index - from;
        if cut > 0 && from == head {
            let _ = writeln!(
                shown,
                "… {cut} lines cut here (lines {}–{} of {}); {whole} …",
                from + 1,
                index,
                lines.len()
            );
        } else if cut > 0 {
            let _ = writeln!(
                shown,
                "… {cut} lines cut here (lines {}–{}) …",
                from + 1,
                index
            );
        }
        if index < end {
            let _ = writeln!(shown, "{}", clip_line(lines[index]));
        }
        from = index + 1;
    }
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
