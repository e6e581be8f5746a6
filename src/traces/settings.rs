//! The settings of traces: the standard `OTEL_*` variables, and `MEKARA_TRACES_INCLUDE_TEXT`
//! or the `[traces]` section of `.mekara/config.toml`.

use std::path::Path;
use std::time::Duration;

use crate::paths::Locations;

/// How long one export may take, unless `OTEL_EXPORTER_OTLP_TIMEOUT` says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Asks for prompt and output text in spans, as `[traces] include_text` does.
const INCLUDE_TEXT_VAR: &str = "MEKARA_TRACES_INCLUDE_TEXT";

/// The first of `vars` that is set and not blank, with its value.
pub(super) fn var(vars: &[&'static str]) -> Option<(&'static str, String)> {
    vars.iter().find_map(|name| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (*name, v.trim().to_string()))
    })
}

/// The export timeout of `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` or `OTEL_EXPORTER_OTLP_TIMEOUT`
/// (milliseconds), else [`DEFAULT_TIMEOUT`].
pub(super) fn export_timeout() -> Duration {
    let Some((name, value)) = var(&[
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]) else {
        return DEFAULT_TIMEOUT;
    };
    match value.parse::<u64>() {
        Ok(ms) if ms > 0 => Duration::from_millis(ms),
        _ => {
            tracing::warn!(
                "traces: `{name}` is `{value}`, not a number of milliseconds above 0; using {} s",
                DEFAULT_TIMEOUT.as_secs()
            );
            DEFAULT_TIMEOUT
        }
    }
}

/// Warns of the entries of `OTEL_EXPORTER_OTLP_(TRACES_)HEADERS` that the exporter leaves
/// out (not `key=value`, or not a valid header), naming them by position and never by value;
/// the values are secrets to the log from now on.
pub(super) fn check_headers() {
    let Some((name, value)) = var(&[
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        "OTEL_EXPORTER_OTLP_HEADERS",
    ]) else {
        return;
    };
    let mut secrets = crate::client::Secrets::default();
    for (position, entry) in value.split(',').enumerate() {
        let (key, val) = entry.split_once('=').unwrap_or((entry, ""));
        secrets.add(name, val.trim());
        let valid = entry.contains('=')
            && http::HeaderName::from_bytes(key.trim().as_bytes()).is_ok()
            && http::HeaderValue::from_str(val.trim()).is_ok();
        if !valid {
            tracing::warn!(
                "traces: entry {} of `{name}` is not `name=value` with a valid header name and value; it is not sent (entries are separated by `,`)",
                position + 1
            );
        }
    }
}

/// Whether spans carry prompt and output text: `MEKARA_TRACES_INCLUDE_TEXT`, else
/// `[traces] include_text` of `.mekara/config.toml`.
pub(super) fn include_text(locations: &Locations) -> bool {
    if let Ok(value) = std::env::var(INCLUDE_TEXT_VAR) {
        let value = value.trim().to_ascii_lowercase();
        return matches!(value.as_str(), "1" | "true" | "yes" | "on");
    }
    let Some(file) = crate::config::path(locations.project_root.as_deref()) else {
        return false;
    };
    match read_section(&file) {
        Ok(section) => section.include_text.unwrap_or(false),
        Err(reason) => {
            tracing::warn!(
                "traces: `{}`: {reason}; prompt and output text are left out",
                file.display()
            );
            false
        }
    }
}

/// The `[traces]` section of `.mekara/config.toml`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    include_text: Option<bool>,
}

fn read_section(file: &Path) -> Result<Section, String> {
    Ok(crate::config::section_of(file, "traces")?.unwrap_or_default())
}
