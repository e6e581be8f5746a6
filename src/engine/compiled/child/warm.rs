//! An evaluator child kept between two evaluations of a frame, holding its suspended
//! evaluation ([`Warm`]), and the bound on how many a process keeps.

use super::live::Live;
use crate::engine::compiled::evaluation::Evaluation;
use crate::engine::process::resident;
use crate::engine::step::StepRecord;

/// An evaluator child holding a frame's suspended evaluation between two evaluations of
/// the frame (see [`evaluate`](super::evaluate)): a cache, dropped at any time (the next evaluation then
/// starts from the top, as it would without it). Dropping it ends the child.
///
/// At most [`MAX_WARM`] are kept in a process, each under [`WARM_RSS`] of memory when it
/// suspends: the bound on what they hold together.
pub(crate) struct Warm {
    live: Live,
    /// How many of the frame's steps it holds, and the last of them: the journal it
    /// suspended over.
    seen: usize,
    last: Option<StepRecord>,
    /// What it said when it suspended.
    pub(super) evaluation: Evaluation,
    pub(super) cursor: usize,
    pub(super) printed: usize,
    /// Its place among the [`MAX_WARM`].
    _counted: Counted,
}

/// A place among the [`MAX_WARM`], given back when dropped.
struct Counted;

impl Drop for Counted {
    fn drop(&mut self) {
        WARM.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// How many children may hold suspended evaluations at once in one process.
pub(crate) const MAX_WARM: usize = 32;
/// The memory (resident) a child may have when it suspends to be kept.
pub(crate) const WARM_RSS: u64 = 64 * 1024 * 1024;
/// How many are kept now.
static WARM: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// What a held evaluation can do for the frame's journal now.
pub(super) enum TakeUp {
    /// Nothing was journaled since: it answers what it answered.
    Same(Box<Warm>),
    /// Steps were journaled since: it goes on with them.
    Resume(Live, Vec<StepRecord>),
    /// The journal is not the one it suspended over plus new steps (a rewind): it is let go.
    Stale,
}

impl Warm {
    /// A child that suspended over `steps`, kept if there is room for it.
    pub(super) fn keep(
        live: Live,
        steps: &[StepRecord],
        evaluation: &Evaluation,
        cursor: usize,
        printed: usize,
    ) -> Option<Warm> {
        use std::sync::atomic::Ordering;
        let small = resident(&live.process).is_none_or(|rss| rss <= WARM_RSS);
        let room = WARM
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (small && n < MAX_WARM).then_some(n + 1)
            })
            .is_ok();
        room.then(|| Warm {
            live,
            seen: steps.len(),
            last: steps.last().cloned(),
            evaluation: evaluation.clone(),
            cursor,
            printed,
            _counted: Counted,
        })
    }

    pub(super) fn take_up(self, steps: &[StepRecord]) -> TakeUp {
        let kept = steps.len() >= self.seen
            && self.seen.checked_sub(1).map(|at| &steps[at]) == self.last.as_ref();
        if !kept {
            TakeUp::Stale
        } else if steps.len() == self.seen {
            TakeUp::Same(Box::new(self))
        } else {
            let new = steps[self.seen..].to_vec();
            TakeUp::Resume(self.live, new)
        }
    }
}
