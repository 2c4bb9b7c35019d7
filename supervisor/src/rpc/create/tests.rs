//! `sessions.create`'s decisions: what the params ask for, and what is answered after the
//! first turn's admission.

use super::*;

/// Ids handed out in order, so a test sees which one went where.
fn ids() -> impl FnMut() -> String {
    let mut n = 0;
    move || {
        n += 1;
        format!("new-{n}")
    }
}

fn route() -> Route {
    Route {
        agent_id: "main".into(),
        session_key: "agent:main:k".into(),
    }
}

fn result() -> SessionsCreateResult {
    created(
        &route(),
        SessionRow::for_run("agent:main:k", "main", "done", Some(Vec::new())),
        None,
    )
}

#[test]
fn unsupported_options_are_refused_by_name_before_anything_else() {
    let p = SessionsCreateParams {
        unsupported: vec!["forkFrom".into(), "worktree".into()],
        // Also wrong, but the unsupported options are named first.
        idempotency_key: Some(String::new()),
        message: Some("hi".into()),
        ..Default::default()
    };
    let e = creation(&p, ids()).unwrap_err();
    assert_eq!(
        e,
        CreateRefused::Unsupported(vec!["forkFrom".into(), "worktree".into()])
    );
    assert_eq!(
        e.to_string(),
        "not supported by loopgate: forkFrom, worktree"
    );
}

/// R-A3: the first turn runs under the idempotency key, so a repeat is recognised.
#[test]
fn the_first_turn_runs_under_the_idempotency_key_and_a_bad_one_is_refused() {
    let p = SessionsCreateParams {
        message: Some("hello".into()),
        task: Some("ignored: message wins".into()),
        idempotency_key: Some("run-1".into()),
        ..Default::default()
    };
    let c = creation(&p, ids()).unwrap();
    assert_eq!(c.first.as_deref(), Some("hello"));
    assert_eq!(c.run_id, "run-1");
    // No key given: a new one (the run took no new id).
    assert_eq!(c.key, "new-1");

    let empty_key = SessionsCreateParams {
        idempotency_key: Some(String::new()),
        task: Some("do it".into()),
        ..Default::default()
    };
    assert_eq!(
        creation(&empty_key, ids()),
        Err(CreateRefused::FirstTurn(
            "idempotencyKey must be a non-empty string".into()
        ))
    );
    let long_key = SessionsCreateParams {
        idempotency_key: Some("k".repeat(257)),
        message: Some("hi".into()),
        ..Default::default()
    };
    assert_eq!(
        creation(&long_key, ids()).unwrap_err().to_string(),
        "idempotencyKey is 257 bytes; the limit is 256"
    );
}

#[test]
fn without_a_message_there_is_no_turn_and_its_key_is_not_checked() {
    let p = SessionsCreateParams {
        key: Some("work".into()),
        message: Some("   ".into()),
        idempotency_key: Some(String::new()),
        ..Default::default()
    };
    let c = creation(&p, ids()).unwrap();
    assert_eq!(c.first, None);
    assert_eq!(c.key, "work");
}

#[test]
fn the_label_is_the_display_name_trimmed_and_cut_and_a_blank_key_is_new() {
    let p = SessionsCreateParams {
        key: Some("  ".into()),
        display_name: Some(format!("  {}  ", "é".repeat(250))),
        ..Default::default()
    };
    let c = creation(&p, ids()).unwrap();
    assert_eq!(c.label, Some("é".repeat(MAX_LABEL_CHARS)));
    assert_eq!((c.run_id.as_str(), c.key.as_str()), ("new-1", "new-2"));

    let both = SessionsCreateParams {
        label: Some(" Plans ".into()),
        display_name: Some("Other".into()),
        ..Default::default()
    };
    assert_eq!(
        creation(&both, ids()).unwrap().label.as_deref(),
        Some("Plans")
    );
    let blank = SessionsCreateParams {
        label: Some("   ".into()),
        ..Default::default()
    };
    assert_eq!(creation(&blank, ids()).unwrap().label, None);
}

#[test]
fn a_started_first_turn_is_acked_as_started() {
    let r = started(&result(), "run-1");
    assert!(r.run_started);
    assert_eq!(r.run_id.as_deref(), Some("run-1"));
    assert_eq!(r.status.as_deref(), Some("started"));
    assert_eq!(r.key, "agent:main:k");
    // Started: admission acked it already; nothing more is answered.
    let (_tx, rx) = oneshot::channel();
    assert_eq!(
        after_admission(Admitted::Started(rx), "run-1", result()),
        None
    );
}

/// R-A3: a key already used names its run as in flight instead of starting a second one.
#[test]
fn a_refused_or_repeated_first_turn_still_answers_the_created_session() {
    let refused = ErrorShape::invalid("gateway is draining");
    let r = after_admission(Admitted::Refused(refused.clone()), "run-1", result()).unwrap();
    assert_eq!(r.run_error, Some(refused));
    assert!(r.ok && !r.run_started);
    assert_eq!((r.run_id, r.status), (None, None));

    let in_flight = Admitted::InFlight {
        agent_id: "main".into(),
        session_key: "agent:main:k".into(),
    };
    let r = after_admission(in_flight, "run-1", result()).unwrap();
    assert_eq!(r.run_id.as_deref(), Some("run-1"));
    assert_eq!(r.status.as_deref(), Some("in_flight"));
    assert!(!r.run_started && r.run_error.is_none());
}
