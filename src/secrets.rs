//! Secrets: values mekara took from the environment (`${VAR}` in `.mcp.json`, the store's
//! URL, the OpenTelemetry headers), and their redaction to `${VAR}`.
//!
//! A [`Secrets`] list is kept by whoever expanded the values (the MCP client redacts its
//! results with its own). Every value any list learns is also noted in one list for the whole
//! process, [`known`]: the log's writer, the trace exporter and the places where values
//! enter a run's journal (step results, llm outputs, answers, cassettes) redact with it, so a
//! secret that a shell step printed (a script passed `${VAR}` to `auto()`, and the shell
//! expanded it) or that an agent wrote in an answer is journaled as `${VAR}`.
//!
//! This module knows nothing else of mekara: every layer may use it.

use serde_json::Value as Json;

/// Values that came from the environment, longest first, with their variable.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Secrets(Vec<(String, String)>);

/// Values shorter than this are not redacted: replacing every `1` or `on` in a text would
/// destroy it, and such values are not secrets.
const MIN_SECRET: usize = 4;

impl Secrets {
    /// Notes that `value` came from variable `var`. The process's list learns it too (see
    /// [`known`]).
    pub fn add(&mut self, var: &str, value: &str) {
        if self.insert(var, value)
            && let Ok(mut known) = KNOWN.lock()
        {
            known.insert(var, value);
        }
    }

    /// Adds `value` unless it is too short or known; says whether it was added.
    fn insert(&mut self, var: &str, value: &str) -> bool {
        if value.len() < MIN_SECRET || self.0.iter().any(|(v, _)| v == value) {
            return false;
        }
        self.0.push((value.to_string(), var.to_string()));
        self.0.sort_by_key(|(v, _)| std::cmp::Reverse(v.len()));
        true
    }

    /// Adds all of `other`.
    pub fn extend(&mut self, other: &Secrets) {
        for (value, var) in &other.0 {
            self.add(var, value);
        }
    }

    /// `text` with every value from the environment replaced by `${VAR}`.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (value, var) in &self.0 {
            if out.contains(value.as_str()) {
                out = out.replace(value.as_str(), &format!("${{{var}}}"));
            }
        }
        out
    }

    /// Redacts every string inside a JSON value (object keys too).
    pub fn redact_json(&self, value: &mut Json) {
        if self.0.is_empty() {
            return;
        }
        match value {
            Json::String(s) => *s = self.redact(s),
            Json::Array(items) => items.iter_mut().for_each(|v| self.redact_json(v)),
            Json::Object(map) => {
                if map.keys().any(|k| self.redact(k) != *k) {
                    *map = std::mem::take(map)
                        .into_iter()
                        .map(|(k, v)| (self.redact(&k), v))
                        .collect();
                }
                map.values_mut().for_each(|v| self.redact_json(v));
            }
            _ => {}
        }
    }

    /// Whether no value is known.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Every secret this process has taken from the environment.
static KNOWN: std::sync::Mutex<Secrets> = std::sync::Mutex::new(Secrets(Vec::new()));

/// Every secret this process has taken from the environment so far.
pub(crate) fn known() -> Secrets {
    match KNOWN.lock() {
        Ok(secrets) => secrets.clone(),
        // A panic while holding the lock left the list as it was: still usable.
        Err(poisoned) => poisoned.into_inner().clone(),
    }
}

/// `text` with every secret this process took from the environment replaced by `${VAR}`:
/// for a log record (a server's stderr or an HTTP error body can echo a token), a span, a
/// step's text.
pub(crate) fn redact(text: &str) -> String {
    match KNOWN.lock() {
        Ok(secrets) => secrets.redact(text),
        Err(poisoned) => poisoned.into_inner().redact(text),
    }
}
