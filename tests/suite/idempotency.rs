//! agent.wait, idempotent replay (also across a supervisor restart) and the writer fence.

use loopgate_tests::Gateway;
use nix::sys::signal::Signal;
use scripted_model::Step;
use serde_json::{json, Value};

fn hold(text: &str) -> Step {
    Step::Hold {
        text: text.into(),
        chunks: 4,
        after_chunks: 1,
    }
}

/// R-A2: a wait that times out says only `{runId, status:"timeout"}`, the run goes on, and
/// waiting again returns the terminal result with startedAt/endedAt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_wait_times_out_then_rewait_gets_result_r_a2() {
    let gw = Gateway::start().await;
    gw.model.push(hold("slow answer"));
    let mut c = gw.connect().await;
    let id = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "w1"}))
        .await;

    let r = c
        .call("agent.wait", json!({"runId": "w1", "timeoutMs": 50}))
        .await;
    assert_eq!(r["payload"], json!({"runId": "w1", "status": "timeout"}));
    let r = c
        .call("agent.wait", json!({"runId": "w1", "timeoutMs": 1}))
        .await;
    assert_eq!(r["payload"], json!({"runId": "w1", "status": "timeout"}));

    let wait_id = c.send("agent.wait", json!({"runId": "w1"})).await;
    gw.model.release();
    let r = c.res(&wait_id).await;
    let p = &r["payload"];
    assert_eq!(p["status"], "ok", "{r}");
    assert!(p["startedAt"].as_u64().unwrap() <= p["endedAt"].as_u64().unwrap());
    assert!(p.get("error").is_none());
    let fin = c.res(&id).await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "slow answer"
    );
    // Waiting on a finished run answers at once.
    let r = c
        .call("agent.wait", json!({"runId": "w1", "timeoutMs": 0}))
        .await;
    assert_eq!(r["payload"]["status"], "ok");
    // An unknown run id waits out the window and reports a timeout (as OpenClaw does).
    let r = c
        .call("agent.wait", json!({"runId": "nope", "timeoutMs": 20}))
        .await;
    assert_eq!(r["payload"], json!({"runId": "nope", "status": "timeout"}));
    gw.logs.assert_clean(&[]);
}

/// R-A3: a duplicate while running answers `in_flight` (and no second final); after the end it
/// replays the final; after a supervisor restart too. One model request in total.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotent_replay_survives_supervisor_restart_r_a3() {
    let mut gw = Gateway::start().await;
    gw.model.push(hold("only once"));
    let mut c = gw.connect().await;
    let id = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "idem-1"}))
        .await;

    let mut dup = gw.connect().await;
    let r = dup
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "idem-1"}),
        )
        .await;
    assert_eq!(
        r["payload"],
        json!({"runId": "idem-1", "status": "in_flight", "sessionKey": "agent:main:main", "agentId": "main"})
    );
    gw.model.release();
    let original = c.res(&id).await;
    assert_eq!(original["payload"]["status"], "ok");

    let replay = dup
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "idem-1"}),
        )
        .await;
    assert_eq!(replay["ok"], original["ok"]);
    assert_eq!(replay["payload"], original["payload"]);

    let status = gw.stop(Signal::SIGTERM).await;
    assert_eq!(status.code(), Some(0), "clean stop");
    gw.spawn().await;
    let mut c = gw.connect().await;
    let replay = c
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "idem-1"}),
        )
        .await;
    assert_eq!(
        replay["payload"], original["payload"],
        "replayed from the gateway db"
    );
    let w = c
        .call("agent.wait", json!({"runId": "idem-1", "timeoutMs": 0}))
        .await;
    assert_eq!(w["payload"]["status"], "ok");
    assert_eq!(gw.model.requests().len(), 1, "one model request in total");
    // No frame other than the replayed res was sent for it (no accepted, no events).
    assert!(!c
        .seen
        .iter()
        .any(|f| f["event"] == "agent" && f["payload"]["runId"] == "idem-1"));
    gw.logs.assert_clean(&[]);
}

/// R-C1: a run whose writer claim was superseded cannot commit its transcript; it ends with a
/// clear error and the next turn works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn superseded_run_cannot_commit_transcript_r_c1() {
    let gw = Gateway::start().await;
    gw.model.push(hold("stale words"));
    let mut c = gw.connect().await;
    let id = c
        .start_streaming(json!({"message": "hi", "idempotencyKey": "fenced"}))
        .await;

    // The claim is taken before streaming; another writer now supersedes it.
    let db = gw.agent_db("main");
    let claim: Option<String> = db
        .query_row(
            "SELECT active_writer_run_id FROM sessions WHERE session_key = 'agent:main:main'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(claim.as_deref(), Some("fenced"));
    db.execute("UPDATE sessions SET active_writer_run_id = 'usurper' WHERE session_key = 'agent:main:main'", [])
        .unwrap();
    gw.model.release();

    let fin = c.res(&id).await;
    let p = &fin["payload"];
    assert_eq!(p["status"], "error", "{fin}");
    assert!(p["error"].as_str().unwrap().contains("superseded"), "{fin}");
    let stale: i64 = db
        .query_row(
            "SELECT count(*) FROM transcript WHERE role = 'assistant' AND run_id = 'fenced'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(stale, 0, "no transcript row from the superseded run");
    let status: String = db
        .query_row("SELECT status FROM runs WHERE run_id = 'fenced'", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(status, "error");

    let (_, fin) = c
        .turn(json!({"message": "next", "idempotencyKey": "after-fence"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let rows: Vec<(String, Option<String>)> = db
        .prepare("SELECT role, run_id FROM transcript ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let roles: Vec<&str> = rows.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(roles, ["user", "user", "assistant"]);
    let _: Vec<Value> = vec![];
    gw.logs.assert_clean(&["supersedes a stale writer claim"]);
}
