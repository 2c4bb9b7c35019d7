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
        verbose: ipc::thinking::VerboseLevel::Off,
        blocks: None,
        notes: Default::default(),
        approval_timeout: Duration::from_secs(30),
    }
}

fn req() -> ModelRequest {
    ModelRequest {
        messages: std::sync::Arc::new(vec![ChatMessage::text("user", "hi")].into()),
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

/// Issue 26 item 6 (R-B4, R-B5): the execution deadline belongs to the model attempt: a
/// primary that runs out of it hands the request to the fallback model with a fresh budget
/// (it ended the run before); the fallback that runs out too times the run out.
#[test]
fn a_timed_out_attempt_hands_over_to_the_fallback_with_a_fresh_budget_r_b5() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let mut s = spec(Some(5));
    s.idle_timeout = Duration::from_secs(60);
    s.fallbacks = vec![crate::llm::ModelChoice {
        provider: "p2".into(),
        model: "m2".into(),
        context_window: None,
    }];
    let mut t = Turn::new(s, t0, 0);
    begun(&mut t, t0);
    let a = t.handle(Input::Tick, at(5_000), 5);
    assert_eq!(a[0], Action::AbortModel, "{a:?}");
    assert!(
        a.iter().any(|a| matches!(
            a,
            Action::Emit(EventBody::RunStatus {
                phase: ipc::control::RunStatusPhase::Fallback,
                ..
            })
        )),
        "{a:?}"
    );
    assert!(
        a.iter().any(|a| matches!(a, Action::CallModel(req) if req.choice.as_ref().is_some_and(|c| c.model == "m2"))),
        "{a:?}"
    );
    assert_eq!(t.next_deadline(), Some(at(10_000)), "a fresh 5 s");
    assert!(t.handle(Input::Tick, at(9_000), 6).is_empty());
    let a = t.handle(Input::Tick, at(10_000), 7);
    let Some(Action::Persist(f)) = a.get(1) else {
        panic!("{a:?}")
    };
    assert_eq!(f.status, RunStatus::Timeout);
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

fn appended(a: &[Action]) -> Vec<&NewMessage> {
    a.iter()
        .filter_map(|a| match a {
            Action::Append(m) => Some(&**m),
            _ => None,
        })
        .collect()
}

mod blocks;
mod steer;
mod tools;
