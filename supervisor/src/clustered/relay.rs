//! Run events between the gateways of a cluster: the events of runs this gateway owns go
//! to the others, and theirs reach this gateway's clients (and its `agent.events` replay
//! buffer) as if published here. At most once across gateways; a run's outcome, and so the
//! final answer and `agent.wait`, come from the cluster's durable record instead.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::Clustered;
use crate::events::{Deferred, EventHub, Relayed};

/// Events waiting to go out before new ones are dropped (a slow cluster never slows the
/// gateway's own clients).
const OUTGOING: usize = 65_536;

/// Relays run events both ways between `hub` and the cluster `c`: this gateway's go out,
/// the others' are published on the hub, until the gateway is `stopping`.
pub(super) async fn start(hub: &EventHub, stopping: &CancellationToken, c: &Arc<Clustered>) {
    let (tx, mut rx) = mpsc::channel::<Relayed>(OUTGOING);
    hub.relay_to(tx);
    let engine = c.engine.clone();
    // The servers' limit, read once (not per event: it is the cluster's configuration).
    let room = engine.max_payload().saturating_sub(4096);
    tokio::spawn(async move {
        while let Some(r) = rx.recv().await {
            if let Some(bytes) = fit(r, room) {
                let _ = engine.publish_event(Bytes::from(bytes)).await;
            }
        }
    });
    let engine = c.engine.clone();
    // Subscribed before the gateway serves anyone (the first feed is made here).
    let first = engine.events().await;
    let hub = hub.clone();
    let stopping = stopping.clone();
    tokio::spawn(async move {
        let mut feed = first;
        loop {
            match feed {
                Ok(mut f) => {
                    while let Some(bytes) = f.next().await {
                        let relayed = serde_json::from_slice::<Relayed>(&bytes).ok();
                        if let Some(d) = relayed.and_then(Deferred::relayed) {
                            hub.publish_deferred(&d);
                        }
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "Cannot follow the other gateways' run events; trying again.")
                }
            }
            if stopping.is_cancelled() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            feed = engine.events().await;
        }
    });
}

/// `r` as one message of at most `room` bytes. Past that, a chat `final` or `aborted` goes
/// without its message (it names the message's place: clients read it from `chat.history`,
/// which pages to fit), so clients of other gateways still hear the run end; any other event
/// too large for one message (a long reply's cumulative delta) is not relayed: the next one
/// or the final carries on.
fn fit(r: Relayed, room: usize) -> Option<Vec<u8>> {
    use ipc::gateway::{ChatEvent, ChatState};
    let bytes = serde_json::to_vec(&r).ok()?;
    if bytes.len() <= room {
        return Some(bytes);
    }
    if r.event != ipc::gateway::events::CHAT {
        return None;
    }
    let mut ev: ChatEvent = serde_json::from_str(&r.payload).ok()?;
    match &mut ev.state {
        ChatState::Final { message, .. } | ChatState::Aborted { message, .. } => *message = None,
        _ => return None,
    }
    let payload: std::sync::Arc<str> = serde_json::to_string(&ev).ok()?.into();
    let bytes = serde_json::to_vec(&Relayed { payload, ..r }).ok()?;
    (bytes.len() <= room).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc::gateway::{ChatEvent, ChatState};

    fn chat(state: ChatState) -> Relayed {
        let ev = ChatEvent {
            run_id: "r".into(),
            session_key: "agent:main:s".into(),
            agent_id: "main".into(),
            seq: 3,
            state,
        };
        Relayed {
            event: ipc::gateway::events::CHAT.into(),
            payload: serde_json::to_string(&ev).unwrap().into(),
            drop_if_slow: false,
            session_key: "agent:main:s".into(),
            run_id: "r".into(),
            seq: 3,
            terminal: true,
        }
    }

    #[test]
    fn a_final_too_large_for_one_message_goes_without_its_message() {
        let big = ipc::gateway::ChatMessage::assistant(&"x".repeat(100_000), 1);
        let fin = chat(ChatState::Final {
            message: Some(big.clone()),
            stop_reason: Some("stop".into()),
            message_id: Some("e1".into()),
            message_seq: Some(4),
        });
        // Room enough: as it is.
        let whole = fit(fin.clone(), 1 << 20).unwrap();
        assert!(whole.len() > 100_000);
        let cut = fit(fin, 10_000).unwrap();
        assert!(cut.len() <= 10_000);
        let back: Relayed = serde_json::from_slice(&cut).unwrap();
        let ev: ChatEvent = serde_json::from_str(&back.payload).unwrap();
        match ev.state {
            ChatState::Final {
                message,
                message_id,
                ..
            } => {
                assert!(message.is_none());
                assert_eq!(message_id.as_deref(), Some("e1"));
            }
            other => panic!("{other:?}"),
        }
        // A delta that big is not relayed (the final follows).
        let delta = chat(ChatState::Delta {
            delta_text: "x".into(),
            message: big,
        });
        assert!(fit(delta, 10_000).is_none());
    }
}
