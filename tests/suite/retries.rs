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

/// A gateway whose `main` agent has the scripted model as primary and `backup` (a second
/// scripted model) as its fallback.
async fn with_fallback(idle_seconds: f64) -> (Gateway, scripted_model::ScriptedModel) {
    let backup = scripted_model::ScriptedModel::start().await.unwrap();
    let extra = format!(
        "{FAST}\n[models.providers.backup]\napi = \"openai-completions\"\nbase_url = \"{}\"\n{FAST}\n\
         [agents.list.main]\nmodel = {{ primary = \"scripted/scripted-1\", fallbacks = [\"backup/backup-1\"] }}\n",
        backup.base_url()
    );
    (Gateway::start_opts(&extra, idle_seconds).await, backup)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fallback_answers_once_the_primary_is_spent_r_b5() {
    let (gw, backup) = with_fallback(30.0).await;
    let mut c = gw.connect().await;
    let agents = c.call("agents.list", json!({})).await;
    assert_eq!(
        agents["payload"]["agents"][0]["model"],
        json!({"primary": "scripted/scripted-1", "fallbacks": ["backup/backup-1"]}),
        "{agents}"
    );
    for _ in 0..9 {
        gw.model.push(http(503, None));
    }
    let (_, fin) = c
        .turn(json!({"message": "anyone?", "idempotencyKey": "fb-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "Echo: anyone?"
    );
    let meta = &fin["payload"]["result"]["meta"];
    assert_eq!(meta["agentMeta"]["provider"], "backup", "{meta}");
    assert_eq!(meta["agentMeta"]["model"], "backup-1", "{meta}");
    assert_eq!(meta["fallbacks"], 1, "{meta}");
    assert_eq!((gw.model.requests().len(), backup.requests().len()), (9, 1));
    assert_eq!(backup.requests()[0].body["model"], "backup-1");
    let status = c
        .agent_event("fb-1", |p| {
            p["stream"] == "run_status" && p["data"]["phase"] == "fallback"
        })
        .await;
    assert_eq!(
        status["payload"]["data"]["reason"], "server_error",
        "{status}"
    );
    let wait = c.call("agent.wait", json!({"runId": "fb-1"})).await;
    assert_eq!(
        (
            &wait["payload"]["provider"],
            &wait["payload"]["model"],
            &wait["payload"]["fallbacks"]
        ),
        (&json!("backup"), &json!("backup-1"), &json!(1)),
        "{wait}"
    );

    // A model the request names is strict: no fallback, as in OpenClaw.
    for _ in 0..9 {
        gw.model.push(http(503, None));
    }
    let (_, fin) = c
        .turn(
            json!({"message": "strict", "idempotencyKey": "fb-2", "model": "scripted/scripted-1"}),
        )
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    assert_eq!(backup.requests().len(), 1, "the fallback was not asked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_stalled_past_its_deadline_hands_over_and_an_abort_stops_all_r_b5() {
    let (gw, backup) = with_fallback(0.5).await;
    let mut c = gw.connect().await;
    // The primary sends nothing at all: past the attempt's idle deadline the fallback runs,
    // with a fresh budget (its own 503 is retried).
    gw.model.push(Step::Stall {
        text: "never".into(),
        chunks: 1,
        after_chunks: 0,
    });
    backup.push(http(503, None));
    let (_, fin) = c
        .turn(json!({"message": "slow", "idempotencyKey": "st-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["meta"]["agentMeta"]["provider"],
        "backup"
    );
    assert_eq!(backup.requests().len(), 2);
    let handover = c
        .agent_event("st-1", |p| p["data"]["phase"] == "fallback")
        .await;
    assert_eq!(handover["payload"]["data"]["reason"], "timeout");

    // The user stops the run while the fallback is answering: nothing more is asked.
    gw.model.push(Step::Stall {
        text: "never".into(),
        chunks: 1,
        after_chunks: 0,
    });
    // It streams its first words (so the run is surely on it), then holds.
    backup.push(Step::Hold {
        text: "held reply".into(),
        chunks: 2,
        after_chunks: 1,
    });
    let id = c
        .send(
            "agent",
            json!({"message": "stop me", "idempotencyKey": "st-2", "sessionKey": "main"}),
        )
        .await;
    c.agent_event("st-2", |p| p["data"]["phase"] == "fallback")
        .await;
    c.agent_event("st-2", |p| p["stream"] == "assistant").await;
    let r = c
        .call("chat.abort", json!({"sessionKey": "main", "runId": "st-2"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let fin = c
        .wait_for(|f| {
            f["type"] == "res" && f["id"] == id.as_str() && f["payload"]["summary"].is_string()
        })
        .await;
    assert_eq!(fin["payload"]["summary"], "aborted", "{fin}");
    assert_eq!((gw.model.requests().len(), backup.requests().len()), (2, 3));
}

/// Issue 26 item 6 (R-B4, R-B5): the execution deadline is the model attempt's. A primary
/// that keeps the stream alive (so the idle timeout never strikes) but says nothing past
/// the run's `timeout` hands the request to the fallback with a fresh budget, instead of
/// ending the run `timeout`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_past_its_execution_deadline_hands_over_with_a_fresh_budget_r_b5() {
    let (gw, backup) = with_fallback(30.0).await;
    let mut c = gw.connect().await;
    gw.model.push(Step::Stall {
        text: "never".into(),
        chunks: 1,
        after_chunks: 0,
    });
    let (_, fin) = c
        .turn(json!({"message": "slow", "idempotencyKey": "ed-1", "timeout": 1}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let meta = &fin["payload"]["result"]["meta"];
    assert_eq!(meta["agentMeta"]["provider"], "backup", "{meta}");
    assert_eq!(backup.requests().len(), 1);
    let handover = c.agent_event("ed-1", |p| p["stream"] == "run_status").await;
    assert_eq!(
        handover["payload"]["data"]["reason"], "timeout",
        "{handover}"
    );
}
