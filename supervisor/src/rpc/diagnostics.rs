//! `diagnostics.lanes` (R-I1): every agent worker as a command lane, and every session lane
//! with its run, queue depth, classification and last progress, asked of the workers that
//! run (an idle agent is not started for it).

use super::*;
use ipc::diagnostics::LaneView;
use ipc::gateway::{CommandLane, DiagnosticsLanes, DynamicLanes, SessionLane};
use ipc::session_ops::LanesOp;

/// One worker's status and, if it runs, its lanes (queued, active).
type WorkerLanes = (
    ipc::gateway::WorkerStatus,
    Option<(Vec<LaneView>, u32, u32)>,
);

/// Every worker the control actor has, with the lanes of those that run (an idle agent is not
/// started for it); `connections`: the open client connections, as the status counts them.
async fn worker_lanes(
    control: &ControlHandle,
    connections: u64,
) -> Result<Vec<WorkerLanes>, ErrorShape> {
    let status = control.status(connections).await.map_err(control_error)?;
    let answers = futures_util::future::join_all(status.workers.iter().map(|w| {
        let ask = has_lanes(&w.state).then(|| control.ask(w.agent_id.clone(), LanesOp));
        async move {
            match ask {
                Some(f) => f.await.ok(),
                None => None,
            }
        }
    }))
    .await;
    Ok(status
        .workers
        .into_iter()
        .zip(answers)
        .map(|(w, a)| {
            // A worker that exits meanwhile has no lanes to show.
            let lanes = a.map(|l| (l.lanes, l.queued, l.active));
            (w, lanes)
        })
        .collect())
}

/// Whether a worker in `state` is asked for its lanes: one that runs (an idle or failed
/// agent is not started for it).
fn has_lanes(state: &str) -> bool {
    state == "ready" || state == "draining"
}

/// `diagnostics.lanes`: the lanes of every running worker (also `loopgate status`'s
/// diagnostics).
pub(crate) async fn lanes(gw: &Arc<Gateway>) -> Result<DiagnosticsLanes, ErrorShape> {
    let workers = worker_lanes(&gw.control, gw.connections.load(Ordering::Relaxed)).await?;
    let config = gw.config();
    let max_of = |agent_id: &str| {
        config
            .agent(agent_id)
            .map_or(1, |a| a.max_concurrent.max(1))
    };
    Ok(lanes_of(workers, max_of, now_ms()))
}

/// The workers' lanes at `now` (R-I1): one command lane per running worker (blocked when
/// its runs fill `max_of` its agent and messages wait), its session lanes, and the totals.
fn lanes_of(workers: Vec<WorkerLanes>, max_of: impl Fn(&str) -> u32, now: u64) -> DiagnosticsLanes {
    let mut result = DiagnosticsLanes {
        ts: now,
        lanes: Vec::new(),
        dynamic: DynamicLanes {
            lane_count: 0,
            active_count: 0,
            queued_count: 0,
            queued_lane_count: 0,
        },
        sessions: Vec::new(),
    };
    for (w, answer) in workers {
        let Some((lanes, queued, active)) = answer else {
            continue;
        };
        let max = max_of(&w.agent_id);
        result.lanes.push(CommandLane {
            lane: format!("agent:{}", w.agent_id),
            queued_count: queued,
            active_count: active,
            max_concurrent: max,
            draining: w.state == "draining",
            generation: u64::from(w.restarts),
            blocked_by: (active >= max && queued > 0).then(|| "lane".to_owned()),
        });
        result.dynamic.lane_count += lanes.len() as u32;
        result.dynamic.active_count += active;
        result.dynamic.queued_count += queued;
        result.dynamic.queued_lane_count +=
            lanes.iter().filter(|l| l.queue_depth > 0).count() as u32;
        result
            .sessions
            .extend(lanes.into_iter().map(|l| session_lane(&w.agent_id, l, now)));
    }
    result
}

/// What `/metrics` reads of the moment: the open connections (`connections`), and each
/// agent's worker state, queue depth, running runs and busy sessions (from the control
/// actor).
pub(crate) async fn scrape(
    control: &ControlHandle,
    connections: &std::sync::atomic::AtomicU64,
) -> crate::metrics::Scrape {
    let workers = worker_lanes(control, connections.load(Ordering::Relaxed))
        .await
        .unwrap_or_default();
    crate::metrics::Scrape {
        connections: connections.load(Ordering::Relaxed),
        workers: workers
            .into_iter()
            .map(|(w, lanes)| worker_now(w, lanes))
            .collect(),
    }
}

/// One worker as `/metrics` reads it: up when ready, its breaker open when failed, and
/// its queue, runs and busy sessions (none when it is not running).
fn worker_now(
    w: ipc::gateway::WorkerStatus,
    lanes: Option<(Vec<LaneView>, u32, u32)>,
) -> crate::metrics::WorkerNow {
    let (sessions, queued, active) = lanes.map_or((0, 0, 0), |(l, q, a)| (l.len() as u32, q, a));
    crate::metrics::WorkerNow {
        up: w.state == "ready",
        breaker_open: w.state == "failed",
        agent: w.agent_id,
        queued,
        active,
        sessions,
    }
}

/// One session lane as `diagnostics.lanes` lists it, its progress aged at `now`.
fn session_lane(agent_id: &str, l: LaneView, now: u64) -> SessionLane {
    SessionLane {
        agent_id: agent_id.to_owned(),
        session_key: l.session_key,
        run_id: l.run_id,
        active_work_kind: l.activity.as_str().to_owned(),
        queue_depth: l.queue_depth,
        last_progress_at: l.last_progress_ms,
        last_progress_age_ms: now.saturating_sub(l.last_progress_ms),
        state: l.class.map(|c| c.short().to_owned()),
        reason: l.reason,
    }
}

#[cfg(test)]
mod tests;
