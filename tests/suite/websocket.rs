//! Gateway protocol v4 over a real WebSocket: handshake and auth, events, chat and session
//! methods, backpressure.

use ed25519_dalek::SigningKey;
use loopgate_tests::client::{cli_params, connect_params};
use loopgate_tests::{Client, Gateway};
use scripted_model::Step;
use serde_json::{json, Value};

const TOKEN: &str = "s3cret-token";

async fn gateway() -> Gateway {
    Gateway::start_with(&format!("[gateway.auth]\ntoken = \"{TOKEN}\"\n")).await
}

fn with_token(mut p: Value) -> Value {
    p["auth"] = json!({"token": TOKEN});
    p
}

async fn ws(gw: &Gateway) -> Client {
    let (c, res) = Client::ws_connect(&gw.ws_addr(), cli_params(Some(TOKEN)), None).await;
    let res = res.expect("hello");
    assert_eq!(res["ok"], true, "{res}");
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_success_and_each_failure() {
    let gw = gateway().await;
    let addr = gw.ws_addr();

    // Success: the CLI identity keeps its scopes on loopback.
    let (_c, res) = Client::ws_connect(&addr, cli_params(Some(TOKEN)), None).await;
    let hello = res.unwrap()["payload"].clone();
    assert_eq!(hello["type"], "hello-ok");
    assert_eq!(hello["protocol"], 4);
    assert_eq!(hello["auth"]["method"], "token");
    assert_eq!(hello["auth"]["scopes"], json!(["operator.admin"]));
    assert_eq!(
        hello["snapshot"]["sessionDefaults"]["mainSessionKey"],
        "agent:main:main"
    );
    assert_eq!(hello["policy"]["tickIntervalMs"], 30000);
    assert!(hello["server"]["connId"].is_string());
    let methods = hello["features"]["methods"].as_array().unwrap();
    assert!(methods.contains(&json!("chat.send")) && !methods.contains(&json!("connect")));

    // Bad token.
    let (mut c, res) = Client::ws_connect(&addr, cli_params(Some("wrong")), None).await;
    let e = res.unwrap()["error"].clone();
    assert_eq!(e["code"], "INVALID_REQUEST");
    assert_eq!(e["details"]["code"], "AUTH_TOKEN_MISMATCH");
    assert!(e["message"]
        .as_str()
        .unwrap()
        .starts_with("unauthorized: gateway token mismatch"));
    c.read_to_end().await;
    let (code, reason) = c.close.clone().unwrap();
    assert_eq!(code, 1008);
    assert_eq!(reason, e["message"].as_str().unwrap());

    // No token and no device.
    let (mut c, res) = Client::ws_connect(&addr, cli_params(None), None).await;
    let e = res.unwrap()["error"].clone();
    assert_eq!(e["code"], "NOT_PAIRED");
    assert_eq!(e["details"]["code"], "DEVICE_IDENTITY_REQUIRED");
    c.read_to_end().await;
    assert_eq!(c.close, Some((1008, "device identity required".into())));

    // Wrong protocol.
    let mut p = cli_params(Some(TOKEN));
    p["minProtocol"] = json!(2);
    p["maxProtocol"] = json!(3);
    let (mut c, res) = Client::ws_connect(&addr, p, None).await;
    let e = res.unwrap()["error"].clone();
    assert_eq!(e["details"]["code"], "PROTOCOL_MISMATCH");
    c.read_to_end().await;
    assert_eq!(c.close.as_ref().map(|c| c.0), Some(1002));

    // Oversized pre-auth frame: close 1009, no res.
    let mut c = Client::ws_raw(&addr).await;
    c.read().await.unwrap();
    let _ = c.try_send_line(&"x".repeat(70 * 1024)).await;
    c.read_to_end().await;
    assert_eq!(c.close.as_ref().map(|c| c.0), Some(1009));
    assert!(!c.seen.iter().any(|f| f["type"] == "res"));

    // First frame not connect.
    let mut c = Client::ws_raw(&addr).await;
    c.read().await.unwrap();
    let r = c.call("health", json!({})).await;
    assert_eq!(
        r["error"]["message"],
        "invalid handshake: first request must be connect"
    );
    c.read_to_end().await;
    assert_eq!(c.close.as_ref().map(|c| c.0), Some(1008));

    // A device proof signed over other scopes than the ones sent.
    let key = SigningKey::from_bytes(&[42u8; 32]);
    let mut p = with_token(connect_params());
    let (mut c, res) = {
        let mut c = Client::ws_raw(&addr).await;
        let ch = c.read().await.unwrap();
        let nonce = ch["payload"]["nonce"].as_str().unwrap().to_owned();
        p["device"] = loopgate_tests::client::device_proof(
            &p,
            &key,
            &nonce,
            ch["payload"]["ts"].as_i64().unwrap(),
        );
        p["scopes"] = json!(["operator.admin", "operator.pairing"]);
        let r = c.call("connect", p).await;
        (c, r)
    };
    assert_eq!(
        res["error"]["details"]["code"], "DEVICE_AUTH_SIGNATURE_INVALID",
        "{res}"
    );
    c.read_to_end().await;
    assert_eq!(c.close.as_ref().map(|c| c.0), Some(1008));

    // A valid device keeps its scopes; the same client without a device gets none.
    let (mut c, res) = Client::ws_connect(&addr, with_token(connect_params()), Some(&key)).await;
    assert_eq!(
        res.unwrap()["payload"]["auth"]["scopes"],
        json!(["operator.admin"])
    );
    assert_eq!(c.call("health", json!({})).await["ok"], true);
    let (mut c, res) = Client::ws_connect(&addr, with_token(connect_params()), None).await;
    assert_eq!(res.unwrap()["payload"]["auth"]["scopes"], json!([]));
    let r = c
        .call("agent", json!({"message": "hi", "idempotencyKey": "nope"}))
        .await;
    assert_eq!(r["error"]["code"], "FORBIDDEN");
    assert_eq!(r["error"]["details"]["code"], "MISSING_SCOPE");

    // After connect, non-JSON text is ignored and the connection keeps working.
    let mut c = ws(&gw).await;
    c.send_line("definitely not json").await;
    assert_eq!(c.call("health", json!({})).await["ok"], true);
    let r = c.call("nope.nope", json!({})).await;
    assert_eq!(r["error"]["message"], "unknown method: nope.nope");

    // Health endpoints on the same port.
    assert_eq!(gw.http_get("/healthz").await.0, 200);
    let (status, body) = gw.http_get("/readyz").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(gw.http_get("/other").await.0, 404);
    gw.logs.assert_clean(&[]);
}

/// R-A1, R-D1 over WebSocket: both `res` frames, events in order, chat projection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_agent_turn_with_events_and_chat_projection() {
    let gw = gateway().await;
    gw.model.push(Step::Text {
        text: "Hello over the wire".into(),
        chunks: 4,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let mut c = ws(&gw).await;
    let (acc, fin) = c.turn(json!({"message": "hi", "agentId": "main", "idempotencyKey": "ws-1", "deliver": false, "timeout": 600})).await;
    assert_eq!(acc["payload"]["runId"], "ws-1");
    assert_eq!(fin["payload"]["status"], "ok");
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"],
        "Hello over the wire"
    );
    let fin_chat = c.chat_event("ws-1", |p| p["state"] == "final").await;
    assert_eq!(
        fin_chat["payload"]["message"]["content"][0]["text"],
        "Hello over the wire"
    );
    c.agent_event("ws-1", |p| p["data"]["phase"] == "end").await;

    let agent: Vec<&Value> = c.seen.iter().filter(|f| f["event"] == "agent").collect();
    let kinds: Vec<String> = agent
        .iter()
        .map(|e| {
            format!(
                "{}:{}",
                e["payload"]["stream"].as_str().unwrap(),
                e["payload"]["data"]["phase"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(kinds.first().unwrap(), "lifecycle:start");
    assert_eq!(kinds.last().unwrap(), "lifecycle:end");
    // Model work over, outcome being recorded: `finishing` right before the end (R-D1).
    assert_eq!(kinds[kinds.len() - 2], "lifecycle:finishing", "{kinds:?}");
    assert!(kinds[1..kinds.len() - 2].iter().all(|k| k == "assistant:"));
    let deltas: String = c
        .seen
        .iter()
        .filter(|f| f["event"] == "chat" && f["payload"]["state"] == "delta")
        .map(|f| f["payload"]["deltaText"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(deltas, "Hello over the wire");
    // connect.challenge carries no seq; every later event does.
    let seqs: Vec<u64> = c
        .seen
        .iter()
        .filter(|f| f["type"] == "event" && f["event"] != "connect.challenge")
        .map(|f| f["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "contiguous per-connection seq: {seqs:?}"
    );
    gw.logs.assert_clean(&[]);
}

/// R-A5: chat.send acks `started` and is idempotent; chat.history shows the turn; chat.abort
/// ends a run as aborted with stop reason `rpc`; sessions and agents methods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_send_history_abort_and_sessions_r_a5() {
    let gw = gateway().await;
    let mut c = ws(&gw).await;
    gw.model.push(Step::Text {
        text: "first reply".into(),
        chunks: 2,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let r = c
        .call(
            "chat.send",
            json!({"sessionKey": "main", "message": "hello chat", "idempotencyKey": "cs-1"}),
        )
        .await;
    assert_eq!(r["payload"], json!({"runId": "cs-1", "status": "started"}));
    c.chat_event("cs-1", |p| p["state"] == "final").await;
    let r = c
        .call(
            "chat.send",
            json!({"sessionKey": "main", "message": "hello chat", "idempotencyKey": "cs-1"}),
        )
        .await;
    assert_eq!(
        r["payload"],
        json!({"runId": "cs-1", "status": "ok"}),
        "duplicate after completion"
    );
    let r = c
        .call("chat.send", json!({"sessionKey": "main", "message": "x"}))
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid chat.send params"),
        "{r}"
    );

    let h = c.call("chat.history", json!({"sessionKey": "main"})).await;
    let p = &h["payload"];
    assert_eq!(p["sessionKey"], "agent:main:main");
    assert!(p["sessionId"].is_string());
    let msgs = p["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 2, "{h}");
    assert_eq!(msgs[0]["role"], "user");
    assert_eq!(msgs[0]["content"][0]["text"], "hello chat");
    assert_eq!(msgs[1]["content"][0]["text"], "first reply");
    let h = c
        .call("chat.history", json!({"sessionKey": "main", "limit": 1}))
        .await;
    assert_eq!(h["payload"]["messages"].as_array().unwrap().len(), 1);
    let bad = c
        .call("chat.history", json!({"sessionKey": "main", "limit": 0}))
        .await;
    assert!(bad["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("invalid chat.history params"));

    // Abort a running turn.
    gw.model.push(Step::Hold {
        text: "never finishes".into(),
        chunks: 3,
        after_chunks: 1,
    });
    let r = c
        .call(
            "chat.send",
            json!({"sessionKey": "main", "message": "long task", "idempotencyKey": "cs-2"}),
        )
        .await;
    assert_eq!(r["payload"]["status"], "started");
    c.chat_event("cs-2", |p| p["state"] == "delta").await;
    let dup = c
        .call(
            "chat.send",
            json!({"sessionKey": "main", "message": "long task", "idempotencyKey": "cs-2"}),
        )
        .await;
    assert_eq!(
        dup["payload"],
        json!({"runId": "cs-2", "status": "in_flight"})
    );
    let busy = c.call("sessions.reset", json!({"key": "main"})).await;
    assert_eq!(busy["error"]["details"]["code"], "SESSION_BUSY", "{busy}");
    let wrong = c
        .call(
            "chat.abort",
            json!({"sessionKey": "other", "runId": "cs-2"}),
        )
        .await;
    assert_eq!(wrong["error"]["message"], "runId does not match sessionKey");
    let r = c.call("chat.abort", json!({"sessionKey": "main"})).await;
    assert_eq!(
        r["payload"],
        json!({"ok": true, "aborted": true, "runIds": ["cs-2"]})
    );
    let aborted = c.chat_event("cs-2", |p| p["state"] == "aborted").await;
    assert_eq!(aborted["payload"]["stopReason"], "rpc");
    let w = c
        .call("agent.wait", json!({"runId": "cs-2", "timeoutMs": 5000}))
        .await;
    assert_eq!(w["payload"]["status"], "timeout");
    assert_eq!(w["payload"]["stopReason"], "rpc");
    let r = c.call("chat.abort", json!({"sessionKey": "main"})).await;
    assert_eq!(
        r["payload"],
        json!({"ok": true, "aborted": false, "runIds": []})
    );
    gw.model.release();

    // Sessions.
    let l = c.call("sessions.list", json!({})).await;
    let p = &l["payload"];
    assert_eq!(p["count"], 1);
    assert_eq!(p["hasMore"], false);
    assert_eq!(p["nextOffset"], Value::Null);
    let row = &p["sessions"][0];
    assert_eq!(row["key"], "agent:main:main");
    assert_eq!(row["agentId"], "main");
    assert_eq!(row["hasActiveRun"], false);
    assert_eq!(row["lastRunId"], "cs-2");
    assert!(row["totalTokens"].as_u64().unwrap() > 0);
    let bad = c.call("sessions.list", json!({"bogus": 1})).await;
    assert!(bad["error"]["message"]
        .as_str()
        .unwrap()
        .starts_with("invalid sessions.list params"));

    let r = c
        .call("sessions.reset", json!({"key": "main", "reason": "new"}))
        .await;
    assert_eq!(r["payload"]["ok"], true, "{r}");
    assert_eq!(r["payload"]["key"], "agent:main:main");
    let h = c.call("chat.history", json!({"sessionKey": "main"})).await;
    assert_eq!(
        h["payload"]["messages"],
        json!([]),
        "a reset starts a new window"
    );
    gw.model.push(Step::Text {
        text: "fresh".into(),
        chunks: 1,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let (_, fin) = c
        .turn(json!({"message": "after reset", "idempotencyKey": "cs-3"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let last = gw.model.requests().last().unwrap().body["messages"].clone();
    assert_eq!(
        last.as_array().unwrap().len(),
        2,
        "system + the new user message only: {last}"
    );

    let r = c.call("sessions.delete", json!({"key": "main"})).await;
    assert_eq!(
        r["payload"],
        json!({"ok": true, "key": "agent:main:main", "deleted": true, "archived": []})
    );
    let l = c.call("sessions.list", json!({})).await;
    assert_eq!(l["payload"]["count"], 0);

    let a = c.call("agents.list", json!({})).await;
    assert_eq!(a["payload"]["defaultId"], "main");
    assert_eq!(a["payload"]["agents"][0]["id"], "main");
    // Issue 11: the model as OpenClaw lists it (the Control UI reads `model.primary`).
    let model = &a["payload"]["agents"][0]["model"];
    assert!(
        model["primary"].as_str().is_some_and(|p| p.contains('/')),
        "{a}"
    );
    assert_eq!(model["fallbacks"], json!([]), "{a}");
    gw.logs.assert_clean(&[]);
}

/// Invariant 5: a client that does not read is dropped as a slow consumer once its buffer
/// passes the cap; other clients and the run are not stalled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_consumer_is_dropped_without_stalling_others() {
    let gw = Gateway::start_gateway_keys(
        "max_buffered_bytes = 2097152\n",
        &format!("[gateway.auth]\ntoken = \"{TOKEN}\"\n"),
    )
    .await;
    // The slow client is on the unix socket, whose small kernel buffers back the gateway up
    // after a few hundred KB (a TCP connection's buffers hold megabytes): its 2 MiB cap is
    // what fills. The policy is the same for both transports.
    let mut slow = gw.connect().await;
    let mut fast = ws(&gw).await;
    // Text is paced (one event per 75 ms per stream, each with the text so far): ~130 events
    // per stream averaging 27 KB over ~10 s, ~7 MB at ~0.7 MB/s: well past what the slow
    // client's connection holds, at a pace a reading client keeps up with even on busy
    // cores (its 2 MiB cap holds seconds of events).
    let text = "abcdefghij".repeat(5_500);
    gw.model.push(Step::Text {
        text: text.clone(),
        chunks: 2000,
        delay_ms: 5,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let (_, fin) = fast
        .turn(json!({"message": "go", "idempotencyKey": "big"}))
        .await;
    assert_eq!(
        fin["payload"]["status"], "ok",
        "the run completes while the slow client is stuck"
    );
    assert_eq!(
        fin["payload"]["result"]["payloads"][0]["text"]
            .as_str()
            .unwrap()
            .len(),
        text.len()
    );
    gw.logs.wait_for("Dropping a slow consumer.").await;
    slow.read_to_end().await;
    if let Some((code, reason)) = &slow.close {
        assert_eq!((*code, reason.as_str()), (1008, "slow consumer"));
    }
    let seqs: Vec<u64> = slow.seen.iter().filter_map(|f| f["seq"].as_u64()).collect();
    assert!(
        seqs.windows(2).all(|w| w[1] > w[0]),
        "seq stays increasing (gaps allowed)"
    );
    let mut again = ws(&gw).await;
    assert_eq!(again.call("health", json!({})).await["ok"], true);
    gw.logs.assert_clean(&[]);
}
