//! Run control as clients see it (issue 13): what a wait on a queued run says, and the
//! lifecycle's `finishing` between model work and the recorded outcome.

use loopgate_tests::{hold, Gateway};
use scripted_model::Step;
use serde_json::json;

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

fn frames_of<'a>(c: &'a loopgate_tests::Client, run_id: &'a str) -> Vec<&'a serde_json::Value> {
    c.seen
        .iter()
        .filter(|f| f["type"] == "event" && f["payload"]["runId"] == run_id)
        .collect()
}

/// R-A5: `chat.abort` is terminal at once, even while the run's worker cannot act (it is
/// stopped here): chat `aborted` with the caller's stop reason and the lifecycle terminal,
/// numbered after what clients saw, and the outcome for waiters. The worker cleans up
/// behind it once it runs again; nothing of the run reaches clients after its terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_is_terminal_at_once_while_the_worker_cleans_up_r_a5() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let gw = Gateway::start().await;
    gw.model.push(hold("partial answ"));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "ab-1", "sessionKey": "ab"}))
        .await;
    let pid = gw.worker_pid("main").await.unwrap();
    kill(Pid::from_raw(pid as i32), Signal::SIGSTOP).unwrap();
    let r = c.call("chat.abort", json!({"sessionKey": "ab"})).await;
    assert_eq!(r["payload"]["aborted"], true, "{r}");
    assert_eq!(r["payload"]["runIds"], json!(["ab-1"]), "{r}");
    let aborted = c.chat_event("ab-1", |p| p["state"] == "aborted").await;
    assert_eq!(aborted["payload"]["stopReason"], "rpc", "{aborted}");
    let end = c
        .agent_event("ab-1", |p| p["data"]["phase"] == "error")
        .await;
    assert_eq!(end["payload"]["data"]["aborted"], true, "{end}");
    let last_before = frames_of(&c, "ab-1")
        .iter()
        .filter(|f| f["event"] == "agent" && f["payload"]["stream"] != "lifecycle")
        .filter_map(|f| f["payload"]["seq"].as_u64())
        .max()
        .unwrap_or(0);
    assert!(
        end["payload"]["seq"].as_u64() > Some(last_before),
        "numbered after the deltas: {end}"
    );
    let fin = c.res(&first).await;
    assert_eq!(fin["payload"]["summary"], "aborted", "{fin}");
    assert_eq!(fin["payload"]["stopReason"], "rpc", "{fin}");
    // The worker runs again: it ends its run (recorded in its transcript), and the
    // session's next turn runs after it.
    kill(Pid::from_raw(pid as i32), Signal::SIGCONT).unwrap();
    gw.model.push(loopgate_tests::reply("next one"));
    let (_, next) = c
        .turn(json!({"message": "two", "idempotencyKey": "ab-2", "sessionKey": "ab"}))
        .await;
    assert_eq!(next["payload"]["status"], "ok", "{next}");
    let terminals: Vec<_> = frames_of(&c, "ab-1")
        .into_iter()
        .filter(|f| {
            f["payload"]["state"] == "aborted"
                || f["payload"]["state"] == "error"
                || f["payload"]["data"]["phase"] == "error"
                || f["payload"]["data"]["phase"] == "end"
        })
        .collect();
    assert_eq!(
        terminals.len(),
        2,
        "one lifecycle and one chat terminal: {terminals:?}"
    );
    let after_terminal = c
        .seen
        .iter()
        .skip_while(|f| !(f["event"] == "chat" && f["payload"]["state"] == "aborted"))
        .skip(1)
        .filter(|f| f["type"] == "event" && f["payload"]["runId"] == "ab-1")
        .count();
    assert_eq!(after_terminal, 0, "nothing of the run after its terminal");
    gw.logs.assert_clean(&[]);
}

/// R-A5: an abort while the run's worker restarts gracefully (it is draining, finishing its
/// runs) is honoured: the run ends aborted at once, the draining worker gets the cancel, so
/// the restart completes without waiting out the drain deadline.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_during_a_graceful_worker_restart_is_honoured_r_a5() {
    let gw = Gateway::start().await;
    gw.model.push(hold("long answ"));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "rs-1", "sessionKey": "rs"}))
        .await;
    let restart = gw.cli(&["worker", "restart", "main"]);
    let abort = async {
        gw.logs.wait_for("Restarting worker (operator).").await;
        let r = c.call("chat.abort", json!({"sessionKey": "rs"})).await;
        assert_eq!(r["payload"]["aborted"], true, "{r}");
        let aborted = c.chat_event("rs-1", |p| p["state"] == "aborted").await;
        assert_eq!(aborted["payload"]["stopReason"], "rpc", "{aborted}");
        c.res(&first).await
    };
    let (out, fin) = tokio::join!(restart, abort);
    assert_eq!(fin["payload"]["summary"], "aborted", "{fin}");
    assert_eq!(
        out.status.code(),
        Some(0),
        "the drain ended with the aborted run: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The draining worker itself stopped the run (not its idle timeout, 30 s later).
    let (status, stop): (String, Option<String>) = gw
        .agent_db("main")
        .query_row(
            "SELECT status, stop_reason FROM runs WHERE run_id = 'rs-1'",
            [],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!((status.as_str(), stop.as_deref()), ("aborted", Some("rpc")));
    gw.model.push(loopgate_tests::reply("after the restart"));
    let (_, next) = c
        .turn(json!({"message": "two", "idempotencyKey": "rs-2", "sessionKey": "rs"}))
        .await;
    assert_eq!(next["payload"]["status"], "ok", "{next}");
}
