//! `diagnostics.lanes` and `/metrics`: what is read of each worker's lanes.

use super::*;
use ipc::diagnostics::{Activity, SessionClass};
use ipc::gateway::WorkerStatus;

fn worker(agent: &str, state: &str) -> WorkerStatus {
    WorkerStatus {
        agent_id: agent.into(),
        pid: Some(7),
        state: state.into(),
        restarts: 3,
        runs_in_flight: 0,
        uptime_ms: None,
        last_exit: None,
        rss_bytes: None,
        failed_reason: None,
    }
}

fn lane(key: &str, activity: Activity, depth: u32, at: u64) -> LaneView {
    LaneView {
        session_key: key.into(),
        run_id: (activity != Activity::Queued).then(|| "r1".to_owned()),
        activity,
        queue_depth: depth,
        last_progress_ms: at,
        class: None,
        reason: None,
    }
}

/// R-I1: only running workers are asked; an idle agent is not started to answer.
#[test]
fn only_running_workers_are_asked_for_their_lanes() {
    assert!(has_lanes("ready") && has_lanes("draining"));
    for state in ["idle", "spawning", "backoff", "failed", "exited"] {
        assert!(!has_lanes(state), "{state}");
    }
}

/// R-I1: each running worker is a command lane (blocked when its runs fill the agent and
/// messages wait), each session a lane with its activity, depth, progress age and class.
#[test]
fn lanes_tell_each_workers_load_and_each_sessions_progress() {
    let stalled = LaneView {
        class: Some(SessionClass::Stalled),
        reason: Some("no progress".into()),
        ..lane("agent:main:a", Activity::ModelCall, 0, 1_000)
    };
    let workers = vec![
        (
            worker("main", "ready"),
            Some((
                vec![stalled, lane("agent:main:b", Activity::Queued, 2, 4_000)],
                2,
                1,
            )),
        ),
        (worker("ops", "draining"), Some((Vec::new(), 0, 1))),
        (worker("idle", "idle"), None),
    ];
    let max_of = |agent: &str| if agent == "main" { 1 } else { 4 };
    let d = lanes_of(workers, max_of, 10_000);
    assert_eq!(d.ts, 10_000);
    let names: Vec<_> = d.lanes.iter().map(|l| l.lane.as_str()).collect();
    assert_eq!(names, ["agent:main", "agent:ops"]);
    let main = &d.lanes[0];
    assert_eq!((main.queued_count, main.active_count), (2, 1));
    assert_eq!((main.max_concurrent, main.generation), (1, 3));
    assert_eq!(main.blocked_by.as_deref(), Some("lane"));
    assert!(!main.draining);
    assert!(d.lanes[1].draining && d.lanes[1].blocked_by.is_none());
    assert_eq!(
        (
            d.dynamic.lane_count,
            d.dynamic.active_count,
            d.dynamic.queued_count,
            d.dynamic.queued_lane_count
        ),
        (2, 2, 2, 1)
    );
    let a = &d.sessions[0];
    assert_eq!(
        (a.agent_id.as_str(), a.session_key.as_str()),
        ("main", "agent:main:a")
    );
    assert_eq!(a.active_work_kind, "model_call");
    assert_eq!((a.last_progress_at, a.last_progress_age_ms), (1_000, 9_000));
    assert_eq!(a.state.as_deref(), Some("stalled"));
    assert_eq!(a.reason.as_deref(), Some("no progress"));
    assert_eq!(d.sessions[1].state, None);
}

#[test]
fn metrics_read_a_worker_as_up_or_tripped_with_its_load() {
    let lanes = vec![lane("agent:main:a", Activity::ToolCall, 0, 0)];
    let up = worker_now(worker("main", "ready"), Some((lanes, 4, 1)));
    assert!(up.up && !up.breaker_open);
    assert_eq!((up.sessions, up.queued, up.active), (1, 4, 1));
    let failed = worker_now(worker("main", "failed"), None);
    assert!(!failed.up && failed.breaker_open);
    assert_eq!((failed.sessions, failed.queued, failed.active), (0, 0, 0));
    assert_eq!(failed.agent, "main");
}
