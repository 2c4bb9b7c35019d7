//! Session subscriptions (issue 11): `sessions.subscribe` and the `sessions.changed` events
//! the Control UI and the TUI need to see a run start and settle.

use loopgate_tests::Gateway;
use serde_json::{json, Value};

fn changed(f: &Value, run: &str, phase: &str) -> bool {
    f["type"] == "event"
        && f["event"] == "sessions.changed"
        && f["payload"]["runId"] == run
        && f["payload"]["phase"] == phase
}

/// A subscriber sees `sessions.changed` `start` (running) when a run starts and `end` (done,
/// no active run) after the run's terminal events; a connection that did not subscribe sees
/// none. `sessions.list` rows agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_sees_a_run_start_and_settle_r_d1() {
    let gw = Gateway::start().await;
    let mut sub = gw.connect().await;
    let hello_methods = sub.seen[1]["payload"]["features"]["methods"].clone();
    assert!(
        hello_methods
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m == "sessions.subscribe")),
        "{hello_methods}"
    );
    let r = sub.call("sessions.subscribe", json!({})).await;
    assert_eq!(r["payload"], json!({"subscribed": true}), "{r}");
    let mut other = gw.connect().await;

    let (_, fin) = other
        .turn(json!({"message": "hi", "idempotencyKey": "sub-1", "sessionKey": "s"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");

    let start = sub.wait_for(|f| changed(f, "sub-1", "start")).await;
    let p = &start["payload"];
    assert_eq!(p["sessionKey"], "agent:main:s", "{start}");
    assert_eq!(
        (&p["status"], &p["hasActiveRun"]),
        (&json!("running"), &json!(true))
    );
    assert_eq!(p["session"]["key"], "agent:main:s");
    assert_eq!(p["session"]["kind"], "direct");

    let end = sub.wait_for(|f| changed(f, "sub-1", "end")).await;
    let p = &end["payload"];
    assert_eq!(
        (&p["status"], &p["hasActiveRun"], &p["activeRunIds"]),
        (&json!("done"), &json!(false), &json!([])),
        "{end}"
    );
    assert_eq!(p["session"]["hasActiveRun"], false);
    assert_eq!(p["lastRunId"], "sub-1");
    // After the run's terminal events.
    let at = |pred: &dyn Fn(&Value) -> bool| sub.seen.iter().position(pred).unwrap();
    let fin_at = at(&|f| {
        f["event"] == "chat" && f["payload"]["runId"] == "sub-1" && f["payload"]["state"] == "final"
    });
    let end_at = at(&|f| changed(f, "sub-1", "end"));
    assert!(
        fin_at < end_at,
        "chat final {fin_at}, sessions.changed end {end_at}"
    );

    // The connection that did not subscribe got none.
    let l = other.call("sessions.list", json!({})).await;
    assert!(
        !other.seen.iter().any(|f| f["event"] == "sessions.changed"),
        "a connection without sessions.subscribe got sessions.changed"
    );
    let row = &l["payload"]["sessions"][0];
    assert_eq!(
        (
            &row["key"],
            &row["status"],
            &row["hasActiveRun"],
            &row["activeRunIds"]
        ),
        (
            &json!("agent:main:s"),
            &json!("done"),
            &json!(false),
            &json!([])
        ),
        "{l}"
    );
    assert_eq!(l["payload"]["nextOffset"], Value::Null, "{l}");
    // The TUI shows tokens against the model's context window.
    assert_eq!(row["contextTokens"], 128_000, "{l}");

    // With list params, the answer also holds the list.
    let r = sub.call("sessions.subscribe", json!({"limit": 5})).await;
    assert_eq!(r["payload"]["subscribed"], true, "{r}");
    assert_eq!(r["payload"]["list"]["count"], 1, "{r}");
    gw.logs.assert_clean(&[]);
}

/// A failed run settles as `error` with status `failed` and its error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_settles_as_failed_r_d1() {
    let gw = Gateway::start().await;
    gw.model.push(scripted_model::Step::HttpError {
        status: 400,
        message: "bad request".into(),
        retry_after_s: None,
    });
    let mut sub = gw.connect().await;
    sub.call("sessions.subscribe", json!({})).await;
    let (_, fin) = sub
        .turn(json!({"message": "hi", "idempotencyKey": "sub-err"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let end = sub.wait_for(|f| changed(f, "sub-err", "error")).await;
    let p = &end["payload"];
    assert_eq!(
        (&p["status"], &p["hasActiveRun"]),
        (&json!("failed"), &json!(false)),
        "{end}"
    );
    assert!(
        p["lastRunError"].as_str().is_some_and(|e| !e.is_empty()),
        "{end}"
    );
    gw.logs.assert_clean(&["bad request", "Model call failed"]);
}

/// An aborted run settles as `killed` with `abortedLastRun` and no `lastRunError`, as
/// OpenClaw's rows say it (the Control UI shows a `lastRunError` as a red error banner, which
/// a user's own Stop is not), in `sessions.changed` and in `sessions.list`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_run_settles_as_killed_without_an_error_r_a5() {
    let gw = Gateway::start().await;
    gw.model.push(loopgate_tests::hold("Partial answer"));
    let mut sub = gw.connect().await;
    sub.call("sessions.subscribe", json!({})).await;
    let id = sub
        .start_streaming(
            json!({"message": "hi", "idempotencyKey": "sub-stop", "sessionKey": "stopped"}),
        )
        .await;
    let r = sub
        .call(
            "chat.abort",
            json!({"sessionKey": "stopped", "runId": "sub-stop"}),
        )
        .await;
    assert_eq!(r["payload"]["aborted"], true, "{r}");
    sub.res(&id).await;
    let end = sub.wait_for(|f| changed(f, "sub-stop", "error")).await;
    let p = &end["payload"];
    assert_eq!(p["status"], "killed", "{end}");
    assert_eq!(p["abortedLastRun"], true, "{end}");
    assert!(p.get("lastRunError").is_none(), "{end}");
    let list = sub
        .call("sessions.list", json!({"search": "stopped"}))
        .await;
    let row = list["payload"]["sessions"]
        .as_array()
        .and_then(|s| s.iter().find(|r| r["key"] == "agent:main:stopped"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        (&row["status"], &row["abortedLastRun"]),
        (&json!("killed"), &json!(true)),
        "{row}"
    );
    assert!(row.get("lastRunError").is_none(), "{row}");
    // No session was spawned by another: the Control UI's list of a session's children is
    // empty (it was every session, the parent too).
    let children = sub
        .call("sessions.list", json!({"spawnedBy": "agent:main:stopped"}))
        .await;
    assert_eq!(children["payload"]["sessions"], json!([]), "{children}");
    gw.model.release();
}

/// `chat.startup` and `chat.history` answer a page in OpenClaw's form: the messages, the
/// session's row (`sessionInfo`, also for a key with no run yet), `pendingInputs` and the
/// model `defaults`; after a run its row says it ended, which is how the Control UI settles a
/// run from history. A cursor (this gateway hands out none) gets `{kind: "reset"}`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_startup_pages_carry_the_session_row_r_d3() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let first = c
        .call(
            "chat.startup",
            json!({"sessionKey": "fresh", "limit": 80, "maxBytes": 262144}),
        )
        .await;
    let p = &first["payload"];
    assert_eq!(first["ok"], true, "{first}");
    assert!(p.get("kind").is_none(), "a page has no kind: {first}");
    assert_eq!(p["messages"], json!([]), "{first}");
    assert_eq!(p["sessionKey"], "agent:main:fresh");
    assert_eq!(p["sessionInfo"]["key"], "agent:main:fresh");
    assert_eq!(p["sessionInfo"]["hasActiveRun"], false);
    // What keeps a client from treating the session as read-only.
    let info = &p["sessionInfo"];
    assert_eq!(
        (
            &info["visibility"],
            &info["sharingRole"],
            &info["isMain"],
            &info["chatType"]
        ),
        (
            &json!("shared"),
            &json!("admin"),
            &json!(false),
            &json!("direct")
        ),
        "{first}"
    );
    assert_eq!(p["pendingInputs"], json!({"items": [], "total": 0}));
    assert!(p["defaults"]["model"].is_string(), "{first}");

    let (_, fin) = c
        .turn(json!({"message": "hello", "idempotencyKey": "page-1", "sessionKey": "fresh"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let h = c
        .call(
            "chat.history",
            json!({"sessionKey": "fresh", "inputRunIds": ["page-1"]}),
        )
        .await;
    let p = &h["payload"];
    assert_eq!(p["messages"].as_array().map(Vec::len), Some(2), "{h}");
    let info = &p["sessionInfo"];
    assert_eq!(
        (&info["lastRunId"], &info["status"], &info["hasActiveRun"]),
        (&json!("page-1"), &json!("done"), &json!(false)),
        "{h}"
    );
    assert!(p.get("inFlightRun").is_none(), "{h}");

    let reset = c
        .call(
            "chat.history",
            json!({"sessionKey": "fresh", "cursor": "whatever"}),
        )
        .await;
    assert_eq!(reset["payload"], json!({"kind": "reset"}), "{reset}");
    // The shortId form is refused by name, not half-answered.
    let short = c
        .call("chat.startup", json!({"shortId": "abc", "agentId": "main"}))
        .await;
    assert_eq!(short["ok"], false, "{short}");
    gw.logs.assert_clean(&[]);
}

/// `system-presence` lists the live connections (a bare array); a client that leaves is
/// gone from the next `presence` event; `hello-ok.snapshot.presence` holds the ones before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_lists_the_live_connections_r_j4() {
    let gw = Gateway::start().await;
    let mut a = gw.connect().await;
    let b = gw.connect().await;
    let hello_b = &b.seen[1]["payload"]["snapshot"]["presence"];
    assert!(
        hello_b.as_array().is_some_and(|p| !p.is_empty()),
        "b's hello lists a: {hello_b}"
    );
    let p = a.call("system-presence", json!({})).await;
    let list = p["payload"].as_array().expect("a bare array").clone();
    assert_eq!(list.len(), 3, "{p}");
    // The gateway's own entry first, as OpenClaw's (`openclaw status` reads it as
    // `gateway.self`): host, version, platform, instance id, mode gateway, reason self.
    let me = &list[0];
    assert_eq!(
        (&me["mode"], &me["reason"]),
        (&json!("gateway"), &json!("self")),
        "{me}"
    );
    assert!(
        me["host"].is_string() && me["instanceId"].is_string(),
        "{me}"
    );
    assert!(
        me["text"].as_str().unwrap().starts_with("Gateway: "),
        "{me}"
    );
    assert!(
        me.get("clientId").is_none() && me.get("scopes").is_none(),
        "{me}"
    );
    assert!(
        list[1..]
            .iter()
            .all(|e| e["ts"].is_u64() && e["clientId"].is_string() && e["reason"] == "connect"),
        "{p}"
    );
    drop(b);
    a.wait_for(|f| {
        f["event"] == "presence"
            && f["payload"]["presence"]
                .as_array()
                .is_some_and(|l| l.len() == 2)
    })
    .await;
    gw.logs.assert_clean(&[]);
}

/// `sessions.describe` gives a session's row (`null` for an unknown key, not an error);
/// `sessions.preview` the newest visible texts, cut at `maxChars`, and `missing` for keys
/// with no session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_preview_r_d3() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let long = "word ".repeat(100);
    let (_, fin) = c
        .turn(json!({"message": long, "idempotencyKey": "pv-1", "sessionKey": "pv"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");

    let d = c.call("sessions.describe", json!({"key": "pv"})).await;
    let row = &d["payload"]["session"];
    assert_eq!(
        (&row["key"], &row["lastRunId"], &row["status"]),
        (&json!("agent:main:pv"), &json!("pv-1"), &json!("done")),
        "{d}"
    );
    let d = c.call("sessions.describe", json!({"key": "nobody"})).await;
    assert_eq!(d["payload"], json!({"session": null}), "{d}");

    let p = c
        .call(
            "sessions.preview",
            json!({"keys": ["pv", "nobody"], "limit": 5, "maxChars": 40}),
        )
        .await;
    let previews = p["payload"]["previews"].as_array().unwrap();
    assert_eq!(previews[0]["status"], "ok", "{p}");
    let items = previews[0]["items"].as_array().unwrap();
    assert_eq!(items[0]["role"], "user", "{p}");
    assert!(items[0]["text"].as_str().unwrap().ends_with("..."), "{p}");
    assert!(
        items[0]["text"].as_str().unwrap().chars().count() <= 43,
        "{p}"
    );
    assert_eq!(items.len(), 2, "{p}");
    assert_eq!(previews[1]["status"], "missing", "{p}");
    gw.logs.assert_clean(&[]);
}

/// `sessions.patch` keeps a label and the read mark, tells subscribers, and refuses by name
/// what this gateway cannot honour per session (a model, a thinking level) and any field it
/// does not know.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_patch_keeps_label_and_read_mark_r_d3() {
    let gw = Gateway::start().await;
    let mut sub = gw.connect().await;
    sub.call("sessions.subscribe", json!({})).await;
    let mut c = gw.connect().await;
    let r = c
        .call(
            "sessions.patch",
            json!({"key": "p", "label": "  Groceries  ", "unread": false}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let entry = &r["payload"]["entry"];
    assert_eq!(entry["label"], "Groceries", "{r}");
    assert!(entry["lastReadAt"].is_u64(), "{r}");
    assert_eq!(r["payload"]["key"], "agent:main:p");
    let changed = sub
        .wait_for(|f| f["event"] == "sessions.changed" && f["payload"]["reason"] == "patch")
        .await;
    assert_eq!(
        changed["payload"]["session"]["label"], "Groceries",
        "{changed}"
    );

    let l = c.call("sessions.list", json!({})).await;
    let row = &l["payload"]["sessions"][0];
    assert_eq!(
        (&row["key"], &row["label"]),
        (&json!("agent:main:p"), &json!("Groceries")),
        "{l}"
    );

    let r = c
        .call(
            "sessions.patch",
            json!({"key": "p", "label": null, "unread": true}),
        )
        .await;
    assert!(r["payload"]["entry"].get("label").is_none(), "{r}");
    assert!(r["payload"]["entry"].get("lastReadAt").is_none(), "{r}");
    let r = c
        .call(
            "sessions.patch",
            json!({"key": "p", "thinkingLevel": "off"}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");

    for (params, needle) in [
        (json!({"key": "p", "model": "  "}), "model"),
        (
            json!({"key": "p", "thinkingLevel": "high"}),
            "thinkingLevel",
        ),
        (json!({"key": "p", "sandboxMode": "off"}), "sandboxMode"),
    ] {
        let r = c.call("sessions.patch", params).await;
        assert_eq!(r["ok"], false, "{r}");
        assert!(
            r["error"]["message"]
                .as_str()
                .unwrap_or("")
                .contains(needle),
            "{r}"
        );
    }
    gw.logs.assert_clean(&[]);
}

/// A user message in history names the request that sent it (`idempotencyKey`, the run id),
/// which is how the Control UI confirms a send; `sessions.messages.subscribe` answers with the
/// canonical key; `question.list` is empty (loopgate's agents ask none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_names_the_send_and_follow_answers_r_d3() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let r = c
        .call(
            "sessions.messages.subscribe",
            json!({"key": "m", "includeApprovals": true}),
        )
        .await;
    assert_eq!(
        (&r["payload"]["subscribed"], &r["payload"]["key"]),
        (&json!(true), &json!("agent:main:m")),
        "{r}"
    );
    assert_eq!(
        r["payload"]["approvalReplay"]["approvals"],
        json!([]),
        "{r}"
    );
    let id = c
        .send(
            "chat.send",
            json!({"sessionKey": "m", "message": "hello", "idempotencyKey": "send-1"}),
        )
        .await;
    assert_eq!(c.res(&id).await["payload"]["status"], "started");
    c.wait_for(|f| f["event"] == "chat" && f["payload"]["state"] == "final")
        .await;
    let h = c.call("chat.history", json!({"sessionKey": "m"})).await;
    let user = &h["payload"]["messages"][0];
    assert_eq!(
        (&user["role"], &user["idempotencyKey"]),
        (&json!("user"), &json!("send-1")),
        "{h}"
    );
    assert!(
        h["payload"]["messages"][1].get("idempotencyKey").is_none(),
        "{h}"
    );

    let r = c
        .call("sessions.messages.unsubscribe", json!({"key": "m"}))
        .await;
    assert_eq!(r["payload"]["subscribed"], false, "{r}");
    let q = c.call("question.list", json!({})).await;
    assert_eq!(q["payload"], json!({"questions": []}), "{q}");
    gw.logs.assert_clean(&[]);
}

/// After `sessions.reset`, subscribers get `sessions.changed` with the reason and the
/// session id, so a client drops the old transcript it shows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_is_told_to_subscribers_r_d3() {
    let gw = Gateway::start().await;
    let mut sub = gw.connect().await;
    sub.call("sessions.subscribe", json!({})).await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "rs-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let r = c
        .call("sessions.reset", json!({"key": "main", "reason": "new"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let ev = sub
        .wait_for(|f| f["event"] == "sessions.changed" && f["payload"]["reason"] == "new")
        .await;
    let p = &ev["payload"];
    assert_eq!(p["sessionKey"], "agent:main:main", "{ev}");
    assert!(p["session"]["sessionId"].is_string(), "{ev}");
    gw.logs.assert_clean(&[]);
}

/// A connection that follows a session gets `session.message` for each message recorded
/// (the user's, then the reply), each with its place; the chat `final` names the place of the
/// reply, and history shows the same places: a client matches its live copy with history's.
/// A connection that follows nothing gets no `session.message`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_get_each_recorded_message_with_its_place_r_d3() {
    let gw = Gateway::start().await;
    let mut follower = gw.connect().await;
    follower
        .call("sessions.messages.subscribe", json!({"key": "f"}))
        .await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "placed", "idempotencyKey": "place-1", "sessionKey": "f"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let msg = |f: &Value, role: &str| {
        f["event"] == "session.message"
            && f["payload"]["sessionKey"] == "agent:main:f"
            && f["payload"]["message"]["role"] == role
    };
    let user = follower.wait_for(|f| msg(f, "user")).await;
    let reply = follower.wait_for(|f| msg(f, "assistant")).await;
    assert_eq!(
        user["payload"]["message"]["idempotencyKey"], "place-1",
        "{user}"
    );
    assert_eq!(user["payload"]["runId"], "place-1");
    let final_ev = follower
        .wait_for(|f| f["event"] == "chat" && f["payload"]["state"] == "final")
        .await;
    let fp = &final_ev["payload"];
    assert_eq!(fp["messageId"], reply["payload"]["messageId"], "{final_ev}");
    assert_eq!(
        fp["messageSeq"], reply["payload"]["messageSeq"],
        "{final_ev}"
    );
    assert_eq!(
        fp["message"]["__openclaw"]["id"],
        reply["payload"]["messageId"]
    );

    let h = c.call("chat.history", json!({"sessionKey": "f"})).await;
    let shown = &h["payload"]["messages"];
    assert_eq!(
        shown[0]["__openclaw"]["id"], user["payload"]["messageId"],
        "{h}"
    );
    assert_eq!(
        shown[1]["__openclaw"]["id"], reply["payload"]["messageId"],
        "{h}"
    );
    assert_eq!(
        shown[1]["__openclaw"]["seq"], reply["payload"]["messageSeq"],
        "{h}"
    );
    assert!(
        !c.seen.iter().any(|f| f["event"] == "session.message"),
        "a connection that follows nothing got session.message"
    );
    gw.logs.assert_clean(&[]);
}

/// `sessions.patch {model}` (the Control UI's model picker): the session's turns run on that
/// model until it is cleared; its row says so; an unknown provider is refused; the choice
/// survives a gateway restart; other sessions keep the agent's model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_keeps_the_model_picked_for_it_r_d3() {
    let (mut gw, second) = Gateway::start_with_second().await;
    let mut c = gw.connect().await;
    let bad = c
        .call("sessions.patch", json!({"key": "pick", "model": "second/"}))
        .await;
    assert_eq!(bad["error"]["code"], "INVALID_REQUEST", "{bad}");
    let r = c
        .call(
            "sessions.patch",
            json!({"key": "pick", "model": "second/big-2"}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(
        (
            &r["payload"]["resolved"]["modelProvider"],
            &r["payload"]["resolved"]["model"]
        ),
        (&json!("second"), &json!("big-2")),
        "{r}"
    );
    second.push(loopgate_tests::reply("from second"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "pick-1", "sessionKey": "pick"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(second.requests()[0].body["model"], "big-2");
    // Another session is untouched.
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "other-1", "sessionKey": "other"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["meta"]["agentMeta"]["provider"], "scripted",
        "{fin}"
    );

    // After a restart the session still runs there.
    drop(c);
    gw.stop(nix::sys::signal::Signal::SIGTERM).await;
    gw.spawn().await;
    let mut c = gw.connect().await;
    let d = c.call("sessions.describe", json!({"key": "pick"})).await;
    assert_eq!(d["payload"]["session"]["modelProvider"], "second", "{d}");
    second.push(loopgate_tests::reply("again"));
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "pick-2", "sessionKey": "pick"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["meta"]["agentMeta"]["model"], "big-2",
        "{fin}"
    );
    // Cleared: back to the agent's model.
    c.call("sessions.patch", json!({"key": "pick", "model": null}))
        .await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "pick-3", "sessionKey": "pick"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["meta"]["agentMeta"]["provider"], "scripted",
        "{fin}"
    );
    gw.logs.assert_clean(&[]);
}

/// A client with the `session-scoped-events` capability hears `agent` and `chat` events only
/// of the sessions it follows; others hear every session's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_scoped_clients_hear_only_the_sessions_they_follow_r_d1() {
    let gw = Gateway::start().await;
    let mut params = loopgate_tests::client::connect_params();
    params["caps"] = json!(["session-scoped-events"]);
    let mut scoped = loopgate_tests::Client::connect_with(&gw.socket(), params).await;
    scoped
        .call("sessions.messages.subscribe", json!({"key": "mine"}))
        .await;
    let mut all = gw.connect().await;
    let mut c = gw.connect().await;
    for (key, id) in [("theirs", "sc-theirs"), ("mine", "sc-mine")] {
        let (_, fin) = c
            .turn(json!({"message": "hi", "idempotencyKey": id, "sessionKey": key}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
    // Both runs' terminal events reach the unscoped client; the scoped one gets "mine"'s.
    for id in ["sc-theirs", "sc-mine"] {
        all.chat_event(id, |p| p["state"] == "final").await;
    }
    scoped
        .chat_event("sc-mine", |p| p["state"] == "final")
        .await;
    let heard_theirs = scoped.seen.iter().chain(scoped.backlog.iter()).any(|f| {
        (f["event"] == "agent" || f["event"] == "chat") && f["payload"]["runId"] == "sc-theirs"
    });
    assert!(
        !heard_theirs,
        "a scoped client heard a session it does not follow"
    );
    gw.logs.assert_clean(&[]);
}
