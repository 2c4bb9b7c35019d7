//! `agent.events {runId, afterSeq}` (a loopgate extension): a client whose connection
//! dropped mid-run reconnects and gets the run's events after the last `seq` it saw, from the
//! hub's per-run buffer ([`crate::run_log`]), up to where this connection's live stream
//! starts: every later event comes live, so nothing is missing twice or given twice. Past the
//! buffer the answer says `truncated` (and `chat.history` has what the run recorded).

use super::*;
use ipc::gateway::{AgentEventsResult, ReplayedEvent};

pub(super) async fn agent_events(gw: &Arc<Gateway>, session: &Session, req: Request, out: &Out) {
    let Some(p) = params::<m::AgentEvents>(&req, out).await else {
        return;
    };
    if p.run_id.is_empty() {
        return out
            .err(
                &req.id,
                ErrorShape::invalid(
                    "invalid agent.events params: runId must be a non-empty string",
                ),
            )
            .await;
    }
    let after = p.after_seq.unwrap_or(0);
    let upto = out.hub_start.load(Ordering::Relaxed);
    let replay = gw.hub.replay(&p.run_id, after, upto);
    let scoped = session
        .caps
        .iter()
        .any(|c| c == ipc::gateway::SESSION_SCOPED_EVENTS_CAP);
    let follows = |key: &str| {
        out.message_keys
            .lock()
            .map(|k| k.contains(key))
            .unwrap_or(false)
    };
    // What this connection would have got live (tool events need their capability).
    let events: Vec<ReplayedEvent> = replay
        .events
        .iter()
        .filter(|ev| {
            ev.cap
                .is_none_or(|c| session.caps.iter().any(|have| have == c))
        })
        .filter(|ev| !scoped || ev.run_session.as_deref().is_none_or(follows))
        .filter_map(|ev| {
            let payload = serde_json::value::RawValue::from_string(ev.payload.to_string()).ok()?;
            Some(ReplayedEvent {
                event: ev.event.to_owned(),
                payload,
            })
        })
        .collect();
    let (truncated, ended) = if replay.known {
        (replay.truncated, replay.ended)
    } else {
        // Nothing buffered: still queued (its events will all come live), or past the
        // buffer (ended more than its keep time ago), or unknown.
        match gw.db.lookup(p.run_id.clone()).await {
            Ok(Some(StoredRun::Active { .. })) => (false, false),
            Ok(Some(StoredRun::Terminal { .. })) => (true, true),
            Ok(None) => {
                return out
                    .err(
                        &req.id,
                        ErrorShape::invalid(format!("unknown run id {:?}", p.run_id)),
                    )
                    .await
            }
            Err(e) => {
                return out
                    .err(
                        &req.id,
                        ErrorShape::unavailable(format!("cannot look up the run: {e}"), Some(500)),
                    )
                    .await
            }
        }
    };
    let result = AgentEventsResult {
        run_id: p.run_id,
        events,
        truncated,
        first_seq: replay.first_seq,
        ended,
    };
    reply::<m::AgentEvents>(out, &req.id, &result).await;
}
