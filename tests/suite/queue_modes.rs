//! Queue modes (R-B3): what a message does when its session is busy: steered into the
//! running turn, queued as a followup, collected into one turn, or run next after
//! interrupting the turn; a full queue's drop policies; request > session > config.

use loopgate_tests::{hold, reply, Client, Gateway, WAIT};
use serde_json::{json, Value};

/// Sends an `agent` request in `session` and returns its request id once accepted.
async fn queue(c: &mut Client, id: &str, session: &str, mode: Option<&str>) -> String {
    let mut p =
        json!({"message": format!("message {id}"), "idempotencyKey": id, "sessionKey": session});
    if let Some(m) = mode {
        p["queueMode"] = json!(m);
    }
    let req = c.send("agent", p).await;
    let acc = c.res(&req).await;
    assert_eq!(acc["payload"]["status"], "accepted", "{acc}");
    req
}

/// The texts of the user messages of a recorded model request.
fn user_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str().map(str::to_owned))
        .collect()
}

/// The row of session `key` in a `sessions.list` answer (`null` if absent).
fn session_row(list: &Value, key: &str) -> Value {
    list["payload"]["sessions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["key"] == key)
        .cloned()
        .unwrap_or_default()
}

fn texts(fin: &Value) -> Vec<&str> {
    fin["payload"]["result"]["payloads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

/// `steer` (the default): the second message joins the running turn. It is the last user
/// message of that run's next model request, and it ends with the turn's outcome, the
/// record naming the carrier. On the wire as OpenClaw's (issue 26 item 3): the steered run
/// gets one chat `final` with no message when the turn takes it in, and no lifecycle or
/// assistant events of its own; the answer streams in the carrier as its next item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steered_message_joins_the_running_turn_and_ends_with_it_r_b3() {
    let gw = Gateway::start().await;
    gw.model.push(hold("First answer."));
    gw.model.push(reply("Second answer."));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "st-1", "sessionKey": "st"}))
        .await;
    let second = queue(&mut c, "st-2", "st", None).await;
    // The worker answers a later question on the link once it has the message in hand.
    c.call("diagnostics.lanes", json!({})).await;
    gw.model.release();
    let taken = c.chat_event("st-2", |p| p["state"] == "final").await;
    assert!(taken["payload"].get("message").is_none(), "{taken}");
    let f1 = c.res(&first).await;
    assert_eq!(f1["payload"]["status"], "ok", "{f1}");
    assert_eq!(texts(&f1), ["First answer.", "Second answer."], "{f1}");
    let f2 = c.res(&second).await;
    assert_eq!(f2["payload"]["status"], "ok", "{f2}");
    assert_eq!(f2["payload"]["result"]["meta"]["carriedBy"], "st-1", "{f2}");
    assert_eq!(texts(&f2), texts(&f1), "the carrier's outcome");
    let requests = gw.model.requests();
    assert_eq!(requests.len(), 2, "one run, two model calls");
    assert_eq!(
        user_texts(&requests[1].body).last().map(String::as_str),
        Some("message st-2"),
        "{}",
        requests[1].body
    );
    // No events of its own but that one; the answer was the carrier's second item.
    let own: Vec<&Value> = c
        .seen
        .iter()
        .filter(|f| f["type"] == "event" && f["payload"]["runId"] == "st-2")
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    assert!(c.seen.iter().any(|f| f["event"] == "agent"
        && f["payload"]["runId"] == "st-1"
        && f["payload"]["data"]["itemId"] == "st-1:2"
        && f["payload"]["data"]["text"] == "Second answer."));
    // A wait says who carried it.
    let w = c
        .call("agent.wait", json!({"runId": "st-2", "timeoutMs": 1000}))
        .await;
    assert_eq!(w["payload"]["status"], "ok", "{w}");
    assert_eq!(w["payload"]["carriedBy"], "st-1", "{w}");
    // History has the steered message, under its own run id (inputRunIds finds it).
    let h = c
        .call(
            "chat.history",
            json!({"sessionKey": "st", "inputRunIds": ["st-2"]}),
        )
        .await;
    let consumed = &h["payload"]["inputConsumptions"];
    assert_eq!(consumed[0]["runId"], "st-2", "{h}");
    gw.logs.assert_clean(&[]);
}

/// `followup`: each message waits and runs as its own turn, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followups_run_as_their_own_turns_in_order_r_b3() {
    let gw = Gateway::start().await;
    gw.model.push(hold("one"));
    gw.model.push(reply("two"));
    gw.model.push(reply("three"));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "fu-1", "sessionKey": "fu"}))
        .await;
    let b = queue(&mut c, "fu-2", "fu", Some("followup")).await;
    let d = queue(&mut c, "fu-3", "fu", Some("followup")).await;
    gw.model.release();
    for (req, text) in [(&first, "one"), (&b, "two"), (&d, "three")] {
        let f = c.res(req).await;
        assert_eq!(f["payload"]["status"], "ok", "{f}");
        assert_eq!(texts(&f), [text], "{f}");
        assert!(f["payload"]["result"]["meta"].get("carriedBy").is_none());
    }
    let last: Vec<String> = gw
        .model
        .requests()
        .iter()
        .filter_map(|r| user_texts(&r.body).last().cloned())
        .collect();
    assert_eq!(last, ["one", "message fu-2", "message fu-3"]);
}

/// `collect`: three quick messages run as one turn whose request carries all three; each
/// ends with that turn's outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collected_messages_run_as_one_turn_r_b3() {
    let gw =
        Gateway::start_with("[messages.queue]\nmode = \"collect\"\ndebounce_ms = 1000\n").await;
    gw.model.push(hold("busy"));
    gw.model.push(reply("All three read."));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "co-1", "sessionKey": "co"}))
        .await;
    let mut queued = Vec::new();
    for id in ["co-2", "co-3", "co-4"] {
        queued.push(queue(&mut c, id, "co", None).await);
    }
    gw.model.release();
    assert_eq!(c.res(&first).await["payload"]["status"], "ok");
    for (req, carrier) in queued.iter().zip([None, Some("co-2"), Some("co-2")]) {
        let f = c.res(req).await;
        assert_eq!(f["payload"]["status"], "ok", "{f}");
        assert_eq!(texts(&f), ["All three read."], "{f}");
        assert_eq!(
            f["payload"]["result"]["meta"]["carriedBy"].as_str(),
            carrier,
            "{f}"
        );
    }
    let requests = gw.model.requests();
    assert_eq!(requests.len(), 2, "one turn for the three");
    let last = user_texts(&requests[1].body).pop().unwrap_or_default();
    for id in ["co-2", "co-3", "co-4"] {
        assert!(last.contains(&format!("message {id}")), "{last}");
    }
    // Each collected message has its receipt: the carrier's recorded user message.
    let h = c
        .call(
            "chat.history",
            json!({"sessionKey": "co", "inputRunIds": ["co-2", "co-3", "co-4"]}),
        )
        .await;
    let receipts = h["payload"]["inputReceipts"]
        .as_array()
        .expect("receipts")
        .clone();
    assert_eq!(receipts.len(), 3, "{h}");
    let entries: Vec<&Value> = receipts.iter().map(|r| &r["consumedByEventId"]).collect();
    assert!(entries[0].is_string(), "{h}");
    assert!(
        entries.iter().all(|e| *e == entries[0]),
        "one entry for the three: {h}"
    );
    for r in &receipts {
        assert_eq!(r["state"], "consumed", "{h}");
    }
}

/// `interrupt`: the running turn ends aborted with stop reason `interrupt`, the newest
/// message runs next, before a followup queued earlier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupting_message_aborts_the_turn_and_runs_next_r_b3() {
    let gw = Gateway::start().await;
    gw.model.push(hold("half an ans"));
    gw.model.push(reply("new topic"));
    gw.model.push(reply("the old followup"));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "in-1", "sessionKey": "in"}))
        .await;
    let waiting = queue(&mut c, "in-2", "in", Some("followup")).await;
    let newest = queue(&mut c, "in-3", "in", Some("interrupt")).await;
    let f1 = c.res(&first).await;
    assert_eq!(f1["payload"]["summary"], "aborted", "{f1}");
    assert_eq!(f1["payload"]["stopReason"], "interrupt", "{f1}");
    let aborted = c.chat_event("in-1", |p| p["state"] == "aborted").await;
    assert_eq!(aborted["payload"]["stopReason"], "interrupt", "{aborted}");
    let f3 = c.res(&newest).await;
    assert_eq!(texts(&f3), ["new topic"], "{f3}");
    let f2 = c.res(&waiting).await;
    assert_eq!(texts(&f2), ["the old followup"], "{f2}");
}

/// A full queue (`cap`) gives way by `drop` policy: `new` ends the arriving message, `old`
/// the oldest waiting one, each as an error naming the policy; `summarize` folds the oldest
/// into a summary line the next turn carries, and it ends with that turn's outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_drops_by_policy_r_b3() {
    for drop in ["new", "old", "summarize"] {
        let gw = Gateway::start_with(&format!(
            "[messages.queue]\nmode = \"followup\"\ncap = 1\ndrop = \"{drop}\"\n"
        ))
        .await;
        gw.model.push(hold("busy"));
        let mut c = gw.connect().await;
        let first = c
            .start_streaming(
                json!({"message": "one", "idempotencyKey": "cap-1", "sessionKey": "cap"}),
            )
            .await;
        let two = queue(&mut c, "cap-2", "cap", None).await;
        let three = queue(&mut c, "cap-3", "cap", None).await;
        if drop == "summarize" {
            // `accepted` is answered before the run reaches its worker: wait until the
            // worker holds cap-3 queued and cap-2 folded (depth 2) before the turn ends.
            tokio::time::timeout(WAIT, async {
                loop {
                    let lanes = c.call("diagnostics.lanes", json!({})).await;
                    if lanes.to_string().contains("\"queueDepth\":2") {
                        break;
                    }
                    tokio::task::yield_now().await;
                }
            })
            .await
            .expect("cap-3 reaches the worker's queue");
        }
        let (dropped, kept) = match drop {
            "new" => (Some(&three), &two),
            "old" => (Some(&two), &three),
            _ => (None, &three),
        };
        if let Some(d) = dropped {
            // Ends at once, while the turn still runs.
            let f = c.res(d).await;
            assert_eq!(f["payload"]["status"], "error", "{drop}: {f}");
            let error = f["payload"]["error"].as_str().unwrap_or_default();
            assert!(
                error.contains(&format!("drop policy \"{drop}\"")),
                "{drop}: {error}"
            );
        }
        gw.model.release();
        assert_eq!(c.res(&first).await["payload"]["status"], "ok");
        let f = c.res(kept).await;
        assert_eq!(f["payload"]["status"], "ok", "{drop}: {f}");
        let requests = gw.model.requests();
        let last = user_texts(&requests[1].body).pop().unwrap_or_default();
        if drop == "summarize" {
            assert!(
                last.contains("dropped because the session's queue was full"),
                "{last}"
            );
            assert!(
                last.contains("- message cap-2") && last.ends_with("message cap-3"),
                "{last}"
            );
            let folded = c.res(&two).await;
            assert_eq!(folded["payload"]["status"], "ok", "{folded}");
            assert_eq!(folded["payload"]["result"]["meta"]["carriedBy"], "cap-3");
        } else {
            assert!(!last.contains("dropped"), "{last}");
        }
        assert_eq!(requests.len(), 2, "{drop}: the dropped message never ran");
    }
}

/// Precedence request > session > config: a session set to `interrupt` interrupts with a
/// message that names no mode, not with one that asks for `followup`; other sessions keep
/// the config's mode. Rows show the effective mode; a bad mode is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_mode_precedence_is_request_then_session_then_config_r_b3() {
    let gw = Gateway::start_with("[messages.queue]\nmode = \"followup\"\n").await;
    let mut c = gw.connect().await;
    let bad = c
        .call(
            "sessions.patch",
            json!({"key": "pr", "queueMode": "sometimes"}),
        )
        .await;
    assert_eq!(bad["error"]["code"], "INVALID_REQUEST", "{bad}");
    let ok = c
        .call(
            "sessions.patch",
            json!({"key": "pr", "queueMode": "interrupt"}),
        )
        .await;
    assert_eq!(ok["ok"], true, "{ok}");
    let list = c.call("sessions.list", json!({})).await;
    let row = |key: &str| session_row(&list, key);
    assert_eq!(
        row("agent:main:pr")["effectiveQueueMode"],
        "interrupt",
        "{list}"
    );
    assert_eq!(row("agent:main:pr")["queueMode"], "interrupt", "{list}");

    gw.model.push(hold("first"));
    gw.model.push(reply("newest"));
    gw.model.push(reply("asked to wait"));
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "pr-1", "sessionKey": "pr"}))
        .await;
    // The request's own mode wins over the session's.
    let waits = queue(&mut c, "pr-2", "pr", Some("followup")).await;
    let w = c
        .call("agent.wait", json!({"runId": "pr-2", "timeoutMs": 100}))
        .await;
    assert_eq!(w["payload"]["timeoutPhase"], "queue", "{w}");
    // No mode named: the session's `interrupt`.
    let newest = queue(&mut c, "pr-3", "pr", None).await;
    let f1 = c.res(&first).await;
    assert_eq!(f1["payload"]["stopReason"], "interrupt", "{f1}");
    assert_eq!(texts(&c.res(&newest).await), ["newest"]);
    assert_eq!(texts(&c.res(&waits).await), ["asked to wait"]);

    // Another session has no mode of its own: the config's `followup`.
    c.turn(json!({"message": "x", "idempotencyKey": "other-1", "sessionKey": "other"}))
        .await;
    let list = c.call("sessions.list", json!({})).await;
    let other = session_row(&list, "agent:main:other");
    assert_eq!(other["effectiveQueueMode"], "followup", "{list}");
    // Cleared: back to the config's.
    c.call("sessions.patch", json!({"key": "pr", "queueMode": null}))
        .await;
    let list = c.call("sessions.list", json!({})).await;
    let pr = session_row(&list, "agent:main:pr");
    assert_eq!(pr["effectiveQueueMode"], "followup", "{list}");
    assert!(pr.get("queueMode").is_none(), "{pr}");
}

/// Aborting a steered message stops only that message: the turn it was steered into goes on
/// and ends `ok`, and the aborted message is never run (or recorded) afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_a_steered_message_leaves_its_turn_alone_r_b3() {
    let gw = Gateway::start().await;
    gw.model.push(hold("Only the first."));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "sa-1", "sessionKey": "sa"}))
        .await;
    let second = queue(&mut c, "sa-2", "sa", None).await;
    // The worker answers a later question on the link once it has the message in hand.
    c.call("diagnostics.lanes", json!({})).await;
    let r = c
        .call("chat.abort", json!({"sessionKey": "sa", "runId": "sa-2"}))
        .await;
    assert_eq!(r["payload"]["runIds"], json!(["sa-2"]), "{r}");
    assert_eq!(c.res(&second).await["payload"]["summary"], "aborted");
    // The worker has handled the cancel once it answers a later question on the same link
    // (the abort is terminal at once for clients, before the worker hears of it).
    c.call("diagnostics.lanes", json!({})).await;
    gw.model.release();
    let f1 = c.res(&first).await;
    assert_eq!(f1["payload"]["status"], "ok", "the turn went on: {f1}");
    assert_eq!(texts(&f1), ["Only the first."]);
    // Nothing ran for the aborted message: one model call, and no user message of its run.
    c.turn(json!({"message": "three", "idempotencyKey": "sa-3", "sessionKey": "sa"}))
        .await;
    let requests = gw.model.requests();
    assert_eq!(requests.len(), 2, "sa-1 and sa-3 only");
    assert!(
        !user_texts(&requests[1].body).contains(&"message sa-2".to_owned()),
        "{}",
        requests[1].body
    );
}

/// `/queue followup cap:1 drop:new` (issue 39, `commands.list`'s `queue` args): the
/// session's own cap and drop policy decide over the config's (cap 20, summarize), `/queue`
/// alone says so in OpenClaw's words, and the settings survive a restart of the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_own_queue_cap_and_drop_decide_and_persist_issue_39() {
    let mut gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let say =
        |text: &str, id: &str| json!({"sessionKey": "qo", "message": text, "idempotencyKey": id});
    let (_, fin) = c.turn(say("/queue followup cap:1 drop:new", "qo-0")).await;
    assert_eq!(
        texts(&fin),
        ["⚙️ Queue mode set to followup. ⚙️ Queue cap set to 1. ⚙️ Queue drop set to new."],
        "{fin}"
    );
    let list = c.call("commands.list", json!({})).await;
    let entry = list["payload"]["commands"]
        .as_array()
        .and_then(|cs| cs.iter().find(|e| e["name"] == "queue"))
        .cloned()
        .unwrap_or_default();
    let args: Vec<(&str, &str)> = entry["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| Some((a["name"].as_str()?, a["type"].as_str()?)))
        .collect();
    assert_eq!(
        args,
        [
            ("mode", "string"),
            ("debounce", "string"),
            ("cap", "number"),
            ("drop", "string")
        ],
        "{entry}"
    );

    gw.stop(nix::sys::signal::Signal::SIGTERM).await;
    gw.spawn().await;
    let mut c = gw.connect().await;
    let (_, fin) = c.turn(say("/queue", "qo-1")).await;
    assert_eq!(
        texts(&fin),
        ["Current queue settings: mode=followup, debounce=500ms, cap=1, drop=new.\n\
          Options: modes steer, followup, collect, interrupt; debounce:<ms|s|m>, cap:<n>, drop:old|new|summarize."],
        "kept across the restart: {fin}"
    );
    gw.model.push(hold("busy"));
    let first = c.start_streaming(say("one", "qo-2")).await;
    let two = queue(&mut c, "qo-3", "qo", None).await;
    let three = queue(&mut c, "qo-4", "qo", None).await;
    let f = c.res(&three).await;
    assert_eq!(f["payload"]["status"], "error", "{f}");
    let error = f["payload"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("(1 messages waiting; drop policy \"new\")"),
        "{error}"
    );
    gw.model.release();
    assert_eq!(c.res(&first).await["payload"]["status"], "ok");
    assert_eq!(c.res(&two).await["payload"]["status"], "ok");
    // `/queue reset` drops them all: the config's again.
    let (_, fin) = c.turn(say("/queue reset", "qo-5")).await;
    assert_eq!(texts(&fin), ["⚙️ Queue mode reset to default."], "{fin}");
    let (_, fin) = c.turn(say("/queue", "qo-6")).await;
    assert!(
        texts(&fin)[0].starts_with(
            "Current queue settings: mode=steer, debounce=500ms, cap=20, drop=summarize."
        ),
        "{fin}"
    );
}
