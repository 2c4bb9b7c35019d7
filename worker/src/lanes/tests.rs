use super::*;
use crate::agent::core::SteerMsg;

fn run(id: &str, mode: QueueMode, cap: u32, drop: QueueDrop) -> SubmitRun {
    SubmitRun {
        run_id: id.into(),
        session_key: "agent:main:s".into(),
        message: format!("message {id}"),
        extra_system_prompt: None,
        timeout_ms: None,
        accepted_at: 0,
        model: None,
        strict_model: false,
        thinking: None,
        reasoning: None,
        queue: Some(QueuePolicy {
            mode,
            debounce_ms: 500,
            cap,
            drop,
        }),
        attachments: Vec::new(),
        verbose: None,
        blocks: None,
        usage_footer: None,
        trace: None,
    }
}

fn followup(id: &str) -> SubmitRun {
    run(id, QueueMode::Followup, 20, QueueDrop::Summarize)
}

/// Starts the lane's next turn, which must be ready now.
fn start(lane: &mut Lane, now: Instant) -> Start {
    match lane.next(now) {
        Ok(Some(s)) => s,
        Ok(None) => panic!("nothing to start"),
        Err(at) => panic!("waits until {at:?}"),
    }
}

#[test]
fn an_idle_session_runs_at_once_whatever_the_mode_r_b3() {
    let t0 = Instant::now();
    for mode in QueueMode::ALL {
        let mut lane = Lane::default();
        assert!(lane
            .arrive(run("a", mode, 20, QueueDrop::Old), t0)
            .is_empty());
        assert_eq!(start(&mut lane, t0).run.run_id, "a");
    }
}

#[test]
fn followups_run_in_order_after_the_turn_r_b3() {
    let t0 = Instant::now();
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let _a = start(&mut lane, t0);
    lane.arrive(followup("b"), t0);
    lane.arrive(followup("c"), t0);
    assert!(lane.next(t0).unwrap().is_none(), "one turn at a time");
    assert!(lane.finished(&[]).is_empty());
    assert_eq!(start(&mut lane, t0).run.run_id, "b");
    lane.finished(&[]);
    assert_eq!(start(&mut lane, t0).run.run_id, "c");
}

#[test]
fn steer_hands_the_message_to_the_running_turn_and_takes_back_what_it_did_not_record_r_b3() {
    let t0 = Instant::now();
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let mut a = start(&mut lane, t0);
    lane.arrive(run("b", QueueMode::Steer, 20, QueueDrop::Old), t0);
    lane.arrive(run("c", QueueMode::Steer, 20, QueueDrop::Old), t0);
    assert_eq!(lane.waiting(), 0, "steered, not queued");
    let Ok(SteerMsg::Add(b)) = a.steer.try_recv() else {
        panic!("b was not handed over")
    };
    assert_eq!(b.text, "message b");
    // The turn recorded b only: b ends with its outcome, c runs after it.
    assert_eq!(lane.finished(&["b".into()]), vec!["b".to_owned()]);
    assert_eq!(start(&mut lane, t0).run.run_id, "c");
}

#[test]
fn steer_without_a_running_turn_waits_as_a_followup_r_b3() {
    let t0 = Instant::now();
    let mut lane = Lane::default();
    lane.arrive(run("a", QueueMode::Collect, 20, QueueDrop::Old), t0);
    lane.arrive(run("b", QueueMode::Steer, 20, QueueDrop::Old), t0);
    assert_eq!(lane.waiting(), 2);
}

#[test]
fn collect_coalesces_after_the_quiet_window_r_b3() {
    let t0 = Instant::now();
    let ms = |n| t0 + Duration::from_millis(n);
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let _a = start(&mut lane, t0);
    for (id, at) in [("b", 10), ("c", 200), ("d", 400)] {
        lane.arrive(run(id, QueueMode::Collect, 20, QueueDrop::Old), ms(at));
    }
    lane.finished(&[]);
    assert_eq!(
        lane.next(ms(450)).err(),
        Some(ms(900)),
        "quiet window after d"
    );
    let s = start(&mut lane, ms(900));
    assert_eq!(s.run.run_id, "b");
    for text in ["message b", "message c", "message d", "Queued #3"] {
        assert!(s.run.message.contains(text), "{}", s.run.message);
    }
    assert_eq!(lane.finished(&[]), vec!["c".to_owned(), "d".to_owned()]);
    assert!(lane.is_idle());
}

#[test]
fn interrupt_aborts_the_turn_and_runs_next_r_b3() {
    let t0 = Instant::now();
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let _a = start(&mut lane, t0);
    lane.arrive(followup("b"), t0);
    let e = lane.arrive(run("c", QueueMode::Interrupt, 20, QueueDrop::Old), t0);
    assert_eq!(e, vec![Effect::Interrupt { run_id: "a".into() }]);
    lane.finished(&[]);
    assert_eq!(
        start(&mut lane, t0).run.run_id,
        "c",
        "the newest runs first"
    );
    lane.finished(&[]);
    assert_eq!(start(&mut lane, t0).run.run_id, "b");
}

#[test]
fn a_full_queue_drops_by_policy_r_b3() {
    let t0 = Instant::now();
    let busy = |drop| {
        let mut lane = Lane::default();
        lane.arrive(followup("a"), t0);
        let s = start(&mut lane, t0);
        lane.arrive(run("b", QueueMode::Followup, 2, drop), t0);
        lane.arrive(run("c", QueueMode::Followup, 2, drop), t0);
        (lane, s)
    };
    // new: the arriving message ends as an error naming the policy.
    let (mut lane, _s) = busy(QueueDrop::New);
    let e = lane.arrive(run("d", QueueMode::Followup, 2, QueueDrop::New), t0);
    let [Effect::Dropped { run_id, error }] = e.as_slice() else {
        panic!("{e:?}")
    };
    assert_eq!(run_id, "d");
    assert!(
        error.contains("\"new\"") && error.contains("2 messages"),
        "{error}"
    );
    // old: the oldest waiting one does.
    let (mut lane, _s) = busy(QueueDrop::Old);
    let e = lane.arrive(run("d", QueueMode::Followup, 2, QueueDrop::Old), t0);
    assert!(
        matches!(&e[..], [Effect::Dropped { run_id, error }] if run_id == "b" && error.contains("\"old\""))
    );
    // summarize: the oldest is folded into the next turn, which carries it.
    let (mut lane, _s) = busy(QueueDrop::Summarize);
    assert!(lane
        .arrive(run("d", QueueMode::Followup, 2, QueueDrop::Summarize), t0)
        .is_empty());
    lane.finished(&[]);
    let s = start(&mut lane, t0);
    assert_eq!(s.run.run_id, "c");
    assert!(
        s.run.message.starts_with("[1 earlier message was dropped"),
        "{}",
        s.run.message
    );
    assert!(s.run.message.contains("- message b\n"));
    assert!(s.run.message.ends_with("message c"));
    assert_eq!(lane.finished(&[]), vec!["b".to_owned()]);
}

/// A cancelled steered or collected message leaves the turn alone: the turn goes on for
/// the others, and the cancelled one is neither carried nor run again.
#[test]
fn cancelling_a_carried_message_leaves_the_turn_to_the_others_r_b3() {
    let t0 = Instant::now();
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let mut a = start(&mut lane, t0);
    lane.arrive(run("b", QueueMode::Steer, 20, QueueDrop::Old), t0);
    assert_eq!(lane.cancel("b"), Found::Removed);
    assert!(matches!(a.steer.try_recv(), Ok(SteerMsg::Add(_))));
    assert!(matches!(a.steer.try_recv(), Ok(SteerMsg::Drop(id)) if id == "b"));
    assert!(lane.finished(&[]).is_empty(), "not carried");
    assert!(lane.is_idle(), "and not run again");
}

/// A summary left alone (the messages after it were cancelled) still runs as a turn: its
/// runs end (R-B3).
#[test]
fn a_summary_whose_followers_were_cancelled_still_runs() {
    let t0 = Instant::now();
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let _a = start(&mut lane, t0);
    lane.arrive(run("b", QueueMode::Followup, 1, QueueDrop::Summarize), t0);
    lane.arrive(run("c", QueueMode::Followup, 1, QueueDrop::Summarize), t0);
    assert_eq!(lane.cancel("c"), Found::Removed);
    lane.finished(&[]);
    let s = start(&mut lane, t0);
    assert_eq!(s.run.run_id, "b");
    assert!(s.run.message.contains("- message b"), "{}", s.run.message);
    assert!(lane.finished(&[]).is_empty());
    assert!(lane.is_idle());
}

/// An interrupting message the full queue refuses (`drop = "new"`) interrupts nothing.
#[test]
fn a_refused_interrupt_leaves_the_turn_alone() {
    let t0 = Instant::now();
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let _a = start(&mut lane, t0);
    lane.arrive(run("b", QueueMode::Followup, 1, QueueDrop::New), t0);
    let e = lane.arrive(run("c", QueueMode::Interrupt, 1, QueueDrop::New), t0);
    assert!(
        matches!(&e[..], [Effect::Dropped { run_id, .. }] if run_id == "c"),
        "{e:?}"
    );
}

#[test]
fn cancel_finds_waiting_and_carried_runs() {
    let t0 = Instant::now();
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let _a = start(&mut lane, t0);
    lane.arrive(followup("b"), t0);
    assert_eq!(lane.cancel("b"), Found::Removed);
    assert_eq!(
        lane.cancel("a"),
        Found::NotHere,
        "the running turn is cancelled by id"
    );
    assert_eq!(lane.cancel("zz"), Found::NotHere);
    lane.arrive(followup("c"), t0);
    assert_eq!(lane.take_waiting(), vec!["c".to_owned()]);
}

/// The order the lane runs its waiting messages in.
fn order(lane: &mut Lane, now: Instant) -> Vec<String> {
    let mut ids = Vec::new();
    while let Ok(Some(s)) = lane.next(now) {
        ids.push(s.run.run_id.clone());
        lane.finished(&[]);
    }
    ids
}

/// Waiting messages keep their arrival order (review M6): interrupting ones run first, the
/// older before the newer; a steered message the turn declined goes back to its arrival
/// place, not in front of older followups nor of an interrupting message.
#[test]
fn waiting_messages_keep_arrival_order_r_b3() {
    let t0 = Instant::now();
    let interrupt = |id| run(id, QueueMode::Interrupt, 20, QueueDrop::Old);
    let steer = |id| run(id, QueueMode::Steer, 20, QueueDrop::Old);

    // Two interrupts: the older runs first, both before the followup.
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let _a = start(&mut lane, t0);
    lane.arrive(followup("f"), t0);
    lane.arrive(interrupt("i1"), t0);
    lane.arrive(interrupt("i2"), t0);
    lane.finished(&[]);
    assert_eq!(order(&mut lane, t0), ["i1", "i2", "f"]);

    // A followup, then a steered message the turn declines: the followup first.
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let _a = start(&mut lane, t0);
    lane.arrive(followup("f1"), t0);
    lane.arrive(steer("s2"), t0);
    lane.arrive(followup("f3"), t0);
    lane.finished(&[]);
    assert_eq!(order(&mut lane, t0), ["f1", "s2", "f3"]);

    // Steered, then an interrupt: the interrupting message runs next, then the declined one.
    let mut lane = Lane::default();
    lane.arrive(followup("a"), t0);
    let _a = start(&mut lane, t0);
    lane.arrive(steer("s"), t0);
    let fx = lane.arrive(interrupt("i"), t0);
    assert_eq!(fx, [Effect::Interrupt { run_id: "a".into() }]);
    lane.finished(&[]);
    assert_eq!(order(&mut lane, t0), ["i", "s"]);
}
