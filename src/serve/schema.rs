//! `Shape`: the JSON type of a served function's parameter or return value, read from its
//! Starlark type annotation (or its default), and the two things done with it: rendering it
//! as JSON Schema for `tools/list`, and checking (and lightly normalising) the arguments of a
//! `tools/call` against it.
//!
//! One model for both, so that what the schema promises is exactly what is checked.

use serde_json::{Map, Number, Value as Json, json};
use starlark::typing::{Ty, TyBasic};

/// The JSON types a served function can take or return.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Shape {
    /// No annotation: anything JSON.
    Any,
    /// `str`.
    Str,
    /// `int`.
    Int,
    /// `float` (integers are accepted and passed as floats).
    Float,
    /// `bool`.
    Bool,
    /// `None`.
    Null,
    /// `list[T]` (`list` alone is `list[Any]`).
    List(Box<Shape>),
    /// `dict[str, T]` (`dict` alone is `dict[str, Any]`).
    Dict(Box<Shape>),
    /// `A | B | ...`, for example `str | None`.
    Union(Vec<Shape>),
}

impl Shape {
    /// The shape of a Starlark type, or the name of the part that has no JSON form.
    pub(crate) fn from_ty(ty: &Ty) -> Result<Shape, String> {
        let alternatives = ty.iter_union();
        if alternatives.is_empty() {
            return Err(ty.to_string());
        }
        let mut shapes = Vec::new();
        for basic in alternatives {
            let shape = Shape::from_basic(basic, ty)?;
            if shape == Shape::Any {
                return Ok(Shape::Any);
            }
            if !shapes.contains(&shape) {
                shapes.push(shape);
            }
        }
        Ok(if shapes.len() == 1 {
            shapes.remove(0)
        } else {
            Shape::Union(shapes)
        })
    }

    fn from_basic(basic: &TyBasic, whole: &Ty) -> Result<Shape, String> {
        match basic {
            TyBasic::Any => Ok(Shape::Any),
            TyBasic::List(item) => Ok(Shape::List(Box::new(Shape::from_ty(item)?))),
            TyBasic::Dict(key, value) => {
                let key = Shape::from_ty(key)?;
                if !matches!(key, Shape::Str | Shape::Any) {
                    return Err(format!("{whole} (JSON object keys are strings)"));
                }
                Ok(Shape::Dict(Box::new(Shape::from_ty(value)?)))
            }
            other => match other.as_name() {
                Some("str" | "string") => Ok(Shape::Str),
                Some("int") => Ok(Shape::Int),
                Some("float") => Ok(Shape::Float),
                Some("bool") => Ok(Shape::Bool),
                Some("NoneType") => Ok(Shape::Null),
                Some("list") => Ok(Shape::List(Box::new(Shape::Any))),
                Some("dict") => Ok(Shape::Dict(Box::new(Shape::Any))),
                _ => Err(whole.to_string()),
            },
        }
    }

    /// The shape of a default value, for parameters without an annotation.
    pub(crate) fn of_value(value: &Json) -> Shape {
        match value {
            Json::String(_) => Shape::Str,
            Json::Bool(_) => Shape::Bool,
            Json::Number(n) if is_integer(n) => Shape::Int,
            Json::Number(_) => Shape::Float,
            // `None` as a default says nothing about the type; a list or dict default says
            // little about its items.
            Json::Null => Shape::Any,
            Json::Array(_) => Shape::List(Box::new(Shape::Any)),
            Json::Object(_) => Shape::Dict(Box::new(Shape::Any)),
        }
    }

    /// Whether values of this shape are JSON objects (so can be `structuredContent`).
    pub(crate) fn is_object(&self) -> bool {
        matches!(self, Shape::Dict(_))
    }

    /// The shape as JSON Schema (2020-12).
    pub(crate) fn schema(&self) -> Json {
        match self {
            Shape::Any => json!({}),
            Shape::Str => json!({"type": "string"}),
            Shape::Int => json!({"type": "integer"}),
            Shape::Float => json!({"type": "number"}),
            Shape::Bool => json!({"type": "boolean"}),
            Shape::Null => json!({"type": "null"}),
            Shape::List(item) => match item.as_ref() {
                Shape::Any => json!({"type": "array"}),
                item => json!({"type": "array", "items": item.schema()}),
            },
            Shape::Dict(value) => match value.as_ref() {
                Shape::Any => json!({"type": "object"}),
                value => json!({"type": "object", "additionalProperties": value.schema()}),
            },
            Shape::Union(shapes) => {
                // `T | None` with a simple `T` reads best as a type list.
                let simple: Option<Vec<Json>> = shapes
                    .iter()
                    .map(|s| match s.schema() {
                        Json::Object(o) if o.len() == 1 => o.get("type").cloned(),
                        _ => None,
                    })
                    .collect();
                match simple {
                    Some(types) => json!({"type": types}),
                    None => json!({"anyOf": shapes.iter().map(Shape::schema).collect::<Vec<_>>()}),
                }
            }
        }
    }

    /// Checks `value` against the shape, returning it as the function should get it
    /// (integers given for a `float` become floats). The error says what was expected at
    /// `at` (a path such as `names[2]`).
    pub(crate) fn check(&self, value: &Json, at: &str) -> Result<Json, String> {
        let wrong = || {
            Err(format!(
                "`{at}` must be {}, got `{}`",
                self.describe(),
                shorten(value)
            ))
        };
        match (self, value) {
            (Shape::Any, _)
            | (Shape::Str, Json::String(_))
            | (Shape::Bool, Json::Bool(_))
            | (Shape::Null, Json::Null) => Ok(value.clone()),
            (Shape::Int, Json::Number(n)) if is_integer(n) => Ok(value.clone()),
            (Shape::Float, Json::Number(n)) => Ok(match n.as_f64() {
                Some(f) if is_integer(n) => Number::from_f64(f).map_or(value.clone(), Json::Number),
                _ => value.clone(),
            }),
            (Shape::List(item), Json::Array(items)) => items
                .iter()
                .enumerate()
                .map(|(i, v)| item.check(v, &format!("{at}[{i}]")))
                .collect::<Result<Vec<_>, _>>()
                .map(Json::Array),
            (Shape::Dict(item), Json::Object(map)) => map
                .iter()
                .map(|(k, v)| Ok((k.clone(), item.check(v, &format!("{at}.{k}"))?)))
                .collect::<Result<Map<_, _>, String>>()
                .map(Json::Object),
            (Shape::Union(shapes), _) => shapes
                .iter()
                .find_map(|s| s.check(value, at).ok())
                .map_or_else(wrong, Ok),
            _ => wrong(),
        }
    }

    /// The shape in words, for error messages.
    fn describe(&self) -> String {
        match self {
            Shape::Any => "any JSON value".into(),
            Shape::Str => "a string".into(),
            Shape::Int => "an integer".into(),
            Shape::Float => "a number".into(),
            Shape::Bool => "a boolean".into(),
            Shape::Null => "null".into(),
            Shape::List(item) if **item == Shape::Any => "an array".into(),
            Shape::List(item) => format!("an array of {}", plural(item)),
            Shape::Dict(item) if **item == Shape::Any => "an object".into(),
            Shape::Dict(item) => format!("an object of {}", plural(item)),
            Shape::Union(shapes) => shapes
                .iter()
                .map(Shape::describe)
                .collect::<Vec<_>>()
                .join(" or "),
        }
    }
}

fn plural(shape: &Shape) -> String {
    match shape {
        Shape::Str => "strings".into(),
        Shape::Int => "integers".into(),
        Shape::Float => "numbers".into(),
        Shape::Bool => "booleans".into(),
        other => format!("({})", other.describe()),
    }
}

/// Whether a JSON number is an integer. With `arbitrary_precision` (switched on by
/// starlark), integers beyond 64 bits are kept as digits, so the text is what tells.
fn is_integer(n: &Number) -> bool {
    n.is_i64() || n.is_u64() || !n.to_string().contains(['.', 'e', 'E'])
}

/// A value as shown in an error: short.
fn shorten(value: &Json) -> String {
    let text = value.to_string();
    if text.chars().count() <= 60 {
        text
    } else {
        format!("{}...", text.chars().take(57).collect::<String>())
    }
}

/// A default value as `ParametersSpec` documents it (its Starlark repr), as JSON, when it
/// is plain data.
pub(crate) fn default_json(repr: &str) -> Option<Json> {
    match repr {
        "None" => Some(Json::Null),
        "True" => Some(Json::Bool(true)),
        "False" => Some(Json::Bool(false)),
        // Starlark's repr of strings, numbers, lists and dicts of them is JSON, except for
        // the words above inside containers, which the parse below refuses.
        _ => serde_json::from_str(repr).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_take_integers_but_ints_refuse_floats() {
        assert_eq!(Shape::Float.check(&json!(3), "x"), Ok(json!(3.0)));
        assert_eq!(
            Shape::Int.check(&json!(3.5), "x"),
            Err("`x` must be an integer, got `3.5`".into())
        );
    }

    #[test]
    fn big_integers_are_integers() {
        let big: Json = serde_json::from_str("123456789012345678901234567890").expect("json");
        assert!(Shape::Int.check(&big, "x").is_ok());
    }

    #[test]
    fn nested_errors_name_their_place() {
        let shape = Shape::List(Box::new(Shape::Dict(Box::new(Shape::Int))));
        assert_eq!(
            shape.check(&json!([{"a": 1}, {"b": "no"}]), "rows"),
            Err("`rows[1].b` must be an integer, got `\"no\"`".into())
        );
    }

    #[test]
    fn optional_simple_types_are_type_lists() {
        let shape = Shape::Union(vec![Shape::Str, Shape::Null]);
        assert_eq!(shape.schema(), json!({"type": ["string", "null"]}));
        assert_eq!(shape.check(&json!(null), "x"), Ok(json!(null)));
        assert_eq!(
            shape.check(&json!(1), "x"),
            Err("`x` must be a string or null, got `1`".into())
        );
    }

    #[test]
    fn defaults_read_as_json() {
        assert_eq!(default_json("\"hi\""), Some(json!("hi")));
        assert_eq!(default_json("None"), Some(json!(null)));
        assert_eq!(default_json("[1, 2]"), Some(json!([1, 2])));
        assert_eq!(default_json("<function f>"), None);
    }
}
