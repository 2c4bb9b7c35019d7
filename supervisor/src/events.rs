//! The event hub: fan-out of run events to every connection, bounded.
//!
//! Events are serialized once (payload JSON) and shared as `Arc`s through a
//! `tokio::sync::broadcast` channel. Each connection wraps them in its own envelope with its
//! own `seq`. A connection that falls more than [`HUB_CAPACITY`] events behind is dropped as a
//! slow consumer (invariant 5: nothing buffers without bound).
//!
//! The hub decides nothing about runs: it numbers and fans out what it is given (a run's
//! stream reaches it through its link's fence, `worker_link::RunFence`). A run's terminal
//! events are built as [`Deferred`] by the control core (`run_end`) and published only once
//! the run's outcome is durable in the gateway db (an abort's at once), so a client that sees
//! a terminal event and retries gets the replay, never `in_flight`.

use std::sync::Arc;

use ipc::gateway::{AgentData, AgentEvent, ChatEvent, ChatState, LifecyclePhase, SessionsChanged};
use serde_json::Value;
use tokio::sync::broadcast;

/// Events kept for slow receivers before they count as lagging.
pub const HUB_CAPACITY: usize = 8192;

/// One event for every connection.
#[derive(Debug)]
pub struct HubEvent {
    /// Position in the hub's one order of publication, from 1. A connection that has handled
    /// event `n` has handled every event published before it (see [`EventHub::published`]).
    pub hub_seq: u64,
    /// Event name (`agent`, `chat`, `tick`, `shutdown`).
    pub event: &'static str,
    /// The payload, already serialized (once, for every connection).
    pub payload: Arc<str>,
    /// May be skipped for a connection that is over its buffer cap (its `seq` is still
    /// consumed, so the gap is visible); other events close such a connection instead.
    pub drop_if_slow: bool,
    /// Only connections that advertised this client capability get the event.
    pub cap: Option<&'static str>,
    /// Only connections with this scope (or admin) get the event.
    pub scope: Option<ipc::gateway::Scope>,
    /// Only connections that called `sessions.subscribe` get the event.
    pub subscribers_only: bool,
    /// Only `sessions.subscribe` subscribers and connections following this session
    /// (`sessions.messages.subscribe`) get the event.
    pub session: Option<Arc<str>>,
    /// The session of a run event (`agent`, `chat`): a connection with the
    /// `session-scoped-events` capability gets it only if it follows that session.
    pub run_session: Option<Arc<str>>,
}

impl crate::run_log::Logged for HubEvent {
    fn hub_seq(&self) -> u64 {
        self.hub_seq
    }
    fn bytes(&self) -> usize {
        self.payload.len()
    }
}

/// An event built now and published later (or at once with [`EventHub::publish_deferred`]).
#[derive(Debug, Clone)]
pub struct Deferred {
    event: &'static str,
    payload: Arc<str>,
    drop_if_slow: bool,
    cap: Option<&'static str>,
    subscribers_only: bool,
    session: Option<Arc<str>>,
    run_session: Option<Arc<str>>,
    /// A run's event: kept for `agent.events` replays.
    run: Option<crate::run_log::RunTag>,
    /// Only connections with this scope (or admin) get the event.
    scope: Option<ipc::gateway::Scope>,
    /// Relayed from another gateway of the cluster (not relayed again).
    remote: bool,
}

/// A run's event as it travels to the other gateways of a cluster (cluster mode's relay).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Relayed {
    /// `agent` or `chat`.
    pub event: String,
    pub payload: Arc<str>,
    pub drop_if_slow: bool,
    pub session_key: Arc<str>,
    pub run_id: Arc<str>,
    pub seq: u64,
    pub terminal: bool,
}

impl Deferred {
    /// An event another gateway of the cluster published for one of its runs; `None` for
    /// an event name this build does not relay.
    pub fn relayed(r: Relayed) -> Option<Self> {
        let event = [ipc::gateway::events::AGENT, ipc::gateway::events::CHAT]
            .into_iter()
            .find(|e| *e == r.event)?;
        Some(Self {
            event,
            payload: r.payload,
            drop_if_slow: r.drop_if_slow,
            cap: None,
            subscribers_only: false,
            session: None,
            run_session: Some(r.session_key.clone()),
            run: Some(crate::run_log::RunTag {
                run_id: r.run_id,
                seq: r.seq,
                terminal: r.terminal,
            }),
            scope: None,
            remote: true,
        })
    }
}

/// A run's terminal events, published once its outcome is durable. Publishing it, or
/// dropping it unpublished, releases `gate`: the link holds the session's later runs from the
/// terminal event's arrival until then ([`crate::link_order`]), so the next run's
/// `lifecycle start` never overtakes these.
#[derive(Debug, Default)]
pub struct TerminalEvents {
    pub events: Vec<Deferred>,
    pub gate: Option<tokio::sync::oneshot::Sender<()>>,
}

impl TerminalEvents {
    pub fn ungated(events: Vec<Deferred>) -> Self {
        Self { events, gate: None }
    }
}

impl Deferred {
    /// An `agent` event, serialized now.
    pub fn agent(ev: &AgentEvent) -> Self {
        Self {
            event: ipc::gateway::events::AGENT,
            payload: serialized(ev),
            drop_if_slow: false,
            cap: None,
            subscribers_only: false,
            session: None,
            run_session: Some(Arc::from(ev.session_key.as_str())),
            run: Some(crate::run_log::RunTag {
                run_id: Arc::from(ev.run_id.as_str()),
                seq: ev.seq,
                terminal: matches!(
                    &ev.data,
                    AgentData::Lifecycle(l)
                        if matches!(l.phase, LifecyclePhase::End | LifecyclePhase::Error)
                ),
            }),
            scope: None,
            remote: false,
        }
    }

    /// A `session.message` event, for session subscribers and the session's followers.
    pub fn session_message(ev: &ipc::gateway::SessionMessage) -> Self {
        Self {
            event: ipc::gateway::events::SESSION_MESSAGE,
            payload: serialized(ev),
            drop_if_slow: false,
            cap: None,
            subscribers_only: false,
            session: Some(Arc::from(ev.session_key.as_str())),
            run_session: None,
            run: None,
            scope: None,
            remote: false,
        }
    }

    /// A `session.operation` event, to the session's followers and subscribers.
    pub fn session_operation(ev: &ipc::gateway::SessionOperation) -> Self {
        Self {
            event: ipc::gateway::events::SESSION_OPERATION,
            payload: serialized(ev),
            drop_if_slow: false,
            cap: None,
            subscribers_only: false,
            session: Some(Arc::from(ev.session_key.as_str())),
            run_session: None,
            run: None,
            scope: None,
            remote: false,
        }
    }

    /// A `presence` event (skippable for a slow connection: the next one carries the list).
    pub fn presence(ev: &ipc::gateway::PresenceEvent) -> Self {
        Self {
            event: ipc::gateway::events::PRESENCE,
            payload: serialized(ev),
            drop_if_slow: true,
            cap: None,
            subscribers_only: false,
            session: None,
            run_session: None,
            run: None,
            scope: None,
            remote: false,
        }
    }

    /// A `sessions.changed` event, for `sessions.subscribe` subscribers (skippable for a
    /// slow connection, as OpenClaw's).
    pub fn sessions_changed(ev: &SessionsChanged) -> Self {
        Self::session_list_change(serialized(ev))
    }

    /// A `sessions.changed` event saying a session was deleted (it has no row any more).
    pub fn session_deleted(ev: &ipc::gateway::SessionDeleted) -> Self {
        Self::session_list_change(serialized(ev))
    }

    fn session_list_change(payload: Arc<str>) -> Self {
        Self {
            event: ipc::gateway::events::SESSIONS_CHANGED,
            payload,
            drop_if_slow: true,
            cap: None,
            subscribers_only: true,
            session: None,
            run_session: None,
            run: None,
            scope: None,
            remote: false,
        }
    }

    /// A `chat` event, serialized now; deltas may be skipped for a slow connection.
    pub fn chat(ev: &ChatEvent) -> Self {
        Self {
            event: ipc::gateway::events::CHAT,
            payload: serialized(ev),
            drop_if_slow: matches!(ev.state, ChatState::Delta { .. }),
            cap: None,
            subscribers_only: false,
            session: None,
            run_session: Some(Arc::from(ev.session_key.as_str())),
            run: Some(crate::run_log::RunTag {
                run_id: Arc::from(ev.run_id.as_str()),
                seq: ev.seq,
                terminal: matches!(
                    ev.state,
                    ChatState::Final { .. } | ChatState::Error { .. } | ChatState::Aborted { .. }
                ),
            }),
            scope: None,
            remote: false,
        }
    }

    /// A run's terminal pair: lifecycle, then chat.
    pub fn terminal((agent, chat): (AgentEvent, ChatEvent)) -> Vec<Self> {
        vec![Self::agent(&agent), Self::chat(&chat)]
    }

    /// Any other event, `payload` serialized now, for every connection.
    pub fn event<T: serde::Serialize>(event: &'static str, payload: &T) -> Self {
        Self {
            event,
            payload: serialized(payload),
            drop_if_slow: false,
            cap: None,
            subscribers_only: false,
            session: None,
            run_session: None,
            run: None,
            scope: None,
            remote: false,
        }
    }

    /// The run `seq` of a run's event.
    pub fn run_seq(&self) -> Option<u64> {
        self.run.as_ref().map(|t| t.seq)
    }

    /// Restricts the event to connections with `scope` (admins have every scope).
    pub fn for_scope(mut self, scope: ipc::gateway::Scope) -> Self {
        self.scope = Some(scope);
        self
    }

    /// Restricts the event to connections with client capability `cap`.
    pub fn for_cap(mut self, cap: &'static str) -> Self {
        self.cap = Some(cap);
        self
    }
}

#[derive(Clone)]
pub struct EventHub {
    tx: broadcast::Sender<Arc<HubEvent>>,
    /// The `hub_seq` of the last event published and the replay log; held while
    /// publishing, so numbers follow the broadcast order.
    state: Arc<std::sync::Mutex<HubState>>,
    /// Connections that watch sessions (`sessions.subscribe`, `sessions.messages.subscribe`):
    /// with none, session events are not built at all.
    session_watchers: Arc<std::sync::atomic::AtomicUsize>,
    /// Cluster mode: this gateway's run events also go to the other gateways (set once).
    relay: Arc<std::sync::OnceLock<tokio::sync::mpsc::Sender<Relayed>>>,
}

#[derive(Default)]
struct HubState {
    last: u64,
    /// Run events kept for `agent.events` (bounded, see [`crate::run_log`]).
    log: crate::run_log::RunLog<HubEvent>,
}

/// A connection's interest in session events; counted while it lives.
#[derive(Debug)]
pub struct SessionWatch(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for SessionWatch {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl Default for EventHub {
    fn default() -> Self {
        Self::new()
    }
}

impl EventHub {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(HUB_CAPACITY);
        Self {
            tx,
            state: Arc::default(),
            session_watchers: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            relay: Arc::default(),
        }
    }

    /// Cluster mode: from now on this gateway's run events are also handed to `relay`
    /// (dropped when it is full: across gateways run events are at most once; outcomes are
    /// durable in the cluster).
    pub fn relay_to(&self, relay: tokio::sync::mpsc::Sender<Relayed>) {
        let _ = self.relay.set(relay);
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes `events` in order, numbered one after another (one lock for them all).
    pub fn publish_all(&self, events: &[Deferred]) {
        let mut st = self.state();
        for d in events {
            self.send_locked(&mut st, d);
        }
    }

    /// Counts a connection as watching sessions until the returned value is dropped.
    pub fn watch_sessions(&self) -> SessionWatch {
        self.session_watchers
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        SessionWatch(self.session_watchers.clone())
    }

    /// Whether any connection watches sessions (else session events need not be built).
    pub fn sessions_watched(&self) -> bool {
        self.session_watchers
            .load(std::sync::atomic::Ordering::Relaxed)
            > 0
    }

    /// A receiver of every event published from now on, and the `hub_seq` of the last one
    /// it will not see.
    pub fn subscribe(&self) -> (broadcast::Receiver<Arc<HubEvent>>, u64) {
        let st = self.state();
        (self.tx.subscribe(), st.last)
    }

    /// The `hub_seq` of the last event published. A response sent after a connection has
    /// handled this far follows every event published before this call.
    pub fn published(&self) -> u64 {
        self.state().last
    }

    pub fn publish(&self, event: &'static str, payload: &Value) {
        self.publish_deferred(&Deferred::event(event, payload));
    }

    pub fn publish_deferred(&self, d: &Deferred) {
        let mut st = self.state();
        self.send_locked(&mut st, d);
    }

    /// Lets go of the logs of runs that ended long enough ago ([`crate::run_log`]).
    /// Expires the replay buffer's old runs; `true` when it gave back most of its room
    /// since the last call.
    pub fn expire_runs(&self, now: std::time::Instant) -> bool {
        let mut st = self.state();
        st.log.expire(now);
        st.log.take_shrank()
    }

    /// A run's events after `after_seq` published up to `upto` (a connection's start: it
    /// got the later ones live).
    /// The text a run's chat deltas had streamed so far (empty: none was published or kept):
    /// what a run the gateway ends at once had said (its chat `aborted` carries it).
    pub fn streamed_text(&self, run_id: &str) -> String {
        let st = self.state();
        let log = st.log.replay(run_id, 0, st.last);
        drop(st);
        log.events
            .iter()
            .rev()
            .filter(|e| e.event == ipc::gateway::events::CHAT)
            .find_map(|e| {
                let v: Value = serde_json::from_str(&e.payload).ok()?;
                (v["state"] == "delta")
                    .then(|| {
                        v["message"]["content"][0]["text"]
                            .as_str()
                            .map(str::to_owned)
                    })
                    .flatten()
            })
            .unwrap_or_default()
    }

    pub fn replay(
        &self,
        run_id: &str,
        after_seq: u64,
        upto: u64,
    ) -> crate::run_log::Replay<HubEvent> {
        self.state().log.replay(run_id, after_seq, upto)
    }

    fn send_locked(&self, st: &mut HubState, d: &Deferred) {
        st.last += 1;
        let ev = Arc::new(HubEvent {
            hub_seq: st.last,
            event: d.event,
            payload: d.payload.clone(),
            drop_if_slow: d.drop_if_slow,
            cap: d.cap,
            scope: d.scope,
            subscribers_only: d.subscribers_only,
            session: d.session.clone(),
            run_session: d.run_session.clone(),
        });
        if let Some(tag) = &d.run {
            st.log.record(tag, &ev, std::time::Instant::now());
            if let (Some(relay), false) = (self.relay.get(), d.remote) {
                let _ = relay.try_send(Relayed {
                    event: d.event.to_owned(),
                    payload: d.payload.clone(),
                    drop_if_slow: d.drop_if_slow,
                    session_key: d.run_session.clone().unwrap_or_else(|| Arc::from("")),
                    run_id: tag.run_id.clone(),
                    seq: tag.seq,
                    terminal: tag.terminal,
                });
            }
        }
        // No receivers is fine: nobody is listening.
        let _ = self.tx.send(ev);
    }
}

fn serialized<T: serde::Serialize>(value: &T) -> Arc<str> {
    // These types serialize infallibly (no maps with non-string keys).
    Arc::from(serde_json::to_string(value).unwrap_or_default())
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
impl Deferred {
    /// The payload as sent (tests look into what a relay built).
    pub fn json_for_tests(&self) -> String {
        self.payload.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(n: u64) -> Deferred {
        Deferred::sessions_changed(&SessionsChanged::changed(
            "patch",
            n,
            ipc::gateway::SessionRow::for_run("agent:main:s", "main", "done", None),
        ))
    }

    /// Events are numbered in the order they are published, a batch without a gap.
    #[test]
    fn events_are_numbered_in_publication_order() {
        let hub = EventHub::new();
        let (mut rx, before) = hub.subscribe();
        assert_eq!(before, 0);
        hub.publish_deferred(&event(1));
        hub.publish_all(&[event(2), event(3)]);
        let got: Vec<u64> = std::iter::from_fn(|| rx.try_recv().ok())
            .map(|e| e.hub_seq)
            .collect();
        assert_eq!(got, [1, 2, 3]);
        assert_eq!(hub.published(), 3);
    }
}
