//! Notifications: when a run waits for a person (a question, a failure or a limit that
//! stops an unattended run) or ends, the notifiers of `[notify]` are told once, off the
//! run's path (DESIGN §20): a command given the event as JSON on stdin and in its
//! environment, and a webhook posted the same JSON (with a Slack-compatible `text`).
//!
//! Questions and ends are seen in the journal as they are appended (a [`Watch`] on the run
//! store, as traces are), so every way of driving a run (the terminal, MCP, `--agent`, a
//! worker) notifies alike, and only the process that appends an event notifies it. What only
//! the unattended driver knows (it stopped at a failed step or a limit) it hands to
//! [`announce`].
//!
//! - [`settings`]: `[notify]` of both config files, and the rule for a project's;
//! - [`notice`]: the event and the body every notifier is given;
//! - [`deliver`]: the threads that send it, bounded by `timeout`;
//! - [`watcher`]: the runs a store hands out, wrapped to see their events;
//! - [`redact`]: webhook URLs as logs show them.

mod deliver;
mod notice;
pub(crate) mod redact;
mod settings;
mod watcher;

use std::sync::{Arc, OnceLock};

use crate::engine::EngineError;
use crate::engine::journal::{JournalError, StoreFailure};
use crate::engine::store::Watch;
use crate::paths::Locations;
use deliver::Notifier;
pub(crate) use notice::{Kind, Notice};
pub(crate) use settings::NotifyError;

/// This process's notifier, set up by the first run store that asks (`None`: no `[notify]`).
static NOTIFIER: OnceLock<Option<Arc<Notifier>>> = OnceLock::new();

/// What watches the runs of `locations` to notify their questions and ends, when `[notify]`
/// names a notifier. Read once per process; a setting that cannot be used is an error.
pub(crate) fn watch(locations: &Locations) -> Result<Option<Arc<dyn Watch>>, NotifyError> {
    let notifier = if let Some(notifier) = NOTIFIER.get() {
        notifier.clone()
    } else {
        let user = locations.user_dir().map(|d| d.join("config.toml"));
        let project = crate::config::path(locations.project_root.as_deref());
        let settings = settings::read(user.as_deref(), project.as_deref())?;
        let notifier = settings.map(|settings| {
            Arc::new(Notifier {
                settings,
                root: locations.project_root.clone(),
            })
        });
        NOTIFIER.get_or_init(|| notifier).clone()
    };
    Ok(notifier.map(|n| Arc::new(watcher::NotifyWatch(n)) as Arc<dyn Watch>))
}

/// Whether this process tells anyone (`[notify]` names a notifier): what a caller asks
/// before it reads anything only to make a [`Notice`].
pub(crate) fn is_on() -> bool {
    matches!(NOTIFIER.get(), Some(Some(_)))
}

/// Tells the notifiers of `notice`, which only its caller saw (an unattended run stopped
/// at a failed step or a limit); returns at once.
pub(crate) fn announce(notice: &Notice) {
    if let Some(Some(notifier)) = NOTIFIER.get() {
        notifier.send(notice);
    }
}

/// Waits for the notifications still being sent, at most the `timeout` and a second (so
/// that a notifier's own timeout, which logs why it failed, comes first); at exit.
pub(crate) fn shutdown() {
    if let Some(Some(notifier)) = NOTIFIER.get() {
        deliver::wait_for_all(notifier.settings.timeout + std::time::Duration::from_secs(1));
    }
}

impl From<NotifyError> for EngineError {
    fn from(e: NotifyError) -> EngineError {
        EngineError::Journal(JournalError::Store(StoreFailure {
            error: Box::new(e),
            usage: true,
        }))
    }
}
