//! What one evaluation of a frame is given ([`FrameRun`]): the frame's journal, the runner of
//! its shell steps, its observer and bounds, built by the executor (or a served tool's
//! call) and turned into the step context the builtins reach while the script runs.

use std::cell::{Cell, RefCell};
use std::path::Path;
use std::time::Duration;

use super::child::Warm;
use super::context::{Holder, JournalWriter, StepContext};
use super::limits::Limits;
use crate::engine::group_note::GroupNote;
use crate::engine::observer::Observer;
use crate::engine::runner::{CancelToken, StepRunner};
use crate::engine::step::StepRecord;

/// Everything an evaluation needs from the executor.
pub(crate) struct FrameRun<'a> {
    /// The frame's stack path, for messages and the observer.
    pub path: &'a str,
    /// The script's arguments, passed to `execute`.
    pub request: &'a str,
    /// The folder relative paths are taken from.
    pub working_dir: &'a Path,
    /// The frame's journal: replayed, then appended to.
    pub steps: &'a mut Vec<StepRecord>,
    /// How many of the frame's prints outside function steps were reported already.
    pub printed: &'a mut usize,
    /// Writes a new record to the run's journal, before the script sees it.
    pub journal: &'a mut JournalWriter<'a>,
    /// Runs shell steps.
    pub runner: &'a dyn StepRunner,
    /// Where shell steps note their process group while they run, if anywhere.
    pub group_note: Option<&'a GroupNote>,
    /// Hears about new steps.
    pub observer: &'a dyn Observer,
    /// Stops a running step.
    pub cancel: &'a CancelToken,
    /// Timeout of shell steps that do not set one.
    pub default_timeout: Duration,
    /// Evaluation bounds.
    pub limits: &'a Limits,
    /// The text of the script's string literals, where the prompt tags that may call
    /// tools are written.
    pub source: &'a str,
    /// Where an evaluator child that holds the frame's suspended evaluation is kept between
    /// evaluations, if anywhere (see [`child::Warm`]).
    pub warm: Option<&'a mut Option<Warm>>,
    /// Holds the evaluation where it suspends (a warm child's own side).
    holder: Option<&'a dyn Holder>,
}

impl<'a> FrameRun<'a> {
    /// The run of frame `path` in `working_dir` over its journal `steps` (of whose prints
    /// `printed` were reported already), each new step written with `journal` and run by
    /// `runner`, stopped by `cancel`, within `limits`. Until set otherwise: no request,
    /// nobody observes it, no group note, shell steps have no default timeout, and no text
    /// holds tags that may call tools.
    #[allow(clippy::too_many_arguments)] // what every frame run has its own of; the rest is set
    pub(crate) fn new(
        path: &'a str,
        working_dir: &'a Path,
        steps: &'a mut Vec<StepRecord>,
        printed: &'a mut usize,
        journal: &'a mut JournalWriter<'a>,
        runner: &'a dyn StepRunner,
        cancel: &'a CancelToken,
        limits: &'a Limits,
    ) -> FrameRun<'a> {
        FrameRun {
            path,
            request: "",
            working_dir,
            steps,
            printed,
            journal,
            runner,
            group_note: None,
            observer: &crate::engine::observer::Quiet,
            cancel,
            default_timeout: Duration::ZERO,
            limits,
            source: "",
            warm: None,
            holder: None,
        }
    }

    /// With the script's arguments, passed to `execute`.
    #[must_use]
    pub(crate) fn request(self, request: &'a str) -> FrameRun<'a> {
        FrameRun { request, ..self }
    }

    /// Heard by `observer`.
    #[must_use]
    pub(crate) fn observer(self, observer: &'a dyn Observer) -> FrameRun<'a> {
        FrameRun { observer, ..self }
    }

    /// With shell steps noting their process group in `group_note`.
    #[must_use]
    pub(crate) fn group_note(self, group_note: &'a GroupNote) -> FrameRun<'a> {
        FrameRun {
            group_note: Some(group_note),
            ..self
        }
    }

    /// With `default_timeout` for the shell steps that set none.
    #[must_use]
    pub(crate) fn default_timeout(self, default_timeout: Duration) -> FrameRun<'a> {
        FrameRun {
            default_timeout,
            ..self
        }
    }

    /// With `source`, the text of the script's string literals, where the prompt tags that
    /// may call tools are written.
    #[must_use]
    pub(crate) fn source(self, source: &'a str) -> FrameRun<'a> {
        FrameRun { source, ..self }
    }

    /// Keeping an evaluator child that holds the frame's suspended evaluation in `warm`,
    /// where the next evaluation of the frame takes it up (see [`child::Warm`]).
    #[must_use]
    pub(crate) fn warm(self, warm: &'a mut Option<Warm>) -> FrameRun<'a> {
        FrameRun {
            warm: Some(warm),
            ..self
        }
    }

    /// With `holder` keeping the evaluation where it suspends.
    #[must_use]
    pub(super) fn holder(self, holder: &'a dyn Holder) -> FrameRun<'a> {
        FrameRun {
            holder: Some(holder),
            ..self
        }
    }

    /// The context the run's functions are called in, the frame's steps moved into it; with
    /// the run's request, and where the steps and the count of prints reported go back when
    /// the evaluation ends.
    pub(super) fn into_context(
        self,
    ) -> (
        StepContext<'a>,
        &'a str,
        &'a mut Vec<StepRecord>,
        &'a mut usize,
    ) {
        let ctx = StepContext {
            path: self.path,
            working_dir: self.working_dir,
            steps: RefCell::new(std::mem::take(self.steps)),
            cursor: Cell::new(0),
            journal: RefCell::new(self.journal),
            runner: self.runner,
            group_note: self.group_note,
            observer: self.observer,
            cancel: self.cancel,
            default_timeout: self.default_timeout,
            limits: self.limits,
            source: self.source,
            interrupt: RefCell::new(None),
            capture: RefCell::new(None),
            prints: Cell::new(0),
            printed: Cell::new(*self.printed),
            member: RefCell::new(None),
            holder: self.holder,
        };
        (ctx, self.request, self.steps, self.printed)
    }
}
