//! Small display helpers shared by the command line, the MCP servers and `mekara install`:
//! times, kinds of JSON values, lists of names. They only format; what a message says is
//! up to its caller, and nothing here depends on the command line or the servers.

use std::fmt::Display;

use serde_json::Value as Json;

/// `2026-11-22T03:05:12Z` from Unix milliseconds.
pub(crate) fn format_time(ms: u64) -> String {
    let time = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    humantime::format_rfc3339_seconds(time).to_string()
}

/// `` `a` called `b`, which called `c` ``: a chain of script calls, from the caller down.
pub(crate) fn call_chain(names: &[String]) -> String {
    let mut said = String::new();
    for (at, name) in names.iter().enumerate() {
        said.push_str(match at {
            0 => "",
            1 => " called ",
            _ => ", which called ",
        });
        said.push_str(&format!("`{name}`"));
    }
    said
}

/// `a`, `a and b`, `a, b and c`: items said as one list.
pub(crate) fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// `512 B`, `12.3 KiB`, `4.0 MiB`: a size in bytes, for people.
pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    #[allow(clippy::cast_precision_loss)] // a size shown to one decimal
    let mut size = n as f64 / 1024.0;
    let mut unit = 0;
    while size >= 1024.0 && unit + 1 < UNITS.len() {
        size /= 1024.0;
        unit += 1;
    }
    format!("{size:.1} {}", UNITS[unit])
}

/// `a string`, `an array`, … for error messages.
pub(crate) fn json_type(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}

/// `` `a`, `b` ``: names in backticks, joined by commas.
pub(crate) fn quoted<T: Display>(names: impl IntoIterator<Item = T>) -> String {
    names
        .into_iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `1 step`, `3 steps`: a count and its noun, plural when it is not one.
pub(crate) fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// The mark of a called script's end: `←` it returned, `⚠` it failed but its caller had said
/// `allow_failure = True`, `✗` it failed.
pub(crate) fn return_mark(success: bool, allow_failure: bool) -> &'static str {
    if success {
        "←"
    } else {
        outcome_mark(success, allow_failure)
    }
}

/// `✓` it succeeded, `⚠` it failed but the script had said `allow_failure = True` (it
/// received the result and went on), `✗` it failed.
pub(crate) fn outcome_mark(success: bool, allow_failure: bool) -> &'static str {
    if success {
        "✓"
    } else if allow_failure {
        "⚠"
    } else {
        "✗"
    }
}

/// The most of a script's arguments a reply or a hook repeats back (`status`, the hooks): the
/// arguments themselves may be megabytes, and whoever reads the reply has them already.
pub(crate) const SHOWN_ARGUMENTS: usize = 4096;

/// The most of an input (a name, an id, a value someone typed or sent) an error message
/// repeats back: enough to recognise it, and a 120 KB mistake does not make a 120 KB error.
pub(crate) const ECHOED: usize = 200;

/// The first line of `text` that is not blank, trimmed ("" when there is none).
pub(crate) fn first_line(text: &str) -> &str {
    text.lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
}

/// The first `lines` lines of `text` that are not blank, trimmed, clipped to `max` bytes: a
/// long text's gist.
pub(crate) fn first_lines(text: &str, lines: usize, max: usize) -> String {
    let gist: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(lines)
        .collect();
    let more = text.lines().filter(|l| !l.trim().is_empty()).count() > gist.len();
    let gist = gist.join("\n");
    let clipped = clipped(&gist, max);
    if more && clipped.len() == gist.len() {
        format!("{gist} …")
    } else {
        clipped.into_owned()
    }
}

/// `input` as an error message repeats it: clipped to [`ECHOED`] bytes.
pub(crate) fn echoed(input: &str) -> std::borrow::Cow<'_, str> {
    clipped(input, ECHOED)
}

/// `message` with every span in backticks longer than [`ECHOED`] bytes clipped: errors
/// put what they echo (a name, an id, a value) in backticks, so this bounds every echo at
/// the one place a message leaves mekara, whichever error made it.
pub(crate) fn clip_echoes(message: &str) -> std::borrow::Cow<'_, str> {
    let spans: Vec<&str> = message.split('`').collect();
    // Odd spans are inside backticks, but an odd last one has no closing backtick.
    let inside = |i: usize| i % 2 == 1 && i + 1 < spans.len();
    if !spans
        .iter()
        .enumerate()
        .any(|(i, span)| inside(i) && span.len() > ECHOED)
    {
        return message.into();
    }
    spans
        .iter()
        .enumerate()
        .map(|(i, span)| {
            if inside(i) {
                echoed(span)
            } else {
                (*span).into()
            }
        })
        .collect::<Vec<_>>()
        .join("`")
        .into()
}

/// `text` whole when it is at most `max` bytes; else its first `max` bytes (to a character
/// boundary) and a note of how many bytes were cut.
pub(crate) fn clipped(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if text.len() <= max {
        return text.into();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… [{} more bytes not shown]",
        &text[..end],
        text.len() - end
    )
    .into()
}

/// The message a panic was raised with (`panic!("...")` gives a `&str` or a `String`), or
/// "no message".
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("no message")
}

/// `text` as one word for `sh` (`'text'`, each `'` inside written `'\''`): the one way a
/// value is put into a shell command line mekara prints or runs.
pub(crate) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// `url` with its password (in the user part, or a `password=` parameter) shown as `***`.
pub(crate) fn redact_url(url: &str) -> String {
    let mut out = url.to_string();
    if let Some((scheme, rest)) = url.split_once("://") {
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            out = format!("{scheme}://{}:***{}", &rest[..colon], &rest[at..]);
        }
    }
    let mut redacted = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(at) = rest.find("password=") {
        let value = at + "password=".len();
        redacted.push_str(&rest[..value]);
        redacted.push_str("***");
        rest = &rest[value..];
        let end = rest.find(['&', ' ']).unwrap_or(rest.len());
        rest = &rest[end..];
    }
    redacted.push_str(rest);
    redacted
}

/// A cost in US dollars as every reader shows it: `$0.0123`, or `~$0.0123 (estimated)` when
/// mekara computed it from its price table rather than the agent reporting it.
pub(crate) fn usd(cost: f64, estimated: bool) -> String {
    if estimated {
        format!("~${cost:.4} (estimated)")
    } else {
        format!("${cost:.4}")
    }
}
