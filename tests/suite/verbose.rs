//! Verbose replies (issue 26 item 7, R-B1): a run's verbose level is its request's, else its
//! session's (`sessions.patch verboseLevel`, `/verbose`), else the agent's
//! `verbose_default`; `on` puts a summary line per tool call in the `agent` reply's payloads,
//! before the answer, `full` each tool's output too (OpenClaw's tool labels and format).

use loopgate_tests::{payload_texts, reply, tool_call, Client, Gateway};
use serde_json::{json, Value};

/// A run in `session` that reads `notes.txt` then answers; its final payloads.
async fn read_run(
    gw: &Gateway,
    c: &mut Client,
    session: &str,
    key: &str,
    extra: Value,
) -> Vec<String> {
    gw.model
        .push(tool_call("c1", "read", r#"{"path":"notes.txt"}"#));
    gw.model.push(reply("The word is plum."));
    let mut p =
        json!({"message": "what is the word?", "sessionKey": session, "idempotencyKey": key});
    if let (Some(p), Some(extra)) = (p.as_object_mut(), extra.as_object()) {
        p.extend(extra.clone());
    }
    let (_, fin) = c.turn(p).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    payload_texts(&fin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_levels_add_tool_summaries_to_the_reply_r_b1() {
    let gw = Gateway::start().await;
    std::fs::write(gw.workspace("main").join("notes.txt"), "the word is plum\n").unwrap();
    let mut c = gw.connect().await;
    // Off by default: the answer only.
    assert_eq!(
        read_run(&gw, &mut c, "v", "v-1", json!({})).await,
        ["The word is plum."]
    );

    // `/verbose on` sets the session's level.
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "v", "message": "/verbose on", "idempotencyKey": "v-2"}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    let fin = c.chat_event("v-2", |p| p["state"] == "final").await;
    assert_eq!(
        fin["payload"]["message"]["content"][0]["text"],
        "⚙️ Verbose logging enabled."
    );
    let list = c.call("sessions.list", json!({"search": "v"})).await;
    let row = list["payload"]["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|r| r["key"] == "agent:main:v"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["verboseLevel"], "on", "{row}");
    assert_eq!(
        read_run(&gw, &mut c, "v", "v-3", json!({})).await,
        ["📖 Read: `notes.txt`", "The word is plum."]
    );

    // `full` (sessions.patch) shows the output too; the request's own level wins.
    let patched = c
        .call(
            "sessions.patch",
            json!({"key": "agent:main:v", "verboseLevel": "full"}),
        )
        .await;
    assert_eq!(patched["ok"], true, "{patched}");
    assert_eq!(
        read_run(&gw, &mut c, "v", "v-4", json!({})).await,
        [
            "📖 Read: `notes.txt`",
            "📖 Read: `notes.txt`\n```txt\nthe word is plum\n```",
            "The word is plum."
        ]
    );
    assert_eq!(
        read_run(&gw, &mut c, "v", "v-5", json!({"verbose": "off"})).await,
        ["The word is plum."]
    );
    let bad = c
        .call(
            "sessions.patch",
            json!({"key": "agent:main:v", "verboseLevel": "loud"}),
        )
        .await;
    assert_eq!(
        bad["error"]["message"],
        "invalid sessions.patch params: invalid verboseLevel (use \"on\"|\"off\"|\"full\")"
    );
    let cleared = c
        .call(
            "sessions.patch",
            json!({"key": "agent:main:v", "verboseLevel": null}),
        )
        .await;
    assert_eq!(cleared["ok"], true, "{cleared}");
    assert_eq!(
        read_run(&gw, &mut c, "v", "v-6", json!({})).await,
        ["The word is plum."]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_default_applies_and_survives_a_restart_of_the_session_setting_r_b1() {
    let mut gw = Gateway::start_with("\n[agents.list.main]\nverbose_default = \"on\"\n").await;
    std::fs::write(gw.workspace("main").join("notes.txt"), "plum\n").unwrap();
    let mut c = gw.connect().await;
    assert_eq!(
        read_run(&gw, &mut c, "d", "d-1", json!({})).await,
        ["📖 Read: `notes.txt`", "The word is plum."]
    );
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "d", "message": "/verbose off", "idempotencyKey": "d-2"}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    c.chat_event("d-2", |p| p["state"] == "final").await;
    drop(c);
    let status = gw.stop(nix::sys::signal::Signal::SIGTERM).await;
    assert!(status.success(), "{status:?}");
    gw.spawn().await;
    let mut c = gw.connect().await;
    assert_eq!(
        read_run(&gw, &mut c, "d", "d-3", json!({})).await,
        ["The word is plum."],
        "the session's own level is kept across a restart"
    );
}
