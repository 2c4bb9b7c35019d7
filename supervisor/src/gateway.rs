//! Gateway protocol v4 connections, independent of transport.
//!
//! A transport (the unix socket today, WebSocket later) turns its byte stream into
//! [`Inbound`] items through a [`FrameSource`] and writes [`Outbound`] items; this module runs
//! the protocol: the `connect.challenge` / `connect` / `hello-ok` handshake under a deadline
//! and a pre-auth frame cap, then request dispatch (one task per request, bounded per
//! connection) and event forwarding with a per-connection envelope `seq`.
//!
//! Backpressure (invariant 5): outbound frames go through a bounded queue; events are offered
//! without waiting and a connection whose queued bytes pass `MAX_BUFFERED_BYTES`, or that falls
//! behind the event hub, is closed as a slow consumer.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::gateway::{
    self as gw, ErrorShape, EventFrame, FrameError, ResponseFrame, HANDSHAKE_TIMEOUT_MS,
    MAX_PAYLOAD_BYTES, MAX_PREAUTH_PAYLOAD_BYTES,
};
use serde_json::{json, Value};
use tokio::sync::{broadcast, mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::control::ControlHandle;
use crate::events::{now_ms, EventHub, HubEvent};
use crate::gatewaydb::GatewayDb;

/// Session operations one connection may have in flight.
pub const SESSION_OPS_PER_CONN: usize = 8;
/// Frames queued per connection (responses and events).
const OUTBOUND_QUEUE: usize = 65_536;
/// Requests one connection may have in progress at once.
const MAX_REQUESTS_PER_CONN: usize = 1024;
/// When the gateway stops, how long a connection waits for its requests' answers (waits are
/// cut short by the stop, so this is normally instant) before it closes.
const STOP_ANSWER_GRACE: Duration = Duration::from_secs(2);

/// Operator scopes.
pub mod scopes {
    pub const ADMIN: &str = "operator.admin";
    pub const READ: &str = "operator.read";
    pub const WRITE: &str = "operator.write";
    /// Device tokens (`device.*`).
    pub const PAIRING: &str = "operator.pairing";
    /// Approval queues.
    pub const APPROVALS: &str = "operator.approvals";
}

/// Shared gateway state handed to every connection.
/// Most entries a `presence` event carries (the newest connections).
pub const PRESENCE_EVENT_MAX: usize = 64;

pub struct Gateway {
    config: tokio::sync::watch::Sender<Arc<Config>>,
    pub control: ControlHandle,
    pub db: GatewayDb,
    pub hub: EventHub,
    pub started: Instant,
    pub connections: AtomicU64,
    next_conn: AtomicU64,
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
    /// Live connections of proven devices (a revoked or rotated token closes them).
    pub(crate) device_conns: crate::device_conns::DeviceConns,
    /// The gateway's own presence entry (first in every presence list).
    self_presence: ipc::gateway::PresenceEntry,
    /// Sessions' own settings (from `sessions.patch`), by session key: the gateway db's,
    /// loaded at start and kept in step by every change.
    session_overrides: std::sync::Mutex<std::collections::HashMap<String, SessionOverrides>>,
    pub metrics: crate::metrics::Metrics,
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
            self_presence: self_presence(),
            session_overrides: std::sync::Mutex::new(std::collections::HashMap::new()),
            metrics: crate::metrics::Metrics::new(),
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

    /// Closes every connection of `device_id` (4001 `device removed`, as OpenClaw); returns
    /// how many.
    pub async fn close_device(&self, device_id: &str) -> usize {
        let outs = self.device_conns.sweep(device_id);
        for o in &outs {
            o.close(4001, "device removed").await;
        }
        outs.len()
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
    fn set_presence(&self, conn_id: &str, entry: Option<ipc::gateway::PresenceEntry>) {
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

    /// Records which environment variables are set (their names only).
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

/// Which transport a connection arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// The local unix socket: the peer is trusted by file mode and uid; errors on garbage
    /// input are always answered (there is no close code to carry them).
    Unix,
    /// WebSocket: token / device authentication; refusals follow OpenClaw's close codes.
    WebSocket(crate::auth::Peer),
}

/// One inbound unit from a transport.
#[derive(Debug)]
pub enum Inbound {
    Text(String),
    /// A frame over the current cap; the transport has discarded it.
    TooLarge,
    Closed,
}

/// Reads frames from a transport.
pub trait FrameSource: Send {
    fn next(&mut self) -> impl std::future::Future<Output = Inbound> + Send;
    /// Changes the largest accepted frame (raised after `connect`).
    fn set_max_frame(&mut self, max: usize);
}

/// One outbound unit for a transport's writer.
#[derive(Debug)]
pub enum Outbound {
    Frame(String),
    /// An event with this connection's envelope `seq`.
    Event(Arc<HubEvent>, u64),
    /// Close the connection (`code` is a WebSocket close code; reason is sent where possible).
    Close {
        code: u16,
        reason: String,
    },
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

/// Writes frames for one connection; counts queued bytes for the slow-consumer cap.
#[derive(Clone)]
pub struct Out {
    tx: mpsc::Sender<Outbound>,
    queued: Arc<AtomicUsize>,
    /// `gateway.max_buffered_bytes`, set when the connection starts (responses count too).
    cap: Arc<AtomicUsize>,
    /// Session operations (`chat.history`, resets) this connection may have at its workers at
    /// once: one client cannot queue a thousand reads ahead of every turn's prompt.
    pub session_ops: Arc<Semaphore>,
    /// Cancelled by the transport's writer once it has closed the connection.
    pub closed: CancellationToken,
    /// Cancelled to drop a slow consumer at once: the writer discards what is queued, tries
    /// to send the close frame briefly and ends the connection.
    pub kill: CancellationToken,
    /// The `hub_seq` of the last hub event this connection's forwarder has handled (queued
    /// or skipped); `u64::MAX` once it has stopped.
    forwarded: Arc<tokio::sync::watch::Sender<u64>>,
    /// The `hub_seq` before this connection's first event: it gets every later one live
    /// (what `agent.events` replays ends here).
    pub hub_start: Arc<std::sync::atomic::AtomicU64>,
    /// Set by `sessions.subscribe`: this connection gets `sessions.changed` events (until it
    /// closes, as OpenClaw's subscriptions).
    pub sessions_subscribed: Arc<AtomicBool>,
    /// Sessions this connection asked for with `sessions.messages.subscribe` (bounded).
    pub message_keys: Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    /// Held from the connection's first session subscription on: the hub builds session
    /// events only while someone watches.
    session_watch: Arc<std::sync::Mutex<Option<crate::events::SessionWatch>>>,
}

impl Out {
    pub fn new() -> (Out, mpsc::Receiver<Outbound>, Arc<AtomicUsize>) {
        let (tx, rx) = mpsc::channel(OUTBOUND_QUEUE);
        let queued = Arc::new(AtomicUsize::new(0));
        let out = Out {
            tx,
            queued: queued.clone(),
            cap: Arc::new(AtomicUsize::new(usize::MAX)),
            session_ops: Arc::new(Semaphore::new(SESSION_OPS_PER_CONN)),
            closed: CancellationToken::new(),
            kill: CancellationToken::new(),
            forwarded: Arc::new(tokio::sync::watch::Sender::new(0)),
            hub_start: Arc::default(),
            sessions_subscribed: Arc::new(AtomicBool::new(false)),
            message_keys: Arc::new(std::sync::Mutex::new(std::collections::BTreeSet::new())),
            session_watch: Arc::new(std::sync::Mutex::new(None)),
        };
        (out, rx, queued)
    }

    /// Waits until every hub event up to `hub_seq` is queued on this connection (or skipped
    /// for it), so a response queued next follows them; returns at once if it is closing.
    /// The final `agent` response and `agent.wait` answers wait on the hub position read
    /// after their outcome was published, so a run's terminal events always come first.
    pub async fn after_events(&self, hub_seq: u64) {
        let mut seen = self.forwarded.subscribe();
        tokio::select! {
            _ = seen.wait_for(|&n| n >= hub_seq) => {}
            _ = self.closed.cancelled() => {}
            _ = self.kill.cancelled() => {}
        }
    }

    /// This connection watches sessions from now on (see [`EventHub::watch_sessions`]).
    pub fn watch_sessions(&self, hub: &EventHub) {
        let mut w = self.session_watch.lock().unwrap_or_else(|p| p.into_inner());
        if w.is_none() {
            *w = Some(hub.watch_sessions());
        }
    }

    pub fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
    }

    /// Queues a response. Responses count against the buffer cap like events: a client that
    /// does not read its answers is closed as a slow consumer once they pass the cap (one
    /// answer larger than the cap still goes to a client that has nothing else queued).
    pub async fn res<F: serde::Serialize>(&self, frame: &F) {
        let text = serde_json::to_string(frame).unwrap_or_default();
        let queued = self.queued.load(Ordering::Relaxed);
        if queued > 0 && queued + text.len() > self.cap.load(Ordering::Relaxed) {
            self.drop_slow_consumer();
            return;
        }
        self.queued.fetch_add(text.len(), Ordering::Relaxed);
        let _ = self.tx.send(Outbound::Frame(text)).await;
    }

    pub async fn ok(&self, id: &str, payload: Value) {
        self.res(&ResponseFrame::ok(id, payload)).await;
    }

    /// Answers `id` with a typed payload (`{type: "res", id, ok: true, payload}`).
    pub async fn ok_with<P: serde::Serialize>(&self, id: &str, payload: &P) {
        #[derive(serde::Serialize)]
        struct Ok<'a, P> {
            #[serde(rename = "type")]
            kind: &'static str,
            id: &'a str,
            ok: bool,
            payload: &'a P,
        }
        self.res(&Ok {
            kind: "res",
            id,
            ok: true,
            payload,
        })
        .await;
    }

    pub async fn err(&self, id: &str, error: ErrorShape) {
        self.res(&ResponseFrame::err(id, error)).await;
    }

    async fn event_unsequenced(&self, frame: &EventFrame) {
        let text = serde_json::to_string(frame).unwrap_or_default();
        let _ = self.tx.send(Outbound::Frame(text)).await;
    }

    pub async fn close(&self, code: u16, reason: &str) {
        let _ = self
            .tx
            .send(Outbound::Close {
                code,
                reason: reason.to_owned(),
            })
            .await;
    }

    fn drop_slow_consumer(&self) {
        // Logged once per connection, however many answers were still on their way.
        if !self.kill.is_cancelled() {
            crate::metrics::SLOW_CONSUMERS.fetch_add(1, Ordering::Relaxed);
            tracing::info!(
                queued_bytes = self.queued.load(Ordering::Relaxed),
                "Dropping a slow consumer."
            );
        }
        self.kill.cancel();
    }

    /// Offers an event without waiting, numbering it with this connection's next `seq`.
    /// Over the buffer cap a drop-if-slow event is skipped (its `seq` is consumed, so the
    /// client sees the gap) and any other event closes the connection as a slow consumer.
    /// Returns `false` once the connection is being closed.
    fn offer_event(&self, ev: Arc<HubEvent>, seq: &mut u64, cap: usize) -> bool {
        *seq += 1;
        let len = ev.payload.len() + 64;
        if self.queued.load(Ordering::Relaxed) + len > cap {
            if ev.drop_if_slow {
                return true;
            }
            self.drop_slow_consumer();
            return false;
        }
        self.queued.fetch_add(len, Ordering::Relaxed);
        match self.tx.try_send(Outbound::Event(ev, *seq)) {
            Ok(()) => true,
            Err(mpsc::error::TrySendError::Full(_)) => {
                self.drop_slow_consumer();
                false
            }
            Err(mpsc::error::TrySendError::Closed(_)) => false,
        }
    }
}

/// Renders an outbound item as text and updates the queued-bytes count. `None` for `Close`.
pub fn render(item: &Outbound, queued: &AtomicUsize) -> Option<String> {
    let sub = |n: usize| {
        let _ = queued.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |q| {
            Some(q.saturating_sub(n))
        });
    };
    match item {
        Outbound::Frame(text) => {
            sub(text.len());
            Some(text.clone())
        }
        Outbound::Event(ev, seq) => {
            sub(ev.payload.len() + 64);
            Some(format!(
                r#"{{"type":"event","event":"{}","payload":{},"seq":{}}}"#,
                ev.event, ev.payload, seq
            ))
        }
        Outbound::Close { .. } => None,
    }
}

/// What the handshake established.
#[derive(Debug, Clone)]
pub struct Session {
    pub conn_id: String,
    pub scopes: Vec<String>,
    pub caps: Vec<String>,
    pub transport: Transport,
    /// The device that proved its identity, if any.
    pub device_id: Option<String>,
    /// How it shows in `system-presence`.
    pub presence: ipc::gateway::PresenceEntry,
}

impl Session {
    pub fn has_scope(&self, needed: &str) -> bool {
        ScopeSet::holds(&self.scopes, needed)
    }
}

/// A connection's scopes, for the event forwarder.
struct ScopeSet(Vec<String>);

impl ScopeSet {
    fn holds(scopes: &[String], needed: &str) -> bool {
        scopes.iter().any(|s| {
            s == scopes::ADMIN || s == needed || (s == scopes::WRITE && needed == scopes::READ)
        })
    }

    fn has_scope(&self, needed: &str) -> bool {
        Self::holds(&self.0, needed)
    }
}

struct PresenceGuard<'a> {
    gw: &'a Gateway,
    conn_id: &'a str,
}

impl Drop for PresenceGuard<'_> {
    fn drop(&mut self) {
        self.gw.set_presence(self.conn_id, None);
        self.gw.device_conns.remove(self.conn_id);
    }
}

struct ConnGuard<'a>(&'a AtomicU64);
impl Drop for ConnGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Runs one connection until it closes.
pub async fn serve_connection<S: FrameSource>(
    gw: Arc<Gateway>,
    transport: Transport,
    mut source: S,
    out: Out,
) {
    gw.connections.fetch_add(1, Ordering::Relaxed);
    let _guard = ConnGuard(&gw.connections);
    out.set_cap(gw.config().gateway.max_buffered_bytes);
    let unix = transport == Transport::Unix;
    let conn_id = format!("c{}", gw.next_conn.fetch_add(1, Ordering::Relaxed));
    let nonce = uuid::Uuid::new_v4().to_string();
    out.event_unsequenced(&EventFrame::new(
        gw::events::CONNECT_CHALLENGE,
        json!({"nonce": nonce, "ts": now_ms(), "capabilities": []}),
        None,
    ))
    .await;

    let first = tokio::select! {
        r = tokio::time::timeout(Duration::from_millis(HANDSHAKE_TIMEOUT_MS), source.next()) => r,
        _ = gw.stopping.cancelled() => {
            out.err("", ErrorShape::unavailable("connect unavailable during gateway restart", Some(1000))).await;
            out.close(1013, "gateway stopping").await;
            return;
        }
    };
    let text = match first {
        Err(_) => {
            out.close(1008, "handshake timeout").await;
            return;
        }
        Ok(Inbound::Closed) => return,
        Ok(Inbound::TooLarge) => {
            if unix {
                out.err(
                    "",
                    ErrorShape::invalid(format!(
                        "preauth payload too large: frames before connect are limited to {MAX_PREAUTH_PAYLOAD_BYTES} bytes"
                    )),
                )
                .await;
            }
            out.close(1009, "").await;
            return;
        }
        Ok(Inbound::Text(t)) => t,
    };
    let session = match crate::handshake::handshake(&gw, transport, &conn_id, &nonce, &text).await {
        Ok(crate::handshake::Accepted {
            id,
            hello,
            session,
            token_checked_at,
        }) => {
            // Registered before `hello-ok` goes out, so a revoke's sweep from now on sees it.
            if let Some(device) = &session.device_id {
                if !gw
                    .device_conns
                    .register(&conn_id, device, &out, token_checked_at)
                {
                    tracing::info!(
                        conn = conn_id.as_str(),
                        "Refused a connect: its device's tokens changed during the handshake."
                    );
                    out.err(
                        &id,
                        ErrorShape::unavailable(
                            "device tokens changed during connect; connect again",
                            Some(0),
                        ),
                    )
                    .await;
                    out.close(1013, "device tokens changed").await;
                    return;
                }
            }
            out.ok_with(&id, &hello).await;
            gw.set_presence(&conn_id, Some(session.presence.clone()));
            session
        }
        Err(refusal) => {
            let crate::handshake::Refused {
                id,
                error,
                code,
                reason,
                answer,
            } = *refusal;
            if answer || unix {
                out.err(&id.unwrap_or_default(), error).await;
            }
            out.close(code, &reason).await;
            return;
        }
    };
    // Leaves the presence list however the connection ends (closed, dropped at shutdown).
    let _present = PresenceGuard {
        gw: &gw,
        conn_id: &conn_id,
    };
    source.set_max_frame(MAX_PAYLOAD_BYTES);
    tracing::debug!(conn = conn_id.as_str(), ?transport, scopes = ?session.scopes, "Client connected.");

    let forwarder = {
        let (mut events, start) = gw.hub.subscribe();
        out.forwarded.send_replace(start);
        out.hub_start.store(start, Ordering::Relaxed);
        let out = out.clone();
        let read = session.has_scope(scopes::READ);
        let caps = session.caps.clone();
        let scope_of = ScopeSet(session.scopes.clone());
        // A client with this capability hears run events only of the sessions it follows.
        let scoped = caps.iter().any(|c| c == gw::SESSION_SCOPED_EVENTS_CAP);
        let cap = gw.config().gateway.max_buffered_bytes;
        tokio::spawn(async move {
            let mut seq = 0u64;
            loop {
                match events.recv().await {
                    Ok(ev) => {
                        let hub_seq = ev.hub_seq;
                        let needs_read =
                            ev.event == gw::events::AGENT || ev.event == gw::events::CHAT;
                        let follows = |key: &str| {
                            out.message_keys
                                .lock()
                                .map(|k| k.contains(key))
                                .unwrap_or(false)
                        };
                        let wanted = (!needs_read || read)
                            && ev.cap.is_none_or(|c| caps.iter().any(|have| have == c))
                            && ev.scope.is_none_or(|s| scope_of.has_scope(s))
                            && (!ev.subscribers_only
                                || out.sessions_subscribed.load(Ordering::Relaxed))
                            && ev.session.as_deref().is_none_or(|key| {
                                out.sessions_subscribed.load(Ordering::Relaxed) || follows(key)
                            })
                            && (!scoped || ev.run_session.as_deref().is_none_or(follows));
                        if wanted && !out.offer_event(ev, &mut seq, cap) {
                            break;
                        }
                        out.forwarded.send_replace(hub_seq);
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        out.drop_slow_consumer();
                        break;
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                }
            }
            // Nothing more will be forwarded: nobody waits for it.
            out.forwarded.send_replace(u64::MAX);
        })
    };
    let limit = Arc::new(Semaphore::new(MAX_REQUESTS_PER_CONN));
    let session = Arc::new(session);
    // The admission order of this connection's turn requests (see `rpc::AdmissionTurn`).
    let mut last_turn: Option<tokio::sync::oneshot::Receiver<()>> = None;
    loop {
        let item = tokio::select! {
            item = source.next() => item,
            _ = out.closed.cancelled() => break,
            _ = gw.stopping.cancelled() => {
                // Read nothing more; let the requests in flight answer (their waits are cut
                // short by the stop), then close after those answers.
                let _ = tokio::time::timeout(
                    STOP_ANSWER_GRACE,
                    limit.acquire_many(MAX_REQUESTS_PER_CONN as u32),
                )
                .await;
                out.close(1012, "gateway stopping").await;
                break;
            }
        };
        match item {
            Inbound::Closed => break,
            Inbound::TooLarge => {
                if unix {
                    out.err(
                        "",
                        ErrorShape::invalid(format!(
                            "payload too large: frames are limited to {MAX_PAYLOAD_BYTES} bytes"
                        )),
                    )
                    .await;
                }
                out.close(1009, "payload too large").await;
                break;
            }
            Inbound::Text(text) => match gw::parse_request(&text) {
                Ok(None) => {}
                Ok(Some(req)) => {
                    let Ok(permit) = limit.clone().try_acquire_owned() else {
                        out.err(
                            &req.id,
                            ErrorShape::unavailable(
                                "The server is busy. Please try again in a moment.",
                                Some(100),
                            ),
                        )
                        .await;
                        continue;
                    };
                    let turn = crate::rpc::is_ordered(&req.method).then(|| {
                        let (turn, next) = crate::rpc::AdmissionTurn::after(last_turn.take());
                        last_turn = Some(next);
                        turn
                    });
                    let (gw, out, session) = (gw.clone(), out.clone(), session.clone());
                    tokio::spawn(async move {
                        crate::rpc::handle(&gw, &session, req, &out, turn).await;
                        drop(permit);
                    });
                }
                // Over WebSocket, non-JSON text after connect is ignored (as OpenClaw does).
                Err(FrameError::NotJson(_)) if !unix => {}
                Err(FrameError::NotJson(e)) => {
                    out.err(
                        "",
                        ErrorShape::invalid(format!("invalid request frame: not JSON ({e})")),
                    )
                    .await;
                }
                Err(FrameError::Invalid { id, reason }) => {
                    out.err(
                        id.as_deref().unwrap_or(""),
                        ErrorShape::invalid(format!("invalid request frame: {reason}")),
                    )
                    .await;
                }
            },
        }
    }
    forwarder.abort();
    // The aborted forwarder cannot say it stopped: say it for it, or a request still waiting
    // to answer after its run's events (`after_events`) would wait for good, and with it the
    // connection's writer and socket.
    out.forwarded.send_replace(u64::MAX);
    tracing::debug!(conn = conn_id.as_str(), "Client disconnected.");
}
