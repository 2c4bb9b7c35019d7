//! Run events between the gateways of a cluster: the events of runs this gateway owns go
//! to the others, and theirs reach this gateway's clients (and its `agent.events` replay
//! buffer) as if published here. At most once across gateways; a run's outcome, and so the
//! final answer and `agent.wait`, come from the cluster's durable record instead.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::mpsc;

use super::Clustered;
use crate::events::{Deferred, Relayed};
use crate::gateway::Gateway;

/// Events waiting to go out before new ones are dropped (a slow cluster never slows the
/// gateway's own clients).
const OUTGOING: usize = 65_536;

pub(super) async fn start(gw: &Arc<Gateway>, c: &Arc<Clustered>) {
    let (tx, mut rx) = mpsc::channel::<Relayed>(OUTGOING);
    gw.hub.relay_to(tx);
    let engine = c.engine.clone();
    tokio::spawn(async move {
        while let Some(r) = rx.recv().await {
            if let Ok(bytes) = serde_json::to_vec(&r) {
                let _ = engine.publish_event(Bytes::from(bytes)).await;
            }
        }
    });
    let engine = c.engine.clone();
    // Subscribed before the gateway serves anyone (the first feed is made here).
    let first = engine.events().await;
    let hub = gw.hub.clone();
    let stopping = gw.stopping.clone();
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
