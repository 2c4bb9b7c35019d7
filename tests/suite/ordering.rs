//! Delivery order on the real socket (issue 11; `docs/protocol.md`, "Ordering"): a run's
//! terminal events come before its final `agent` response and its `agent.wait` answers; a
//! session's next run starts, for every client, after the previous run's terminal events; and
//! messages sent back to back on one connection run and are recorded in send order.

use loopgate_tests::{Client, Gateway};
use serde_json::{json, Value};

/// Index in `seen` of the first frame matching `pred`.
fn position(seen: &[Value], what: &str, pred: impl Fn(&Value) -> bool) -> usize {
    seen.iter()
        .position(pred)
        .unwrap_or_else(|| panic!("no {what} among {} frames", seen.len()))
}

fn is_event(f: &Value, name: &str, run: &str, pred: impl Fn(&Value) -> bool) -> bool {
    f["type"] == "event"
        && f["event"] == name
        && f["payload"]["runId"] == run
        && pred(&f["payload"])
}

fn lifecycle(f: &Value, run: &str, phase: &str) -> bool {
    is_event(f, "agent", run, |p| {
        p["stream"] == "lifecycle" && p["data"]["phase"] == phase
    })
}

fn chat_final(f: &Value, run: &str) -> bool {
    is_event(f, "chat", run, |p| p["state"] == "final")
}

fn response(f: &Value, id: &str) -> bool {
    f["type"] == "res" && f["id"] == id
}

/// R-A5, R-D1: in 200 turns, on the sending connection and on one that only waits, the run's
/// `lifecycle end` and chat `final` always come before the final `agent` response and the
/// `agent.wait` answer. Before, the final overtook them in most turns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminal_events_come_before_the_final_response_and_waits_r_a5() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let mut w = gw.connect().await;
    for i in 0..200 {
        let run = format!("order-{i}");
        let id = c
            .send(
                "agent",
                json!({"message": format!("turn {i}"), "idempotencyKey": run}),
            )
            .await;
        let accepted = c.res(&id).await;
        assert_eq!(accepted["payload"]["status"], "accepted", "{accepted}");
        let wait = w
            .send("agent.wait", json!({"runId": run, "timeoutMs": 30_000}))
            .await;
        let fin = c.res(&id).await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
        let waited = w.res(&wait).await;
        assert_eq!(waited["payload"]["status"], "ok", "{waited}");
        for (who, client, answer) in [("agent", &c, &id), ("agent.wait", &w, &wait)] {
            let seen = &client.seen;
            let answered = position(seen, "answer", |f| {
                response(f, answer) && f["payload"]["status"] == "ok"
            });
            let end = position(seen, "lifecycle end", |f| lifecycle(f, &run, "end"));
            let fin = position(seen, "chat final", |f| chat_final(f, &run));
            assert!(
                end < answered && fin < answered,
                "turn {i}: the {who} answer (frame {answered}) came before lifecycle end ({end}) or chat final ({fin})"
            );
        }
        c.seen.clear();
        w.seen.clear();
        c.backlog.clear();
        w.backlog.clear();
    }
    gw.logs.assert_clean(&[]);
}

/// The runs' delivered lifecycle on one client: every run's `start` after the previous run's
/// `end`, and the runs in `order`.
fn assert_no_overlap(client: &Client, order: &[String], who: &str) {
    let seen = &client.seen;
    let mut previous_end = None;
    for run in order {
        let start = position(seen, "lifecycle start", |f| lifecycle(f, run, "start"));
        let end = position(seen, "lifecycle end", |f| lifecycle(f, run, "end"));
        let fin = position(seen, "chat final", |f| chat_final(f, run));
        if let Some((prev, prev_end, prev_fin)) = previous_end {
            assert!(
                start > prev_end && start > prev_fin,
                "{who}: {run} started (frame {start}) before {prev} ended (frames {prev_end}, {prev_fin})"
            );
        }
        previous_end = Some((run.clone(), end, fin));
    }
}

/// R-B2, R-C6: bursts of 10 messages sent back to back on one connection to one session run
/// one after another in send order: no client sees run k+1 start before run k's terminal
/// events, and the transcript holds them in send order. Before, the transcript was out of
/// order in every burst and lifecycle overlapped in about 1 of 6 transitions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_on_one_session_runs_and_is_recorded_in_send_order_r_b2() {
    let gw = Gateway::start().await;
    let mut observer = gw.connect().await;
    let mut c = gw.connect().await;
    let mut sent = Vec::new();
    for burst in 0..5 {
        let mut ids = Vec::new();
        let mut runs = Vec::new();
        for i in 0..10 {
            let run = format!("burst-{burst}-{i}");
            let method = if i % 2 == 0 { "agent" } else { "chat.send" };
            // `agent` and `chat.send` take the same fields here; each message is its own
            // turn (R-B2), not steered into the one running.
            let params = json!({"message": run, "idempotencyKey": run, "sessionKey": "burst", "queueMode": "followup"});
            ids.push((method, c.send(method, params).await));
            runs.push(run.clone());
            sent.push(run);
        }
        for (method, id) in &ids {
            let first = c.res(id).await;
            assert_eq!(first["ok"], true, "{first}");
            if *method == "agent" {
                let fin = c.res(id).await;
                assert_eq!(fin["payload"]["status"], "ok", "{fin}");
            }
        }
        let last = runs.last().unwrap().clone();
        c.wait_for(|f| chat_final(f, &last)).await;
        observer.wait_for(|f| chat_final(f, &last)).await;
        assert_no_overlap(&c, &runs, "sender");
        assert_no_overlap(&observer, &runs, "observer");
    }
    let h = c
        .call(
            "chat.history",
            json!({"sessionKey": "burst", "limit": 1000}),
        )
        .await;
    let users: Vec<String> = h["payload"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(
        users, sent,
        "the transcript holds the messages in send order"
    );
    gw.logs.assert_clean(&[]);
}

/// Open file descriptors of process `pid`.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// A client that disconnects while its `agent` request waits for the run does not leave its
/// connection behind: once the run ends, the supervisor's descriptors are back where they
/// were. Before, the request waited for good on the connection's stopped event forwarder,
/// holding the socket (256 such disconnects locked out the unix socket, the CLI included).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gone_mid_run_leaves_nothing_behind_r_a5() {
    let gw = Gateway::start().await;
    let mut watcher = gw.connect().await;
    // Warm up: the worker and its link exist before the baseline.
    let (_, fin) = watcher
        .turn(json!({"message": "warm", "idempotencyKey": "gone-0"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let baseline = fds(gw.pid());
    for i in 0..3 {
        gw.model.push(scripted_model::Step::Hold {
            text: "held".into(),
            chunks: 2,
            after_chunks: 1,
        });
        let run = format!("gone-{}", i + 1);
        let mut c = gw.connect().await;
        c.start_streaming(json!({"message": "hi", "idempotencyKey": run}))
            .await;
        drop(c);
        gw.model.release();
        let w = watcher
            .call("agent.wait", json!({"runId": run, "timeoutMs": 30_000}))
            .await;
        assert_eq!(w["payload"]["status"], "ok", "{w}");
    }
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while fds(gw.pid()) > baseline {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} descriptors, {baseline} before the disconnects",
            fds(gw.pid())
        );
        tokio::task::yield_now().await;
    }
    gw.logs.assert_clean(&[]);
}
