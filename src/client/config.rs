//! Which MCP servers exist: the project's `.mcp.json` and the user's servers in
//! `~/.claude.json`, in the format Claude Code uses, with `${VAR}` and `${VAR:-default}`
//! expansion.
//!
//! Expansion remembers which values came from the environment ([`Secrets`]), so that
//! everything the client lets out (errors, results, journals, cassettes) can say `${VAR}`
//! instead of the value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value as Json};

use super::error::ClientError;

/// How to reach a server, after expansion.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Transport {
    /// A child process speaking MCP on stdin/stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
    },
    /// Streamable HTTP.
    Http {
        /// The endpoint.
        url: String,
        /// Extra request headers, with the variables their values came from.
        headers: Vec<Header>,
    },
}

/// One configured HTTP header.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Header {
    /// Its name.
    pub name: String,
    /// Its value, expanded.
    pub value: String,
    /// The variables its value came from (named in 401/403 errors, never the value).
    pub from_vars: Vec<String>,
}

/// A server as declared, before its variables are expanded (expansion may fail for one
/// server without spoiling the others).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerDecl {
    /// Its name.
    pub name: String,
    /// The file that declares it.
    pub file: PathBuf,
    /// Its JSON object.
    pub raw: Map<String, Json>,
}

/// A server ready to connect to.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ServerConfig {
    /// Its name.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
}

pub(crate) use crate::secrets::Secrets;

/// The servers declared for a project: `.mcp.json` first, then the user's servers from
/// `~/.claude.json` (top-level `mcpServers`, and the `projects` entry of this project)
/// for names the project does not declare.
pub(crate) fn discover(
    root: Option<&Path>,
    home: Option<&Path>,
) -> Result<Vec<ServerDecl>, ClientError> {
    let mut servers: Vec<ServerDecl> = Vec::new();
    if let Some(root) = root {
        let file = root.join(".mcp.json");
        if let Some(json) = read_json(&file)? {
            add_servers(&mut servers, &file, json.get("mcpServers"))?;
        }
    }
    if let Some(home) = home {
        let file = home.join(".claude.json");
        if let Some(json) = read_json(&file)? {
            add_servers(&mut servers, &file, json.get("mcpServers"))?;
            if let Some(root) = root {
                let project = json
                    .get("projects")
                    .and_then(|p| p.get(root.to_string_lossy().as_ref()))
                    .and_then(|p| p.get("mcpServers"));
                add_servers(&mut servers, &file, project)?;
            }
        }
    }
    Ok(servers)
}

fn read_json(file: &Path) -> Result<Option<Json>, ClientError> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(ClientError::Config {
                file: file.to_path_buf(),
                reason: format!("cannot read it: {e}"),
            });
        }
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| ClientError::Config {
            file: file.to_path_buf(),
            reason: format!("it is not valid JSON: {e}"),
        })
}

fn add_servers(
    servers: &mut Vec<ServerDecl>,
    file: &Path,
    section: Option<&Json>,
) -> Result<(), ClientError> {
    let Some(section) = section else {
        return Ok(());
    };
    let Json::Object(map) = section else {
        return Err(ClientError::Config {
            file: file.to_path_buf(),
            reason: "`mcpServers` must be an object of server name to server".into(),
        });
    };
    for (name, server) in map {
        if servers.iter().any(|s| &s.name == name) {
            continue;
        }
        let Json::Object(raw) = server else {
            return Err(ClientError::Config {
                file: file.to_path_buf(),
                reason: format!("server `{name}` must be an object"),
            });
        };
        servers.push(ServerDecl {
            name: name.clone(),
            file: file.to_path_buf(),
            raw: raw.clone(),
        });
    }
    Ok(())
}

impl ServerDecl {
    /// Checks the declaration and expands its variables from `env`.
    pub(crate) fn resolve(
        &self,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(ServerConfig, Secrets), ClientError> {
        let bad = |reason: String| ClientError::Config {
            file: self.file.clone(),
            reason: format!("server `{}`: {reason}", self.name),
        };
        let mut secrets = Secrets::default();
        let mut expand = |field: &str, text: &str| -> Result<(String, Vec<String>), ClientError> {
            expand(text, env, &mut secrets).map_err(|e| bad(format!("`{field}`: {e}")))
        };
        let kind = match self.raw.get("type") {
            None => None,
            Some(Json::String(t)) => Some(t.as_str()),
            Some(other) => return Err(bad(format!("`type` must be a string, got `{other}`"))),
        };
        let string = |key: &str| -> Result<Option<&str>, ClientError> {
            match self.raw.get(key) {
                None => Ok(None),
                Some(Json::String(s)) => Ok(Some(s)),
                Some(other) => Err(bad(format!("`{key}` must be a string, got `{other}`"))),
            }
        };
        let strings = |key: &str| -> Result<Map<String, Json>, ClientError> {
            match self.raw.get(key) {
                None => Ok(Map::new()),
                Some(Json::Object(m)) if m.values().all(Json::is_string) => Ok(m.clone()),
                Some(_) => Err(bad(format!("`{key}` must be an object of strings"))),
            }
        };
        let transport = match (kind, string("command")?, string("url")?) {
            (None | Some("stdio"), Some(command), _) => {
                let args = match self.raw.get("args") {
                    None => Vec::new(),
                    Some(Json::Array(items)) => items
                        .iter()
                        .map(|a| {
                            a.as_str()
                                .ok_or_else(|| bad("`args` must be a list of strings".into()))
                        })
                        .collect::<Result<Vec<_>, _>>()?,
                    Some(_) => return Err(bad("`args` must be a list of strings".into())),
                };
                let command = expand("command", command)?.0;
                let args = args
                    .into_iter()
                    .map(|a| expand("args", a).map(|(v, _)| v))
                    .collect::<Result<Vec<_>, _>>()?;
                let mut vars = BTreeMap::new();
                for (k, v) in strings("env")? {
                    let value = expand("env", v.as_str().unwrap_or_default())?.0;
                    vars.insert(k, value);
                }
                Transport::Stdio {
                    command,
                    args,
                    env: vars,
                }
            }
            (None | Some("http"), None, Some(url)) => {
                let url = expand("url", url)?.0;
                let mut headers = Vec::new();
                for (k, v) in strings("headers")? {
                    let (value, from_vars) = expand("headers", v.as_str().unwrap_or_default())?;
                    headers.push(Header {
                        name: k,
                        value,
                        from_vars,
                    });
                }
                Transport::Http { url, headers }
            }
            (Some("sse"), _, _) => {
                return Err(bad(
                    "the deprecated `sse` transport is not supported; use `\"type\": \"http\"` (Streamable HTTP)"
                        .into(),
                ));
            }
            (Some(other), _, _) if !matches!(other, "stdio" | "http") => {
                return Err(bad(format!(
                    "unknown `type` `{other}`; use `stdio` (with `command`) or `http` (with `url`)"
                )));
            }
            _ => {
                return Err(bad(
                    "it needs either `command` (stdio) or `url` (with `\"type\": \"http\"`)".into(),
                ));
            }
        };
        Ok((
            ServerConfig {
                name: self.name.clone(),
                transport,
            },
            secrets,
        ))
    }
}

/// The variables of the environment `text` names (`${VAR}` or `${VAR:-default}`), read
/// from nothing: how a setting that must not reach into the environment (a project's) is
/// checked.
pub(crate) fn variables_named(text: &str) -> Vec<String> {
    let mut ignored = Secrets::default();
    expand(text, &|_| Some(String::new()), &mut ignored)
        .map(|(_, vars)| vars)
        .unwrap_or_default()
}

/// Expands `${VAR}` and `${VAR:-default}` in `text`; returns the text and the variables
/// that were read from the environment. A variable that is not set and has no default is
/// an error, as in Claude Code.
pub(crate) fn expand(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
    secrets: &mut Secrets,
) -> Result<(String, Vec<String>), String> {
    let mut out = String::with_capacity(text.len());
    let mut vars = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let body = &rest[at + 2..];
        let Some(end) = body.find('}') else {
            return Err(format!(
                "`${{` without a closing `}}` in `{text}`; write `${{VAR}}` or `${{VAR:-default}}`"
            ));
        };
        let inner = &body[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (inner, None),
        };
        if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!(
                "`${{{inner}}}` does not name a variable; write `${{VAR}}` or `${{VAR:-default}}`"
            ));
        }
        match (env(name), default) {
            (Some(value), _) => {
                secrets.add(name, &value);
                vars.push(name.to_string());
                out.push_str(&value);
            }
            (None, Some(default)) => out.push_str(default),
            (None, None) => {
                return Err(format!(
                    "variable `{name}` is not set; set it, or give a default with `${{{name}:-default}}`"
                ));
            }
        }
        rest = &body[end + 1..];
    }
    out.push_str(rest);
    Ok((out, vars))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("s3cr3t-value".into()),
            "SHORT" => Some("ab".into()),
            _ => None,
        }
    }

    #[test]
    fn expansion_with_defaults_and_secrets() {
        let mut secrets = Secrets::default();
        let (text, vars) = expand(
            "Bearer ${TOKEN} ${MISSING:-fallback} ${SHORT}",
            &env,
            &mut secrets,
        )
        .expect("expands");
        assert_eq!(text, "Bearer s3cr3t-value fallback ab");
        assert_eq!(vars, vec!["TOKEN", "SHORT"]);
        assert_eq!(
            secrets.redact("got s3cr3t-value and ab"),
            "got ${TOKEN} and ab"
        );
    }

    #[test]
    fn expansion_errors() {
        let mut s = Secrets::default();
        let missing = expand("${NOPE}", &env, &mut s).expect_err("unset");
        assert!(missing.contains("variable `NOPE` is not set"), "{missing}");
        let open = expand("${NOPE", &env, &mut s).expect_err("unclosed");
        assert!(open.contains("without a closing"), "{open}");
        let bad = expand("${a b}", &env, &mut s).expect_err("bad name");
        assert!(bad.contains("does not name a variable"), "{bad}");
    }
}
