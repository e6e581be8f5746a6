//! Tool modules: finding `.star` files, loading them (a module may only define things), and
//! turning their public functions into [`ServedFunction`]s with schemas derived from the signatures.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value as Json, json};
use starlark::docs::{DocFunction, DocItem, DocMember, DocParam, DocString};
use starlark::environment::FrozenModule;
use starlark::syntax::AstModule;
use starlark::syntax::ast::{AstExpr, AstLiteral, AstStmt, ExprP, StmtP};
use starlark::values::list::ListRef;

use super::ServeError;
use super::schema::{Shape, default_json};
use crate::engine::compiled::{self, Limits, unfit};

/// A loaded module.
pub(crate) struct ToolModule {
    /// The file, as found.
    pub path: PathBuf,
    /// Its frozen globals.
    pub module: FrozenModule,
    /// The file in error locations, and its text: what a child process loads it from to
    /// call a tool (see `engine::compiled::child`).
    pub origin: String,
    pub source: String,
}

/// A public function of a tool module, served as an MCP tool.
pub(crate) struct ServedFunction {
    /// The MCP tool name: the function's name in snake_case.
    pub name: String,
    /// The function's name in the module.
    pub function: String,
    /// The module it lives in.
    pub module: Arc<ToolModule>,
    /// The docstring's summary.
    pub description: Option<String>,
    /// The parameters, in order.
    pub params: Vec<Param>,
    /// The return shape, when the function returns a dict: its `structuredContent`.
    pub output: Option<Shape>,
}

/// A parameter of a served function.
pub(crate) struct Param {
    /// Its name (also the argument's name in `tools/call`).
    pub name: String,
    /// What it takes.
    pub shape: Shape,
    /// Its default, when it has one that is plain data.
    pub default: Option<Json>,
    /// Whether it has no default.
    pub required: bool,
    /// Its description from the docstring's `Args:` section.
    pub description: Option<String>,
}

impl ServedFunction {
    /// The input schema: an object of the parameters, closed to others.
    pub(crate) fn input_schema(&self) -> Map<String, Json> {
        let mut properties = Map::new();
        for param in &self.params {
            let mut schema = match param.shape.schema() {
                Json::Object(o) => o,
                _ => Map::new(),
            };
            if let Some(description) = &param.description {
                schema.insert("description".into(), Json::String(description.clone()));
            }
            if let Some(default) = &param.default {
                schema.insert("default".into(), default.clone());
            }
            properties.insert(param.name.clone(), Json::Object(schema));
        }
        let required: Vec<&str> = self
            .params
            .iter()
            .filter(|p| p.required)
            .map(|p| p.name.as_str())
            .collect();
        let mut schema = Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), Json::Object(properties));
        if !required.is_empty() {
            schema.insert("required".into(), json!(required));
        }
        schema.insert("additionalProperties".into(), json!(false));
        schema
    }

    /// The output schema, for functions annotated to return a dict.
    pub(crate) fn output_schema(&self) -> Option<Map<String, Json>> {
        match self.output.as_ref()?.schema() {
            Json::Object(o) => Some(o),
            _ => None,
        }
    }

    /// Checks a call's arguments against the parameters: unknown ones refused, required
    /// ones present, each of the right shape. Returns them as the function gets them.
    pub(crate) fn check_arguments(
        &self,
        arguments: Option<&Map<String, Json>>,
    ) -> Result<Map<String, Json>, String> {
        let empty = Map::new();
        let arguments = arguments.unwrap_or(&empty);
        let known = || {
            if self.params.is_empty() {
                "it takes no arguments".to_string()
            } else {
                let names: Vec<String> = self.params.iter().map(|p| p.name.clone()).collect();
                format!("it takes {}", crate::display::quoted(&names))
            }
        };
        if let Some(unknown) = arguments
            .keys()
            .find(|k| !self.params.iter().any(|p| &p.name == *k))
        {
            return Err(format!(
                "tool `{}` has no argument `{unknown}`; {}",
                self.name,
                known()
            ));
        }
        let missing: Vec<String> = self
            .params
            .iter()
            .filter(|p| p.required && !arguments.contains_key(&p.name))
            .map(|p| format!("`{}`", p.name))
            .collect();
        if !missing.is_empty() {
            return Err(format!(
                "tool `{}` needs the argument{} {}",
                self.name,
                if missing.len() == 1 { "" } else { "s" },
                missing.join(", ")
            ));
        }
        let mut checked = Map::new();
        for param in &self.params {
            if let Some(value) = arguments.get(&param.name) {
                if let Some(found) = unfit(value) {
                    return Err(format!(
                        "tool `{}`: {}",
                        self.name,
                        found.describe(&format!("argument `{}`", param.name))
                    ));
                }
                let value = param
                    .shape
                    .check(value, &param.name)
                    .map_err(|e| format!("tool `{}`: {e}", self.name))?;
                checked.insert(param.name.clone(), value);
            }
        }
        Ok(checked)
    }
}

/// Finds the `.star` files of `paths` (files, folders searched recursively, or globs),
/// relative to `base`, sorted within each path and without repeats.
pub(crate) fn find_modules(paths: &[String], base: &Path) -> Result<Vec<PathBuf>, ServeError> {
    let mut found: Vec<PathBuf> = Vec::new();
    for written in paths {
        let path = base.join(written);
        let mut matched = Vec::new();
        if written.contains(['*', '?', '[']) {
            let pattern = path.to_string_lossy().into_owned();
            let entries = glob::glob(&pattern).map_err(|e| ServeError::BadGlob {
                pattern: written.clone(),
                reason: e.msg.to_string(),
            })?;
            for entry in entries.flatten() {
                collect(&entry, &mut matched)?;
            }
        } else if path.exists() {
            collect(&path, &mut matched)?;
        } else {
            return Err(ServeError::NotFound {
                path: written.clone(),
            });
        }
        if matched.is_empty() {
            return Err(ServeError::NoModules {
                path: written.clone(),
            });
        }
        matched.sort();
        for path in matched {
            // Shown relative to `base` when under it: shorter in messages.
            let path = path
                .strip_prefix(base)
                .map_or(path.clone(), Path::to_path_buf);
            if !found.contains(&path) {
                found.push(path);
            }
        }
    }
    Ok(found)
}

/// A `.star` file, or the `.star` files under a folder.
fn collect(path: &Path, into: &mut Vec<PathBuf>) -> Result<(), ServeError> {
    if path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| ServeError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        for entry in entries.flatten() {
            collect(&entry.path(), into)?;
        }
    } else if path.extension().is_some_and(|e| e == "star") {
        into.push(path.to_path_buf());
    }
    Ok(())
}

/// Loads the module at `path` (relative to `base`) and returns its tools: the functions
/// named in `exports = [...]`, or else every top-level function whose name does not start
/// with `_`.
pub(crate) fn load(
    base: &Path,
    path: &Path,
    limits: &Limits,
) -> Result<Vec<ServedFunction>, ServeError> {
    let origin = path.display().to_string();
    let source = std::fs::read_to_string(base.join(path)).map_err(|e| ServeError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let ast = AstModule::parse(&origin, source.clone(), &compiled::dialect())
        .map_err(|e| ServeError::code(&e.to_string()))?;
    let mut defined = Vec::new();
    check_top_level(&ast, ast.statement(), &mut defined)?;
    // The top level runs in an evaluator process first, under the memory cap: a constant
    // past it is the module's error with its line, not the end of the server's start-up.
    if let Some(exe) = compiled::child::evaluator() {
        compiled::child::load(
            &exe,
            &compiled::child::Sources::alone(&origin, &source),
            limits,
            false,
        )
        .map_err(|e| ServeError::code(&e.message))?;
    }
    let module = compiled::freeze_module(&origin, ast, limits, &HashMap::new())
        .map_err(|e| ServeError::code(&e.message))?;
    let exported = exports(&module, &defined, &origin)?;
    let module = Arc::new(ToolModule {
        path: path.to_path_buf(),
        module,
        origin: origin.clone(),
        source,
    });
    exported
        .into_iter()
        .map(|function| tool(&module, function, &origin))
        .collect()
}

/// Refuses top-level statements that do work: a module may define functions and constants
/// (values that call nothing), have a docstring, and nothing else. Collects the names of the
/// functions defined, in order.
fn check_top_level(
    ast: &AstModule,
    stmt: &AstStmt,
    defined: &mut Vec<String>,
) -> Result<(), ServeError> {
    let refuse = |what: &str| {
        Err(ServeError::TopLevel {
            location: ast.file_span(stmt.span).to_string(),
            what: what.to_string(),
        })
    };
    match &stmt.node {
        StmtP::Statements(stmts) => {
            for s in stmts {
                check_top_level(ast, s, defined)?;
            }
            Ok(())
        }
        StmtP::Def(def) => {
            defined.push(def.name.node.ident.clone());
            Ok(())
        }
        StmtP::Pass => Ok(()),
        StmtP::Expression(e) if matches!(e.node, ExprP::Literal(AstLiteral::String(_))) => Ok(()),
        StmtP::Assign(assign) if !calls(&assign.rhs) => Ok(()),
        StmtP::AssignModify(_, _, rhs) if !calls(rhs) => Ok(()),
        StmtP::Assign(_) | StmtP::AssignModify(..) => refuse("an assignment that calls a function"),
        StmtP::Expression(_) => refuse("an expression statement"),
        StmtP::If(..) | StmtP::IfElse(..) => refuse("an `if` statement"),
        StmtP::For(_) => refuse("a `for` loop"),
        StmtP::Load(_) => refuse("a `load` statement"),
        StmtP::Return(_) | StmtP::Break | StmtP::Continue => {
            refuse("a statement outside a function")
        }
    }
}

/// Whether an expression calls anything (a lambda's body runs only when called).
fn calls(expr: &AstExpr) -> bool {
    match &expr.node {
        ExprP::Call(..) => true,
        ExprP::Lambda(_) => false,
        _ => {
            let mut found = false;
            expr.visit_expr(|e| found = found || calls(e));
            found
        }
    }
}

/// The functions a module serves.
fn exports<'d>(
    module: &FrozenModule,
    defined: &'d [String],
    origin: &str,
) -> Result<Vec<&'d str>, ServeError> {
    let listed = module.get_option("exports").ok().flatten();
    let Some(listed) = listed else {
        return Ok(defined
            .iter()
            .map(String::as_str)
            .filter(|name| !name.starts_with('_'))
            .collect());
    };
    let bad = |detail: String| ServeError::Exports {
        module: origin.to_string(),
        detail,
    };
    let list = ListRef::from_value(listed.value()).ok_or_else(|| {
        bad(format!(
            "it is a `{}`, not a list",
            listed.value().get_type()
        ))
    })?;
    let mut names = Vec::new();
    for item in list.iter() {
        let name = item
            .unpack_str()
            .ok_or_else(|| bad(format!("`{}` is not a string", item.to_repr())))?;
        let Some(name) = defined.iter().find(|d| *d == name) else {
            return Err(bad(format!(
                "`{name}` is not a function defined in the module"
            )));
        };
        names.push(name.as_str());
    }
    Ok(names)
}

/// The tool of one function.
fn tool(
    module: &Arc<ToolModule>,
    function: &str,
    origin: &str,
) -> Result<ServedFunction, ServeError> {
    let value = module
        .module
        .get(function)
        .map_err(|e| ServeError::Code(format!("{origin}: {e}")))?;
    let DocItem::Member(DocMember::Function(docs)) = value.value().documentation() else {
        return Err(ServeError::Code(format!(
            "{origin}: `{function}` is not a function"
        )));
    };
    let bad = |detail: String| ServeError::Signature {
        module: origin.to_string(),
        function: function.to_string(),
        detail,
    };
    let DocFunction { docs, params, ret } = docs;
    if let Some(p) = params.pos_only.first() {
        return Err(bad(format!(
            "`{}` is positional-only; tools are called with named arguments",
            p.name
        )));
    }
    if params.args.is_some() || params.kwargs.is_some() {
        // starlark's docs do not keep the star parameters' own names.
        return Err(bad(
            "a `*args` or `**kwargs` parameter cannot be described by a schema; name each parameter"
                .to_string(),
        ));
    }
    let params = params
        .pos_or_named
        .iter()
        .chain(&params.named_only)
        .map(|p| param(p).map_err(&bad))
        .collect::<Result<Vec<_>, _>>()?;
    let output = match Shape::from_ty(&ret.typ) {
        Ok(shape) if shape.is_object() => Some(shape),
        Ok(_) => None,
        Err(ty) => return Err(bad(format!("its return type `{ty}` has no JSON form"))),
    };
    Ok(ServedFunction {
        name: snake_case(function),
        function: function.to_string(),
        module: Arc::clone(module),
        description: docs.map(|d| d.summary).filter(|s| !s.is_empty()),
        params,
        output,
    })
}

fn param(p: &DocParam) -> Result<Param, String> {
    let default = p.default_value.as_deref().and_then(default_json);
    let shape = match Shape::from_ty(&p.typ) {
        Ok(Shape::Any) => default.as_ref().map_or(Shape::Any, Shape::of_value),
        Ok(shape) => shape,
        Err(ty) => {
            return Err(format!(
                "parameter `{}` has type `{ty}`, which has no JSON form; use `str`, `int`, `float`, `bool`, `list[...]`, `dict[str, ...]` or `... | None`",
                p.name
            ));
        }
    };
    Ok(Param {
        name: p.name.clone(),
        shape,
        required: p.default_value.is_none(),
        default,
        description: p.docs.as_ref().map(text_of),
    })
}

/// A parameter's description: its summary and any further lines.
fn text_of(docs: &DocString) -> String {
    match &docs.details {
        Some(details) => format!("{}\n{details}", docs.summary),
        None => docs.summary.clone(),
    }
}

/// `fooBar`, `FooBar` and `foo_bar` all give `foo_bar`; `HTTPServer` gives `http_server`.
pub(crate) fn snake_case(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let previous = i.checked_sub(1).map(|j| chars[j]);
            let next = chars.get(i + 1);
            let starts_word = previous.is_some_and(|p| p.is_lowercase() || p.is_ascii_digit())
                || (previous.is_some_and(char::is_uppercase)
                    && next.is_some_and(|n| n.is_lowercase()));
            if starts_word && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn snake_case_of_names() {
        for (name, snake) in [
            ("foo_bar", "foo_bar"),
            ("fooBar", "foo_bar"),
            ("FooBar", "foo_bar"),
            ("HTTPServer", "http_server"),
            ("getHTTP2Url", "get_http2_url"),
            ("already__snake", "already__snake"),
        ] {
            assert_eq!(snake_case(name), snake, "{name}");
        }
    }
}
