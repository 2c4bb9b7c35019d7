//! The event hub: fan-out of run events to every connection, bounded.
//!
//! Events are serialized once (payload JSON) and shared as `Arc`s through a
//! `tokio::sync::broadcast` channel. Each connection wraps them in its own envelope with its
//! own `seq`. A connection that falls more than [`HUB_CAPACITY`] events behind is dropped as a
//! slow consumer (invariant 5: nothing buffers without bound).
//!
//! A run's terminal events are built as [`Deferred`] and published only once the run's
//! outcome is durable in the gateway db, so a client that sees a terminal event and retries
//! gets the replay, never `in_flight`.

use std::sync::Arc;

use serde_json::{json, Value};
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
    /// The payload, already serialized.
    pub payload: Box<str>,
    /// May be skipped for a connection that is over its buffer cap (its `seq` is still
    /// consumed, so the gap is visible); other events close such a connection instead.
    pub drop_if_slow: bool,
    /// Only connections that advertised this client capability get the event.
    pub cap: Option<&'static str>,
}

/// An event built now and published later (or at once with [`EventHub::publish_deferred`]).
#[derive(Debug, Clone)]
pub struct Deferred {
    event: &'static str,
    payload: Value,
    drop_if_slow: bool,
    cap: Option<&'static str>,
}

/// A run's terminal events, published once its outcome is durable. Publishing it, or
/// dropping it unpublished, releases `gate`: the link holds the next run of the same session
/// until then, so that run's `lifecycle start` never overtakes these.
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
    /// Restricts the event to connections with client capability `cap`.
    pub fn for_cap(mut self, cap: &'static str) -> Self {
        self.cap = Some(cap);
        self
    }
}

#[derive(Clone)]
pub struct EventHub {
    tx: broadcast::Sender<Arc<HubEvent>>,
    /// The `hub_seq` of the last event published; held while publishing, so numbers follow
    /// the broadcast order.
    last: Arc<std::sync::Mutex<u64>>,
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
            last: Arc::new(std::sync::Mutex::new(0)),
        }
    }

    /// A receiver of every event published from now on, and the `hub_seq` of the last one
    /// it will not see.
    pub fn subscribe(&self) -> (broadcast::Receiver<Arc<HubEvent>>, u64) {
        let last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        (self.tx.subscribe(), *last)
    }

    /// The `hub_seq` of the last event published. A response sent after a connection has
    /// handled this far follows every event published before this call.
    pub fn published(&self) -> u64 {
        *self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn publish(&self, event: &'static str, payload: &Value) {
        self.send(event, payload, false, None);
    }

    pub fn publish_deferred(&self, d: &Deferred) {
        self.send(d.event, &d.payload, d.drop_if_slow, d.cap);
    }

    fn send(
        &self,
        event: &'static str,
        payload: &Value,
        drop_if_slow: bool,
        cap: Option<&'static str>,
    ) {
        let payload = payload.to_string().into_boxed_str();
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        *last += 1;
        // No receivers is fine: nobody is listening.
        let _ = self.tx.send(Arc::new(HubEvent {
            hub_seq: *last,
            event,
            payload,
            drop_if_slow,
            cap,
        }));
    }

    /// Publishes an `agent` event (see [`agent_event`]).
    pub fn agent(&self, run: &RunRef<'_>, seq: u64, ts: u64, stream: &str, data: Value) {
        self.publish_deferred(&agent_event(run, seq, ts, stream, data));
    }

    /// Publishes a `chat` event (see [`chat_event`]).
    pub fn chat(&self, run: &RunRef<'_>, seq: u64, state: &str, fields: Value) {
        self.publish_deferred(&chat_event(run, seq, state, fields));
    }
}

/// Identifies a run in event payloads.
pub struct RunRef<'a> {
    pub run_id: &'a str,
    pub session_key: &'a str,
    pub agent_id: &'a str,
}

/// An `agent` event: `{runId, seq, stream, ts, data, sessionKey, agentId}`.
pub fn agent_event(run: &RunRef<'_>, seq: u64, ts: u64, stream: &str, data: Value) -> Deferred {
    Deferred {
        event: ipc::gateway::events::AGENT,
        payload: json!({
            "runId": run.run_id,
            "seq": seq,
            "stream": stream,
            "ts": ts,
            "data": data,
            "sessionKey": run.session_key,
            "agentId": run.agent_id,
        }),
        drop_if_slow: false,
        cap: None,
    }
}

/// A `chat` event (the UI projection of a run): `state` is `delta`, `final`, `error` or
/// `aborted`; `fields` are merged into the payload. Deltas may be dropped for slow clients.
pub fn chat_event(run: &RunRef<'_>, seq: u64, state: &str, fields: Value) -> Deferred {
    let mut payload = json!({
        "runId": run.run_id,
        "sessionKey": run.session_key,
        "agentId": run.agent_id,
        "seq": seq,
        "state": state,
    });
    if let (Some(obj), Value::Object(extra)) = (payload.as_object_mut(), fields) {
        obj.extend(extra);
    }
    Deferred {
        event: ipc::gateway::events::CHAT,
        payload,
        drop_if_slow: state == "delta",
        cap: None,
    }
}

/// A run's terminal failure as `agent` lifecycle `error` and `chat` `error`.
pub fn run_failed(
    run: &RunRef<'_>,
    seq: u64,
    ts: u64,
    started_at: Option<u64>,
    error: &str,
) -> Vec<Deferred> {
    let mut data = json!({"phase": "error", "endedAt": ts, "error": error});
    if let Some(s) = started_at {
        data["startedAt"] = json!(s);
    }
    vec![
        agent_event(run, seq, ts, "lifecycle", data),
        chat_event(
            run,
            seq,
            "error",
            json!({"errorMessage": error, "errorKind": "unknown"}),
        ),
    ]
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
