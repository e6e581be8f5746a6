//! Tool names as the client's model sees them (Claude Code prefixes MCP tools with the server's
//! name).

use crate::agents::clients::AgentClient;
use crate::agents::tools;

/// The blocks in which a text quotes scripts and steps (`<output>`, `<instructions>`, ...):
/// [`for_client`] leaves what is inside them as it is.
const QUOTED_BLOCKS: [&str; 5] = [
    "output",
    "nl-source",
    "instructions",
    "error",
    "called-script-instructions",
];

/// `text`, one of the texts above, with each mention of one of mekara's tools
/// (`` `start` ``) naming it as `client`'s model sees it (`` `mcp__mekara__start` `` in
/// Claude Code, `` `mekara_start` `` in OpenCode): a model that is told to call a tool
/// by a name it was not offered may not find it. The texts are written with the tools' own
/// names, so that every text, including one added later, goes through this one place;
/// what they quote from scripts and steps is left as it is.
pub(crate) fn for_client(text: &str, client: AgentClient) -> String {
    if client.is_other() {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 64);
    let mut rest = text;
    while let Some((start, end)) = next_quoted_block(rest) {
        out.push_str(&name_tools(&rest[..start], client));
        out.push_str(&rest[start..end]);
        rest = &rest[end..];
    }
    out.push_str(&name_tools(rest, client));
    out
}

/// Where the first quoted block of `text` starts and ends (after its closing tag, or at the
/// end of the text when it has none).
fn next_quoted_block(text: &str) -> Option<(usize, usize)> {
    QUOTED_BLOCKS
        .iter()
        .filter_map(|tag| {
            let open = format!("<{tag}");
            let start = text
                .match_indices(&open)
                .map(|(i, _)| i)
                .find(|i| matches!(text[i + open.len()..].chars().next(), Some('>' | ' ')))?;
            let close = format!("</{tag}>");
            let end = text[start..]
                .find(&close)
                .map_or(text.len(), |i| start + i + close.len());
            Some((start, end))
        })
        .min_by_key(|(start, _)| *start)
}

/// `text` with each `` `tool` `` named as `client` names it.
fn name_tools(text: &str, client: AgentClient) -> String {
    let mut text = text.to_string();
    for tool in tools::ALL {
        let mention = format!("`{}`", tool.name());
        if text.contains(&mention) {
            text = text.replace(&mention, &format!("`{}`", client.tool_name(tool)));
        }
    }
    text
}
