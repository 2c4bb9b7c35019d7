//! Exactly one terminal per run, whatever order its ends arrive in: the worker's own end,
//! an abort, the link stopping and the worker's exit, the outcome written early or late. The
//! core is driven with the injected clock; the link's relay is played by the test, through
//! the link's real fence (it publishes a run's events through it, reports what clients saw
//! with the run's `Finished` or its exit, and stops publishing when the link stops).

use super::*;
use crate::events::{Deferred, HubEvent};
use crate::projection::RunRef;
use crate::run_end::Seen;

const RUN: &str = "r";
const SESSION: &str = "agent:main:s";

/// One thing that happens to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The worker starts it (the relay publishes its start, seq 1).
    Start,
    /// The worker's terminal event arrives (held by the relay, seq 2).
    Terminal,
    /// The worker's `Finished` goes to the core.
    Finished,
    /// `chat.abort` for the session.
    Abort,
    /// The link stops reading (its relay publishes nothing more).
    LinkStops,
    /// The core gets the link's exit report.
    Exited,
    /// The outcomes being written are written.
    Written,
}

/// The relay as the test plays it.
#[derive(Default)]
struct Relay {
    started: bool,
    held: Vec<Deferred>,
    handed: bool,
    stopped: bool,
    exited: bool,
}

struct Run {
    h: Harness,
    relay: Relay,
    clients: tokio::sync::broadcast::Receiver<Arc<HubEvent>>,
    /// What clients got of the run so far.
    got: Vec<serde_json::Value>,
    waiter: oneshot::Receiver<Arc<Outcome>>,
    outcome: Option<Arc<Outcome>>,
    writing: Vec<(String, Arc<Outcome>)>,
    ms: u64,
}

fn run_ref() -> RunRef<'static> {
    RunRef {
        run_id: RUN,
        session_key: SESSION,
        agent_id: "main",
    }
}

fn is_terminal(v: &serde_json::Value) -> bool {
    matches!(v["data"]["phase"].as_str(), Some("end" | "error"))
}

impl Run {
    fn new() -> Self {
        let mut h = Harness::new(CONFIG);
        let (clients, _) = h.core.deps.hub.subscribe();
        let (_, waiter) = h.dispatch(0, RUN);
        let mut frames = h.ready(1, 1, 42);
        assert!(matches!(frames.try_recv(), Ok(ControlToWorker::Submit(_))));
        Self {
            h,
            relay: Relay::default(),
            clients,
            got: Vec::new(),
            waiter,
            outcome: None,
            writing: Vec::new(),
            ms: 2,
        }
    }

    fn cmd(&mut self, cmd: Command) {
        self.ms += 1;
        let effects = self.h.at(self.ms, cmd);
        self.writing.extend(persisted(&effects));
    }

    fn fence(&self) -> Arc<crate::worker_link::RunFence> {
        self.h.links[0].fence().clone()
    }

    /// What the relay saw of the run, as it reports it.
    fn seen(&self) -> Option<Seen> {
        let told = self.fence().told(RUN).unwrap_or_default();
        self.relay.started.then(|| Seen {
            session_key: SESSION.into(),
            last_seq: told.last_seq,
            started_at: Some(1),
            terminal: self.relay.held.clone(),
            taken_in: false,
        })
    }

    fn step(&mut self, step: Step) {
        let hub = self.h.core.deps.hub.clone();
        match step {
            Step::Start => {
                self.relay.started = true;
                let progress = crate::projection::thinking(&run_ref(), 1, 1, "x", "x");
                self.fence()
                    .start(&hub, RUN, 1, Some(1), &[Deferred::agent(&progress)]);
            }
            Step::Terminal => {
                let mut t = RunTerminal::without_work(RUN, RunStatus::Ok, 2, String::new(), None);
                t.error = None;
                self.relay.held =
                    Deferred::terminal(crate::projection::carried_terminal(&run_ref(), 2, &t));
                self.fence().publish(&hub, RUN, 2, &[]);
            }
            Step::Finished => {
                // A silent end is a failed loop; one before any start was aborted in its lane.
                let (status, error) = match (self.relay.started, self.relay.held.is_empty()) {
                    (true, false) => (RunStatus::Ok, None),
                    (true, true) => (RunStatus::Error, Some("the loop failed".to_owned())),
                    (false, _) => (RunStatus::Aborted, Some("aborted while queued".into())),
                };
                let mut t = RunTerminal::without_work(RUN, status, 3, String::new(), None);
                t.error = error;
                let seen = self.seen();
                self.relay.handed = true;
                self.cmd(Command::Link(LinkEvent::Finished {
                    agent_id: "main".into(),
                    generation: 1,
                    terminal: Box::new(t),
                    seen,
                    gate: None,
                }));
            }
            Step::Abort => {
                let (reply, mut rx) = oneshot::channel();
                self.cmd(Command::Abort {
                    session_key: SESSION.into(),
                    run_id: None,
                    reason: ipc::control::StopReason::Rpc,
                    reply,
                });
                let aborted = rx.try_recv().ok().and_then(Result::ok).unwrap_or_default();
                if aborted.iter().any(|r| r == RUN) {
                    // The answer is read after the hub position: the terminal is out.
                    self.collect();
                    assert!(
                        self.got.iter().any(is_terminal),
                        "an abort is terminal at once: {:#?}",
                        self.got
                    );
                }
            }
            Step::LinkStops => self.relay.stopped = true,
            Step::Exited => {
                self.relay.exited = true;
                let seen: HashMap<String, Seen> = match (self.relay.handed, self.seen()) {
                    (false, Some(seen)) => HashMap::from([(RUN.to_owned(), seen)]),
                    _ => HashMap::new(),
                };
                self.cmd(Command::Link(LinkEvent::Exited {
                    agent_id: "main".into(),
                    generation: 1,
                    cause: "killed by signal 9 (SIGKILL)".into(),
                    journal_stopped: false,
                    seen,
                    unsent: Vec::new(),
                }));
            }
            Step::Written => {
                for (run_id, outcome) in std::mem::take(&mut self.writing) {
                    self.cmd(Command::Persisted { run_id, outcome });
                }
            }
        }
        self.collect();
        if self.outcome.is_none() {
            if let Ok(o) = self.waiter.try_recv() {
                assert!(
                    self.got.iter().any(is_terminal),
                    "the terminal goes out before the answers about it: {:#?}",
                    self.got
                );
                self.outcome = Some(o);
            }
        }
    }

    /// What clients got of the run since the last look.
    fn collect(&mut self) {
        while let Ok(e) = self.clients.try_recv() {
            if let Ok(v) = serde_json::from_str::<serde_json::Value>(&e.payload) {
                if v["runId"] == RUN {
                    self.got.push(v);
                }
            }
        }
    }

    /// Everything still due happens: the worker reports, outcomes are written.
    fn settle(&mut self) {
        if self.relay.stopped && !self.relay.exited {
            self.step(Step::Exited);
        }
        if !self.relay.stopped && !self.relay.handed {
            self.step(Step::Finished);
        }
        self.step(Step::Written);
    }
}

/// Every order of the steps that can happen to one run (each at most once; the worker's own
/// steps only before its link stops, the exit report only after it): its clients get exactly
/// one terminal, after everything else they got of the run and with nothing after it, and
/// before any answer about it (the waiter's outcome, an abort's answer); the waiter's outcome
/// is the one the terminal says; the link's fence lets the run go.
#[test]
fn every_run_gets_exactly_one_terminal_whatever_order_its_ends_come_in() {
    use Step::*;
    let all = [Start, Terminal, Finished, Abort, LinkStops, Exited, Written];
    let mut orders = Vec::new();
    orders_of(&all, &mut Vec::new(), &mut orders);
    assert!(orders.len() > 400, "{}", orders.len());
    for order in orders {
        let mut run = Run::new();
        for step in &order {
            run.step(*step);
        }
        run.settle();
        let events = &run.got;
        let terminal_at: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, v)| is_terminal(v))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(terminal_at.len(), 1, "{order:?}: {events:#?}");
        let at = terminal_at[0];
        assert_eq!(
            events.len(),
            at + 2,
            "{order:?}: only its chat pair after: {events:#?}"
        );
        let seq = |v: &serde_json::Value| v["seq"].as_u64().unwrap_or(0);
        assert!(
            events[..at].iter().all(|v| seq(v) < seq(&events[at])),
            "{order:?}: numbered after what clients saw: {events:#?}"
        );
        let outcome = run.outcome.clone().expect("the waiter is answered");
        let chat = events[at + 1]["state"].as_str().unwrap_or("");
        let want = match outcome.status {
            RunStatus::Ok => "final",
            RunStatus::Error => "error",
            RunStatus::Aborted => "aborted",
            other => panic!("{order:?}: no step ends a run {other:?}"),
        };
        assert_eq!(chat, want, "{order:?}: {events:#?}");
        if run.relay.handed {
            assert_eq!(
                run.fence().told(RUN),
                None,
                "{order:?}: the fence let it go"
            );
        }
    }
}

/// Every valid order of a subset of `steps`, each a prefix of the run's life.
fn orders_of(steps: &[Step], prefix: &mut Vec<Step>, out: &mut Vec<Vec<Step>>) {
    out.push(prefix.clone());
    for &s in steps {
        if prefix.contains(&s) || !may_follow(prefix, s) {
            continue;
        }
        prefix.push(s);
        orders_of(steps, prefix, out);
        prefix.pop();
    }
}

fn may_follow(before: &[Step], s: Step) -> bool {
    use Step::*;
    let had = |x| before.contains(&x);
    match s {
        // The worker's steps: in their order, and only while its link runs.
        Start => !had(Finished) && !had(LinkStops),
        Terminal => had(Start) && !had(Finished) && !had(LinkStops),
        Finished => !had(LinkStops),
        Exited => had(LinkStops),
        Abort | LinkStops | Written => true,
    }
}
