use super::*;
use crate::agent::prompt;
use crate::llm::{ChatMessage, Terminal};
use crate::store::Role;
use ipc::thinking::ReasoningMode;

fn spec(timeout: Option<u64>) -> TurnSpec {
    TurnSpec {
        run_id: "r".into(),
        session_key: "agent:main:main".into(),
        provider: "p".into(),
        model: "m".into(),
        timeout: timeout.map(Duration::from_secs),
        idle_timeout: Duration::from_secs(10),
        context: ContextBudget::new(None, &Default::default()),
        compaction: Default::default(),
        retry_base: Duration::from_secs(1),
        retry_max: Duration::from_secs(30),
        fallbacks: Vec::new(),
        reasoning: ReasoningMode::Off,
        approval_timeout: Duration::from_secs(30),
    }
}

fn req() -> ModelRequest {
    ModelRequest {
        messages: std::sync::Arc::new(vec![ChatMessage::text("user", "hi")]),
        tools: vec![],
        choice: None,
        thinking: None,
    }
}

fn begun(t: &mut Turn, now: Instant) -> Vec<Action> {
    t.handle(
        Input::Begun {
            session_id: "s".into(),
            request: Ok(Prepared::Call(req())),
        },
        now,
        1000,
    )
}

fn lifecycle_phase(a: &Action) -> Option<LPhase> {
    match a {
        Action::Emit(EventBody::Lifecycle(l)) => Some(l.phase),
        _ => None,
    }
}

#[test]
fn happy_path_persists_before_the_terminal_event_r_a5() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 1000);
    let a = begun(&mut t, t0);
    assert_eq!(lifecycle_phase(&a[0]), Some(LPhase::Start));
    assert!(matches!(a[1], Action::CallModel(_)));
    let a = t.handle(Input::Model(LlmEvent::Delta("Hel".into())), t0, 1001);
    assert_eq!(
        a,
        vec![Action::Emit(EventBody::Assistant {
            delta: "Hel".into()
        })]
    );
    t.handle(Input::Model(LlmEvent::Delta("lo".into())), t0, 1002);
    t.handle(
        Input::Model(LlmEvent::Usage(Usage {
            input: 3,
            output: 2,
            cache_read: 0,
            cache_write: 0,
            total: 5,
        })),
        t0,
        1003,
    );
    let a = t.handle(
        Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
        t0,
        1004,
    );
    // Only a persist: no terminal event before the outcome is durable.
    assert_eq!(a.len(), 1);
    let Action::Persist(f) = &a[0] else {
        panic!("{a:?}")
    };
    assert_eq!(f.assistant.as_ref().unwrap().text, "Hello");
    let a = t.handle(Input::Persisted(Ok(())), t0, 1005);
    assert_eq!(lifecycle_phase(&a[0]), Some(LPhase::End));
    let Action::Finish(term) = &a[1] else {
        panic!()
    };
    assert_eq!(term.status, RunStatus::Ok);
    assert_eq!(term.payloads[0].text, "Hello");
    assert_eq!(term.usage.unwrap().total, 5);
    assert!(t.is_done());
    // Nothing after the terminal (R-D3).
    assert!(t
        .handle(Input::Model(LlmEvent::Delta("late".into())), t0, 1006)
        .is_empty());
    assert!(t
        .handle(Input::Cancel(StopReason::Rpc), t0, 1006)
        .is_empty());
}

#[test]
fn idle_timeout_aborts_the_attempt_r_b4() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(10)));
    assert!(t
        .handle(Input::Tick, t0 + Duration::from_secs(9), 9)
        .is_empty());
    // Data resets the idle deadline.
    t.handle(
        Input::Model(LlmEvent::Delta("x".into())),
        t0 + Duration::from_secs(9),
        9,
    );
    assert!(t
        .handle(Input::Tick, t0 + Duration::from_secs(18), 18)
        .is_empty());
    let a = t.handle(Input::Tick, t0 + Duration::from_secs(19), 19);
    assert_eq!(a[0], Action::AbortModel);
    let Action::Persist(f) = &a[1] else { panic!() };
    assert!(f.error.as_ref().unwrap().contains("idle timeout"));
    let a = t.handle(Input::Persisted(Ok(())), t0, 20);
    assert_eq!(lifecycle_phase(&a[0]), Some(LPhase::Error));
}

#[test]
fn reasoning_and_tool_arguments_are_progress_and_reasoning_is_saved_not_shown_r_b4() {
    let t0 = Instant::now();
    let at = |s: u64| t0 + Duration::from_secs(s);
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    // Reasoning for longer than the idle window keeps the attempt alive.
    for s in [8, 16, 24] {
        let a = t.handle(Input::Model(LlmEvent::Reasoning("hmm ".into())), at(s), s);
        assert!(a.is_empty(), "reasoning is never reply text: {a:?}");
    }
    assert_eq!(t.next_deadline(), Some(at(34)));
    // So does a tool call whose arguments are still streaming.
    t.handle(
        Input::Model(LlmEvent::ToolCallStart {
            index: 0,
            name: "read".into(),
        }),
        at(30),
        30,
    );
    t.handle(
        Input::Model(LlmEvent::ToolCallDelta { index: 0, bytes: 3 }),
        at(38),
        38,
    );
    assert_eq!(t.next_deadline(), Some(at(48)));
    t.handle(Input::Model(LlmEvent::Delta("Answer".into())), at(40), 40);
    let mut done = Terminal::reason("stop");
    done.responses = Some(crate::llm::ResponsesTerminal {
        event_type: "response.completed".into(),
        end_turn: crate::llm::EndTurn::Absent,
    });
    let a = t.handle(Input::Model(LlmEvent::Done(done)), at(41), 41);
    let persist = a.iter().find_map(|a| match a {
        Action::Persist(f) => Some(f),
        _ => None,
    });
    let m = persist.unwrap().assistant.as_ref().unwrap();
    assert_eq!(m.text, "Answer");
    assert_eq!(m.reasoning.as_deref(), Some("hmm hmm hmm "));
    assert_eq!(m.diagnostics[0]["type"], "openai_responses_terminal");
    assert_eq!(m.diagnostics[0]["details"]["endTurn"], "absent");
}

#[test]
fn a_rate_limit_waits_retrying_then_the_same_request_goes_again_r_b4() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    let limited = LlmError::RateLimited {
        retry_after_ms: Some(2000),
        message: "slow down".into(),
    };
    let a = t.handle(Input::ModelFailed(limited), at(100), 1);
    assert_eq!(a[0], Action::AbortModel);
    assert_eq!(
        a[1],
        Action::Emit(EventBody::RunStatus {
            phase: ipc::control::RunStatusPhase::Retrying,
            attempt: 2,
            max_attempts: 10,
            reason: ipc::control::RetryReason::RateLimit,
        })
    );
    assert!(
        !a.iter().any(|a| lifecycle_phase(a).is_some()),
        "no terminal while retrying: {a:?}"
    );
    assert_eq!(t.next_deadline(), Some(at(2100)));
    assert!(t.handle(Input::Tick, at(2000), 2).is_empty());
    let a = t.handle(Input::Tick, at(2100), 3);
    assert_eq!(a, vec![Action::CallModel(req())]);
    t.handle(Input::Model(LlmEvent::Delta("ok".into())), at(2200), 4);
    let a = t.handle(
        Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
        at(2300),
        5,
    );
    assert!(a.iter().any(|a| matches!(a, Action::Persist(_))), "{a:?}");

    // A cancel during the wait ends the run at once, with no further request.
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    t.handle(
        Input::ModelFailed(LlmError::Http {
            status: 503,
            message: "down".into(),
        }),
        at(10),
        1,
    );
    let a = t.handle(Input::Cancel(StopReason::Rpc), at(20), 2);
    assert!(
        !a.iter().any(|a| matches!(a, Action::CallModel(_))),
        "{a:?}"
    );
    assert!(a.iter().any(|a| matches!(a, Action::Persist(_))), "{a:?}");
}

#[test]
fn repeated_usage_is_not_progress_r_g5() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    let u = Usage {
        input: 1,
        output: 1,
        cache_read: 0,
        cache_write: 0,
        total: 2,
    };
    t.handle(
        Input::Model(LlmEvent::Usage(u)),
        t0 + Duration::from_secs(5),
        5,
    );
    assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(15)));
    t.handle(
        Input::Model(LlmEvent::Usage(u)),
        t0 + Duration::from_secs(12),
        12,
    );
    assert_eq!(t.next_deadline(), Some(t0 + Duration::from_secs(15)));
}

#[test]
fn run_timeout_ends_with_timeout_status() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(Some(5)), t0, 0);
    begun(&mut t, t0);
    t.handle(
        Input::Model(LlmEvent::Delta("partial".into())),
        t0 + Duration::from_secs(4),
        4,
    );
    let a = t.handle(Input::Tick, t0 + Duration::from_secs(5), 5);
    assert_eq!(a[0], Action::AbortModel);
    let Action::Persist(f) = &a[1] else { panic!() };
    assert_eq!(f.status, RunStatus::Timeout);
    // The partial answer is kept in the transcript, marked with its stop reason.
    assert_eq!(
        f.assistant.as_ref().unwrap().stop_reason.as_deref(),
        Some("timeout")
    );
    let a = t.handle(Input::Persisted(Ok(())), t0, 6);
    let Action::Finish(term) = &a[1] else {
        panic!()
    };
    assert_eq!(term.status, RunStatus::Timeout);
    assert!(term.payloads.is_empty());
}

#[test]
fn provider_error_and_fenced_persist_end_in_error() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    let a = t.handle(
        Input::ModelFailed(LlmError::Http {
            status: 400,
            message: "boom".into(),
        }),
        t0,
        1,
    );
    let Action::Persist(f) = &a[1] else { panic!() };
    assert!(f.error.as_ref().unwrap().contains("HTTP 400: boom"));
    let a = t.handle(
        Input::Persisted(Err(StoreError::Fenced {
            expected: "r".into(),
            actual: Some("other".into()),
        })),
        t0,
        2,
    );
    let Action::Finish(term) = &a[1] else {
        panic!()
    };
    assert!(term.error.as_ref().unwrap().starts_with("run superseded"));
}

#[test]
fn cancel_before_begin_is_applied_once_begun() {
    let t0 = Instant::now();
    let mut t = Turn::new(spec(None), t0, 0);
    assert!(t
        .handle(Input::Cancel(StopReason::Restart), t0, 0)
        .is_empty());
    let a = begun(&mut t, t0);
    assert_eq!(lifecycle_phase(&a[0]), Some(LPhase::Start));
    let Action::Persist(f) = &a[1] else {
        panic!("{a:?}")
    };
    assert_eq!(f.status, RunStatus::Aborted);
    assert_eq!(f.stop_reason.as_deref(), Some("restart"));
}

fn tool_call(id: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "ls".into(),
        arguments: "{}".into(),
    }
}

/// The model's response ends by asking for `calls`; the core's answer to its `Done`.
fn ask_for(t: &mut Turn, calls: Vec<ToolCall>, now: Instant) -> Vec<Action> {
    t.handle(Input::Model(LlmEvent::ToolCalls(calls)), now, 1);
    t.handle(
        Input::Model(LlmEvent::Done(Terminal::reason("tool_calls"))),
        now,
        2,
    )
}

fn usage(n: u64) -> Usage {
    Usage {
        input: n,
        output: n,
        cache_read: 0,
        cache_write: 0,
        total: 2 * n,
    }
}

fn steer(id: &str, text: &str) -> Input {
    Input::Steer(Steered {
        run_id: id.into(),
        text: text.into(),
    })
}

fn appended(a: &[Action]) -> Vec<&NewMessage> {
    a.iter()
        .filter_map(|a| match a {
            Action::Append(m) => Some(&**m),
            _ => None,
        })
        .collect()
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
    let small = || TurnSpec {
        context: ContextBudget::new(
            Some(1024),
            &ipc::control::CompactionSpec {
                reserve_tokens: Some(256),
                keep_recent_tokens: Some(100),
            },
        ),
        ..spec(None)
    };
    let start = |t: &mut Turn| {
        t.handle(
            Input::Begun {
                session_id: "s".into(),
                request: Ok(Prepared::Call(ModelRequest {
                    messages: std::sync::Arc::new(vec![
                        ChatMessage::text("system", "sys"),
                        ChatMessage {
                            seq: Some(1),
                            ..ChatMessage::text("user", "q".repeat(2000))
                        },
                    ]),
                    tools: vec![],
                    choice: None,
                    thinking: None,
                })),
            },
            t0,
            0,
        );
        ask_for(t, vec![tool_call("a")], t0);
        t.handle(Input::Appended(Ok(2)), t0, 2);
        t.handle(
            Input::ToolDone(ToolOutcome {
                content: "r".repeat(1200),
                is_error: false,
            }),
            t0,
            3,
        );
        t.handle(Input::Appended(Ok(3)), t0, 4)
    };
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

/// Issue 22 item 5: the stop reason crosses the link as a closed set. A provider's finish
/// reason the gateway knows keeps its name; one it does not know (a compatible server's
/// `eos_token`) ends the answered run as `stop`, alike in the terminal, the lifecycle `end`,
/// the run row and the transcript.
#[test]
fn a_providers_finish_reason_becomes_a_closed_stop_reason() {
    for (finish, stop) in [
        ("stop", RunStopReason::Stop),
        ("content_filter", RunStopReason::ContentFilter),
        ("eos_token", RunStopReason::Stop),
    ] {
        let t0 = Instant::now();
        let mut t = Turn::new(spec(None), t0, 1000);
        begun(&mut t, t0);
        t.handle(Input::Model(LlmEvent::Delta("Hi".into())), t0, 1001);
        let a = t.handle(
            Input::Model(LlmEvent::Done(Terminal::reason(finish))),
            t0,
            1002,
        );
        let Action::Persist(f) = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(f.stop_reason.as_deref(), Some(stop.as_str()), "{finish}");
        let saved = f.assistant.as_ref().unwrap().stop_reason.as_deref();
        assert_eq!(saved, Some(stop.as_str()), "{finish}");
        let a = t.handle(Input::Persisted(Ok(())), t0, 1003);
        let Action::Emit(EventBody::Lifecycle(l)) = &a[0] else {
            panic!("{a:?}")
        };
        assert_eq!(l.stop_reason, Some(stop), "{finish}");
        let Action::Finish(term) = &a[1] else {
            panic!("{a:?}")
        };
        assert_eq!(term.stop_reason, Some(stop), "{finish}");
    }
}
