//! Checking the outputs an agent gives: the names an llm step expects, values a script can
//! hold, the answer to a question.

use serde_json::{Map, Value as Json};

use crate::engine::error::EngineError;

/// Checks that `outputs` has exactly the names `expected`.
pub(super) fn check_names(
    expected: Vec<String>,
    outputs: &Map<String, Json>,
) -> Result<(), EngineError> {
    let missing: Vec<String> = expected
        .iter()
        .filter(|k| !outputs.contains_key(*k))
        .cloned()
        .collect();
    let unexpected: Vec<String> = outputs
        .keys()
        .filter(|k| !expected.contains(k))
        .cloned()
        .collect();
    if missing.is_empty() && unexpected.is_empty() {
        return Ok(());
    }
    Err(EngineError::Outputs {
        missing,
        unexpected,
        expected,
    })
}

/// Checks the outputs given for an llm step against its `expects`: the same names, each a
/// value a script can hold.
pub(crate) fn check_outputs(
    expects: Option<&Map<String, Json>>,
    outputs: &Map<String, Json>,
) -> Result<(), EngineError> {
    check_names(
        expects.iter().flat_map(|e| e.keys().cloned()).collect(),
        outputs,
    )?;
    if let Some(detail) = outputs.iter().find_map(|(name, value)| {
        super::compiled::unfit(value).map(|found| found.describe(&format!("output `{name}`")))
    }) {
        return Err(EngineError::Unfit { detail });
    }
    if let Some(detail) = super::step::oversize(outputs, "the object of outputs") {
        return Err(EngineError::Oversize { detail });
    }
    Ok(())
}

/// The answer to a question in the outputs an agent gave (`{"answer": …}`): its text, as
/// the text of a number or other value when the agent did not give a string.
pub(super) fn answer_of(mut outputs: Map<String, Json>) -> Result<String, EngineError> {
    let answer = outputs.remove("answer");
    if answer.is_none() || !outputs.is_empty() {
        return Err(EngineError::Outputs {
            missing: if answer.is_none() {
                vec!["answer".to_string()]
            } else {
                Vec::new()
            },
            unexpected: outputs.keys().cloned().collect(),
            expected: vec!["answer".to_string()],
        });
    }
    Ok(match answer {
        Some(Json::String(text)) => text,
        Some(other) => other.to_string(),
        None => String::new(),
    })
}
