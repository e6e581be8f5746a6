//! The pending part of a reply to a call that moved a run: exactly one pending item (an llm
//! step, an NL script, a fallback, the tasks of a `parallel` group, a question, or the run's
//! end) with the exact next call to make.

use std::fmt::Write as _;

use serde_json::{Map, Value as Json};

use super::{compact, handle_argument, question_block, quote, with_handle, with_newline};
use crate::engine::executor::{FailedCall, Stop};
use crate::engine::journal::Outcome;
use crate::engine::{Pending, Task};

/// The line that tells the agent the run's handle is the value to pass on.
fn handle_line(handle: &str) -> String {
    format!(
        "This run's handle is `{handle}`: pass it as `run_id` in every call for this run \
         (and as `parent` to `start` a script nested inside it).\n"
    )
}

/// The pending part of a reply. `nl_source` is the compiled script's NL text, given the
/// first time its frame needs the agent; `handle` is the run's handle, shown in the call to
/// make.
pub(crate) fn pending(
    pending: &Pending,
    nl_source: Option<(&str, &str)>,
    handle: Option<&str>,
) -> String {
    let mut out = String::new();
    let run = handle_argument(handle);
    match pending {
        Pending::Llm {
            path,
            prompt,
            expects,
        } => out.push_str(&llm_step(path, prompt, expects.as_ref(), nl_source, &run)),
        Pending::Nl { path, instructions } => {
            out.push_str(&nl_script(path, instructions, handle));
        }
        Pending::Fallback {
            path,
            error,
            instructions,
            failed_call,
        } => out.push_str(&fallback(
            path,
            error,
            instructions,
            failed_call.as_ref(),
            handle,
        )),
        Pending::Tasks { path, tasks, .. } => {
            out.push_str(&parallel_tasks(path, tasks, nl_source, &run));
        }
        Pending::Ask {
            path,
            question,
            choices,
            timeout,
            ..
        } => ask(&mut out, path, question, choices.as_deref(), *timeout, &run),
        Pending::Finished {
            run,
            stop: Some(stop),
            ..
        } => return stopped(run, stop, handle),
        Pending::Finished {
            run,
            outcome,
            fell_back,
            stop: None,
        } => return done(run, *outcome, *fell_back),
    }
    if let Some(handle) = handle {
        out.push_str(&handle_line(handle));
    }
    out
}

/// The pending part for an llm step: its instructions (with the compiled script's NL
/// source the first time its frame needs the agent) and the outputs to give.
fn llm_step(
    path: &str,
    prompt: &str,
    expects: Option<&Map<String, Json>>,
    nl_source: Option<(&str, &str)>,
    run: &str,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "## Your turn: llm step `{path}`\n");
    if let Some((name, source)) = nl_source {
        let _ = writeln!(
            out,
            "This step belongs to the compiled script `{name}`. Its NL source, for \
             context only (mekara runs the other steps itself; do just this step):\n\n\
             <nl-source>\n{}</nl-source>\n",
            with_newline(source)
        );
    }
    let _ = writeln!(
        out,
        "<instructions>\n{}</instructions>\n",
        with_newline(prompt)
    );
    let expected: Vec<(&String, &Json)> = expects.iter().flat_map(|e| e.iter()).collect();
    if expected.is_empty() {
        let _ = writeln!(
            out,
            "No outputs are expected. When you have done this step, call \
             `continue_compiled_script` with `{{{run}\"outputs\": {{}}}}`."
        );
    } else {
        let example = expected_outputs(&mut out, &expected);
        let _ = writeln!(
            out,
            "\nWhen you have done this step, call `continue_compiled_script` with \
             `{{{run}\"outputs\": {{{}}}}}`, giving every expected output.",
            example.join(", ")
        );
    }
    out.push_str("Do only this step: mekara runs the rest. Do not call `finish_nl_script` here.\n");
    out
}

/// The pending part for an NL script: the agent follows all of it, then finishes it.
fn nl_script(path: &str, instructions: &str, handle: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Your turn: NL script `{path}`\n\nFollow all of these instructions \
         yourself:\n\n<instructions>\n{}</instructions>\n\n\
         Call `finish_nl_script`{} only when the whole script is done, not after each \
         step.",
        with_newline(instructions),
        with_handle(handle)
    );
    out
}

/// The pending part for a compiled script that failed: what failed, whose instructions say
/// what to do about it, and what is left to finish by hand.
fn fallback(
    path: &str,
    error: &str,
    instructions: &str,
    failed_call: Option<&FailedCall>,
    handle: Option<&str>,
) -> String {
    let mut out = String::new();
    // A failure in a called script is handled first by that script's own words.
    let whose_rules = match failed_call {
        Some(call) => {
            // Those that called it, from the inside out.
            let callers: Vec<String> = call
                .inside_out(path)
                .iter()
                .skip(1)
                .map(|name| format!("`{name}`"))
                .collect();
            format!(
                "the instructions of `{}` (the script that failed, below) and of {} say \
                 to do when this fails: if they say to stop, stop the whole run, the \
                 rest of the scripts that called it too",
                call.name,
                crate::display::and_list(&callers)
            )
        }
        None => "the script's instructions say to do when this fails: if they say to \
                 stop, stop"
            .to_string(),
    };
    // A failure in a called script names it: its rule may be to stop.
    let title = match failed_call {
        Some(call) => format!(
            "`{path}` failed in `{}`; stop or finish it by hand, as the instructions \
             say",
            call.name
        ),
        None => format!("`{path}` failed; finish it by hand"),
    };
    let _ = write!(
        out,
        "## Your turn: {title}\n\n\
         What failed:\n\n<error>\n{}</error>\n\n\
         First do what {whose_rules} (tell the user what failed; do not work around \
         it). Otherwise, the steps listed as done above ran already: do not repeat \
         them. Do what is left of the script's instructions yourself, fixing or working \
         around what failed:\n\n<instructions>\n{}</instructions>\n\n",
        with_newline(error),
        with_newline(instructions),
    );
    if let Some(call) = failed_call {
        out.push_str(&called_scripts(path, call));
    }
    let _ = writeln!(
        out,
        "Call `finish_nl_script`{} when the whole script is done. If you stopped, or \
         the user would rather fix the cause first, leave the run as it is (do not call \
         `finish_nl_script`): once the cause is fixed, `resume` with the run's handle as \
         `run_id` and `retry: true` runs the failed step again and goes on.",
        with_handle(handle)
    );
    out
}

/// The part of a fallback about the script whose failure made `path` fall back, called
/// directly or through the scripts between: what is left of each, in the order to do it.
fn called_scripts(path: &str, call: &FailedCall) -> String {
    let mut out = String::new();
    let whose = if call.chain.len() > 2 {
        format!(
            "The failure was in `{}`, whose own step failed, at the end of a chain of \
             calls: {}; each script between failed because the one it called did. \
             The instructions of `{}`",
            call.name,
            crate::display::call_chain(&call.chain),
            call.name
        )
    } else {
        format!(
            "The failure was in `{}`, which this script called. Its own instructions",
            call.name
        )
    };
    let _ = write!(
        out,
        "{whose}, for what is left of it, the step that failed and those after it (its \
         steps listed as done above ran already):\n\n<called-script-instructions name=\"{}\">\n{}\
         </called-script-instructions>\n\n",
        call.name,
        with_newline(&call.instructions)
    );
    // What the scripts between still had to do once their call returned.
    for (name, callee, instructions) in call.callers_between() {
        let _ = write!(
            out,
            "Then the instructions of `{name}`, which called `{callee}`, for what is \
             left of it after that call:\n\n<called-script-instructions \
             name=\"{name}\">\n{}</called-script-instructions>\n\n",
            with_newline(instructions)
        );
    }
    if !call.between.is_empty() {
        let order: Vec<String> = call
            .inside_out(path)
            .iter()
            .map(|name| format!("`{name}`"))
            .collect();
        let _ = write!(
            out,
            "If you finish by hand, finish them from the inside out: what is left of \
             {}.\n\n",
            order.join(", then of ")
        );
    }
    // A model that read "(the `release` script)" in the instructions wondered
    // whether to `start` it again.
    out.push_str(if call.between.is_empty() {
        "Do the called script's part by hand from its instructions: do not `start` it \
         again, which would run its done steps twice.\n\n"
    } else {
        "Do the called scripts' part by hand from their instructions: do not `start` \
         them again, which would run their done steps twice.\n\n"
    });
    out
}

/// The pending part for the tasks of a `parallel` group: each task, then the one call that
/// gives all their outputs.
fn parallel_tasks(
    path: &str,
    tasks: &[Task],
    nl_source: Option<(&str, &str)>,
    run: &str,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Your turn: {} independent llm tasks `{path}`\n",
        tasks.len()
    );
    if let Some((name, source)) = nl_source {
        let _ = writeln!(
            out,
            "These tasks belong to the compiled script `{name}`. Its NL source, for \
             context only (mekara runs the other steps itself; do just these tasks):\n\n\
             <nl-source>\n{}</nl-source>\n",
            with_newline(source)
        );
    }
    out.push_str(
        "They do not depend on each other: do each (at once, if you can hand them to \
         subagents), then give all their outputs in one call.\n\n",
    );
    let mut example = Vec::new();
    for task in tasks {
        let _ = writeln!(
            out,
            "### Task `{}`\n\n<instructions>\n{}</instructions>\n",
            task.member,
            with_newline(&task.prompt)
        );
        let expected: Vec<(&String, &Json)> = task.expects.iter().flat_map(|e| e.iter()).collect();
        let names = if expected.is_empty() {
            out.push_str("No outputs are expected.\n\n");
            Vec::new()
        } else {
            let names = expected_outputs(&mut out, &expected);
            out.push('\n');
            names
        };
        example.push(format!("\"{}\": {{{}}}", task.member, names.join(", ")));
    }
    let _ = writeln!(
        out,
        "When every task is done, call `continue_compiled_script` once with \
         `{{{run}\"outputs\": {{{}}}}}`: each task's outputs under its number.\n\
         Do only these tasks: mekara runs the rest. Do not call `finish_nl_script` here.",
        example.join(", ")
    );
    out
}

/// The reply when a script stopped the run with `fail(message)`. `handle` is the run's
/// handle, when known: a run stopped in its `start` call was given no other reply naming it,
/// and `resume` refuses the id alone.
fn stopped(run: &str, stop: &Stop, handle: Option<&str>) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "## Stopped by the script\n\nThe script `{}` stopped the run (run `{run}`) \
         with this message:\n\n<message>\n{}</message>\n\n\
         The script stops here on purpose. Tell the user that it stopped, and what it \
         says. Do not work around it, and do not do the rest of the script's work by \
         hand. Nothing is pending: do not call `continue_compiled_script` or \
         `finish_nl_script` for it.",
        stop.script,
        with_newline(&stop.message)
    );
    if stop.retry {
        let call = handle.map_or_else(
            || "`resume` with the run's handle as `run_id` and `retry: true`".to_string(),
            |h| {
                format!(
                    "`resume` with `{{\"run_id\": {}, \"retry\": true}}`",
                    quote(h)
                )
            },
        );
        let _ = writeln!(
            out,
            "It stopped on a step that failed: once the user has fixed the cause, {call} \
             runs that step again and goes on."
        );
    }
    out
}

/// The reply when the run ended.
fn done(run: &str, outcome: Outcome, fell_back: bool) -> String {
    let mut out = String::new();
    let how = match (outcome, fell_back) {
        (_, true) => "failed and was finished by hand",
        (Outcome::Completed, false) => "completed",
        _ => "was finished by hand",
    };
    let _ = writeln!(
        out,
        "## Done\n\nThe script {how} (run `{run}`). Nothing is pending: do not call \
         `continue_compiled_script` or `finish_nl_script` for it again."
    );
    out
}

/// The pending part of a reply for a question (`ask`): the agent passes it to the user word
/// for word, and passes the user's answer back; it never answers itself.
fn ask(
    out: &mut String,
    path: &str,
    question: &str,
    choices: Option<&[String]>,
    timeout: Option<std::time::Duration>,
    run: &str,
) {
    let _ = writeln!(
        out,
        "## Your turn: ask the user (`{path}`)\n\n\
         The script needs an answer from the user, not from you. Ask the user this question, \
         word for word, and wait for their reply:\n\n{}",
        question_block(question, choices)
    );
    if choices.is_some() {
        let _ = writeln!(out, "The answer must be one of the choices, as written.");
    }
    if let Some(timeout) = timeout {
        let _ = writeln!(
            out,
            "An answer that comes later than {} after the question was asked fails the step.",
            humantime::format_duration(timeout)
        );
    }
    let _ = writeln!(
        out,
        "{}When the user has answered, call `continue_compiled_script` with \
         `{{{run}\"outputs\": {{\"answer\": \"<the user's answer>\"}}}}`. Never answer the question \
         yourself, guess, or choose for the user: if the user does not answer, leave it pending.",
        if choices.is_some() || timeout.is_some() {
            "\n"
        } else {
            ""
        }
    );
}

/// Lists the expected outputs (`- \`name\`: description`) and returns each as `"name": …`,
/// for the call to make.
fn expected_outputs(out: &mut String, expected: &[(&String, &Json)]) -> Vec<String> {
    out.push_str("Expected outputs:\n");
    for (name, description) in expected {
        match description.as_str() {
            Some(d) if !d.trim().is_empty() => {
                let _ = writeln!(out, "- `{name}`: {}", d.trim());
            }
            _ => {
                let _ = writeln!(out, "- `{name}`");
            }
        }
    }
    expected
        .iter()
        .map(|(name, _)| format!("{}: …", compact(&Json::String((*name).clone()))))
        .collect()
}

/// What an agent process of an unattended run reads for `task`, one of the independent
/// tasks of a `parallel` group in frame `path`: the task as an llm step of its own, named
/// `PATH task MEMBER`. Each task's agent starts a session of its own, so each is given the
/// compiled script's NL source (`nl_source`: its name and text), as a single llm step is the
/// first time its frame needs the agent.
pub(crate) fn task_prompt(
    path: &str,
    task: &crate::engine::Task,
    nl_source: Option<(&str, &str)>,
) -> String {
    let step = Pending::Llm {
        path: task_label(path, task.member),
        prompt: task.prompt.clone(),
        expects: task.expects.clone(),
    };
    format!(
        "This is one of several independent tasks that run at once, each by an agent of its \
         own: do only this one.\n\n{}",
        pending(&step, nl_source, None)
    )
}

/// How a task of a `parallel` group is named in messages: `PATH task MEMBER`.
pub(crate) fn task_label(path: &str, member: usize) -> String {
    format!("{path} task {member}")
}
