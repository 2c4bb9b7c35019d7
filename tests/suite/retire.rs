//! Idle workers retire (issue 24): a worker with nothing to do for `idle_exit_seconds` exits;
//! the agent shows `idle`; its next run starts a new worker and completes.

use loopgate_tests::{reply, Gateway};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_retires_and_the_next_run_starts_it_again_r_j2() {
    let gw = Gateway::start_with("[workers]\nidle_exit_seconds = 1\n").await;
    gw.model.push(reply("first"));
    gw.model.push(reply("second"));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "one", "idempotencyKey": "retire-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let first = gw.worker_pid("main").await.expect("a worker ran the turn");
    gw.logs.wait_for("Worker idle; it retires.").await;
    gw.logs.wait_for("Worker exited.").await;
    let status = gw.status().await;
    let w = &status["workers"][0];
    assert_eq!(w["state"], "idle", "{status}");
    assert!(w["pid"].is_null(), "{status}");
    assert_eq!(w["restarts"], 0, "a retirement is not a restart: {status}");
    let (_, fin) = c
        .turn(json!({"message": "two", "idempotencyKey": "retire-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let second = gw.worker_pid("main").await.expect("a new worker");
    assert_ne!(first, second);
    let status = gw.status().await;
    assert_eq!(status["workers"][0]["restarts"], 0, "{status}");
    gw.logs.assert_clean(&[]);
}

/// Issue 24: with `workers.max_live = 1`, a run on another agent retires the idle worker
/// first (the least recently used), and each agent's next run starts its worker again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_max_live_the_idle_worker_retires_for_another_agents_run_r_j2() {
    let gw =
        Gateway::start_with("[agents.list.main]\n[agents.list.b]\n[workers]\nmax_live = 1\n").await;
    for text in ["one", "two", "three"] {
        gw.model.push(reply(text));
    }
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "one", "idempotencyKey": "cap-1", "agentId": "main"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let first = gw
        .worker_pid("main")
        .await
        .expect("main's worker ran the turn");
    let (_, fin) = c
        .turn(json!({"message": "two", "idempotencyKey": "cap-2", "agentId": "b"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.logs
        .wait_for("Worker retires early: workers.max_live are running.")
        .await;
    gw.logs.wait_for("Worker exited.").await;
    let status = gw.status().await;
    let state = |agent: &str| {
        status["workers"]
            .as_array()
            .and_then(|ws| ws.iter().find(|w| w["agentId"] == agent))
            .map(|w| (w["state"].clone(), w["restarts"].clone()))
    };
    assert_eq!(state("main"), Some((json!("idle"), json!(0))), "{status}");
    assert_eq!(state("b"), Some((json!("ready"), json!(0))), "{status}");
    let (_, fin) = c
        .turn(json!({"message": "three", "idempotencyKey": "cap-3", "agentId": "main"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let second = gw.worker_pid("main").await.expect("a new worker for main");
    assert_ne!(first, second);
    gw.logs.wait_for_count("Worker exited.", 2).await;
    gw.logs.assert_clean(&[]);
}
