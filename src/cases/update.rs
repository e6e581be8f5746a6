//! `mekara test --update`: what a run gave, written into its case file as what the case
//! expects, keeping the rest of the file (its comments, its order, its layout) as it was.
//!
//! Recorded: the end state, the step list, the text of every file the case expects exactly
//! (or expects absent), and the exit code and exact output of every step it names. Patterns
//! (`matches`, `contains`) are the case author's and are left alone.

use std::collections::BTreeMap;

use toml_edit::{Array, DocumentMut, Item, Table, Value, value};

use super::case::{Expect, Text};
use super::run::StepRun;

/// What a run gave, as `--update` records it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    pub end: String,
    /// The steps, paths of the scratch project hidden.
    pub steps: Vec<StepRun>,
    /// The files the case names: their text, or `None` when there is no such file.
    pub files: BTreeMap<String, Option<String>>,
}

/// The case file `text` with `outcome` recorded as what it expects.
pub(crate) fn record(text: &str, expect: &Expect, outcome: &Outcome) -> Result<String, String> {
    let mut doc: DocumentMut = text
        .parse()
        .map_err(|e: toml_edit::TomlError| e.to_string())?;
    let root = doc.as_table_mut();
    if !root.contains_key("expect") {
        root.insert("expect", Item::Table(Table::new()));
    }
    let expect_table = root["expect"]
        .as_table_mut()
        .ok_or("`expect` is not a table")?;
    // What is already right is left as written.
    if expect.end.as_deref() != Some(outcome.end.as_str()) {
        expect_table.insert("end", value(outcome.end.as_str()));
    }
    let lines: Vec<String> = outcome.steps.iter().map(StepRun::line).collect();
    if expect.steps.as_ref() != Some(&lines) {
        let mut steps = Array::new();
        for line in lines {
            steps.push_formatted(Value::from(line).decorated("\n  ", ""));
        }
        steps.set_trailing("\n");
        steps.set_trailing_comma(true);
        expect_table.insert("steps", value(steps));
    }
    for (path, wanted) in &expect.files {
        let recorded = match (wanted, outcome.files.get(path)) {
            (Text::Exact(old), Some(Some(text))) if old == text => continue,
            (Text::Absent, Some(None)) => continue,
            (Text::Exact(_) | Text::Absent, Some(Some(text))) => text_value(text),
            (Text::Exact(_), Some(None)) => {
                let mut absent = toml_edit::InlineTable::new();
                absent.insert("absent", true.into());
                Value::InlineTable(absent)
            }
            _ => continue,
        };
        if let Some(files) = expect_table
            .get_mut("files")
            .and_then(Item::as_table_like_mut)
        {
            files.insert(path, Item::Value(recorded));
        }
    }
    if let Some(Item::ArrayOfTables(named)) = expect_table.get_mut("step") {
        for (table, wanted) in named.iter_mut().zip(&expect.step) {
            let Some(ran) = outcome
                .steps
                .iter()
                .find(|s| super::run::same_step(&s.label, &wanted.step))
            else {
                continue;
            };
            if wanted.exit_code.is_some()
                && let Some(code) = ran.exit_code
                && wanted.exit_code != Some(code)
            {
                table.insert("exit_code", value(i64::from(code)));
            }
            if matches!(&wanted.output, Some(Text::Exact(old)) if *old != ran.output) {
                table.insert("output", Item::Value(text_value(&ran.output)));
            }
        }
    }
    Ok(doc.to_string())
}

/// `text` as a TOML string: a multi-line literal when it has several lines and can be one.
fn text_value(text: &str) -> Value {
    let plain = Value::from(text);
    if !text.contains('\n') || text.contains("'''") || text.contains('\r') {
        return plain;
    }
    // A literal string drops a newline right after its opening quotes: one is added, so
    // the text reads from the next line.
    match format!("'''\n{text}'''").parse::<Value>() {
        Ok(literal) if literal.as_str() == Some(text) => literal,
        _ => plain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_outcome_is_written_in_and_the_rest_of_the_file_is_kept() {
        let text = "# the basic case\narguments = \"x\" # why x\n\n[expect]\nend = \"failed\"\nfiles = { \"a.txt\" = \"old\", \"b\" = { matches = \"^b\" } }\n";
        let case = super::super::case::parse(
            "t/basic",
            super::super::case::Origin::Bundled("tests/t/basic.toml"),
            "t",
            text,
        )
        .expect("a case");
        let step = StepRun {
            label: "t[0]".to_string(),
            summary: "$ printf 'new\\n' > a.txt".to_string(),
            success: true,
            exit_code: Some(0),
            ..StepRun::default()
        };
        let outcome = Outcome {
            end: "completed".to_string(),
            steps: vec![step],
            files: BTreeMap::from([
                ("a.txt".to_string(), Some("new\nline\n".to_string())),
                ("b".to_string(), Some("bee".to_string())),
            ]),
        };
        let updated = record(text, &case.expect, &outcome).expect("recorded");
        assert_eq!(
            updated,
            "# the basic case\narguments = \"x\" # why x\n\n[expect]\nend = \"completed\"\nfiles = { \"a.txt\" = '''\nnew\nline\n''', \"b\" = { matches = \"^b\" } }\nsteps = [\n  '''t[0] $ printf 'new\\n' > a.txt''',\n]\n"
        );
    }
}
