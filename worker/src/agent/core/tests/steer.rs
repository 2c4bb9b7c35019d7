//! Steering (R-B3): messages that arrive while a turn runs join its next request, or get
//! their own answer, or are given back.

use super::*;

fn steer(id: &str, text: &str) -> Input {
    Input::Steer(Steered {
        run_id: id.into(),
        text: text.into(),
        attachments: Vec::new(),
        traced: false,
    })
}

/// R-B3 steer: the running tool finishes, the unstarted call of the batch is skipped
/// with an error result, the message is recorded under its own run id and is the last
/// message of the next model request, in the same run.
#[test]
fn a_steered_message_skips_unstarted_calls_and_joins_the_next_request_r_b3() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    ask_for(&mut t, vec![tool_call("a"), tool_call("b")], t0);
    let a = t.handle(Input::Appended(Ok(2)), t0, 3);
    assert!(a
        .iter()
        .any(|a| matches!(a, Action::RunTool(c) if c.id == "a")));
    assert!(t.handle(steer("r2", "stop, do X"), t0, 4).is_empty());
    let a = t.handle(
        Input::ToolDone(ToolOutcome {
            delivered: None,
            content: "listing".into(),
            is_error: false,
        }),
        t0,
        5,
    );
    assert_eq!(appended(&a)[0].text, "listing", "the running tool finished");
    let a = t.handle(Input::Appended(Ok(3)), t0, 6);
    assert!(!a.iter().any(|a| matches!(a, Action::RunTool(_))), "{a:?}");
    let skipped = appended(&a);
    assert_eq!(skipped[0].text, SKIPPED);
    assert_eq!(
        skipped[0].tool_result,
        Some(("b".into(), "ls".into(), true))
    );
    let a = t.handle(Input::Appended(Ok(4)), t0, 7);
    let user = appended(&a);
    assert_eq!(user[0].role, Role::User);
    assert_eq!(user[0].text, "stop, do X");
    assert_eq!(user[0].input_run_id.as_deref(), Some("r2"));
    let a = t.handle(Input::Appended(Ok(5)), t0, 8);
    let Some(Action::CallModel(next)) = a.last() else {
        panic!("{a:?}")
    };
    let last = next.messages.last().unwrap();
    assert_eq!((last.role, &*last.content), ("user", "stop, do X"));
    assert_eq!(t.steered(), ["r2".to_owned()]);
}

/// A cancelled steered message leaves the turn before it is recorded; a taken one the
/// turn could not record (its model calls used up) is not reported as carried.
#[test]
fn an_unrecorded_steered_message_is_dropped_or_given_back_r_b3() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    t.handle(steer("r2", "two"), t0, 1);
    t.handle(steer("r3", "three"), t0, 2);
    t.unsteer("r2");
    assert_eq!(t.steered(), Vec::<String>::new(), "none recorded yet");
    t.handle(Input::Model(LlmEvent::Delta("A.".into())), t0, 3);
    let a = t.handle(
        Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
        t0,
        4,
    );
    assert_eq!(appended(&a)[0].text, "A.");
    let a = t.handle(Input::Appended(Ok(2)), t0, 5);
    assert_eq!(appended(&a)[0].text, "three", "r2 was dropped");
    t.handle(Input::Appended(Ok(3)), t0, 6);
    assert_eq!(t.steered(), ["r3".to_owned()]);
}

/// R-B3 steer: a message that arrives while the final answer streams is answered in the
/// same run; the first answer stays part of the reply.
#[test]
fn a_message_steered_during_the_final_answer_gets_its_own_answer_r_b3() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    t.handle(Input::Model(LlmEvent::Delta("First.".into())), t0, 1);
    t.handle(steer("r2", "and then?"), t0, 2);
    let a = t.handle(
        Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
        t0,
        3,
    );
    assert!(!a.iter().any(|a| matches!(a, Action::Persist(_))), "{a:?}");
    assert_eq!(appended(&a)[0].text, "First.");
    let a = t.handle(Input::Appended(Ok(2)), t0, 4);
    assert_eq!(appended(&a)[0].text, "and then?");
    let a = t.handle(Input::Appended(Ok(3)), t0, 5);
    assert!(matches!(a.last(), Some(Action::CallModel(_))), "{a:?}");
    t.handle(Input::Model(LlmEvent::Delta("Then Y.".into())), t0, 6);
    t.handle(
        Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
        t0,
        7,
    );
    let a = t.handle(Input::Persisted(Ok(())), t0, 8);
    let Some(Action::Finish(term)) = a.last() else {
        panic!("{a:?}")
    };
    assert_eq!(term.status, RunStatus::Ok);
    let texts: Vec<&str> = term.payloads.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(texts, ["First.", "Then Y."]);
    assert_eq!(t.steered(), ["r2".to_owned()]);
}

/// A turn recording its outcome takes no steered message: the driver hands it back to
/// run after (R-B3).
#[test]
fn a_message_steered_too_late_is_not_recorded_r_b3() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    t.handle(Input::Model(LlmEvent::Delta("Done.".into())), t0, 1);
    t.handle(
        Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
        t0,
        2,
    );
    assert!(!t.accepts_steering());
    assert!(t.handle(steer("r2", "late"), t0, 3).is_empty());
    let a = t.handle(Input::Persisted(Ok(())), t0, 4);
    assert!(matches!(a.last(), Some(Action::Finish(_))));
    assert!(t.steered().is_empty());
}
