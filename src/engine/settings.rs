//! `Settings`: the knobs of a run (timeouts, nesting depth, evaluation limits, which binary
//! evaluates compiled scripts), and loading a compiled script's program under them.

use std::path::PathBuf;
use std::time::Duration;

use super::compiled::{CodeError, Limits, Loaded};
use crate::script::{Resolver, Script};

/// Knobs of a run.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Timeout of shell steps that do not set their own.
    pub default_timeout: Duration,
    /// How deep scripts may nest.
    pub max_depth: usize,
    /// Evaluation bounds of compiled scripts.
    pub limits: Limits,
    /// The `mekara` binary that evaluates compiled scripts in a child process, so that one
    /// that asks for too much memory fails alone (see `compiled::child`); `None`: they are
    /// evaluated in this process.
    pub evaluator: Option<PathBuf>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            default_timeout: Duration::from_secs(10 * 60),
            max_depth: 16,
            limits: Limits::default(),
            evaluator: None,
        }
    }
}

impl Settings {
    /// These settings, with compiled scripts evaluated in child processes of the `mekara`
    /// binary that runs now, unless told otherwise (see `compiled::child::evaluator`).
    #[must_use]
    pub(crate) fn evaluating_in_children(mut self) -> Settings {
        self.evaluator = super::compiled::child::evaluator();
        self
    }
}

/// The program of `script`, when it is compiled, loaded with the helper modules of its level
/// as they are now (for a child process to evaluate, when `settings` say so).
pub(crate) fn load_program(
    resolver: &Resolver,
    script: &Script,
    settings: &Settings,
) -> Option<Result<Loaded, CodeError>> {
    let compiled = script.compiled.as_ref()?;
    let find = |path: &str| resolver.helper(compiled.level, path);
    Some(Loaded::load(
        &compiled.origin,
        &compiled.text,
        &find,
        &settings.limits,
        settings.evaluator.as_deref(),
    ))
}
