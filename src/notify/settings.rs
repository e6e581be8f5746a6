//! `[notify]` of `~/.mekara/config.toml` and of the project's `.mekara/config.toml`: who is
//! told when a run waits for a person or ends, checked.
//!
//! The trust rule, as for `[store] url`: a project's file is a cloned repository's word.
//! So a project may name a `webhook` (a team's channel for its runs), but never with
//! `${VAR}` in it (that would send the person's environment to a server the repository
//! chose), and may not name a `command` at all: a command from a project would run on every
//! run in it, bundled workflows included, which the person never chose to run. Commands, and
//! webhooks with `${VAR}`, belong in the person's own file, whose settings come first.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::secrets::Secrets;

/// How long one notification may take when `timeout` is not set.
pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest `timeout` taken: exit waits up to this for a notification still being sent.
const MAX_TIMEOUT: Duration = Duration::from_secs(60);

/// A `[notify]` setting that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("`{}`: {reason}", .file.display())]
pub(crate) struct NotifyError {
    /// The settings file.
    pub file: PathBuf,
    /// What is wrong, and what to do.
    pub reason: String,
}

/// `[notify]` as written in one file.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    command: Option<String>,
    webhook: Option<String>,
    viewer_url: Option<String>,
    timeout: Option<String>,
}

/// The notifiers of this process, from both files.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// A shell command given each event on stdin and in its environment.
    pub command: Option<String>,
    /// A URL each event is posted to, `${VAR}` expanded.
    pub webhook: Option<String>,
    /// Where the viewer serves run pages (`…/runs/ID`), when one is named.
    pub viewer_url: Option<String>,
    /// How long one notification may take.
    pub timeout: Duration,
    /// The values `${VAR}` took in the webhook's URL, redacted from every log line.
    pub secrets: Secrets,
}

/// The settings `user` (`~/.mekara/config.toml`) and `project` (`.mekara/config.toml`) give,
/// the person's first; `None` when neither names a notifier.
pub(super) fn read(
    user: Option<&Path>,
    project: Option<&Path>,
) -> Result<Option<Settings>, NotifyError> {
    let mine = match user {
        Some(file) => section(file)?,
        None => Section::default(),
    };
    let theirs = match project {
        Some(file) => section(file)?,
        None => Section::default(),
    };
    if let (Some(file), Some(_)) = (project, &theirs.command) {
        return Err(NotifyError {
            file: file.to_path_buf(),
            reason: "`[notify] command` is not read from a project's settings: a cloned repository could run it on every run here; set it in `[notify]` of `~/.mekara/config.toml`".to_string(),
        });
    }
    let mut secrets = Secrets::default();
    let webhook = match (mine.webhook, theirs.webhook) {
        (Some(url), _) => Some((url, user, true)),
        (None, Some(url)) => Some((url, project, false)),
        (None, None) => None,
    };
    let webhook = match webhook {
        Some((raw, Some(file), expand)) => Some(webhook_url(&raw, file, expand, &mut secrets)?),
        _ => None,
    };
    let (viewer_url, viewer_file) = match (mine.viewer_url, theirs.viewer_url) {
        (Some(url), _) => (Some(url), user),
        (None, url) => (url, project),
    };
    let viewer_url = match (viewer_url, viewer_file) {
        (Some(url), Some(file)) => Some(http_url(&url, "viewer_url", file)?),
        _ => None,
    };
    let (timeout, timeout_file) = match (mine.timeout, theirs.timeout) {
        (Some(t), _) => (Some(t), user),
        (None, t) => (t, project),
    };
    let timeout = match (timeout, timeout_file) {
        (Some(t), Some(file)) => duration(&t, file)?,
        _ => DEFAULT_TIMEOUT,
    };
    let command = mine.command;
    if let (Some(command), Some(file)) = (&command, user)
        && command.trim().is_empty()
    {
        return Err(NotifyError {
            file: file.to_path_buf(),
            reason: "`[notify] command` is empty; write the command to run, such as `notify-send mekara \"$MEKARA_TEXT\"`, or leave it out".to_string(),
        });
    }
    if command.is_none() && webhook.is_none() {
        return Ok(None);
    }
    Ok(Some(Settings {
        command,
        webhook,
        viewer_url,
        timeout,
        secrets,
    }))
}

/// `[notify]` of `file` (empty when the file or the section is not there).
fn section(file: &Path) -> Result<Section, NotifyError> {
    crate::config::section_of(file, "notify")
        .map(Option::unwrap_or_default)
        .map_err(|reason| NotifyError {
            file: file.to_path_buf(),
            reason,
        })
}

/// The webhook URL `raw` of `file`, `${VAR}` expanded when the person wrote it (`expand`)
/// and refused when a project did.
fn webhook_url(
    raw: &str,
    file: &Path,
    expand: bool,
    secrets: &mut Secrets,
) -> Result<String, NotifyError> {
    let bad = |reason: String| NotifyError {
        file: file.to_path_buf(),
        reason,
    };
    if !expand && let Some(var) = crate::client::config::variables_named(raw).first() {
        return Err(bad(format!(
            "`[notify] webhook` names the environment variable `{var}`, and mekara does not expand variables in a project's settings: a cloned repository could send their values to a server it chose; set the webhook in `[notify]` of `~/.mekara/config.toml`, where `${{VAR}}` is expanded"
        )));
    }
    let url = crate::client::config::expand(raw, &|v| std::env::var(v).ok(), secrets)
        .map_err(|reason| bad(format!("`[notify] webhook`: {reason}")))?
        .0;
    http_url(&url, "webhook", file).map_err(|e| NotifyError {
        reason: super::redact::redact_url(&e.reason, &url, secrets),
        ..e
    })
}

/// `url`, the setting `key` of `file`, checked to be an `http://` or `https://` URL with a
/// host; without a trailing `/`.
fn http_url(url: &str, key: &str, file: &Path) -> Result<String, NotifyError> {
    let bad = |why: &str| NotifyError {
        file: file.to_path_buf(),
        reason: format!(
            "`[notify] {key} = \"{url}\"` {why}; write a URL such as `https://hooks.example.com/mekara`"
        ),
    };
    let uri: http::Uri = url.trim().parse().map_err(|_| bad("is not a URL"))?;
    match uri.scheme_str() {
        Some("http" | "https") => {}
        _ => return Err(bad("is not an `http://` or `https://` URL")),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(bad("names no host"));
    }
    Ok(url.trim().trim_end_matches('/').to_string())
}

/// `timeout`, checked: a duration above zero, at most [`MAX_TIMEOUT`].
fn duration(timeout: &str, file: &Path) -> Result<Duration, NotifyError> {
    let bad = |why: String| NotifyError {
        file: file.to_path_buf(),
        reason: format!(
            "`[notify] timeout = \"{timeout}\"`: {why}; write a duration such as `5s` (at most `{}`)",
            humantime::format_duration(MAX_TIMEOUT)
        ),
    };
    let parsed = humantime::parse_duration(timeout).map_err(|e| bad(e.to_string()))?;
    if parsed.is_zero() || parsed > MAX_TIMEOUT {
        return Err(bad("out of range".to_string()));
    }
    Ok(parsed)
}
