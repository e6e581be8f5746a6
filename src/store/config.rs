//! Which run store a project uses: the journal files, or the shared PostgreSQL store that
//! `MEKARA_STORE_URL`, `[store] url` of `~/.mekara/config.toml` or `[store]` of the
//! project's `.mekara/config.toml` names (`url` and `project`). `${VAR}` is expanded, as in
//! `.mcp.json`, only in what the person wrote (the variable and `~/.mekara/config.toml`),
//! never in a project's file. The engine gets the settings; this is the one place that reads
//! them.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use crate::engine::EngineError;
use crate::engine::journal::{Contents, JournalError, StoreFailure};
use crate::engine::runs::RunSummary;
use crate::engine::store::{RunLog, RunStore, Store};
use crate::paths::Locations;
use crate::store::postgres::{PgStore, Settings, StoreError, redact};

/// The environment variable that names the store, before `[store] url`.
pub(crate) const URL_VAR: &str = "MEKARA_STORE_URL";

/// The run store of `locations`: PostgreSQL when `MEKARA_STORE_URL` or `[store] url` names
/// one, else the runs folder. Nothing is connected yet: a command that never touches a run
/// never needs the database.
/// Its runs are traced when the environment names an OpenTelemetry collector
/// ([`crate::traces`]).
pub(crate) fn run_store(locations: &Locations) -> Result<RunStore, EngineError> {
    let store = match shared(locations)? {
        None => crate::store::files(locations.runs_dir().ok_or(EngineError::NoRunsDir)?),
        Some(store) => RunStore::with(Arc::new(store)),
    };
    let store = match crate::traces::watch(locations) {
        Some(watch) => store.watched(watch),
        None => store,
    };
    Ok(match crate::notify::watch(locations)? {
        Some(watch) => store.watched(watch),
        None => store,
    })
}

/// The run store of an MCP server in `locations`: as [`run_store`], except that a store
/// setting that cannot be used leaves the server up, and every tool that reaches a run
/// says why (a client shows a server that did not start as a bare failure).
pub(crate) fn run_store_or_refusal(locations: &Locations) -> Result<RunStore, EngineError> {
    match run_store(locations) {
        Err(EngineError::Journal(JournalError::Store(failure))) => {
            Ok(RunStore::with(Arc::new(Unusable {
                reason: failure.error.to_string(),
                usage: failure.usage,
            })))
        }
        other => other,
    }
}

/// A store whose setting cannot be used: every call fails with the reason.
#[derive(Debug)]
struct Unusable {
    reason: String,
    usage: bool,
}

impl Unusable {
    fn refused<T>(&self) -> Result<T, EngineError> {
        Err(EngineError::Journal(JournalError::Store(StoreFailure {
            error: self.reason.clone().into(),
            usage: self.usage,
        })))
    }
}

impl Store for Unusable {
    fn place(&self) -> String {
        "the run store, whose setting cannot be used".to_string()
    }

    fn create(&self, _: &str, _: Option<String>) -> Result<Box<dyn RunLog>, EngineError> {
        self.refused()
    }

    fn open(&self, _: &str) -> Result<(Box<dyn RunLog>, Contents), EngineError> {
        self.refused()
    }

    fn read(&self, _: &str) -> Result<Contents, EngineError> {
        self.refused()
    }

    fn list(&self, _: Option<&str>) -> Result<Vec<RunSummary>, EngineError> {
        self.refused()
    }

    fn remove(&self, _: &str) -> Result<u64, EngineError> {
        self.refused()
    }
}

/// The shared store `locations` name, if they name one. Its step group notes stay in the
/// local runs folder.
pub(crate) fn shared(locations: &Locations) -> Result<Option<PgStore>, EngineError> {
    let dir = locations.runs_dir().ok_or(EngineError::NoRunsDir)?;
    match settings(locations)? {
        None => Ok(None),
        Some(settings) => Ok(Some(PgStore::new(settings, dir)?)),
    }
}

/// The `[store]` section of `.mekara/config.toml`.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Section {
    url: Option<String>,
    project: Option<String>,
}

#[derive(Debug, Default, serde::Deserialize)]
struct ConfigFile {
    #[serde(default)]
    store: Option<Section>,
    #[serde(default)]
    queue: BTreeMap<String, QueueLimits>,
}

impl ConfigFile {
    /// `[store] url` of the person's own settings `file`, the only setting of the store
    /// that belongs there (the project id and the queues are the project's).
    fn user_store(self, file: &Path) -> Result<Option<String>, StoreError> {
        let Some(store) = self.store else {
            return Ok(None);
        };
        if store.project.is_some() || !self.queue.is_empty() {
            return Err(StoreError::Config {
                file: file.to_path_buf(),
                reason: "`[store] project` and `[queue.NAME]` are a project's settings; move them to the project's `.mekara/config.toml` (here only `[store] url` is read)".to_string(),
            });
        }
        Ok(store.url)
    }
}

/// The limits of one queue, `[queue.NAME]` of `.mekara/config.toml`: how many of its runs
/// run at once across every worker, and the unattended limits of each run (a flag given to
/// `mekara submit` wins over these).
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueueLimits {
    pub concurrency: Option<usize>,
    pub max_cost: Option<f64>,
    pub max_agent_steps: Option<usize>,
    pub max_duration: Option<String>,
    pub agent_timeout: Option<f64>,
}

impl QueueLimits {
    /// The limits as flags of `mekara run`, the ones `given` already has left out.
    pub(crate) fn flags(&self, given: &[String]) -> Vec<String> {
        let mut flags = Vec::new();
        let mut add = |flag: &str, value: Option<String>| {
            if let Some(value) = value
                && !given.iter().any(|g| g == flag)
            {
                flags.push(flag.to_string());
                flags.push(value);
            }
        };
        add("--max-cost", self.max_cost.map(|v| v.to_string()));
        add(
            "--max-agent-steps",
            self.max_agent_steps.map(|v| v.to_string()),
        );
        add("--max-duration", self.max_duration.clone());
        add("--agent-timeout", self.agent_timeout.map(|v| v.to_string()));
        flags
    }
}

/// The `[queue.NAME]` sections of the project's `.mekara/config.toml`, checked.
pub(crate) fn queue_limits(
    locations: &Locations,
) -> Result<BTreeMap<String, QueueLimits>, StoreError> {
    let Some(file) = crate::config::path(locations.project_root.as_deref()) else {
        return Ok(BTreeMap::new());
    };
    let queues = read_config(&file)?.queue;
    for (name, limits) in &queues {
        let bad = |reason: String| StoreError::Config {
            file: file.clone(),
            reason: format!("`[queue.{name}]`: {reason}"),
        };
        if limits.concurrency == Some(0) {
            return Err(bad("`concurrency` must be 1 or more".to_string()));
        }
        if let Some(cost) = limits.max_cost
            && !(cost.is_finite() && cost >= 0.0)
        {
            return Err(bad(format!(
                "`max_cost` must be a number of US dollars, 0 or more, not `{cost}`"
            )));
        }
        if let Some(duration) = &limits.max_duration
            && let Err(e) = humantime::parse_duration(duration)
        {
            return Err(bad(format!(
                "`max_duration = \"{duration}\"`: {e}; write a duration such as `90s`, `20m` or `1h`"
            )));
        }
    }
    Ok(queues)
}

/// The shared store `locations` name: `MEKARA_STORE_URL`, else `[store] url` of the
/// person's `~/.mekara/config.toml`, else that of the project's `.mekara/config.toml`;
/// `None` for the files.
///
/// `${VAR}` is expanded in the first two, which the person wrote, and refused in the
/// project's (a cloned repository's): there it would send the person's environment to a
/// server the repository chose (DESIGN, "What a cloned repository may make mekara do").
fn settings(locations: &Locations) -> Result<Option<Settings>, StoreError> {
    let root = locations.project_root.as_deref();
    let file = crate::config::path(root);
    let section = match &file {
        Some(file) => read_section(file)?,
        None => Section::default(),
    };
    let user_file = locations.user_dir().map(|d| d.join("config.toml"));
    let user_url = match &user_file {
        Some(file) => read_config(file)?.user_store(file)?,
        None => None,
    };
    let (raw, from) = match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => (url, format!("`{URL_VAR}`")),
        _ => match (user_url, section.url, &file) {
            (Some(url), _, _) => (url, "`[store] url` of `~/.mekara/config.toml`".to_string()),
            (None, Some(url), Some(file)) => {
                refuse_variables(&url, file)?;
                (url, "`[store] url` of `.mekara/config.toml`".to_string())
            }
            _ => return Ok(None),
        },
    };
    let mut secrets = crate::client::Secrets::default();
    let url = crate::client::config::expand(&raw, &|v| std::env::var(v).ok(), &mut secrets)
        .map_err(|reason| StoreError::BadUrl {
            from: from.clone(),
            reason: redact(&reason, &raw),
        })?
        .0;
    let project = section
        .project
        .filter(|p| !p.trim().is_empty())
        .or_else(|| root.and_then(origin_remote).map(|r| normalise_remote(&r)))
        .or_else(|| {
            root.and_then(Path::file_name)
                .map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_else(|| "~".to_string());
    Ok(Some(Settings { url, from, project }))
}

/// Refuses `url`, the `[store] url` of the project's settings `file`, when it names a
/// variable of the environment (`${VAR}` or `${VAR:-default}`).
fn refuse_variables(url: &str, file: &Path) -> Result<(), StoreError> {
    match crate::client::config::variables_named(url).first() {
        None => Ok(()),
        Some(var) => Err(StoreError::Config {
            file: file.to_path_buf(),
            reason: format!(
                "`[store] url` names the environment variable `{var}`, and mekara does not expand variables in a project's settings: a cloned repository could send their values to a server it chose; leave the password out of the URL and put it in your `~/.pgpass` (a line `HOST:PORT:DATABASE:USER:PASSWORD`, sent only to that server), or set the whole URL in `{URL_VAR}` or in `[store] url` of `~/.mekara/config.toml`, which come before the project's and where `${{VAR}}` is expanded"
            ),
        }),
    }
}

fn read_section(file: &Path) -> Result<Section, StoreError> {
    Ok(read_config(file)?.store.unwrap_or_default())
}

/// The `[store]` and `[queue.*]` sections of `file` (none when it is not there).
fn read_config(file: &Path) -> Result<ConfigFile, StoreError> {
    let bad = |reason| StoreError::Config {
        file: file.to_path_buf(),
        reason,
    };
    let Some(text) = crate::config::read(file).map_err(bad)? else {
        return Ok(ConfigFile::default());
    };
    // The rest of the file is the MCP client's policy, read (and checked) there.
    let mut table: toml::Table =
        toml::from_str(&text).map_err(|e| bad(crate::config::reason(&e)))?;
    table.retain(|k, _| k == "store" || k == "queue");
    toml::Table::try_into(table).map_err(|e: toml::de::Error| bad(crate::config::reason(&e)))
}

/// The `origin` remote of the git repository at `root`, if it has one.
fn origin_remote(root: &Path) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(root)
        .args(["config", "--get", "remote.origin.url"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let url = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !url.is_empty()).then_some(url)
}

/// A remote URL as a project id that is the same for every clone: no scheme, user, port or
/// `.git`, and the host in lower case. `https://github.com/acme/app.git`,
/// `git@github.com:acme/app` and `ssh://git@GitHub.com:22/acme/app/` are all
/// `github.com/acme/app`.
pub(crate) fn normalise_remote(url: &str) -> String {
    let url = url.trim();
    let (rest, scp) = match url.split_once("://") {
        Some((_, rest)) => (rest, false),
        None => (url, true),
    };
    let (authority, path) = if scp {
        // `user@host:path`, as git's scp-like syntax; a local path has no `:` before `/`.
        match rest.split_once(':') {
            Some((a, p)) if !a.contains('/') => (a, p),
            _ => ("", rest),
        }
    } else {
        rest.split_once('/').unwrap_or((rest, ""))
    };
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if scp {
        host
    } else {
        host.split_once(':').map_or(host, |(h, _)| h)
    };
    let path = path.trim_matches('/');
    let path = path.strip_suffix(".git").unwrap_or(path);
    if host.is_empty() {
        path.to_string()
    } else {
        format!("{}/{path}", host.to_lowercase())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remotes_of_one_repository_name_one_project() {
        for url in [
            "https://github.com/acme/app.git",
            "https://user:token@github.com/acme/app",
            "git@github.com:acme/app.git",
            "ssh://git@GitHub.com:22/acme/app/",
            "git://github.com/acme/app.git",
        ] {
            assert_eq!(normalise_remote(url), "github.com/acme/app", "{url}");
        }
        assert_eq!(normalise_remote("/srv/git/app.git"), "srv/git/app");
    }
}
