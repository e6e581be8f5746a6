//! A test that reads the module graph of the agent layer and its adapters (`agents/`,
//! `mcp/`, `hooks/`, `install/`, `cli/`) from their source: no two of their files import each
//! other, and the hooks, the installer and the agent layer never import the MCP server.
//! An import is a `crate::…` or `super::…` path in code (comments and `#[cfg(test)]` modules
//! left out); a parent naming a child module by its bare path is not one.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The folders of `src/` whose files are checked.
const CHECKED: [&str; 5] = ["agents", "mcp", "hooks", "install", "cli"];

/// Every module of `src/` (`["agents", "reply"]`), with its source.
fn modules() -> BTreeMap<Vec<String>, String> {
    fn walk(dir: &Path, module: &[String], out: &mut BTreeMap<Vec<String>, String>) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .expect("src/ is readable in a test")
            .flatten()
            .collect();
        entries.sort_by_key(std::fs::DirEntry::file_name);
        for entry in entries {
            let name = entry.file_name().to_string_lossy().into_owned();
            let path = entry.path();
            if path.is_dir() {
                let mut child = module.to_vec();
                child.push(name);
                walk(&path, &child, out);
            } else if let Some(stem) = name.strip_suffix(".rs") {
                let mut child = module.to_vec();
                if !matches!(stem, "mod" | "lib" | "main") {
                    child.push(stem.to_string());
                }
                let text = std::fs::read_to_string(&path).expect("a source file is UTF-8");
                out.insert(child, text);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &[],
        &mut out,
    );
    out
}

/// The code of a file: its lines up to its `#[cfg(test)]` module written inline, without
/// comment lines.
fn code(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let tests = lines.windows(2).position(|w| {
        w[0].trim_start().starts_with("#[cfg(test)]") && w[1].trim_end().ends_with('{')
    });
    lines[..tests.unwrap_or(lines.len())]
        .iter()
        .filter(|l| !l.trim_start().starts_with("//"))
        .copied()
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::…` and `super::…` path in `code`, a `{…}` group spelled out into its items.
fn paths(code: &str) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let ident = |at: usize| {
        let len = code[at..]
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(code.len() - at);
        &code[at..at + len]
    };
    let mut found = Vec::new();
    let mut at = 0;
    while at < code.len() {
        let boundary = at == 0 || !(bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
        let word = ident(at);
        if word.is_empty() {
            at += code[at..].chars().next().map_or(1, char::len_utf8);
            continue;
        }
        if !boundary || !matches!(word, "crate" | "super") {
            at += word.len();
            continue;
        }
        let mut path = vec![word.to_string()];
        let mut end = at + word.len();
        while code[end..].starts_with("::") {
            let next = ident(end + 2);
            if next.is_empty() {
                break;
            }
            path.push(next.to_string());
            end += 2 + next.len();
        }
        if code[end..].starts_with("::{") {
            let group = &code[end + 3..];
            let close = group.find('}').unwrap_or(group.len());
            for item in group[..close].split(',') {
                let item: Vec<String> = item
                    .trim()
                    .split("::")
                    .map(|s| s.split_whitespace().next().unwrap_or("").to_string())
                    .collect();
                found.push(path.iter().cloned().chain(item).collect());
            }
        }
        found.push(path);
        at = end;
    }
    found
}

/// The module a path in `module` lands in: the longest known module its start names.
fn target(
    module: &[String],
    path: &[String],
    known: &BTreeMap<Vec<String>, String>,
) -> Vec<String> {
    let mut base: Vec<String> = Vec::new();
    let mut rest = path;
    if rest.first().is_some_and(|p| p == "super") {
        base = module.to_vec();
        while rest.first().is_some_and(|p| p == "super") {
            base.pop();
            rest = &rest[1..];
        }
    } else {
        rest = &rest[1..];
    }
    for part in rest {
        let mut next = base.clone();
        next.push(part.clone());
        if !known.contains_key(&next) {
            break;
        }
        base = next;
    }
    base
}

#[test]
fn no_two_files_of_the_agent_layer_and_its_adapters_import_each_other() {
    let known = modules();
    // This file quotes imports in its own test; it is no part of the graph.
    let this: Vec<String> = module_path!()
        .split("::")
        .skip(1)
        .map(String::from)
        .collect();
    let checked = |m: &[String]| {
        m != this.as_slice() && m.first().is_some_and(|top| CHECKED.contains(&top.as_str()))
    };
    let mut imports: BTreeSet<(Vec<String>, Vec<String>)> = BTreeSet::new();
    for (module, text) in known.iter().filter(|(m, _)| checked(m)) {
        for path in paths(&code(text)) {
            let to = target(module, &path, &known);
            if &to != module {
                imports.insert((module.clone(), to));
            }
        }
    }
    let mutual: Vec<String> = imports
        .iter()
        .filter(|(a, b)| a < b && imports.contains(&(b.clone(), a.clone())))
        .map(|(a, b)| format!("{} <-> {}", a.join("::"), b.join("::")))
        .collect();
    assert!(
        mutual.is_empty(),
        "files that import each other: {mutual:?}"
    );
    let into_mcp: Vec<String> = imports
        .iter()
        .filter(|(a, b)| {
            matches!(a[0].as_str(), "agents" | "hooks" | "install")
                && b.first().is_some_and(|t| t == "mcp")
        })
        .map(|(a, b)| format!("{} -> {}", a.join("::"), b.join("::")))
        .collect();
    assert!(
        into_mcp.is_empty(),
        "imports of the MCP server: {into_mcp:?}"
    );
}

#[test]
fn the_graph_reader_sees_the_imports_it_is_for() {
    let code = code(
        "use super::history::{CallEvent, StepStarted};\n// use crate::mcp;\nlet x = crate::display::clipped(s);",
    );
    let found: Vec<String> = paths(&code).iter().map(|p| p.join("::")).collect();
    assert_eq!(
        found,
        [
            "super::history::CallEvent",
            "super::history::StepStarted",
            "super::history",
            "crate::display::clipped",
        ]
    );
}
