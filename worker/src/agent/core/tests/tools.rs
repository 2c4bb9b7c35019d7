//! Tool rounds (R-E4, R-B5, R-B7, R-F4): a round appends and calls the model again, an
//! approval wait pauses the budget, a denied exec is an error the reply keeps, an over-budget
//! round compacts first, a cancel aborts the tool.

use super::*;

fn exec_call(command: &str) -> ToolCall {
    ToolCall {
        id: "x1".into(),
        name: "exec".into(),
        arguments: serde_json::json!({ "command": command }).to_string(),
    }
}

/// R-B5: an approval wait does not consume the run's budget: a 2 s run that waits 5 s
/// for an operator still has its 1 s left after the decision.
#[test]
fn an_approval_wait_pauses_the_run_budget_r_b5() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut t = Turn::new(spec(Some(2)), t0, 0);
    begun(&mut t, t0);
    ask_for(&mut t, vec![exec_call("rm x")], at(500));
    let a = t.handle(Input::Appended(Ok(2)), at(1000), 3);
    assert!(a.iter().any(|a| matches!(a, Action::RunTool(_))), "{a:?}");
    let a = t.handle(Input::ApprovalPending { id: "a1".into() }, at(1000), 4);
    assert!(a.is_empty());
    assert_eq!(
        t.next_deadline(),
        Some(at(31_000)),
        "the approval's deadline only"
    );
    assert!(
        t.handle(Input::Tick, at(6000), 5).is_empty(),
        "no run timeout"
    );
    let a = t.handle(
        Input::ApprovalDecided {
            id: "a1".into(),
            allow: true,
        },
        at(6000),
        6,
    );
    assert!(
        matches!(&a[..], [Action::RunApproved(c)] if c.id == "x1"),
        "{a:?}"
    );
    assert_eq!(t.next_deadline(), Some(at(7000)), "the 1 s it had left");
}

/// A denial, and an approval nobody gives in time, are tool errors the model sees; the
/// reply then carries the failure though the model answers (R-F4).
#[test]
fn a_denied_or_expired_exec_is_an_error_the_reply_keeps_r_f4() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    for expire in [false, true] {
        let mut t = Turn::new(spec(None), t0, 0);
        begun(&mut t, t0);
        ask_for(&mut t, vec![exec_call("rm x")], t0);
        t.handle(Input::Appended(Ok(2)), t0, 3);
        t.handle(Input::ApprovalPending { id: "a1".into() }, t0, 4);
        let a = if expire {
            t.handle(Input::Tick, at(30_000), 5)
        } else {
            t.handle(
                Input::ApprovalDecided {
                    id: "a1".into(),
                    allow: false,
                },
                at(10),
                5,
            )
        };
        assert_eq!(
            matches!(a.first(), Some(Action::ApprovalExpired { id }) if id == "a1"),
            expire
        );
        let result = appended(&a)[0].text.clone();
        let reason = if expire {
            "approval-timeout"
        } else {
            "user-denied"
        };
        assert_eq!(
            result,
            format!("Exec denied (gateway id=a1, {reason}): rm x")
        );
        t.handle(Input::Appended(Ok(3)), at(30_001), 6);
        t.handle(
            Input::Model(LlmEvent::Delta("I could not.".into())),
            at(30_002),
            7,
        );
        t.handle(
            Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
            at(30_003),
            8,
        );
        let a = t.handle(Input::Persisted(Ok(())), at(30_004), 9);
        let Some(Action::Finish(term)) = a.last() else {
            panic!("{a:?}")
        };
        let texts: Vec<&str> = term.payloads.iter().map(|p| p.text.as_str()).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(
            texts[1].contains("The exec tool failed: Exec denied"),
            "{texts:?}"
        );
    }
}

/// R-E4: a tool round appends the call, runs each tool with start/result events, appends
/// each result and calls the model again with the results; usage sums over calls.
#[test]
fn tool_round_appends_runs_and_calls_the_model_again_r_e4() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    t.handle(Input::Model(LlmEvent::Delta("Looking.".into())), t0, 1);
    t.handle(Input::Model(LlmEvent::Usage(usage(1))), t0, 1);
    let a = ask_for(&mut t, vec![tool_call("a"), tool_call("b")], t0);
    let [Action::Append(m)] = a.as_slice() else {
        panic!("{a:?}")
    };
    assert_eq!(m.role, Role::Assistant);
    assert_eq!(m.text, "Looking.");
    assert_eq!(m.tool_calls.len(), 2);
    for id in ["a", "b"] {
        let a = t.handle(Input::Appended(Ok(7)), t0, 3);
        assert!(
            matches!(&a[0], Action::Emit(EventBody::Tool { phase, tool_call_id, .. }) if *phase == ipc::control::ToolPhase::Start && tool_call_id == id),
            "{a:?}"
        );
        assert_eq!(a[1], Action::RunTool(tool_call(id)));
        let a = t.handle(
            Input::ToolDone(ToolOutcome {
                delivered: None,
                content: format!("out-{id}"),
                is_error: false,
            }),
            t0,
            4,
        );
        assert!(
            matches!(&a[0], Action::Emit(EventBody::Tool { phase, .. }) if *phase == ipc::control::ToolPhase::Result)
        );
        let Action::Append(m) = &a[1] else {
            panic!("{a:?}")
        };
        assert_eq!(m.role, Role::ToolResult);
        assert_eq!(m.tool_result.as_ref().unwrap().0, id);
    }
    let a = t.handle(Input::Appended(Ok(7)), t0, 5);
    let [Action::CallModel(req)] = a.as_slice() else {
        panic!("{a:?}")
    };
    let roles: Vec<_> = req.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
    assert_eq!(&*req.messages[3].content, "out-b");
    t.handle(Input::Model(LlmEvent::Delta("Done.".into())), t0, 6);
    t.handle(Input::Model(LlmEvent::Usage(usage(2))), t0, 6);
    let a = t.handle(Input::Model(LlmEvent::Done(Terminal::default())), t0, 7);
    let Action::Persist(f) = &a[0] else { panic!() };
    assert_eq!(f.assistant.as_ref().unwrap().text, "Done.");
    assert_eq!(f.usage.unwrap().total, 6);
}

/// R-B7 / R-C5: a tool round that takes the request over the context budget compacts
/// before the next model call: summary call, fenced `Compact` keeping the call with its
/// result, then the call with the compacted request (still marked as after tools). A
/// compaction refused by the fence ends the run.
#[test]
fn tool_round_over_budget_compacts_first_r_b7() {
    let t0 = Instant::now();
    let small = || over_budget(spec(None));
    let start = |t: &mut Turn| over_budget_round(t, t0);
    let mut t = Turn::new(small(), t0, 0);
    let a = start(&mut t);
    let [Action::Emit(EventBody::Compaction {
        phase,
        reason,
        messages,
        ..
    }), Action::CallModel(summarize)] = a.as_slice()
    else {
        panic!("{a:?}")
    };
    assert_eq!(
        (*phase, reason.as_deref(), *messages),
        (
            ipc::control::CompactionPhase::Start,
            Some("threshold"),
            Some(1)
        )
    );
    assert!(summarize.tools.is_empty());
    assert!(summarize.messages[1].content.contains("qqqq"));
    assert!(
        !summarize.messages[1].content.contains("rrrr"),
        "the kept result was summarized"
    );
    t.handle(
        Input::Model(LlmEvent::Delta("the user asked q".into())),
        t0,
        5,
    );
    let a = t.handle(Input::Model(LlmEvent::Done(Terminal::default())), t0, 6);
    let [Action::Compact(record)] = a.as_slice() else {
        panic!("{a:?}")
    };
    assert_eq!(record.kept_from_seq, 2);
    assert_eq!(record.summary, "the user asked q");
    assert!(record.tokens_after < record.tokens_before);
    let a = t.handle(Input::Appended(Ok(4)), t0, 7);
    let [Action::Emit(EventBody::Compaction { completed, .. }), Action::CallModel(next)] =
        a.as_slice()
    else {
        panic!("{a:?}")
    };
    assert_eq!(*completed, Some(true));
    let roles: Vec<_> = next.messages.iter().map(|m| m.role).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert!(next.messages[1].content.starts_with(prompt::SUMMARY_PREFIX));
    assert!(
        t.after_tools,
        "the call after compaction is still the post-tool call"
    );

    let mut t = Turn::new(small(), t0, 0);
    start(&mut t);
    t.handle(Input::Model(LlmEvent::Delta("sum".into())), t0, 5);
    t.handle(Input::Model(LlmEvent::Done(Terminal::default())), t0, 6);
    let a = t.handle(
        Input::Appended(Err(StoreError::Fenced {
            expected: "r".into(),
            actual: Some("other".into()),
        })),
        t0,
        7,
    );
    let [Action::Persist(f)] = a.as_slice() else {
        panic!("{a:?}")
    };
    assert_eq!(f.status, RunStatus::Error);
    assert!(f.error.as_deref().unwrap().contains("superseded"));
}

#[test]
fn cancel_during_a_tool_aborts_it_and_failed_append_ends_the_run() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    ask_for(&mut t, vec![tool_call("a")], t0);
    t.handle(Input::Appended(Ok(7)), t0, 2);
    let a = t.handle(Input::Cancel(StopReason::Rpc), t0, 3);
    assert_eq!(a[0], Action::AbortTool);
    let Action::Persist(f) = &a[1] else { panic!() };
    assert_eq!(f.status, RunStatus::Aborted);
    // A result arriving after the abort changes nothing.
    assert!(t
        .handle(
            Input::ToolDone(ToolOutcome {
                delivered: None,
                content: "late".into(),
                is_error: false
            }),
            t0,
            4
        )
        .is_empty());

    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    ask_for(&mut t, vec![tool_call("a")], t0);
    let a = t.handle(
        Input::Appended(Err(StoreError::Fenced {
            expected: "r".into(),
            actual: None,
        })),
        t0,
        2,
    );
    let Action::Persist(f) = &a[0] else { panic!() };
    assert_eq!(f.status, RunStatus::Error);
    assert!(f.error.as_ref().unwrap().starts_with("run superseded"));
}

fn message_call(id: &str, text: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: crate::tools::MESSAGE_TOOL.into(),
        arguments: serde_json::json!({ "text": text }).to_string(),
    }
}

/// Runs the batch `calls` asked for to the end, each with `outcome`, up to the next model
/// call; returns that call's actions.
fn run_batch(t: &mut Turn, calls: Vec<ToolCall>, failing: bool, now: Instant) -> Vec<Action> {
    let n = calls.len();
    ask_for(t, calls, now);
    let mut last = Vec::new();
    for i in 0..n {
        t.handle(Input::Appended(Ok(10 + i as i64)), now, 3);
        let content = if failing { "boom" } else { "done" };
        t.handle(
            Input::ToolDone(ToolOutcome {
                delivered: None,
                content: content.into(),
                is_error: failing,
            }),
            now,
            4,
        );
        last = t.handle(Input::Appended(Ok(20 + i as i64)), now, 5);
    }
    last
}

/// The model's response is empty: what the core does next.
fn empty_response(t: &mut Turn, now: Instant) -> Vec<Action> {
    t.handle(
        Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
        now,
        6,
    )
}

fn call_without_tools(a: &[Action]) -> bool {
    a.iter()
        .any(|a| matches!(a, Action::CallModel(req) if req.tools.is_empty()))
}

/// Issue 26 item 5 (R-E3, R-F2, R-F4, the seed's reply rules): a `message` send is the
/// turn's answer only from its last tool batch. "Working on it…", then tools that fail and
/// an empty final, gets the finalization pass and then the failure warning (it ended `ok`
/// with no answer before); a send in the last batch still needs no pass.
#[test]
fn a_progress_message_is_the_answer_only_from_the_last_tool_batch_r_e3() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    run_batch(
        &mut t,
        vec![message_call("m1", "Working on it…")],
        false,
        t0,
    );
    run_batch(&mut t, vec![tool_call("a")], true, t0);
    let a = empty_response(&mut t, t0);
    assert!(call_without_tools(&a), "the finalization pass: {a:?}");
    let a = empty_response(&mut t, t0);
    let a = match a.last() {
        Some(Action::Persist(_)) => t.handle(Input::Persisted(Ok(())), t0, 9),
        _ => a,
    };
    let Some(Action::Finish(term)) = a.last() else {
        panic!("{a:?}")
    };
    let texts: Vec<(&str, bool)> = term
        .payloads
        .iter()
        .map(|p| (p.text.as_str(), p.is_error))
        .collect();
    assert!(
        texts
            .iter()
            .any(|(t, e)| *e && t.contains("The ls tool failed")),
        "the failure is told: {texts:?}"
    );

    // Sent in the last batch: that is the answer, no pass.
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    run_batch(&mut t, vec![tool_call("a")], false, t0);
    run_batch(&mut t, vec![message_call("m2", "Here it is.")], false, t0);
    let a = empty_response(&mut t, t0);
    assert!(!call_without_tools(&a), "{a:?}");
    let a = t.handle(Input::Persisted(Ok(())), t0, 9);
    let Some(Action::Finish(term)) = a.last() else {
        panic!("{a:?}")
    };
    assert_eq!(term.status, RunStatus::Ok);
    assert_eq!(term.payloads[0].text, "Here it is.");
}

/// `spec` with a context window small enough that one big tool result crosses it.
fn over_budget(spec: TurnSpec) -> TurnSpec {
    TurnSpec {
        context: ContextBudget::new(
            Some(1024),
            &ipc::control::CompactionSpec {
                reserve_tokens: Some(256),
                keep_recent_tokens: Some(100),
            },
        ),
        ..spec
    }
}

/// The run begun over budget, then one tool round whose big result crosses the window:
/// what the core does once the result is recorded.
fn over_budget_round(t: &mut Turn, t0: Instant) -> Vec<Action> {
    t.handle(begun_over_budget(), t0, 0);
    ask_for(t, vec![tool_call("a")], t0);
    t.handle(Input::Appended(Ok(2)), t0, 2);
    t.handle(
        Input::ToolDone(ToolOutcome {
            delivered: None,
            content: "r".repeat(1200),
            is_error: false,
        }),
        t0,
        3,
    );
    t.handle(Input::Appended(Ok(3)), t0, 4)
}

/// The run begun with a long user message already in its context.
fn begun_over_budget() -> Input {
    Input::Begun {
        session_id: "s".into(),
        request: Ok(Prepared::Call(ModelRequest {
            messages: std::sync::Arc::new(
                vec![
                    ChatMessage::text("system", "sys"),
                    ChatMessage {
                        seq: Some(1),
                        ..ChatMessage::text("user", "q".repeat(2000))
                    },
                ]
                .into(),
            ),
            tools: vec![],
            choice: None,
            thinking: None,
        })),
    }
}

/// Issue 26 item 6 (R-B5): the tool-free finalization pass gets a deadline of its own, not
/// what the settled attempt left of the run's.
#[test]
fn the_finalization_pass_gets_its_own_deadline_r_b5() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut t = Turn::new(spec(Some(5)), t0, 0);
    begun(&mut t, t0);
    run_batch(&mut t, vec![tool_call("a")], false, at(4_000));
    let a = empty_response(&mut t, at(4_900));
    assert!(call_without_tools(&a), "the finalization pass: {a:?}");
    assert_eq!(t.next_deadline(), Some(at(9_900)), "5 s of its own");
}

/// Issue 26 item 6 (R-B5): a compaction under way at the execution deadline gets one
/// bounded grace to finish; past it, the run times out.
#[test]
fn a_compaction_at_the_deadline_gets_one_bounded_grace_r_b5() {
    let t0 = Instant::now();
    let small = TurnSpec {
        idle_timeout: Duration::from_secs(120),
        ..over_budget(spec(Some(5)))
    };
    let mut t = Turn::new(small, t0, 0);
    let a = over_budget_round(&mut t, t0);
    assert!(
        matches!(a.first(), Some(Action::Emit(EventBody::Compaction { .. }))),
        "compacting: {a:?}"
    );
    let deadline = t0 + Duration::from_secs(5);
    let a = t.handle(Input::Tick, deadline, 5);
    assert!(a.is_empty(), "the grace: {a:?}");
    let grace = deadline + crate::agent::core::compact::COMPACTION_GRACE;
    assert_eq!(t.next_deadline(), Some(grace));
    let a = t.handle(Input::Tick, grace, 6);
    let Some(Action::Persist(f)) = a.get(1) else {
        panic!("{a:?}")
    };
    assert_eq!(f.status, RunStatus::Timeout);
}
