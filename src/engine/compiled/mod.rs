//! Compiled scripts: loading a `.star` file, and evaluating `execute(request)` over the
//! journal of a frame (DESIGN §3).
//!
//! Evaluation always starts from the top. Each step builtin takes the next journal entry
//! when there is one (checking that it asks for the recorded input), and past the end of
//! the journal it either runs now and appends its result (auto steps) or suspends the
//! evaluation (llm steps, script calls). Suspending is an error that unwinds the
//! interpreter: Starlark cannot catch errors, so nothing in the script can swallow it.
//!
//! One file per concern: `program` (a script loaded here, `execute` over a frame's journal,
//! a function called directly), `frame_run` (what one evaluation is given), `evaluation`
//! (how it ends), `limits` (its bounds), `builtins` (the step builtins and the global
//! environment), `context` (what the builtins reach while a function runs: the journal, the
//! runner, where `print` goes), `modules` (helper modules and freezing a module), `values`
//! (Starlark to JSON and back), `diagnostics` (errors in script code, with their location)
//! and `child` (evaluation in a child process). This file only chooses where a script is
//! evaluated ([`Loaded`]) and names the entry points the executor and `mekara serve` use;
//! none of its files imports it.

mod builtins;
pub(crate) mod child;
mod context;
mod declared;
mod diagnostics;
mod evaluation;
mod frame_run;
mod limits;
mod modules;
mod parallel;
mod program;
mod static_check;
mod step_results;
mod values;

use std::path::Path;

pub(crate) use builtins::dialect;
pub(crate) use diagnostics::CodeError;
pub(crate) use evaluation::{Called, Evaluation, Suspension, Task};
pub(crate) use frame_run::FrameRun;
pub(crate) use limits::Limits;
pub(crate) use modules::{FindModule, freeze_module};
pub(crate) use program::{DirectCall, Program, call_directly};
pub(crate) use static_check::{person_warnings, planned_steps, target_problems, typecheck};
pub(crate) use values::unfit;

use crate::engine::error::EngineError;

/// A compiled script ready to evaluate: loaded in this process, or read for a child process
/// to load and evaluate (see [`child`]).
pub(crate) enum Loaded {
    /// Loaded here; evaluated here.
    Here(Program),
    /// Read and parsed here; loaded and evaluated by `exe __evaluate`.
    InChild {
        /// The `mekara` binary.
        exe: std::path::PathBuf,
        /// The script and its helper modules.
        sources: child::Sources,
    },
}

impl Loaded {
    /// Loads the script `source` (with the helper modules `find` finds) for evaluation
    /// here, or, with `evaluator`, reads it for evaluation by that `mekara` binary.
    pub(crate) fn load(
        origin: &str,
        source: &str,
        find: &FindModule<'_>,
        limits: &Limits,
        evaluator: Option<&Path>,
    ) -> Result<Loaded, CodeError> {
        match evaluator {
            None => Program::load(origin, source, find, limits).map(Loaded::Here),
            Some(exe) => {
                child::Sources::collect(origin, source, find).map(|sources| Loaded::InChild {
                    exe: exe.to_path_buf(),
                    sources,
                })
            }
        }
    }

    /// The text of the string literals of the script and its helpers.
    pub(crate) fn authored(&self) -> &str {
        match self {
            Loaded::Here(program) => program.authored(),
            Loaded::InChild { sources, .. } => sources.authored(),
        }
    }

    /// Evaluates the script over the frame's journal until it completes, fails or
    /// suspends, here or in a child process.
    pub(crate) fn evaluate(&self, run: FrameRun<'_>) -> Result<Evaluation, EngineError> {
        self.evaluate_counted(run).0
    }

    /// [`Loaded::evaluate`], with how many of the frame's steps the evaluation went
    /// through (see [`program::evaluate_counted`]).
    pub(crate) fn evaluate_counted(
        &self,
        run: FrameRun<'_>,
    ) -> (Result<Evaluation, EngineError>, usize) {
        match self {
            Loaded::Here(program) => program::evaluate_counted(program, run),
            Loaded::InChild { exe, sources } => child::evaluate(exe, sources, run),
        }
    }
}
