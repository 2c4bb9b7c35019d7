use super::*;
use ipc::control::{Lifecycle, RunEvent, RunStatus, RunTerminal};

fn lifecycle(run: &str, seq: u64, phase: Phase) -> WorkerToControl {
    WorkerToControl::Event(RunEvent {
        run_id: run.into(),
        seq,
        ts: seq,
        body: EventBody::Lifecycle(Lifecycle {
            phase,
            started_at: Some(1),
            ended_at: None,
            error: None,
            stop_reason: None,
            aborted: None,
            session_id: None,
            session_key: Some("agent:main:s".into()),
        }),
    })
}

/// A relay of agent `main` whose link events go to `tx`.
fn relay(tx: mpsc::Sender<LinkEvent>) -> Relay {
    Relay {
        metrics: crate::metrics::Metrics::new(),
        hub: EventHub::new(),
        agent_id: "main".into(),
        generation: 1,
        events: tx,
        runs: HashMap::new(),
        gates: SessionGates::new(),
        closing: false,
    }
}

fn finished(run: &str) -> WorkerToControl {
    let mut t = RunTerminal::without_work(run, RunStatus::Ok, 9, String::new(), None);
    t.error = None;
    WorkerToControl::Finished(t)
}

/// Three runs of one session finish back to back while the first one's outcome is still
/// being written; the link then ends. Every `Finished` still reaches the control actor,
/// in order (a held `Finished` replayed at the end used to close a new gate and lose the
/// frames behind it).
#[tokio::test]
async fn frames_held_for_a_session_all_go_on_when_the_link_ends() {
    let (tx, mut rx) = mpsc::channel(64);
    let mut relay = relay(tx);
    let mut gates = Vec::new();
    for run in ["k", "k1", "k2"] {
        for msg in [
            lifecycle(run, 1, Phase::Start),
            lifecycle(run, 2, Phase::End),
            finished(run),
        ] {
            assert!(relay.handle(msg).await);
        }
        // Keep the first gate closed, as a slow outcome write would.
        while let Ok(LinkEvent::Message { deferred, .. }) = rx.try_recv() {
            gates.extend(deferred.gate);
        }
    }
    assert_eq!(
        gates.len(),
        1,
        "only k got through; k1 and k2 wait behind its gate"
    );
    relay.closing = true;
    for msg in relay.gates.drain() {
        assert!(relay.handle(msg).await);
    }
    let mut done = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        if let LinkEvent::Message { msg, .. } = ev {
            if let WorkerToControl::Finished(t) = *msg {
                done.push(t.run_id);
            }
        }
    }
    assert_eq!(done, ["k1", "k2"]);
    drop(gates);
}

/// A run that started and then ended with no terminal event (its loop task failed in
/// the worker) still gets one: lifecycle `error`, numbered after what clients saw.
#[tokio::test]
async fn a_started_run_that_ends_silently_gets_the_fallback_terminal_r_b1() {
    let (tx, mut rx) = mpsc::channel(64);
    let mut relay = relay(tx);
    assert!(relay.handle(lifecycle("p", 1, Phase::Start)).await);
    let mut t = RunTerminal::without_work(
        "p",
        RunStatus::Error,
        9,
        "the agent loop failed: boom".into(),
        None,
    );
    t.started_at = Some(1);
    assert!(relay.handle(WorkerToControl::Finished(t)).await);
    let mut terminal = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        if let LinkEvent::Message { deferred, .. } = ev {
            terminal.extend(deferred.events);
        }
    }
    let texts: Vec<String> = terminal.iter().map(|d| d.json_for_tests()).collect();
    assert_eq!(texts.len(), 2, "{texts:?}");
    assert!(
        texts[0].contains("\"phase\":\"error\"") && texts[0].contains("\"seq\":2"),
        "{texts:?}"
    );
    assert!(
        texts[0].contains("the agent loop failed: boom"),
        "{texts:?}"
    );
    assert!(texts[1].contains("\"state\":\"error\""), "{texts:?}");
    // The control actor settles it once it has handled the terminal.
    assert!(relay.hub.has_started("p"));
}

/// A collected run's `Finished` (it never started on the wire) waits in its carrier's
/// session behind the previous run's gate, after the carrier's (review L3): it used to pass
/// the gate and reach clients before the terminals it follows.
#[tokio::test]
async fn a_carried_runs_end_waits_behind_its_carriers_session_gate() {
    let (tx, mut rx) = mpsc::channel(64);
    let mut relay = relay(tx);
    // Run p ends; its terminal is still being written (its gate stays closed).
    for msg in [
        lifecycle("p", 1, Phase::Start),
        lifecycle("p", 2, Phase::End),
        finished("p"),
    ] {
        assert!(relay.handle(msg).await);
    }
    let mut gates = Vec::new();
    while let Ok(LinkEvent::Message { deferred, .. }) = rx.try_recv() {
        gates.extend(deferred.gate);
    }
    assert_eq!(gates.len(), 1);
    // The collected turn c (carrying c2) runs and ends meanwhile.
    let mut carried = RunTerminal::without_work("c2", RunStatus::Ok, 9, String::new(), None);
    carried.error = None;
    carried.carried_by = Some("c".into());
    carried.session_key = Some("agent:main:s".into());
    for msg in [
        lifecycle("c", 1, Phase::Start),
        lifecycle("c", 2, Phase::End),
        finished("c"),
        WorkerToControl::Finished(carried),
    ] {
        assert!(relay.handle(msg).await);
    }
    assert!(
        rx.try_recv().is_err(),
        "all of the session waits behind p's gate"
    );
    drop(gates);
    let (_, held) = relay.gates.next_open().await.expect("the gate opens");
    let order: Vec<String> = held
        .iter()
        .filter_map(|m| match m {
            WorkerToControl::Finished(t) => Some(t.run_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["c", "c2"]);
}
