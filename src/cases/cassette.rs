//! `mekara test --from-cassette`: a VCR cassette (an MCP session an agent drove, see
//! `crate::mcp::vcr`) turned into a test case. The session's first script started is the
//! case's script; each `continue_compiled_script` becomes the agent's answer to the step the
//! reply before it named, each `finish_nl_script` an answer to the NL script, each answer
//! given through `resume` the person's; a session that reached the end expects `completed`.
//!
//! A cassette holds no fixture (its shell steps ran in the recording's project): the case
//! says so in a comment, to be filled in before the case can pass somewhere else.

use std::path::Path;

use serde_json::{Map, Value as Json};
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, value};

use crate::mcp::vcr::{Entry, load};

/// The case file made of the cassette at `path`.
pub(crate) fn case_of(path: &Path) -> anyhow::Result<String> {
    let (_, entries) = load(path)?;
    let shown = path.display();
    let mut script: Option<(String, String)> = None;
    let mut agent = ArrayOfTables::new();
    let mut ask = ArrayOfTables::new();
    let mut completed = false;
    let mut last_reply = String::new();
    let mut at = 0;
    while at < entries.len() {
        let Entry::Call { tool, input } = &entries[at] else {
            if let Entry::Reply { text, .. } = &entries[at] {
                last_reply.clone_from(text);
            }
            at += 1;
            continue;
        };
        // The reply this call got: the next `reply` entry.
        let reply = entries[at + 1..].iter().find_map(|e| match e {
            Entry::Reply { is_error, text } => Some((*is_error, text.as_str())),
            _ => None,
        });
        let refused = reply.is_none_or(|(is_error, _)| is_error);
        let input: Map<String, Json> = serde_json::from_str(input).unwrap_or_default();
        let text = |key: &str| input.get(key).and_then(Json::as_str).map(str::to_string);
        match tool.as_str() {
            "start" if script.is_none() && !refused => {
                let name = text("name").unwrap_or_default().replace(':', "/");
                script = Some((name, text("arguments").unwrap_or_default()));
            }
            "start" if script.is_some() && !refused => {
                anyhow::bail!(
                    "the cassette `{shown}` starts a second script (event {}) while its first runs; a test case runs one script, so record a session that starts one",
                    at + 1
                );
            }
            "continue_compiled_script" | "finish_nl_script" if script.is_some() && !refused => {
                let mut answer = Table::new();
                if let Some(step) = pending_label(&last_reply) {
                    answer.insert("step", value(step));
                }
                if let Some(Json::Object(outputs)) = input.get("outputs")
                    && !outputs.is_empty()
                {
                    let outputs: toml_edit::InlineTable = outputs
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), toml_value(v)?)))
                        .collect();
                    answer.insert("outputs", value(outputs));
                }
                agent.push(answer);
            }
            "resume" if script.is_some() && !refused => {
                if let Some(given) = text("answer") {
                    let mut answer = Table::new();
                    answer.insert("answer", value(given));
                    ask.push(answer);
                }
            }
            _ => {}
        }
        if let Some((false, reply)) = reply
            && script.is_some()
            && reply.contains("## Done")
        {
            completed = true;
            break;
        }
        at += 1;
    }
    let Some((name, arguments)) = script else {
        anyhow::bail!(
            "the cassette `{shown}` starts no script: record a session in which the agent calls `start`"
        );
    };
    let mut doc = DocumentMut::new();
    doc.decor_mut().set_prefix(format!(
        "# A test case made by `mekara test --from-cassette` of `{}`.\n# The recording ran in a project this case does not carry: add a `[fixture]` (a `dir`\n# beside this file, `files`, `git = true`, `setup` commands) where its steps need one.\n",
        path.file_name().map_or_else(|| shown.to_string(), |n| n.to_string_lossy().into_owned())
    ));
    doc.insert("script", value(name));
    if !arguments.is_empty() {
        doc.insert("arguments", value(arguments));
    }
    if !agent.is_empty() {
        doc.insert("agent", Item::ArrayOfTables(agent));
    }
    if !ask.is_empty() {
        doc.insert("ask", Item::ArrayOfTables(ask));
    }
    let mut expect = Table::new();
    expect.insert(
        "end",
        value(if completed { "completed" } else { "waiting" }),
    );
    doc.insert("expect", Item::Table(expect));
    Ok(doc.to_string())
}

/// The label of the item a reply leaves pending (`## Your turn: llm step `x[2]``).
fn pending_label(reply: &str) -> Option<String> {
    let turn = &reply[reply.rfind("## Your turn")?..];
    let line = turn.lines().next()?;
    let start = line.find('`')? + 1;
    let end = start + line[start..].find('`')?;
    Some(line[start..end].to_string())
}

/// A JSON value as a TOML one (`null` has none).
fn toml_value(json: &Json) -> Option<toml_edit::Value> {
    Some(match json {
        Json::Null => return None,
        Json::Bool(b) => (*b).into(),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => i.into(),
            (None, Some(f)) => f.into(),
            (None, None) => n.to_string().into(),
        },
        Json::String(s) => s.as_str().into(),
        Json::Array(items) => {
            let array: toml_edit::Array = items.iter().filter_map(toml_value).collect();
            array.into()
        }
        Json::Object(map) => {
            let table: toml_edit::InlineTable = map
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), toml_value(v)?)))
                .collect();
            table.into()
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_pending_label_is_read_from_the_your_turn_heading() {
        let reply =
            "## Steps executed\n\n## Your turn: llm step `test:random[1]`\n\n<instructions>";
        assert_eq!(
            super::pending_label(reply).as_deref(),
            Some("test:random[1]")
        );
        assert_eq!(super::pending_label("## Done"), None);
    }
}
