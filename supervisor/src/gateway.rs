//! The gateway's shared state, handed to every connection and request, as parts: the config
//! (replaced on reload), the control actor's handle, the gateway db, the event hub, who is
//! connected ([`Presence`]), sessions' own settings ([`SessionSettings`]), live device
//! connections, the run backend, and what the serve loop takes requests for (drain,
//! reload). Code that needs one part is handed that part. The connection loop that uses it
//! is in `connection`.

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::control::ControlHandle;
use crate::events::EventHub;
use crate::gatewaydb::GatewayDb;
use crate::presence::Presence;
use crate::session_settings::SessionSettings;

/// Where `loopgate.reload`, `config.patch` and `config.apply` ask the serve loop to reload
/// or write the config file (set once the serve loop takes them; it does one at a time).
pub type ReloadRequests = std::sync::OnceLock<tokio::sync::mpsc::Sender<ConfigRequest>>;

/// What the serve loop does with the config file for an operator, with the sender of its
/// answer.
pub enum ConfigRequest {
    /// `loopgate.reload`: load the file again, as SIGHUP does.
    Reload(tokio::sync::oneshot::Sender<ipc::gateway::ReloadResult>),
    /// `config.patch` / `config.apply`: write the file, then reload.
    Write(
        ConfigWrite,
        tokio::sync::oneshot::Sender<
            Result<ipc::gateway::ConfigWriteResult, ipc::gateway::ErrorShape>,
        >,
    ),
}

/// A write of the config file an operator asks for.
pub enum ConfigWrite {
    Patch(ipc::gateway::ConfigPatchParams),
    Apply(ipc::gateway::ConfigApplyParams),
    Set(ipc::gateway::ConfigSetParams),
    /// The gateway's own change for an operator's request (`agents.create`, `agents.update`):
    /// a merge patch over the file as it is now (no `baseHash`: the serve loop reads and
    /// writes it in one step).
    Merge {
        patch: serde_json::Map<String, serde_json::Value>,
        note: String,
    },
}

impl ConfigWrite {
    /// How long to wait before a restart the write needs (the client's `restartDelayMs`,
    /// capped).
    pub fn restart_delay(&self) -> std::time::Duration {
        let ms = match self {
            ConfigWrite::Patch(p) => p.restart_delay_ms,
            ConfigWrite::Apply(p) => p.restart_delay_ms,
            ConfigWrite::Set(_) | ConfigWrite::Merge { .. } => None,
        };
        let ms = ms.unwrap_or(0).min(ipc::gateway::MAX_RESTART_DELAY_MS);
        std::time::Duration::from_millis(ms)
    }
}

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
    pub reload_requests: ReloadRequests,
    /// Names of the environment variables that are set and not empty (never their values):
    /// whether a provider's key is present.
    pub env_set: std::collections::HashSet<String>,
    /// Who is connected (`system-presence`, the `presence` event).
    pub presence: Presence,
    /// Signs the Control UI's media tickets (`control_ui::media`); random per process.
    pub media_key: [u8; 32],
    /// Live connections of proven devices (a revoked or rotated token closes them).
    pub(crate) device_conns: crate::device_conns::DeviceConns,
    /// Sessions' own settings (from `sessions.patch`).
    pub sessions: SessionSettings,
    pub metrics: crate::metrics::Metrics,
    /// Bytes of large request frames being parsed, over all connections
    /// (`connection::budget`).
    pub parse_budget: crate::connection::budget::ParseBudget,
    /// What differs between a single gateway and a cluster member (`backend`).
    pub backend: crate::backend::Backend,
    /// The scheduler's jobs (`cron.*`; fired by `rpc::cron`).
    pub cron: crate::cron::jobs::Jobs,
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
            presence: Presence::new(hub.clone()),
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
            device_conns: crate::device_conns::DeviceConns::default(),
            media_key: crate::secrets::random_key(),
            sessions: SessionSettings::default(),
            metrics: crate::metrics::Metrics::new(),
            parse_budget: crate::connection::budget::ParseBudget::global(),
            backend: Default::default(),
            cron: Default::default(),
        }
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
