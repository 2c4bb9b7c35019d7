use super::*;
use crate::store::{BeginRun, Compaction, FinishRun, NewMessage, Role, Writer};
use ipc::control::RunStatus;
use std::sync::Arc;

const KEY: &str = "agent:main:main";

/// One turn: user message, optionally a tool call and its result, the reply.
async fn turn(w: &Writer, run: &str, with_tool: bool) -> i64 {
    w.begin(BeginRun {
        run_id: run.into(),
        session_key: KEY.into(),
        accepted_at: 1,
        started_at: 2,
        attachments: Vec::new(),
        user_text: format!("question {run}"),
        carried: Vec::new(),
    })
    .await
    .unwrap();
    let mut last = 0;
    if with_tool {
        let call = crate::tools::ToolCall {
            id: format!("c-{run}"),
            name: "read".into(),
            arguments: r#"{"path": "a"}"#.into(),
        };
        last = w
            .append(
                KEY.into(),
                run.into(),
                NewMessage {
                    tool_calls: vec![call.clone()],
                    ..NewMessage::text(Role::Assistant, "", 3)
                },
            )
            .await
            .unwrap()
            .seq;
        w.append(
            KEY.into(),
            run.into(),
            NewMessage {
                tool_result: Some((call.id, call.name, false)),
                ..NewMessage::text(Role::ToolResult, "file text", 3)
            },
        )
        .await
        .unwrap();
    }
    w.finish(FinishRun {
        run_id: run.into(),
        session_key: KEY.into(),
        status: RunStatus::Ok,
        ended_at: 4,
        error: None,
        stop_reason: Some("stop".into()),
        provider: None,
        model: None,
        usage: None,
        assistant: Some(NewMessage::text(
            Role::Assistant,
            format!("answer {run}"),
            4,
        )),
    })
    .await
    .unwrap();
    last
}

/// The cache answers exactly what a full read does, across appends, the history limit,
/// compaction, reset and delete (R-J6: the reader does less work, never different work).
#[tokio::test]
async fn cached_history_equals_a_full_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agent.sqlite");
    let (w, _) = Writer::open(&path, 0).unwrap();
    let conn = Connection::open_with_flags(&path, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    let mut warm = HistoryCache::default();
    let check = |warm: &mut HistoryCache, limit: usize| {
        let cached = warm.history(&conn, KEY, limit).unwrap();
        let full = HistoryCache::default().history(&conn, KEY, limit).unwrap();
        assert_eq!(cached, full);
        cached
    };
    assert_eq!(check(&mut warm, 7).rows, 0);
    turn(&w, "r1", false).await;
    assert_eq!(check(&mut warm, 7).rows, 2);
    let call_seq = turn(&w, "r2", true).await;
    assert_eq!(check(&mut warm, 7).rows, 6);
    for i in 3..8 {
        turn(&w, &format!("r{i}"), i % 2 == 0).await;
        let h = check(&mut warm, 7);
        assert_eq!(h.rows, 7, "the limit holds");
    }
    // A different limit is a different view.
    check(&mut warm, 100);
    check(&mut warm, 7);

    w.begin(BeginRun {
        run_id: "rc".into(),
        session_key: KEY.into(),
        accepted_at: 1,
        started_at: 2,
        attachments: Vec::new(),
        user_text: "compact me".into(),
        carried: Vec::new(),
    })
    .await
    .unwrap();
    w.compact(
        KEY.into(),
        "rc".into(),
        Compaction {
            summary: "the summary".into(),
            kept_from_seq: call_seq,
            tokens_before: 10,
            tokens_after: 5,
            messages: 3,
            created_at: 5,
        },
    )
    .await
    .unwrap();
    let h = check(&mut warm, 100);
    assert!(h.messages[0]
        .content
        .starts_with(crate::llm::messages::SUMMARY_PREFIX));
    assert_eq!(h.messages[1].seq, Some(call_seq));
    turn(&w, "r9", true).await;
    check(&mut warm, 100);

    w.reset(KEY.into(), "reset".into(), 6).await.unwrap();
    assert_eq!(check(&mut warm, 100).rows, 0);
    turn(&w, "r10", false).await;
    assert_eq!(check(&mut warm, 100).rows, 2);

    w.delete(KEY.into(), true).await.unwrap();
    assert_eq!(check(&mut warm, 100).rows, 0);
    turn(&w, "r11", false).await;
    let h = check(&mut warm, 100);
    assert_eq!(&*h.messages[0].content, "question r11");
}

#[test]
fn cache_is_bounded() {
    let mut c = HistoryCache::default();
    for i in 0..(cache::CACHE_MAX_SESSIONS + 10) {
        let m = crate::llm::ChatMessage::text("user", "x".repeat(100));
        let bytes = cache::message_bytes(&m);
        c.bytes += bytes;
        c.clock += 1;
        c.entries.insert(
            format!("k{i}"),
            cache::Cached {
                key: Bounds {
                    session_id: format!("s{i}"),
                    window_start: 0,
                    compaction_seq: 0,
                    kept_from: 0,
                },
                limit: 10,
                last_seq: 1,
                history: crate::llm::History {
                    messages: Arc::new(vec![m]),
                    rows: 1,
                },
                conversion: Default::default(),
                bytes,
                used: c.clock,
            },
        );
        c.evict(&format!("k{i}"));
    }
    assert_eq!(c.entries.len(), cache::CACHE_MAX_SESSIONS);
    assert!(
        !c.entries.contains_key("k0"),
        "the least recently used went first"
    );
    assert_eq!(c.bytes, c.entries.values().map(|e| e.bytes).sum::<usize>());
}
