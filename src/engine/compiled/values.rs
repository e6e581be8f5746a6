//! Values crossing between Starlark and Rust: JSON both ways, the arguments of step
//! builtins (`timeout`, `env`, `expects`) and the structs the builtins return.
//!
//! Conversions only: nothing here reads the journal or runs a step.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::{Map, Value as Json};
use starlark::values::dict::{AllocDict, DictRef};
use starlark::values::list::{AllocList, ListRef};
use starlark::values::structs::{AllocStruct, StructRef};
use starlark::values::tuple::TupleRef;
use starlark::values::{Heap, Value};

use super::declared::{ResultRecord, Returns, StepResultType};
use crate::engine::runner::{TIMEOUT_RULE, timeout_from_secs};
use crate::engine::step::{StepResult, oversize};

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
/// Values are refused beyond [`MAX_KEPT`](crate::engine::step::MAX_KEPT) bytes of JSON, as a step's text is cut there: a
/// step's value is journaled and shown whole, so it cannot be cut.
pub(super) fn json_of(value: Value<'_>, what: &str) -> anyhow::Result<Json> {
    check_depth(value, what)?;
    let json = value.to_json_value().map_err(|e| {
        anyhow::anyhow!("{what} must be JSON data (None, bool, int, float, str, list, dict): {e}")
    })?;
    if let Some(refused) = oversize(&json, what) {
        anyhow::bail!("{refused}");
    }
    Ok(json)
}

/// How deep values that cross between a script and the outside (step results, llm outputs,
/// tool arguments, `json.encode` and `json.decode`) may be nested: `[[1]]` is 2 deep.
/// Deeper values would overflow the stack in the conversions (and serde_json reads no
/// more than 128 levels back from the journal), so they are refused with this number.
pub(crate) const MAX_DEPTH: usize = 100;

/// A value from outside that a script cannot be given, and where in it the fault is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unfit {
    /// Where in the value (`.a[2]`), empty for the value itself.
    pub at: String,
    /// What is wrong, as the rest of a sentence ("is the number `1e400`, ...").
    pub problem: String,
}

impl Unfit {
    /// `what` (e.g. "output `n`") with where the fault is, then the problem.
    pub(crate) fn describe(&self, what: &str) -> String {
        if self.at.is_empty() {
            format!("{what} {}", self.problem)
        } else {
            format!("{what} at `{}` {}", self.at, self.problem)
        }
    }
}

/// The first thing in `json` a script cannot hold: a number beyond a 64-bit float that is
/// not a whole number either (`1e400`), or nesting deeper than [`MAX_DEPTH`]. Such a value
/// must be refused before it is journaled: every later evaluation of the run would meet it
/// again.
pub(crate) fn unfit(json: &Json) -> Option<Unfit> {
    unfit_below(json, 0)
}

fn unfit_below(json: &Json, depth: usize) -> Option<Unfit> {
    let nested = matches!(json, Json::Array(_) | Json::Object(_));
    if nested && depth >= MAX_DEPTH {
        return Some(Unfit {
            at: String::new(),
            problem: too_deep(),
        });
    }
    // Where a number is matters to whoever sent it; a path of a hundred `[0]` does not.
    let inside = |at: String, found: Unfit| Unfit {
        at: if found.problem == too_deep() {
            found.at
        } else {
            format!("{at}{}", found.at)
        },
        problem: found.problem,
    };
    match json {
        Json::Number(n) => {
            let holds = n.as_i64().is_some()
                || n.as_u64().is_some()
                || n.as_f64().is_some_and(f64::is_finite)
                || n.to_string().parse::<num_bigint::BigInt>().is_ok();
            (!holds).then(|| Unfit {
                at: String::new(),
                problem: format!(
                    "is the number `{n}`, which a script cannot hold (it is beyond a 64-bit float and not a whole number)"
                ),
            })
        }
        Json::Array(items) => items.iter().enumerate().find_map(|(i, item)| {
            unfit_below(item, depth + 1).map(|found| inside(format!("[{i}]"), found))
        }),
        Json::Object(map) => map.iter().find_map(|(k, v)| {
            unfit_below(v, depth + 1).map(|found| inside(format!(".{k}"), found))
        }),
        _ => None,
    }
}

/// The problem of a value nested too deep.
fn too_deep() -> String {
    format!(
        "is nested more than {MAX_DEPTH} levels deep, the limit for values a script takes or gives"
    )
}

/// Refuses a Starlark value nested deeper than [`MAX_DEPTH`] before anything recurses into
/// it all the way (starlark's JSON conversion and `repr` would overflow the stack).
pub(super) fn check_depth(value: Value<'_>, what: &str) -> anyhow::Result<()> {
    fn depth_over(value: Value<'_>, depth: usize) -> bool {
        let children: Vec<Value<'_>> = if let Some(list) = ListRef::from_value(value) {
            list.iter().collect()
        } else if let Some(tuple) = TupleRef::from_value(value) {
            tuple.iter().collect()
        } else if let Some(dict) = DictRef::from_value(value) {
            dict.iter().flat_map(|(k, v)| [k, v]).collect()
        } else if let Some(s) = StructRef::from_value(value) {
            s.iter().map(|(_, v)| v).collect()
        } else {
            return false;
        };
        depth >= MAX_DEPTH || children.into_iter().any(|c| depth_over(c, depth + 1))
    }
    if depth_over(value, 0) {
        anyhow::bail!("{what} {}", too_deep());
    }
    Ok(())
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
                // Refused before it is journaled (`unfit`); a journal from
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
    timeout_from_secs(secs).ok_or_else(|| {
        anyhow::anyhow!(
            "`timeout` must be {TIMEOUT_RULE}, got `{}`",
            value.to_repr()
        )
    })
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

/// The struct a step builtin returns, declared to the typechecker as the record `T`.
///
/// Each field must be one its type declares to `mekara check` (the record of `T` in
/// [`RESULTS`](super::declared::RESULTS)), so the typechecker never refuses a field a
/// script reads at run time: a field it does not declare is mekara's own mistake, and fails
/// the step saying so (every builtin's result is built in the tests).
pub(super) fn result_struct<'v, T: StepResultType>(
    heap: Heap<'v>,
    fields: Vec<(&str, Value<'v>)>,
) -> anyhow::Result<Returns<'v, T>> {
    let record = ResultRecord::of(T::BUILTIN);
    if let Some((undeclared, _)) = fields
        .iter()
        .find(|(name, _)| record.is_none_or(|r| !r.field_names().any(|n| n == *name)))
    {
        anyhow::bail!(
            "mekara's own error: the result of `{}` has a field `{undeclared}` its declared type does not have (please report it)",
            T::BUILTIN
        );
    }
    Ok(Returns::new(heap.alloc(AllocStruct(fields))))
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
