//! The bounds on one evaluation (ticks, heap, call depth), and how they are put on an
//! evaluator: a runaway script fails with its location instead of hanging or eating the
//! machine.

use serde::{Deserialize, Serialize};
use starlark::eval::Evaluator;

use crate::memory::Budget;

/// Bounds on one evaluation, so a runaway script fails with its location instead of
/// hanging or eating the machine.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Limits {
    /// Interpreter ticks (roughly, bytecode instructions) per evaluation.
    pub max_ticks: u64,
    /// Bytes of Starlark heap.
    pub max_heap_bytes: usize,
    /// Depth of Starlark calls.
    pub max_call_depth: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_ticks: max_ticks(),
            max_heap_bytes: 256 * 1024 * 1024,
            max_call_depth: 200,
        }
    }
}

/// The ticks an evaluation may take: `MEKARA_MAX_TICKS`, else 50 million (a few seconds of
/// a release build; the tests of the limit set a lower one, since a debug build takes
/// minutes to count that far). A value that is not a number above 0 is said, and the default
/// holds.
fn max_ticks() -> u64 {
    const DEFAULT: u64 = 50_000_000;
    let Ok(value) = std::env::var("MEKARA_MAX_TICKS") else {
        return DEFAULT;
    };
    match value.trim().parse::<u64>() {
        Ok(ticks) if ticks > 0 => ticks,
        _ => {
            tracing::warn!(
                "MEKARA_MAX_TICKS={value:?} is not a number of ticks above 0: the limit is {DEFAULT}"
            );
            DEFAULT
        }
    }
}

/// Puts `limits` on `eval`.
pub(super) fn apply_limits(
    eval: &mut Evaluator<'_, '_, '_>,
    limits: &Limits,
) -> Result<(), String> {
    eval.set_max_tick_count(limits.max_ticks)
        .and_then(|()| eval.set_max_heap_size(limits.max_heap_bytes))
        .and_then(|()| eval.set_max_callstack_size(limits.max_call_depth))
        .map_err(|e| format!("cannot set evaluation limits: {e}"))
}

impl Limits {
    /// The memory budget of an evaluation on this thread, held while it runs: what its
    /// statements allocate is checked against the heap limit, and one allocation that
    /// would take it past four times the limit stops the process (see [`crate::memory`]).
    pub(super) fn budget(&self) -> Budget {
        Budget::enter(self.memory_cap())
    }

    /// The memory cap of an evaluation: four times the heap limit (1 GiB by default).
    pub(crate) fn memory_cap(&self) -> usize {
        self.max_heap_bytes.saturating_mul(4)
    }
}
