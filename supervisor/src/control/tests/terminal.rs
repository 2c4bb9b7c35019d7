//! Exactly one terminal per run, whatever order its ends arrive in: the worker's own end,
//! an abort told on the link, the link stopping and the worker's exit, the outcome written
//! early or late. The core is driven with the injected clock; the link is played by a model
//! that keeps the link's contract (`worker_link`: it reports what clients saw, tells an end
//! it is handed unless the run's `Finished` already went, publishes nothing of a run after
//! its end, and tells the ends it accepted before it stops).

use super::*;
use crate::events::Deferred;
use crate::projection::RunRef;
use crate::run_end::Seen;

const RUN: &str = "r";
const SESSION: &str = "agent:main:s";

/// One thing that happens to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// The worker starts it (the link publishes its start, seq 1, and reports it).
    Start,
    /// The worker's terminal event arrives (held by the link, seq 2).
    Terminal,
    /// The worker's `Finished` goes to the core.
    Finished,
    /// `chat.abort` for the session.
    Abort,
    /// The link tells the ends it was handed.
    LinkTells,
    /// The link stops (it tells what it accepted first; later ends are refused).
    LinkStops,
    /// The core gets the link's exit report.
    Exited,
    /// The outcomes being written are written.
    Written,
}

/// The link as the model plays it.
#[derive(Default)]
struct Link {
    started: bool,
    last_seq: u64,
    held: Vec<Deferred>,
    ended: bool,
    handed: bool,
    stopped: bool,
    exited: bool,
}

struct Run {
    h: Harness,
    link: Link,
    clients: tokio::sync::broadcast::Receiver<Arc<crate::events::HubEvent>>,
    waiter: oneshot::Receiver<Arc<Outcome>>,
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

impl Run {
    fn new() -> Self {
        let mut h = Harness::new(CONFIG);
        let (clients, _) = h.core.deps.hub.subscribe();
        let (_, waiter) = h.dispatch(0, RUN);
        let mut frames = h.ready(1, 1, 42);
        assert!(matches!(frames.try_recv(), Ok(ControlToWorker::Submit(_))));
        Self {
            h,
            link: Link::default(),
            clients,
            waiter,
            writing: Vec::new(),
            ms: 2,
        }
    }

    fn cmd(&mut self, cmd: Command) {
        self.ms += 1;
        let effects = self.h.at(self.ms, cmd);
        self.writing.extend(persisted(&effects));
    }

    fn link_event(&mut self, ev: LinkEvent) {
        self.cmd(Command::Link(ev));
    }

    fn seen(&self) -> Option<Seen> {
        (self.link.started || self.link.ended).then(|| Seen {
            session_key: SESSION.into(),
            last_seq: self.link.last_seq,
            started_at: self.link.started.then_some(1),
            streamed: String::new(),
            terminal: self.link.held.clone(),
            taken_in: false,
            ended: self.link.ended,
        })
    }

    fn step(&mut self, step: Step) {
        let hub = self.h.core.deps.hub.clone();
        match step {
            Step::Start if !self.link.ended => {
                self.link.started = true;
                self.link.last_seq = 1;
                let progress = crate::projection::thinking(&run_ref(), 1, 1, "x", "x");
                hub.publish_all(&[Deferred::agent(&progress)]);
                self.link_event(LinkEvent::Started {
                    agent_id: "main".into(),
                    generation: 1,
                    run_id: RUN.into(),
                });
            }
            Step::Start => {}
            Step::Terminal if !self.link.ended => {
                self.link.last_seq = 2;
                let mut t = RunTerminal::without_work(RUN, RunStatus::Ok, 2, String::new(), None);
                t.error = None;
                self.link.held =
                    Deferred::terminal(crate::projection::carried_terminal(&run_ref(), 2, &t));
            }
            Step::Terminal => {}
            Step::Finished => {
                // A silent end is a failed loop; one before any start was aborted in its lane.
                let (status, error) = match (self.link.started, self.link.held.is_empty()) {
                    (true, false) => (RunStatus::Ok, None),
                    (true, true) => (RunStatus::Error, Some("the loop failed".to_owned())),
                    (false, _) => (RunStatus::Aborted, Some("aborted while queued".into())),
                };
                let mut t = RunTerminal::without_work(RUN, status, 3, String::new(), None);
                t.error = error;
                let seen = self.seen();
                self.link.handed = true;
                self.link_event(LinkEvent::Finished {
                    agent_id: "main".into(),
                    generation: 1,
                    terminal: Box::new(t),
                    seen,
                    gate: None,
                });
            }
            Step::Abort => {
                let (reply, _rx) = oneshot::channel();
                self.cmd(Command::Abort {
                    session_key: SESSION.into(),
                    run_id: None,
                    reason: ipc::control::StopReason::Rpc,
                    reply,
                });
            }
            Step::LinkTells => self.link_tells(),
            Step::LinkStops => {
                self.link_tells();
                self.link.stopped = true;
                self.h.ends.clear();
            }
            Step::Exited => {
                self.link.exited = true;
                let seen: HashMap<String, Seen> = match (self.link.handed, self.seen()) {
                    (false, Some(seen)) => HashMap::from([(RUN.to_owned(), seen)]),
                    _ => HashMap::new(),
                };
                self.link_event(LinkEvent::Exited {
                    agent_id: "main".into(),
                    generation: 1,
                    cause: "killed by signal 9 (SIGKILL)".into(),
                    journal_stopped: false,
                    seen,
                    unsent: Vec::new(),
                });
            }
            Step::Written => {
                for (run_id, outcome) in std::mem::take(&mut self.writing) {
                    self.cmd(Command::Persisted { run_id, outcome });
                }
            }
        }
    }

    /// The link tells the ends it was handed, as `Relay::end_now` does.
    fn link_tells(&mut self) {
        let Some(ends) = self.h.ends.last_mut() else {
            return;
        };
        let mut told = Vec::new();
        while let Ok(end) = ends.try_recv() {
            told.push(end);
        }
        for e in told {
            if self.link.handed || self.link.ended {
                continue;
            }
            self.link.ended = true;
            self.link.held.clear();
            let events = e.end.events(&run_ref(), self.link.last_seq + 1, None, "");
            self.h.core.deps.hub.publish_all(&events);
        }
    }

    /// Everything still due happens: the link tells and reports, outcomes are written.
    fn settle(&mut self) {
        if self.link.stopped && !self.link.exited {
            self.step(Step::Exited);
        }
        if !self.link.stopped {
            self.step(Step::LinkTells);
            if !self.link.handed {
                self.step(Step::Finished);
            }
        }
        self.step(Step::Written);
    }
}

/// Every order of the steps that can happen to one run (each at most once; the worker's own
/// steps only before its link stops, the exit report only after it): its clients get exactly
/// one terminal, after everything else they got of the run and with nothing after it; its
/// waiter gets the outcome the terminal says; the core forgets the ends it told.
#[test]
fn every_run_gets_exactly_one_terminal_whatever_order_its_ends_come_in() {
    use Step::*;
    let all = [
        Start, Terminal, Finished, Abort, LinkTells, LinkStops, Exited, Written,
    ];
    let mut orders = Vec::new();
    orders_of(&all, &mut Vec::new(), &mut orders);
    assert!(orders.len() > 1000, "{}", orders.len());
    for order in orders {
        let mut run = Run::new();
        for step in &order {
            run.step(*step);
        }
        run.settle();
        let events: Vec<serde_json::Value> = std::iter::from_fn(|| run.clients.try_recv().ok())
            .filter_map(|e| serde_json::from_str(&e.payload).ok())
            .filter(|v: &serde_json::Value| v["runId"] == RUN)
            .collect();
        let terminal_at: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, v)| matches!(v["data"]["phase"].as_str(), Some("end" | "error")))
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
        let outcome = run.waiter.try_recv().expect("the waiter is answered");
        let chat = events[at + 1]["state"].as_str().unwrap_or("");
        let want = match outcome.status {
            RunStatus::Ok => "final",
            RunStatus::Error => "error",
            RunStatus::Aborted => "aborted",
            other => panic!("{order:?}: no step ends a run {other:?}"),
        };
        assert_eq!(chat, want, "{order:?}: {events:#?}");
        assert!(run.h.core.ending.is_empty(), "{order:?}");
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
        Finished | LinkTells => !had(LinkStops),
        Exited => had(LinkStops),
        Abort | LinkStops | Written => true,
    }
}
