//! The seed's reply rules (issue 26 item 5): a `message` send is the turn's answer only from
//! its last tool batch (R-E3); otherwise an empty final gets the tool-free finalization pass
//! and the failed tool's warning (R-F2, R-F4), on the real binaries.

use loopgate_tests::{reply, tool_call as calls, Gateway, REVIEW_HOOK};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_progress_message_then_failing_tools_is_not_the_answer_r_e3() {
    let gw = Gateway::start().await;
    gw.model
        .push(calls("m1", "message", r#"{"text": "Working on it…"}"#));
    gw.model
        .push(calls("r1", "read", r#"{"path": "no-such-file.txt"}"#));
    gw.model.push(reply(""));
    gw.model.push(reply(""));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "do it", "idempotencyKey": "pm-1"}))
        .await;
    let payloads = fin["payload"]["result"]["payloads"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(payloads[0]["text"], "Working on it…", "{fin}");
    assert!(
        payloads.iter().any(|p| p["isError"] == true
            && p["text"]
                .as_str()
                .is_some_and(|t| t.contains("The read tool failed"))),
        "the failure is told, not an answerless ok: {fin}"
    );
    let requests = gw.model.requests();
    assert_eq!(requests.len(), 4, "the finalization pass was made");
    let last = &requests[3].body;
    assert!(
        last.get("tools")
            .is_none_or(|t| t.as_array().is_some_and(Vec::is_empty)),
        "the pass offers no tools: {last}"
    );
}

/// R-H2, issue 26 item 5: a `message` send goes through `message_sending` when it is sent:
/// a cancelled one is never streamed nor a payload, and is no delivery proof (no
/// `sourceReplyDelivered`); a rewritten one is delivered as rewritten, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_send_is_delivered_as_the_guard_left_it_r_h2() {
    let gw = Gateway::start_with(&REVIEW_HOOK.replace("[reviewed] ok", "[reviewed] fine")).await;
    gw.model
        .push(calls("m1", "message", r#"{"text": "this is forbidden"}"#));
    gw.model.push(reply(""));
    gw.model.push(reply(""));
    let mut c = gw.connect().await;
    let (_, fin) = c
        .turn(json!({"message": "send it", "idempotencyKey": "g-1"}))
        .await;
    let meta = &fin["payload"]["result"]["meta"];
    assert!(
        meta.get("terminalReceipt").is_none(),
        "a cancelled send is no delivery proof: {fin}"
    );
    assert!(
        !c.assistant_text("g-1").contains("forbidden"),
        "never streamed"
    );
    assert!(!fin.to_string().contains("this is forbidden"), "{fin}");

    gw.model
        .push(calls("m2", "message", r#"{"text": "all good"}"#));
    gw.model.push(reply(""));
    let (_, fin) = c
        .turn(json!({"message": "send it", "idempotencyKey": "g-2"}))
        .await;
    assert_eq!(
        fin["payload"]["result"]["payloads"],
        json!([{"text": "[reviewed] fine"}]),
        "{fin}"
    );
    assert_eq!(
        fin["payload"]["result"]["meta"]["terminalReceipt"]["sourceReplyDelivered"], true,
        "{fin}"
    );
    assert!(c.assistant_text("g-2").contains("[reviewed] fine"));
}

/// R-H2, issue 26 item 5: `message_sending` protects chat users too: a cancelled final reply
/// is in neither the chat `final` nor `chat.history`; a rewritten one shows rewritten in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guarded_final_reply_is_what_chat_and_history_show_r_h2() {
    let gw = Gateway::start_with(REVIEW_HOOK).await;
    gw.model.push(reply("this is forbidden"));
    gw.model.push(reply("this is fine"));
    let mut c = gw.connect().await;
    let mut finals = Vec::new();
    // One after the other (sent together, the second would be steered into the first).
    for (key, text) in [("h-1", "first"), ("h-2", "second")] {
        let ack = c
            .call(
                "chat.send",
                json!({"sessionKey": "guarded", "message": text, "idempotencyKey": key}),
            )
            .await;
        assert_eq!(ack["payload"]["status"], "started", "{ack}");
        finals.push(c.chat_event(key, |p| p["state"] == "final").await);
    }
    assert!(
        !finals[0].to_string().contains("forbidden"),
        "a cancelled reply is not the chat final: {}",
        finals[0]
    );
    assert_eq!(
        finals[1]["payload"]["message"]["content"][0]["text"], "[reviewed] ok",
        "{}",
        finals[1]
    );
    let h = c
        .call("chat.history", json!({"sessionKey": "guarded"}))
        .await;
    let said: Vec<&str> = h["payload"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"][0]["text"].as_str())
        .collect();
    assert_eq!(said, ["[reviewed] ok"], "{h}");
}

/// What clients were shown of a run under the guard `hook`: it answers "A forbidden first
/// answer." while a second message is steered into it, then "Second answer.".
struct Steered {
    /// The run's chat `final`, its final `agent` response, history's assistant texts.
    chat_final: Value,
    result: Value,
    history: Vec<String>,
    /// Whether the steered message's answer was a message (`itemId` `<run>:2`) of its own.
    second_item: bool,
}

async fn steered_past(hook: &str) -> Steered {
    let gw = Gateway::start_with(hook).await;
    gw.model
        .push(loopgate_tests::hold("A forbidden first answer."));
    gw.model.push(reply("Second answer."));
    let mut c = gw.connect().await;
    let first = c
        .start_streaming(json!({"message": "one", "idempotencyKey": "sg-1", "sessionKey": "sg"}))
        .await;
    let second = c
        .send(
            "agent",
            json!({"message": "two", "idempotencyKey": "sg-2", "sessionKey": "sg"}),
        )
        .await;
    let acc = c.res(&second).await;
    assert_eq!(acc["payload"]["status"], "accepted", "{acc}");
    // The worker answers a later question on the link once it has the message in hand.
    c.call("diagnostics.lanes", json!({})).await;
    gw.model.release();
    let chat_final = c.chat_event("sg-1", |p| p["state"] == "final").await;
    let result = c.res(&first).await;
    assert_eq!(result["payload"]["status"], "ok", "{result}");
    assert_eq!(
        gw.model.requests().len(),
        2,
        "the steered message was answered in the turn"
    );
    let h = c.call("chat.history", json!({"sessionKey": "sg"})).await;
    let history = h["payload"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"][0]["text"].as_str().map(str::to_owned))
        .collect();
    let second_item = c
        .seen
        .iter()
        .any(|f| f["payload"]["runId"] == "sg-1" && f["payload"]["data"]["itemId"] == "sg-1:2");
    Steered {
        chat_final,
        result,
        history,
        second_item,
    }
}

/// R-H2, issue 26 item 5: a steered run's earlier answer (the response its turn went on
/// after to answer the steered message) goes through the guards before it is recorded too:
/// cancelled, it is in neither history, the payloads nor the chat `final`; the later answer
/// shows rewritten.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_steered_runs_earlier_answer_is_guarded_too_r_h2() {
    let s = steered_past(REVIEW_HOOK).await;
    let payloads: Vec<&str> = s.result["payload"]["result"]["payloads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect();
    assert_eq!(payloads, ["[reviewed] ok"], "{}", s.result);
    assert_eq!(
        s.chat_final["payload"]["message"]["content"][0]["text"], "[reviewed] ok",
        "{}",
        s.chat_final
    );
    assert_eq!(s.history, ["[reviewed] ok"]);
}

/// The same with a guard that only cancels (and passes the rest unchanged): the chat `final`
/// is the later answer alone (the cancelled one was recorded hidden: its message still ended
/// there), and history has only that answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_earlier_answer_leaves_the_later_one_alone_r_h2() {
    let hook = concat!(
        "[[hooks.message_sending]]\n",
        "command = [\"sh\", \"-c\", \"if grep -q forbidden; then echo '{\\\"cancel\\\": true}'; else echo '{\\\"cancel\\\": false}'; fi\"]\n",
    );
    let s = steered_past(hook).await;
    assert_eq!(
        s.chat_final["payload"]["message"]["content"][0]["text"], "Second answer.",
        "{}",
        s.chat_final
    );
    assert!(s.second_item, "the answer is a message of its own");
    assert_eq!(s.history, ["Second answer."]);
}
