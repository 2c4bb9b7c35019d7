//! Slash commands typed as a chat message (issue 26 item 2): interpreted at admission as
//! OpenClaw does (recorded in `openclaw-observed/chat-surface-2026.9.6.md` section 2), never
//! sent to the model; `commands.list` lists exactly those. R-B1 (the session's thinking and
//! model), R-B3 (its queue mode), R-H1 (`/new` is the `command:new` reset).

use loopgate_tests::{hold, reply, Client, Gateway};
use serde_json::{json, Value};

/// Sends `text` with `key` on the session and returns its ack and its one chat `final`.
async fn command(c: &mut Client, session: &str, text: &str, key: &str) -> (Value, Value) {
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": session, "message": text, "idempotencyKey": key}),
        )
        .await;
    assert_eq!(
        ack["payload"],
        json!({"runId": key, "status": "started"}),
        "{ack}"
    );
    let fin = c.chat_event(key, |p| p["state"] == "final").await;
    (ack, fin["payload"].clone())
}

fn text(fin: &Value) -> &str {
    fin["message"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
}

async fn row(c: &mut Client, key: &str) -> Value {
    let list = c.call("sessions.list", json!({"search": key})).await;
    list["payload"]["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|r| r["key"] == format!("agent:main:{key}")))
        .cloned()
        .unwrap_or(Value::Null)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_change_the_session_and_never_reach_the_model_r_b3() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "cmds", "message": "hello first turn", "idempotencyKey": "c-0"}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    c.chat_event("c-0", |p| p["state"] == "final").await;
    let asked = gw.model.requests().len();

    let (_, fin) = command(&mut c, "cmds", "/queue followup", "c-1").await;
    assert_eq!(text(&fin), "⚙️ Queue mode set to followup.", "{fin}");
    let m = &fin["message"];
    assert_eq!(
        (
            &m["provider"],
            &m["model"],
            &m["stopReason"],
            &m["idempotencyKey"]
        ),
        (
            &json!("openclaw"),
            &json!("gateway-injected"),
            &json!("stop"),
            &json!("c-1")
        ),
        "{fin}"
    );
    assert_eq!(m["usage"]["totalTokens"], 0, "{fin}");
    assert_eq!(row(&mut c, "cmds").await["effectiveQueueMode"], "followup");

    let (_, fin) = command(&mut c, "cmds", "/think high", "c-2").await;
    assert_eq!(
        text(&fin),
        "Thinking level \"high\" is not supported for scripted/scripted-1. Use one of: off.",
        "{fin}"
    );
    let (_, fin) = command(&mut c, "cmds", "/reasoning stream", "c-3").await;
    assert_eq!(text(&fin), "⚙️ Reasoning stream enabled.", "{fin}");
    let (_, fin) = command(&mut c, "cmds", "/status", "c-4").await;
    for part in [
        "🦞 loopgate",
        "🧠 Model: scripted/scripted-1",
        "reasoning stream",
        "🪢 Queue: followup",
    ] {
        assert!(text(&fin).contains(part), "{part:?} missing: {fin}");
    }

    // `/new`: a fresh transcript, the session's queue mode dropped, its reasoning kept.
    let (_, fin) = command(&mut c, "cmds", "/new", "c-5").await;
    assert_eq!(text(&fin), "✅ New session started.", "{fin}");
    assert_eq!(
        fin["message"]["content"][0]["openclawStatusNotice"], true,
        "{fin}"
    );
    let r = row(&mut c, "cmds").await;
    assert_eq!(r["effectiveQueueMode"], "steer", "{r}");
    let h = c.call("chat.history", json!({"sessionKey": "cmds"})).await;
    let said: Vec<&str> = h["payload"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["content"][0]["text"].as_str())
        .collect();
    assert!(
        !said.contains(&"hello first turn"),
        "the old transcript is gone: {h}"
    );

    // No command asked the model, and none had a run of its own on the wire.
    assert_eq!(gw.model.requests().len(), asked);
    for key in ["c-1", "c-2", "c-3", "c-4", "c-5"] {
        let own: Vec<&Value> = c
            .seen
            .iter()
            .filter(|f| f["type"] == "event" && f["payload"]["runId"] == key)
            .collect();
        assert_eq!(
            own.len(),
            1,
            "{key}: one chat final and nothing else: {own:?}"
        );
    }

    // The key replays: the same send is answered `ok` and not run again; `agent.wait` knows it.
    let again = c
        .call(
            "chat.send",
            json!({"sessionKey": "cmds", "message": "/queue followup", "idempotencyKey": "c-1"}),
        )
        .await;
    assert_eq!(
        again["payload"],
        json!({"runId": "c-1", "status": "ok"}),
        "{again}"
    );
    let w = c
        .call("agent.wait", json!({"runId": "c-1", "timeoutMs": 1000}))
        .await;
    assert_eq!(w["payload"]["status"], "ok", "{w}");

    // A slash that is not a command, or a send that asks for no interpretation, is a message.
    for (i, (params, said)) in [
        (json!({"message": "/tmp/x is full"}), "/tmp/x is full"),
        (
            json!({"message": "/new", "suppressCommandInterpretation": true}),
            "/new",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let key = format!("c-text-{i}");
        let mut p = params;
        p["sessionKey"] = json!("cmds");
        p["idempotencyKey"] = json!(key);
        let before = gw.model.requests().len();
        c.call("chat.send", p).await;
        c.chat_event(&key, |p| p["state"] == "final").await;
        let got = gw.model.requests();
        assert_eq!(got.len(), before + 1, "{said:?} reached the model");
        assert!(got[before].body.to_string().contains(said), "{said:?}");
    }
}

/// `/stop` ends the session's run and is answered as `chat.abort` is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_aborts_the_running_turn_as_chat_abort_does() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    gw.model.push(hold("never finished"));
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "stopper", "message": "a slow one", "idempotencyKey": "s-1"}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    let delta = c.chat_event("s-1", |p| p["state"] == "delta").await;
    let streamed = delta["payload"]["message"]["content"][0]["text"].clone();
    let stop = c
        .call(
            "chat.send",
            json!({"sessionKey": "stopper", "message": "/stop", "idempotencyKey": "s-2"}),
        )
        .await;
    assert_eq!(
        stop["payload"],
        json!({"ok": true, "aborted": true, "runIds": ["s-1"]}),
        "{stop}"
    );
    // A stop is not an error (the Control UI shows an `errorMessage` as one); what had
    // streamed stays, and the stop reason is `/stop`'s, as OpenClaw's.
    let aborted = c.chat_event("s-1", |p| p["state"] == "aborted").await;
    assert!(
        aborted["payload"].get("errorMessage").is_none(),
        "{aborted}"
    );
    assert_eq!(aborted["payload"]["stopReason"], "stop", "{aborted}");
    assert_eq!(
        aborted["payload"]["message"]["content"][0]["text"], streamed,
        "{aborted}"
    );
    // Nothing to stop: answered, nothing aborted.
    let idle = c
        .call(
            "chat.send",
            json!({"sessionKey": "stopper", "message": "/stop", "idempotencyKey": "s-3"}),
        )
        .await;
    assert_eq!(idle["payload"]["aborted"], false, "{idle}");
}

/// A command applies to the messages sent after it on the connection, even back to back:
/// `/model` then a question asks the new model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_applies_to_the_next_message_sent_right_after_it_r_b1() {
    let (gw, second) = Gateway::start_with_second().await;
    let mut c = gw.connect().await;
    second.push(reply("from second"));
    let first = c
        .send(
            "chat.send",
            json!({"sessionKey": "pick", "message": "/model second/big-2", "idempotencyKey": "m-1"}),
        )
        .await;
    let next = c
        .send(
            "chat.send",
            json!({"sessionKey": "pick", "message": "which model?", "idempotencyKey": "m-2"}),
        )
        .await;
    c.res(&first).await;
    c.res(&next).await;
    let fin = c.chat_event("m-1", |p| p["state"] == "final").await;
    assert_eq!(
        text(&fin["payload"]),
        "⚙️ Session model set to second/big-2.",
        "{fin}"
    );
    c.chat_event("m-2", |p| p["state"] == "final").await;
    assert_eq!(
        second.requests().len(),
        1,
        "the question went to the new model"
    );
    assert_eq!(second.requests()[0].body["model"], "big-2");
    // Back to the agent's own model.
    let (_, fin) = command(&mut c, "pick", "/model scripted/scripted-1", "m-3").await;
    assert_eq!(
        text(&fin),
        "Session model reset to configured default (scripted/scripted-1).",
        "{fin}"
    );
}

/// `commands.list` names exactly the commands interpreted, in OpenClaw's entry shape.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_list_names_what_is_interpreted() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let r = c.call("commands.list", json!({})).await;
    let all = r["payload"]["commands"].as_array().expect("commands");
    let mut names: Vec<&str> = all.iter().filter_map(|e| e["name"].as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "commands",
            "compact",
            "help",
            "model",
            "new",
            "queue",
            "reasoning",
            "reset",
            "status",
            "stop",
            "think",
            "trace",
            "usage",
            "verbose"
        ]
    );
    // `/help` and `/commands` answer from the gateway (issue 39), never the model.
    for (text, first) in [("/help", "ℹ️ Help"), ("/commands", "ℹ️ Slash commands")] {
        let (_, fin) = c
            .turn(json!({"message": text, "sessionKey": "help", "idempotencyKey": text}))
            .await;
        let said = fin["payload"]["result"]["payloads"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(said.starts_with(first), "{said}");
    }
    assert!(gw.model.requests().is_empty(), "no model call");
    let new = all.iter().find(|e| e["name"] == "new").expect("new");
    assert_eq!(
        new,
        &json!({"name":"new","nativeName":"new","textAliases":["/new"],"description":"Start a new session.","category":"session","source":"native","scope":"both","acceptsArgs":true})
    );
    let bare = c.call("commands.list", json!({"includeArgs": false})).await;
    assert!(bare["payload"]["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .all(|e| e.get("args").is_none()));
    let meta = c.call("chat.metadata", json!({})).await;
    assert_eq!(
        meta["payload"]["commands"].as_array().map(Vec::len),
        Some(all.len())
    );
}

/// `openclaw agent --message /queue collect`: the same commands by `agent`, answered
/// `accepted` then by the final result with the reply as its payload; no model request;
/// the key replays that result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_by_agent_answer_with_their_reply_as_the_result() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let (accepted, fin) = c
        .turn(json!({"sessionKey": "cli", "message": "/queue collect", "idempotencyKey": "a-1"}))
        .await;
    assert_eq!(
        accepted["payload"]["sessionKey"], "agent:main:cli",
        "{accepted}"
    );
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"], "⚙️ Queue mode set to collect.",
        "{fin}"
    );
    assert_eq!(row(&mut c, "cli").await["effectiveQueueMode"], "collect");
    let again = c
        .call(
            "agent",
            json!({"sessionKey": "cli", "message": "/queue collect", "idempotencyKey": "a-1"}),
        )
        .await;
    assert_eq!(
        again["payload"], fin["payload"],
        "the key replays the result"
    );
    let (_, fin) = c
        .turn(json!({"sessionKey": "cli", "message": "/stop", "idempotencyKey": "a-2"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"], "⚙️ Nothing to stop.",
        "{fin}"
    );
    assert!(gw.model.requests().is_empty(), "no command asked the model");
}

/// The session's `chat.history` messages.
async fn history(c: &mut Client, session: &str) -> Vec<Value> {
    let h = c.call("chat.history", json!({"sessionKey": session})).await;
    h["payload"]["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// Commands are recorded as OpenClaw records them (`chat-surface-2026.9.6.md` section 2):
/// the command as a user row and the gateway's reply as an assistant row, shown by
/// `chat.history` (so a reload shows them); the model gets the command on the next turn,
/// never the reply; `/status` is recorded context-free; `/new` starts the new transcript
/// with its own two rows; `/stop` is not recorded; a command to a key with no transcript
/// makes the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_and_their_replies_are_recorded_in_history_r_b1() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    // A command to a key with no transcript yet makes the session (as the Control UI's
    // `/new` then a command does).
    command(&mut c, "rec", "/verbose off", "r-0").await;
    assert_eq!(history(&mut c, "rec").await.len(), 2);
    gw.model.push(reply("Hi."));
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "rec", "message": "hello", "idempotencyKey": "r-00"}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    c.chat_event("r-00", |p| p["state"] == "final").await;
    let (_, fin) = command(&mut c, "rec", "/verbose on", "r-1").await;
    let (_, status) = command(&mut c, "rec", "/status", "r-2").await;
    let mut rows = history(&mut c, "rec").await;
    assert_eq!(rows.len(), 8, "{rows:?}");
    rows.drain(..4);
    let shown: Vec<(&str, &str)> = rows
        .iter()
        .map(|m| {
            (
                m["role"].as_str().unwrap_or_default(),
                m["content"][0]["text"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(shown.len(), 4, "{rows:?}");
    assert_eq!(shown[0], ("user", "/verbose on"));
    assert_eq!(shown[1], ("assistant", "⚙️ Verbose logging enabled."));
    assert_eq!(shown[2], ("user", "/status"));
    assert_eq!(shown[3].0, "assistant");
    assert_eq!(shown[3].1, text(&status));
    // The user row names its request; the reply is the gateway's, at the place the live
    // `final` named.
    assert_eq!(rows[0]["idempotencyKey"], "r-1", "{}", rows[0]);
    assert_eq!(
        (&rows[1]["provider"], &rows[1]["model"]),
        (&json!("openclaw"), &json!("gateway-injected"))
    );
    assert_eq!(rows[1]["__openclaw"]["id"], fin["messageId"], "{fin}");
    assert_eq!(rows[1]["__openclaw"]["runId"], "r-1");
    // `/status` is context-free, as OpenClaw marks it.
    for m in &rows[2..4] {
        assert_eq!(m["excludeFromContext"], true, "{m}");
        assert_eq!(m["__openclaw"]["contextFreeCommand"], true, "{m}");
    }
    assert!(rows[1].get("excludeFromContext").is_none(), "{}", rows[1]);

    // The next turn: the model gets `/verbose on` as a user message, neither reply nor
    // `/status`.
    gw.model.push(reply("Noted."));
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "rec", "message": "and now?", "idempotencyKey": "r-3"}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    c.chat_event("r-3", |p| p["state"] == "final").await;
    let reqs = gw.model.requests();
    let sent = reqs.last().map(|r| r.body.to_string()).unwrap_or_default();
    assert!(sent.contains("/verbose on"), "{sent}");
    assert!(!sent.contains("Verbose logging enabled"), "{sent}");
    assert!(!sent.contains("/status") && !sent.contains("🦞"), "{sent}");

    // `/new`: the new transcript holds its own two rows only.
    let (_, fin) = command(&mut c, "rec", "/new", "r-4").await;
    assert_eq!(text(&fin), "✅ New session started.");
    let rows = history(&mut c, "rec").await;
    let shown: Vec<&str> = rows
        .iter()
        .filter_map(|m| m["content"][0]["text"].as_str())
        .collect();
    assert_eq!(shown, ["/new", "✅ New session started."], "{rows:?}");
    assert_eq!(rows[1]["content"][0]["openclawStatusNotice"], true);

    // `/stop` with nothing running: answered, not recorded.
    let stop = c
        .call(
            "chat.send",
            json!({"sessionKey": "rec", "message": "/stop", "idempotencyKey": "r-5"}),
        )
        .await;
    assert_eq!(stop["payload"]["ok"], true, "{stop}");
    assert_eq!(history(&mut c, "rec").await.len(), 2);
}

/// Inline directives (OpenClaw: "applies only to that message"): `/think high` in a longer
/// message runs that message with the level and sends the model the rest; the session's
/// level is unchanged, so the next message runs without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leading_directive_applies_to_its_message_only_r_b1() {
    let gw = Gateway::start_with(
        "[models.providers.scripted.models.\"scripted-1\"]\nreasoning = true\n",
    )
    .await;
    let mut c = gw.connect().await;
    for (key, text) in [
        ("in-1", "/think high what is 2+2?"),
        ("in-2", "and 3+3?"),
        ("in-3", "and 4+4? /t:low"),
    ] {
        gw.model.push(reply("Four."));
        let ack = c
            .call(
                "chat.send",
                json!({"sessionKey": "inline", "message": text, "idempotencyKey": key}),
            )
            .await;
        assert_eq!(ack["payload"]["status"], "started", "{ack}");
        let fin = c
            .chat_event(key, |p| p["state"] == "final" || p["state"] == "error")
            .await;
        assert_eq!(fin["payload"]["state"], "final", "{fin}");
    }
    let reqs = gw.model.requests();
    assert!(reqs.len() >= 3, "the messages reached the model");
    let (first, second, third) = (
        &reqs[reqs.len() - 3].body,
        &reqs[reqs.len() - 2].body,
        &reqs[reqs.len() - 1].body,
    );
    // Anywhere in the message, as on OpenClaw.
    assert_eq!(third["reasoning_effort"], "low", "{third}");
    assert!(!third.to_string().contains("/t:low"), "{third}");
    assert_eq!(first["reasoning_effort"], "high", "{first}");
    assert!(second.get("reasoning_effort").is_none(), "{second}");
    let users: Vec<String> = first["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .collect();
    assert!(
        users
            .last()
            .is_some_and(|u| u.contains("what is 2+2?") && !u.contains("/think")),
        "{users:?}"
    );
    assert_eq!(row(&mut c, "inline").await["thinkingLevel"], Value::Null);
}
