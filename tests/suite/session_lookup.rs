//! `sessions.resolve` and `sessions.abort`, which OpenClaw's Control UI calls (found missing
//! by the issue 26 hand check: after `/new` a reload of the session's URL failed with
//! "unknown method: sessions.resolve", and Stop with nothing running said the gateway did
//! not support it). R-A1 (a session named by key, id, label or short id), R-A5 (abort).

use loopgate_tests::{hold, Gateway};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_resolve_finds_a_session_by_each_name_r_a1() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let created = c
        .call("sessions.create", json!({"label": "Groceries"}))
        .await;
    let key = created["payload"]["key"].as_str().unwrap().to_owned();
    let uuid = key.rsplit(':').next().unwrap().replace('-', "");
    let r = c
        .call(
            "sessions.resolve",
            json!({"shortId": &uuid[..8], "agentId": "main", "allowMissing": true}),
        )
        .await;
    assert_eq!(
        r["payload"],
        json!({"ok": true, "key": key, "agentId": "main", "displayName": "Groceries"}),
        "{r}"
    );
    let r = c.call("sessions.resolve", json!({"key": key})).await;
    assert_eq!(
        r["payload"],
        json!({"ok": true, "key": key, "agentId": "main"})
    );
    let r = c
        .call("sessions.resolve", json!({"label": "Groceries"}))
        .await;
    assert_eq!(r["payload"]["key"], key.as_str(), "{r}");

    // A session id, once a run of the session has ended.
    let (_, fin) = c
        .turn(json!({"message": "hi", "sessionKey": key, "idempotencyKey": "r-1"}))
        .await;
    let sid = fin["payload"]["result"]["meta"]["agentMeta"]["sessionId"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = c.call("sessions.resolve", json!({"sessionId": sid})).await;
    assert_eq!(r["payload"]["key"], key.as_str(), "{r}");

    // Missing: `{ok:false}` when allowed, else OpenClaw's error; bad input refused.
    let r = c
        .call(
            "sessions.resolve",
            json!({"shortId": "ffffffff", "allowMissing": true}),
        )
        .await;
    assert_eq!(r["payload"], json!({"ok": false}), "{r}");
    let r = c
        .call("sessions.resolve", json!({"shortId": "ffffffff"}))
        .await;
    assert_eq!(r["error"]["message"], "No session found: ffffffff", "{r}");
    let r = c.call("sessions.resolve", json!({"shortId": "xyz"})).await;
    assert_eq!(
        r["error"]["message"],
        "shortId must be 8-32 hexadecimal characters"
    );
    let r = c
        .call(
            "sessions.resolve",
            json!({"key": key, "label": "Groceries"}),
        )
        .await;
    assert_eq!(
        r["error"]["message"],
        "Provide either key, sessionId, label, shortId, or reference (not multiple)"
    );
    let r = c.call("sessions.resolve", json!({})).await;
    assert_eq!(r["ok"], false, "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_abort_stops_the_running_run_and_says_when_there_is_none_r_a5() {
    let gw = Gateway::start().await;
    gw.model.push(hold("slow"));
    let mut c = gw.connect().await;
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "ab", "message": "go", "idempotencyKey": "ab-1"}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    c.chat_event("ab-1", |p| p["state"] == "delta").await;
    let r = c.call("sessions.abort", json!({"key": "ab"})).await;
    assert_eq!(
        r["payload"],
        json!({"ok": true, "abortedRunId": "ab-1", "status": "aborted"}),
        "{r}"
    );
    let aborted = c.chat_event("ab-1", |p| p["state"] == "aborted").await;
    assert_eq!(aborted["payload"]["stopReason"], "rpc", "{aborted}");
    assert!(
        aborted["payload"].get("errorMessage").is_none(),
        "{aborted}"
    );
    let idle = c.call("sessions.abort", json!({"key": "ab"})).await;
    assert_eq!(
        idle["payload"],
        json!({"ok": true, "abortedRunId": null, "status": "no-active-run"})
    );
    let by_run = c.call("sessions.abort", json!({"runId": "ab-1"})).await;
    assert_eq!(by_run["payload"]["status"], "no-active-run", "{by_run}");
    let r = c.call("sessions.abort", json!({})).await;
    assert_eq!(r["error"]["message"], "key required", "{r}");
    gw.model.release();
}
