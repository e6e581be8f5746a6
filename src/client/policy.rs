//! What scripts may call: the per-server policy, `[servers.NAME]` of `.mekara/config.toml`
//! ([`crate::config`]).
//!
//! ```toml
//! [servers.fs]
//! enabled = true          # false: the server is never contacted
//! allow = ["read_*"]      # tool names or globs; absent: every tool
//! deny = ["*secret*"]     # wins over everything
//! readonly = true         # only tools annotated `readOnlyHint: true` ...
//! allow_write = ["write_file"]  # ... unless listed here
//! timeout = 30            # seconds per call
//! retries = 1             # transport failures and timeouts only
//! ca_file = "certs/ca.pem"  # HTTPS: also trust these CA certificates (PEM)
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::error::ClientError;

/// Default time a call may take.
pub(crate) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// Default retries of a call that failed in transport.
pub(crate) const DEFAULT_RETRIES: u32 = 1;

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    servers: BTreeMap<String, ServerPolicy>,
    /// The run store's section, read by [`crate::store::config`].
    #[serde(default, rename = "store")]
    _store: Option<toml::Table>,
    /// The queues' limits, read by [`crate::store::config::queue_limits`].
    #[serde(default, rename = "queue")]
    _queue: Option<toml::Table>,
    /// The traces' section, read by `crate::traces`.
    #[serde(default, rename = "traces")]
    _traces: Option<toml::Table>,
    /// Who is told when a run waits for a person or ends, read by `crate::notify`.
    #[serde(default, rename = "notify")]
    _notify: Option<toml::Table>,
}

/// One server's policy.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ServerPolicy {
    /// Whether the server may be contacted at all.
    #[serde(default = "yes")]
    pub enabled: bool,
    /// Tools (names or globs) that may run; `None`: all.
    #[serde(default)]
    pub allow: Option<Vec<String>>,
    /// Tools that never run.
    #[serde(default)]
    pub deny: Vec<String>,
    /// Only tools annotated read-only run, unless in `allow_write`.
    #[serde(default = "yes")]
    pub readonly: bool,
    /// Tools that may run although they may write.
    #[serde(default)]
    pub allow_write: Vec<String>,
    /// Seconds a call may take.
    #[serde(default)]
    pub timeout: Option<f64>,
    /// Retries after a transport failure or a timeout.
    #[serde(default)]
    pub retries: Option<u32>,
    /// CA certificates (PEM) trusted for this server's HTTPS besides the system's,
    /// relative to the project root.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
}

fn yes() -> bool {
    true
}

impl Default for ServerPolicy {
    fn default() -> Self {
        ServerPolicy {
            enabled: true,
            allow: None,
            deny: Vec::new(),
            readonly: true,
            allow_write: Vec::new(),
            timeout: None,
            retries: None,
            ca_file: None,
        }
    }
}

/// The policies of all servers.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policy {
    servers: BTreeMap<String, ServerPolicy>,
}

/// Why policy refuses a call: the whole message, and the setting that decided it (short,
/// for listings).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Refusal(pub String, pub String);

impl Policy {
    /// Reads `<root>/.mekara/config.toml`; no file means the defaults.
    pub(crate) fn load(root: Option<&Path>) -> Result<Policy, ClientError> {
        let Some(root) = root else {
            return Ok(Policy::default());
        };
        let file = root.join(crate::config::FILE);
        let text = match crate::config::read(&file) {
            Ok(Some(text)) => text,
            Ok(None) => return Ok(Policy::default()),
            Err(reason) => return Err(ClientError::Config { file, reason }),
        };
        let parsed: File = toml::from_str(&text).map_err(|e| ClientError::Config {
            file: file.clone(),
            reason: crate::config::reason(&e),
        })?;
        for (name, server) in &parsed.servers {
            if let Some(t) = server.timeout
                && crate::engine::runner::timeout_from_secs(t).is_none()
            {
                return Err(ClientError::Config {
                    file,
                    reason: format!(
                        "`[servers.{name}] timeout` must be {}, got `{}`",
                        crate::engine::runner::TIMEOUT_RULE,
                        // `1e300`, not three hundred digits.
                        if t.abs() < 1e15 {
                            t.to_string()
                        } else {
                            format!("{t:e}")
                        }
                    ),
                });
            }
        }
        Ok(Policy {
            servers: parsed.servers,
        })
    }

    /// The policy of `server` (the defaults when it has no section).
    pub(crate) fn server(&self, server: &str) -> ServerPolicy {
        self.servers.get(server).cloned().unwrap_or_default()
    }

    /// How long one call to `server` may take.
    pub(crate) fn timeout(&self, server: &str) -> Duration {
        self.server(server)
            .timeout
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs_f64)
    }

    /// The CA file trusted for `server`'s HTTPS besides the system's roots, as written.
    pub(crate) fn ca_file(&self, server: &str) -> Option<PathBuf> {
        self.server(server).ca_file
    }

    /// How often a call to `server` is retried after a transport failure.
    pub(crate) fn retries(&self, server: &str) -> u32 {
        self.server(server).retries.unwrap_or(DEFAULT_RETRIES)
    }

    /// Whether `server` may be contacted; the refusal names the setting.
    pub(crate) fn check_server(&self, server: &str) -> Result<(), Refusal> {
        if self.server(server).enabled {
            return Ok(());
        }
        Err(Refusal(
            format!(
                "server `{server}` is disabled by `enabled = false` in `[servers.{server}]` of `{}`; set `enabled = true` to use it",
                self.shown_file()
            ),
            "`enabled = false`".to_string(),
        ))
    }

    /// Whether `tool` of `server` (annotated read-only or not) may run; the refusal names
    /// the setting that would allow it.
    pub(crate) fn check_tool(
        &self,
        server: &str,
        tool: &str,
        read_only: bool,
    ) -> Result<(), Refusal> {
        self.check_server(server)?;
        let policy = self.server(server);
        let file = self.shown_file();
        if let Some(pattern) = policy.deny.iter().find(|p| glob(p, tool)) {
            return Err(Refusal(
                format!(
                    "tool `{tool}` of server `{server}` is denied by `deny` pattern `{pattern}` in `[servers.{server}]` of `{file}`; remove the pattern to allow it"
                ),
                format!("denied by `{pattern}`"),
            ));
        }
        if let Some(allow) = &policy.allow
            && !allow.iter().any(|p| glob(p, tool))
        {
            return Err(Refusal(
                format!(
                    "tool `{tool}` of server `{server}` is not in `allow` of `[servers.{server}]` in `{file}`; add `\"{tool}\"` to `allow` to allow it"
                ),
                "not in `allow`".to_string(),
            ));
        }
        if policy.readonly && !read_only && !policy.allow_write.iter().any(|p| glob(p, tool)) {
            return Err(Refusal(
                format!(
                    "tool `{tool}` of server `{server}` may write (it is not annotated `readOnlyHint: true`) and servers are read-only by default; add `\"{tool}\"` to `allow_write` in `[servers.{server}]` of `{file}` (or set `readonly = false` there) to allow it"
                ),
                "needs `allow_write`".to_string(),
            ));
        }
        Ok(())
    }

    fn shown_file(&self) -> String {
        crate::config::FILE.to_string()
    }
}

/// Glob match with `*` (any run of characters) and `?` (one character).
pub(crate) fn glob(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The commented example `mekara tools init` writes for `servers`.
pub(crate) fn example(servers: &[String]) -> String {
    let mut out = String::from(
        "# mekara's policy for the MCP servers of .mcp.json: which tools scripts may call\n\
         # through `mcp()` steps, `[use-mcp:...]` prompt tags and `mekara tools call`.\n\
         #\n\
         # Per server (all settings optional; the values shown are the defaults):\n\
         #   enabled     = true    # false: never contact the server\n\
         #   allow       = [\"*\"]   # tool names or globs (`*`, `?`) that may run\n\
         #   deny        = []      # tools that never run; wins over `allow`\n\
         #   readonly    = true    # only tools annotated `readOnlyHint: true` run ...\n\
         #   allow_write = []      # ... unless listed here\n\
         #   timeout     = 60      # seconds per call\n\
         #   retries     = 1       # retries after a transport failure or a timeout only\n",
    );
    if servers.is_empty() {
        out.push_str(
            "\n# No servers found in .mcp.json yet; add a section per server:\n# [servers.NAME]\n",
        );
    }
    for name in servers {
        let key = if name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        {
            name.clone()
        } else {
            format!("\"{}\"", name.replace('"', "\\\""))
        };
        out.push_str(&format!(
            "\n[servers.{key}]\nenabled = true\n# allow = [\"*\"]\n# deny = []\nreadonly = true\n# allow_write = []\n# timeout = 60\n# retries = 1\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob("read_*", "read_file"));
        assert!(glob("*", ""));
        assert!(glob("*file", "write_file"));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(!glob("read_*", "write_file"));
        assert!(glob("*_*_*", "a_b_c"));
    }

    #[test]
    fn refusals_name_the_setting() {
        let mut policy = Policy::default();
        assert!(policy.check_tool("fs", "read", true).is_ok());
        let write = policy
            .check_tool("fs", "write", false)
            .expect_err("readonly");
        assert!(write.0.contains("allow_write"), "{}", write.0);
        policy.servers.insert(
            "fs".into(),
            ServerPolicy {
                allow: Some(vec!["read*".into()]),
                deny: vec!["*secret*".into()],
                ..ServerPolicy::default()
            },
        );
        assert!(
            policy
                .check_tool("fs", "list", true)
                .expect_err("not allowed")
                .0
                .contains("add `\"list\"` to `allow`")
        );
        assert!(
            policy
                .check_tool("fs", "read_secret", true)
                .expect_err("denied")
                .0
                .contains("`deny` pattern `*secret*`")
        );
    }

    #[test]
    fn example_parses() {
        let text = example(&["fs".into(), "odd name".into()]);
        let parsed: File = toml::from_str(&text).expect("the example is valid TOML");
        assert_eq!(parsed.servers.len(), 2);
        assert!(parsed.servers["odd name"].readonly);
    }
}
