use super::*;
use std::collections::VecDeque;

use futures_util::FutureExt;
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
            carried_by: None,
            reply: None,
            guarded: Vec::new(),
            footer: None,
        }),
    })
}

/// The run event of [`lifecycle`].
fn lifecycle_event(run: &str, seq: u64, phase: Phase) -> RunEvent {
    match lifecycle(run, seq, phase) {
        WorkerToControl::Event(ev) => ev,
        other => panic!("not an event: {other:?}"),
    }
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
        fence: Arc::default(),
        gates: SessionGates::new(),
        closing: false,
        journal: None,
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
        while let Ok(ev) = rx.try_recv() {
            if let LinkEvent::Finished { gate, .. } = ev {
                gates.extend(gate);
            }
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
        if let LinkEvent::Finished { terminal, .. } = ev {
            done.push(terminal.run_id);
        }
    }
    assert_eq!(done, ["k1", "k2"]);
    drop(gates);
}

/// A run that started and then ended with no terminal event (its loop task failed in the
/// worker): the link decides nothing, it reports what clients saw (up to `seq` 1, nothing
/// held) for the control core to tell the fallback terminal after.
#[tokio::test]
async fn a_started_run_that_ends_silently_is_reported_with_what_clients_saw_r_b1() {
    let (tx, mut rx) = mpsc::channel(64);
    let mut relay = relay(tx);
    let (mut clients, _) = relay.hub.subscribe();
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
    let Ok(LinkEvent::Finished { seen, gate, .. }) = rx.try_recv() else {
        panic!("the run's Finished goes to the core")
    };
    let seen = seen.expect("it started on the wire");
    assert_eq!((seen.last_seq, seen.started_at), (1, Some(1)));
    assert!(seen.terminal.is_empty() && !seen.taken_in);
    assert!(gate.is_some(), "its session waits for the core's terminal");
    let published: Vec<String> = std::iter::from_fn(|| clients.try_recv().ok())
        .map(|e| e.payload.to_string())
        .collect();
    assert_eq!(published.len(), 1, "only its start: {published:?}");
}

/// An end the control core decides while a run streams (through the link's fence) is
/// numbered after what clients saw; nothing the worker sends for the run afterwards is
/// published, while its `Finished` still goes to the core (R-A5, R-D3).
#[tokio::test]
async fn nothing_of_a_run_follows_an_end_through_the_fence() {
    let (tx, mut rx) = mpsc::channel(64);
    let mut relay = relay(tx);
    let (mut clients, _) = relay.hub.subscribe();
    let frames = run_frames("r");
    for msg in frames[..2].iter().cloned() {
        assert!(relay.handle(msg).await);
    }
    let mut next = None;
    assert!(relay.fence.end_now(&relay.hub, "r", |t| {
        next = Some(t.next_seq());
        Vec::new()
    }));
    assert_eq!(next, Some(3), "after the delta at seq 2");
    for msg in frames[2..].iter().cloned() {
        assert!(relay.handle(msg).await);
    }
    let published = std::iter::from_fn(|| clients.try_recv().ok()).count();
    assert_eq!(
        published, 3,
        "start and the delta pair, nothing after the end"
    );
    let reported = std::iter::from_fn(|| rx.try_recv().ok())
        .any(|e| matches!(e, LinkEvent::Finished { ref terminal, .. } if terminal.run_id == "r"));
    assert!(reported);
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
    while let Ok(ev) = rx.try_recv() {
        if let LinkEvent::Finished { gate, .. } = ev {
            gates.extend(gate);
        }
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

/// What clients hear of one run, as the worker tells it: start, a reply delta, end, then its
/// `Finished`.
fn run_frames(run: &str) -> Vec<WorkerToControl> {
    let delta = WorkerToControl::Event(RunEvent {
        run_id: run.into(),
        seq: 2,
        ts: 2,
        body: EventBody::Assistant {
            delta: format!("reply of {run}"),
        },
    });
    vec![
        lifecycle(run, 1, Phase::Start),
        delta,
        lifecycle(run, 3, Phase::End),
        finished(run),
    ]
}

/// Every merge of `a` and `b` that keeps each one's order.
fn merges<T: Clone>(a: &[T], b: &[T]) -> Vec<Vec<T>> {
    match (a.split_first(), b.split_first()) {
        (None, _) => vec![b.to_vec()],
        (_, None) => vec![a.to_vec()],
        (Some((x, rest_a)), Some((y, rest_b))) => {
            let mut all = Vec::new();
            for mut m in merges(rest_a, b) {
                m.insert(0, x.clone());
                all.push(m);
            }
            for mut m in merges(a, rest_b) {
                m.insert(0, y.clone());
                all.push(m);
            }
            all
        }
    }
}

/// A relay of one link with the control actor's part played in the test: it publishes a
/// run's terminal events `delay` frames after the link handed them over (`None`: only after
/// the last frame), as a slow gateway db write would.
struct Harness {
    relay: Relay,
    rx: mpsc::Receiver<LinkEvent>,
    delay: Option<usize>,
    pending: VecDeque<(
        usize,
        Vec<Deferred>,
        Option<tokio::sync::oneshot::Sender<()>>,
    )>,
    step: usize,
}

impl Harness {
    /// Hands `msg` to the relay, then lets the control actor and the relay's loop do what
    /// is due.
    async fn feed(&mut self, msg: WorkerToControl) {
        assert!(self.relay.handle(msg).await);
        self.step += 1;
        self.settle(false).await;
    }

    /// Runs the control actor's publications that are due (all of them at `end`) and the
    /// frames their gates release, until nothing moves.
    async fn settle(&mut self, end: bool) {
        loop {
            while let Ok(ev) = self.rx.try_recv() {
                if let LinkEvent::Finished { seen, gate, .. } = ev {
                    // As the core decides for a run that told its own terminal.
                    let events = seen.map(|s| s.terminal).unwrap_or_default();
                    let due = self.delay.map_or(usize::MAX, |d| self.step + d);
                    self.pending.push_back((due, events, gate));
                }
            }
            let mut moved = false;
            while self
                .pending
                .front()
                .is_some_and(|(due, _, _)| end || *due <= self.step)
            {
                let Some((_, events, gate)) = self.pending.pop_front() else {
                    break;
                };
                // As `Control::persisted`: publish, then let the gate go.
                self.relay.hub.publish_all(&events);
                drop(gate);
                moved = true;
            }
            while self.relay.gates.waiting() {
                let Some(Some((_, held))) = self.relay.gates.next_open().now_or_never() else {
                    break;
                };
                for m in held {
                    assert!(self.relay.handle(m).await);
                }
                moved = true;
            }
            if !moved {
                break;
            }
        }
    }
}

/// Every order in which a link can receive two runs of one session (each run's frames in
/// their own order, the second starting after the first's terminal event, as the worker's
/// lane runs them), with the control actor publishing terminal events at once, a little
/// later or last: clients see all of the first run, then the second (R-B2). Before the gate
/// closed at the terminal event, the next run's `start` could reach clients before the first
/// run's `end` whenever it arrived ahead of the first run's `Finished` (issue 22).
#[tokio::test]
async fn every_interleaving_of_two_runs_of_a_session_reaches_clients_in_order_r_b2() {
    let (k, k1) = (run_frames("k"), run_frames("k1"));
    let orders: Vec<Vec<WorkerToControl>> = merges(&k, &k1)
        .into_iter()
        .filter(|m| {
            let pos = |want: &WorkerToControl| {
                m.iter()
                    .position(|f| format!("{f:?}") == format!("{want:?}"))
                    .unwrap()
            };
            // The lane starts k1 only after k's loop ended.
            pos(&k1[0]) > pos(&k[2])
        })
        .collect();
    assert_eq!(
        orders.len(),
        5,
        "k's Finished at each place among k1's frames"
    );
    for (i, order) in orders.into_iter().enumerate() {
        for delay in [Some(0), Some(1), Some(3), None] {
            let (tx, rx) = mpsc::channel(64);
            let relay = relay(tx);
            let (mut clients, _) = relay.hub.subscribe();
            let mut h = Harness {
                relay,
                rx,
                delay,
                pending: VecDeque::new(),
                step: 0,
            };
            for msg in order.clone() {
                h.feed(msg).await;
            }
            h.settle(true).await;
            let mut seen = Vec::new();
            while let Ok(ev) = clients.try_recv() {
                let v: serde_json::Value = serde_json::from_str(&ev.payload).unwrap();
                let what = match ev.event {
                    "agent" => v["data"]["phase"].as_str().unwrap_or("delta").to_owned(),
                    _ => format!("chat {}", v["state"].as_str().unwrap_or("")),
                };
                seen.push(format!("{} {what}", v["runId"].as_str().unwrap()));
            }
            let want = [
                "k start",
                "k delta",
                "chat delta",
                "k end",
                "chat final",
                "k1 start",
                "k1 delta",
                "chat delta",
                "k1 end",
                "chat final",
            ];
            let got: Vec<String> = seen
                .iter()
                .map(|s| {
                    s.replacen("k1 chat", "chat", 1)
                        .replacen("k chat", "chat", 1)
                })
                .collect();
            let runs: Vec<&str> = seen.iter().map(|s| s.split(' ').next().unwrap()).collect();
            let first_k1 = runs.iter().position(|r| *r == "k1").unwrap();
            assert!(
                runs[first_k1..].iter().all(|r| *r == "k1"),
                "order {i}, delay {delay:?}: runs overlap on the wire: {seen:?}"
            );
            assert_eq!(got, want, "order {i}, delay {delay:?}");
        }
    }
}

/// Issue 22 item 5: a `run_status` whose phase this build does not know (a newer worker's)
/// reaches no client: clients are never told a phase the gateway cannot name, nor a
/// `starting_model` chat status it may not mean. A known phase gives the agent event and the
/// chat status, with a reason this build does not know shown as `unknown`.
#[test]
fn a_run_status_of_an_unknown_phase_reaches_no_client() {
    let hub = EventHub::new();
    let mut runs = HashMap::new();
    let mut out = Vec::new();
    let WorkerToControl::Event(start) = lifecycle("r1", 1, Phase::Start) else {
        panic!("not an event")
    };
    project(&hub, "main", &mut runs, &start, &mut out);
    let status = |seq, phase| RunEvent {
        run_id: "r1".into(),
        seq,
        ts: seq,
        body: EventBody::RunStatus {
            phase,
            attempt: 2,
            max_attempts: 10,
            reason: ipc::control::RetryReason::Unknown,
        },
    };
    out.clear();
    project(
        &hub,
        "main",
        &mut runs,
        &status(2, RunStatusPhase::Retrying),
        &mut out,
    );
    assert_eq!(out.len(), 2, "{out:?}");
    assert!(
        format!("{out:?}").contains(r#"\"reason\":\"unknown\""#),
        "{out:?}"
    );
    out.clear();
    project(
        &hub,
        "main",
        &mut runs,
        &status(3, RunStatusPhase::Unknown),
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
}

/// What `project` does with a tool event and a terminal: the tool event goes only to the
/// clients that asked for tool events, and the terminal lifecycle (its agent and chat events)
/// is held in the run's state, published by no one until the outcome is recorded.
#[test]
fn a_tool_event_is_for_tool_clients_and_the_terminal_is_held() {
    let hub = EventHub::new();
    let mut runs = HashMap::new();
    let mut out = Vec::new();
    let event = |msg| match msg {
        WorkerToControl::Event(ev) => ev,
        other => panic!("not an event: {other:?}"),
    };
    project(
        &hub,
        "main",
        &mut runs,
        &event(lifecycle("r1", 1, Phase::Start)),
        &mut out,
    );
    out.clear();
    let tool = RunEvent {
        run_id: "r1".into(),
        seq: 2,
        ts: 2,
        body: EventBody::Tool {
            phase: ipc::control::ToolPhase::Start,
            tool_call_id: "c1".into(),
            name: "read".into(),
            args_json: Some("{}".into()),
            result_json: None,
            is_error: None,
        },
    };
    project(&hub, "main", &mut runs, &tool, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    assert!(
        format!("{out:?}").contains(to_clients::TOOL_EVENTS_CAP),
        "{out:?}"
    );
    out.clear();
    project(
        &hub,
        "main",
        &mut runs,
        &event(lifecycle("r1", 3, Phase::End)),
        &mut out,
    );
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(runs["r1"].terminal.len(), 2);
}

/// Found by the hostile review of R-D2: a model that puts a byte of reasoning beside each
/// byte of reply text made each delta force the other stream's held text out, so every
/// stream (the chat projection too) carried each delta with the whole text so far, the
/// square of the reply. Now a live delta waits with what is held: a thousand interleaved
/// deltas within one pace make a handful of events, and the flush before the next other
/// event sends all of it in `seq` order, adding up to the text.
#[test]
fn interleaved_reasoning_and_text_stay_paced_r_d2() {
    let hub = EventHub::new();
    let mut runs = HashMap::new();
    let mut out = Vec::new();
    project(
        &hub,
        "main",
        &mut runs,
        &lifecycle_event("r1", 1, Phase::Start),
        &mut out,
    );
    out.clear();
    let mut seq = 1;
    for _ in 0..500 {
        for body in [
            EventBody::Thinking { delta: "r".into() },
            EventBody::Assistant { delta: "a".into() },
        ] {
            seq += 1;
            let ev = RunEvent {
                run_id: "r1".into(),
                seq,
                ts: seq,
                body,
            };
            project(&hub, "main", &mut runs, &ev, &mut out);
        }
    }
    assert!(
        out.len() <= 12,
        "{} events for 1000 interleaved deltas",
        out.len()
    );
    // The next other event flushes what is held, in seq order.
    seq += 1;
    project(
        &hub,
        "main",
        &mut runs,
        &lifecycle_event("r1", seq, Phase::Finishing),
        &mut out,
    );
    let events: Vec<serde_json::Value> = out
        .iter()
        .map(|d| serde_json::from_str(&d.json_for_tests()).unwrap())
        .collect();
    let seqs: Vec<u64> = events.iter().filter_map(|e| e["seq"].as_u64()).collect();
    assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
    let joined = |pick: &dyn Fn(&serde_json::Value) -> Option<String>| -> String {
        events.iter().filter_map(pick).collect()
    };
    let text = joined(&|e| {
        (e["stream"] == "assistant").then(|| e["data"]["delta"].as_str().unwrap().to_owned())
    });
    let reasoning = joined(&|e| {
        (e["stream"] == "thinking").then(|| e["data"]["delta"].as_str().unwrap().to_owned())
    });
    let chat = joined(&|e| e["deltaText"].as_str().map(str::to_owned));
    assert_eq!(text, "a".repeat(500));
    assert_eq!(reasoning, "r".repeat(500));
    assert_eq!(chat, "a".repeat(500));
}
