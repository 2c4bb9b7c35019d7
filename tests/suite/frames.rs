//! Bad input on the socket: garbage, oversized and malformed frames get clear errors and the
//! gateway keeps serving.

use loopgate_tests::{client::connect_params, Client, Gateway};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_malformed_frames_get_errors_and_the_connection_survives() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    c.send_line("this is not json").await;
    let r = c.wait_for(|f| f["type"] == "res").await;
    assert_eq!(r["ok"], false);
    assert_eq!(r["error"]["code"], "INVALID_REQUEST");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid request frame"),
        "{r}"
    );

    c.send_line(r#"{"type":"req","id":"x1","method":"health","params":{},"extra":1}"#)
        .await;
    let r = c.res("x1").await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid request frame"),
        "{r}"
    );

    c.send_line(r#"{"type":"req","id":"","method":"health"}"#)
        .await;
    let r = c.wait_for(|f| f["type"] == "res").await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST");

    let r = c.call("no.such.method", json!({})).await;
    assert_eq!(r["error"]["code"], "INVALID_REQUEST");
    assert_eq!(r["error"]["message"], "unknown method: no.such.method");

    let r = c.call("connect", connect_params()).await;
    assert_eq!(r["ok"], false, "connect is only valid first");

    // A client without admin hears the missing scope first, as OpenClaw answers methods no
    // scope is listed for.
    let mut params = connect_params();
    params["scopes"] = json!(["operator.read", "operator.write"]);
    let mut narrow = Client::connect_with(&gw.socket(), params).await;
    // Nor does it learn where the state and config live (admin only, as OpenClaw).
    let snapshot = &narrow.seen[1]["payload"]["snapshot"];
    assert!(snapshot["sessionDefaults"].is_object(), "{snapshot}");
    for k in ["stateDir", "configPath", "authMode"] {
        assert!(snapshot.get(k).is_none(), "{k}: {snapshot}");
    }
    assert!(c
        .seen
        .iter()
        .any(|f| f["payload"]["snapshot"]["stateDir"].is_string()));
    let r = narrow.call("no.such.method", json!({})).await;
    assert_eq!(r["error"]["code"], "FORBIDDEN", "{r}");
    assert_eq!(r["error"]["message"], "missing scope: operator.admin");

    // Still serving on the same connection.
    let r = c.call("health", json!({})).await;
    assert_eq!(r["ok"], true);
    assert_eq!(r["payload"]["ok"], true);
    gw.logs.assert_clean(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_frames_close_only_that_connection() {
    let gw = Gateway::start().await;
    // Before connect the cap is 64 KiB.
    let mut raw = Client::raw(&gw.socket()).await;
    let _challenge = raw.read().await.unwrap();
    let _ = raw.try_send_line(&"x".repeat(70 * 1024)).await;
    let r = raw.read().await.expect("an error before the close");
    assert_eq!(r["ok"], false);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("preauth payload too large"),
        "{r}"
    );
    assert!(raw.read().await.is_none(), "connection closed");

    // After connect the cap is 25 MiB.
    let mut c = gw.connect().await;
    let big = format!(
        r#"{{"type":"req","id":"big","method":"health","params":{{"pad":"{}"}}}}"#,
        "y".repeat(26 * 1024 * 1024)
    );
    // The gateway may close before the whole frame is written; that is the point.
    let _ = c.try_send_line(&big).await;
    let r = c.wait_for(|f| f["type"] == "res").await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("payload too large"),
        "{r}"
    );

    // The gateway keeps serving new connections.
    let mut c2 = gw.connect().await;
    assert_eq!(c2.call("health", json!({})).await["ok"], true);
    gw.logs.assert_clean(&[]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_refusals_on_the_unix_socket() {
    let gw = Gateway::start().await;
    // First frame not connect.
    let mut raw = Client::raw(&gw.socket()).await;
    raw.read().await.unwrap();
    let r = raw.call("health", json!({})).await;
    assert_eq!(
        r["error"]["message"],
        "invalid handshake: first request must be connect"
    );
    assert!(raw.read().await.is_none());

    // Protocol mismatch.
    let mut raw = Client::raw(&gw.socket()).await;
    raw.read().await.unwrap();
    let mut p = connect_params();
    p["minProtocol"] = json!(1);
    p["maxProtocol"] = json!(3);
    let r = raw.call("connect", p).await;
    assert_eq!(r["error"]["message"], "protocol mismatch");
    assert_eq!(r["error"]["details"]["code"], "PROTOCOL_MISMATCH");
    assert_eq!(r["error"]["details"]["expectedProtocol"], 4);

    // Unknown client id.
    let mut raw = Client::raw(&gw.socket()).await;
    raw.read().await.unwrap();
    let mut p = connect_params();
    p["client"]["id"] = json!("martian");
    let r = raw.call("connect", p).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("invalid connect params"),
        "{r}"
    );

    // hello-ok advertises exactly the implemented methods.
    let mut raw = Client::raw(&gw.socket()).await;
    raw.read().await.unwrap();
    let hello = raw.call("connect", connect_params()).await;
    let methods = hello["payload"]["features"]["methods"].as_array().unwrap();
    let names: Vec<&str> = methods.iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "health",
            "status",
            "agent",
            "agent.wait",
            "agent.events",
            "diagnostics.lanes",
            "loopgate.exec.allowlist",
            "loopgate.exec.allowlist.remove",
            "chat.send",
            "chat.history",
            "chat.startup",
            "chat.abort",
            "chat.inject",
            "sessions.list",
            "sessions.subscribe",
            "sessions.describe",
            "sessions.preview",
            "sessions.patch",
            "sessions.messages.subscribe",
            "sessions.messages.unsubscribe",
            "question.list",
            "sessions.reset",
            "sessions.delete",
            "sessions.resolve",
            "sessions.abort",
            "agents.list",
            "agents.create",
            "agents.update",
            "agents.delete",
            "agents.files.list",
            "agents.files.get",
            "agents.files.set",
            "tools.catalog",
            "tools.effective",
            "usage.status",
            "usage.cost",
            "sessions.usage",
            "skills.status",
            "agent.identity.get",
            "chat.metadata",
            "models.list",
            "models.authStatus",
            "config.get",
            "config.schema",
            "config.schema.lookup",
            "config.patch",
            "config.apply",
            "config.set",
            "logs.tail",
            "system-presence",
            "cron.list",
            "cron.status",
            "cron.get",
            "cron.add",
            "cron.update",
            "cron.remove",
            "cron.run",
            "cron.runs",
            "wake",
            "tasks.list",
            "talk.catalog",
            "update.status",
            "progressCard.get",
            "sessions.branches.list",
            "sessions.companion.state",
            "sessions.observer.visibility",
            "commands.list",
            "channels.status",
            "last-heartbeat",
            "node.list",
            "node.pair.list",
            "exec.approval.list",
            "exec.approval.resolve",
            "plugin.approval.list",
            "openclaw.approval.list",
            "approval.history",
            "sessions.create",
            "sessions.compact",
            "device.pair.list",
            "device.token.rotate",
            "device.token.revoke",
            "gateway.drain",
            "loopgate.reload",
            "worker.restart",
            "loopgate.status"
        ]
    );
    assert_eq!(hello["payload"]["protocol"], 4);
    assert_eq!(hello["payload"]["policy"]["maxPayload"], 26_214_400);
    gw.logs.assert_clean(&[]);
}
