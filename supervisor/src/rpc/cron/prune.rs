//! Isolated runs' sessions (`agent:<id>:cron:<job>:run:<occurrence>`) are deleted once they
//! are older than `[cron] session_retention_seconds` (OpenClaw's `cron.sessionRetention`,
//! 24 h): a job every second would otherwise leave 86 400 sessions a day. A session with a
//! run in flight is left for the next round (its worker refuses to delete it). The run
//! history of a removed job stays [`REMOVED_HISTORY_MS`] (7 days), then goes too.

use std::sync::Arc;
use std::time::Duration;

use ipc::gateway::SessionDeleted;
use ipc::session_ops::DeleteOp;

use crate::events::now_ms;
use crate::gateway::Gateway;

/// Sessions deleted at most per round.
const PER_ROUND: u32 = 1_000;
/// How long a removed job's run history is kept.
pub const REMOVED_HISTORY_MS: u64 = 7 * 86_400_000;

/// Deletes expired run sessions, a round every quarter of the retention (1 s to 10 min),
/// until the gateway stops.
pub async fn prune_loop(gw: Arc<Gateway>) {
    loop {
        let retention = gw.config().cron.session_retention_seconds;
        let nap = match retention {
            0 => Duration::from_secs(600),
            r => Duration::from_secs((r / 4).clamp(1, 600)),
        };
        tokio::select! {
            _ = gw.stopping.cancelled() => return,
            _ = tokio::time::sleep(nap) => {}
        }
        if gw.draining.load(std::sync::atomic::Ordering::Relaxed) {
            continue;
        }
        if retention > 0 {
            prune_once(&gw, retention).await;
        }
        let before = now_ms().saturating_sub(REMOVED_HISTORY_MS);
        if let Err(e) = gw.db.cron_prune_removed(before).await {
            tracing::warn!(error = %e, "Cannot prune removed cron jobs' history.");
        }
    }
}

async fn prune_once(gw: &Gateway, retention_s: u64) {
    let before = now_ms().saturating_sub(retention_s.saturating_mul(1000));
    let expired = match gw.db.cron_run_sessions(before, PER_ROUND).await {
        Ok(list) => list,
        Err(e) => {
            tracing::warn!(error = %e, "Cannot list expired cron run sessions.");
            return;
        }
    };
    for (session_key, agent_id) in expired {
        let op = DeleteOp {
            session_key: session_key.clone(),
            delete_transcript: true,
        };
        // An agent gone from the config, or a session busy: its index row goes (or waits).
        let at_worker = if gw.config().agent(&agent_id).is_some() {
            super::super::at_worker(gw, agent_id.clone(), op)
                .await
                .is_ok()
        } else {
            true
        };
        if !at_worker {
            continue;
        }
        let _ = gw.db.delete_session(session_key.clone()).await;
        gw.sessions.clear(&session_key);
        gw.hub
            .publish_deferred(&crate::events::Deferred::session_deleted(
                &SessionDeleted::new(&session_key, &agent_id, now_ms()),
            ));
    }
}
