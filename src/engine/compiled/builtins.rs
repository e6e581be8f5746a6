//! The step builtins of compiled scripts (`auto`, `llm`, `ask`, `mcp`, `call_script`), the global
//! environment they live in ([`globals`]); the Starlark dialect ([`dialect`]) is the
//! script layer's.
//!
//! A builtin checks its arguments, says what the step asks for, and leaves the journal to
//! the [`StepContext`]: it takes the recorded result when there is one, else runs the effect
//! now or suspends the evaluation.

use std::sync::OnceLock;

use serde_json::{Map, Value as Json};
use starlark::environment::{Globals, GlobalsBuilder, LibraryExtension};
use starlark::eval::Evaluator;
use starlark::starlark_module;
use starlark::values::{Heap, Value};

use super::context::{StepContext, step_context};
use super::declared::{
    AskResult, AutoResult, CallScriptResult, Declared, DictOrNone, Expects, LlmResult, McpResult,
    Returns, Seconds, StepType,
};
use super::diagnostics::{is_limit, locate_in_function, render};
use super::evaluation::Suspension;
use super::values::{
    alloc_json, check_depth, error_value, expects_map, function_name, json_of, keyword_values,
    result_struct, seconds, string_map, unfit,
};
use crate::engine::runner::{Ran, ShellStep, ToolCall};
use crate::engine::step::{Kept, StepInput, StepResult};
use crate::engine::tool;
pub(crate) use crate::script::dialect::dialect;

/// The global environment: the standard library, `json`, `struct`, `print` and the step
/// builtins.
pub(crate) fn globals() -> &'static Globals {
    static GLOBALS: OnceLock<Globals> = OnceLock::new();
    GLOBALS.get_or_init(|| {
        GlobalsBuilder::extended_by(&[
            LibraryExtension::StructType,
            LibraryExtension::RecordType,
            LibraryExtension::EnumType,
            LibraryExtension::Map,
            LibraryExtension::Filter,
            LibraryExtension::Partial,
            LibraryExtension::Print,
            LibraryExtension::Typing,
            LibraryExtension::SetType,
        ])
        .with(step_builtins)
        .with(super::parallel::parallel_builtin)
        .with(|builder| builder.namespace("json", json_members))
        .build()
    })
}

#[starlark_module]
fn step_builtins(builder: &mut GlobalsBuilder) {
    /// Runs an auto step: a shell command, or a function of the script with keyword
    /// arguments. Returns `.success`, `.output`, `.error` and `.exit_code` (shell) or
    /// `.value` (function). A command runs with bash unless `shell` names `"pwsh"` or
    /// `"cmd"`.
    // The parameters are the user-facing script API, one Rust argument each.
    #[allow(clippy::too_many_arguments)]
    fn auto<'v>(
        #[starlark(require = pos)] step: Declared<'v, StepType>,
        #[starlark(require = pos)] kwargs: Option<Declared<'v, DictOrNone>>,
        #[starlark(require = named)] context: Option<&str>,
        #[starlark(require = named)] working_dir: Option<&str>,
        #[starlark(require = named)] timeout: Option<Declared<'v, Seconds>>,
        #[starlark(require = named)] env: Option<Declared<'v, DictOrNone>>,
        #[starlark(require = named, default = false)] allow_failure: bool,
        #[starlark(require = named)] shell: Option<&str>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Returns<'v, AutoResult>> {
        let ctx = step_context(eval, "auto")?;
        let (step, kwargs) = (step.value, kwargs.map(|k| k.value));
        let (timeout, env) = (timeout.map(|t| t.value), env.map(|e| e.value));
        let heap = eval.heap();
        let context = context.map(str::to_string);
        if let Some(command) = step.unpack_str() {
            if kwargs.is_some() {
                anyhow::bail!(
                    "`auto` takes keyword arguments only for a function step; pass `env = {{...}}` to set variables of a command"
                );
            }
            let chosen = shell
                .map(crate::engine::shell::named)
                .transpose()?
                .flatten();
            let shell = ShellStep {
                command: command.to_string(),
                working_dir: working_dir.map_or_else(
                    || ctx.working_dir.to_path_buf(),
                    |d| ctx.working_dir.join(d),
                ),
                env: env
                    .map(|e| string_map(e, "env"))
                    .transpose()?
                    .unwrap_or_default(),
                timeout: timeout
                    .map(seconds)
                    .transpose()?
                    .unwrap_or(ctx.default_timeout),
                group_note: ctx.group_note.cloned(),
                number: None,
                shell: chosen,
            };
            let input = shell.input();
            let index = ctx.cursor.get();
            let result = if ctx.in_member() {
                ctx.member_shell(shell, context, allow_failure)?
            } else {
                ctx.replay_or_run(&input, context, allow_failure, || {
                    ctx.runner.run_shell(
                        &shell,
                        &mut |chunk| ctx.observer.output(chunk),
                        ctx.cancel,
                    )
                })?
            };
            ctx.check_failure(index, &input, &result, allow_failure)?;
            let exit_code = result
                .exit_code
                .map_or_else(Value::new_none, |c| heap.alloc(c));
            return result_struct(
                heap,
                vec![
                    ("success", Value::new_bool(result.success)),
                    ("exit_code", exit_code),
                    ("output", heap.alloc(result.output.as_str())),
                    ("error", error_value(heap, &result)),
                ],
            );
        }
        if step.get_type() != "function" {
            anyhow::bail!(
                "`auto` takes a shell command (a string) or a function of the script, got a value of type `{}`",
                step.get_type()
            );
        }
        if working_dir.is_some() || timeout.is_some() || env.is_some() || shell.is_some() {
            anyhow::bail!(
                "`working_dir`, `timeout`, `env` and `shell` apply to shell commands, not to function steps"
            );
        }
        let kwargs_json = match kwargs {
            None => Map::new(),
            Some(k) if k.is_none() => Map::new(),
            Some(k) => match json_of(k, "the dict of keyword arguments of a function step")? {
                Json::Object(map) => map,
                other => anyhow::bail!(
                    "the keyword arguments of a function step must be a dict, got `{other}`"
                ),
            },
        };
        let input = StepInput::Function {
            function: function_name(step),
            kwargs: kwargs_json.clone(),
        };
        let result = ctx.effect(&input, context, allow_failure, || {
            Ran::Done(call_function(ctx, eval, step, &kwargs_json))
        })?;
        let value = result
            .value
            .as_ref()
            .map_or_else(Value::new_none, |v| alloc_json(heap, v));
        result_struct(
            heap,
            vec![
                ("success", Value::new_bool(result.success)),
                ("value", value),
                ("output", heap.alloc(result.output.as_str())),
                ("error", error_value(heap, &result)),
            ],
        )
    }

    /// Hands a step to the agent: suspends the script until the agent gives the outputs
    /// named in `expects` (a dict of name to description, or a list of names). Returns
    /// `.outputs`, a dict.
    fn llm<'v>(
        #[starlark(require = pos)] prompt: &str,
        #[starlark(require = named)] expects: Option<Declared<'v, Expects>>,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Returns<'v, LlmResult>> {
        let ctx = step_context(eval, "llm")?;
        let expects = expects.map(|e| e.value);
        // Tags become journaled mcp steps before the llm step, so re-deriving the pending
        // step answers them from the journal instead of calling again, and the journal
        // holds what the agent saw.
        let prompt = tool::expand(prompt, ctx.source, |server, tool, arguments| {
            let call = ToolCall {
                server: server.to_string(),
                tool: tool.to_string(),
                arguments,
                timeout: None,
            };
            ctx.replay_or_run(
                &call.input(),
                Some(tool::PROMPT_TAG_CONTEXT.to_string()),
                false,
                || call_tool(ctx, &call),
            )
        })?;
        let expects = match expects {
            None => None,
            Some(v) if v.is_none() => None,
            Some(v) => Some(expects_map(v)?),
        };
        let suspension = Suspension::Llm {
            prompt: Kept::text(&prompt),
            expects,
        };
        // An agent process that could not do the step failed it (`mekara run --agent …`).
        let result = ctx.replay_or_suspend(suspension, false)?;
        let heap = eval.heap();
        let outputs = Json::Object(result.outputs.unwrap_or_default());
        result_struct(
            heap,
            vec![
                ("success", Value::new_bool(true)),
                ("outputs", alloc_json(heap, &outputs)),
            ],
        )
    }

    /// Calls `tool` of MCP server `server` (declared in `.mcp.json`) with `arguments` (a
    /// dict), under the policy of `.mekara/config.toml`. Returns `.success`, `.content`
    /// (the text), `.structured` (the structured content, or `None`), `.is_error` (the
    /// tool said it failed) and `.error`. A failed call stops the script unless
    /// `allow_failure`.
    fn mcp<'v>(
        #[starlark(require = pos)] server: &str,
        #[starlark(require = pos)] tool: &str,
        arguments: Option<Declared<'v, DictOrNone>>,
        #[starlark(require = named)] context: Option<&str>,
        #[starlark(require = named)] timeout: Option<Declared<'v, Seconds>>,
        #[starlark(require = named, default = false)] allow_failure: bool,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Returns<'v, McpResult>> {
        let ctx = step_context(eval, "mcp")?;
        let (arguments, timeout) = (arguments.map(|a| a.value), timeout.map(|t| t.value));
        let arguments = match arguments {
            None => Map::new(),
            Some(a) if a.is_none() => Map::new(),
            Some(a) => match json_of(a, "the dict of arguments of an mcp step")? {
                Json::Object(map) => map,
                other => {
                    anyhow::bail!("the arguments of an mcp step must be a dict, got `{other}`")
                }
            },
        };
        let call = ToolCall {
            server: server.to_string(),
            tool: tool.to_string(),
            arguments,
            timeout: timeout.map(seconds).transpose()?,
        };
        let result = ctx.effect(
            &call.input(),
            context.map(str::to_string),
            allow_failure,
            || call_tool(ctx, &call),
        )?;
        let heap = eval.heap();
        let structured = result
            .structured
            .as_ref()
            .map_or_else(Value::new_none, |v| alloc_json(heap, v));
        result_struct(
            heap,
            vec![
                ("success", Value::new_bool(result.success)),
                ("content", heap.alloc(result.output.as_str())),
                ("structured", structured),
                ("is_error", Value::new_bool(result.is_error)),
                ("error", error_value(heap, &result)),
            ],
        )
    }

    /// Asks the person a question and waits for the answer: at the terminal, through the
    /// agent over MCP (which must not answer itself), or with `mekara answer`. `choices`
    /// limits the answers; an answer later than `timeout` seconds after the question fails
    /// the step (the script gets the failed result with `allow_failure`). Returns
    /// `.success`, `.answer` (a string, `None` when it failed) and `.error`.
    fn ask<'v>(
        #[starlark(require = pos)] question: &str,
        #[starlark(require = named)] choices: Option<Value<'v>>,
        #[starlark(require = named)] timeout: Option<Declared<'v, Seconds>>,
        #[starlark(require = named, default = false)] allow_failure: bool,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Returns<'v, AskResult>> {
        let ctx = step_context(eval, "ask")?;
        if question.trim().is_empty() {
            anyhow::bail!("`ask` needs a question: it is empty");
        }
        let choices = choices
            .filter(|c| !c.is_none())
            .map(choice_list)
            .transpose()?;
        let suspension = Suspension::Ask {
            question: Kept::text(question),
            choices,
            timeout: timeout
                .map(|t| t.value)
                .filter(|t| !t.is_none())
                .map(seconds)
                .transpose()?,
            allow_failure,
        };
        let result = ctx.replay_or_suspend(suspension, allow_failure)?;
        let heap = eval.heap();
        let answer = result
            .answer
            .as_deref()
            .map_or_else(Value::new_none, |a| heap.alloc(a));
        result_struct(
            heap,
            vec![
                ("success", Value::new_bool(result.success)),
                ("answer", answer),
                ("error", error_value(heap, &result)),
            ],
        )
    }

    /// Runs another script (compiled or NL) as a nested frame and waits for it. Returns
    /// `.success` and `.error`. A failed script stops this one unless `allow_failure`.
    fn call_script<'v>(
        #[starlark(require = pos)] name: &str,
        #[starlark(default = "")] request: &str,
        #[starlark(require = named)] working_dir: Option<&str>,
        #[starlark(require = named, default = false)] allow_failure: bool,
        eval: &mut Evaluator<'v, '_, '_>,
    ) -> anyhow::Result<Returns<'v, CallScriptResult>> {
        let ctx = step_context(eval, "call_script")?;
        let suspension = Suspension::Call {
            script: name.to_string(),
            request: request.to_string(),
            working_dir: working_dir.map_or_else(
                || ctx.working_dir.to_path_buf(),
                |d| ctx.working_dir.join(d),
            ),
            allow_failure,
        };
        let result = ctx.replay_or_suspend(suspension, allow_failure)?;
        let heap = eval.heap();
        result_struct(
            heap,
            vec![
                ("success", Value::new_bool(result.success)),
                ("error", error_value(heap, &result)),
            ],
        )
    }
}

/// `json.encode` and `json.decode`, in place of starlark's own: a value nested too deep is
/// refused before the conversion recurses into it, `json.decode` refuses a number no
/// script can hold (starlark's panics on `1e400`) and keeps whole numbers of any size
/// exact (starlark's turns those beyond 64 bits into floats).
#[starlark_module]
fn json_members(builder: &mut GlobalsBuilder) {
    /// The JSON text of `x` (None, bool, int, float, str, list, tuple, dict, struct).
    fn encode(#[starlark(require = pos)] x: Value) -> anyhow::Result<String> {
        check_depth(x, "the value given to `json.encode`")?;
        x.to_json()
    }

    /// The value the JSON text `x` holds.
    fn decode<'v>(#[starlark(require = pos)] x: &str, heap: Heap<'v>) -> anyhow::Result<Value<'v>> {
        let what = "the JSON given to `json.decode`";
        let json: Json = serde_json::from_str(x).map_err(|e| {
            if e.to_string().starts_with("recursion limit exceeded") {
                anyhow::anyhow!("{what} is nested too deep to read: {e}")
            } else {
                anyhow::anyhow!("{what} is not valid JSON: {e}")
            }
        })?;
        if let Some(found) = unfit(&json) {
            anyhow::bail!("{}", found.describe(what));
        }
        Ok(alloc_json(heap, &json))
    }
}

/// The `choices` of an `ask` step: a non-empty list of distinct strings.
fn choice_list(value: Value<'_>) -> anyhow::Result<Vec<String>> {
    let refuse = || {
        anyhow::anyhow!(
            "`choices` of `ask` must be a list of strings, such as `[\"yes\", \"no\"]`, got `{value}`"
        )
    };
    let list = starlark::values::list::ListRef::from_value(value)
        .map(|l| l.content().to_vec())
        .or_else(|| {
            starlark::values::tuple::TupleRef::from_value(value).map(|t| t.content().to_vec())
        })
        .ok_or_else(refuse)?;
    let mut choices: Vec<String> = Vec::with_capacity(list.len());
    for item in list {
        let choice = item.unpack_str().ok_or_else(refuse)?;
        if choice.trim().is_empty() {
            anyhow::bail!("`choices` of `ask` holds an empty choice: every choice needs words");
        }
        if choices.iter().any(|c| c == choice) {
            anyhow::bail!("`choices` of `ask` holds `{choice}` twice: each choice once");
        }
        choices.push(choice.to_string());
    }
    if choices.is_empty() {
        anyhow::bail!(
            "`choices` of `ask` is empty: give the answers it takes, or leave `choices` out for any answer"
        );
    }
    Ok(choices)
}

/// Calls a tool of another MCP server now. Its text is shown as the step's output, as a
/// shell step's would be.
fn call_tool(ctx: &StepContext<'_>, call: &ToolCall) -> Ran {
    let ran = ctx.runner.call_tool(call, ctx.cancel);
    if let Ran::Done(result) = &ran
        && !result.output.is_empty()
    {
        ctx.observer.output(result.output.as_bytes());
        if !result.output.ends_with('\n') {
            ctx.observer.output(b"\n");
        }
    }
    ran
}

/// Calls a script function as a step: its `print`s are the output, its return value (as
/// JSON) the value, an error the failure.
fn call_function<'v>(
    ctx: &StepContext<'_>,
    eval: &mut Evaluator<'v, '_, '_>,
    f: Value<'v>,
    kwargs: &Map<String, Json>,
) -> StepResult {
    let named = keyword_values(eval.heap(), kwargs);
    *ctx.capture.borrow_mut() = Some(Kept::default());
    let started = std::time::Instant::now();
    let returned = eval.eval_function(f, &[], &named).map_err(|e| {
        if is_limit(&e) {
            locate_in_function(f, kwargs, ctx.limits, e)
        } else {
            e
        }
    });
    let output = ctx
        .capture
        .borrow_mut()
        .take()
        .map(Kept::into_string)
        .unwrap_or_default();
    let duration_ms = Some(u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX));
    let (value, error) = match returned {
        Ok(v) if v.is_none() => (None, None),
        Ok(v) => match json_of(v, "the value a function step returns") {
            Ok(json) => (Some(json), None),
            Err(e) => (None, Some(e.to_string())),
        },
        Err(e) => (None, Some(render(&e))),
    };
    StepResult {
        success: error.is_none(),
        output,
        value,
        error,
        duration_ms,
        ..StepResult::default()
    }
}
