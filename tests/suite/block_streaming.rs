//! Block streaming (issue 26 item 7, R-D5): an `agent` run with block streaming (the agent's
//! `block_streaming` table, or the request's `blockStreaming`) sends its reply as `block`
//! events, each a complete piece cut at a paragraph break within the bounds: with `text_end`
//! as soon as one is complete, with `message_end` when the assistant message is; reasoning
//! `on` sends a response's reasoning as a block of its own; the `message_sending` guards see
//! each block before it goes (R-H2). The final payloads and the chat stream are unchanged.

use loopgate_tests::{hold, payload_texts, reply, streamed, Client, Gateway, REVIEW_HOOK};
use scripted_model::{ScriptedCall, Step};
use serde_json::{json, Value};

const BLOCKS: &str =
    "\n[agents.list.main.block_streaming]\nenabled = true\nmin_chars = 10\nmax_chars = 60\n";

/// The run's `block` events so far: (index, text, itemId, isReasoning).
fn blocks(c: &Client, run: &str) -> Vec<(u64, String, Value, bool)> {
    c.seen
        .iter()
        .filter(|f| f["event"] == "agent" && f["payload"]["runId"] == run)
        .filter(|f| f["payload"]["stream"] == "block")
        .map(|f| {
            let d = &f["payload"]["data"];
            (
                d["index"].as_u64().unwrap_or(u64::MAX),
                d["text"].as_str().unwrap_or_default().to_owned(),
                d["itemId"].clone(),
                d["isReasoning"] == true,
            )
        })
        .collect()
}

/// `text_end`: the first paragraph goes out as a block while the model is still writing
/// (it is held after its first half); the rest when the text ends. A tool call ends the
/// first message's text; the next message's blocks name their own item.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_end_blocks_go_out_while_the_model_writes_r_d5() {
    let gw = Gateway::start_with(BLOCKS).await;
    let mut c = gw.connect().await;
    // 36 characters in two pieces: the first ends with the blank line.
    gw.model
        .push(hold("Alpha paragraph.\n\nBeta paragraph end"));
    let id = c
        .send(
            "agent",
            json!({"message": "write", "sessionKey": "b", "idempotencyKey": "b-1"}),
        )
        .await;
    let first = c.agent_event("b-1", |p| p["stream"] == "block").await;
    assert_eq!(
        first["payload"]["data"]["text"], "Alpha paragraph.",
        "{first}"
    );
    assert_eq!(first["payload"]["data"]["index"], 0);
    assert_eq!(first["payload"]["data"]["itemId"], "b-1:1");
    // Still writing: no terminal yet, so the block went out before the message ended.
    assert!(
        !c.seen
            .iter()
            .any(|f| f["payload"]["runId"] == "b-1" && f["payload"]["data"]["phase"] == "end"),
        "the block came before the run ended"
    );
    gw.model.release();
    c.res(&id).await;
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        blocks(&c, "b-1"),
        [
            (0, "Alpha paragraph.".into(), json!("b-1:1"), false),
            (1, "Beta paragraph end".into(), json!("b-1:1"), false)
        ]
    );
    // The final payloads and the chat `final` are the whole reply, as without blocks.
    assert_eq!(
        payload_texts(&fin),
        ["Alpha paragraph.\n\nBeta paragraph end"]
    );

    // A tool round: the text before the call is a block of message 1, the answer of 2.
    gw.model.push(Step::ToolCalls {
        text: "Let me check that file.".into(),
        calls: vec![ScriptedCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: r#"{"path":"AGENTS.md"}"#.into(),
        }],
        cut: false,
        delay_ms: 0,
        reasoning: String::new(),
    });
    gw.model.push(streamed("The file is there.", 3, 0));
    let (_, fin) = c
        .turn(json!({"message": "check", "sessionKey": "b", "idempotencyKey": "b-2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let got = blocks(&c, "b-2");
    assert_eq!(
        got,
        [
            (0, "Let me check that file.".into(), json!("b-2:1"), false),
            (1, "The file is there.".into(), json!("b-2:2"), false)
        ]
    );
    // The first block went out before the second message began.
    let pos = |pred: &dyn Fn(&Value) -> bool| {
        c.seen
            .iter()
            .position(|f| f["payload"]["runId"] == "b-2" && pred(&f["payload"]))
    };
    let block0 = pos(&|p| p["stream"] == "block" && p["data"]["index"] == 0);
    let second = pos(&|p| p["stream"] == "assistant" && p["data"]["itemId"] == "b-2:2");
    assert!(
        block0.is_some() && block0 < second,
        "block {block0:?} before the second message {second:?}"
    );
}

/// A long reply is cut within the bounds; `message_end` sends nothing until the message
/// is complete; the request's `blockStreaming` turns it on or off over the agent's setting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn message_end_bounds_and_the_request_switch_r_d5() {
    let gw = Gateway::start_with(
        "\n[agents.list.main.block_streaming]\nbreak = \"message_end\"\nmin_chars = 10\nmax_chars = 40\n",
    )
    .await;
    let mut c = gw.connect().await;
    // Off by default here: no blocks.
    gw.model.push(reply("One.\n\nTwo."));
    c.turn(json!({"message": "q", "sessionKey": "m", "idempotencyKey": "m-1"}))
        .await;
    assert!(blocks(&c, "m-1").is_empty());

    // On for this request: held halfway, after a paragraph break (`text_end` would send a
    // block now), nothing yet; all of it at the message's end.
    let long = "First part is here.\n\nSecond part follows it.";
    gw.model.push(hold(long));
    let id = c
        .send(
            "agent",
            json!({"message": "q", "sessionKey": "m", "idempotencyKey": "m-2", "blockStreaming": true}),
        )
        .await;
    c.agent_event("m-2", |p| p["stream"] == "assistant").await;
    // The worker answers a later question on the link after what it sent before it.
    c.call("diagnostics.lanes", json!({})).await;
    assert!(blocks(&c, "m-2").is_empty(), "message_end waits");
    gw.model.release();
    c.res(&id).await;
    let fin = c.res(&id).await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let texts: Vec<String> = blocks(&c, "m-2").into_iter().map(|b| b.1).collect();
    assert_eq!(texts, ["First part is here.", "Second part follows it."]);
    assert!(texts.iter().all(|t| t.chars().count() <= 40));

    // Off for this request over an agent that has it on.
    let gw2 = Gateway::start_with(BLOCKS).await;
    let mut c2 = gw2.connect().await;
    gw2.model.push(reply("One paragraph.\n\nAnother one."));
    c2.turn(json!({"message": "q", "idempotencyKey": "o-1", "blockStreaming": false}))
        .await;
    assert!(blocks(&c2, "o-1").is_empty());
    // A bad value is refused as a typed error.
    let bad = c2
        .call(
            "agent",
            json!({"message": "q", "idempotencyKey": "o-2", "blockStreaming": "yes"}),
        )
        .await;
    assert_eq!(bad["ok"], false, "{bad}");
    assert_eq!(bad["error"]["code"], "INVALID_REQUEST", "{bad}");
}

/// Reasoning `on`: the response's reasoning is a block of its own before its text; the
/// `message_sending` guards rewrite or cancel each block before it is sent (R-H2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_blocks_and_guarded_blocks_r_d5_r_h2() {
    let gw = Gateway::start_with(&format!(
        "[models.providers.scripted.models.\"scripted-1\"]\nreasoning = true\n[agents.list.main]\nreasoning_default = \"on\"\n{BLOCKS}"
    ))
    .await;
    let mut c = gw.connect().await;
    gw.model.push(Step::Text {
        text: "The answer is four.".into(),
        chunks: 2,
        delay_ms: 0,
        finish_reason: None,
        reasoning: "two plus two".into(),
        keepalive_ms: 0,
        end_turn: None,
    });
    let (_, fin) = c
        .turn(json!({"message": "2+2?", "idempotencyKey": "r-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(
        blocks(&c, "r-1"),
        [
            (0, "two plus two".into(), Value::Null, true),
            (1, "The answer is four.".into(), json!("r-1:1"), false)
        ]
    );

    let gw = Gateway::start_with(&format!("{REVIEW_HOOK}{BLOCKS}")).await;
    let mut c = gw.connect().await;
    gw.model
        .push(reply("A forbidden paragraph.\n\nA harmless paragraph."));
    let (_, fin) = c
        .turn(json!({"message": "q", "idempotencyKey": "g-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    // The first block was cancelled (its index skipped), the second rewritten.
    assert_eq!(
        blocks(&c, "g-1"),
        [(1, "[reviewed] ok".into(), json!("g-1:1"), false)]
    );
    assert!(!c.seen.iter().any(|f| f["payload"]["stream"] == "block"
        && f["payload"]["data"]["text"]
            .as_str()
            .is_some_and(|t| t.contains("forbidden"))));
}
