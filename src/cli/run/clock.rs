//! What the closing line of `mekara run` reports: the run's steps, counted as `mekara runs`
//! counts them, and the time of this session.

use std::path::Path;
use std::time::Instant;

use crate::display::count;
use crate::engine::runs::RunHistory;
use crate::engine::store::RunStore;

/// Counts a run's steps the way `mekara runs` does (every journaled step, in every frame:
/// auto, llm, mcp steps and script calls), so the closing line and the STEPS column agree.
pub(super) struct StepCounter {
    pub(super) store: RunStore,
    /// Steps the run had journaled before this session (a resumed run).
    pub(super) before: usize,
}

pub(super) fn journaled_steps(store: &RunStore, id: &str) -> usize {
    store
        .read(id)
        .ok()
        .and_then(|contents| RunHistory::replay(Path::new(""), &contents.events).ok())
        .map_or(0, |history| history.steps)
}

/// What the closing line reports: the steps and the time of this session.
pub(super) struct Clock {
    pub(super) started: Instant,
    pub(super) counter: StepCounter,
}

impl Clock {
    /// `3 steps in 0.1 s`, or for a resumed run `3 steps (1 in this session) in 0.1 s`: the
    /// time is this session's.
    pub(super) fn summary(&self, run: &str) -> String {
        let all = journaled_steps(&self.counter.store, run);
        let seconds = self.started.elapsed().as_secs_f64();
        if self.counter.before == 0 {
            format!("{} in {seconds:.1} s", count(all, "step"))
        } else {
            format!(
                "{} ({} in this session) in {seconds:.1} s",
                count(all, "step"),
                all.saturating_sub(self.counter.before)
            )
        }
    }
}
