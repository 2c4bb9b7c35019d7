//! The event hub: fan-out of run events to every connection, bounded.
//!
//! Events are serialized once (payload JSON) and shared as `Arc`s through a
//! `tokio::sync::broadcast` channel. Each connection wraps them in its own envelope with its
//! own `seq`. A connection that falls more than [`HUB_CAPACITY`] events behind is told it
//! lagged and is dropped as a slow consumer (invariant 5: nothing buffers without bound).

use std::sync::Arc;

use serde_json::{json, Value};
use tokio::sync::broadcast;

/// Events kept for slow receivers before they count as lagging.
pub const HUB_CAPACITY: usize = 8192;

/// One event for every connection.
#[derive(Debug)]
pub struct HubEvent {
    /// Event name (`agent`, `tick`, `shutdown`).
    pub event: &'static str,
    /// The payload, already serialized.
    pub payload: Box<str>,
}

#[derive(Clone)]
pub struct EventHub {
    tx: broadcast::Sender<Arc<HubEvent>>,
}

impl Default for EventHub {
    fn default() -> Self {
        Self::new()
    }
}

impl EventHub {
    pub fn new() -> Self {
        let (tx, _) = broadcast::channel(HUB_CAPACITY);
        Self { tx }
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<HubEvent>> {
        self.tx.subscribe()
    }

    pub fn publish(&self, event: &'static str, payload: &Value) {
        // No receivers is fine: nobody is listening.
        let _ = self.tx.send(Arc::new(HubEvent {
            event,
            payload: payload.to_string().into_boxed_str(),
        }));
    }

    /// Publishes an `agent` event.
    pub fn agent(&self, run: &RunRef<'_>, seq: u64, ts: u64, stream: &str, data: Value) {
        self.publish(
            ipc::gateway::events::AGENT,
            &json!({
                "runId": run.run_id,
                "seq": seq,
                "stream": stream,
                "ts": ts,
                "data": data,
                "sessionKey": run.session_key,
                "agentId": run.agent_id,
            }),
        );
    }
}

/// Identifies a run in event payloads.
pub struct RunRef<'a> {
    pub run_id: &'a str,
    pub session_key: &'a str,
    pub agent_id: &'a str,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
