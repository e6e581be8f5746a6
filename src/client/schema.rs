//! Checking a call's arguments against the tool's input schema before it is sent, so a
//! mistake in a script is an error naming the field instead of whatever the server says.
//!
//! This covers the part of JSON Schema tool schemas use: `type` (one or a list),
//! `properties`, `required`, `additionalProperties: false`, `items`, `enum`, `const`,
//! `minimum`/`maximum`, `minLength`/`maxLength`, `minItems`/`maxItems`, and `anyOf`/`oneOf`
//! (some branch must fit). Keywords it does not know are ignored: the server still checks.

use serde_json::{Map, Value as Json};

/// Checks `arguments` against `schema`; the error names the first field that does not fit.
pub(crate) fn validate(
    schema: &Map<String, Json>,
    arguments: &Map<String, Json>,
) -> Result<(), String> {
    check(schema, &Json::Object(arguments.clone()), "")
}

fn type_name(value: &Json) -> &'static str {
    match value {
        Json::Null => "null",
        Json::Bool(_) => "boolean",
        Json::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Json::Number(_) => "number",
        Json::String(_) => "string",
        Json::Array(_) => "array",
        Json::Object(_) => "object",
    }
}

fn fits_type(expected: &str, value: &Json) -> bool {
    let actual = type_name(value);
    actual == expected
        || (expected == "number" && actual == "integer")
        || (expected == "integer"
            && matches!(value, Json::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0)))
}

fn shown(path: &str) -> String {
    if path.is_empty() {
        "the arguments".to_string()
    } else {
        format!("argument `{path}`")
    }
}

fn check(schema: &Map<String, Json>, value: &Json, path: &str) -> Result<(), String> {
    match schema.get("type") {
        Some(Json::String(t)) if !fits_type(t, value) => {
            return Err(format!(
                "{} must be of type `{t}`, got {} `{value}`",
                shown(path),
                type_name(value)
            ));
        }
        Some(Json::Array(types)) => {
            let names: Vec<&str> = types.iter().filter_map(Json::as_str).collect();
            if !names.iter().any(|t| fits_type(t, value)) {
                return Err(format!(
                    "{} must be one of the types `{}`, got {} `{value}`",
                    shown(path),
                    names.join("`, `"),
                    type_name(value)
                ));
            }
        }
        _ => {}
    }
    if let Some(Json::Array(options)) = schema.get("enum")
        && !options.contains(value)
    {
        let list: Vec<String> = options.iter().map(ToString::to_string).collect();
        return Err(format!(
            "{} must be one of {}, got `{value}`",
            shown(path),
            list.join(", ")
        ));
    }
    if let Some(expected) = schema.get("const")
        && expected != value
    {
        return Err(format!(
            "{} must be `{expected}`, got `{value}`",
            shown(path)
        ));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(Json::Array(branches)) = schema.get(key) {
            let fits = branches.iter().any(|b| match b {
                Json::Object(b) => check(b, value, path).is_ok(),
                _ => true,
            });
            if !fits {
                return Err(format!(
                    "{} fits none of the allowed shapes (`{key}`), got `{value}`",
                    shown(path)
                ));
            }
        }
    }
    match value {
        Json::Object(map) => check_object(schema, map, path),
        Json::Array(items) => {
            bound(schema, "minItems", "maxItems", items.len(), path, "items")?;
            if let Some(Json::Object(item_schema)) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"))?;
                }
            }
            Ok(())
        }
        Json::String(s) => bound(
            schema,
            "minLength",
            "maxLength",
            s.chars().count(),
            path,
            "characters",
        ),
        Json::Number(n) => {
            let x = n.as_f64().unwrap_or(f64::NAN);
            if let Some(min) = schema.get("minimum").and_then(Json::as_f64)
                && x < min
            {
                return Err(format!("{} must be at least {min}, got {n}", shown(path)));
            }
            if let Some(max) = schema.get("maximum").and_then(Json::as_f64)
                && x > max
            {
                return Err(format!("{} must be at most {max}, got {n}", shown(path)));
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

fn bound(
    schema: &Map<String, Json>,
    min_key: &str,
    max_key: &str,
    len: usize,
    path: &str,
    unit: &str,
) -> Result<(), String> {
    let get = |k: &str| schema.get(k).and_then(Json::as_u64);
    if let Some(min) = get(min_key)
        && (len as u64) < min
    {
        return Err(format!(
            "{} must have at least {min} {unit}, got {len}",
            shown(path)
        ));
    }
    if let Some(max) = get(max_key)
        && (len as u64) > max
    {
        return Err(format!(
            "{} must have at most {max} {unit}, got {len}",
            shown(path)
        ));
    }
    Ok(())
}

fn check_object(
    schema: &Map<String, Json>,
    map: &Map<String, Json>,
    path: &str,
) -> Result<(), String> {
    let join = |key: &str| {
        if path.is_empty() {
            key.to_string()
        } else {
            format!("{path}.{key}")
        }
    };
    let properties = schema.get("properties").and_then(Json::as_object);
    if let Some(Json::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Json::as_str) {
            if !map.contains_key(name) {
                return Err(format!("argument `{}` is required but missing", join(name)));
            }
        }
    }
    for (key, value) in map {
        match properties.and_then(|p| p.get(key)) {
            Some(Json::Object(sub)) => check(sub, value, &join(key))?,
            Some(_) => {}
            None => {
                if schema.get("additionalProperties") == Some(&Json::Bool(false)) {
                    let known: Vec<&str> = properties
                        .map(|p| p.keys().map(String::as_str).collect())
                        .unwrap_or_default();
                    return Err(format!(
                        "argument `{}` is not one the tool takes; it takes `{}`",
                        join(key),
                        known.join("`, `")
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Map<String, Json> {
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string", "minLength": 1},
                "count": {"type": "integer", "minimum": 1},
                "mode": {"enum": ["a", "b"]},
                "opts": {"type": "object", "properties": {"deep": {"type": "boolean"}}},
                "list": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["path"],
            "additionalProperties": false
        })
        .as_object()
        .cloned()
        .expect("an object")
    }

    fn err(args: Json) -> String {
        validate(&schema(), args.as_object().expect("object")).expect_err("invalid")
    }

    #[test]
    fn errors_name_the_field() {
        assert_eq!(err(json!({})), "argument `path` is required but missing");
        assert_eq!(
            err(json!({"path": 3})),
            "argument `path` must be of type `string`, got integer `3`"
        );
        assert!(err(json!({"path": "x", "count": 0})).contains("`count` must be at least 1"));
        assert!(err(json!({"path": "x", "mode": "c"})).contains("`mode` must be one of"));
        assert!(err(json!({"path": "x", "opts": {"deep": 1}})).contains("`opts.deep`"));
        assert!(err(json!({"path": "x", "list": ["a", 2]})).contains("`list[1]`"));
        assert!(
            err(json!({"path": "x", "other": 1})).contains("`other` is not one the tool takes")
        );
    }

    #[test]
    fn valid_arguments_pass() {
        let args =
            json!({"path": "x", "count": 2, "mode": "a", "opts": {"deep": true}, "list": []});
        assert!(validate(&schema(), args.as_object().expect("object")).is_ok());
    }
}
