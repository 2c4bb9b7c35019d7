//! Retirement (issue 24): idle workers retire after `workers.idle_exit_seconds`, busy ones
//! never do, `workers.max_live` retires the least recently used idle ones, and the heap is
//! trimmed after retirements and after a burst of runs expires.

use super::*;

/// Issue 24: the outcomes of a burst of runs are kept a minute; as they expire the heap is
/// trimmed 2 s after the table gave back most of its room (once or twice as it empties,
/// never per run), and nothing asks for a trim before.
#[test]
fn when_a_burst_of_finished_runs_expires_the_heap_is_trimmed_issue_24() {
    let trims = |e: &[Effect]| e.iter().filter(|e| matches!(e, Effect::TrimHeap)).count();
    let mut h = Harness::new(CONFIG);
    let (_, _done) = h.dispatch(0, "r0");
    let mut link = h.ready(10, 1, 42);
    h.finish_ok(20, "r0");
    // 300 runs over 30 s.
    for i in 1..300u64 {
        let ms = 100 * i;
        let _ = h.dispatch(ms, &format!("r{i}"));
        // The worker reads what it is sent.
        while link.try_recv().is_ok() {}
        h.finish_ok(ms + 1, &format!("r{i}"));
    }
    let mut at = Vec::new();
    for s in 31..=100u64 {
        if trims(&h.tick(s * 1000)) > 0 {
            at.push(s);
        }
    }
    assert!(
        (1..=2).contains(&at.len()),
        "a trim or two for the burst: {at:?}"
    );
    assert!(at[0] > 62, "after outcomes expired and 2 s more: {at:?}");
}

/// Issue 24: a worker with nothing to do for `idle_exit_seconds` drains and exits; the agent
/// shows `idle`; its next run starts a new worker; none of it counts as a crash or a restart.
#[test]
fn an_idle_worker_retires_and_the_next_run_starts_a_new_one_uncounted() {
    let mut h = Harness::new(&format!("{CONFIG}idle_exit_seconds = 5\n"));
    h.dispatch(0, "r1");
    let mut link = h.ready(10, 1, 42);
    h.finish_ok(100, "r1");
    // Idle from the first tick that sees it so; heartbeats keep it alive meanwhile.
    h.tick(1_000);
    h.message(2_000, 1, WorkerToControl::Pong { nonce: 1 });
    h.tick(2_000);
    h.message(4_000, 1, WorkerToControl::Pong { nonce: 2 });
    h.tick(5_999);
    assert_eq!(h.state(), "ready");
    h.tick(6_000);
    assert_eq!(h.state(), "draining");
    let mut drained = false;
    while let Ok(f) = link.try_recv() {
        drained |= matches!(f, ControlToWorker::Drain { .. });
    }
    assert!(drained, "the worker is asked to drain");
    h.exited(6_050, 1, "exited with status 0");
    assert_eq!(h.state(), "idle");
    assert!(h.failed.borrow().is_empty());
    // The heap is trimmed once, TRIM_AFTER (2 s) after the retirement (issue 24 item 2).
    assert_eq!(
        h.core.next_wake(),
        Some(h.start + Duration::from_millis(8_050))
    );
    let (effects, _) = h.dispatch(7_000, "r2");
    assert_eq!(
        spawned(&effects),
        Some(2),
        "the next run starts a new worker"
    );
    let _link = h.ready(7_010, 2, 43);
    let status = &h.core.worker_statuses()[0];
    assert_eq!(status.restarts, 0, "a retirement is not a restart");
    assert_eq!(h.core.workers["main"].crashes.len(), 0, "nor a crash");
    let trims = |e: &[Effect]| e.iter().filter(|e| matches!(e, Effect::TrimHeap)).count();
    assert_eq!(trims(&h.tick(8_049)), 0);
    assert_eq!(trims(&h.tick(8_050)), 1);
    assert_eq!(trims(&h.tick(9_000)), 0, "once per retirement burst");
}

/// Issue 24: past `workers.max_live`, a worker that starts makes the least recently used
/// idle worker retire at once (a retirement, not a restart); a worker with a run is never
/// retired for room, and the count comes back within the cap on the tick after one idles.
#[test]
fn past_max_live_the_least_recently_used_idle_worker_retires_issue_24() {
    let text = format!(
        "{CONFIG}max_live = 2\nidle_exit_seconds = 0\n[agents.list.main]\n[agents.list.b]\n[agents.list.c]\n"
    );
    let mut h = Harness::new(&text);
    let state = |h: &Harness, agent: &str| {
        h.core
            .worker_statuses()
            .into_iter()
            .find(|w| w.agent_id == agent)
            .map(|w| w.state)
            .unwrap_or_default()
    };
    let drained = |link: &mut mpsc::Receiver<ControlToWorker>| {
        let mut drained = false;
        while let Ok(f) = link.try_recv() {
            drained |= matches!(f, ControlToWorker::Drain { .. });
        }
        drained
    };
    // main, then b, then main again: b is now the least recently used.
    let _ = h.dispatch(0, "r1");
    let mut main = h.ready(10, 1, 41);
    h.finish_ok(100, "r1");
    h.agent = "b";
    let _ = h.dispatch(200, "r2");
    let mut b = h.ready(210, 1, 42);
    h.finish_ok(300, "r2");
    h.agent = "main";
    let _ = h.dispatch(400, "r3");
    h.finish_ok(410, "r3");
    // c starts: three would run, so b retires.
    h.agent = "c";
    let (effects, _) = h.dispatch(600, "r4");
    assert_eq!(spawned(&effects), Some(1), "c starts");
    assert_eq!(state(&h, "b"), "draining");
    assert_eq!(state(&h, "main"), "ready");
    assert!(drained(&mut b) && !drained(&mut main));
    h.agent = "b";
    h.exited(650, 1, "exited with status 0");
    assert_eq!(state(&h, "b"), "idle", "retired");
    // main busy, c starting: b starts again over the cap, and nobody is retired for it.
    h.agent = "main";
    let _ = h.dispatch(700, "r5");
    h.agent = "b";
    let (effects, _) = h.dispatch(800, "r6");
    assert_eq!(spawned(&effects), Some(2), "b starts again");
    assert_eq!(state(&h, "main"), "ready", "a worker with a run stays");
    assert!(!drained(&mut main));
    // c runs r4 and has nothing left to do: the next tick retires it.
    h.agent = "c";
    let _c = h.ready(810, 1, 43);
    h.finish_ok(900, "r4");
    h.tick(1_000);
    assert_eq!(state(&h, "c"), "draining");
    assert_eq!(state(&h, "main"), "ready");
    let b_status = h
        .core
        .worker_statuses()
        .into_iter()
        .find(|w| w.agent_id == "b")
        .map(|w| w.restarts);
    assert_eq!(b_status, Some(0), "a retirement for room is not a restart");
}

/// A worker with a run in flight, a pending approval or an open session operation never
/// retires; a run that arrives while one retires waits and starts the next worker.
#[test]
fn a_busy_worker_never_retires_and_a_run_during_retirement_waits_for_the_next() {
    let mut h = Harness::new(&format!("{CONFIG}idle_exit_seconds = 1\n"));
    h.dispatch(0, "r1");
    let _link = h.ready(10, 1, 42);
    let w = h.wall0;
    h.message(20, 1, approval("appr-0001-long", w + 20, w + 600_000));
    for t in (500..=20_000).step_by(500) {
        h.message(t, 1, WorkerToControl::Pong { nonce: t });
        h.tick(t);
    }
    assert_eq!(
        h.state(),
        "ready",
        "a run in flight and an approval keep it"
    );
    // The run ends; an open session operation still keeps it.
    h.finish_ok(20_100, "r1");
    let (reply, _answer) = oneshot::channel();
    let op = Command::SessionOp {
        agent_id: "main".into(),
        op: ipc::control::SessionOp::Lanes,
        reply,
    };
    h.at(20_200, op);
    for t in (20_500..=30_000).step_by(500) {
        h.message(t, 1, WorkerToControl::Pong { nonce: t });
        h.tick(t);
    }
    assert_eq!(h.state(), "ready", "an open session operation keeps it");
    // Answered: now idle, it retires after a second.
    h.message(
        30_100,
        1,
        WorkerToControl::SessionDone {
            op_id: 1,
            reply: ipc::control::SessionReply::Lanes(ipc::session_ops::LanesReply {
                lanes: Vec::new(),
                queued: 0,
                active: 0,
            }),
        },
    );
    h.tick(30_200);
    h.message(31_000, 1, WorkerToControl::Pong { nonce: 9 });
    h.tick(31_300);
    assert_eq!(h.state(), "draining");
    // A run arriving now waits for the exit, then starts the next worker at once.
    let (effects, _) = h.dispatch(31_400, "r2");
    assert_eq!(spawned(&effects), None);
    let effects = h.exited(31_500, 1, "exited with status 0");
    assert_eq!(spawned(&effects), Some(2));
}
