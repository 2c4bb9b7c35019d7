//! Run control as clients see it (issue 13): what a wait on a queued run says, and the
//! lifecycle's `finishing` between model work and the recorded outcome.

use loopgate_tests::Gateway;
use scripted_model::Step;
use serde_json::json;

fn hold(text: &str) -> Step {
    Step::Hold {
        text: text.into(),
        chunks: 2,
        after_chunks: 1,
    }
}

/// R-A2: a wait on a run still queued behind its session's earlier run ends as `pending` in
/// the `queue` phase, with the provider not started; once it runs, the wait gets its outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_a_queued_run_says_pending_in_the_queue_r_a2() {
    let gw = Gateway::start().await;
    gw.model.push(hold("first reply"));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "q-1", "sessionKey": "s"}))
        .await;
    let second = c
        .send(
            "agent",
            json!({"message": "two", "idempotencyKey": "q-2", "sessionKey": "s", "queueMode": "followup"}),
        )
        .await;
    let acc = c.res(&second).await;
    assert_eq!(acc["payload"]["status"], "accepted", "{acc}");
    let w = c
        .call("agent.wait", json!({"runId": "q-2", "timeoutMs": 200}))
        .await;
    assert_eq!(
        w["payload"],
        json!({"runId": "q-2", "status": "pending", "timeoutPhase": "queue", "providerStarted": false}),
        "{w}"
    );
    // The running one is not queued: its wait just times out.
    let w = c
        .call("agent.wait", json!({"runId": "q-1", "timeoutMs": 100}))
        .await;
    assert_eq!(
        w["payload"],
        json!({"runId": "q-1", "status": "timeout"}),
        "{w}"
    );
    // The CLI says to wait again (exit 2), as for a timeout.
    let out = gw.cli(&["wait", "q-2", "--timeout-ms", "100"]).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    gw.model.release();
    c.res(&first).await;
    let w = c
        .call("agent.wait", json!({"runId": "q-2", "timeoutMs": 10000}))
        .await;
    assert_eq!(w["payload"]["status"], "ok", "{w}");
    gw.logs.assert_clean(&[]);
}

/// R-C6: a session's row shows its last run's start, end and duration (OpenClaw's
/// `startedAt`, `endedAt`, `runtimeMs`), in `sessions.list` and in `chat.history`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_row_shows_its_last_runs_duration_r_c6() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "time me", "idempotencyKey": "d-1", "sessionKey": "dur"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let list = c.call("sessions.list", json!({})).await;
    let row = &list["payload"]["sessions"][0];
    let (started, ended) = (
        row["startedAt"].as_u64().unwrap(),
        row["endedAt"].as_u64().unwrap(),
    );
    assert!(ended >= started, "{row}");
    assert_eq!(row["runtimeMs"].as_u64(), Some(ended - started), "{row}");
    let hist = c.call("chat.history", json!({"sessionKey": "dur"})).await;
    assert_eq!(hist["payload"]["sessionInfo"]["endedAt"], ended, "{hist}");
}

/// R-A5: a run aborted while still queued behind its session's running one tells its
/// clients at once: chat `aborted` with the stop reason and a lifecycle terminal; the
/// running one goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_a_queued_run_publishes_its_terminal_r_a5() {
    let gw = Gateway::start().await;
    gw.model.push(hold("first reply"));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "qa-1", "sessionKey": "qa"}))
        .await;
    let second = c
        .send(
            "agent",
            json!({"message": "two", "idempotencyKey": "qa-2", "sessionKey": "qa", "queueMode": "followup"}),
        )
        .await;
    c.res(&second).await;
    let r = c
        .call("chat.abort", json!({"sessionKey": "qa", "runId": "qa-2"}))
        .await;
    assert_eq!(r["payload"]["aborted"], true, "{r}");
    let aborted = c.chat_event("qa-2", |p| p["state"] == "aborted").await;
    assert_eq!(aborted["payload"]["stopReason"], "rpc", "{aborted}");
    let end = c.agent_event("qa-2", |p| p["stream"] == "lifecycle").await;
    assert_eq!(end["payload"]["data"]["phase"], "error", "{end}");
    assert_eq!(end["payload"]["data"]["aborted"], true, "{end}");
    let fin = c.res(&second).await;
    assert_eq!(fin["payload"]["summary"], "aborted", "{fin}");
    gw.model.release();
    let fin = c.res(&first).await;
    assert_eq!(
        fin["payload"]["status"], "ok",
        "the running run went on: {fin}"
    );
    gw.logs.assert_clean(&[]);
}

/// R-B1: a run that fails with no text leaves its failure in history, written before its
/// chat `error` goes out, so a `chat.history` right after the error shows it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_leaves_its_notice_in_history_before_the_error_r_b1() {
    let gw = Gateway::start().await;
    gw.model.push(Step::HttpError {
        status: 400,
        message: "the provider refuses this".into(),
        retry_after_s: None,
    });
    let mut c = gw.connect().await;
    let id = c
        .send(
            "agent",
            json!({"message": "fail please", "idempotencyKey": "fn-1", "sessionKey": "fn"}),
        )
        .await;
    c.chat_event("fn-1", |p| p["state"] == "error").await;
    // Asked as soon as the error is seen, before the final response.
    let hist = c.call("chat.history", json!({"sessionKey": "fn"})).await;
    let last = hist["payload"]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["role"], "assistant", "{hist}");
    assert_eq!(last["stopReason"], "error", "{last}");
    assert!(
        last["errorMessage"]
            .as_str()
            .unwrap_or_default()
            .contains("the provider refuses this"),
        "{last}"
    );
    let fin = c
        .wait_for(|f| {
            f["type"] == "res" && f["id"] == id.as_str() && f["payload"]["summary"].is_string()
        })
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    // The next turn's model view does not carry the empty failed message.
    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "fn-2", "sessionKey": "fn"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let msgs = gw.model.requests()[1].body["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        !msgs
            .iter()
            .any(|m| m["role"] == "assistant" && m["content"] == ""),
        "{msgs:?}"
    );
}
