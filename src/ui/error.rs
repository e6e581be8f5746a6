//! Why the viewer did not do what a request asked, as a type whose variants know their HTTP
//! status: the status is chosen where the failure is named, never by reading its words.

use http::StatusCode;

use crate::engine::EngineError;
use crate::engine::journal::JournalError;

/// A request the viewer refused, or could not serve.
#[derive(Debug, thiserror::Error)]
pub(crate) enum UiError {
    /// No route has this method and path.
    #[error(
        "no page `{method} {path}` here: the viewer serves `/`, `/runs/ID`, `/evals`, `/evals/ID`, `/runs/ID/output/N`, `/api/runs`, `/api/runs/ID`, `/api/evals/ID`, and POSTs to `/runs/ID/answer` and `/runs/ID/cancel`"
    )]
    NoPage {
        /// The request's method.
        method: String,
        /// Its path.
        path: String,
    },
    /// The body was too big, or too slow.
    #[error("the request body did not arrive whole (at most {limit} bytes, within {seconds} s)")]
    Body {
        /// The largest body read.
        limit: usize,
        /// How long it may take.
        seconds: u64,
    },
    /// `Host` or `Origin` sent twice.
    #[error("the request has more than one `{header}` header; send exactly one")]
    TwoHeaders {
        /// The header's name.
        header: String,
    },
    /// `Host` names no name the viewer serves (DNS rebinding).
    #[error(
        "the viewer answers only to {served}, not to `Host: {given}`; open the address `mekara ui` printed (`--allow-host NAME` adds a name)"
    )]
    Host {
        /// The names it serves, quoted.
        served: String,
        /// The `Host` given.
        given: String,
    },
    /// Another site's page, by its `Origin`.
    #[error("a page of `{origin}` may not use the viewer; only its own pages may")]
    Origin {
        /// The `Origin` given.
        origin: String,
    },
    /// Another site's page, by `Sec-Fetch-Site`.
    #[error("another site's page may not use the viewer; only its own pages may")]
    CrossSite,
    /// Without the token, or with a wrong one.
    #[error(
        "this needs the viewer's token: open the address `mekara ui` printed (it ends in `?token=…`), or send the token in the `X-Mekara-Token` header"
    )]
    Token,
    /// As many event streams are open as the viewer serves.
    #[error(
        "the viewer already has {open} event streams open, the most it serves at once; close some of its pages (or reload this one later)"
    )]
    Streams {
        /// How many.
        open: usize,
    },
    /// An answer to a run paused at a spend cap that is neither `stop` nor a raise above
    /// the cap in force.
    #[error("{0}")]
    CapAnswer(String),
    /// An answer without its value.
    #[error("the answer is missing: send it as the form field `value`")]
    NoAnswer,
    /// A whole output asked of an event that is not a step.
    #[error(
        "step not found: run `{id}` has no step at event {event} of its journal; follow the link under a clipped output on the run's page"
    )]
    NoStep {
        /// The run.
        id: String,
        /// The event asked for.
        event: usize,
    },
    /// The answer came after the question's timeout.
    #[error(
        "the answer came after the question's timeout, so `{step}` failed and the answer was not kept; `mekara run --resume {id} --retry` asks again"
    )]
    TooLate {
        /// The step that asked.
        step: String,
        /// The run.
        id: String,
    },
    /// A cancel in a store that has no queue.
    #[error(
        "only a queued run of the shared run store can be cancelled here; a run in this project's files stops with Ctrl-C in the `mekara run` (or agent) that drives it"
    )]
    NotShared,
    /// The store or the executor refused, or failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// An eval's folder is not there, or cannot be read.
    #[error(transparent)]
    Eval(#[from] crate::eval::record::RecordError),
    /// The work on the blocking pool did not finish (it panicked, or the server stops).
    #[error("the viewer failed reading the store: {0}")]
    Task(String),
}

impl UiError {
    /// The HTTP status this failure is answered with.
    pub(crate) fn status(&self) -> StatusCode {
        match self {
            UiError::NoPage { .. } | UiError::NoStep { .. } => StatusCode::NOT_FOUND,
            UiError::Body { .. }
            | UiError::TwoHeaders { .. }
            | UiError::NoAnswer
            | UiError::CapAnswer(_) => StatusCode::BAD_REQUEST,
            UiError::Host { .. } => StatusCode::MISDIRECTED_REQUEST,
            UiError::Origin { .. } | UiError::CrossSite | UiError::Token => StatusCode::FORBIDDEN,
            UiError::Streams { .. } => StatusCode::SERVICE_UNAVAILABLE,
            UiError::TooLate { .. } | UiError::NotShared => StatusCode::CONFLICT,
            UiError::Engine(e) => engine_status(e),
            UiError::Eval(crate::eval::record::RecordError::NotFound { .. }) => {
                StatusCode::NOT_FOUND
            }
            UiError::Task(_) | UiError::Eval(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// The status of what the store or the executor said: a run that is not there is not found;
/// a store that failed is the server's failure; anything else is the run's state refusing
/// what was asked (not waiting for an answer, not a choice, held by another process).
fn engine_status(e: &EngineError) -> StatusCode {
    match e {
        EngineError::RunNotFound { .. } | EngineError::BadRunId { .. } => StatusCode::NOT_FOUND,
        EngineError::Journal(JournalError::Busy { .. }) => StatusCode::CONFLICT,
        EngineError::Journal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::CONFLICT,
    }
}

#[cfg(test)]
mod tests {
    use super::{StatusCode, UiError};
    use crate::engine::EngineError;

    #[test]
    fn statuses_come_from_the_variant_not_the_words() {
        let not_found = UiError::from(EngineError::RunNotFound { id: "x".into() });
        assert_eq!(not_found.status(), StatusCode::NOT_FOUND);
        // Words that once chose 404 by being searched for choose nothing now.
        let choice = UiError::from(EngineError::NotAChoice {
            given: "not found".into(),
            choices: vec!["no run".into()],
        });
        assert_eq!(choice.status(), StatusCode::CONFLICT);
        assert_eq!(
            UiError::Streams { open: 32 }.status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
    }
}
