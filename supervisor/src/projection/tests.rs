use super::chat_delta as chat_delta_event;
use super::*;
use ipc::control::{Payload, Usage};
use serde_json::json;

const RUN: RunRef<'static> = RunRef {
    run_id: "r1",
    session_key: "agent:main:main",
    agent_id: "main",
};

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap()
}

fn lc(phase: Phase) -> Lifecycle {
    Lifecycle {
        phase,
        started_at: Some(10),
        ended_at: (phase != Phase::Start).then_some(20),
        error: (phase == Phase::Error).then(|| "boom".to_owned()),
        stop_reason: None,
        aborted: None,
        session_id: None,
        session_key: Some("agent:main:main".into()),
        carried_by: None,
        reply: None,
        guarded: Vec::new(),
        footer: None,
    }
}

#[test]
fn lifecycle_start_and_finishing_have_no_chat_event() {
    for phase in [Phase::Start, Phase::Finishing] {
        let (agent, chat) = lifecycle(&RUN, 1, 5, &lc(phase), "", None).unwrap();
        assert!(chat.is_none());
        let v = to_json(&agent);
        assert_eq!(v["stream"], "lifecycle");
        assert_eq!(v["data"]["phase"], phase.as_str());
        assert_eq!(
            (
                &v["runId"],
                &v["sessionKey"],
                &v["agentId"],
                &v["seq"],
                &v["ts"]
            ),
            (
                &json!("r1"),
                &json!("agent:main:main"),
                &json!("main"),
                &json!(1),
                &json!(5)
            )
        );
    }
    assert!(lifecycle(&RUN, 1, 5, &lc(Phase::Unknown), "", None).is_none());
}

#[test]
fn lifecycle_end_carries_the_text_in_chat_final() {
    let mut l = lc(Phase::End);
    l.stop_reason = Some(RunStopReason::Stop);
    let (agent, chat) = lifecycle(&RUN, 7, 30, &l, "hello", None).unwrap();
    assert_eq!(
        to_json(&agent)["data"],
        json!({"phase": "end", "startedAt": 10, "endedAt": 20, "stopReason": "stop"})
    );
    let chat = to_json(&chat.unwrap());
    assert_eq!(chat["state"], "final");
    assert_eq!(chat["seq"], 7);
    assert_eq!(chat["stopReason"], "stop");
    assert_eq!(
        chat["message"],
        json!({"role": "assistant", "content": [{"type": "text", "text": "hello"}], "timestamp": 30})
    );
    // No text: no message at all.
    let (_, chat) = lifecycle(&RUN, 7, 30, &l, "", None).unwrap();
    assert!(to_json(&chat.unwrap()).get("message").is_none());
}

#[test]
fn lifecycle_error_is_chat_error_or_aborted() {
    let mut l = lc(Phase::Error);
    l.stop_reason = Some(RunStopReason::Timeout);
    let chat = to_json(&lifecycle(&RUN, 2, 3, &l, "", None).unwrap().1.unwrap());
    assert_eq!(
        (&chat["state"], &chat["errorKind"], &chat["errorMessage"]),
        (&json!("error"), &json!("timeout"), &json!("boom"))
    );
    l.aborted = Some(true);
    l.stop_reason = Some(RunStopReason::Rpc);
    let chat = to_json(&lifecycle(&RUN, 2, 3, &l, "", None).unwrap().1.unwrap());
    // A stop is not a failure (the Control UI shows one with `errorMessage` as an error);
    // what streamed before it is kept as the message.
    assert_eq!(
        (
            &chat["state"],
            &chat["stopReason"],
            chat.get("errorMessage")
        ),
        (&json!("aborted"), &json!("rpc"), None)
    );
    assert!(chat.get("message").is_none(), "{chat}");
    let chat = to_json(
        &lifecycle(&RUN, 2, 3, &l, "Half an ans", None)
            .unwrap()
            .1
            .unwrap(),
    );
    assert_eq!(
        chat["message"]["content"][0]["text"], "Half an ans",
        "{chat}"
    );
    assert_eq!(chat["message"]["role"], "assistant");
}

#[test]
fn assistant_deltas_are_cumulative_and_projected_to_chat() {
    let mut reply = ReplyText::default();
    reply.push("hello ");
    let chat_delta = reply.push("wor");
    let (agent, chat) = (
        assistant(&RUN, 3, 4, &reply, "wor"),
        chat_delta_event(&RUN, 3, 4, &reply, &chat_delta),
    );
    assert_eq!(
        to_json(&agent)["data"],
        json!({"text": "hello wor", "delta": "wor", "itemId": format!("{}:1", RUN.run_id)})
    );
    let chat = to_json(&chat);
    assert_eq!(chat["state"], "delta");
    assert_eq!(chat["deltaText"], "wor");
    assert_eq!(chat["message"]["content"][0]["text"], "hello wor");
}

/// Issue 26 item 4, as OpenClaw: the agent text starts over with each assistant message
/// (a new `itemId`), the chat text goes on for the run with the next message after a blank
/// line; a closed message with no more text begins nothing.
#[test]
fn each_assistant_message_is_its_own_item_and_chat_text_spans_the_run() {
    let mut reply = ReplyText::default();
    assert_eq!(reply.push("Let me check."), "Let me check.");
    reply.close();
    reply.close();
    assert_eq!(reply.push(""), "");
    assert_eq!(reply.push("Tool result"), "\n\nTool result");
    let chat_delta = reply.push(" received.");
    assert_eq!(chat_delta, " received.");
    let (agent, chat) = (
        assistant(&RUN, 9, 9, &reply, " received."),
        chat_delta_event(&RUN, 9, 9, &reply, &chat_delta),
    );
    let data = &to_json(&agent)["data"];
    assert_eq!(data["text"], "Tool result received.");
    assert_eq!(data["itemId"], format!("{}:2", RUN.run_id));
    assert_eq!(
        to_json(&chat)["message"]["content"][0]["text"],
        "Let me check.\n\nTool result received."
    );
    assert_eq!(reply.run(), "Let me check.\n\nTool result received.");
}

/// `args` is a JSON object whatever the model sent: parsed, malformed or clipped.
#[test]
fn tool_args_are_always_an_object() {
    for args in [
        r#"{"path":"a"}"#,
        r#"{"path":"a…"#,
        "not json",
        "[1,2]",
        "\"s\"",
    ] {
        let t = ToolEvent {
            phase: ipc::control::ToolPhase::Start,
            tool_call_id: "c1",
            name: "read",
            args_json: Some(args),
            result_json: None,
            is_error: None,
        };
        let v = to_json(&tool(&RUN, 4, 5, &t).unwrap());
        assert_eq!(v["stream"], "tool");
        assert!(v["data"]["args"].is_object(), "{args}: {v}");
    }
}

#[test]
fn tool_updates_and_results_name_their_output() {
    let mut t = ToolEvent {
        phase: ipc::control::ToolPhase::Update,
        tool_call_id: "c1",
        name: "exec",
        args_json: None,
        result_json: Some("\"line\""),
        is_error: None,
    };
    let v = to_json(&tool(&RUN, 4, 5, &t).unwrap());
    assert_eq!(v["data"]["partialResult"], "line");
    assert!(v["data"].get("result").is_none());
    t.phase = ipc::control::ToolPhase::Result;
    t.is_error = Some(false);
    let v = to_json(&tool(&RUN, 4, 5, &t).unwrap());
    assert_eq!(
        v["data"],
        json!({"phase": "result", "name": "exec", "toolCallId": "c1", "result": "line", "isError": false})
    );
    t.phase = ipc::control::ToolPhase::Unknown;
    assert!(tool(&RUN, 4, 5, &t).is_none());
}

#[test]
fn compaction_events_keep_their_fields() {
    let c = CompactionEvent {
        phase: ipc::control::CompactionPhase::Start,
        completed: None,
        will_retry: Some(true),
        reason: Some("overflow"),
        messages: Some(12),
    };
    let v = to_json(&compaction(&RUN, 2, 3, &c).unwrap());
    assert_eq!(v["stream"], "compaction");
    assert_eq!(
        v["data"],
        json!({"phase": "start", "willRetry": true, "reason": "overflow", "messages": 12})
    );
}

#[test]
fn a_run_ended_by_the_gateway_looks_like_a_worker_failure() {
    let (agent, chat) = ended_by_gateway(&RUN, 9, 50, Some(10), "worker died", None);
    let live = lifecycle(
        &RUN,
        9,
        50,
        &Lifecycle {
            error: Some("worker died".into()),
            ended_at: Some(50),
            ..lc(Phase::Error)
        },
        "",
        None,
    )
    .unwrap();
    assert_eq!(agent, live.0);
    assert_eq!(Some(chat), live.1);
    let (agent, chat) =
        ended_by_gateway(&RUN, 1, 50, None, "stopped", Some(RunStopReason::Restart));
    assert_eq!(to_json(&agent)["data"]["aborted"], true);
    assert_eq!(to_json(&chat)["state"], "aborted");
}

fn terminal(status: RunStatus) -> RunTerminal {
    RunTerminal {
        run_id: "r1".into(),
        status,
        session_id: Some("sid".into()),
        started_at: Some(1),
        ended_at: 5,
        error: None,
        stop_reason: Some(RunStopReason::Stop),
        payloads: vec![Payload {
            text: "hi".into(),
            is_error: false,
        }],
        provider: Some("p".into()),
        model: Some("m".into()),
        usage: Some(Usage {
            input: 3,
            output: 1,
            cache_read: 0,
            cache_write: 0,
            total: 4,
        }),
        duration_ms: 4,
        source_reply_delivered: true,
        fallbacks: 0,
        carried_by: None,
        session_key: None,
        tool_calls: 0,
    }
}

#[test]
fn an_ok_result_has_openclaws_shape() {
    let r = to_json(&agent_result(
        &terminal(RunStatus::Ok),
        "agent:main:main",
        "main",
    ));
    assert_eq!(r["status"], "ok");
    assert_eq!(r["summary"], "completed");
    assert_eq!(r["result"]["payloads"], json!([{"text": "hi"}]));
    let meta = &r["result"]["meta"];
    assert_eq!(meta["agentMeta"]["sessionId"], "sid");
    assert_eq!(meta["agentMeta"]["usage"]["total"], 4);
    assert_eq!(meta["usage"], meta["agentMeta"]["usage"]);
    assert_eq!(
        meta["terminalReceipt"],
        json!({"sourceReplyDelivered": true})
    );
    assert_eq!(
        meta["terminalReply"],
        json!({"disposition": "visible", "text": "hi"})
    );
    assert!(r.get("error").is_none() && meta.get("error").is_none());
}

/// The crash-recovery outcome (no work, only an error) has the same fields as any other
/// failure: `error`, `agentMeta`, `meta.error` of kind `error`.
#[test]
fn a_failure_without_work_has_the_failure_shape() {
    let t = RunTerminal::without_work("r1", RunStatus::Error, 9, "interrupted".into(), None);
    let r = to_json(&agent_result(&t, "agent:main:main", "main"));
    assert_eq!(r["status"], "error");
    assert_eq!(r["summary"], "failed");
    assert_eq!(r["error"], "interrupted");
    assert_eq!(
        r["result"]["payloads"],
        json!([{"text": "interrupted", "isError": true}])
    );
    assert_eq!(
        r["result"]["meta"]["error"],
        json!({"kind": "error", "message": "interrupted"})
    );
    assert_eq!(r["result"]["meta"]["agentMeta"]["agentId"], "main");
    let mut live = terminal(RunStatus::Error);
    live.error = Some("boom".into());
    live.stop_reason = None;
    let live = to_json(&agent_result(&live, "agent:main:main", "main"));
    let keys = |v: &Value| -> Vec<String> {
        let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
        k.sort();
        k
    };
    assert_eq!(keys(&r), keys(&live));
    assert!(keys(&live["result"]["meta"]).iter().all(|k| [
        "durationMs",
        "agentMeta",
        "provider",
        "model",
        "usage",
        "stopReason",
        "terminalReceipt",
        "error"
    ]
    .contains(&k.as_str())));
}

#[test]
fn aborted_runs_report_timeout_with_their_stop_reason() {
    let mut t = terminal(RunStatus::Aborted);
    t.stop_reason = Some(RunStopReason::Rpc);
    t.error = Some("aborted".into());
    let r = agent_result(&t, "k", "main");
    assert_eq!(
        (r.status.as_str(), r.summary.as_str()),
        ("timeout", "aborted")
    );
    assert_eq!(r.result.meta.aborted, Some(true));
    assert_eq!(r.result.meta.terminal_reply, None);
    let w = to_json(&wait_result(&r, Some(1), 5));
    assert_eq!(
        w,
        json!({"runId": "r1", "status": "timeout", "startedAt": 1, "endedAt": 5,
                   "error": "aborted", "stopReason": "rpc",
                   "terminalReceipt": {"sourceReplyDelivered": true},
                   "provider": "p", "model": "m"})
    );
}

#[test]
fn recorded_messages_get_their_place_and_a_user_send_its_key() {
    let stored = |role: &str, run: Option<&str>, json: &str| StoredMessage {
        entry_id: "e7".into(),
        seq: 7,
        role: role.into(),
        run_id: run.map(Into::into),
        message_json: json.into(),
        omitted_bytes: None,
    };
    let (user, place) = display_message(&stored(
        "user",
        Some("r1"),
        r#"{"role":"user","content":[{"type":"text","text":"hi"}]}"#,
    ))
    .unwrap();
    assert_eq!(
        user["__openclaw"],
        json!({"id": "e7", "seq": 7, "runId": "r1"})
    );
    assert_eq!(user["idempotencyKey"], "r1");
    assert_eq!(place.seq, 7);
    // A key the client sent is kept; an injected note has no run and no key.
    let (kept, _) = display_message(&stored(
        "user",
        Some("r1"),
        r#"{"role":"user","content":[],"idempotencyKey":"mine"}"#,
    ))
    .unwrap();
    assert_eq!(kept["idempotencyKey"], "mine");
    let (note, place) = display_message(&stored(
        "assistant",
        None,
        r#"{"role":"assistant","content":[{"type":"text","text":"n"}]}"#,
    ))
    .unwrap();
    assert_eq!(note["__openclaw"], json!({"id": "e7", "seq": 7}));
    assert!(note.get("idempotencyKey").is_none());
    assert!(is_reply(&note));
    let ev = to_json(&session_message("agent:main:main", "main", note, &place));
    assert!(ev.get("runId").is_none(), "{ev}");
    assert_eq!(ev["messageId"], "e7");
    // A message too large for the page is shown by its place and size.
    let big = StoredMessage {
        omitted_bytes: Some(9_000_000),
        message_json: "{}".into(),
        ..stored("assistant", Some("r1"), "{}")
    };
    let (shown, _) = display_message(&big).unwrap();
    assert!(shown["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("9000000 bytes"));
    assert_eq!(shown["__openclaw"]["id"], "e7");
    // A damaged row is left out, not sent half-made.
    assert!(display_message(&stored("user", None, "[1,2]")).is_none());
    assert!(display_message(&stored("user", None, "{oops")).is_none());
    let call = json!({"role": "assistant", "content": [{"type": "toolCall", "id": "c"}]});
    assert!(!is_reply(&call));
}

/// R-H2: a guarded final reply replaces what was streamed of its message in the run's text;
/// a cancelled one leaves the earlier messages only.
#[test]
fn a_guarded_reply_settles_the_runs_text() {
    let two = || {
        let mut reply = ReplyText::default();
        reply.push("Let me check.");
        reply.close();
        reply.push("the secret is 42");
        reply
    };
    let mut rewritten = two();
    rewritten.settle("[redacted]");
    assert_eq!(rewritten.run(), "Let me check.\n\n[redacted]");
    let mut cancelled = two();
    cancelled.settle("");
    assert_eq!(cancelled.run(), "Let me check.");
}

/// R-H2: an earlier reply the guards changed (a steered run's first answer) is replaced in
/// the run's text, a cancelled one removed with its blank line; the current message is left
/// to `settle`.
#[test]
fn guarded_earlier_replies_are_replaced_in_the_runs_text() {
    let three = || {
        let mut reply = ReplyText::default();
        reply.push("first answer");
        reply.close();
        reply.push("second answer");
        reply.close();
        reply.push("first answer");
        reply
    };
    let mut rewritten = three();
    rewritten.replace_earlier("first answer", "[reviewed]");
    assert_eq!(
        rewritten.run(),
        "[reviewed]\n\nsecond answer\n\nfirst answer"
    );
    let mut cancelled = three();
    cancelled.replace_earlier("second answer", "");
    assert_eq!(cancelled.run(), "first answer\n\nfirst answer");
    let mut last = three();
    last.replace_earlier("first answer", "");
    last.replace_earlier("not streamed", "x");
    assert_eq!(last.run(), "second answer\n\nfirst answer");
    // The current message, still open, is not an earlier one.
    let mut current = ReplyText::default();
    current.push("only");
    current.replace_earlier("only", "");
    assert_eq!(current.run(), "only");
    // Closed (recorded, and no answer came after it: a silent final), it is.
    current.close();
    current.replace_earlier("only", "[kept]");
    assert_eq!(current.run(), "[kept]");
    // Only a whole message matches: the same words inside another are left alone.
    let mut inside = ReplyText::default();
    inside.push("Let me check. Done.");
    inside.close();
    inside.push("Done.");
    inside.close();
    inside.replace_earlier("Done.", "");
    assert_eq!(inside.run(), "Let me check. Done.");
}
