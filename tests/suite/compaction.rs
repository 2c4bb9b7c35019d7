//! Auto-compaction (R-B7, R-C5, R-G6, R-H2): a session whose context outgrows the model's
//! window is summarized by the model, the summary is recorded (fenced) in the transcript, and
//! the model sees the summary plus the recent messages from then on; a provider's
//! context-overflow error triggers a compaction and one retry.

use loopgate_tests::{client::connect_params, Client, Gateway, HookFifo};
use scripted_model::Step;
use serde_json::{json, Value};

fn text(t: &str) -> Step {
    Step::Text {
        text: t.into(),
        chunks: 2,
        delay_ms: 0,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    }
}

/// The `content` of each message of a recorded model request.
fn contents(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_sessions_are_compacted_and_overflow_retries_r_b7_r_g6() {
    let mut extra = String::from(
        // Extends [models.providers.scripted]: a 1 024-token window, so a few kilobytes
        // overflow it (limit 1024 - 256 = 768 estimated tokens, 200 kept verbatim).
        "context_window = 1024\n\n\
         [agents.list.main]\nsystem_prompt = \"Test agent.\"\n\n\
         [agents.list.main.tools]\nallow = []\n\n\
         [agents.list.main.compaction]\nreserve_tokens = 256\nkeep_recent_tokens = 200\n\n",
    );
    for event in ["before_compaction", "after_compaction"] {
        extra.push_str(&format!(
            "[[hooks.{event}]]\ncommand = [\"sh\", \"-c\", \"e=$(cat); printf '%s\\\\n' \\\"$e\\\" > hook.fifo\"]\n\n"
        ));
    }
    let gw = Gateway::start_with(&extra).await;
    let ws = gw.workspace("main");
    let mut hooks = HookFifo::create(&ws.join("hook.fifo"));
    // The two observers of one compaction run in the background, in either order.
    let mut hook_pair = async || {
        let mut got = hooks.next_by_event(2).await;
        (
            got.remove("before_compaction").unwrap(),
            got.remove("after_compaction").unwrap(),
        )
    };

    let mut c = Client::connect_with(&gw.socket(), connect_params()).await;
    let big = |tag: &str| format!("{tag} {}", "lorem ipsum ".repeat(100));
    // Turn 1 fits: no compaction.
    gw.model.push(text(&big("ANSWER-ONE")));
    let (_, fin) = c
        .turn(json!({"message": big("QUESTION-ONE"), "idempotencyKey": "k1"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(gw.model.requests().len(), 1);

    // Turn 2 does not fit: the model summarizes turn 1 first, then answers with the summary
    // and the new question.
    gw.model
        .push(text("SUMMARY-ONE: the user asked question one."));
    gw.model.push(text("two"));
    let (_, fin) = c
        .turn(json!({"message": big("QUESTION-TWO"), "idempotencyKey": "k2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(fin["payload"]["result"]["payloads"][0]["text"], "two");
    let start = c
        .agent_event("k2", |p| {
            p["stream"] == "compaction" && p["data"]["phase"] == "start"
        })
        .await;
    assert_eq!(start["payload"]["data"]["messages"], 2, "{start}");
    let end = c
        .agent_event("k2", |p| {
            p["stream"] == "compaction" && p["data"]["phase"] == "end"
        })
        .await;
    assert_eq!(end["payload"]["data"]["completed"], true, "{end}");
    // The summary text never reaches the client.
    assert_eq!(c.assistant_text("k2"), "two");
    let reqs = gw.model.requests();
    assert_eq!(reqs.len(), 3);
    let summarize = contents(&reqs[1].body);
    assert!(summarize[0].contains("summarize"), "{summarize:?}");
    assert!(summarize[1].contains("QUESTION-ONE") && summarize[1].contains("ANSWER-ONE"));
    assert!(
        !summarize[1].contains("QUESTION-TWO"),
        "the kept message was summarized"
    );
    assert!(reqs[1].body.get("tools").is_none());
    let answer = contents(&reqs[2].body);
    assert_eq!(answer.len(), 3, "{answer:?}");
    assert!(answer[1].contains("SUMMARY-ONE"));
    assert!(answer[2].starts_with("QUESTION-TWO"));
    let (before, after) = hook_pair().await;
    assert_eq!(before["messageCount"], 2, "{before}");
    assert_eq!(before["reason"], "threshold");
    assert_eq!(before["runId"], "k2");
    assert_eq!(after["completed"], true, "{after}");
    assert!(after["tokenCount"].as_u64().unwrap() < after["tokensBefore"].as_u64().unwrap());

    // Turn 3: the stored compaction holds; the model sees the summary, not turn 1.
    gw.model.push(text("three"));
    let (_, fin) = c
        .turn(json!({"message": big("QUESTION-THREE"), "idempotencyKey": "k3"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let reqs = gw.model.requests();
    assert_eq!(reqs.len(), 4, "no second compaction was needed");
    let seen = contents(&reqs[3].body);
    assert!(seen[1].contains("SUMMARY-ONE"), "{seen:?}");
    assert!(seen.iter().all(|m| !m.contains("QUESTION-ONE")));
    assert!(seen[2].starts_with("QUESTION-TWO") && seen[3] == "two");

    // Turn 4: the estimate fits, but the provider says the context overflowed: compact and
    // retry once.
    gw.model.push(Step::HttpError {
        status: 400,
        message: "This model's maximum context length is 1024 tokens (context_length_exceeded)"
            .into(),
        retry_after_s: None,
    });
    gw.model.push(text("SUMMARY-TWO: questions one to three."));
    gw.model.push(text("four"));
    let (_, fin) = c
        .turn(json!({"message": "short question", "idempotencyKey": "k4"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    assert_eq!(fin["payload"]["result"]["payloads"][0]["text"], "four");
    let start = c
        .agent_event("k4", |p| {
            p["stream"] == "compaction" && p["data"]["phase"] == "start"
        })
        .await;
    assert_eq!(start["payload"]["data"]["willRetry"], true, "{start}");
    let reqs = gw.model.requests();
    assert_eq!(reqs.len(), 7);
    let summarize = contents(&reqs[5].body);
    assert!(
        summarize[1].contains("SUMMARY-ONE"),
        "the older summary is summarized again"
    );
    let retried = contents(&reqs[6].body);
    assert!(retried[1].contains("SUMMARY-TWO"), "{retried:?}");
    assert_eq!(retried.last().unwrap(), "short question");
    let (before, after) = hook_pair().await;
    assert_eq!(before["reason"], "overflow", "{before}");
    assert_eq!(after["completed"], true, "{after}");

    // The transcript keeps every message for display and records both compactions, each
    // pointing at the first message it kept.
    let h = c.call("chat.history", json!({"sessionKey": "main"})).await;
    let shown: Vec<String> = h["payload"]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or("").to_owned())
        .collect();
    assert_eq!(shown.len(), 8, "{shown:?}");
    assert!(shown[0].starts_with("QUESTION-ONE"));
    let db = gw.agent_db("main");
    let rows: Vec<(String, i64)> = db
        .prepare("SELECT entry_json, seq FROM transcript WHERE role = 'compaction' ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 2);
    let first: Value = serde_json::from_str(&rows[0].0).unwrap();
    assert_eq!(first["type"], "compaction");
    assert!(first["summary"]
        .as_str()
        .unwrap()
        .starts_with("SUMMARY-ONE"));
    let kept: String = db
        .query_row(
            "SELECT text FROM transcript WHERE entry_id = ?1",
            [first["firstKeptEntryId"].as_str().unwrap()],
            |r| r.get(0),
        )
        .unwrap();
    assert!(kept.starts_with("QUESTION-TWO"), "{kept}");
    let count: i64 = db
        .query_row("SELECT compaction_count FROM sessions", [], |r| r.get(0))
        .unwrap();
    assert_eq!(count, 2);
    gw.logs.assert_clean(&[]);
}

/// A compaction that cannot help (the summary call fails) after an overflow ends the run with
/// both reasons; the session keeps working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_compaction_after_overflow_is_a_clear_error_r_g6() {
    let gw = Gateway::start_with(
        "context_window = 1024\n\n[agents.list.main]\nsystem_prompt = \"Test agent.\"\n\n\
         [agents.list.main.tools]\nallow = []\n",
    )
    .await;
    let mut c = gw.connect().await;
    gw.model.push(text("one"));
    c.turn(json!({"message": "first", "idempotencyKey": "f1"}))
        .await;
    let overflow = || Step::HttpError {
        status: 400,
        message: "the request exceeds the available context size (exceed_context_size_error)"
            .into(),
        retry_after_s: None,
    };
    gw.model.push(overflow());
    gw.model.push(Step::HttpError {
        status: 500,
        message: "summarizer down".into(),
        retry_after_s: None,
    });
    let (_, fin) = c
        .turn(json!({"message": "second", "idempotencyKey": "f2"}))
        .await;
    assert_eq!(fin["payload"]["status"], "error", "{fin}");
    let text_of = fin.to_string();
    assert!(
        text_of.contains("exceed_context_size_error") && text_of.contains("summarizer down"),
        "{fin}"
    );
    gw.model.push(text("fine again"));
    let (_, fin) = c
        .turn(json!({"message": "third", "idempotencyKey": "f3"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    gw.logs.assert_clean(&[]);
}

/// R-B7: the model's window was the last 200 messages, with no summary of what fell out, so
/// a long session of short turns lost its start silently and never compacted. The window is
/// bounded by tokens now: every message since the latest compaction is sent until the budget
/// is reached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_chatty_session_keeps_its_start_until_compaction_r_b7() {
    let gw = Gateway::start().await;
    let mut c = Client::connect_with(&gw.socket(), connect_params()).await;
    for i in 0..130 {
        gw.model.push(text("ok"));
        let (_, fin) = c
            .turn(json!({"message": format!("turn-{i}"), "idempotencyKey": format!("chat-{i}")}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
    // 130 turns are 260 messages: the first question is still in the last request.
    let last = gw.model.requests().last().unwrap().body.clone();
    let contents = contents(&last);
    assert!(
        contents.iter().any(|m| m == "turn-0"),
        "the first message fell out of the window without a compaction"
    );
    assert!(contents.iter().any(|m| m == "turn-129"));
    gw.logs.assert_clean(&[]);
}

/// `sessions.compact` (issue 11): an operator compacts a session now. The model summarizes
/// the older messages; followers see `session.operation` start and end, subscribers
/// `sessions.changed {reason: "compact", compacted: true}`; the next turn's model request
/// starts with the summary and the kept recent messages. A session with a run in progress is
/// refused, as is `maxLines`; an empty session has nothing to compact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_compacts_a_session_on_request_r_b7() {
    let gw = Gateway::start_with(
        "context_window = 100000\n\n\
         [agents.list.main]\nsystem_prompt = \"Test agent.\"\n\n\
         [agents.list.main.tools]\nallow = []\n\n\
         [agents.list.main.compaction]\nkeep_recent_tokens = 150\n\n",
    )
    .await;
    let mut sub = gw.connect().await;
    sub.call("sessions.subscribe", json!({})).await;
    sub.call("sessions.messages.subscribe", json!({"key": "main"}))
        .await;
    let mut c = gw.connect().await;
    let empty = c
        .call("sessions.compact", json!({"key": "nothing-here"}))
        .await;
    assert_eq!(empty["payload"]["compacted"], false, "{empty}");
    let big = |tag: &str| format!("{tag} {}", "lorem ipsum ".repeat(40));
    for i in 0..3 {
        gw.model.push(text(&big(&format!("ANSWER-{i}"))));
        let (_, fin) = c
            .turn(json!({"message": big(&format!("QUESTION-{i}")), "idempotencyKey": format!("m{i}")}))
            .await;
        assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    }
    let bad = c
        .call("sessions.compact", json!({"key": "main", "maxLines": 3}))
        .await;
    assert_eq!(bad["error"]["code"], "INVALID_REQUEST", "{bad}");

    gw.model
        .push(text("SUMMARY-NOW: three questions were asked."));
    let r = c.call("sessions.compact", json!({"key": "main"})).await;
    assert_eq!(r["ok"], true, "{r}");
    let p = &r["payload"];
    assert_eq!(
        (&p["ok"], &p["compacted"]),
        (&json!(true), &json!(true)),
        "{r}"
    );
    assert!(
        p["result"]["messagesSummarized"].as_u64().unwrap() >= 2,
        "{r}"
    );
    let summarize = gw.model.requests().last().unwrap().body.clone();
    assert!(
        contents(&summarize).join("\n").contains("QUESTION-0"),
        "the older messages went to the model: {summarize}"
    );
    let op = |phase: &'static str| {
        move |f: &Value| {
            f["event"] == "session.operation"
                && f["payload"]["phase"] == phase
                && f["payload"]["sessionKey"] == "agent:main:main"
        }
    };
    sub.wait_for(op("start")).await;
    let end = sub.wait_for(op("end")).await;
    assert_eq!(end["payload"]["completed"], true, "{end}");
    let changed = sub
        .wait_for(|f| f["event"] == "sessions.changed" && f["payload"]["reason"] == "compact")
        .await;
    assert_eq!(changed["payload"]["compacted"], true, "{changed}");

    // The next turn sees the summary, then the kept messages; the oldest are gone.
    gw.model.push(text("after"));
    let (_, fin) = c
        .turn(json!({"message": "next", "idempotencyKey": "m-after"}))
        .await;
    assert_eq!(fin["payload"]["status"], "ok", "{fin}");
    let seen = contents(&gw.model.requests().last().unwrap().body.clone());
    assert!(seen.iter().any(|m| m.contains("SUMMARY-NOW")), "{seen:?}");
    assert!(!seen.iter().any(|m| m.contains("QUESTION-0")), "{seen:?}");
    assert!(
        seen.iter().any(|m| m.contains("ANSWER-2")),
        "recent kept: {seen:?}"
    );
    // History still shows everything.
    let h = c.call("chat.history", json!({"sessionKey": "main"})).await;
    assert!(h.to_string().contains("QUESTION-0"), "{h}");

    // A run in progress: refused, nothing changed.
    gw.model.push(Step::Text {
        text: "slow".into(),
        chunks: 4,
        delay_ms: 300,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    });
    c.start_streaming(json!({"message": "busy", "idempotencyKey": "m-busy"}))
        .await;
    let busy = c.call("sessions.compact", json!({"key": "main"})).await;
    assert_eq!(busy["error"]["code"], "INVALID_REQUEST", "{busy}");
    assert!(
        busy["error"]["message"]
            .as_str()
            .unwrap()
            .contains("active run"),
        "{busy}"
    );
    c.chat_event("m-busy", |p| p["state"] == "final").await;
    gw.logs.assert_clean(&[]);
}
