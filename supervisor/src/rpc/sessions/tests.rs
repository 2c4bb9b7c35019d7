//! The session index's decisions: list filters and paging, the row clients see, previews
//! and reset reasons.

use super::super::tests::{config, index_row, ONE_PROVIDER};
use super::*;
use ipc::control::StoredMessage;

/// A stored index row of `agent:main:k`, last run `r1` ended with `status`.
fn stored(status: Option<&str>, error: Option<&str>) -> crate::gatewaydb::SessionRow {
    crate::gatewaydb::SessionRow {
        session_id: Some("s1".into()),
        last_run_id: Some("r1".into()),
        last_status: status.map(str::to_owned),
        last_error: error.map(str::to_owned),
        input_tokens: 100,
        output_tokens: 20,
        total_tokens: 120,
        last_run_started_at: Some(20),
        last_run_ended_at: Some(45),
        ..index_row("agent:main:k")
    }
}

#[test]
fn filters_loopgate_cannot_match_list_nothing_and_ignored_ones_are_no_filter() {
    assert!(!matches_none(&SessionsListParams::default()));
    let p = |f: fn(&mut SessionsListParams)| {
        let mut p = SessionsListParams::default();
        f(&mut p);
        matches_none(&p)
    };
    assert!(p(|p| p.has_board = Some(true)));
    assert!(!p(|p| p.has_board = Some(false)));
    assert!(p(|p| p.spawned_by = Some(Ignored)));
    assert!(p(|p| p.owner_id = Some(Ignored)));
    assert!(p(|p| p.involving_profile_id = Some(Ignored)));
    // Accepted and ignored: not a filter that matches nothing.
    assert!(!p(|p| p.pinned = Some(Ignored)));
}

#[test]
fn a_page_names_the_next_offset_only_when_rows_remain() {
    assert_eq!(next_offset(0, 100, 250), Some(100));
    assert_eq!(next_offset(200, 50, 250), None);
    assert_eq!(next_offset(100, 100, 250), Some(200));
    assert_eq!(next_offset(0, 0, 0), None);
}

/// R-A5, R-C6: an aborted run is no error, and a session running now shows no previous
/// run's end.
#[test]
fn the_row_tells_the_last_run_as_clients_read_it() {
    let c = config(ONE_PROVIDER);
    let row = session_row(&c, &stored(Some("error"), Some("boom")), Vec::new());
    assert_eq!(row.status, "failed");
    assert_eq!(row.last_run_error.as_deref(), Some("boom"));
    assert_eq!(row.aborted_last_run, None);
    assert_eq!(
        (row.started_at, row.ended_at, row.runtime_ms),
        (Some(20), Some(45), Some(25))
    );
    assert_eq!(
        (row.model_provider.as_deref(), row.model.as_deref()),
        (Some("p"), Some("m"))
    );
    assert_eq!(row.effective_queue_mode, c.queue.mode.as_str());

    let aborted = session_row(&c, &stored(Some("aborted"), Some("stopped")), Vec::new());
    assert_eq!(aborted.status, "killed");
    assert_eq!(aborted.last_run_error, None);
    assert_eq!(aborted.aborted_last_run, Some(true));

    let running = session_row(&c, &stored(Some("ok"), None), vec!["r2".into()]);
    assert_eq!(running.status, "running");
    assert_eq!(running.active_run_ids, Some(vec!["r2".into()]));
    assert_eq!(
        (running.started_at, running.ended_at, running.runtime_ms),
        (None, None, None)
    );
}

/// R-B1: the row shows the session's own model while it is still configured.
#[test]
fn the_row_shows_the_sessions_own_model_while_it_is_configured() {
    let c = config(ONE_PROVIDER);
    let mut r = stored(Some("ok"), None);
    r.model_override = Some("p/think".into());
    r.queue_mode = Some("collect".into());
    let row = session_row(&c, &r, Vec::new());
    assert_eq!(row.model.as_deref(), Some("think"));
    assert_eq!(row.effective_queue_mode, "collect");
    r.model_override = Some("gone/model".into());
    assert_eq!(session_row(&c, &r, Vec::new()).model.as_deref(), Some("m"));
}

fn message(role: &str, json: &str) -> StoredMessage {
    StoredMessage {
        entry_id: "e".into(),
        seq: 0,
        role: role.into(),
        run_id: None,
        message_json: json.into(),
        omitted_bytes: None,
    }
}

#[test]
fn a_preview_keeps_the_newest_texts_of_user_and_assistant() {
    let text = |t: &str| format!(r#"{{"content":[{{"type":"text","text":"{t}"}}]}}"#);
    let messages = [
        message("user", &text("first")),
        message("toolResult", &text("tool output")),
        message(
            "assistant",
            r#"{"content":[{"type":"toolCall","name":"x"}]}"#,
        ),
        message("assistant", &text("second")),
        message("user", "not json"),
        message("user", &text("third and longer than the cut")),
    ];
    let p = preview_of("agent:main:k", &messages, 2, 20);
    assert_eq!(p.status, "ok");
    let items: Vec<(&str, &str)> = p
        .items
        .iter()
        .map(|i| (i.role.as_str(), i.text.as_str()))
        .collect();
    assert_eq!(
        items,
        [("assistant", "second"), ("user", "third and longer tha...")]
    );
    assert_eq!(preview_of("k", &messages[1..3], 5, 20).status, "empty");
}

#[test]
fn preview_text_joins_text_blocks_and_cuts_at_characters() {
    let m = serde_json::json!({"content": [
        {"type": "text", "text": " héllo "},
        {"type": "image", "data": "..."},
        {"type": "text", "text": "wörld "}
    ]});
    // Joined by a space, then trimmed; inner spaces stay.
    assert_eq!(preview_text(&m, 100), "héllo  wörld");
    assert_eq!(preview_text(&m, 5), "héllo...");
    assert_eq!(
        preview_text(&serde_json::json!({"content": "plain"}), 10),
        ""
    );
}

#[test]
fn a_reset_is_a_reset_unless_it_says_new() {
    assert_eq!(reset_reason(None), Some(ResetReason::Reset));
    assert_eq!(reset_reason(Some("reset")), Some(ResetReason::Reset));
    assert_eq!(reset_reason(Some("new")), Some(ResetReason::New));
    assert_eq!(reset_reason(Some("New")), None);
    assert_eq!(reset_reason(Some("archive")), None);
}
