//! What `mekara check` finds in how a script uses what its steps return, beyond what
//! starlark's typechecker sees in the result types the builtins declare (`declared.rs`).
//! The typechecker knows `auto`'s result as one record for both forms, an llm step's outputs
//! as a dict, and a name by all it is ever assigned in a function at once (`r` assigned a
//! step's result, then a struct with an `ouput`, lets `r.ouput` pass anywhere). So this
//! finds a field the result does not have, following each name from its assignment
//! (`r.ouput`; `r.value` of a command, `r.exit_code` of a function step), and an output the
//! step does not expect (`r.outputs["entyr"]`). Where the typechecker reports the same field
//! at the same place, its report is the one shown (`static_check::typecheck`). And starlark
//! 0.14 types `str + x` as fine whatever `x` is, so this finds a string field added to what
//! is not a string (`r.output + 1`). All fail only at run time, after earlier steps have
//! changed things.
//!
//! Which form an `auto` call takes is told from its first argument where the source shows it:
//! text (a string literal, an f-string, text joined with `+` or formatted with `%`, or a name
//! the module's top level binds to such text, `PROBE = """..."""`) is a command, whose result
//! has `exit_code` and no `value`; a function the module defines, a `lambda`, or a call with a
//! dict of arguments is a function step, whose result has `value` and no `exit_code`. Anything
//! else (a parameter, a dict's item, a name the module loads) may be either, so neither field
//! is reported.
//!
//! A name is followed within one function (or the module's top level), from its last
//! assignment before the use, in the order the source is written: a name assigned a step's
//! result in one branch and something else in another is followed from whichever assignment
//! comes last in the text, and a name assigned anything but a step call is not followed.
//! Running a script never depends on this: every field is checked again at run time.

use starlark::codemap::Span;
use starlark::syntax::AstModule;
use starlark::syntax::ast::{
    ArgumentP, AssignTargetP, AstAssignTarget, AstExpr, AstLiteral, AstNoPayload, AstStmt, BinOp,
    CallArgsP, ExprP, StmtP,
};
use starlark::typing::Ty;

use std::collections::HashSet;

use super::declared::ResultRecord;
use super::diagnostics::{CodeError, closest_or_all, render};

/// What a step call returned, as far as the source says.
#[derive(Debug, Clone)]
struct StepResult {
    /// `auto`, `llm`, ...
    builtin: &'static str,
    /// The line of the call, from 1.
    line: usize,
    /// The fields of its result, in the form the call takes (all of them until `resolve`).
    fields: Vec<&'static str>,
    /// What an `auto` call was given: which form it takes.
    target: Target,
    /// The builtin's result, as the typechecker knows it.
    declared: &'static ResultRecord,
    /// For an llm step whose `expects` is written out: the outputs it expects.
    expects: Option<Vec<String>>,
}

/// One thing that happens to a name, at a position of the source.
enum Event {
    /// The name is bound: to a step's result, or to something else.
    Bound(String, Option<StepResult>),
    /// `name.field`.
    Field(String, String, Span),
    /// `name.outputs["key"]`.
    Output(String, String, Span),
    /// `left + right`, `left < right` and the other orderings: the operator, its sides,
    /// and the whole expression's span.
    Op(BinOp, Operand, Operand, Span),
}

/// A side of an operator whose type the source shows.
enum Operand {
    /// A literal.
    Literal(Ty),
    /// `name.field`.
    Field(String, String),
}

impl Operand {
    /// Its type, when it is a literal or a field of a step's result.
    fn ty(&self, bound: &[(String, Option<StepResult>)]) -> Option<Ty> {
        match self {
            Operand::Literal(ty) => Some(ty.clone()),
            Operand::Field(name, field) => match bound.iter().find(|(n, _)| n == name) {
                Some((_, Some(result))) => result.declared.field_type(field),
                _ => None,
            },
        }
    }
}

/// The problems in `ast`'s uses of step results, each at its span, rendered with its
/// location.
pub(crate) fn problems(ast: &AstModule) -> Vec<(Span, CodeError)> {
    let mut scopes = Vec::new();
    scope(ast.statement(), None, &mut scopes);
    let top = TopLevel::of(ast.statement());
    let line = |span: Span| ast.file_span(span).resolve_span().begin.line + 1;
    let mut found = Vec::new();
    for (statements, params) in scopes {
        let mut events = Vec::new();
        for stmt in statements {
            events_of(stmt, &line, &mut events);
        }
        events.sort_by_key(|(at, _)| *at);
        // A function's parameters and the names it assigns are its own, whatever the module
        // binds them to; the top level's names are the module's.
        let local: HashSet<String> = match params {
            None => HashSet::new(),
            Some(params) => events
                .iter()
                .filter_map(|(_, e)| match e {
                    Event::Bound(name, _) => Some(name.clone()),
                    _ => None,
                })
                .chain(params)
                .collect(),
        };
        let names = Names {
            top: &top,
            local: &local,
        };
        let mut bound: Vec<(String, Option<StepResult>)> = Vec::new();
        for (_, event) in events {
            match event {
                Event::Bound(name, result) => {
                    bound.retain(|(n, _)| *n != name);
                    bound.push((name, result.map(|r| r.resolve(&names))));
                }
                Event::Field(name, field, span) => {
                    if let Some((_, Some(result))) = bound.iter().find(|(n, _)| *n == name)
                        && !result.fields.contains(&field.as_str())
                    {
                        found.push(located(
                            ast,
                            span,
                            &format!(
                                "`{name}` is what `{}` returned on line {}, which has no field `{field}`",
                                result.builtin, result.line
                            ),
                            &closest_or_all(&field, result.fields.iter().copied(), "fields"),
                        ));
                    }
                }
                Event::Op(op, left, right, span) => {
                    let (Some(left), Some(right)) = (left.ty(&bound), right.ty(&bound)) else {
                        continue;
                    };
                    let text = Ty::string();
                    // starlark checks `+` and the orderings but with a string on the left.
                    let not_text = right != Ty::any()
                        && !right
                            .iter_union()
                            .iter()
                            .any(|t| text.iter_union().contains(t));
                    if left == text && not_text {
                        let hint = if op == BinOp::Add {
                            "convert one side: `str(x)` to join text, or `int(s.strip())` to add numbers"
                        } else {
                            "compare like with like: `int(s.strip())` to compare numbers, or `str(x)` to compare text"
                        };
                        // `BinOp` displays with a space each side.
                        let op = op.to_string();
                        found.push(located(
                            ast,
                            span,
                            &format!(
                                "Binary operator `{}` is not available on the types `str` and `{right}`",
                                op.trim()
                            ),
                            hint,
                        ));
                    }
                }
                Event::Output(name, key, span) => {
                    let Some((_, Some(result))) = bound.iter().find(|(n, _)| *n == name) else {
                        continue;
                    };
                    let Some(expects) = &result.expects else {
                        continue;
                    };
                    if expects.contains(&key) {
                        continue;
                    }
                    let expected = if expects.is_empty() {
                        "no outputs".to_string()
                    } else {
                        crate::display::quoted(expects)
                    };
                    found.push(located(
                        ast,
                        span,
                        &format!(
                            "`{name}.outputs` has no `{key}`: the llm step on line {} expects {expected}",
                            result.line
                        ),
                        &closest_or_all(&key, expects.iter().map(String::as_str), "outputs"),
                    ));
                }
            }
        }
    }
    found
}

/// The statements of a scope, and its parameters: `None` for the module's top level.
type Scope<'a> = (Vec<&'a AstStmt>, Option<Vec<String>>);

/// The statements of each scope: the module's top level, and each function's body.
fn scope<'a>(stmt: &'a AstStmt, params: Option<Vec<String>>, scopes: &mut Vec<Scope<'a>>) {
    fn collect<'a>(stmt: &'a AstStmt, here: &mut Vec<&'a AstStmt>, scopes: &mut Vec<Scope<'a>>) {
        match &stmt.node {
            StmtP::Statements(list) => list.iter().for_each(|s| collect(s, here, scopes)),
            StmtP::Def(def) => {
                let params = def
                    .params
                    .iter()
                    .filter_map(|p| p.node.ident())
                    .map(|p| p.node.ident.clone())
                    .collect();
                scope(&def.body, Some(params), scopes);
            }
            // A block's statements are in the scope it is written in.
            StmtP::If(_, then) => {
                here.push(stmt);
                collect(then, here, scopes);
            }
            StmtP::IfElse(_, branches) => {
                here.push(stmt);
                collect(&branches.0, here, scopes);
                collect(&branches.1, here, scopes);
            }
            StmtP::For(for_) => {
                here.push(stmt);
                collect(&for_.body, here, scopes);
            }
            _ => here.push(stmt),
        }
    }
    let mut here = Vec::new();
    collect(stmt, &mut here, scopes);
    scopes.push((here, params));
}

/// The events of one statement (not of the blocks nested in it, which are statements of
/// their own), each at its position.
fn events_of(stmt: &AstStmt, line: &dyn Fn(Span) -> usize, events: &mut Vec<(u32, Event)>) {
    match &stmt.node {
        StmtP::Assign(assign) => {
            uses(&assign.rhs, events);
            // Bound after its right-hand side is read.
            let at = assign.rhs.span.end().get();
            match &assign.lhs.node {
                AssignTargetP::Identifier(name) => {
                    let result = step_result(&assign.rhs, line);
                    events.push((at, Event::Bound(name.node.ident.clone(), result)));
                }
                _ => rebound(&assign.lhs, at, events),
            }
        }
        StmtP::AssignModify(target, _, rhs) => {
            uses(rhs, events);
            rebound(target, rhs.span.end().get(), events);
        }
        StmtP::For(for_) => {
            uses(&for_.over, events);
            rebound(&for_.var, for_.over.span.end().get(), events);
        }
        StmtP::If(cond, _) | StmtP::IfElse(cond, _) => uses(cond, events),
        StmtP::Expression(e) | StmtP::Return(Some(e)) => uses(e, events),
        _ => {}
    }
}

/// Every name `target` binds, bound to something that is not a step's result.
fn rebound(target: &AstAssignTarget, at: u32, events: &mut Vec<(u32, Event)>) {
    match &target.node {
        AssignTargetP::Identifier(name) => {
            events.push((at, Event::Bound(name.node.ident.clone(), None)));
        }
        AssignTargetP::Tuple(items) => items.iter().for_each(|t| rebound(t, at, events)),
        AssignTargetP::Index(_) | AssignTargetP::Dot(..) => {}
    }
}

/// The uses of step results in `expr`: `name.field` and `name.outputs["key"]`.
fn uses(expr: &AstExpr, events: &mut Vec<(u32, Event)>) {
    match &expr.node {
        ExprP::Dot(object, field) => {
            if let ExprP::Identifier(name) = &object.node {
                events.push((
                    field.span.begin().get(),
                    Event::Field(name.node.ident.clone(), field.node.clone(), field.span),
                ));
            }
        }
        ExprP::Op(
            left,
            op @ (BinOp::Add
            | BinOp::Less
            | BinOp::LessOrEqual
            | BinOp::Greater
            | BinOp::GreaterOrEqual),
            right,
        ) => {
            if let (Some(l), Some(r)) = (operand(left), operand(right)) {
                events.push((expr.span.begin().get(), Event::Op(*op, l, r, expr.span)));
            }
        }
        ExprP::Index(pair) => {
            let (object, key) = &**pair;
            if let ExprP::Dot(inner, field) = &object.node
                && field.node == "outputs"
                && let ExprP::Identifier(name) = &inner.node
                && let ExprP::Literal(AstLiteral::String(key_text)) = &key.node
            {
                events.push((
                    key.span.begin().get(),
                    Event::Output(name.node.ident.clone(), key_text.node.clone(), key.span),
                ));
            }
        }
        _ => {}
    }
    expr.node.visit_expr(|e| uses(e, events));
}

/// `expr` as a side of an operator, when the source shows its type.
fn operand(expr: &AstExpr) -> Option<Operand> {
    match &expr.node {
        ExprP::Literal(AstLiteral::Int(_)) => Some(Operand::Literal(Ty::int())),
        ExprP::Literal(AstLiteral::Float(_)) => Some(Operand::Literal(Ty::float())),
        ExprP::Literal(AstLiteral::String(_)) | ExprP::FString(_) => {
            Some(Operand::Literal(Ty::string()))
        }
        ExprP::Dot(object, field) => match &object.node {
            ExprP::Identifier(name) => {
                Some(Operand::Field(name.node.ident.clone(), field.node.clone()))
            }
            _ => None,
        },
        _ => None,
    }
}

/// What the call `expr` returns, when it is a step builtin's call.
fn step_result(expr: &AstExpr, line: &dyn Fn(Span) -> usize) -> Option<StepResult> {
    let ExprP::Call(callee, args) = &expr.node else {
        return None;
    };
    let ExprP::Identifier(name) = &callee.node else {
        return None;
    };
    let first = args.args.iter().find_map(|a| match &a.node {
        ArgumentP::Positional(value) => Some(value),
        _ => None,
    });
    let builtin = name.node.ident.as_str();
    let declared = ResultRecord::of(builtin)?;
    let positional = args
        .args
        .iter()
        .filter(|a| matches!(a.node, ArgumentP::Positional(_)))
        .count();
    let for_commands = args.args.iter().any(|a| {
        matches!(&a.node, ArgumentP::Named(n, _)
            if ["env", "working_dir", "timeout", "shell"].contains(&n.node.as_str()))
    });
    // `auto` refuses a dict of arguments for a command, and a command's settings for a
    // function: either one tells the form whatever the first argument is.
    let target = match (builtin, first) {
        ("auto", _) if positional > 1 => Target::Function,
        ("auto", _) if for_commands => Target::Text,
        ("auto", Some(first)) => Target::of(first),
        _ => Target::Unknown,
    };
    let expects = (builtin == "llm").then(|| expected_outputs(args)).flatten();
    Some(StepResult {
        builtin: declared.builtin,
        line: line(expr.span),
        fields: declared.field_names().collect(),
        target,
        declared,
        expects,
    })
}

impl StepResult {
    /// Its fields in the form the call takes, now that the scope's `names` are known.
    fn resolve(mut self, names: &Names) -> Self {
        let other_form = match self.target.form(names) {
            Some(Form::Command) => Some("value"),
            Some(Form::Function) => Some("exit_code"),
            None => None,
        };
        self.fields.retain(|f| Some(*f) != other_form);
        self
    }
}

/// The two forms of `auto`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Form {
    /// A shell command: its result has `exit_code`.
    Command,
    /// A function of the script: its result has `value`.
    Function,
}

/// What an `auto` call was given, as far as the source shows.
#[derive(Debug, Clone)]
enum Target {
    /// Text: a string literal or an f-string.
    Text,
    /// A function: a `lambda`, or a call with a dict of arguments.
    Function,
    /// A name, told by what the scope and the module bind it to.
    Name(String),
    /// Text when any part is (`"git " + ARGS`, `FORMAT % x`, `TEMPLATE.replace(...)`).
    Joined(Vec<Target>),
    /// A dict's item, a call's result, ...: either form.
    Unknown,
}

/// The methods of a string that return a string.
const TEXT_METHODS: [&str; 8] = [
    "replace", "format", "strip", "lstrip", "rstrip", "lower", "upper", "join",
];

impl Target {
    fn of(expr: &AstExpr) -> Target {
        match &expr.node {
            ExprP::Literal(AstLiteral::String(_)) | ExprP::FString(_) => Target::Text,
            ExprP::Lambda(_) => Target::Function,
            ExprP::Identifier(name) => Target::Name(name.node.ident.clone()),
            ExprP::Op(left, BinOp::Add, right) => {
                Target::Joined(vec![Target::of(left), Target::of(right)])
            }
            ExprP::Op(left, BinOp::Percent, _) => Target::Joined(vec![Target::of(left)]),
            ExprP::Call(callee, _) => match &callee.node {
                ExprP::Dot(object, method) if TEXT_METHODS.contains(&method.node.as_str()) => {
                    Target::Joined(vec![Target::of(object)])
                }
                _ => Target::Unknown,
            },
            _ => Target::Unknown,
        }
    }

    /// Its form, when the source tells it.
    fn form(&self, names: &Names) -> Option<Form> {
        match self {
            Target::Text => Some(Form::Command),
            Target::Function => Some(Form::Function),
            Target::Name(name) if names.local.contains(name) => None,
            Target::Name(name) if names.top.texts.contains(name) => Some(Form::Command),
            Target::Name(name) if names.top.functions.contains(name) => Some(Form::Function),
            Target::Joined(parts) => parts
                .iter()
                .any(|p| p.form(names) == Some(Form::Command))
                .then_some(Form::Command),
            Target::Name(_) | Target::Unknown => None,
        }
    }
}

/// The names of the module's top level that tell `auto`'s form: the functions it defines and
/// the names it binds to text, each as last bound in the order written.
#[derive(Default)]
struct TopLevel {
    functions: HashSet<String>,
    texts: HashSet<String>,
}

impl TopLevel {
    fn of(module: &AstStmt) -> TopLevel {
        let mut top = TopLevel::default();
        let statements = match &module.node {
            StmtP::Statements(list) => list.iter().collect(),
            _ => vec![module],
        };
        for stmt in statements {
            let (name, form) = match &stmt.node {
                StmtP::Def(def) => (&def.name.node.ident, Some(Form::Function)),
                StmtP::Assign(assign) => {
                    let AssignTargetP::Identifier(name) = &assign.lhs.node else {
                        continue;
                    };
                    let names = Names {
                        top: &top,
                        local: &HashSet::new(),
                    };
                    (&name.node.ident, Target::of(&assign.rhs).form(&names))
                }
                _ => continue,
            };
            top.functions.remove(name);
            top.texts.remove(name);
            match form {
                Some(Form::Function) => top.functions.insert(name.clone()),
                Some(Form::Command) => top.texts.insert(name.clone()),
                None => false,
            };
        }
        top
    }
}

/// The names a scope sees: its own, and the module's.
struct Names<'a> {
    top: &'a TopLevel,
    local: &'a HashSet<String>,
}

/// The outputs an llm call expects, when its `expects` is written out (a dict or a list of
/// strings), or absent (none).
fn expected_outputs(args: &CallArgsP<AstNoPayload>) -> Option<Vec<String>> {
    let given = args.args.iter().find_map(|a| match &a.node {
        ArgumentP::Named(name, value) if name.node == "expects" => Some(value),
        _ => None,
    });
    let Some(given) = given else {
        return Some(Vec::new());
    };
    let literal = |e: &AstExpr| match &e.node {
        ExprP::Literal(AstLiteral::String(s)) => Some(s.node.clone()),
        _ => None,
    };
    match &given.node {
        ExprP::Dict(pairs) => pairs.iter().map(|(k, _)| literal(k)).collect(),
        ExprP::List(items) => items.iter().map(literal).collect(),
        _ => None,
    }
}

/// `error: MESSAGE` at `span`, with starlark's snippet, and the hint.
fn located(ast: &AstModule, span: Span, message: &str, hint: &str) -> (Span, CodeError) {
    let mut e = starlark::Error::new_other(anyhow::anyhow!("{message}"));
    e.set_span(span, &ast.file_span(span).file);
    (
        span,
        CodeError::new(format!("{}\nhint: {hint}", render(&e))),
    )
}
