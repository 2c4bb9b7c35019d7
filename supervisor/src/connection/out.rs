//! What one connection sends: responses and events through a bounded queue ([`Out`]), its
//! slow-consumer policy (queued bytes over `gateway.max_buffered_bytes`, or behind the event
//! hub: closed), and the text a transport writes ([`render`]).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use ipc::gateway::{ErrorShape, EventFrame, ResponseFrame};
use serde_json::Value;
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::events::{EventHub, HubEvent};

/// Session operations one connection may have in flight.
pub const SESSION_OPS_PER_CONN: usize = 8;
/// Frames queued per connection (responses and events).
const OUTBOUND_QUEUE: usize = 65_536;

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
    pub(super) forwarded: Arc<tokio::sync::watch::Sender<u64>>,
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

    pub(super) async fn event_unsequenced(&self, frame: &EventFrame) {
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

    pub(super) fn drop_slow_consumer(&self) {
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
    pub(super) fn offer_event(&self, ev: Arc<HubEvent>, seq: &mut u64, cap: usize) -> bool {
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
