//! Attacks on the front door (issue 10): another local user, a browser page on another
//! localhost port, a client that sends too much or never reads, and connections that never
//! say anything.

use std::os::unix::fs::PermissionsExt;

use futures_util::SinkExt;
use loopgate_tests::client::cli_params;
use loopgate_tests::{reply, Client, Gateway, WAIT};
use scripted_model::Step;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;

fn mode(p: &std::path::Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Attack 4 (token) and 8 (storage): with no token configured, any local user connecting to
/// the loopback WebSocket as `cli` got `operator.admin`. Now `serve` makes a token in the
/// state dir (0600) and requires it; the state dir is 0700 and its files 0600.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn loopback_websocket_needs_the_state_token_r_j2() {
    let gw = Gateway::start().await;
    gw.logs.wait_for("gateway.token").await;
    let token = gw.token();
    assert_eq!(token.len(), 64);
    assert_eq!(mode(&gw.state().join("gateway.token")), 0o600);
    assert_eq!(mode(gw.state()), 0o700);

    let addr = gw.ws_addr();
    let started = std::time::Instant::now();
    let (_c, res) = Client::ws_connect(&addr, cli_params(None), None).await;
    let res = res.expect("an answer");
    assert_eq!(res["ok"], false, "{res}");
    assert_eq!(
        res["error"]["details"]["code"], "DEVICE_IDENTITY_REQUIRED",
        "{res}"
    );
    assert!(
        started.elapsed() >= loopgate_tests::FAILED_AUTH_DELAY_FLOOR,
        "a refused connect is answered without delay"
    );
    let (_c, res) = Client::ws_connect(&addr, cli_params(Some("guess")), None).await;
    assert_eq!(res.unwrap()["ok"], false);
    let (mut c, res) = Client::ws_connect(&addr, cli_params(Some(&token)), None).await;
    assert_eq!(res.unwrap()["ok"], true);
    gw.model.push(reply("hello"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "tok-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    // The loopgate CLI keeps working over the unix socket without the token.
    let out = gw.cli(&["status"]).await;
    assert!(out.status.success(), "{out:?}");
    for f in ["gateway.sqlite", "agents/main/agent.sqlite"] {
        assert_eq!(mode(&gw.state().join(f)), 0o600, "{f}");
    }
    gw.logs.assert_clean(&[]);
}

/// Attack 4 (origin): a page on another localhost port passed the origin check, which looked
/// at the host only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_localhost_port_is_another_origin_r_j2() {
    let gw = Gateway::start().await;
    let addr = gw.ws_addr();
    let port: u16 = addr.rsplit_once(':').unwrap().1.parse().unwrap();
    for (origin, allowed) in [
        (format!("http://127.0.0.1:{}", port.wrapping_add(1)), false),
        (format!("http://localhost:{port}"), false),
        (format!("http://127.0.0.1:{port}"), true),
    ] {
        let mut req = format!("ws://{addr}/").into_client_request().unwrap();
        req.headers_mut().insert("origin", origin.parse().unwrap());
        let r = tokio_tungstenite::connect_async(req).await;
        assert_eq!(r.is_ok(), allowed, "{origin}: {r:?}");
    }
    gw.logs.assert_clean(&["cross-origin"]);
}

/// Attack 5: a 16-25 MiB message fit the frame limit but not the control link; the worker
/// was killed with every session's runs. Now it is refused at admission and the agent
/// serves on with the same worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_message_is_refused_and_the_agent_serves_on_r_j2() {
    let gw = Gateway::start().await;
    gw.model.push(reply("first"));
    let mut c = Client::ws_connect(&gw.ws_addr(), cli_params(Some(&gw.token())), None)
        .await
        .0;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "big-0"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok");
    let worker = gw.worker_pid("main").await;
    let huge = "x".repeat(20 * 1024 * 1024);
    let r = c
        .call("agent", json!({"message": huge, "idempotencyKey": "big-1"}))
        .await;
    assert_eq!(r["ok"], false, "{}", &r.to_string()[..200]);
    let msg = r["error"]["message"].as_str().unwrap();
    assert!(msg.contains("the limit is"), "{msg}");
    let r = c
        .call(
            "agent",
            json!({"message": "hi", "idempotencyKey": "k".repeat(100_000)}),
        )
        .await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("idempotencyKey is"),
        "{r}"
    );
    gw.model.push(reply("still here"));
    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "big-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        gw.worker_pid("main").await,
        worker,
        "the worker was replaced"
    );
    gw.logs.assert_clean(&[]);
}

/// Attack 6: responses were not counted against `max_buffered_bytes`, so a client that sent
/// requests and never read grew the gateway without bound. Now it is dropped as a slow
/// consumer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_reads_is_dropped_r_j2() {
    let gw = Gateway::start_gateway_keys("max_buffered_bytes = 65536\n", "").await;
    gw.model.push(reply(&"long reply ".repeat(400)));
    let mut c = gw.connect().await;
    c.turn(json!({"message": "fill", "idempotencyKey": "hist"}))
        .await;
    let mut flood = Client::connect(&gw.socket()).await;
    let req = json!({"type": "req", "id": "h", "method": "chat.history",
                     "params": {"sessionKey": "main"}})
    .to_string();
    // Never read; stop when the gateway has closed the connection.
    for _ in 0..5000 {
        if flood.try_send_line(&req).await.is_err() {
            break;
        }
        if gw
            .logs
            .all()
            .iter()
            .any(|l| l.contains("Dropping a slow consumer"))
        {
            break;
        }
    }
    let line = gw.logs.wait_for("Dropping a slow consumer").await;
    // Dropped when its queued answers passed the cap (64 KiB plus one answer), not when some
    // event finally noticed megabytes of them.
    let queued: usize = line
        .rsplit("queued_bytes=")
        .next()
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(usize::MAX);
    assert!(
        queued < 1024 * 1024,
        "dropped only at {queued} queued bytes"
    );
    // Everyone else is served.
    assert!(gw.cli(&["status"]).await.status.success());
    gw.logs.assert_clean(&[]);
}

/// Attack 7: silent connections stayed open forever and had no cap, until even the operator's
/// unix socket timed out; 24 MiB frames before `connect` were buffered whole. Now the network
/// has a connection cap (the unix socket its own pool), a silent connection is closed after
/// the header timeout, and the pre-auth read budget ends a large frame early.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_and_oversized_unauthenticated_connections_are_bounded_r_j2() {
    let gw = Gateway::start_gateway_keys("max_connections = 3\n", "").await;
    let addr = gw.ws_addr();
    let mut idle = Vec::new();
    for _ in 0..3 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // The fourth is closed at once (EOF), and the operator still gets answers.
    let mut extra = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(WAIT, extra.read(&mut buf))
        .await
        .expect("the gateway closes a connection over the cap")
        .unwrap_or(0);
    assert_eq!(n, 0);
    assert!(gw.cli(&["status"]).await.status.success());
    // A silent connection is closed by the header timeout.
    let n = tokio::time::timeout(WAIT, idle[0].read(&mut buf))
        .await
        .expect("a silent connection is closed")
        .unwrap_or(0);
    assert_eq!(n, 0);
    drop(idle);

    // A 24 MiB frame before `connect`: the gateway stops reading after the budget and closes,
    // so the write fails long before 24 MiB went out.
    let mut ws = loop {
        // Slots of the closed idle connections are released asynchronously.
        match tokio_tungstenite::connect_async(format!("ws://{addr}/")).await {
            Ok((ws, _)) => break ws,
            Err(_) => tokio::task::yield_now().await,
        }
    };
    let big = tokio_tungstenite::tungstenite::Message::text("y".repeat(24 * 1024 * 1024));
    let sent = tokio::time::timeout(WAIT, ws.send(big))
        .await
        .expect("send ends");
    assert!(sent.is_err(), "the gateway read a 24 MiB pre-auth frame");
    assert!(gw.cli(&["status"]).await.status.success());
    gw.logs.assert_clean(&[]);
}

/// Attack 8 (long replies): every delta carried the whole text so far, so a 300 KB reply in
/// small deltas sent 1.42 GB of events and a healthy reader was dropped as slow before its
/// final. Text is now paced (75 ms): the deltas still add up to the reply, and the final
/// arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_reply_costs_its_length_not_its_square_r_d1() {
    let gw = Gateway::start().await;
    let reply: String = (0..30_000)
        .map(|i| format!("w{:08} ", i % 100_000_000))
        .collect();
    assert!(reply.len() >= 300_000);
    gw.model.push(Step::Text {
        text: reply.clone(),
        chunks: 6_000,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "long", "idempotencyKey": "long"}))
        .await;
    assert_eq!(
        fin["payload"]["status"],
        "ok",
        "{}",
        &fin.to_string()[..300]
    );
    let final_chat = c.chat_event("long", |p| p["state"] == "final").await;
    let deltas: Vec<&serde_json::Value> = c
        .seen
        .iter()
        .filter(|f| f["payload"]["runId"] == "long" && f["payload"]["stream"] == "assistant")
        .collect();
    let joined: String = deltas
        .iter()
        .map(|f| f["payload"]["data"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(joined, reply, "the deltas do not add up to the reply");
    let bytes: usize = c
        .seen
        .iter()
        .filter(|f| f["payload"]["runId"] == "long")
        .map(|f| f.to_string().len())
        .sum();
    // Unpaced: about 6000 events of 150 KB on average each, per stream (1.8 GB).
    assert!(
        bytes < 60 * 1024 * 1024,
        "{} events, {bytes} bytes for a {} byte reply",
        deltas.len(),
        reply.len()
    );
    assert_eq!(
        final_chat["payload"]["message"]["content"][0]["text"]
            .as_str()
            .map(str::len),
        Some(reply.len())
    );
    gw.logs.assert_clean(&[]);
}

/// Found by the hostile-load check: a session whose history was over the control link's
/// 16 MiB frame cap got no `chat.history` answer at all (and each such request held a
/// pending-op slot for good). The answer now keeps the newest messages that fit 8 MiB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_history_larger_than_the_link_still_gets_an_answer_r_a5() {
    let gw = Gateway::start_with("context_window = 100000000\n").await;
    let mut c = gw.connect().await;
    // Each reply stays under the worker's 2 MiB cap on one response; twelve of them make a
    // history of about 18 MiB, over the link's 16 MiB frame cap.
    for i in 0..12 {
        gw.model.push(Step::Text {
            text: format!("reply-{i} {}", "z".repeat(1536 * 1024)),
            chunks: 8,
            delay_ms: 0,
            finish_reason: None,
            reasoning: String::new(),
            keepalive_ms: 0,
            end_turn: None,
        });
        let (_, fin) = c
            .turn(json!({"message": format!("q{i}"), "idempotencyKey": format!("h{i}")}))
            .await;
        assert_eq!(
            fin["payload"]["status"], "ok",
            "{}",
            fin["payload"]["error"]
        );
    }
    let r = tokio::time::timeout(
        WAIT,
        c.call("chat.history", json!({"sessionKey": "main", "limit": 1000})),
    )
    .await
    .expect("chat.history answers");
    assert_eq!(
        r["ok"],
        true,
        "{}",
        &r.to_string()[..300.min(r.to_string().len())]
    );
    let messages = r["payload"]["messages"].as_array().unwrap();
    assert!(!messages.is_empty());
    let newest = messages.last().unwrap().to_string();
    assert!(newest.contains("reply-11"), "the newest message is kept");
    assert!(r.to_string().len() < 16 * 1024 * 1024);
    gw.logs.assert_clean(&[]);
}
