//! `chat.history` paging, byte cap and input receipts, `chat.inject`, and the
//! `sessions.changed` of a delete (issue 11), on the real binaries.

use loopgate_tests::Gateway;
use serde_json::{json, Value};

fn texts(page: &Value) -> Vec<String> {
    page["payload"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect()
}

/// A page holds the newest `limit` messages; `hasMore` + `nextOffset` page back to the
/// oldest, with no message twice and none missing; the last page says nothing more. A
/// `maxBytes` smaller than the window keeps the newest that fit and pages on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_pages_back_by_offset_and_caps_bytes_r_d3() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    for i in 0..3 {
        let (_, fin) = c
            .turn(json!({"message": format!("ask {i}"), "idempotencyKey": format!("pg-{i}"), "sessionKey": "pg"}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
    let all = c.call("chat.history", json!({"sessionKey": "pg"})).await;
    let every = texts(&all);
    assert_eq!(every.len(), 6, "{all}");
    assert!(all["payload"].get("hasMore").is_none(), "{all}");
    assert!(all["payload"].get("nextOffset").is_none(), "{all}");

    let mut seen: Vec<String> = Vec::new();
    let mut offset: Option<u64> = None;
    let mut pages = 0;
    loop {
        let mut params = json!({"sessionKey": "pg", "limit": 4});
        if let Some(o) = offset {
            params["offset"] = json!(o);
        }
        let page = c.call("chat.history", params).await;
        assert_eq!(page["ok"], true, "{page}");
        let mut t = texts(&page);
        t.extend(seen);
        seen = t;
        pages += 1;
        match page["payload"]["nextOffset"].as_u64() {
            Some(next) => {
                assert_eq!(page["payload"]["hasMore"], true, "{page}");
                offset = Some(next);
            }
            None => {
                assert!(page["payload"].get("hasMore").is_none(), "{page}");
                break;
            }
        }
        assert!(pages < 5, "paging does not end");
    }
    assert_eq!(pages, 2);
    assert_eq!(
        seen, every,
        "paging back gives the whole history once, in order"
    );

    // Each message is a few hundred bytes stored: 1024 bytes hold the newest few only.
    let capped = c
        .call(
            "chat.history",
            json!({"sessionKey": "pg", "maxBytes": 1024}),
        )
        .await;
    let t = texts(&capped);
    assert!(!t.is_empty() && t.len() < 6, "{capped}");
    assert_eq!(t, every[6 - t.len()..].to_vec(), "the newest that fit");
    assert_eq!(capped["payload"]["hasMore"], true, "{capped}");
    // A reply larger than the whole cap is shown by its place, not left out silently.
    gw.model.push(loopgate_tests::reply(&"w".repeat(4096)));
    let (_, fin) = c
        .turn(json!({"message": "big", "idempotencyKey": "pg-big", "sessionKey": "pg"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let tiny = c
        .call(
            "chat.history",
            json!({"sessionKey": "pg", "maxBytes": 1024, "limit": 1}),
        )
        .await;
    let last = &tiny["payload"]["messages"][0];
    assert!(
        last["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .starts_with("[message omitted:"),
        "{tiny}"
    );
    assert_eq!(last["role"], "assistant");
    assert!(last["__openclaw"]["id"].is_string(), "{tiny}");
    let small = c
        .call("chat.history", json!({"sessionKey": "pg", "maxBytes": 10}))
        .await;
    assert_eq!(
        small["ok"], false,
        "maxBytes below 1024 is refused: {small}"
    );
    gw.logs.assert_clean(&[]);
}

/// `inputRunIds` asks which sends reached the transcript: a run that recorded its message
/// is `consumed` by that message's entry (also listed in `inputConsumptions`), wherever it
/// is in the transcript; a run the gateway never saw gets no receipt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn input_receipts_name_the_recorded_message_r_d3() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    for id in ["rc-1", "rc-2"] {
        let (_, fin) = c
            .turn(json!({"message": id, "idempotencyKey": id, "sessionKey": "rc"}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
    // The page (limit 1) holds only the last reply; the receipts still find both messages.
    let h = c
        .call(
            "chat.history",
            json!({"sessionKey": "rc", "limit": 1, "inputRunIds": ["rc-1", "rc-2", "nobody"]}),
        )
        .await;
    let p = &h["payload"];
    let receipts = p["inputReceipts"].as_array().expect("receipts").clone();
    assert_eq!(receipts.len(), 2, "{h}");
    for (r, id) in receipts.iter().zip(["rc-1", "rc-2"]) {
        assert_eq!(
            (&r["runId"], &r["state"]),
            (&json!(id), &json!("consumed")),
            "{h}"
        );
        assert!(r["consumedByEventId"].is_string(), "{h}");
    }
    let full = c.call("chat.history", json!({"sessionKey": "rc"})).await;
    let user_ids: Vec<&Value> = full["payload"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .map(|m| &m["__openclaw"]["id"])
        .collect();
    assert_eq!(
        user_ids,
        receipts
            .iter()
            .map(|r| &r["consumedByEventId"])
            .collect::<Vec<_>>(),
        "each receipt names its user message: {full}"
    );
    assert_eq!(
        p["inputConsumptions"].as_array().map(Vec::len),
        Some(2),
        "{h}"
    );
    let none = c.call("chat.history", json!({"sessionKey": "rc"})).await;
    assert!(none["payload"].get("inputReceipts").is_none(), "{none}");
    gw.logs.assert_clean(&[]);
}

/// `chat.inject` records an operator's note as an assistant message of an existing session
/// (`[label]` above it), answers its message id, tells followers (`session.message`, chat
/// `final` with run id `inject-<id>`) and shows in history with its place. A session that
/// does not exist, an empty message or a long label is refused; the gateway keeps serving.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_inject_records_a_note_and_tells_followers_r_d3() {
    let gw = Gateway::start().await;
    let mut follower = gw.connect().await;
    follower
        .call("sessions.messages.subscribe", json!({"key": "inj"}))
        .await;
    let mut c = gw.connect().await;
    let missing = c
        .call(
            "chat.inject",
            json!({"sessionKey": "inj", "message": "early"}),
        )
        .await;
    assert_eq!(missing["ok"], false, "{missing}");
    assert_eq!(missing["error"]["code"], "INVALID_REQUEST", "{missing}");
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "inj-1", "sessionKey": "inj"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let r = c
        .call(
            "chat.inject",
            json!({"sessionKey": "inj", "message": "back at 5", "label": "note"}),
        )
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let id = r["payload"]["messageId"]
        .as_str()
        .expect("messageId")
        .to_owned();
    let told = follower
        .wait_for(|f| f["event"] == "session.message" && f["payload"]["messageId"] == id.as_str())
        .await;
    assert_eq!(told["payload"]["message"]["role"], "assistant", "{told}");
    assert!(
        told["payload"].get("runId").is_none(),
        "no run wrote it: {told}"
    );
    let fin = follower
        .wait_for(|f| f["event"] == "chat" && f["payload"]["runId"] == format!("inject-{id}"))
        .await;
    assert_eq!(fin["payload"]["state"], "final", "{fin}");
    assert_eq!(fin["payload"]["messageId"], id.as_str(), "{fin}");

    let h = c.call("chat.history", json!({"sessionKey": "inj"})).await;
    let last = h["payload"]["messages"]
        .as_array()
        .and_then(|m| m.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["content"][0]["text"], "[note]\n\nback at 5", "{h}");
    assert_eq!(last["__openclaw"]["id"], id.as_str(), "{h}");
    assert_eq!(last["model"], "gateway-injected", "{h}");

    for bad in [
        json!({"sessionKey": "inj", "message": "  "}),
        json!({"sessionKey": "inj", "message": "x", "label": "l".repeat(101)}),
        json!({"sessionKey": "inj", "message": "x", "extra": 1}),
    ] {
        let e = c.call("chat.inject", bad.clone()).await;
        assert_eq!(e["error"]["code"], "INVALID_REQUEST", "{bad}: {e}");
    }
    // The next turn still runs, and the model saw the note as its own earlier message.
    let (_, fin) = c
        .turn(json!({"message": "again", "idempotencyKey": "inj-2", "sessionKey": "inj"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.logs.assert_clean(&[]);
}

/// Deleting a session tells `sessions.subscribe` subscribers `{reason: "delete"}` with no
/// row, so lists drop it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delete_is_told_to_subscribers_r_d3() {
    let gw = Gateway::start().await;
    let mut sub = gw.connect().await;
    sub.call("sessions.subscribe", json!({})).await;
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "del-1", "sessionKey": "gone"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let r = c.call("sessions.delete", json!({"key": "gone"})).await;
    assert_eq!(r["payload"]["deleted"], true, "{r}");
    let ev = sub
        .wait_for(|f| f["event"] == "sessions.changed" && f["payload"]["reason"] == "delete")
        .await;
    assert_eq!(ev["payload"]["sessionKey"], "agent:main:gone", "{ev}");
    assert!(ev["payload"].get("session").is_none(), "{ev}");
    gw.logs.assert_clean(&[]);
}

/// `chat.history` carries the session's own levels at its top level once set, and none
/// before (operator-surface §15; issue 39, seen by the chat-surface check).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_tells_the_sessions_own_levels_at_its_top_level_issue_39() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let key = "agent:main:levels";
    let (_, fin) = c
        .turn(json!({"message": "hi", "idempotencyKey": "lv-1", "sessionKey": key}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let page = c.call("chat.history", json!({"sessionKey": key})).await;
    let p = &page["payload"];
    assert!(
        p.get("verboseLevel").is_none() && p.get("thinkingLevel").is_none(),
        "{page}"
    );
    let r = c
        .call("sessions.patch", json!({"key": key, "verboseLevel": "on"}))
        .await;
    assert_eq!(r["ok"], true, "{r}");
    let page = c.call("chat.history", json!({"sessionKey": key})).await;
    assert_eq!(page["payload"]["verboseLevel"], "on", "{page}");
    assert_eq!(
        page["payload"]["sessionInfo"]["verboseLevel"], "on",
        "{page}"
    );
    assert!(page["payload"].get("thinkingLevel").is_none(), "{page}");
}
