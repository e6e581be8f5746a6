//! [`Notifier`]: sends each notice off the run's path. Every notifier (the command, the
//! webhook) gets a thread of its own with the `timeout` as its bound; a failure is one
//! warning in the log, with the webhook's secrets hidden, and never reaches the run. Exit
//! waits for the ones still being sent a little longer than the `timeout`
//! ([`wait_for_all`]), so that a run's last notice ("completed") is not cut off when the
//! process ends right after it.

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use super::notice::{Body, Notice};
use super::redact::{redact_url, shown};
use super::settings::Settings;

/// How many notifications are being sent, and the signal that one ended.
static IN_FLIGHT: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

/// Sends notices to the notifiers of [`Settings`].
#[derive(Debug)]
pub(crate) struct Notifier {
    pub(super) settings: Settings,
    /// Where the command runs: the project's root, else where mekara was started.
    pub(super) root: Option<PathBuf>,
}

impl Notifier {
    /// Hands `notice` to every notifier, each on a thread of its own; returns at once.
    pub(crate) fn send(&self, notice: &Notice) {
        let body = notice.body(self.settings.viewer_url.as_deref());
        let json = match serde_json::to_vec(&body) {
            Ok(json) => json,
            Err(e) => {
                tracing::warn!("notify: cannot write the event as JSON: {e}");
                return;
            }
        };
        let timeout = self.settings.timeout;
        if let Some(command) = self.settings.command.clone() {
            let (json, body, root) = (json.clone(), body.clone(), self.root.clone());
            in_background(move || {
                if let Err(e) = run_command(&command, root, &body, &json, timeout) {
                    tracing::warn!(
                        "notify: the command `{command}` for `{}` of run `{}` failed: {e}",
                        body.event,
                        body.run_id
                    );
                }
            });
        }
        if let Some(url) = self.settings.webhook.clone() {
            let secrets = self.settings.secrets.clone();
            in_background(move || {
                if let Err(e) = post(&url, json, timeout) {
                    tracing::warn!(
                        "{}",
                        redact_url(
                            &format!(
                                "notify: cannot post `{}` of run `{}` to `{}`: {e}",
                                body.event,
                                body.run_id,
                                shown(&url)
                            ),
                            &url,
                            &secrets
                        )
                    );
                }
            });
        }
    }
}

/// Runs `job` on a thread of its own, counted in [`IN_FLIGHT`] until it ends.
fn in_background(job: impl FnOnce() + Send + 'static) {
    /// Counts the job out however it ends (a panic too).
    struct Landed;
    impl Drop for Landed {
        fn drop(&mut self) {
            let (count, ended) = &IN_FLIGHT;
            let mut count = count
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *count = count.saturating_sub(1);
            ended.notify_all();
        }
    }
    {
        let mut count = IN_FLIGHT
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *count += 1;
    }
    let spawned = std::thread::Builder::new()
        .name("mekara-notify".to_string())
        .spawn(move || {
            let _landed = Landed;
            job();
        });
    if let Err(e) = spawned {
        // The closure, and with it nothing counted out, was dropped: count it out here.
        drop(Landed);
        tracing::warn!("notify: cannot start a thread to send a notification: {e}");
    }
}

/// Waits until every notification being sent has ended, at most `budget`.
pub(super) fn wait_for_all(budget: Duration) {
    let deadline = Instant::now() + budget;
    let (count, ended) = &IN_FLIGHT;
    let mut count = count
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    while *count > 0 {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            tracing::warn!(
                "notify: {} notification(s) still being sent at exit were given up",
                *count
            );
            return;
        }
        count = match ended.wait_timeout(count, left) {
            Ok((count, _)) => count,
            Err(poisoned) => poisoned.into_inner().0,
        };
    }
}

/// Runs `command` as a shell step without `shell` runs (`sh -c` on Unix, Git for Windows'
/// bash or else `cmd` on Windows: [`crate::engine::shell::one_line`]), the event as JSON on
/// its stdin and in its environment; stops it when it takes longer than `timeout`.
fn run_command(
    command: &str,
    root: Option<PathBuf>,
    body: &Body,
    json: &[u8],
    timeout: Duration,
) -> Result<(), String> {
    let mut child = crate::engine::shell::one_line(command);
    child
        .envs(body.vars())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(root) = root {
        child.current_dir(root);
    }
    let mut child = child.spawn().map_err(|e| format!("cannot start it: {e}"))?;
    if let Some(mut stdin) = child.stdin.take()
        && let Err(e) = stdin.write_all(json)
        && e.kind() != std::io::ErrorKind::BrokenPipe
    {
        tracing::debug!("notify: cannot write the event to the command: {e}");
    }
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("it ended with {status}")),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "it did not end within {} and was stopped",
                    humantime::format_duration(timeout)
                ));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(format!("cannot wait for it: {e}")),
        }
    }
}

/// Posts `json` to `url`; an answer other than 2xx, or none within `timeout`, is an error.
fn post(url: &str, json: Vec<u8>, timeout: Duration) -> Result<(), String> {
    let uri: http::Uri = url.parse().map_err(|e| format!("not a URL: {e}"))?;
    let https = uri.scheme_str() == Some("https");
    let client = crate::client::http::HyperClient::new(
        Vec::new(),
        crate::client::http::AuthFailure::default(),
        https,
        None,
    )?;
    let host = match uri.port_u16() {
        Some(port) => format!("{}:{port}", uri.host().unwrap_or_default()),
        None => uri.host().unwrap_or_default().to_string(),
    };
    let request = http::Request::post(uri)
        .header(http::header::HOST, host)
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(
            http::header::USER_AGENT,
            concat!("mekara/", env!("CARGO_PKG_VERSION")),
        )
        .body(Full::new(Bytes::from(json)))
        .map_err(|e| e.to_string())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start its runtime: {e}"))?;
    runtime.block_on(async {
        let exchange = async {
            let response = client.send(request).await.map_err(|e| e.to_string())?;
            let status = response.status();
            // Read the answer to its end, so the server sees the request through.
            let _ = response.into_body().collect().await;
            if status.is_success() {
                Ok(())
            } else {
                Err(format!("the server answered {status}"))
            }
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "no answer within {}",
                humantime::format_duration(timeout)
            )),
        }
    })
}
