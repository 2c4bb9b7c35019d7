//! Block streaming (R-D5) in the turn: blocks follow the reply text they complete, a tool
//! call ends a response's text, indexes count the run's blocks, a stopped run's buffered
//! text never becomes a block, and a reasoning block leads its response's text.

use super::*;
use ipc::blocks::BlockStreaming;

fn blocks_spec() -> TurnSpec {
    TurnSpec {
        blocks: Some(BlockStreaming {
            min_chars: 5,
            max_chars: 100,
            ..BlockStreaming::default()
        }),
        ..spec(None)
    }
}

fn blocks_of(a: &[Action]) -> Vec<(u32, &str, bool)> {
    a.iter()
        .filter_map(|a| match a {
            Action::Emit(EventBody::Block {
                text,
                index,
                reasoning,
            }) => Some((*index, text.as_str(), *reasoning)),
            _ => None,
        })
        .collect()
}

fn delta(t: &mut Turn, d: &str, now: Instant) -> Vec<Action> {
    t.handle(Input::Model(LlmEvent::Delta(d.into())), now, 1)
}

#[test]
fn blocks_follow_the_text_and_a_tool_call_ends_it() {
    let t0 = Instant::now();
    let mut t = Turn::new(blocks_spec(), t0, 0);
    begun(&mut t, t0);
    let a = delta(&mut t, "First part.\n\nSecond", t0);
    // The assistant event first, then the block it completed.
    assert!(
        matches!(a[0], Action::Emit(EventBody::Assistant { .. })),
        "{a:?}"
    );
    assert_eq!(blocks_of(&a), [(0, "First part.", false)]);
    let a = t.handle(
        Input::Model(LlmEvent::ToolCallStart {
            index: 0,
            name: "ls".into(),
        }),
        t0,
        2,
    );
    assert_eq!(blocks_of(&a), [(1, "Second", false)]);
    let a = ask_for(&mut t, vec![tool_call("c1")], t0);
    assert!(blocks_of(&a).is_empty(), "nothing left: {a:?}");

    // Without block streaming, no block at all.
    let mut t = Turn::new(spec(None), t0, 0);
    begun(&mut t, t0);
    let a = delta(&mut t, "First part.\n\nSecond", t0);
    assert!(blocks_of(&a).is_empty());
}

#[test]
fn a_stopped_runs_buffered_text_is_no_block() {
    let t0 = Instant::now();
    let mut t = Turn::new(blocks_spec(), t0, 0);
    begun(&mut t, t0);
    assert!(blocks_of(&delta(&mut t, "Half a thought", t0)).is_empty());
    let a = t.handle(Input::Cancel(StopReason::Rpc), t0, 2);
    assert!(blocks_of(&a).is_empty(), "{a:?}");
    // The partial reply is recorded as OpenClaw records one: `aborted`, no error.
    let Some(Action::Persist(f)) = a.iter().find(|a| matches!(a, Action::Persist(_))) else {
        panic!("{a:?}")
    };
    let m = f.assistant.as_ref().expect("the partial reply is kept");
    assert_eq!(m.text, "Half a thought");
    assert_eq!(m.stop_reason.as_deref(), Some("aborted"));
    assert_eq!(m.error, None);
    assert_eq!(
        f.stop_reason.as_deref(),
        Some("rpc"),
        "the run's own stays the caller's"
    );
}

#[test]
fn reasoning_on_leads_the_text_with_a_block_of_its_own() {
    let t0 = Instant::now();
    let mut s = blocks_spec();
    s.reasoning = ReasoningMode::On;
    let mut t = Turn::new(s, t0, 0);
    begun(&mut t, t0);
    t.handle(
        Input::Model(LlmEvent::Reasoning("think first".into())),
        t0,
        1,
    );
    let a = delta(&mut t, "Answer.", t0);
    assert_eq!(blocks_of(&a), [(0, "think first", true)]);
    let a = t.handle(
        Input::Model(LlmEvent::Done(Terminal::reason("stop"))),
        t0,
        3,
    );
    assert_eq!(blocks_of(&a), [(1, "Answer.", false)]);
}
