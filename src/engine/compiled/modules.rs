//! Helper modules: the `load` statements of a compiled script, followed through the files
//! they name ([`ModuleGraph`]), with a missing module, a bad path or a cycle reported at the
//! `load` that names it.
//!
//! Where a `load` path leads is the caller's to say ([`FindModule`]: the resolver looks in
//! the script's own level); this module only walks the graph and hands the modules over in
//! an order where each comes after the ones it loads, for freezing or typechecking.

use std::collections::HashMap;
use std::fmt::Write as _;

use starlark::codemap::FileSpan;
use starlark::environment::{FrozenModule, Module};
use starlark::eval::{Evaluator, FileLoader};
use starlark::syntax::AstModule;
use starlark::syntax::ast::{AstExpr, AstLiteral, ExprP};

use super::builtins::{dialect, globals};
use super::context::LogPrinter;
use super::diagnostics::{CodeError, MemoryCheck, at_end_of_file, overflow_as_limit, render};
use super::limits::{Limits, apply_limits};
use crate::script::{HelperError, ScriptFile};

/// Finds the helper module a `load` path names.
pub(crate) type FindModule<'a> = dyn Fn(&str) -> Result<ScriptFile, HelperError> + 'a;

/// One module of the graph, parsed.
pub(super) struct Node {
    /// The file, in error locations.
    pub(super) origin: String,
    /// Its syntax tree; taken once by whoever consumes the graph.
    pub(super) ast: AstModule,
    /// Each `load` path it writes, with the index of the node it names.
    pub(super) loads: Vec<(String, usize)>,
    /// Where it is first loaded (`file:line:col`); none for the script itself.
    pub(super) loaded_at: Option<String>,
}

/// A script and every helper module it loads, directly or not: each module after the ones
/// it loads, the script last. A module loaded from several places is read once.
pub(super) struct ModuleGraph {
    pub(super) nodes: Vec<Node>,
}

impl ModuleGraph {
    /// Parses `source` and, through `find`, every module it loads.
    pub(super) fn collect(
        origin: &str,
        source: &str,
        find: &FindModule<'_>,
    ) -> Result<ModuleGraph, CodeError> {
        let mut graph = ModuleGraph { nodes: Vec::new() };
        let mut loading = Vec::new();
        graph.visit((origin, origin), source, None, find, &mut loading)?;
        Ok(graph)
    }

    /// The author's own text: the string literals of the script and of its helpers, where
    /// the prompt tags that may call tools are written (see `Program::authored`).
    pub(super) fn authored(&self) -> String {
        self.nodes
            .iter()
            .map(|node| string_literals(&node.ast))
            .collect()
    }

    /// The script's node.
    pub(super) fn root(&self) -> &Node {
        self.nodes
            .last()
            .expect("a collected graph holds at least the script")
    }

    /// Adds the module `origin` (named `name`: its load path, or the script's file) after
    /// the modules it loads, and returns its index. `loading` holds the modules being
    /// visited, origin and name, for finding cycles.
    fn visit(
        &mut self,
        (origin, name): (&str, &str),
        source: &str,
        loaded_at: Option<String>,
        find: &FindModule<'_>,
        loading: &mut Vec<(String, String)>,
    ) -> Result<usize, CodeError> {
        let ast = AstModule::parse(origin, source.to_string(), &dialect()).map_err(|e| {
            let message = render(&at_end_of_file(e, source));
            CodeError::new(match &loaded_at {
                Some(at) => format!("{message}\nnote: `{name}` is loaded at {at}"),
                None => message,
            })
        })?;
        loading.push((origin.to_string(), name.to_string()));
        let mut loads = Vec::new();
        for load in ast.loads() {
            let path = load.module_id;
            let file = find(path).map_err(|e| located(&load.span, &e.to_string(), e.hint()))?;
            if let Some(at) = loading.iter().position(|(o, _)| *o == file.origin) {
                let cycle: Vec<String> = loading[at..]
                    .iter()
                    .map(|(_, name)| format!("`{name}`"))
                    .chain(std::iter::once(format!("`{path}`")))
                    .collect();
                return Err(located(
                    &load.span,
                    &format!(
                        "modules load each other in a cycle: {}",
                        cycle.join(" loads ")
                    ),
                    "move what they share into a module that loads none of them",
                ));
            }
            let index = match self.nodes.iter().position(|n| n.origin == file.origin) {
                Some(index) => index,
                None => self.visit(
                    (&file.origin, path),
                    &file.text,
                    Some(location(&load.span)),
                    find,
                    loading,
                )?,
            };
            loads.push((path.to_string(), index));
        }
        loading.pop();
        self.nodes.push(Node {
            origin: origin.to_string(),
            ast,
            loads,
            loaded_at,
        });
        Ok(self.nodes.len() - 1)
    }
}

/// `file:line:col` of `span`.
pub(super) fn location(span: &FileSpan) -> String {
    let at = span.resolve_span();
    format!(
        "{}:{}:{}",
        span.filename(),
        at.begin.line + 1,
        at.begin.column + 1
    )
}

/// An error at `span`, rendered with its snippet, and a hint.
fn located(span: &FileSpan, message: &str, hint: &str) -> CodeError {
    let mut e = starlark::Error::new_other(anyhow::anyhow!("{message}"));
    e.set_span(span.span, &span.file);
    CodeError::new(format!("{}\nhint: {hint}", render(&e)))
}

impl ModuleGraph {
    /// Runs the top level of every module, each with the modules it loads, and returns the
    /// script's module.
    pub(super) fn freeze(self, limits: &Limits) -> Result<FrozenModule, CodeError> {
        let mut frozen: Vec<FrozenModule> = Vec::new();
        for node in self.nodes {
            let module = {
                let loads: HashMap<&str, &FrozenModule> = node
                    .loads
                    .iter()
                    .map(|(path, index)| (path.as_str(), &frozen[*index]))
                    .collect();
                freeze_module(&node.origin, node.ast, limits, &loads).map_err(|e| {
                    let mut message = e.message;
                    if message.contains("Module has no symbol `") {
                        for (path, module) in &loads {
                            let names: Vec<String> = module
                                .names()
                                .filter(|name| !name.as_str().starts_with('_'))
                                .map(|name| format!("`{}`", name.as_str()))
                                .collect();
                            let _ = write!(
                                message,
                                "\nhint: `{path}` defines {}",
                                if names.is_empty() {
                                    "nothing".to_string()
                                } else {
                                    names.join(", ")
                                }
                            );
                        }
                    }
                    if let Some(at) = &node.loaded_at {
                        let _ = write!(message, "\nnote: loaded at {at}");
                    }
                    CodeError::new(message)
                })?
            };
            frozen.push(module);
        }
        Ok(frozen
            .pop()
            .expect("a collected graph holds at least the script"))
    }
}

/// The modules a module's `load` statements name, by the path they write.
pub(super) struct Loads<'a>(pub(super) &'a HashMap<&'a str, &'a FrozenModule>);

impl FileLoader for Loads<'_> {
    fn load(&self, path: &str) -> starlark::Result<FrozenModule> {
        self.0.get(path).map(|m| (*m).clone()).ok_or_else(|| {
            starlark::Error::new_other(anyhow::anyhow!(
                "`{path}` cannot be loaded here; only compiled scripts and their helpers load modules"
            ))
        })
    }
}

/// The values of every string literal in `ast`, each followed by a NUL (which no tag holds
/// unescaped): the script author's own text. A prompt tag that calls a tool must be written
/// whole in one literal; one that comes from data (the request, an llm output, a tool's
/// result) is not in any.
pub(crate) fn string_literals(ast: &AstModule) -> String {
    fn expr(e: &AstExpr, out: &mut String) {
        if let ExprP::Literal(AstLiteral::String(s)) = &e.node {
            out.push_str(&s.node);
            out.push('\0');
        }
        e.node.visit_expr(|e| expr(e, out));
    }
    let mut out = String::new();
    // `visit_expr` of a statement reaches the expressions of the statements inside it.
    ast.statement().node.visit_expr(|e| expr(e, &mut out));
    out
}

/// Runs a parsed module's top level (where step builtins refuse to run), with the modules
/// its `load` statements name, and freezes it.
pub(crate) fn freeze_module(
    origin: &str,
    ast: AstModule,
    limits: &Limits,
    loads: &HashMap<&str, &FrozenModule>,
) -> Result<FrozenModule, CodeError> {
    let _budget = limits.budget();
    let frozen = overflow_as_limit(limits, || {
        Module::with_temp_heap(|module| -> Result<FrozenModule, CodeError> {
            {
                let printer = LogPrinter;
                let loader = Loads(loads);
                let mut eval = Evaluator::new(&module);
                eval.set_print_handler(&printer);
                eval.set_loader(&loader);
                apply_limits(&mut eval, limits).map_err(CodeError::new)?;
                MemoryCheck::watch(&mut eval, limits);
                eval.eval_module(ast, globals())
                    .map_err(|e| CodeError::new(render(&e)))?;
            }
            module
                .freeze()
                .map_err(|e| CodeError::new(format!("{origin}: {e:?}")))
        })
    });
    // starlark computes some constant expressions as it compiles, before any statement runs.
    frozen.unwrap_or_else(|limit| {
        Err(CodeError::new(format!(
            "error: {}\n --> {origin}",
            render(&limit)
        )))
    })
}
