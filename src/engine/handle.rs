//! Run handles: what an agent passes back to drive a run (MCP `2026-07-28` has no protocol
//! sessions, so the run itself is the state handle).
//!
//! A handle is `<run id>.<token>`: the run's short id, which people read, and 128 random
//! bits, which make the handle a capability nobody can guess. The journal's header keeps only
//! the token's SHA-256 ([`digest`]), so whoever reads a journal (a bug report, `mekara runs
//! show`) learns nothing that drives the run, while any mekara process can check a handle
//! against the journal, which is the truth. Journals written before handles have no digest:
//! their runs are taken up by id alone.

use std::fmt::Write as _;

use sha2::{Digest as _, Sha256};

/// The separator between the run id and the token (run ids never hold one).
const SEPARATOR: char = '.';

/// A fresh token: 128 random bits as 32 lowercase hex digits.
pub(crate) fn new_token() -> String {
    let mut bytes = [0u8; 16];
    if let Err(e) = getrandom::fill(&mut bytes) {
        // The system's randomness is unavailable: a run without a token is still a run, taken
        // up by id alone, like one journaled before handles.
        tracing::warn!("no randomness for a run token: {e}");
        return String::new();
    }
    hex(&bytes)
}

/// The SHA-256 of `token`, as the journal's header keeps it.
pub(crate) fn digest(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

/// `<run>.<token>`.
pub(crate) fn join(run: &str, token: &str) -> String {
    format!("{run}{SEPARATOR}{token}")
}

/// The run id and the token of `handle`; a bare run id has no token.
pub(crate) fn split(handle: &str) -> (&str, Option<&str>) {
    match handle.split_once(SEPARATOR) {
        Some((run, token)) => (run, Some(token)),
        None => (handle, None),
    }
}

/// Whether `token` opens a run whose header keeps `expected` (its digest; `None` for a
/// journal written before handles, which any caller may take up by id).
pub(crate) fn opens(expected: Option<&str>, token: Option<&str>) -> Result<(), HandleProblem> {
    match (expected, token) {
        (None, _) => Ok(()),
        (Some(_), None) => Err(HandleProblem::Missing),
        (Some(expected), Some(token)) if expected == digest(token) => Ok(()),
        (Some(_), Some(_)) => Err(HandleProblem::Wrong),
    }
}

/// Why a handle does not open a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandleProblem {
    /// Only the run id was given, and the run has a token.
    Missing,
    /// The token is not the run's.
    Wrong,
}

/// `bytes` in lowercase hexadecimal.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_open_only_their_run() {
        let token = new_token();
        assert_eq!(token.len(), 32);
        assert_ne!(token, new_token());
        let kept = digest(&token);
        assert_eq!(kept.len(), 64);
        assert_eq!(opens(Some(&kept), Some(&token)), Ok(()));
        assert_eq!(opens(Some(&kept), None), Err(HandleProblem::Missing));
        assert_eq!(
            opens(Some(&kept), Some(&new_token())),
            Err(HandleProblem::Wrong)
        );
        assert_eq!(opens(None, None), Ok(()));
        assert_eq!(split(&join("r1", &token)), ("r1", Some(token.as_str())));
        assert_eq!(split("r1"), ("r1", None));
    }
}
