//! The gateway's shared state, handed to every connection and request: the config (replaced
//! on reload), the control actor's handle, the gateway db, the event hub, the live
//! connections and their presence, sessions' own settings, and what the serve loop takes
//! requests for (drain, reload). The connection loop that uses it is in `connection`.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::control::ControlHandle;
use crate::events::{now_ms, EventHub};
use crate::gatewaydb::GatewayDb;

/// Most entries a `presence` event carries (the newest connections).
pub const PRESENCE_EVENT_MAX: usize = 64;

/// Shared gateway state handed to every connection.
pub struct Gateway {
    config: tokio::sync::watch::Sender<Arc<Config>>,
    pub control: ControlHandle,
    pub db: GatewayDb,
    pub hub: EventHub,
    pub started: Instant,
    pub connections: AtomicU64,
    pub(crate) next_conn: AtomicU64,
    /// Set when draining starts: no new runs are admitted.
    pub draining: AtomicBool,
    /// Cancelled when the gateway closes its listeners (after draining).
    pub stopping: CancellationToken,
    /// Every client connection's task: on stop the gateway waits for them to deliver their
    /// last answers and close.
    pub connection_tasks: tokio_util::task::TaskTracker,
    /// Agents whose crash-loop breaker tripped (from the control actor).
    pub failed: tokio::sync::watch::Receiver<crate::control::FailedAgents>,
    /// Operator drain requests (`gateway.drain`), handled by the serve loop.
    pub drain_requests: tokio::sync::mpsc::Sender<Duration>,
    /// `loopgate.reload`: to the serve loop, which reloads as on SIGHUP and answers.
    pub reload_requests: std::sync::OnceLock<
        tokio::sync::mpsc::Sender<tokio::sync::oneshot::Sender<ipc::gateway::ReloadResult>>,
    >,
    /// Names of the environment variables that are set and not empty (never their values):
    /// whether a provider's key is present.
    pub env_set: std::collections::HashSet<String>,
    /// Live authenticated connections, by connection id (`system-presence`).
    present: std::sync::Mutex<std::collections::BTreeMap<String, ipc::gateway::PresenceEntry>>,
    /// Signs the Control UI's media tickets (`control_ui::media`); random per process.
    pub media_key: [u8; 32],
    /// Live connections of proven devices (a revoked or rotated token closes them).
    pub(crate) device_conns: crate::device_conns::DeviceConns,
    /// The gateway's own presence entry (first in every presence list).
    self_presence: ipc::gateway::PresenceEntry,
    /// Sessions' own settings (from `sessions.patch`), by session key: the gateway db's,
    /// loaded at start and kept in step by every change.
    session_overrides: std::sync::Mutex<std::collections::HashMap<String, SessionOverrides>>,
    pub metrics: crate::metrics::Metrics,
    /// Bytes of large request frames being parsed, over all connections
    /// (`connection::budget`).
    pub parse_budget: crate::connection::budget::ParseBudget,
    /// What differs between a single gateway and a cluster member (`backend`).
    pub backend: crate::backend::Backend,
}

/// 32 random bytes (two v4 UUIDs' randomness, from the OS).
fn random_key() -> [u8; 32] {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
}

impl Gateway {
    pub fn new(
        config: Arc<Config>,
        control: ControlHandle,
        db: GatewayDb,
        hub: EventHub,
        started: Instant,
        failed: tokio::sync::watch::Receiver<crate::control::FailedAgents>,
        drain_requests: tokio::sync::mpsc::Sender<Duration>,
    ) -> Self {
        Self {
            config: tokio::sync::watch::Sender::new(config),
            control,
            db,
            hub,
            started,
            connections: AtomicU64::new(0),
            next_conn: AtomicU64::new(1),
            draining: AtomicBool::new(false),
            stopping: CancellationToken::new(),
            connection_tasks: tokio_util::task::TaskTracker::new(),
            failed,
            drain_requests,
            reload_requests: std::sync::OnceLock::new(),
            env_set: std::collections::HashSet::new(),
            present: std::sync::Mutex::new(std::collections::BTreeMap::new()),
            device_conns: crate::device_conns::DeviceConns::default(),
            media_key: random_key(),
            self_presence: self_presence(),
            session_overrides: std::sync::Mutex::new(std::collections::HashMap::new()),
            metrics: crate::metrics::Metrics::new(),
            parse_budget: crate::connection::budget::ParseBudget::global(),
            backend: Default::default(),
        }
    }

    /// The session's own settings (all `None`: it has none).
    pub fn session_overrides(&self, session_key: &str) -> SessionOverrides {
        let all = self
            .session_overrides
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        all.get(session_key).cloned().unwrap_or_default()
    }

    /// The session's own model, if it has one.
    pub fn session_model(&self, session_key: &str) -> Option<String> {
        self.session_overrides(session_key).model
    }

    /// Changes the session's own settings with `f` (an entry left empty is dropped).
    pub fn update_session_overrides(
        &self,
        session_key: &str,
        f: impl FnOnce(&mut SessionOverrides),
    ) {
        let mut all = self
            .session_overrides
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let entry = all.entry(session_key.to_owned()).or_default();
        f(entry);
        if *entry == SessionOverrides::default() {
            all.remove(session_key);
        }
    }

    /// Sets (`Some`) or clears the session's own model.
    pub fn set_session_model(&self, session_key: &str, model: Option<String>) {
        self.update_session_overrides(session_key, |o| o.model = model);
    }

    /// Forgets every setting of a deleted session.
    pub fn clear_session_overrides(&self, session_key: &str) {
        self.update_session_overrides(session_key, |o| *o = SessionOverrides::default());
    }

    /// Devices with a connection open now.
    pub fn connected_devices(&self) -> std::collections::HashSet<String> {
        self.device_conns.devices()
    }

    /// The gateway's own entry, then the live connections, oldest first.
    pub fn presence(&self) -> Vec<ipc::gateway::PresenceEntry> {
        let present = self.present.lock().unwrap_or_else(|p| p.into_inner());
        let mut list: Vec<_> = Vec::with_capacity(present.len() + 1);
        // The gateway's own entry is as of now, as OpenClaw's (clients show its age).
        list.push(ipc::gateway::PresenceEntry {
            ts: now_ms(),
            ..self.self_presence.clone()
        });
        let mut clients: Vec<_> = present.values().cloned().collect();
        clients.sort_by_key(|e| e.online_since);
        list.extend(clients);
        list
    }

    /// A connection arrived (`Some`) or left (`None`); every client hears the new list (its
    /// newest [`PRESENCE_EVENT_MAX`] entries).
    pub(crate) fn set_presence(&self, conn_id: &str, entry: Option<ipc::gateway::PresenceEntry>) {
        {
            let mut present = self.present.lock().unwrap_or_else(|p| p.into_inner());
            match entry {
                Some(e) => present.insert(conn_id.to_owned(), e),
                None => present.remove(conn_id),
            };
        }
        // Every client hears every change, so the event is bounded: with many connections a
        // connect would otherwise queue the whole list on each of them (`system-presence`
        // still answers all of it).
        let mut presence = self.presence();
        // The gateway's own entry stays first; the oldest clients go.
        let excess = presence.len().saturating_sub(PRESENCE_EVENT_MAX);
        presence.drain(1..1 + excess);
        let ev = ipc::gateway::PresenceEvent { presence };
        self.hub
            .publish_deferred(&crate::events::Deferred::presence(&ev));
    }

    /// The backend the gateway's requests ask (`backend`).
    pub fn with_backend(mut self, backend: crate::backend::Backend) -> Self {
        self.backend = backend;
        self
    }

    pub fn with_metrics(mut self, metrics: crate::metrics::Metrics) -> Self {
        self.metrics = metrics;
        self
    }

    pub fn with_env(mut self, env: &std::collections::HashMap<String, String>) -> Self {
        self.env_set = env
            .iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, _)| k.clone())
            .collect();
        self
    }

    /// The current config (replaced on reload).
    pub fn config(&self) -> Arc<Config> {
        self.config.borrow().clone()
    }

    pub fn set_config(&self, config: Arc<Config>) {
        self.config.send_replace(config);
    }
}

/// A session's own settings from `sessions.patch`: its model (`<provider>/<model>`),
/// thinking level, reasoning visibility (canonical names) and queue mode. `None`: the
/// agent's (the config's queue mode).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SessionOverrides {
    pub model: Option<String>,
    pub thinking: Option<String>,
    pub reasoning: Option<String>,
    /// What the session's messages do while it is busy (R-B3).
    pub queue_mode: Option<ipc::queue::QueueMode>,
    /// How much of their tool work its runs' replies tell (R-B1).
    pub verbose: Option<ipc::thinking::VerboseLevel>,
}

/// The gateway's presence entry, as OpenClaw's: host, version, platform, `mode: "gateway"`,
/// `reason: "self"` and a per-process instance id.
fn self_presence() -> ipc::gateway::PresenceEntry {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    let version = env!("CARGO_PKG_VERSION");
    ipc::gateway::PresenceEntry {
        ts: now_ms(),
        text: Some(format!(
            "Gateway: {host} · app {version} · mode gateway · reason self"
        )),
        host: Some(host),
        client_id: None,
        mode: "gateway".into(),
        version: version.into(),
        platform: std::env::consts::OS.into(),
        instance_id: Some(uuid::Uuid::new_v4().to_string()),
        device_family: None,
        roles: Vec::new(),
        scopes: Vec::new(),
        reason: "self".into(),
        online_since: None,
        device_id: None,
    }
}
