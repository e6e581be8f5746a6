//! What can be found in a script without running it: the signature of `execute`
//! ([`execute_signature`], checked whenever a script loads), and the calls that starlark's
//! typechecker refuses against the typed signatures of the builtins and of the script's own
//! functions ([`typecheck`]: a misspelled keyword, a value of the wrong type), each with its
//! location and, where there is one, a hint.
//!
//! Running a script never depends on the typechecker: `mekara check` reports what it finds,
//! so a script it wrongly refused would still run, and every builtin checks its arguments
//! again at run time.

use std::collections::HashMap;

use starlark::codemap::Span;
use starlark::docs::{DocItem, DocMember};
use starlark::syntax::AstModule;
use starlark::syntax::ast::{
    ArgumentP, AssignTargetP, AstExpr, AstLiteral, AstNoPayload, AstStmt, BinOp, DefP, ExprP,
    ParameterP, StmtP,
};
use starlark::typing::{AstModuleTypecheck, Interface};

use super::builtins::{dialect, globals};
use super::declared::ResultRecord;
use super::diagnostics::{CodeError, closest, closest_or_all, render};
use super::modules::{FindModule, ModuleGraph};

/// A step builtin called in a script's source, as `mekara run --dry-run` lists it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PlannedStep {
    /// The line of the call, from 1.
    pub line: usize,
    /// `auto`, `llm`, `ask`, `call_script`, `mcp`, or `parallel` for a group.
    pub builtin: &'static str,
    /// How many `parallel` calls it is written in (a member's steps are 1).
    pub depth: usize,
    /// The first argument when it is written out: a string's text, or `f(…)` for a function
    /// called as a step.
    pub what: Option<String>,
    /// `what` is a template: an `auto` command whose parts in `{…}` are computed when it
    /// runs (`f"git tag v{version}"`, `"echo " + name`).
    pub template: bool,
    /// The `context` given as a string, if any.
    pub context: Option<String>,
    /// The names in an `expects` written as a dict.
    pub expects: Vec<String>,
}

/// The step builtins called in `source`, in the order they are written. Which of them run,
/// and how often, is known only by running the script.
pub(crate) fn planned_steps(origin: &str, source: &str) -> Result<Vec<PlannedStep>, String> {
    const STEPS: [&str; 6] = ["auto", "llm", "ask", "call_script", "mcp", "parallel"];
    fn expr(e: &AstExpr, depth: usize, c: &Constants<'_>, out: &mut Vec<(Span, PlannedStep)>) {
        let literal = |e: &AstExpr| c.text(e);
        let mut inner = depth;
        if let ExprP::Call(callee, args) = &e.node
            && let ExprP::Identifier(name) = &callee.node
            && let Some(builtin) = STEPS.iter().find(|b| **b == name.node.ident)
        {
            let mut step = PlannedStep {
                line: 0,
                builtin,
                depth,
                what: None,
                template: false,
                context: None,
                expects: Vec::new(),
            };
            for arg in &args.args {
                match &arg.node {
                    ArgumentP::Positional(value) if step.what.is_none() => {
                        step.what = match &value.node {
                            // `parallel([lambda: …, …])`
                            ExprP::List(members) if *builtin == "parallel" => {
                                Some(match members.len() {
                                    1 => "1 member".to_string(),
                                    n => format!("{n} members at once"),
                                })
                            }
                            // `auto(function, kwargs)`; a constant holding a command is
                            // that command, and another variable is known only by running.
                            ExprP::Identifier(f) if *builtin == "auto" => {
                                literal(value).or_else(|| {
                                    let positional = args
                                        .args
                                        .iter()
                                        .filter(|a| matches!(a.node, ArgumentP::Positional(_)))
                                        .count();
                                    (positional > 1 || c.is_function(&f.node.ident))
                                        .then(|| format!("{}(…)", f.node.ident))
                                        .or_else(|| {
                                            let template = c.template(value)?;
                                            step.template = true;
                                            Some(template)
                                        })
                                })
                            }
                            // Only the commands of `auto` are worked out from constants:
                            // `mekara check`'s warnings read the other texts as written. What
                            // is known only by running shows as `{…}` in a template.
                            _ if *builtin == "auto" => literal(value).or_else(|| {
                                let template = c.template(value)?;
                                step.template = true;
                                Some(template)
                            }),
                            ExprP::Literal(AstLiteral::String(s)) => Some(s.node.clone()),
                            _ => None,
                        };
                    }
                    ArgumentP::Named(name, value) if name.node == "context" => {
                        step.context = literal(value);
                    }
                    ArgumentP::Named(name, value) if name.node == "expects" => {
                        if let ExprP::Dict(pairs) = &value.node {
                            step.expects = pairs.iter().filter_map(|(k, _)| literal(k)).collect();
                        }
                    }
                    ArgumentP::Named(name, value) if name.node == "max" => {
                        if let ExprP::Literal(max @ AstLiteral::Int(_)) = &value.node {
                            step.context = Some(format!("at most {max} at a time"));
                        }
                    }
                    _ => {}
                }
            }
            if *builtin == "parallel" {
                inner += 1;
            }
            out.push((e.span, step));
        }
        e.node.visit_expr(|e| expr(e, inner, c, out));
    }
    let ast =
        AstModule::parse(origin, source.to_string(), &dialect()).map_err(|e| e.to_string())?;
    let constants = Constants::of(&ast);
    let mut found = Vec::new();
    ast.statement()
        .node
        .visit_expr(|e| expr(e, 0, &constants, &mut found));
    found.sort_by_key(|(span, _)| span.begin());
    Ok(found
        .into_iter()
        .map(|(span, mut step)| {
            step.line = ast.file_span(span).resolve_span().begin.line + 1;
            step
        })
        .collect())
}

/// The string constants of a module, as `--dry-run` shows the text of a step: the names
/// assigned once at the top level (never again, nor with `+=`), each to a string that can be
/// worked out without running anything: a literal, a constant, `+` of such strings, and
/// `"…".format(…)` or `"…" % …` of them.
struct Constants<'a> {
    assigned: HashMap<&'a str, &'a AstExpr>,
    /// The names assigned once in the whole module, inside a function (not a parameter, a
    /// loop's variable, a top-level name or one changed with `+=`), for templates.
    locals: HashMap<&'a str, &'a AstExpr>,
    /// The functions the module defines or loads.
    functions: Vec<&'a str>,
}

impl<'a> Constants<'a> {
    /// How deep constants may refer to constants (a cycle is not a constant).
    const DEPTH: usize = 16;
    /// How deep a template's parts may refer to locals and constants.
    const TEMPLATE_DEPTH: usize = 8;

    fn of(ast: &'a AstModule) -> Constants<'a> {
        let mut constants = Constants {
            assigned: HashMap::new(),
            locals: HashMap::new(),
            functions: Vec::new(),
        };
        let mut again = Vec::new();
        let top: &[AstStmt] = match &ast.statement().node {
            StmtP::Statements(stmts) => stmts,
            _ => std::slice::from_ref(ast.statement()),
        };
        for stmt in top {
            match &stmt.node {
                StmtP::Assign(assign) => match &assign.lhs.node {
                    AssignTargetP::Identifier(name) => {
                        let name = name.node.ident.as_str();
                        if constants.assigned.insert(name, &assign.rhs).is_some() {
                            again.push(name);
                        }
                    }
                    target => again.extend(assigned_names(target)),
                },
                StmtP::AssignModify(target, _, _) => again.extend(assigned_names(&target.node)),
                StmtP::Def(def) => constants.functions.push(def.name.node.ident.as_str()),
                StmtP::Load(load) => constants
                    .functions
                    .extend(load.args.iter().map(|a| a.local.node.ident.as_str())),
                // A name assigned in a branch or a loop of the module is not a constant.
                other => other.visit_stmt(|child| collect_assigned(child, &mut again)),
            }
        }
        let mut top_level: Vec<&str> = constants.assigned.keys().copied().collect();
        top_level.extend(&again);
        for name in again {
            constants.assigned.remove(name);
        }
        let mut locals = Locals::default();
        for stmt in top {
            if let StmtP::Def(def) = &stmt.node {
                locals.def(def);
            }
        }
        for name in top_level.into_iter().chain(locals.not_once) {
            locals.once.remove(name);
        }
        constants.locals = locals.once;
        constants
    }

    /// A template of the string `e` holds: its parts worked out as [`Constants::text`] does,
    /// and each part known only by running shown as `{name}` or `{expression}`; `None` when
    /// no part is known (a template of nothing but `{…}` says nothing).
    fn template(&self, e: &AstExpr) -> Option<String> {
        let (text, known) = self.template_at(e, 0)?;
        known.then_some(text)
    }

    /// The template of `e`, and whether some of it is known text.
    fn template_at(&self, e: &AstExpr, depth: usize) -> Option<(String, bool)> {
        const SHOWN: usize = 40;
        let unknown = |e: &AstExpr| {
            let shown = e.node.to_string();
            (
                format!("{{{}}}", crate::display::clipped(&shown, SHOWN)),
                false,
            )
        };
        // Shallower than constants: each `+` of locals doubles the parts to work out.
        if depth > Self::TEMPLATE_DEPTH {
            return Some(unknown(e));
        }
        if let Some(text) = self.text_at(e, depth) {
            return Some((text, true));
        }
        let part = |e: &AstExpr| self.template_at(e, depth + 1);
        // The parts of a `%`, `.format` or f-string, each shown as its template.
        let fill = |values: &[&AstExpr], known: bool| -> Option<(Vec<String>, bool)> {
            let mut known = known;
            let mut texts = Vec::new();
            for value in values {
                let (text, k) = part(value)?;
                known |= k;
                texts.push(text);
            }
            Some((texts, known))
        };
        Some(match &e.node {
            // A local whose value has no known part shows as its own name.
            ExprP::Identifier(name) => match self.locals.get(name.node.ident.as_str()) {
                Some(value) => Some(part(value)?)
                    .filter(|(_, known)| *known)
                    .unwrap_or_else(|| unknown(e)),
                None => unknown(e),
            },
            ExprP::Op(left, BinOp::Add, right) => {
                let (left, l) = part(left)?;
                let (right, r) = part(right)?;
                (left + &right, l || r)
            }
            ExprP::Op(template, BinOp::Percent, values) => {
                let Some(template) = self.text_at(template, depth + 1) else {
                    return Some(unknown(e));
                };
                let values: Vec<&AstExpr> = match &values.node {
                    ExprP::Tuple(items) => items.iter().collect(),
                    _ => vec![values],
                };
                let (values, known) = fill(&values, !template.is_empty())?;
                match percent(&template, &values) {
                    Some(text) => (text, known),
                    None => unknown(e),
                }
            }
            ExprP::FString(fstring) => {
                let values: Vec<&AstExpr> = fstring.node.expressions.iter().collect();
                let literal = str_format(
                    &fstring.node.format.node,
                    &vec![String::new(); values.len()],
                );
                let (values, known) = fill(&values, literal.is_some_and(|l| !l.is_empty()))?;
                match str_format(&fstring.node.format.node, &values) {
                    Some(text) => (text, known),
                    None => unknown(e),
                }
            }
            ExprP::Call(callee, args) => {
                let template = match &callee.node {
                    ExprP::Dot(template, method) if method.node == "format" => {
                        self.text_at(template, depth + 1)
                    }
                    _ => None,
                };
                let values: Option<Vec<&AstExpr>> = args
                    .args
                    .iter()
                    .map(|arg| match &arg.node {
                        ArgumentP::Positional(value) => Some(value),
                        _ => None,
                    })
                    .collect();
                let (Some(template), Some(values)) = (template, values) else {
                    return Some(unknown(e));
                };
                let (values, known) = fill(&values, !template.is_empty())?;
                match str_format(&template, &values) {
                    Some(text) => (text, known),
                    None => unknown(e),
                }
            }
            _ => unknown(e),
        })
    }

    /// Whether `name` is a function the module defines or loads.
    fn is_function(&self, name: &str) -> bool {
        self.functions.contains(&name)
    }

    /// The string `e` holds, when it can be worked out without running anything.
    fn text(&self, e: &AstExpr) -> Option<String> {
        self.text_at(e, 0)
    }

    fn text_at(&self, e: &AstExpr, depth: usize) -> Option<String> {
        if depth > Self::DEPTH {
            return None;
        }
        let text = |e: &AstExpr| self.text_at(e, depth + 1);
        match &e.node {
            ExprP::Literal(AstLiteral::String(s)) => Some(s.node.clone()),
            ExprP::Identifier(name) => text(self.assigned.get(name.node.ident.as_str()).copied()?),
            ExprP::Op(left, BinOp::Add, right) => Some(text(left)? + &text(right)?),
            ExprP::Op(template, BinOp::Percent, values) => {
                let values = match &values.node {
                    ExprP::Tuple(items) => items.iter().map(text).collect::<Option<Vec<_>>>()?,
                    _ => vec![text(values)?],
                };
                percent(&text(template)?, &values)
            }
            ExprP::Call(callee, args) => {
                let ExprP::Dot(template, method) = &callee.node else {
                    return None;
                };
                if method.node != "format" {
                    return None;
                }
                let values = args
                    .args
                    .iter()
                    .map(|arg| match &arg.node {
                        ArgumentP::Positional(value) => text(value),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()?;
                str_format(&text(template)?, &values)
            }
            _ => None,
        }
    }
}

/// The names the functions of a module assign, for [`Constants::template`].
#[derive(Default)]
struct Locals<'a> {
    /// Assigned once so far, to this.
    once: HashMap<&'a str, &'a AstExpr>,
    /// Assigned again, in a loop's variable, with `+=`, to a tuple, or a parameter.
    not_once: Vec<&'a str>,
}

impl<'a> Locals<'a> {
    fn def(&mut self, def: &'a DefP<AstNoPayload>) {
        for param in &def.params {
            if let Some(name) = param.node.ident() {
                self.not_once.push(name.node.ident.as_str());
            }
        }
        self.stmt(&def.body);
    }

    fn stmt(&mut self, stmt: &'a AstStmt) {
        match &stmt.node {
            StmtP::Assign(assign) => match &assign.lhs.node {
                AssignTargetP::Identifier(name) => {
                    let name = name.node.ident.as_str();
                    if self.once.insert(name, &assign.rhs).is_some() {
                        self.not_once.push(name);
                    }
                }
                target => self.not_once.extend(assigned_names(target)),
            },
            StmtP::AssignModify(target, _, _) => {
                self.not_once.extend(assigned_names(&target.node));
            }
            StmtP::For(for_) => self.not_once.extend(assigned_names(&for_.var.node)),
            StmtP::Def(def) => self.def(def),
            _ => {}
        }
        if !matches!(stmt.node, StmtP::Def(_)) {
            stmt.node.visit_stmt(|child| self.stmt(child));
        }
    }
}

/// The names an assignment to `target` assigns.
fn assigned_names(target: &AssignTargetP<AstNoPayload>) -> Vec<&str> {
    match target {
        AssignTargetP::Identifier(name) => vec![name.node.ident.as_str()],
        AssignTargetP::Tuple(targets) => targets
            .iter()
            .flat_map(|t| assigned_names(&t.node))
            .collect(),
        AssignTargetP::Index(_) | AssignTargetP::Dot(..) => Vec::new(),
    }
}

/// The names `stmt` and the statements in it assign (not those of the functions it defines).
fn collect_assigned<'a>(stmt: &'a AstStmt, out: &mut Vec<&'a str>) {
    match &stmt.node {
        StmtP::Assign(assign) => out.extend(assigned_names(&assign.lhs.node)),
        StmtP::AssignModify(target, _, _) => out.extend(assigned_names(&target.node)),
        StmtP::For(for_) => out.extend(assigned_names(&for_.var.node)),
        _ => {}
    }
    if !matches!(stmt.node, StmtP::Def(_)) {
        stmt.node.visit_stmt(|child| collect_assigned(child, out));
    }
}

/// `template % values` for `%s` and `%%` only.
fn percent(template: &str, values: &[String]) -> Option<String> {
    let mut out = String::new();
    let mut values = values.iter();
    let mut chars = template.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '%' => out.push('%'),
            's' => out.push_str(values.next()?),
            _ => return None,
        }
    }
    values.next().is_none().then_some(out)
}

/// `template.format(*values)` for `{}`, `{N}`, `{{` and `}}` only.
fn str_format(template: &str, values: &[String]) -> Option<String> {
    let mut out = String::new();
    let mut next = 0;
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '{' => {
                let mut field = String::new();
                loop {
                    match chars.next()? {
                        '}' => break,
                        c => field.push(c),
                    }
                }
                let index = if field.is_empty() {
                    next += 1;
                    next - 1
                } else {
                    field.parse().ok()?
                };
                out.push_str(values.get(index)?);
            }
            '}' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

/// The problems starlark's typechecker finds in `source` and the helper modules it loads
/// (through `find`), each module checked against the interfaces of those it loads, and
/// rendered with their location; none when they do not load (loading reports that).
pub(crate) fn typecheck(origin: &str, source: &str, find: &FindModule<'_>) -> Vec<CodeError> {
    let Ok(graph) = ModuleGraph::collect(origin, source, find) else {
        return Vec::new();
    };
    let mut interfaces: Vec<Interface> = Vec::new();
    let mut problems = Vec::new();
    for node in graph.nodes {
        let loads: HashMap<String, Interface> = node
            .loads
            .iter()
            .map(|(path, index)| (path.clone(), interfaces[*index].clone()))
            .collect();
        let calls = Calls::of(&node.ast);
        let (errors, _, interface, _) = node.ast.clone().typecheck(globals(), &loads);
        interfaces.push(interface);
        // Where both report a field at the same place, the typechecker's words are shown.
        let typed: Vec<Span> = errors.iter().filter_map(|e| Some(e.span()?.span)).collect();
        let mut found: Vec<(Option<Span>, CodeError)> = super::step_results::problems(&node.ast)
            .into_iter()
            .filter(|(at, _)| !typed.contains(at))
            .map(|(at, problem)| (Some(at), problem))
            .collect();
        found.extend(errors.iter().map(|e| {
            let at = e.span().map(|at| at.span);
            let hint = at.and_then(|at| hint(&e.without_diagnostic().to_string(), at, &calls));
            let message = render(e);
            let problem = CodeError::new(match hint {
                Some(hint) => format!("{message}\nhint: {hint}"),
                None => message,
            });
            (at, problem)
        }));
        // In the order of the source, as a reader goes through it.
        found.sort_by_key(|(at, _)| at.map(|at| at.begin().get()));
        problems.extend(found.into_iter().map(|(_, problem)| problem));
    }
    problems
}

/// What a script's written-out step targets name that is not there: a `call_script` of a
/// script that does not resolve (`script_error` says why, `None` when it resolves), an `mcp`
/// call of a server `.mcp.json` does not declare (`server_error` likewise). Both fail only at
/// run time, after the steps before them ran.
pub(crate) fn target_problems(
    origin: &str,
    source: &str,
    script_error: &dyn Fn(&str) -> Option<String>,
    server_error: &dyn Fn(&str) -> Option<String>,
) -> Vec<CodeError> {
    let Ok(steps) = planned_steps(origin, source) else {
        return Vec::new();
    };
    steps
        .iter()
        .filter_map(|step| {
            let target = step.what.as_deref()?;
            let why = match step.builtin {
                "call_script" => script_error(target)?,
                "mcp" => server_error(target)?,
                _ => return None,
            };
            Some(CodeError::new(format!(
                "error: `{}(\"{target}\", ...)` cannot run: {why}\n --> {origin}:{}",
                step.builtin, step.line
            )))
        })
        .collect()
}

/// Words in an `llm` prompt that hand the agent a decision the person makes (a
/// confirmation, an approval, a choice), or talk with the person: unattended, there is no
/// person, and the agent would decide alone. Lowercase.
const ASKS_THE_PERSON: [&str; 14] = [
    "ask the user",
    "asks the user",
    "ask whether",
    "user to confirm",
    "user confirms",
    "confirm with the user",
    "confirmation from the user",
    "user to approve",
    "user approves",
    "approval from the user",
    "user to choose",
    "user chooses",
    "user to decide",
    "user decides",
];

/// The `llm` steps of `source` whose prompt, where it is written out, asks the person: each
/// as a warning naming its line and the words, and what to write instead. A decision the
/// NL script leaves to the user is an `ask` (`mekara check` warns; the script still runs).
pub(crate) fn person_warnings(origin: &str, source: &str) -> Vec<String> {
    let Ok(steps) = planned_steps(origin, source) else {
        return Vec::new();
    };
    steps
        .iter()
        .filter(|step| step.builtin == "llm")
        .filter_map(|step| {
            let prompt = step.what.as_deref()?.to_lowercase();
            let words = ASKS_THE_PERSON.iter().find(|w| prompt.contains(**w))?;
            Some(format!(
                "warning: {origin}:{}: this `llm` step's prompt asks the person (\"{words}\"): \
                 unattended there is no person, and the agent would answer alone\nhint: a \
                 question, confirmation or choice for the user is an `ask(question, choices = \
                 [...])` step (choices where there are choices): mekara asks the person, and an \
                 unattended run waits for `mekara answer`",
                step.line
            ))
        })
        .collect()
}

/// Why `execute` of `ast` cannot be called with the script's arguments (one positional
/// argument), when it cannot.
pub(super) fn execute_signature(ast: &AstModule) -> Option<CodeError> {
    let top = match &ast.statement().node {
        StmtP::Statements(statements) => statements.iter().collect(),
        _ => vec![ast.statement()],
    };
    let execute = top.into_iter().rev().find_map(|s| match &s.node {
        StmtP::Def(def) if def.name.node.ident == "execute" => Some(def),
        _ => None,
    })?;
    let problem = signature_problem(execute)?;
    let span = ast.file_span(execute.signature_span());
    let mut e = starlark::Error::new_other(anyhow::anyhow!("{problem}"));
    e.set_span(span.span, &span.file);
    Some(CodeError::new(format!(
        "{}\nhint: define `def execute(request):`; mekara calls it with the script's arguments, a string",
        render(&e)
    )))
}

/// What is wrong with `def`'s parameters for a call with one positional argument.
fn signature_problem(def: &DefP<AstNoPayload>) -> Option<String> {
    let mut positional = Vec::new();
    let mut required = Vec::new();
    let mut required_named = Vec::new();
    let mut star_args = false;
    let mut after_star = false;
    for param in &def.params {
        match &param.node {
            ParameterP::Normal(name, _, default) => {
                let name = name.node.ident.as_str();
                let is_required = default.is_none();
                if after_star {
                    if is_required {
                        required_named.push(name);
                    }
                } else {
                    positional.push(name);
                    if is_required {
                        required.push(name);
                    }
                }
            }
            ParameterP::Args(..) => {
                star_args = true;
                after_star = true;
            }
            ParameterP::NoArgs => after_star = true,
            ParameterP::Slash | ParameterP::KwArgs(..) => {}
        }
    }
    let names = |names: &[&str]| {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if positional.is_empty() && !star_args {
        Some("`execute` takes no positional parameter, but mekara passes it one".to_string())
    } else if required.len() > 1 {
        Some(format!(
            "`execute` has {} required parameters ({}), but mekara passes it one",
            required.len(),
            names(&required)
        ))
    } else if !required_named.is_empty() {
        Some(format!(
            "`execute` has required keyword-only parameters ({}), but mekara passes it one positional argument",
            names(&required_named)
        ))
    } else {
        None
    }
}

/// What a hint needs from the module: its calls, and the parameters of its functions.
struct Calls<'a> {
    /// Each call's span and the name it calls, when it calls a name.
    calls: Vec<(Span, &'a str)>,
    /// The parameter names of the functions the module defines.
    defined: HashMap<&'a str, Vec<&'a str>>,
}

impl<'a> Calls<'a> {
    fn of(ast: &'a AstModule) -> Calls<'a> {
        let mut found = Calls {
            calls: Vec::new(),
            defined: HashMap::new(),
        };
        found.stmt(ast.statement());
        found
    }

    fn stmt(&mut self, stmt: &'a AstStmt) {
        if let StmtP::Def(def) = &stmt.node {
            let params = def
                .params
                .iter()
                .filter_map(|p| p.node.ident())
                .map(|ident| ident.node.ident.as_str())
                .collect();
            self.defined.insert(def.name.node.ident.as_str(), params);
        }
        stmt.node.visit_expr(|e| self.expr(e));
        stmt.node.visit_stmt(|s| self.stmt(s));
    }

    fn expr(&mut self, expr: &'a AstExpr) {
        if let ExprP::Call(callee, _) = &expr.node
            && let ExprP::Identifier(name) = &callee.node
        {
            self.calls.push((expr.span, name.node.ident.as_str()));
        }
        expr.node.visit_expr(|e| self.expr(e));
    }

    /// The name called by the innermost call around `at`.
    fn callee(&self, at: Span) -> Option<&'a str> {
        self.calls
            .iter()
            .filter(|(span, _)| span.begin() <= at.begin() && at.end() <= span.end())
            .min_by_key(|(span, _)| span.end().get() - span.begin().get())
            .map(|(_, name)| *name)
    }

    /// The names of the parameters of `function` that a keyword can name: one of the module's,
    /// else a builtin.
    fn parameters(&self, function: &str) -> Vec<String> {
        if let Some(params) = self.defined.get(function) {
            return params.iter().map(ToString::to_string).collect();
        }
        let docs = globals().documentation();
        match docs.members.get(function) {
            Some(DocItem::Member(DocMember::Function(f))) => {
                let p = &f.params;
                p.pos_or_named
                    .iter()
                    .chain(&p.named_only)
                    .map(|param| param.name.clone())
                    .collect()
            }
            _ => Vec::new(),
        }
    }
}

/// A hint for a typechecker error `message` at `at`: the parameter a misspelled keyword
/// meant, or the field of a step's result a misspelled attribute meant.
fn hint(message: &str, at: Span, calls: &Calls<'_>) -> Option<String> {
    if let Some(hint) = field_hint(message) {
        return Some(hint);
    }
    let wrong = message
        .strip_prefix("Unexpected parameter named `")?
        .strip_suffix('`')?;
    let callee = calls.callee(at)?;
    let params = calls.parameters(callee);
    Some(match closest(wrong, params.iter().map(String::as_str)) {
        Some(p) => format!("did you mean `{p}`?"),
        None if params.is_empty() => format!("`{callee}` takes no keyword `{wrong}`"),
        None => format!(
            "`{callee}` takes {}",
            params
                .iter()
                .map(|p| format!("`{p}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    })
}

/// For "The attribute `x` is not available on the type `T`", where `T` is a step's result
/// (or a union holding some): the field meant, else the fields there are.
fn field_hint(message: &str) -> Option<String> {
    let (wrong, ty) = message
        .strip_prefix("The attribute `")?
        .split_once("` is not available on the type `")?;
    let ty = ty.strip_suffix('`')?;
    let mut fields: Vec<&str> = Vec::new();
    for record in ty.split(" | ").filter_map(ResultRecord::named) {
        for field in record.field_names() {
            if !fields.contains(&field) {
                fields.push(field);
            }
        }
    }
    if fields.is_empty() {
        return None;
    }
    Some(closest_or_all(wrong, fields.iter().copied(), "fields"))
}

/// Where the constant expression of `source` that would take the most memory once computed
/// is, as `--> file:line:col` and its line, when it takes at least `bytes`: starlark computes
/// such expressions (`"x" * 2000000000`) as it compiles the module, before any statement
/// runs, so a refusal of the memory cap there names no statement, and this names the line.
pub(crate) fn largest_constant(origin: &str, source: &str, bytes: u128) -> Option<String> {
    fn count(e: &AstExpr) -> Option<u128> {
        match &e.node {
            ExprP::Literal(AstLiteral::Int(i)) => i.node.to_string().parse().ok(),
            _ => None,
        }
    }
    /// The bytes `e` takes once computed, as far as its literals show.
    fn size(expr: &AstExpr) -> Option<u128> {
        match &expr.node {
            ExprP::Literal(AstLiteral::String(text)) => Some(text.node.len() as u128),
            ExprP::Literal(AstLiteral::Bytes(bytes)) => Some(bytes.node.len() as u128),
            ExprP::List(items) | ExprP::Tuple(items) => items
                .iter()
                .map(|item| size(item).or(Some(0)).map(|bytes| bytes + 16))
                .sum(),
            ExprP::Op(left, BinOp::Multiply, right) => {
                match (size(left), count(right), count(left), size(right)) {
                    (Some(bytes), Some(times), ..) | (_, _, Some(times), Some(bytes)) => {
                        bytes.checked_mul(times)
                    }
                    _ => None,
                }
            }
            ExprP::Op(left, BinOp::Add, right) => size(left)
                .zip(size(right))
                .map(|(one, other)| one.saturating_add(other)),
            _ => None,
        }
    }
    fn walk(e: &AstExpr, largest: &mut Option<(u128, Span)>) {
        if let Some(s) = size(e)
            && largest.is_none_or(|(most, _)| s > most)
        {
            *largest = Some((s, e.span));
        }
        e.node.visit_expr(|e| walk(e, largest));
    }
    fn walk_stmt(s: &AstStmt, largest: &mut Option<(u128, Span)>) {
        s.node.visit_expr(|e| walk(e, largest));
        s.node.visit_stmt(|s| walk_stmt(s, largest));
    }
    let ast = AstModule::parse(origin, source.to_string(), &dialect()).ok()?;
    let mut largest = None;
    walk_stmt(ast.statement(), &mut largest);
    let (size, span) = largest.filter(|(size, _)| *size >= bytes)?;
    let at = ast.file_span(span).resolve_span().begin;
    let line = source.lines().nth(at.line).unwrap_or_default().trim();
    Some(format!(
        "a constant expression computed as the script compiles, about {size} bytes:\n --> {origin}:{}:{}\n  | {line}",
        at.line + 1,
        at.column + 1
    ))
}
