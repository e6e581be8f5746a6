//! The client's pool ([`Inner`]): the servers and policy of a project, read once, and a
//! connection per server ([`Conn`]), opened on first use and reused while it lives.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, Tool};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient};

use super::approval;
use super::config::{self, Secrets, ServerConfig};
use super::error::ClientError;
use super::http;
use super::policy::Policy;

/// The servers and policy of a project, read once.
pub(super) struct Loaded {
    pub(super) servers: BTreeMap<String, Result<ServerConfig, ClientError>>,
    pub(super) policy: Policy,
    pub(super) secrets: Secrets,
    /// The servers of the project's `.mcp.json` the person has not approved, with that
    /// file: never contacted ([`approval`]).
    pub(super) unapproved: BTreeMap<String, PathBuf>,
}

/// The client's handler: notes `notifications/tools/list_changed` so the cached tool list
/// is fetched again before the next call.
#[derive(Clone)]
pub(super) struct Handler {
    pub(super) stale: Arc<AtomicBool>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("mekara", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::SeqCst);
    }
}

/// An open connection.
pub(super) struct Conn {
    pub(super) service: RunningService<RoleClient, Handler>,
    pub(super) stale: Arc<AtomicBool>,
    pub(super) tools: tokio::sync::Mutex<Option<Arc<Vec<Tool>>>>,
    /// For HTTP servers: where a 401/403 is noted, and the headers sent.
    pub(super) auth: Option<(http::AuthFailure, Vec<config::Header>)>,
}

pub(super) type Slot = Arc<tokio::sync::Mutex<Option<Arc<Conn>>>>;

pub(super) struct Inner {
    pub(super) root: Option<PathBuf>,
    pub(super) home: Option<PathBuf>,
    /// The person said to contact the project's `.mcp.json` servers (`mekara tools
    /// --trust`), approved or not.
    pub(super) trusted: bool,
    pub(super) loaded: OnceLock<Result<Loaded, ClientError>>,
    pub(super) slots: Mutex<HashMap<String, Slot>>,
}

impl Inner {
    pub(super) fn loaded(&self) -> Result<&Loaded, ClientError> {
        self.loaded
            .get_or_init(|| {
                let decls = config::discover(self.root.as_deref(), self.home.as_deref())?;
                let policy = Policy::load(self.root.as_deref())?;
                let env = |name: &str| std::env::var(name).ok();
                let mut secrets = Secrets::default();
                let mut servers = BTreeMap::new();
                let mut unapproved = BTreeMap::new();
                for decl in decls {
                    if let Some(root) = &self.root
                        && decl.file == root.join(".mcp.json")
                        && !self.trusted
                        && !approval::approved(root, self.home.as_deref(), &decl.name)
                    {
                        unapproved.insert(decl.name.clone(), decl.file.clone());
                    }
                    let resolved = decl.resolve(&env).map(|(config, s)| {
                        secrets.extend(&s);
                        config
                    });
                    servers.insert(decl.name.clone(), resolved);
                }
                Ok(Loaded {
                    servers,
                    policy,
                    secrets,
                    unapproved,
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    pub(super) fn config(&self, name: &str) -> Result<(&ServerConfig, &Policy), ClientError> {
        let loaded = self.loaded()?;
        match loaded.servers.get(name) {
            None => Err(ClientError::UnknownServer {
                name: name.to_string(),
                known: loaded.servers.keys().cloned().collect(),
            }),
            Some(Err(e)) => Err(e.clone()),
            Some(Ok(config)) => {
                loaded
                    .policy
                    .check_server(name)
                    .map_err(|r| ClientError::Refused(r.0))?;
                if let Some(file) = loaded.unapproved.get(name) {
                    return Err(ClientError::NotApproved {
                        server: name.to_string(),
                        file: file.clone(),
                    });
                }
                Ok((config, &loaded.policy))
            }
        }
    }

    fn slot(&self, name: &str) -> Slot {
        let mut slots = self
            .slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        slots.entry(name.to_string()).or_default().clone()
    }

    /// The open connection to `name`, opened now if there is none (or it closed).
    pub(super) async fn conn(&self, name: &str) -> Result<Arc<Conn>, ClientError> {
        let (config, policy) = self.config(name)?;
        let slot = self.slot(name);
        let mut guard = slot.lock().await;
        if let Some(conn) = guard.as_ref()
            && !conn.service.is_closed()
        {
            return Ok(conn.clone());
        }
        let conn = Arc::new(self.connect(config, policy).await?);
        *guard = Some(conn.clone());
        Ok(conn)
    }

    /// Forgets the connection to `name` (it broke); the next call opens a new one.
    pub(super) async fn drop_conn(&self, name: &str) {
        let slot = self.slot(name);
        let old = slot.lock().await.take();
        if let Some(conn) = old
            && let Ok(conn) = Arc::try_unwrap(conn)
        {
            let _ = conn.service.cancel().await;
        }
    }
}
