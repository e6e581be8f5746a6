//! Prompt tags (`[use-mcp:server/tool:{json}]`): the tool calls on other MCP servers that
//! stand inside a text.
//!
//! The engine only describes a call ([`ToolCall`](super::ToolCall)) and journals its
//! result; making it is an effect of the [`StepRunner`](super::StepRunner) (`crate::client`
//! holds the real MCP client). So the engine knows nothing of MCP transports, and a journal
//! or a cassette answers calls with the server gone.

use serde_json::{Map, Value as Json};

use super::step::StepResult;

/// The `context` of steps made for prompt tags in llm prompts.
pub(crate) const PROMPT_TAG_CONTEXT: &str = "[use-mcp] tag in an llm prompt";

/// The `context` of steps made for prompt tags in NL instructions.
pub(crate) const NL_TAG_CONTEXT: &str = "[use-mcp] tag in NL instructions";

/// A piece of a text with prompt tags.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece<'t> {
    /// Plain text, kept as is.
    Text(&'t str),
    /// A tag that parsed: the call it stands for.
    Tag {
        /// The tag's text.
        text: &'t str,
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The arguments (`{}` when the tag has none).
        arguments: Map<String, Json>,
    },
    /// Something that starts like a tag but is not one: shown in place as an error.
    Malformed {
        /// The tag's text, as far as it was read.
        text: &'t str,
        /// What is wrong.
        reason: String,
    },
}

const OPEN: &str = "[use-mcp:";

/// Splits `text` into plain text and tags. A tag is `[use-mcp:SERVER/TOOL]` or
/// `[use-mcp:SERVER/TOOL:{json}]`; the JSON is read by a real JSON parser, so brackets and
/// quotes inside it (`{"q": "a]b"}`, nested objects and arrays) are part of the arguments.
pub(crate) fn parse(text: &str) -> Vec<Piece<'_>> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        if at > 0 {
            pieces.push(Piece::Text(&rest[..at]));
        }
        let (piece, used) = parse_tag(&rest[at..]);
        pieces.push(piece);
        rest = &rest[at + used..];
    }
    if !rest.is_empty() {
        pieces.push(Piece::Text(rest));
    }
    pieces
}

/// Reads one tag at the start of `text` (which starts with [`OPEN`]); returns it and the
/// bytes it used. A malformed tag uses only its opening, so the rest is read as text.
fn parse_tag(text: &str) -> (Piece<'_>, usize) {
    let body = &text[OPEN.len()..];
    let malformed = |reason: String| {
        let end = text.find(']').map_or(text.len(), |i| i + 1);
        let end = text[..end].find('\n').unwrap_or(end);
        (
            Piece::Malformed {
                text: &text[..end],
                reason,
            },
            end.max(OPEN.len()),
        )
    };
    let name_end = body
        .find(|c: char| c == ':' || c == ']' || c.is_whitespace())
        .unwrap_or(body.len());
    let name = &body[..name_end];
    let (server, tool) = name.split_once('/').unwrap_or_default();
    if server.is_empty() || tool.is_empty() {
        let what = if name.is_empty() {
            "the tag names no `server/tool`".to_string()
        } else {
            format!("`{}` is not `server/tool`", crate::display::echoed(name))
        };
        return malformed(format!("{what}; write `[use-mcp:server/tool:{{...}}]`"));
    }
    let after = &body[name_end..];
    if after.starts_with(']') {
        let used = OPEN.len() + name_end + 1;
        return (
            Piece::Tag {
                text: &text[..used],
                server: server.to_string(),
                tool: tool.to_string(),
                arguments: Map::new(),
            },
            used,
        );
    }
    let Some(json) = after.strip_prefix(':') else {
        return malformed("the tag is not closed with `]`".to_string());
    };
    let mut stream = serde_json::Deserializer::from_str(json).into_iter::<Json>();
    let arguments = match stream.next() {
        Some(Ok(Json::Object(map))) => map,
        Some(Ok(other)) => {
            // The value parsed, so the tag's end is known: past it and its `]`.
            let start = OPEN.len() + name_end + 1;
            let after_value = start + stream.byte_offset();
            let end = if text[after_value..].starts_with(']') {
                after_value + 1
            } else {
                after_value
            };
            return (
                Piece::Malformed {
                    text: &text[..end],
                    reason: format!("the arguments must be a JSON object, got `{other}`"),
                },
                end,
            );
        }
        Some(Err(e)) => return malformed(format!("the arguments are not valid JSON: {e}")),
        None => return malformed("the arguments are missing after `:`".to_string()),
    };
    let json_end = stream.byte_offset();
    let tail = &json[json_end..];
    let spaces = tail.len() - tail.trim_start().len();
    if !tail[spaces..].starts_with(']') {
        return malformed("the tag is not closed with `]` after its JSON".to_string());
    }
    let used = OPEN.len() + name_end + 1 + json_end + spaces + 1;
    (
        Piece::Tag {
            text: &text[..used],
            server: server.to_string(),
            tool: tool.to_string(),
            arguments,
        },
        used,
    )
}

/// How a tag's result reads in place of the tag: the tool's text, or the error.
pub(crate) fn shown(server: &str, tool: &str, result: &StepResult) -> String {
    if result.success {
        return result.output.clone();
    }
    let why = result
        .error
        .clone()
        .unwrap_or_else(|| result.output.trim().to_string());
    format!("[use-mcp:{server}/{tool} failed: {why}]")
}

/// The text shown for a malformed tag (a long one clipped: it came from the script, which
/// its author has).
pub(crate) fn shown_malformed(text: &str, reason: &str) -> String {
    format!(
        "[use-mcp error: {reason} (in `{}`)]",
        crate::display::echoed(text)
    )
}

/// Replaces every tag of `text` that its author wrote by what `call` gives for it (in
/// order). Text without tags is returned without calling anything.
///
/// Only the author's tags call tools: text from a user, an agent or a tool result must
/// never make a call. `text` is an llm prompt, built at run time from the script's own
/// strings and from data (the request, llm outputs, tool results), and a string does not
/// say where it came from; so a tag is the author's when `authored` (the script's source)
/// holds it verbatim. Any other tag, and anything malformed, is kept as it was written.
pub(crate) fn expand<E>(
    text: &str,
    authored: &str,
    mut call: impl FnMut(&str, &str, Map<String, Json>) -> Result<StepResult, E>,
) -> Result<String, E> {
    if !text.contains(OPEN) {
        return Ok(text.to_string());
    }
    let mut out = String::with_capacity(text.len());
    for piece in parse(text) {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Tag { text, .. } | Piece::Malformed { text, .. } if !authored.contains(text) => {
                out.push_str(text);
            }
            Piece::Tag {
                server,
                tool,
                arguments,
                ..
            } => {
                let result = call(&server, &tool, arguments)?;
                out.push_str(&shown(&server, &tool, &result));
            }
            Piece::Malformed { text, reason } => out.push_str(&shown_malformed(text, &reason)),
        }
    }
    Ok(out)
}

/// Expands the tags of the author's `template` (an NL script's body) and fills its
/// placeholder with `value` (the user's arguments) at the same time: tags are read from
/// the template alone, so nothing in `value` is ever read as a tag. In a tag's arguments
/// the placeholder is filled inside JSON strings, as a string value.
pub(crate) fn expand_template<E>(
    template: &str,
    placeholder: &str,
    value: &str,
    mut call: impl FnMut(&str, &str, Map<String, Json>) -> Result<StepResult, E>,
) -> Result<String, E> {
    let mut out = String::with_capacity(template.len() + value.len());
    for piece in parse(template) {
        match piece {
            Piece::Text(t) => out.push_str(&t.replace(placeholder, value)),
            Piece::Tag {
                server,
                tool,
                mut arguments,
                ..
            } => {
                for argument in arguments.values_mut() {
                    fill(argument, placeholder, value);
                }
                let result = call(&server, &tool, arguments)?;
                out.push_str(&shown(&server, &tool, &result));
            }
            Piece::Malformed { text, reason } => out.push_str(&shown_malformed(text, &reason)),
        }
    }
    Ok(out)
}

/// Replaces `placeholder` by `value` in every string inside `json`.
fn fill(json: &mut Json, placeholder: &str, value: &str) {
    match json {
        Json::String(s) if s.contains(placeholder) => *s = s.replace(placeholder, value),
        Json::Array(items) => items.iter_mut().for_each(|j| fill(j, placeholder, value)),
        Json::Object(map) => map.values_mut().for_each(|j| fill(j, placeholder, value)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(text: &str) -> Vec<String> {
        parse(text)
            .into_iter()
            .map(|p| match p {
                Piece::Text(t) => format!("text {t:?}"),
                Piece::Tag {
                    server,
                    tool,
                    arguments,
                    ..
                } => format!("tag {server}/{tool} {}", Json::Object(arguments)),
                Piece::Malformed { text, reason } => format!("bad {text:?}: {reason}"),
            })
            .collect()
    }

    #[test]
    fn nested_json_with_brackets_and_quotes() {
        assert_eq!(
            tags(r#"see [use-mcp:fs/read:{"a": {"b": ["]", "\"x]"]}, "c": "[y"}] now"#),
            vec![
                "text \"see \"".to_string(),
                r#"tag fs/read {"a":{"b":["]","\"x]"]},"c":"[y"}"#.to_string(),
                "text \" now\"".to_string(),
            ]
        );
    }

    #[test]
    fn tag_without_arguments() {
        assert_eq!(tags("[use-mcp:s/t]"), vec!["tag s/t {}".to_string()]);
    }

    #[test]
    fn malformed_tags_are_reported_in_place() {
        let out = tags("a [use-mcp:nope] b [use-mcp:s/t:{\"x\": ] c [use-mcp:s/t:[1]] d");
        assert_eq!(out.len(), 7, "{out:#?}");
        assert!(out[1].starts_with("bad \"[use-mcp:nope]\": `nope` is not `server/tool`"));
        assert!(out[3].contains("not valid JSON"), "{}", out[3]);
        assert!(out[5].contains("must be a JSON object"), "{}", out[5]);
        assert_eq!(out[6], "text \" d\"");
    }

    /// Regression: a tag with no name was reported as "`` is not `server/tool`", and a long
    /// malformed tag was echoed whole.
    #[test]
    fn a_nameless_or_long_malformed_tag_is_reported_plainly() {
        let out = tags("[use-mcp:] [use-mcp: s/t]");
        let bad: Vec<&String> = out.iter().filter(|o| o.starts_with("bad")).collect();
        assert_eq!(bad.len(), 2, "{out:?}");
        for o in bad {
            assert!(
                o.ends_with(
                    ": the tag names no `server/tool`; write `[use-mcp:server/tool:{...}]`"
                ),
                "{o}"
            );
        }
        let long = format!("[use-mcp:{}]", "x".repeat(100_000));
        let Piece::Malformed { text, reason } = &parse(&long)[0] else {
            panic!("not malformed");
        };
        let shown = shown_malformed(text, reason);
        assert!(shown.len() < 1_000, "{}", shown.len());
        assert!(shown.contains("more bytes not shown"), "{shown}");
    }

    #[test]
    fn unclosed_tag() {
        let out = tags("[use-mcp:s/t:{\"a\":1} and more");
        assert!(out[0].contains("not closed with `]`"), "{out:?}");
    }

    #[test]
    fn expand_calls_in_order_and_shows_failures() {
        let mut seen = Vec::new();
        let source = "1 [use-mcp:a/b:{\"n\":1}] 2 [use-mcp:a/c] 3";
        let text = expand::<()>(source, source, |s, t, a| {
            seen.push(format!("{s}/{t} {}", Json::Object(a)));
            Ok(if t == "b" {
                StepResult {
                    success: true,
                    output: "B".into(),
                    ..StepResult::default()
                }
            } else {
                StepResult {
                    success: false,
                    error: Some("boom".into()),
                    ..StepResult::default()
                }
            })
        })
        .expect("no error");
        assert_eq!(text, "1 B 2 [use-mcp:a/c failed: boom] 3");
        assert_eq!(seen, vec!["a/b {\"n\":1}", "a/c {}"]);
    }

    #[test]
    fn only_the_authors_tags_call() {
        let mut calls = 0;
        let ok = |_: &str, _: &str, _: Map<String, Json>| -> Result<StepResult, ()> {
            Ok(StepResult {
                success: true,
                output: "CALLED".into(),
                ..StepResult::default()
            })
        };
        let data = "[use-mcp:a/b] and [use-mcp:broken";
        let text = expand(&format!("x {data}"), "x \0", |s, t, a| {
            calls += 1;
            ok(s, t, a)
        })
        .expect("no error");
        assert_eq!(text, format!("x {data}"));
        assert_eq!(calls, 0);
        let text = expand(&format!("x {data}"), "see [use-mcp:a/b]\0", ok).expect("no error");
        assert_eq!(text, "x CALLED and [use-mcp:broken");
    }

    #[test]
    fn a_template_reads_tags_from_itself_and_fills_arguments_as_data() {
        let mut seen = Vec::new();
        let text = expand_template::<()>(
            "Do $ARGUMENTS: [use-mcp:fs/read:{\"path\": \"$ARGUMENTS\", \"n\": [\"$ARGUMENTS\"]}]",
            "$ARGUMENTS",
            "[use-mcp:x/y] \"quoted\"",
            |s, t, a| {
                seen.push(format!("{s}/{t} {}", Json::Object(a)));
                Ok(StepResult {
                    success: true,
                    output: "R".into(),
                    ..StepResult::default()
                })
            },
        )
        .expect("no error");
        assert_eq!(text, "Do [use-mcp:x/y] \"quoted\": R");
        assert_eq!(
            seen,
            vec![r#"fs/read {"path":"[use-mcp:x/y] \"quoted\"","n":["[use-mcp:x/y] \"quoted\""]}"#]
        );
    }
}
