//! `chat.history`'s decisions: its params, the worker's read, the receipts of asked runs and
//! the page answered.

use super::*;
use ipc::gateway::Capped;

fn route() -> Route {
    Route {
        agent_id: "main".into(),
        session_key: "agent:main:main".into(),
    }
}

fn runs<const N: usize>(ids: &[&str], more: bool) -> Option<Capped<String, N>> {
    Some(Capped {
        items: ids.iter().map(|s| (*s).to_owned()).collect(),
        more,
    })
}

/// R-A5: a history page's params are checked, each refusal saying what is wrong.
#[test]
fn history_params_are_refused_by_what_is_wrong() {
    let p = |f: fn(&mut ChatHistoryParams)| {
        let mut p = ChatHistoryParams::default();
        f(&mut p);
        history_limit(&p)
    };
    assert_eq!(p(|_| {}), Ok(200));
    assert_eq!(p(|p| p.limit = Some(1000)), Ok(1000));
    assert_eq!(p(|p| p.limit = Some(0)), Err(HistoryRefused::Limit));
    assert_eq!(p(|p| p.limit = Some(1001)), Err(HistoryRefused::Limit));
    assert_eq!(
        p(|p| p.max_bytes = Some(1023)),
        Err(HistoryRefused::MaxBytes)
    );
    assert_eq!(p(|p| p.max_bytes = Some(1024)), Ok(200));
    assert_eq!(
        p(|p| {
            p.cursor = Some(ipc::gateway::Ignored);
            p.offset = Some(5);
        }),
        Err(HistoryRefused::CursorWithOffset)
    );
    assert_eq!(
        p(|p| p.input_run_ids = runs(&["r1"], true)),
        Err(HistoryRefused::TooManyRunIds)
    );
    // The limit is checked first.
    assert_eq!(
        p(|p| {
            p.limit = Some(0);
            p.max_bytes = Some(1);
        }),
        Err(HistoryRefused::Limit)
    );
    assert_eq!(
        HistoryRefused::TooManyRunIds.to_string(),
        "inputRunIds holds at most 50 run ids"
    );
}

#[test]
fn the_workers_read_has_the_default_cap_and_a_bounded_offset() {
    let p = ChatHistoryParams {
        offset: Some(u64::MAX),
        input_run_ids: runs(&["r1", "r2"], false),
        ..Default::default()
    };
    let HistoryOp {
        session_key,
        limit,
        offset,
        max_bytes,
        input_run_ids,
    } = history_op("agent:main:main".into(), &p, 50);
    assert_eq!((session_key.as_str(), limit), ("agent:main:main", 50));
    assert_eq!(offset, i64::MAX as u64 / 2);
    assert_eq!(max_bytes, Some(8 * 1024 * 1024));
    assert_eq!(input_run_ids, ["r1", "r2"]);

    let HistoryOp {
        offset, max_bytes, ..
    } = history_op(
        "k".into(),
        &ChatHistoryParams {
            offset: Some(30),
            max_bytes: Some(4096),
            ..Default::default()
        },
        1,
    );
    assert_eq!((offset, max_bytes), (30, Some(4096)));
}

/// R-A5, R-B3: an asked run is consumed once its message is recorded, pending while it
/// waits in its lane, and not told when unknown.
#[test]
fn asked_runs_are_consumed_pending_or_not_told() {
    let consumed = [InputConsumed {
        run_id: "r1".into(),
        entry_id: "e9".into(),
    }];
    let active = ["r0".to_owned(), "r2".to_owned()];
    let asked = ["r1".to_owned(), "r2".to_owned(), "r3".to_owned()];
    let r = receipts(&asked, &consumed, &active).unwrap();
    assert_eq!(
        r,
        [
            InputReceipt::Consumed {
                run_id: "r1".into(),
                consumed_by_event_id: "e9".into(),
            },
            InputReceipt::Pending {
                run_id: "r2".into()
            },
        ]
    );
    assert_eq!(
        consumptions(&r),
        [InputConsumption {
            run_id: "r1".into(),
            consumed_by_event_id: "e9".into(),
        }]
    );
    assert_eq!(receipts(&[], &consumed, &active), None);
}

/// R-B3: the page counts the session's queued messages (the running one is not
/// queued) and says where older rows remain.
#[test]
fn the_page_counts_queued_messages_and_says_if_older_rows_remain() {
    let info = SessionRow::for_run(
        "agent:main:main",
        "main",
        "running",
        Some(vec!["r0".into(), "r1".into(), "r2".into()]),
    );
    let read = HistoryRead {
        session_id: Some("s1".into()),
        stored: Vec::new(),
        next_offset: Some(200),
        consumed: Vec::new(),
    };
    let p = ChatHistoryParams {
        offset: Some(0),
        ..Default::default()
    };
    let page = history_page(&route(), &p, read, info, None);
    assert_eq!(page.pending_inputs.total, 2);
    assert_eq!((page.has_more, page.next_offset), (Some(true), Some(200)));
    assert_eq!(page.offset, Some(0));
    assert_eq!(page.session_id.as_deref(), Some("s1"));
    // No run asked about: no receipts at all.
    assert_eq!((page.input_receipts, page.input_consumptions), (None, None));

    let idle = SessionRow::for_run("agent:main:main", "main", "done", None);
    let read = HistoryRead {
        session_id: None,
        stored: Vec::new(),
        next_offset: None,
        consumed: Vec::new(),
    };
    let page = history_page(&route(), &ChatHistoryParams::default(), read, idle, None);
    assert_eq!(page.pending_inputs.total, 0);
    assert_eq!((page.has_more, page.next_offset), (None, None));
}

/// R-A5: a note injected into the history is checked like a message, and recorded under
/// its label.
#[test]
fn an_injected_note_is_its_message_under_its_label() {
    let p = |message: &str, label: Option<&str>| ChatInjectParams {
        session_key: "agent:main:main".into(),
        message: message.into(),
        label: label.map(str::to_owned),
        ..Default::default()
    };
    assert_eq!(inject_text(&p("hello", None)).unwrap(), "hello");
    assert_eq!(
        inject_text(&p("hello", Some("  Note "))).unwrap(),
        "[Note]\n\nhello"
    );
    assert_eq!(inject_text(&p("hello", Some("   "))).unwrap(), "hello");
    assert_eq!(inject_text(&p(" \n ", None)), Err(InjectRefused::Empty));
    let e = inject_text(&p("hello", Some(&"é".repeat(101)))).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid chat.inject params: label is at most 100 characters"
    );
    assert!(inject_text(&p("hello", Some(&"é".repeat(100)))).is_ok());
    let big = "x".repeat(ipc::gateway::MAX_MESSAGE_BYTES + 1);
    assert_eq!(
        inject_text(&p(&big, None)).unwrap_err().to_string(),
        format!(
            "invalid chat.inject params: message is {} bytes; the limit is {} bytes",
            big.len(),
            ipc::gateway::MAX_MESSAGE_BYTES
        )
    );
}
