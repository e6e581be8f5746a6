//! Values crossing between Starlark and Rust: JSON both ways, the arguments of step
//! builtins (`timeout`, `env`, `expects`) and the structs the builtins return.
//!
//! Conversions only: nothing here reads the journal or runs a step.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value as Json};
use starlark::values::dict::{AllocDict, DictRef};
use starlark::values::list::{AllocList, ListRef};
use starlark::values::structs::AllocStruct;
use starlark::values::{Heap, Value};

use crate::engine::step::StepResult;

/// A function's keyword arguments, from JSON to values on `heap`.
pub(super) fn keyword_values<'v, 'k>(
    heap: Heap<'v>,
    kwargs: &'k Map<String, Json>,
) -> Vec<(&'k str, Value<'v>)> {
    kwargs
        .iter()
        .map(|(k, v)| (k.as_str(), alloc_json(heap, v)))
        .collect()
}

/// Starlark to JSON; `what` names the value in the error.
pub(super) fn json_of(value: Value<'_>, what: &str) -> anyhow::Result<Json> {
    value.to_json_value().map_err(|e| {
        anyhow::anyhow!("{what} must be JSON data (None, bool, int, float, str, list, dict): {e}")
    })
}

/// The first number in `json` that a script cannot hold, with where it is (`.a[2]`): one
/// beyond a 64-bit float that is not a whole number either (`1e400`). Such a value must be
/// refused before it is journaled: every later evaluation of the run would meet it again.
pub(crate) fn unrepresentable_number(json: &Json) -> Option<(String, String)> {
    match json {
        Json::Number(n) => {
            let holds = n.as_i64().is_some()
                || n.as_u64().is_some()
                || n.as_f64().is_some_and(f64::is_finite)
                || n.to_string().parse::<num_bigint::BigInt>().is_ok();
            (!holds).then(|| (String::new(), n.to_string()))
        }
        Json::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            unrepresentable_number(item).map(|(at, n)| (format!("[{i}]{at}"), n))
        }),
        Json::Object(map) => map
            .iter()
            .find_map(|(k, v)| unrepresentable_number(v).map(|(at, n)| (format!(".{k}{at}"), n))),
        _ => None,
    }
}

/// JSON to Starlark. Written out because starlark's own conversion turns integers too big
/// for 64 bits into floats (serde_json's `arbitrary_precision` keeps their digits).
pub(super) fn alloc_json<'v>(heap: Heap<'v>, json: &Json) -> Value<'v> {
    match json {
        Json::Number(n) if n.as_i64().is_none() && n.as_u64().is_none() => {
            let digits = n.to_string();
            match (digits.parse::<num_bigint::BigInt>(), n.as_f64()) {
                (Ok(big), _) => heap.alloc(big),
                (Err(_), Some(float)) if float.is_finite() => heap.alloc(float),
                // Refused before it is journaled (`unrepresentable_number`); a journal from
                // before that check may still hold one. starlark's own conversion panics on
                // it, so it arrives as its text.
                (Err(_), _) => heap.alloc(digits),
            }
        }
        Json::Array(items) => {
            heap.alloc(AllocList(items.iter().map(|item| alloc_json(heap, item))))
        }
        Json::Object(map) => heap.alloc(AllocDict(
            map.iter().map(|(k, v)| (k.as_str(), alloc_json(heap, v))),
        )),
        other => heap.alloc(other.clone()),
    }
}

/// A function's own name: its repr is `<module>.<name>`, and names cannot hold a `.`.
pub(super) fn function_name(f: Value<'_>) -> String {
    let repr = f.to_repr();
    repr.rsplit('.').next().unwrap_or(&repr).to_string()
}

/// A `timeout` argument: a positive number of seconds.
pub(super) fn seconds(value: Value<'_>) -> anyhow::Result<Duration> {
    let secs = if let Some(i) = value.unpack_i32() {
        f64::from(i)
    } else if let Ok(Json::Number(n)) = value.to_json_value() {
        n.as_f64().unwrap_or(-1.0)
    } else {
        -1.0
    };
    if !(secs > 0.0 && secs.is_finite()) {
        anyhow::bail!(
            "`timeout` must be a positive number of seconds, got `{}`",
            value.to_repr()
        );
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A dict of strings (`env`); values that are not strings are taken as their `str()`.
pub(super) fn string_map(value: Value<'_>, what: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let dict = DictRef::from_value(value).ok_or_else(|| {
        anyhow::anyhow!(
            "`{what}` must be a dict of strings, got a value of type `{}`",
            value.get_type()
        )
    })?;
    dict.iter()
        .map(|(k, v)| {
            let key = k.unpack_str().ok_or_else(|| {
                anyhow::anyhow!("`{what}` keys must be strings, got `{}`", k.to_repr())
            })?;
            let value = v.unpack_str().map_or_else(|| v.to_str(), str::to_string);
            Ok((key.to_string(), value))
        })
        .collect()
}

/// The struct a step builtin returns.
pub(super) fn result_struct<'v>(heap: Heap<'v>, fields: Vec<(&str, Value<'v>)>) -> Value<'v> {
    heap.alloc(AllocStruct(fields))
}

/// A result's `.error`: the reason it failed, or `None`.
pub(super) fn error_value<'v>(heap: Heap<'v>, result: &StepResult) -> Value<'v> {
    match &result.error {
        Some(e) => heap.alloc(e.as_str()),
        None => Value::new_none(),
    }
}

/// An `expects` argument: a dict of output name to description, or a list of names.
pub(super) fn expects_map(v: Value<'_>) -> anyhow::Result<Map<String, Json>> {
    if let Some(list) = ListRef::from_value(v) {
        return list
            .iter()
            .map(|item| {
                item.unpack_str()
                    .map(|name| (name.to_string(), Json::String(String::new())))
                    .ok_or_else(|| {
                        anyhow::anyhow!("`expects` names must be strings, got `{}`", item.to_repr())
                    })
            })
            .collect();
    }
    match json_of(v, "`expects`")? {
        Json::Object(map) => Ok(map),
        other => {
            anyhow::bail!("`expects` must be a dict of output name to description, got `{other}`")
        }
    }
}
