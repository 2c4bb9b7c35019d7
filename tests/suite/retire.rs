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
