//! `agent` addressed by `sessionId` alone resolves to its session (R-A1, issue 26 item 8).

use loopgate_tests::Gateway;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_addressed_by_session_id_alone_joins_its_session_r_a1() {
    let gw = Gateway::start_with("[agents.list.ops]\n").await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"sessionKey": "thread", "message": "first", "idempotencyKey": "sid-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let h = c
        .call("chat.history", json!({"sessionKey": "thread"}))
        .await;
    let id = h["payload"]["sessionId"]
        .as_str()
        .expect("history names the session id")
        .to_owned();

    let (accepted, fin) = c
        .turn(json!({"sessionId": id, "message": "second", "idempotencyKey": "sid-2"}))
        .await;
    assert_eq!(
        accepted["payload"]["sessionKey"], "agent:main:thread",
        "{accepted}"
    );
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let h = c
        .call("chat.history", json!({"sessionKey": "thread"}))
        .await;
    let texts: Vec<&str> = h["payload"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"][0]["text"].as_str())
        .collect();
    assert_eq!(texts, ["first", "second"], "{h}");

    // A key wins over the id; an id nobody has, or another agent's, is refused.
    let (accepted, _) = c
        .turn(json!({"sessionKey": "other", "sessionId": id, "message": "x", "idempotencyKey": "sid-3"}))
        .await;
    assert_eq!(
        accepted["payload"]["sessionKey"], "agent:main:other",
        "{accepted}"
    );
    let r = c
        .call(
            "agent",
            json!({"sessionId": "0190-nobody", "message": "x", "idempotencyKey": "sid-4"}),
        )
        .await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("unknown sessionId \"0190-nobody\"")),
        "{r}"
    );
    let r = c
        .call(
            "agent",
            json!({"sessionId": id, "agentId": "ops", "message": "x", "idempotencyKey": "sid-5"}),
        )
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("belongs to agent \"main\", not \"ops\"")),
        "{r}"
    );
    // The gateway keeps serving.
    let (_, fin) = c
        .turn(json!({"sessionId": id, "message": "third", "idempotencyKey": "sid-6"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
}
