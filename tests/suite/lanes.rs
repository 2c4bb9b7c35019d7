//! Session lanes, provider credentials and worker crash isolation.

use loopgate_tests::{alive, hold, Gateway};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use serde_json::json;

/// R-B2: runs of one session key never overlap; runs of different sessions do.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_serialized_per_session_r_b2() {
    let gw = Gateway::start().await;
    gw.model.push(hold("first"));
    gw.model.push(hold("other session"));
    let mut c = gw.connect().await;
    let a = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "lane-a", "sessionKey": "s1"}))
        .await;
    // Same session: accepted, but waits for the lane.
    let b = c
        .send(
            "agent",
            json!({"message": "two", "idempotencyKey": "lane-b", "sessionKey": "s1", "queueMode": "followup"}),
        )
        .await;
    assert_eq!(c.res(&b).await["payload"]["status"], "accepted");
    // Another session runs at once, alongside the first.
    let d = c
        .start_streaming(
            json!({"message": "three", "idempotencyKey": "lane-d", "sessionKey": "s2"}),
        )
        .await;
    assert_eq!(
        gw.model.requests().len(),
        2,
        "lane-b has not reached the model while lane-a runs"
    );
    assert!(!c
        .seen
        .iter()
        .any(|f| f["payload"]["runId"] == "lane-b" && f["event"] == "agent"));

    gw.model.release(); // lane-a (or lane-d) finishes
    gw.model.release();
    let fa = c.res(&a).await;
    assert_eq!(fa["payload"]["status"], "ok");
    let fb = c.res(&b).await;
    assert_eq!(fb["payload"]["status"], "ok");
    assert_eq!(c.res(&d).await["payload"]["status"], "ok");
    // lane-b started only after lane-a ended.
    let a_end = c
        .agent_event("lane-a", |p| p["data"]["phase"] == "end")
        .await;
    let b_start = c
        .agent_event("lane-b", |p| p["data"]["phase"] == "start")
        .await;
    assert!(
        b_start["payload"]["data"]["startedAt"].as_u64()
            >= a_end["payload"]["data"]["endedAt"].as_u64()
    );
    let reqs = gw.model.requests();
    let last_user = reqs[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .unwrap()
        .clone();
    assert_eq!(last_user["content"], "two");
    assert_eq!(
        reqs[2].body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "assistant")
            .count(),
        1
    );
    gw.logs.assert_clean(&[]);
}

/// The API key comes from the variable the provider config names, read by the worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_key_is_read_from_the_configured_env_var() {
    let dir_env = [("SCRIPTED_TEST_KEY", "sk-test-123")];
    let mut gw = Gateway::start_opts("", 30.0).await;
    gw.stop(Signal::SIGTERM).await;
    let cfg = gw.config_text().replace(
        "idle_timeout_seconds",
        "api_key_env = \"SCRIPTED_TEST_KEY\"\nidle_timeout_seconds",
    );
    std::fs::write(gw.state().join("loopgate.toml"), cfg).unwrap();
    gw.spawn_with_env(&dir_env).await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "key-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    assert_eq!(
        gw.model.requests()[0].authorization.as_deref(),
        Some("Bearer sk-test-123")
    );

    // Without the variable the run fails with a message naming it.
    gw.stop(Signal::SIGTERM).await;
    gw.spawn().await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "key-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("SCRIPTED_TEST_KEY"),
        "{fin}"
    );
    // A configuration fault is not retried (it would wait out the whole retry budget).
    assert!(
        !c.seen
            .iter()
            .any(|f| f["payload"]["runId"] == "key-2" && f["payload"]["stream"] == "run_status"),
        "a missing key was retried"
    );
    gw.logs.assert_clean(&[]);
}

/// R-J2: killing a worker mid-stream ends its run with an error naming the signal; the next
/// turn on that agent starts a new worker and works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_killed_mid_stream_fails_only_its_run_r_j2() {
    let gw = Gateway::start().await;
    gw.model.push(hold("doomed"));
    let mut c = gw.connect().await;
    let id = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "crash-1"}))
        .await;
    let s = c.call("loopgate.status", json!({})).await;
    let wpid = s["payload"]["workers"][0]["pid"].as_u64().unwrap() as i32;
    kill(Pid::from_raw(wpid), Signal::SIGKILL).unwrap();

    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let err = fin["payload"]["error"].as_str().unwrap();
    assert!(err.contains("SIGKILL"), "{err}");
    let ev = c
        .agent_event("crash-1", |p| p["data"]["phase"] == "error")
        .await;
    assert!(ev["payload"]["data"]["error"]
        .as_str()
        .unwrap()
        .contains("SIGKILL"));
    let w = c
        .call("agent.wait", json!({"runId": "crash-1", "timeoutMs": 0}))
        .await;
    assert_eq!(w["payload"]["status"], "error");
    assert!(alive(gw.pid()), "the supervisor is untouched");

    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "crash-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let s = c.call("loopgate.status", json!({})).await;
    let w = &s["payload"]["workers"][0];
    assert_ne!(w["pid"].as_u64().unwrap() as i32, wpid);
    assert_eq!(w["restarts"], 1);
    assert!(w["lastExit"].as_str().unwrap().contains("SIGKILL"));
    // The transcript survived intact and the interrupted run was ended by recovery.
    let db = gw.agent_db("main");
    let ok: String = db
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(ok, "ok");
    let status: String = db
        .query_row(
            "SELECT status FROM runs WHERE run_id = 'crash-1'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(status, "error");
    gw.logs.assert_clean(&[
        "Worker exited unexpectedly",
        "Ended runs left open by a crash",
    ]);
}

/// Issue 10: runs handed to a worker's link that never reached the worker (it stopped
/// reading, then died) carry over to the next worker instead of failing with it. Before, every
/// accepted run on a dying link failed. The run whose frame was cut off mid-write may have
/// reached the worker, so it fails with the worker, as a run in progress does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_that_never_reached_a_dead_worker_run_on_the_next_r_j2() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    gw.model.push(loopgate_tests::reply("warm"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "carry-0"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let wpid = gw.worker_pid("main").await.unwrap();
    kill(Pid::from_raw(wpid as i32), Signal::SIGSTOP).unwrap();

    // A 3 MiB message fills the stopped worker's socket and blocks the link's writer; the
    // two runs after it stay in the link's queue.
    let big = "x".repeat(3 << 20);
    let cut = c
        .send(
            "agent",
            json!({"message": big, "idempotencyKey": "carry-cut", "sessionKey": "s1"}),
        )
        .await;
    let accepted = c.res(&cut).await;
    assert_eq!(accepted["payload"]["status"], "accepted", "{accepted}");
    // Handed to the link first (requests on one connection are admitted concurrently).
    until_in_flight(&gw, 1).await;
    let mut later = Vec::new();
    for key in ["carry-1", "carry-2"] {
        let id = c
            .send(
                "agent",
                json!({"message": key, "idempotencyKey": key, "sessionKey": "s2", "queueMode": "followup"}),
            )
            .await;
        later.push(id);
    }
    for id in &later {
        let accepted = c.res(id).await;
        assert_eq!(accepted["payload"]["status"], "accepted", "{accepted}");
    }
    until_in_flight(&gw, 3).await;
    gw.model.push(loopgate_tests::reply("after one"));
    gw.model.push(loopgate_tests::reply("after two"));
    kill(Pid::from_raw(wpid as i32), Signal::SIGKILL).unwrap();

    let fin = c.res(&cut).await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap_or_default()
            .contains("SIGKILL"),
        "{fin}"
    );
    // Requests on one connection are admitted concurrently, so either may run first.
    let mut texts = Vec::new();
    for id in &later {
        let fin = c.res(id).await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
        texts.push(fin["payload"]["result"]["payloads"][0]["text"].clone());
    }
    texts.sort_by_key(|t| t.to_string());
    assert_eq!(texts, [json!("after one"), json!("after two")]);
    assert_ne!(gw.worker_pid("main").await, Some(wpid));
    gw.logs.assert_clean(&[
        "Worker exited unexpectedly",
        "Ended runs left open by a crash",
        "Writing to worker failed",
    ]);
}

/// Waits until `main`'s worker has `n` runs in flight, per `status`.
async fn until_in_flight(gw: &Gateway, n: u64) {
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let s = gw.status().await;
        if s["workers"][0]["runsInFlight"] == n {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "{s}");
    }
}
