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
