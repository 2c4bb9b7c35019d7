//! The main loop's order towards the supervisor (R-B2): a run's terminal is in the outbox
//! before the session's next run can start.

use super::*;

fn submit(i: usize) -> ControlToWorker {
    ControlToWorker::Submit(SubmitRun::plain(
        &format!("r{i}"),
        "agent:main:s",
        &format!("m{i}"),
        0,
    ))
}

/// A burst on one session: every run's `Finished` leaves the worker before the next run's
/// `lifecycle start`, on the real main loop and drivers (the runs fail at once: no model).
/// The terminal used to go through a second queue and task, which the next run's events
/// could overtake when the machine was busy (issue 22).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_terminal_leaves_before_the_sessions_next_run_starts_r_b2() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, mut out) = crate::test_support::ctx(crate::test_support::spec(dir.path()), None);
    let (done_tx, mut done_rx) = mpsc::channel(64);
    let (diag_tx, _diag_rx) = mpsc::channel(8);
    let mut w = Worker::new(ctx, done_tx, diag_tx);
    // Within the spec's queue cap (16).
    const RUNS: usize = 12;
    for i in 0..RUNS {
        w.on_frame(submit(i));
    }
    let mut seen = Vec::new();
    let mut finished = 0;
    while finished < RUNS {
        let step = tokio::time::timeout(Duration::from_secs(10), async {
            tokio::select! {
                Some(done) = done_rx.recv() => w.on_done(done),
                Some(frame) = out.recv() => match frame {
                    WorkerToControl::Event(ev) => {
                        if let ipc::control::EventBody::Lifecycle(l) = &ev.body {
                            seen.push(format!("{} {:?}", ev.run_id, l.phase));
                        }
                    }
                    WorkerToControl::Finished(t) => {
                        finished += 1;
                        seen.push(format!("{} finished", t.run_id));
                    }
                    _ => {}
                },
            }
        })
        .await;
        assert!(step.is_ok(), "stalled: {seen:?}");
    }
    for i in 1..RUNS {
        let at = |what: String| seen.iter().position(|s| *s == what);
        let prev_done = at(format!("r{} finished", i - 1)).unwrap();
        let started = at(format!("r{i} Start")).unwrap_or(usize::MAX);
        assert!(
            prev_done < started,
            "r{i} started before r{} ended: {seen:?}",
            i - 1
        );
    }
}
