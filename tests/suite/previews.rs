//! Per-message previews (issue 26 item 4, R-D1, R-D2: snapshots scoped to their assistant
//! message), as recorded on OpenClaw 2026.9.6 (`chat-surface-2026.9.6.md` section 4): the
//! `agent` assistant text starts over with each assistant message, told apart by `itemId`
//! `<run>:<n>`; chat deltas stay cumulative for the run, the next message after a blank line.

use loopgate_tests::{streamed, Gateway};
use scripted_model::{ScriptedCall, Step};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_using_runs_messages_are_previewed_one_by_one_r_d1() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    gw.model.push(Step::ToolCalls {
        text: "Let me check.".into(),
        calls: vec![ScriptedCall {
            id: "call_1".into(),
            name: "read".into(),
            arguments: r#"{"path":"AGENTS.md"}"#.into(),
        }],
        cut: false,
        delay_ms: 0,
        reasoning: String::new(),
    });
    gw.model.push(streamed("Tool result received.", 3, 0));
    let ack = c
        .call(
            "chat.send",
            json!({"sessionKey": "pv", "message": "read it", "idempotencyKey": "pv-1"}),
        )
        .await;
    assert_eq!(ack["payload"]["status"], "started", "{ack}");
    let fin = c.chat_event("pv-1", |p| p["state"] == "final").await;
    assert_eq!(
        fin["payload"]["message"]["content"][0]["text"], "Let me check.\n\nTool result received.",
        "{fin}"
    );

    let of_run = |stream: &str| -> Vec<Value> {
        c.seen
            .iter()
            .filter(|f| f["type"] == "event" && f["payload"]["runId"] == "pv-1")
            .filter(|f| match stream {
                "chat" => f["event"] == "chat" && f["payload"]["state"] == "delta",
                _ => f["event"] == "agent" && f["payload"]["stream"] == stream,
            })
            .map(|f| f["payload"].clone())
            .collect()
    };
    let assistant = of_run("assistant");
    let items: Vec<&str> = assistant
        .iter()
        .filter_map(|p| p["data"]["itemId"].as_str())
        .collect();
    assert_eq!(
        items.len(),
        assistant.len(),
        "every assistant event has its item"
    );
    assert_eq!(items.first(), Some(&"pv-1:1"), "{assistant:?}");
    assert_eq!(items.last(), Some(&"pv-1:2"), "{assistant:?}");
    let first_of_second = assistant
        .iter()
        .find(|p| p["data"]["itemId"] == "pv-1:2")
        .expect("a second message");
    let last_of_first = assistant
        .iter()
        .rev()
        .find(|p| p["data"]["itemId"] == "pv-1:1")
        .expect("a first message");
    assert_eq!(last_of_first["data"]["text"], "Let me check.");
    let restarted = first_of_second["data"]["text"].as_str().unwrap_or_default();
    assert!(
        "Tool result received.".starts_with(restarted) && !restarted.is_empty(),
        "the second message's text starts over: {restarted:?}"
    );
    assert_eq!(
        assistant.last().map(|p| p["data"]["text"].clone()),
        Some(json!("Tool result received."))
    );

    let chat = of_run("chat");
    let joined: String = chat
        .iter()
        .filter_map(|p| p["deltaText"].as_str())
        .collect();
    assert_eq!(joined, "Let me check.\n\nTool result received.", "{chat:?}");
    assert!(
        chat.iter().any(|p| p["deltaText"]
            .as_str()
            .is_some_and(|d| d.starts_with("\n\nTool"))),
        "the second message's first chat delta begins with a blank line: {chat:?}"
    );
}

/// R-D2, as OpenClaw paces it (`chat-surface-2026.9.6.md` section 4): the `agent` stream
/// carries each delta as the model sends it; the chat projection merges them and goes at
/// most every 75 ms. Both add up to the reply, and a run's events keep their `seq` order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_stream_is_unpaced_and_the_chat_projection_paced_r_d2() {
    let gw = Gateway::start().await;
    let mut c = gw.connect().await;
    let reply: String = (0..30).map(|i| format!("w{i:02} ")).collect();
    // A delta every 25 ms: three of them in each 75 ms.
    gw.model.push(streamed(&reply, 30, 25));
    let (_, fin) = c
        .turn(json!({"message": "pace", "idempotencyKey": "pace-1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    c.chat_event("pace-1", |p| p["state"] == "final").await;

    let of_run: Vec<&Value> = c
        .seen
        .iter()
        .filter(|f| f["type"] == "event" && f["payload"]["runId"] == "pace-1")
        .collect();
    let agent: Vec<&str> = of_run
        .iter()
        .filter(|f| f["event"] == "agent" && f["payload"]["stream"] == "assistant")
        .filter_map(|f| f["payload"]["data"]["delta"].as_str())
        .collect();
    let chat: Vec<&str> = of_run
        .iter()
        .filter(|f| f["event"] == "chat" && f["payload"]["state"] == "delta")
        .filter_map(|f| f["payload"]["deltaText"].as_str())
        .collect();
    assert_eq!(agent.concat(), reply);
    assert_eq!(chat.concat(), reply);
    assert!(
        agent.len() > chat.len() && agent.len() >= 15,
        "every delta on the agent stream ({} events), the chat merged ({} events)",
        agent.len(),
        chat.len()
    );
    let seqs: Vec<u64> = of_run
        .iter()
        .filter_map(|f| f["payload"]["seq"].as_u64())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[0] <= w[1]),
        "the run's events in seq order: {seqs:?}"
    );
}
