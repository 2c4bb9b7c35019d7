//! Hostile input from clients (issue 23, the last Deliver bullet): session keys that would
//! fake what an operator reads, requests for hosts the gateway is not, more queued work than
//! memory allows, and a request text that serde cannot read as a string.

use loopgate_tests::Gateway;
use serde_json::json;

/// Item 1: keys with ESC/OSC sequences, DEL, C1 controls or bidi marks are refused with
/// INVALID_REQUEST by every method that takes a client-chosen key (they were accepted, then
/// printed raw by `loopgate sessions` and `loopgate approvals list`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_keys_with_controls_are_refused_issue_23() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let keys = [
        "evil\u{1b}[2J\u{1b}[Hfake",
        "osc\u{1b}]0;title\u{7}",
        "del\u{7f}",
        "csi\u{9b}31m",
        "rtl\u{202E}gpj.exe",
        "iso\u{2066}x\u{2069}",
        "mark\u{200F}",
    ];
    for key in keys {
        let calls = [
            (
                "agent",
                json!({"message": "hi", "idempotencyKey": format!("k-{}", key.len()), "sessionKey": key}),
            ),
            (
                "chat.send",
                json!({"message": "hi", "idempotencyKey": format!("c-{}", key.len()), "sessionKey": key}),
            ),
            ("chat.history", json!({"sessionKey": key})),
            ("sessions.patch", json!({"key": key, "label": "x"})),
            ("sessions.reset", json!({"key": key})),
            ("sessions.delete", json!({"key": key})),
            ("sessions.preview", json!({"keys": [key]})),
        ];
        for (method, params) in calls {
            let r = c.call(method, params).await;
            assert_eq!(r["ok"], false, "{method} {key:?}: {r}");
            assert_eq!(
                r["error"]["code"], "INVALID_REQUEST",
                "{method} {key:?}: {r}"
            );
            let msg = r["error"]["message"].as_str().unwrap_or("");
            assert!(
                msg.contains("control or bidirectional"),
                "{method} {key:?}: {r}"
            );
        }
    }
    // Nothing was recorded under such a key.
    let list = c.call("sessions.list", json!({})).await;
    assert_eq!(list["payload"]["count"], 0, "{list}");
    gw.logs.assert_clean(&[]);
}

/// Item 1: a key an older version stored with escapes and bidi marks still prints safely:
/// `loopgate sessions` (table and `--json`) escapes them visibly, it does not send them to
/// the terminal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_keys_with_controls_print_escaped_issue_23() {
    let gw = Gateway::start().await;
    let legacy = "agent:main:x\u{1b}[2J\u{1b}]0;pwned\u{7}\u{202E}y\u{9b}1m\nfake-row";
    {
        let db = rusqlite::Connection::open(gw.state().join("gateway.sqlite")).unwrap();
        db.busy_timeout(std::time::Duration::from_secs(5)).unwrap();
        db.execute(
            "INSERT INTO sessions(session_key, agent_id, created_at, updated_at, last_run_id)
             VALUES (?1, 'main', 1, 1, ?2)",
            rusqlite::params![legacy, "run\u{1b}[31m"],
        )
        .unwrap();
    }
    for args in [&["sessions"][..], &["sessions", "--json"][..]] {
        let out = gw.cli(args).await;
        assert!(out.status.success(), "{args:?}: {out:?}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text
                .chars()
                .any(|ch| ch != '\n' && ipc::text::is_unshowable(ch)),
            "{args:?} printed a control or bidi character: {text:?}"
        );
        assert!(
            text.contains("x\\u001b[2J\\u001b]0;pwned\\u0007\\u202ey\\u009b1m"),
            "{args:?}: {text}"
        );
        if args.len() == 1 {
            assert!(text.contains("\\u000afake-row"), "{text}");
            assert!(text.contains("run\\u001b[31m"), "{text}");
        } else {
            // Still JSON, with the same key in it.
            let line = text.lines().next().unwrap();
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            assert_eq!(v["sessions"][0]["key"], legacy, "{v}");
        }
    }
    gw.logs.assert_clean(&[]);
}

/// One HTTP/1.1 request to the gateway's WebSocket port with `host` as its `Host` header
/// (and `extra` header lines); returns the status code.
async fn status_for_host(gw: &Gateway, path: &str, host: &str, extra: &[&str]) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(gw.ws_addr()).await.unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n");
    if extra.is_empty() {
        req.push_str("Connection: close\r\n");
    }
    for h in extra {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    // The status line is enough (an accepted upgrade stays open).
    let mut buf = Vec::new();
    let mut chunk = [0u8; 1024];
    while !buf.windows(2).any(|w| w == b"\r\n") {
        let n = tokio::time::timeout(loopgate_tests::WAIT, s.read(&mut chunk))
            .await
            .expect("an answer")
            .unwrap();
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    head.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// Item 2: on a loopback bind, `/metrics`, the Control UI and WebSocket upgrades answered
/// any `Host`, so a page whose name was re-pointed at 127.0.0.1 (DNS rebinding) could read
/// agent ids and activity. Now only localhost, loopback addresses and
/// `gateway.allowed_hosts` are answered, with any port; others get 421.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_bind_answers_only_local_or_allowed_hosts_issue_23() {
    use std::os::unix::fs::PermissionsExt;
    let ui = tempfile::tempdir().unwrap();
    let root = ui.path().join("control-ui");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("index.html"), "<!doctype html><title>ui</title>").unwrap();
    for p in [ui.path(), root.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let gw = Gateway::start_gateway_keys(
        "allowed_hosts = [\"gw.test\"]\n",
        &format!(
            "\n[gateway.metrics]\nenabled = true\n\n[gateway.control_ui]\nroot = \"{}\"\nbase_path = \"/ui\"\n",
            root.display()
        ),
    )
    .await;
    let port = gw.ws_addr().rsplit(':').next().unwrap().to_owned();
    let upgrade = [
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    ];
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
        "localhost".to_owned(),
        format!("gw.test:{port}"),
    ] {
        assert_eq!(
            status_for_host(&gw, "/metrics", &host, &[]).await,
            200,
            "{host}"
        );
        assert_eq!(
            status_for_host(&gw, "/ui/", &host, &[]).await,
            200,
            "{host}"
        );
    }
    for host in [
        format!("evil.example:{port}"),
        format!("127.0.0.1.evil.example:{port}"),
        "attacker.test".to_owned(),
    ] {
        for path in ["/metrics", "/ui/", "/ui/control-ui-config.json", "/readyz"] {
            assert_eq!(
                status_for_host(&gw, path, &host, &[]).await,
                421,
                "{host} {path}"
            );
        }
        // The rebinding page's WebSocket carries its own name as Host and Origin (same
        // origin, so the origin rule let it through).
        let origin = format!("Origin: http://{host}");
        let mut headers = upgrade.to_vec();
        headers.push(&origin);
        assert_eq!(
            status_for_host(&gw, "/", &host, &headers).await,
            421,
            "{host} upgrade"
        );
    }
    // A local upgrade still works.
    let local_origin = format!("Origin: http://127.0.0.1:{port}");
    let mut headers = upgrade.to_vec();
    headers.push(&local_origin);
    assert_eq!(
        status_for_host(&gw, "/", &format!("127.0.0.1:{port}"), &headers).await,
        101
    );
    gw.logs
        .assert_clean(&["Refused a request for another host (421)."]);
}

/// Item 3: messages waiting for a busy session were capped per session only (800 of 256 KiB
/// over 40 sessions took the supervisor from 15 to 230 MB). Now past
/// `messages.queue.max_queued_per_agent` (and the byte and global limits) a message is
/// refused `UNAVAILABLE`, retryable, before it is recorded; a session's first message still
/// runs, and once the queue drains the retry is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_messages_are_bounded_per_agent_issue_23() {
    use loopgate_tests::{hold, reply};
    let gw =
        Gateway::start_with("[messages.queue]\nmode = \"followup\"\nmax_queued_per_agent = 3\n")
            .await;
    gw.model.push(hold("busy"));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "q-0", "sessionKey": "q"}))
        .await;
    let big = "x".repeat(256 * 1024);
    let mut queued = Vec::new();
    for i in 1..=3 {
        let id = c
            .send(
                "agent",
                json!({"message": big, "idempotencyKey": format!("q-{i}"), "sessionKey": "q"}),
            )
            .await;
        let ack = c.res(&id).await;
        assert_eq!(ack["payload"]["status"], "accepted", "{ack}");
        queued.push(id);
    }
    let over = json!({"message": big, "idempotencyKey": "q-4", "sessionKey": "q"});
    let refused = c.call("agent", over.clone()).await;
    assert_eq!(refused["ok"], false, "{refused}");
    assert_eq!(refused["error"]["code"], "UNAVAILABLE", "{refused}");
    assert_eq!(refused["error"]["retryable"], true, "{refused}");
    assert_eq!(
        refused["error"]["details"]["reason"], "queue-full",
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("max_queued_per_agent is 3"),
        "{refused}"
    );
    // Not recorded: the same key is free for the retry.
    let r = c
        .call("agent.wait", json!({"runId": "q-4", "timeoutMs": 0}))
        .await;
    assert_ne!(r["payload"]["status"], "ok", "{r}");
    // Another session's first message does not wait, so it is not refused.
    gw.model.push(reply("other"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "o-1", "sessionKey": "other"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.model.release();
    assert_eq!(c.res(&first).await["payload"]["status"], "ok");
    for id in &queued {
        let f = c.res(id).await;
        assert_eq!(f["payload"]["status"], "ok", "{f}");
    }
    let (ack, fin) = c.turn(over).await;
    assert_eq!(ack["payload"]["status"], "accepted", "{ack}");
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
}

/// The provider line cap as docs/operations.md states it (Security, "A model provider"), in
/// bytes.
fn documented_line_cap() -> u64 {
    let ops = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/operations.md"),
    )
    .unwrap();
    let row = ops
        .lines()
        .find(|l| l.starts_with("| **A model provider**"))
        .expect("the provider row of the Security table");
    let after = row.split("up to ").nth(1).expect("a line cap");
    let mib: u64 = after
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("a number of MiB");
    assert!(after.starts_with(&format!("{mib} MiB")), "{after}");
    mib << 20
}

/// Item 4: the docs said a provider line may be 16 MiB; the worker refuses past 8 MiB. A
/// line just past the documented cap is refused, and the error names the documented cap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_documented_provider_line_cap_is_the_enforced_one_issue_23() {
    let cap = documented_line_cap();
    let gw = Gateway::start().await;
    gw.model.push(scripted_model::Step::Flood {
        bytes: cap + (64 << 10),
    });
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "go", "idempotencyKey": "line-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let err = fin["payload"]["error"].as_str().unwrap_or_default();
    assert!(
        err.contains(&format!("line longer than {cap} bytes")),
        "documented {cap} bytes, enforced: {err}"
    );
    gw.logs.assert_clean(&["line longer than"]);
}

/// Reads frames until the response to `id`, for at most 5 s; `None` if none came.
async fn answer_within_5s(c: &mut loopgate_tests::Client, id: &str) -> Option<serde_json::Value> {
    let id = id.to_owned();
    tokio::time::timeout(
        std::time::Duration::from_secs(5),
        c.wait_for(move |f| f["type"] == "res" && f["id"] == id.as_str()),
    )
    .await
    .ok()
}

/// Item 5: a `chat.history` request whose key is a lone surrogate (`"\ud800"` in the JSON
/// text, which no UTF-8 string can hold) and whose `limit` is `1e308` got no response within
/// 5 s. Each kind of frame now gets a typed answer, on the WebSocket and the unix socket, and
/// the connection keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_surrogate_or_huge_limit_gets_an_answer_issue_23() {
    let gw = Gateway::start().await;
    let token = gw.token();
    let (ws, res) = loopgate_tests::Client::ws_connect(
        &gw.ws_addr(),
        loopgate_tests::client::cli_params(Some(&token)),
        None,
    )
    .await;
    assert_eq!(res.unwrap()["ok"], true);
    let unix = gw.connect().await;
    let frames = [
        (
            "s1",
            r#"{"type":"req","id":"s1","method":"chat.history","params":{"sessionKey":"\ud800","limit":1e308}}"#,
            "INVALID_REQUEST",
        ),
        (
            "s2",
            r#"{"type":"req","id":"s2","method":"chat.history","params":{"sessionKey":"\ud800"}}"#,
            "INVALID_REQUEST",
        ),
        (
            "s3",
            r#"{"type":"req","id":"s3","method":"chat.history","params":{"sessionKey":"main","limit":1e308}}"#,
            "INVALID_REQUEST",
        ),
        (
            "s5",
            r#"{"type":"req","id":"s5","method":"chat.history","params":{"sessionKey":"main","limit":4294967296}}"#,
            "INVALID_REQUEST",
        ),
        (
            "s4",
            r#"{"type":"req","id":"s4","method":"agent","params":{"message":"a\udfffb","idempotencyKey":"x"}}"#,
            "INVALID_REQUEST",
        ),
    ];
    for mut c in [ws, unix] {
        for (id, frame, code) in frames {
            c.send_line(frame).await;
            let r = answer_within_5s(&mut c, id)
                .await
                .unwrap_or_else(|| panic!("no answer within 5 s to {frame}"));
            assert_eq!(r["ok"], false, "{frame}: {r}");
            assert_eq!(r["error"]["code"], code, "{frame}: {r}");
            let msg = r["error"]["message"].as_str().unwrap_or("");
            if frame.contains("\\ud") {
                assert!(msg.contains("lone surrogate"), "{frame}: {r}");
            } else {
                assert!(msg.contains("chat.history params"), "{frame}: {r}");
            }
        }
        // Still serving.
        let h = c.call("chat.history", json!({"sessionKey": "main"})).await;
        assert_eq!(h["ok"], true, "{h}");
    }
}
