//! Rate limits and overloads of the model, for unattended runs: what an agent process said
//! when the model turned it away (HTTP 429 or 529, the clients' own "rate limit" and
//! "overloaded" errors), and how long to wait before asking again.
//!
//! Each adapter knows where its client reports such an error (Claude Code's
//! `api_error_status`, Gemini CLI's `error.code`, the `rate_limited` field of the
//! `--agent-command` answer, the text of a failure); this module holds what they share: the
//! words that say so, a `retry-after` found in them, and the [`Backoff`] the driver waits by.
//! Waiting and journaling the wait belong to the driver in `crate::cli`.

use std::hash::{BuildHasher as _, Hasher as _};
use std::time::Duration;

/// The model turned the agent away for now: rate-limited or overloaded.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RateLimited {
    /// What the agent's client said, for the journal and the final error.
    pub said: String,
    /// How long the model asked to be left alone (`retry-after`), when the client says.
    pub retry_after: Option<Duration>,
}

impl RateLimited {
    /// The client's words, with a `retry-after` found in them.
    pub(crate) fn from_said(said: impl Into<String>) -> RateLimited {
        let said = said.into();
        let retry_after = retry_after_in(&said);
        RateLimited { said, retry_after }
    }
}

/// Whether an HTTP status is a rate limit (429) or an overload (529 Anthropic's, 503 the
/// others').
pub(crate) fn is_limit_status(status: u64) -> bool {
    matches!(status, 429 | 503 | 529)
}

/// The words that say a rate limit or an overload, as the clients write them.
const LIMIT_WORDS: [&str; 9] = [
    "rate limit",
    "rate_limit",
    "ratelimit",
    "rate-limit",
    "too many requests",
    "overloaded",
    "resource_exhausted",
    "resource exhausted",
    "429",
];

/// Words that say the account cannot go on at all (no credit, no plan), or not before its
/// daily quota comes back (Gemini's `...PerDay...` quota ids, Gemini CLI's "exhausted your
/// daily quota"): waiting minutes does not help, so these are failures even with a 429.
const FINAL_WORDS: [&str; 6] = [
    "insufficient_quota",
    "billing",
    "credit balance",
    "daily quota",
    "perday",
    "per day",
];

/// Whether `text` (a client's error message) says a limit that waiting within a run does
/// not lift: no credit, no plan, or a daily quota used up.
pub(crate) fn says_final(text: &str) -> bool {
    let lower = text.to_lowercase();
    FINAL_WORDS.iter().any(|w| lower.contains(w))
}

/// Whether `text` (a client's error message) says the model is rate-limited or overloaded.
/// A 429, 503 or 529 counts only as a number of its own, not inside a longer one.
pub(crate) fn says_limited(text: &str) -> bool {
    if says_final(text) {
        return false;
    }
    let lower = text.to_lowercase();
    LIMIT_WORDS
        .iter()
        .filter(|w| **w != "429")
        .any(|w| lower.contains(w))
        || ["429", "529"].iter().any(|n| has_number(&lower, n))
}

/// Whether `number` stands in `text` with no digit right before or after it.
fn has_number(text: &str, number: &str) -> bool {
    text.match_indices(number).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + number.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit()) && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

/// A wait the model asked for in `text`: `retry-after: 30`, `"retryDelay": "12s"`,
/// `try again in 2.5 s`, `retry_after_ms: 800`. Seconds unless `ms` or `m` follows.
pub(crate) fn retry_after_in(text: &str) -> Option<Duration> {
    let lower = text.to_lowercase();
    for key in [
        "retry-after-ms",
        "retry_after_ms",
        "retry-after",
        "retry_after",
        "retry after",
        "retrydelay",
        "try again in",
    ] {
        let Some(at) = lower.find(key) else {
            continue;
        };
        let rest = &lower[at + key.len()..];
        // Between the key and the number: quotes, a colon or `=`, spaces.
        let Some(start) = rest
            .char_indices()
            .take(6)
            .find(|(_, c)| c.is_ascii_digit())
            .map(|(i, _)| i)
        else {
            continue;
        };
        let rest = &rest[start..];
        let end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let Ok(number) = rest[..end].parse::<f64>() else {
            continue;
        };
        // A unit only right after the number (`12s`, `2.5 s`, `2 minutes`).
        let after = rest[end..].strip_prefix(' ').unwrap_or(&rest[end..]);
        let unit: String = after
            .chars()
            .take_while(char::is_ascii_alphabetic)
            .collect();
        let seconds = match unit.as_str() {
            _ if key.ends_with("ms") => number / 1000.0,
            "ms" | "milliseconds" => number / 1000.0,
            "m" | "min" | "mins" | "minute" | "minutes" => number * 60.0,
            _ => number,
        };
        // Honoured up to an hour: a longer one is a client's mistake, not a wait.
        let seconds = seconds.min(3600.0);
        return Duration::try_from_secs_f64(seconds).ok();
    }
    None
}

/// How many times a step is asked again after a rate limit before it fails: with the
/// backoff below, about 25 minutes of waiting in all, on top of the retries the agent's
/// client makes itself.
pub(crate) const MAX_WAITS: u32 = 8;

/// The first wait, doubled after each: 8 s, 16 s, 32 s, ... up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_secs(8);

/// The longest wait the backoff picks by itself (a `retry-after` may ask for longer).
const MAX_WAIT: Duration = Duration::from_secs(5 * 60);

/// `MEKARA_BACKOFF_SCALE`: a factor on every wait, for tests (`0.001` makes an 8 s wait
/// 8 ms). Not for use in earnest: a shorter wait only meets the rate limit again.
const SCALE_VAR: &str = "MEKARA_BACKOFF_SCALE";

/// The waits of one step: exponential from [`FIRST_WAIT`], with jitter, at most
/// [`MAX_WAITS`] of them.
#[derive(Debug)]
pub(crate) struct Backoff {
    /// Waits so far.
    pub waits: u32,
    /// Their total.
    pub waited: Duration,
    scale: f64,
}

/// What to do after a rate limit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Next {
    /// Wait this long, then ask again.
    Wait(Duration),
    /// Stop asking: the step fails with this error.
    GiveUp(String),
}

impl Backoff {
    /// A step's backoff, scaled by `MEKARA_BACKOFF_SCALE` when it is set to a number.
    pub(crate) fn new() -> Backoff {
        let scale = std::env::var(SCALE_VAR)
            .ok()
            .and_then(|s| s.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(1.0);
        Backoff {
            waits: 0,
            waited: Duration::ZERO,
            scale,
        }
    }

    /// `wait` as this backoff waits it (`MEKARA_BACKOFF_SCALE`).
    pub(crate) fn scaled(&self, wait: Duration) -> Duration {
        wait.mul_f64(self.scale)
    }

    /// What to do after the model turned the agent away with `limited`, when the run may
    /// go on for at most `left` more (`--max-duration`).
    pub(crate) fn next(&mut self, limited: &RateLimited, left: Option<Duration>) -> Next {
        let said = crate::display::clipped(limited.said.trim(), 2000);
        if self.waits >= MAX_WAITS {
            return Next::GiveUp(format!(
                "rate-limited by the model {} times; waited {} in all, then gave up; the \
                 last time it said: {said}",
                self.waits + 1,
                shown(self.waited)
            ));
        }
        // Exponential with "equal jitter": half the wait fixed, half at random, so agents
        // turned away together do not all come back together.
        let exponential = FIRST_WAIT
            .saturating_mul(1 << self.waits.min(16))
            .min(MAX_WAIT);
        let half = exponential / 2;
        let jittered = half + half.mul_f64(random_fraction());
        let wait = limited
            .retry_after
            .map_or(jittered, |r| r.max(jittered / 4));
        let wait = wait.mul_f64(self.scale);
        if let Some(left) = left
            && wait >= left
        {
            return Next::GiveUp(if self.waits == 0 {
                format!(
                    "rate-limited by the model, and the wait ({}) would pass `--max-duration`; \
                     it said: {said}",
                    shown(wait)
                )
            } else {
                format!(
                    "rate-limited by the model {} times; waited {} in all, and the next wait \
                     ({}) would pass `--max-duration`; the last time it said: {said}",
                    self.waits + 1,
                    shown(self.waited),
                    shown(wait)
                )
            });
        }
        self.waits += 1;
        self.waited += wait;
        Next::Wait(wait)
    }
}

/// A number in `[0, 1)`, from the process's random hasher keys (no dependency for a jitter).
fn random_fraction() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// A wait as a person reads it: `8 s`, `1.5 s`, `2 min 8 s`, `40 ms`.
pub(crate) fn shown(wait: Duration) -> String {
    if wait < Duration::from_secs(1) {
        return format!("{} ms", wait.as_millis());
    }
    if wait < Duration::from_secs(10) && wait.subsec_millis() >= 100 {
        return format!("{:.1} s", wait.as_secs_f64());
    }
    let seconds = wait.as_secs() + u64::from(wait.subsec_millis() >= 500);
    match (seconds / 60, seconds % 60) {
        (0, s) => format!("{s} s"),
        (m, 0) => format!("{m} min"),
        (m, s) => format!("{m} min {s} s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_overloads_are_told_from_other_failures() {
        assert!(says_limited(
            "API Error: Request rejected (429) · rate limit"
        ));
        assert!(says_limited(
            "exceeded retry limit, last status: 429 Too Many Requests"
        ));
        assert!(says_limited("API Error: 529 Overloaded"));
        assert!(says_limited("RESOURCE_EXHAUSTED"));
        assert!(!says_limited("quota"));
        assert!(!says_limited("the file has 14290 lines"));
        assert!(!says_limited("429: insufficient_quota, check your billing"));
        assert!(!says_limited(
            "[{\"quotaId\": \"GenerateRequestsPerDayPerProjectPerModel-FreeTier\"}] 429"
        ));
        assert!(says_final(
            "You have exhausted your daily quota on this model."
        ));
        assert!(!says_final(
            "Resource has been exhausted (e.g. check quota)."
        ));
        assert!(!says_limited("permission denied"));
    }

    #[test]
    fn a_retry_after_is_read_in_its_usual_spellings() {
        let secs = |t: &str| retry_after_in(t).map(|d| d.as_secs_f64());
        assert_eq!(secs("retry-after: 30"), Some(30.0));
        assert_eq!(secs(r#"{"retryDelay": "12s"}"#), Some(12.0));
        assert_eq!(secs("please try again in 2.5 s"), Some(2.5));
        assert_eq!(secs("retry_after_ms=800"), Some(0.8));
        assert_eq!(secs("Retry after 2 minutes"), Some(120.0));
        assert_eq!(secs("rate limit"), None);
        assert_eq!(secs("try again in a moment; retry-after: 3"), Some(3.0));
    }

    #[test]
    fn the_backoff_doubles_with_jitter_and_gives_up() {
        let mut backoff = Backoff {
            waits: 0,
            waited: Duration::ZERO,
            scale: 1.0,
        };
        let limited = RateLimited::from_said("429");
        let mut previous = Duration::ZERO;
        for n in 0..MAX_WAITS {
            let Next::Wait(wait) = backoff.next(&limited, None) else {
                panic!("gave up at wait {n}");
            };
            let full = (FIRST_WAIT * (1 << n)).min(MAX_WAIT);
            assert!(wait >= full / 2 && wait <= full, "{n}: {wait:?}");
            assert!(wait * 2 >= previous, "{n}: {wait:?} after {previous:?}");
            previous = wait;
        }
        assert!(
            matches!(backoff.next(&limited, None), Next::GiveUp(e) if e.starts_with("rate-limited by the model 9 times"))
        );
        let mut backoff = Backoff {
            waits: 0,
            waited: Duration::ZERO,
            scale: 1.0,
        };
        let asked = RateLimited::from_said("retry-after: 60");
        assert_eq!(
            backoff.next(&asked, None),
            Next::Wait(Duration::from_secs(60))
        );
        assert!(matches!(
            backoff.next(&asked, Some(Duration::from_secs(30))),
            Next::GiveUp(e) if e.contains("`--max-duration`")
        ));
    }

    #[test]
    fn waits_are_shown_as_people_say_them() {
        assert_eq!(shown(Duration::from_millis(40)), "40 ms");
        assert_eq!(shown(Duration::from_millis(1500)), "1.5 s");
        assert_eq!(shown(Duration::from_secs(8)), "8 s");
        assert_eq!(shown(Duration::from_secs(128)), "2 min 8 s");
        assert_eq!(shown(Duration::from_secs(300)), "5 min");
    }
}
