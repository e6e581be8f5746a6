//! [`NotifyWatch`]: wraps the runs a store hands out for writing, so that the events
//! appended to them that call for a person (a question) or end the run (the root frame's
//! pop) are notified. The process that appends an event is the one that notifies it: a
//! resume, which replays the journal and appends nothing it already holds, never notifies
//! the same question twice.

use std::sync::Arc;

use super::deliver::Notifier;
use super::notice::{Kind, Notice};
use crate::engine::journal::{Event, Outcome};
use crate::engine::store::{RunLog, Seer, Watch, Watched};

/// Wraps the runs a store hands out for writing.
#[derive(Debug)]
pub(super) struct NotifyWatch(pub(super) Arc<Notifier>);

impl Watch for NotifyWatch {
    fn wrap(&self, log: Box<dyn RunLog>, history: &[Event]) -> Box<dyn RunLog> {
        let mut seer = Notified {
            notifier: self.0.clone(),
            script: String::new(),
            fell_back: false,
        };
        for event in history {
            seer.follow(log.id(), event);
        }
        Box::new(Watched { inner: log, seer })
    }
}

/// What a run held for writing has shown of the events a person should hear of.
#[derive(Debug)]
struct Notified {
    notifier: Arc<Notifier>,
    /// The root frame's script.
    script: String,
    /// Whether the root frame failed and fell back to its NL instructions.
    fell_back: bool,
}

impl Notified {
    /// Follows `event` of run `id`; the notice it calls for, if any.
    fn follow(&mut self, id: &str, event: &Event) -> Option<Notice> {
        let notice = |kind, detail, choices, next| Notice {
            kind,
            run_id: id.to_string(),
            script: self.script.clone(),
            detail,
            choices,
            next,
            at: event.at(),
        };
        match event {
            Event::Push(push) if push.depth == 0 => {
                self.script.clone_from(&push.script);
                self.fell_back = false;
                None
            }
            Event::Fail(fail) if fail.depth == 0 => {
                self.fell_back = true;
                None
            }
            Event::Ask(ask) => Some(notice(
                Kind::Ask,
                Some(ask.question.clone()),
                ask.choices.clone(),
                Some(format!("mekara answer {id} VALUE")),
            )),
            // A spend cap that pauses an unattended run is told by the driver when it stops
            // there (`cli::unattended::notify_stop`), with the answers that go on.
            Event::Pop(pop) if pop.depth == 0 => {
                let kind = match pop.outcome {
                    _ if self.fell_back => Kind::FellBack,
                    Outcome::Completed => Kind::Completed,
                    Outcome::Stopped => Kind::Stopped,
                    Outcome::FinishedByAgent | Outcome::Failed => Kind::FinishedByAgent,
                };
                Some(notice(kind, pop.error.clone(), None, None))
            }
            _ => None,
        }
    }
}

impl Seer for Notified {
    fn seen(&mut self, id: &str, event: &Event) {
        if let Some(notice) = self.follow(id, event) {
            self.notifier.send(&notice);
        }
    }
}
