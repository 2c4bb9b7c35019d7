//! `usage.cost` and `sessions.usage` (issue 39), as OpenClaw 2026.9.6 answers them
//! (`openclaw-observed/operator-surface-2026.9.6.md` section 10): totals equal the tokens the
//! scripted model reported, per agent, per session and per day, priced from the config.

use loopgate_tests::{hold, reply, Client, Gateway};
use serde_json::{json, Value};

const PRICED: &str = "[models.providers.scripted.models.\"scripted-1\"]\n\
    cost = { input = 3.0, output = 15.0 }\n[agents.list.ops]\n";

/// The usage the run's final result reports (what the model's stream said).
fn reported(fin: &Value) -> (u64, u64) {
    let u = &fin["payload"]["result"]["meta"]["agentMeta"]["usage"];
    let n = |k: &str| u[k].as_u64().unwrap_or_else(|| panic!("no {k}: {fin}"));
    (n("input"), n("output"))
}

async fn turn(c: &mut Client, gw: &Gateway, key: &str, text: &str, id: &str) -> (u64, u64) {
    gw.model.push(reply(text));
    let (_, fin) = c
        .turn(json!({"message": "hello there", "sessionKey": key, "idempotencyKey": id}))
        .await;
    reported(&fin)
}

fn totals(v: &Value) -> (u64, u64, u64) {
    let n = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("no {k}: {v}"));
    (n("input"), n("output"), n("totalTokens"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn usage_totals_equal_what_the_model_reported_per_agent_and_session_issue_39() {
    let gw = Gateway::start_with(PRICED).await;
    let mut c = gw.connect().await;
    let a1 = turn(&mut c, &gw, "agent:main:u1", "one two three", "u-1").await;
    let a2 = turn(&mut c, &gw, "agent:main:u1", "four five", "u-2").await;
    let b1 = turn(&mut c, &gw, "agent:main:u2", "six", "u-3").await;
    let o1 = turn(&mut c, &gw, "agent:ops:x", "seven eight", "u-4").await;
    // A slash command the gateway answers is no model run: it counts nothing.
    let (_, fin) = c
        .turn(json!({"message": "/status", "sessionKey": "agent:main:u1", "idempotencyKey": "u-5"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert!(
        a1.0 > 0 && a1.1 > 0,
        "the scripted model reports usage: {a1:?}"
    );
    let main = (a1.0 + a2.0 + b1.0, a1.1 + a2.1 + b1.1);

    // Default scope: the default agent; 30 days ending today, zeros included.
    let r = c.call("usage.cost", json!({})).await;
    let p = &r["payload"];
    assert_eq!(p["days"], 30, "{r}");
    assert_eq!(p["daily"].as_array().unwrap().len(), 30, "{r}");
    assert_eq!(
        totals(&p["totals"]),
        (main.0, main.1, main.0 + main.1),
        "{r}"
    );
    let today = &p["daily"][29];
    assert_eq!(
        totals(today),
        totals(&p["totals"]),
        "today holds it all: {r}"
    );
    assert_eq!(p["daily"][0]["totalTokens"], 0, "{r}");
    // $3 and $15 per million tokens.
    let cost = (main.0 as f64 * 3.0 + main.1 as f64 * 15.0) / 1e6;
    let got = p["totals"]["totalCost"].as_f64().unwrap();
    assert!((got - cost).abs() < 1e-9, "{got} != {cost}: {r}");
    assert_eq!(p["cacheStatus"]["status"], "fresh", "{r}");

    let r = c.call("usage.cost", json!({"agentId": "ops"})).await;
    assert_eq!(totals(&r["payload"]["totals"]).0, o1.0, "{r}");
    let r = c
        .call(
            "usage.cost",
            json!({"agentScope": "all", "days": 0, "bogus": 1}),
        )
        .await;
    assert_eq!(
        r["payload"]["days"], 1,
        "days 0 is one day; unknown params ignored: {r}"
    );
    assert_eq!(totals(&r["payload"]["totals"]).0, main.0 + o1.0, "{r}");
    let r = c
        .call("usage.cost", json!({"agentScope": "all", "agentId": "ops"}))
        .await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "{r}");
    assert_eq!(
        r["error"]["message"], "agentScope=all cannot be combined with agentId",
        "{r}"
    );

    // Sessions of the default agent, most recent first, each with its own numbers.
    let r = c.call("sessions.usage", json!({})).await;
    let p = &r["payload"];
    let sessions = p["sessions"].as_array().unwrap();
    let keys: Vec<&str> = sessions.iter().filter_map(|s| s["key"].as_str()).collect();
    // u1 was updated last (by the command).
    assert_eq!(keys, ["agent:main:u1", "agent:main:u2"], "{r}");
    assert_eq!(
        totals(&sessions[0]["usage"]),
        (a1.0 + a2.0, a1.1 + a2.1, a1.0 + a2.0 + a1.1 + a2.1),
        "{r}"
    );
    assert_eq!(sessions[0]["usage"]["messageCounts"]["user"], 2, "{r}");
    assert_eq!(sessions[0]["model"], "scripted-1", "{r}");
    assert_eq!(
        p["aggregates"]["byModel"].as_array().map(Vec::len),
        Some(1),
        "no entry for the command: {r}"
    );
    assert_eq!(totals(&p["totals"]).0, main.0, "{r}");
    assert_eq!(p["aggregates"]["sessionCount"], 2, "{r}");
    assert_eq!(p["aggregates"]["byAgent"][0]["agentId"], "main", "{r}");
    // One session by key (of another agent), an unknown one, a malformed one.
    let r = c
        .call("sessions.usage", json!({"key": "agent:ops:x"}))
        .await;
    assert_eq!(totals(&r["payload"]["totals"]).0, o1.0, "{r}");
    assert_eq!(r["payload"]["sessions"][0]["agentId"], "ops", "{r}");
    let r = c
        .call("sessions.usage", json!({"key": "agent:main:nobody"}))
        .await;
    assert_eq!(r["payload"]["sessions"], json!([]), "{r}");
    assert_eq!(r["payload"]["totals"]["totalTokens"], 0, "{r}");
    let r = c.call("sessions.usage", json!({"key": "not a key"})).await;
    assert_eq!(
        r["error"]["message"], "Invalid session reference: not a key",
        "{r}"
    );
    let r = c
        .call(
            "sessions.usage",
            json!({"startDate": "2026-02-30", "endDate": "2026-03-01"}),
        )
        .await;
    assert_eq!(
        r["error"]["message"], "invalid startDate: expected a valid YYYY-MM-DD calendar date",
        "{r}"
    );
    let r = c.call("sessions.usage", json!({"bogus": true})).await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST", "closed params: {r}");
    // The Control UI's own request.
    let r = c
        .call(
            "sessions.usage",
            json!({"startDate": "2026-01-01", "endDate": "2099-12-31", "agentScope": "all",
                   "mode": "specific", "timeZone": "UTC", "utcOffset": "UTC+0",
                   "groupBy": "instance", "limit": 1000, "includeContextWeight": false}),
        )
        .await;
    assert_eq!(
        r["payload"]["sessions"].as_array().map(Vec::len),
        Some(3),
        "{r}"
    );

    // `/usage cost` (OpenClaw's summary) from the same rollups: the session's cost, today's
    // and the last 30 days' of its agent.
    let (_, fin) = c
        .turn(json!({"message": "/usage cost", "sessionKey": "agent:main:u1", "idempotencyKey": "u-6"}))
        .await;
    let said = fin["payload"]["result"]["payloads"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let lines: Vec<&str> = said.lines().collect();
    assert_eq!(lines.first(), Some(&"💸 Usage cost"), "{said}");
    let session_tokens = a1.0 + a2.0 + a1.1 + a2.1;
    assert!(
        lines[1].starts_with("Session $")
            && lines[1].ends_with(&format!("· {session_tokens} tokens")),
        "{said}"
    );
    assert!(
        lines[2].starts_with("Today $") && lines[3].starts_with("Last 30d $"),
        "{said}"
    );
    let (_, fin) = c
        .turn(json!({"message": "/usage tokens", "sessionKey": "agent:main:u1", "idempotencyKey": "u-7"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"], "⚙️ Usage footer: tokens.",
        "{fin}"
    );

    // Read scope is enough, as on OpenClaw.
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.read"]);
    let mut reader = Client::connect_with(&gw.socket(), params).await;
    let r = reader.call("usage.cost", json!({})).await;
    assert_eq!(r["ok"], true, "{r}");
}

/// The text of a final result's payloads.
fn payload_texts(fin: &Value) -> Vec<String> {
    fin["payload"]["result"]["payloads"]
        .as_array()
        .unwrap_or_else(|| panic!("no payloads: {fin}"))
        .iter()
        .map(|p| p["text"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// `/usage tokens|full` and `/trace raw` as OpenClaw answers them (issue 39, B1): the
/// footer `Usage: <in> in / <out> out · est $x` ends the reply the client gets (the final
/// result's payloads and the chat `final`) with the tokens the model reported, at the
/// configured price; the raw trace follows as its own payload. Neither is in the history
/// the model reads. A trace level is an admin's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_footer_and_the_raw_trace_follow_the_reply_issue_39_b1() {
    let gw = Gateway::start_with(PRICED).await;
    let mut c = gw.connect().await;
    let key = "agent:main:footer";
    let command =
        |text: &str, id: &str| json!({"message": text, "sessionKey": key, "idempotencyKey": id});
    let (_, fin) = c.turn(command("/usage full", "f-1")).await;
    assert_eq!(payload_texts(&fin), ["⚙️ Usage footer: full."], "{fin}");

    gw.model.push(reply("the answer"));
    let (_, fin) = c
        .turn(json!({"message": "hello", "sessionKey": key, "idempotencyKey": "f-2"}))
        .await;
    let (input, output) = reported(&fin);
    let cost = (input as f64 * 3.0 + output as f64 * 15.0) / 1e6;
    let usd = if cost >= 0.01 {
        format!("${cost:.2}")
    } else {
        format!("${cost:.4}")
    };
    let line = format!("Usage: {input} in / {output} out · est {usd}");
    assert!(input < 1000 && output < 1000, "plain counts: {fin}");
    assert_eq!(
        payload_texts(&fin),
        [format!("the answer\n{line}")],
        "{fin}"
    );
    let chat_final = c.chat_event("f-2", |p| p["state"] == "final").await;
    assert_eq!(
        chat_final["payload"]["message"]["content"][0]["text"],
        format!("the answer\n{line}").as_str(),
        "{chat_final}"
    );
    let h = c
        .call("chat.history", json!({"sessionKey": key, "limit": 10}))
        .await;
    assert!(!h.to_string().contains("Usage: "), "not recorded: {h}");
    let rows = c.call("sessions.list", json!({})).await;
    assert!(
        rows.to_string().contains(r#""responseUsage":"full""#),
        "{rows}"
    );

    // `/usage` alone steps full -> off; `/usage reset` clears it.
    let (_, fin) = c.turn(command("/usage", "f-3")).await;
    assert_eq!(payload_texts(&fin), ["⚙️ Usage footer: off."], "{fin}");
    let (_, fin) = c.turn(command("/usage loud", "f-4")).await;
    assert_eq!(
        payload_texts(&fin),
        ["⚙️ Usage: /usage off|tokens|full|reset|cost"]
    );
    let (_, fin) = c.turn(command("/usage reset", "f-5")).await;
    assert_eq!(payload_texts(&fin), ["⚙️ Usage footer: reset to default."]);

    // A trace level is an admin's: a writer is told so, and sessions.patch refuses it.
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.read", "operator.write"]);
    let mut w = Client::connect_with(&gw.socket(), params).await;
    let (_, fin) = w.turn(command("/trace raw", "f-6")).await;
    assert_eq!(
        payload_texts(&fin),
        ["❌ /trace is restricted to owners and gateway clients with operator.admin scope."]
    );
    let r = w
        .call("sessions.patch", json!({"key": key, "traceLevel": "raw"}))
        .await;
    assert_eq!(r["error"]["code"], "FORBIDDEN", "{r}");
    let r = c
        .call(
            "sessions.patch",
            json!({"key": key, "responseUsage": "loud"}),
        )
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains(r#"invalid responseUsage (use "off"|"tokens"|"full")"#)),
        "{r}"
    );

    let (_, fin) = c.turn(command("/trace", "f-7")).await;
    assert_eq!(
        payload_texts(&fin),
        ["Current trace level: off.\nOptions: on, off, raw."]
    );
    let (_, fin) = c.turn(command("/trace raw", "f-8")).await;
    assert_eq!(
        payload_texts(&fin),
        ["⚙️ Trace set to raw. Warning: trace output may contain sensitive information."]
    );
    gw.model.push(reply("traced answer"));
    let (_, fin) = c
        .turn(json!({"message": "trace me", "sessionKey": key, "idempotencyKey": "f-9"}))
        .await;
    let texts = payload_texts(&fin);
    assert_eq!(texts.len(), 2, "{fin}");
    assert_eq!(texts[0], "traced answer");
    let trace = &texts[1];
    assert!(
        trace.starts_with("🔎 Usage (Last Turn Total):\n~~~text\ninput="),
        "{trace}"
    );
    assert!(
        trace.contains("🔎 Model Input (User Role):\n~~~text\ntrace me\n~~~"),
        "{trace}"
    );
    assert!(
        trace.contains("🔎 Model Output (Assistant Role):\n~~~text\ntraced answer\n~~~"),
        "{trace}"
    );
    assert!(
        trace.contains("\nSummary: winner=scripted/scripted-1"),
        "{trace}"
    );
    // A writer's run in the same session gets no trace: traces are for admins.
    gw.model.push(reply("plain answer"));
    let (_, fin) = w
        .turn(json!({"message": "no trace", "sessionKey": key, "idempotencyKey": "f-10"}))
        .await;
    assert_eq!(payload_texts(&fin), ["plain answer"], "{fin}");
    // The model never read a footer or a trace back.
    let last = gw.model.requests().last().cloned().expect("a request").body;
    let sent = last.to_string();
    assert!(!sent.contains("🔎") && !sent.contains("Usage: "), "{last}");
    gw.logs.assert_clean(&[]);
}

/// A writer (read and write scopes: no admin).
async fn writer(gw: &Gateway) -> Client {
    let mut params = loopgate_tests::client::connect_params();
    params["scopes"] = json!(["operator.read", "operator.write"]);
    Client::connect_with(&gw.socket(), params).await
}

/// Sends an `agent` run and waits for its `accepted` ack; the request id.
async fn queued(c: &mut Client, id: &str, key: &str, text: &str) -> String {
    let req = c
        .send(
            "agent",
            json!({"message": text, "idempotencyKey": id, "sessionKey": key}),
        )
        .await;
    let ack = c.res(&req).await;
    assert_eq!(ack["payload"]["status"], "accepted", "{ack}");
    req
}

/// Found by the hostile review: the raw trace showed the model's reply as written, also
/// when the `message_sending` guards cancelled it, so what they kept from every client
/// reached them in the trace. The trace shows what the guards left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_raw_trace_shows_what_the_guards_left_r_h2() {
    let gw = Gateway::start_with(loopgate_tests::REVIEW_HOOK).await;
    let key = "agent:main:guarded";
    let mut admin = gw.connect().await;
    let mut w = writer(&gw).await;
    let (_, fin) = admin
        .turn(json!({"message": "/trace raw", "sessionKey": key, "idempotencyKey": "gd-t"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.model.push(reply("the launch code is forbidden-1234"));
    let (_, fin) = admin
        .turn(json!({"message": "tell me", "sessionKey": key, "idempotencyKey": "gd-1"}))
        .await;
    let texts = payload_texts(&fin);
    assert!(
        texts
            .iter()
            .any(|t| t.contains("🔎 Model Output (Assistant Role):\n~~~text\n<empty>\n~~~")),
        "{texts:?}"
    );
    let chat = w.chat_event("gd-1", |p| p["state"] == "final").await;
    for seen in [fin.to_string(), chat.to_string()] {
        assert!(!seen.contains("forbidden-1234"), "{seen}");
    }
}

/// Found by the hostile review: a writer's message collected with an admin's (`collect`) or
/// steered into an admin's traced turn ended with that turn's payloads, the admin's trace
/// included. A turn that carries a message from a sender who may not see traces has none
/// (OpenClaw clears it for mixed senders).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_that_carries_a_writers_message_has_no_trace_b1() {
    for (mode, extra) in [
        (
            "collect",
            "[messages.queue]\nmode = \"collect\"\ndebounce_ms = 300\n",
        ),
        ("steer", ""),
    ] {
        let gw = Gateway::start_with(extra).await;
        let key = "agent:main:mixed";
        let mut admin = gw.connect().await;
        let mut w = writer(&gw).await;
        let (_, fin) = admin
            .turn(json!({"message": "/trace raw", "sessionKey": key, "idempotencyKey": "mx-t"}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
        gw.model.push(hold("first answer"));
        gw.model.push(reply("second answer"));
        let first = admin
            .start_streaming(json!({"message": "one", "idempotencyKey": "mx-1", "sessionKey": key}))
            .await;
        let _second = queued(&mut admin, "mx-2", key, "admin question").await;
        let third = queued(&mut w, "mx-3", key, "writer question").await;
        gw.model.release();
        assert_eq!(admin.res(&first).await["payload"]["status"], "ok");
        let fin = w.res(&third).await;
        assert_eq!(fin["payload"]["status"], "ok", "{mode}: {fin}");
        let texts = payload_texts(&fin);
        assert!(
            !texts.iter().any(|t| t.contains("🔎")),
            "{mode}: a writer's run got a trace: {texts:?}"
        );
    }
}
