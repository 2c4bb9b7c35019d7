//! Room for queued messages (issues 23 and 38): the limits per agent and in all, charges
//! given back, lapsed or settled, and in cluster mode the front door's charges for runs
//! elsewhere and the owner's charge as a run is handed over.

use super::*;
use crate::control::queue_room as room;

fn reserve(
    h: &mut Harness,
    ms: u64,
    run_id: &str,
    session: &str,
    bytes: u64,
) -> Result<bool, QueueFull> {
    reserve_held(h, ms, run_id, session, bytes, room::Hold::Dispatch)
}

fn reserve_held(
    h: &mut Harness,
    ms: u64,
    run_id: &str,
    session: &str,
    bytes: u64,
    hold: room::Hold,
) -> Result<bool, QueueFull> {
    let (reply, mut rx) = oneshot::channel();
    let room = Reserve {
        run_id: run_id.into(),
        agent_id: "main".into(),
        session_key: session.into(),
        bytes,
        hold,
    };
    assert!(h.at(ms, Command::Reserve { room, reply }).is_empty());
    rx.try_recv().unwrap()
}

/// Issue 23 item 3: messages waiting for busy sessions are bounded per agent and in all, in
/// number and bytes; a session's first run does not count; room comes back when a
/// reservation is given back, its run settles, or it lapses.
#[test]
fn queued_messages_are_bounded_per_agent_and_in_all_issue_23() {
    let mut h = Harness::new(&format!(
        "{CONFIG}[messages.queue]\nmax_queued_per_agent = 2\nmax_queued_bytes_per_agent = 1000\nmax_queued_total = 3\nmax_queued_bytes_total = 1500\n"
    ));
    let s = "agent:main:s";
    assert_eq!(reserve(&mut h, 0, "r1", s, 900), Ok(true));
    let (_, mut done) = h.dispatch(0, "r1");
    assert_eq!(reserve(&mut h, 1, "r1", s, 900), Ok(false), "a retry");
    // r1 runs: the next ones on `s` wait.
    let too_big = reserve(&mut h, 2, "big", s, 1001).unwrap_err();
    assert!(
        too_big.0.contains("max_queued_bytes_per_agent"),
        "{too_big:?}"
    );
    assert_eq!(reserve(&mut h, 3, "r2", s, 600), Ok(true));
    let bytes = reserve(&mut h, 4, "r3", s, 500).unwrap_err();
    assert!(
        bytes.0.contains("max_queued_bytes_per_agent is 1000"),
        "{bytes:?}"
    );
    assert_eq!(reserve(&mut h, 5, "r3", s, 100), Ok(true));
    let count = reserve(&mut h, 6, "r4", s, 1).unwrap_err();
    assert!(count.0.contains("max_queued_per_agent is 2"), "{count:?}");
    assert_eq!(
        h.core.queued_usage(Some("main")),
        room::Usage {
            messages: 2,
            bytes: 700
        }
    );
    // Another session's first message does not wait: it is not counted.
    assert_eq!(reserve(&mut h, 7, "t1", "agent:main:t", 900), Ok(true));
    assert_eq!(h.core.queued_usage(None).messages, 2);
    // A reservation given back makes room.
    h.at(
        8,
        Command::Unreserve {
            run_id: "r3".into(),
        },
    );
    assert_eq!(reserve(&mut h, 9, "r4", s, 1), Ok(true));
    // A settled run's charge goes (r1 was not queued: usage is unchanged by it).
    let _link = h.ready(10, 1, 42);
    h.finish_ok(100, "r1");
    assert_eq!(done.try_recv().unwrap().status, RunStatus::Ok);
    h.tick(200);
    assert!(!h.core.room.holds("r1"));
    // Reservations whose runs never came lapse.
    h.tick(60_010);
    assert_eq!(h.core.queued_usage(None), room::Usage::default());
    assert!(h.core.room.is_empty());
}

/// Issue 38: a cluster front door holds the charges of runs its agents' owners run
/// elsewhere until their outcomes come back: the session's next messages count as queued
/// behind them, and the room does not lapse with the reservation TTL; given back, it goes.
#[test]
fn charges_for_runs_elsewhere_hold_until_given_back_issue_38() {
    let mut h = Harness::new(&format!(
        "{CONFIG}[messages.queue]\nmax_queued_per_agent = 1\n"
    ));
    let s = "agent:main:s";
    let outcome = room::Hold::Outcome;
    assert_eq!(reserve_held(&mut h, 0, "e1", s, 10, outcome), Ok(true));
    assert_eq!(reserve_held(&mut h, 1, "e2", s, 10, outcome), Ok(true));
    let full = reserve_held(&mut h, 2, "e3", s, 10, outcome).unwrap_err();
    assert!(full.0.contains("max_queued_per_agent is 1"), "{full:?}");
    // Long past the reservation TTL, the runs elsewhere still hold their room.
    h.tick(600_000);
    assert!(h.core.room.holds("e1") && h.core.room.holds("e2"));
    assert_eq!(h.core.queued_usage(Some("main")).messages, 1);
    // Their outcomes came: given back, the room is free.
    for run_id in ["e1", "e2"] {
        let run_id = run_id.into();
        h.at(600_001, Command::Unreserve { run_id });
    }
    assert!(h.core.room.is_empty());
    assert_eq!(
        reserve_held(&mut h, 600_002, "e3", s, 10, outcome),
        Ok(true)
    );
    // One whose give-back never came lapses at last.
    h.tick(600_002 + room::ELSEWHERE_TTL.as_millis() as u64);
    assert!(h.core.room.is_empty());
}

/// A dispatch that charges its room as it is handed over (cluster mode's owner).
fn charged(run_id: &str, session: &str, wall: u64) -> (Command, oneshot::Receiver<Arc<Outcome>>) {
    let (done, rx) = oneshot::channel();
    let charge = Reserve {
        run_id: run_id.into(),
        agent_id: "main".into(),
        session_key: session.into(),
        bytes: 2,
        hold: room::Hold::Dispatch,
    };
    let d = Dispatch {
        run: SubmitRun::plain(run_id, session, "hi", wall),
        agent_id: "main".into(),
        done,
        arrival: Arrival::ChargeAndRun(charge),
    };
    (Command::Dispatch(Box::new(d)), rx)
}

/// Issue 38: an owner charges a run the cluster accepted as it is handed over; without
/// room the run ends `error`, durably and once, saying a new key is needed (its front
/// door acknowledged it already, so it cannot be refused). What this gateway only sent on
/// (`Hold::Outcome`) does not count against what it holds as an owner.
#[test]
fn an_owner_without_room_ends_the_run_issue_38() {
    let mut h = Harness::new(&format!(
        "{CONFIG}[messages.queue]\nmax_queued_per_agent = 1\n"
    ));
    let s = "agent:main:s";
    let _link = h.ready(0, 1, 42);
    let sent_on = room::Hold::Outcome;
    // Sent on: another session's message waits behind its first, at another gateway.
    let o = "agent:main:o";
    assert_eq!(reserve_held(&mut h, 1, "out1", o, 10, sent_on), Ok(true));
    assert_eq!(reserve_held(&mut h, 1, "out2", o, 10, sent_on), Ok(true));
    let (first, _) = charged("r1", s, h.wall0 + 2);
    assert!(
        persisted(&h.at(2, first)).is_empty(),
        "the session's first run"
    );
    let (second, _) = charged("r2", s, h.wall0 + 3);
    assert!(
        persisted(&h.at(3, second)).is_empty(),
        "one waits: out2 waits elsewhere, it is not held here"
    );
    let (third, mut done) = charged("r3", s, h.wall0 + 4);
    let mut ended = persisted(&h.at(4, third));
    assert_eq!(ended.len(), 1, "no room: r3 ends at once");
    let (run_id, outcome) = ended.remove(0);
    assert_eq!(run_id, "r3");
    assert_eq!(outcome.status, RunStatus::Error);
    let why = outcome.error.clone().unwrap_or_default();
    assert!(why.contains("max_queued_per_agent is 1"), "{why}");
    assert!(
        why.ends_with("send the message again with a new idempotencyKey"),
        "{why}"
    );
    h.at(5, Command::Persisted { run_id, outcome });
    assert_eq!(done.try_recv().map(|o| o.status), Ok(RunStatus::Error));
    assert!(!h.core.room.holds("r3"));
}

/// Issue 38: a run the cluster accepted but that must not run (an owner that was lost
/// started it) is ended by the core as any run ends: recorded `error` with its reason, its
/// waiters answered, and never sent to the worker.
#[test]
fn a_run_arriving_ended_is_recorded_and_never_sent_issue_38() {
    let mut h = Harness::new(CONFIG);
    let mut link = h.ready(0, 1, 42);
    let (done, mut rx) = oneshot::channel();
    let why = "the gateway running this run (h1, epoch 7) was lost";
    let d = Dispatch {
        run: SubmitRun::plain("lost", "agent:main:s", "hi", h.wall0 + 1),
        agent_id: "main".into(),
        done,
        arrival: Arrival::End(why.into()),
    };
    let mut ended = persisted(&h.at(1, Command::Dispatch(Box::new(d))));
    assert_eq!(ended.len(), 1);
    let (run_id, outcome) = ended.remove(0);
    assert_eq!(
        (run_id.as_str(), outcome.status),
        ("lost", RunStatus::Error)
    );
    assert_eq!(outcome.error.as_deref(), Some(why));
    h.at(2, Command::Persisted { run_id, outcome });
    assert_eq!(rx.try_recv().map(|o| o.status), Ok(RunStatus::Error));
    assert!(
        !std::iter::from_fn(|| link.try_recv().ok())
            .any(|f| matches!(f, ControlToWorker::Submit(_))),
        "nothing went to the worker"
    );
}

/// Issue 23 item 3: the global limit holds over agents' sessions.
#[test]
fn the_total_limit_counts_every_session_issue_23() {
    let mut h = Harness::new(&format!("{CONFIG}[messages.queue]\nmax_queued_total = 3\n"));
    for i in 0..3 {
        let s = format!("agent:main:s{i}");
        assert_eq!(reserve(&mut h, 0, &format!("first{i}"), &s, 10), Ok(true));
        assert_eq!(reserve(&mut h, 0, &format!("next{i}"), &s, 10), Ok(true));
    }
    let full = reserve(&mut h, 0, "more", "agent:main:s0", 10).unwrap_err();
    assert!(full.0.contains("max_queued_total is 3"), "{full:?}");
}
