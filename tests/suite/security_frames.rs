//! Hostile round four, item 1: a request costs about its size. Every frame was parsed whole
//! into a JSON tree before its method or its scope was known, on the threads that serve the
//! other connections: a read-only client's 4 MiB frame of tiny objects took the gateway
//! 700 MiB up, and three 12 MiB frames stalled `health` for seconds and got a worker killed
//! for missed heartbeats. Now a frame's structure is measured before anything is built from
//! it, params are parsed straight into their method's type, and large frames are parsed off
//! the runtime threads within per-connection and gateway-wide budgets.

use loopgate_tests::{hold, Client, Gateway};
use serde_json::{json, Value};

/// `health` whose params hold `n` tiny objects (`{"":0}`, 7 bytes of text each).
fn tiny_objects(id: &str, n: usize) -> String {
    let mut frame = format!(r#"{{"type":"req","id":"{id}","method":"health","params":{{"x":["#);
    frame.reserve(n * 7 + 8);
    for i in 0..n {
        if i > 0 {
            frame.push(',');
        }
        frame.push_str(r#"{"":0}"#);
    }
    frame.push_str("]}}");
    frame
}

/// The supervisor's peak resident memory so far, in bytes (`VmHWM`).
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kb * 1024
}

/// A client holding only `operator.read`, as any read-only token does.
async fn reader(gw: &Gateway) -> Client {
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.read"]);
    Client::connect_with(&gw.socket(), params).await
}

fn refused_for_its_shape(r: &Value) {
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
    let msg = r["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("invalid request frame: the frame is"),
        "{r}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_of_tiny_objects_costs_about_its_size_issue_37() {
    let gw = Gateway::start().await;
    let mut c = reader(&gw).await;
    // A first answer: the gateway has served a request, so its peak below is its own.
    assert_eq!(c.call("health", json!({})).await["ok"], true);
    let before = peak_rss(gw.pid());
    // 4 MiB of tiny objects (about 600 000 of them).
    let frame = tiny_objects("big", 4 * 1024 * 1024 / 7);
    c.send_line(&frame).await;
    let r = c.res("big").await;
    // The frame moved the peak by about its size (text read, then measured), not by the
    // 190-fold tree it would have become.
    let grew = peak_rss(gw.pid()).saturating_sub(before);
    assert!(
        grew < 64 * 1024 * 1024,
        "a 4 MiB frame raised the supervisor's peak RSS by {} MiB",
        grew / (1024 * 1024)
    );
    refused_for_its_shape(&r);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("arrays and objects"),
        "{r}"
    );
    // Nesting past the bound is refused the same way (and never reaches serde's recursion).
    let deep = format!(
        r#"{{"type":"req","id":"deep","method":"health","params":{{"x":{}1{}}}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    c.send_line(&deep).await;
    let r = c.res("deep").await;
    refused_for_its_shape(&r);
    assert!(peak_rss(gw.pid()).saturating_sub(before) < 64 * 1024 * 1024);
    // The connection keeps serving, and frames within the bounds are read as before.
    let ok = c.call("health", json!({"probe": false})).await;
    assert_eq!(ok["ok"], true, "{ok}");
    let mut other = gw.connect().await;
    assert_eq!(other.call("health", json!({})).await["ok"], true);
    gw.logs.assert_clean(&[]);
}

/// Three read-only clients send 8 MiB frames at once while another session's run streams:
/// every frame is answered, `health` on another connection answers, and the run's worker,
/// whose heartbeats share the gateway's threads, is not killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_frames_leave_other_connections_and_runs_alone_issue_37() {
    let gw = Gateway::start().await;
    gw.model.push(hold("streaming while frames arrive"));
    let mut c = gw.connect().await;
    let run = c
        .start_streaming(json!({"message": "go", "idempotencyKey": "r-frames", "sessionKey": "s"}))
        .await;
    let worker = gw.worker_pid("main").await;
    assert!(worker.is_some());
    let mut senders = Vec::new();
    for i in 0..3 {
        let mut r = reader(&gw).await;
        // One within the bounds (a long string any method skips) and one past them.
        let fits = format!(
            r#"{{"type":"req","id":"fits-{i}","method":"question.list","params":{{"pad":"{}"}}}}"#,
            "a".repeat(8 * 1024 * 1024)
        );
        let tiny = tiny_objects(&format!("tiny-{i}"), 8 * 1024 * 1024 / 7);
        senders.push(tokio::spawn(async move {
            r.send_line(&fits).await;
            r.send_line(&tiny).await;
            let fits = r.res(&format!("fits-{i}")).await;
            let tiny = r.res(&format!("tiny-{i}")).await;
            (fits, tiny)
        }));
    }
    let mut probe = gw.connect().await;
    for _ in 0..5 {
        assert_eq!(probe.call("health", json!({})).await["ok"], true);
    }
    for s in senders {
        let (fits, tiny) = s.await.unwrap();
        assert_eq!(fits["ok"], true, "{fits}");
        refused_for_its_shape(&tiny);
    }
    gw.model.release();
    let fin = c.res(&run).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        gw.worker_pid("main").await,
        worker,
        "the worker was replaced"
    );
    gw.logs.assert_clean(&[]);
}

/// Frames within the structural bounds whose params types built what nobody reads (found
/// by a hostile review): a million run ids in `chat.history`'s `inputRunIds` (built, then
/// copied, before the 50 check), a million keys in `sessions.preview` (64 read), a million
/// numbers in an unsupported `sessions.create` field (buffered whole by serde's flatten),
/// `spawnedBy` as a tree. Each is now read keeping only what is used.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn params_within_the_bounds_keep_only_what_is_read_issue_37() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    assert_eq!(c.call("health", json!({})).await["ok"], true);
    let before = peak_rss(gw.pid());
    let strings = || format!("[{}]", vec![r#""a""#; 1_000_000].join(","));
    let numbers = || format!("[{}]", vec!["0"; 1_000_000].join(","));
    let frames = [
        (
            "h",
            "chat.history",
            format!(r#"{{"sessionKey":"main","inputRunIds":{}}}"#, strings()),
        ),
        (
            "p",
            "sessions.preview",
            format!(r#"{{"keys":{}}}"#, strings()),
        ),
        (
            "c",
            "sessions.create",
            format!(r#"{{"key":"big","forkFrom":{}}}"#, numbers()),
        ),
        (
            "r",
            "sessions.resolve",
            format!(r#"{{"key":"main","spawnedBy":{}}}"#, numbers()),
        ),
    ];
    for (id, method, params) in &frames {
        c.send_line(&format!(
            r#"{{"type":"req","id":"{id}","method":"{method}","params":{params}}}"#
        ))
        .await;
        let r = c.res(id).await;
        // Answered (refused or not) without holding the connection.
        assert!(r["ok"].is_boolean(), "{method}: {r}");
    }
    let grew = peak_rss(gw.pid()).saturating_sub(before);
    assert!(
        grew < 64 * 1024 * 1024,
        "four frames of 2-4 MiB raised the supervisor's peak RSS by {} MiB",
        grew / (1024 * 1024)
    );
    // What the refusals say.
    let r = c
        .call(
            "chat.history",
            json!({"sessionKey": "main", "inputRunIds": vec!["x"; 51]}),
        )
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("at most 50"),
        "{r}"
    );
    let r = c
        .call(
            "sessions.create",
            json!({"key": "f", "forkFrom": [1], "visibility": "shared"}),
        )
        .await;
    assert_eq!(
        r["error"]["message"],
        "invalid sessions.create params: not supported by loopgate: forkFrom",
        "{r}"
    );
    gw.logs.assert_clean(&[]);
}
