//! `sessions.compact`'s decisions: its params, the busy check, how it ends and what it
//! answers.

use super::*;

const KEY: &str = "agent:main:main";

#[test]
fn trimming_by_lines_is_refused_and_summarizing_is_the_default() {
    let p = SessionsCompactParams {
        key: KEY.into(),
        agent_id: None,
        max_lines: Some(50),
    };
    assert_eq!(params_refusal(&p), Some(CompactRefused::MaxLines));
    assert!(CompactRefused::MaxLines
        .to_string()
        .starts_with("invalid sessions.compact params: maxLines"));
    let p = SessionsCompactParams {
        max_lines: None,
        ..p
    };
    assert_eq!(params_refusal(&p), None);
}

/// R-C5: a session with a run in progress or queued is not compacted under it.
#[test]
fn a_session_with_an_active_run_is_not_compacted_now() {
    let mut active = HashMap::new();
    active.insert(KEY.to_owned(), vec!["r1".to_owned()]);
    active.insert("agent:main:idle".to_owned(), Vec::new());
    let refused = busy(&active, KEY).unwrap();
    assert_eq!(
        refused.to_string(),
        "Session agent:main:main has an active run; retry after it finishes."
    );
    assert_eq!(busy(&active, "agent:main:idle"), None);
    assert_eq!(busy(&active, "agent:main:other"), None);
}

/// The operation's `end` event says whether it completed, and why not.
#[test]
fn the_end_event_says_how_the_compaction_ended() {
    let reply = |compacted, reason: Option<&str>| CompactReply {
        compacted,
        reason: reason.map(str::to_owned),
        messages: 3,
        tokens_before: 10,
        tokens_after: 2,
    };
    assert_eq!(ending(&Ok(reply(true, None))), (true, None));
    assert_eq!(
        ending(&Ok(reply(false, Some("no transcript")))),
        (false, Some("no transcript".into()))
    );
    assert_eq!(
        ending(&Err(AskError::Unexpected)),
        (false, Some("unexpected answer".into()))
    );
    let e = RpcError::new(ErrorCode::SessionBusy, "busy");
    assert_eq!(
        ending(&Err(AskError::Failed(e))),
        (false, Some("busy".into()))
    );
}

#[test]
fn nothing_to_compact_is_ok_false_but_for_a_session_with_no_transcript() {
    let done = || CompactionDone {
        messages_summarized: 12,
        tokens_before: 9000,
        tokens_after: 800,
    };
    let r = compact_result(KEY.into(), true, None, done());
    assert!(r.ok && r.compacted);
    assert_eq!(r.result, Some(done()));

    let r = compact_result(KEY.into(), false, Some("too short".into()), done());
    assert!(!r.ok && !r.compacted);
    assert_eq!((r.result, r.reason.as_deref()), (None, Some("too short")));
    for reason in ["no transcript", "no sessionId"] {
        let r = compact_result(KEY.into(), false, Some(reason.into()), done());
        assert!(r.ok, "{reason}");
        assert_eq!(r.result, None);
    }
}
