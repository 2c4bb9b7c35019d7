//! Model attempts that fail in a way worth retrying (R-B4, `openclaw-protocol.md` 6.9): the
//! run stays open, clients hear `run_status retrying` and chat `status` with `retry`, and the
//! same request goes again after the backoff (`Retry-After` when the provider sends one).

use loopgate_tests::Gateway;
use scripted_model::Step;
use serde_json::{json, Value};

/// Fast backoffs, so a spent budget takes milliseconds.
const FAST: &str = "retry_base_seconds = 0.01\nretry_max_seconds = 0.05\n";

fn http(status: u16, retry_after_s: Option<u64>) -> Step {
    Step::HttpError {
        status,
        message: format!("scripted {status}"),
        retry_after_s,
    }
}

fn is_terminal(f: &Value, run: &str) -> bool {
    let p = &f["payload"];
    p["runId"] == run
        && ((f["event"] == "agent"
            && p["stream"] == "lifecycle"
            && (p["data"]["phase"] == "end" || p["data"]["phase"] == "error"))
            || (f["event"] == "chat"
                && ["final", "error", "aborted"].contains(&p["state"].as_str().unwrap_or(""))))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limit_is_retried_after_its_retry_after_r_b4() {
    let gw = Gateway::start_with(FAST).await;
    gw.model.push(http(429, Some(1)));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hello", "idempotencyKey": "rl-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "Echo: hello"
    );
    assert_eq!(gw.model.requests().len(), 2, "one run, two requests");
    let status = c.agent_event("rl-1", |p| p["stream"] == "run_status").await;
    assert_eq!(
        status["payload"]["data"],
        json!({"phase": "retrying", "attempt": 2, "maxAttempts": 10, "reason": "rate_limit"})
    );
    let chat = c.chat_event("rl-1", |p| p["state"] == "status").await;
    assert_eq!(chat["payload"]["retry"]["reason"], "rate_limit", "{chat}");
    // Between the retry notice and the answer, no terminal: the lifecycle stayed open.
    let at = c
        .seen
        .iter()
        .position(|f| f["payload"]["stream"] == "run_status")
        .unwrap();
    let terminals: Vec<usize> = c
        .seen
        .iter()
        .enumerate()
        .filter(|(_, f)| is_terminal(f, "rl-1"))
        .map(|(i, _)| i)
        .collect();
    assert!(terminals.iter().all(|&i| i > at), "{terminals:?} vs {at}");
    assert_eq!(terminals.len(), 2, "one lifecycle end and one chat final");
    gw.logs.assert_clean(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transient_failures_are_retried_until_the_budget_is_spent_r_b4() {
    let gw = Gateway::start_with(FAST).await;
    // Two 5xx, then an answer: retried through.
    gw.model.push(http(502, None));
    gw.model.push(http(503, None));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "through", "idempotencyKey": "tr-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(gw.model.requests().len(), 3);

    // Nine failures: the first attempt and eight retries, then the run fails with the last.
    for _ in 0..9 {
        gw.model.push(http(500, None));
    }
    let (_, fin) = c
        .turn(json!({"message": "down", "idempotencyKey": "tr-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    assert!(
        fin["payload"]["error"]
            .as_str()
            .unwrap()
            .contains("HTTP 500"),
        "{fin}"
    );
    assert_eq!(gw.model.requests().len(), 3 + 9);
    let retries = c
        .seen
        .iter()
        .filter(|f| f["payload"]["runId"] == "tr-2" && f["payload"]["stream"] == "run_status")
        .count();
    assert_eq!(retries, 8);
    // What is not transient is not retried.
    gw.model.push(http(400, None));
    let (_, fin) = c
        .turn(json!({"message": "bad", "idempotencyKey": "tr-3"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    assert_eq!(gw.model.requests().len(), 13);
    gw.logs.assert_clean(&["Run failed"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_while_waiting_to_retry_stops_the_run_r_b4_r_a5() {
    let gw = Gateway::start_with(FAST).await;
    // The provider asks for 30 s: the run waits, and the user stops it meanwhile.
    gw.model.push(http(429, Some(30)));
    let mut c = gw.connect().await;
    let id = c
        .send(
            "agent",
            json!({"message": "wait", "idempotencyKey": "ab-1", "sessionKey": "main"}),
        )
        .await;
    c.agent_event("ab-1", |p| p["stream"] == "run_status").await;
    let r = c
        .call("chat.abort", json!({"sessionKey": "main", "runId": "ab-1"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let fin = c
        .wait_for(|f| {
            f["type"] == "res" && f["id"] == id.as_str() && f["payload"]["summary"].is_string()
        })
        .await;
    assert_eq!(fin["payload"]["summary"], "aborted", "{fin}");
    assert_eq!(gw.model.requests().len(), 1, "no request after the abort");
}
