//! Gateway protocol v4 connections, independent of transport.
//!
//! A transport (the unix socket, WebSocket) turns its byte stream into [`Inbound`] items
//! through a [`FrameSource`] and writes [`Outbound`] items; this module runs the protocol:
//! the `connect.challenge` / `connect` / `hello-ok` handshake under a deadline and a
//! pre-auth frame cap, then request dispatch (one task per request, bounded per connection)
//! and event forwarding with a per-connection envelope `seq`.
//!
//! Backpressure (invariant 5): outbound frames go through a bounded queue; events are offered
//! without waiting and a connection whose queued bytes pass `MAX_BUFFERED_BYTES`, or that falls
//! behind the event hub, is closed as a slow consumer.
//!
//! Layout: [`peer`] (who is connected), [`out`] (what it is sent), this file (the loop).

pub mod budget;
pub mod out;
pub mod peer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ipc::gateway::{
    self as gw, ErrorShape, EventFrame, FrameError, Scope, HANDSHAKE_TIMEOUT_MS, MAX_PAYLOAD_BYTES,
    MAX_PREAUTH_PAYLOAD_BYTES,
};
use serde_json::json;
use tokio::sync::{broadcast, Semaphore};

use self::out::Out;
use self::peer::{ScopeSet, Session, Transport};
use crate::config::Config;
use crate::device_conns::DeviceConns;
use crate::events::{now_ms, EventHub, HubEvent};
use crate::gateway::Gateway;
use crate::presence::Presence;

pub use self::out::{render, Outbound};

/// Requests one connection may have in progress at once.
const MAX_REQUESTS_PER_CONN: usize = 1024;
/// When the gateway stops, how long a connection waits for its requests' answers (waits are
/// cut short by the stop, so this is normally instant) before it closes.
const STOP_ANSWER_GRACE: Duration = Duration::from_secs(2);

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

struct PresenceGuard<'a> {
    gw: &'a Gateway,
    conn_id: &'a str,
}

impl Drop for PresenceGuard<'_> {
    fn drop(&mut self) {
        self.gw.presence.set(self.conn_id, None);
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
    let conn_id = format!("c{}", gw.next_conn.fetch_add(1, Ordering::Relaxed));
    let Some(session) = connect(&gw, transport, &mut source, &out, &conn_id).await else {
        return;
    };
    // Leaves the presence list however the connection ends (closed, dropped at shutdown).
    let _present = PresenceGuard {
        gw: &gw,
        conn_id: &conn_id,
    };
    source.set_max_frame(MAX_PAYLOAD_BYTES);
    tracing::debug!(conn = conn_id.as_str(), ?transport, scopes = ?session.scopes, "Client connected.");
    let forwarder = forward_events(&gw.hub, &gw.config(), &out, &session);
    serve_requests(&gw, &mut source, &out, Arc::new(session)).await;
    forwarder.abort();
    // The aborted forwarder cannot say it stopped: say it for it, or a request still waiting
    // to answer after its run's events (`after_events`) would wait for good, and with it the
    // connection's writer and socket.
    out.forwarded.send_replace(u64::MAX);
    tracing::debug!(conn = conn_id.as_str(), "Client disconnected.");
}

/// The handshake: the challenge, the first frame within its deadline and size cap, the
/// `connect` checks, then `hello-ok`. `None` once the connection was refused and closed.
async fn connect<S: FrameSource>(
    gw: &Arc<Gateway>,
    transport: Transport,
    source: &mut S,
    out: &Out,
    conn_id: &str,
) -> Option<Session> {
    let unix = transport == Transport::Unix;
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
            return None;
        }
    };
    let text = match first {
        Err(_) => {
            out.close(1008, "handshake timeout").await;
            return None;
        }
        Ok(Inbound::Closed) => return None,
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
            return None;
        }
        Ok(Inbound::Text(t)) => t,
    };
    match crate::handshake::handshake(gw, transport, conn_id, &nonce, &text).await {
        Ok(accepted) => welcome(&gw.device_conns, &gw.presence, out, conn_id, accepted).await,
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
            None
        }
    }
}

/// An accepted `connect`: the device's connection is registered in `device_conns` before
/// `hello-ok` goes out (so a revoke's sweep from now on sees it), then the connection joins
/// the presence list.
async fn welcome(
    device_conns: &DeviceConns,
    presence: &Presence,
    out: &Out,
    conn_id: &str,
    accepted: crate::handshake::Accepted,
) -> Option<Session> {
    let crate::handshake::Accepted {
        id,
        hello,
        session,
        token_checked_at,
    } = accepted;
    if let Some(device) = &session.device_id {
        if !device_conns.register(conn_id, device, out, token_checked_at) {
            tracing::info!(
                conn = conn_id,
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
            return None;
        }
    }
    out.ok_with(&id, &hello).await;
    presence.set(conn_id, Some(session.presence.clone()));
    Some(session)
}

/// Which hub events one connection gets.
struct EventFilter {
    read: bool,
    caps: Vec<String>,
    scopes: ScopeSet,
    /// A client with this capability hears run events only of the sessions it follows.
    scoped: bool,
}

impl EventFilter {
    fn of(session: &Session) -> Self {
        Self {
            read: session.has_scope(Scope::Read),
            caps: session.caps.clone(),
            scopes: ScopeSet(session.scopes.clone()),
            scoped: session
                .caps
                .iter()
                .any(|c| c == gw::SESSION_SCOPED_EVENTS_CAP),
        }
    }

    fn wants(&self, ev: &HubEvent, out: &Out) -> bool {
        let needs_read = ev.event == gw::events::AGENT || ev.event == gw::events::CHAT;
        let follows = |key: &str| {
            out.message_keys
                .lock()
                .map(|k| k.contains(key))
                .unwrap_or(false)
        };
        let subscribed = || out.sessions_subscribed.load(Ordering::Relaxed);
        (!needs_read || self.read)
            && ev
                .cap
                .is_none_or(|c| self.caps.iter().any(|have| have == c))
            && ev.scope.is_none_or(|s| self.scopes.has_scope(s))
            && (!ev.subscribers_only || subscribed())
            && ev
                .session
                .as_deref()
                .is_none_or(|key| subscribed() || follows(key))
            && (!self.scoped || ev.run_session.as_deref().is_none_or(follows))
    }
}

/// The connection's event forwarder: every hub event it wants, with its own `seq`, until the
/// hub closes or the connection falls behind the config's `gateway.max_buffered_bytes` (then
/// it is dropped as a slow consumer).
fn forward_events(
    hub: &EventHub,
    config: &Config,
    out: &Out,
    session: &Session,
) -> tokio::task::JoinHandle<()> {
    let (mut events, start) = hub.subscribe();
    out.forwarded.send_replace(start);
    out.hub_start.store(start, Ordering::Relaxed);
    let out = out.clone();
    let filter = EventFilter::of(session);
    let cap = config.gateway.max_buffered_bytes;
    tokio::spawn(async move {
        let mut seq = 0u64;
        loop {
            match events.recv().await {
                Ok(ev) => {
                    let hub_seq = ev.hub_seq;
                    if filter.wants(&ev, &out) && !out.offer_event(ev, &mut seq, cap) {
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
}

/// Reads requests until the connection closes or the gateway stops; each runs in its own
/// task (at most [`MAX_REQUESTS_PER_CONN`] at once), turn requests in their order of arrival.
async fn serve_requests<S: FrameSource>(
    gw: &Arc<Gateway>,
    source: &mut S,
    out: &Out,
    session: Arc<Session>,
) {
    let unix = session.transport == Transport::Unix;
    let limit = Arc::new(Semaphore::new(MAX_REQUESTS_PER_CONN));
    let parse_budget = budget::ParseBudget::per_connection();
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
        let text = match item {
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
            Inbound::Text(text) => text,
        };
        // The frame is charged to the parse budgets until its handler has read its params:
        // a client that sends faster than that waits on its own socket.
        let charge = tokio::select! {
            c = budget::charge(&parse_budget, &gw.parse_budget, text.len()) => c,
            _ = out.closed.cancelled() => break,
            _ = gw.stopping.cancelled() => continue,
        };
        let frame = match budget::parse(text).await {
            Ok(None) => continue,
            Ok(Some(frame)) => frame,
            // Over WebSocket, non-JSON text after connect is ignored (as OpenClaw does).
            Err(FrameError::NotJson(_)) if !unix => continue,
            Err(FrameError::NotJson(e)) => {
                let error = ErrorShape::invalid(format!("invalid request frame: not JSON ({e})"));
                out.err("", error).await;
                continue;
            }
            Err(FrameError::Invalid { id, reason }) => {
                let error = ErrorShape::invalid(format!("invalid request frame: {reason}"));
                out.err(id.as_deref().unwrap_or(""), error).await;
                continue;
            }
        };
        let req = crate::rpc::Request::new(frame, charge);
        let Ok(permit) = limit.clone().try_acquire_owned() else {
            let busy = ErrorShape::unavailable(
                "The server is busy. Please try again in a moment.",
                Some(100),
            );
            out.err(&req.id, busy).await;
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
}
