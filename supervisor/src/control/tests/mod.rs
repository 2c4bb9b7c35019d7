//! The control core driven with an injected clock: restart backoff and its jitter bounds,
//! the crash-loop breaker opening and closing, a missed heartbeat killing a hung worker, the
//! drain deadline ending what is left, pruning of finished outcomes, approval deadlines; and
//! the whole actor (core and shell) under tokio's paused time.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::approval::{ApprovalDecision, ApprovalRequest};
use ipc::control::{ControlToWorker, RunStatus, RunTerminal, SubmitRun, WorkerToControl};
use tokio::sync::{mpsc, oneshot, watch};

use super::*;
use crate::config::{Overrides, RawConfig};
use crate::outcome::Outcome;
use crate::worker_link::LinkHandle;

/// Agent `main` (the default) with a model, and fast supervision settings.
const CONFIG: &str = r#"
[agents.defaults]
model = "p/m"
[models.providers.p]
api = "openai-completions"
base_url = "http://127.0.0.1:9"
[workers]
heartbeat_timeout_seconds = 2
restart_backoff_initial_ms = 100
restart_backoff_max_ms = 1000
crash_loop_max = 3
crash_loop_window_seconds = 10
"#;

fn config(state: &Path, text: &str) -> Arc<Config> {
    let raw: RawConfig = toml::from_str(text).unwrap();
    let path = state.join("loopgate.toml");
    Arc::new(Config::from_raw(raw, &path, state, &Overrides::default()).unwrap())
}

fn deps(config: Arc<Config>, started: Instant) -> CoreDeps {
    CoreDeps {
        config,
        hub: EventHub::new(),
        worker_bin: "/nonexistent/loopgate-worker".into(),
        env: HashMap::new(),
        started,
        allowed_exec: HashMap::new(),
        metrics: crate::metrics::Metrics::new(),
    }
}

/// The core at a clock the test moves: `ms` after its start.
struct Harness {
    core: Control,
    start: Instant,
    wall0: u64,
    ms: u64,
    failed: watch::Receiver<FailedAgents>,
    /// The agent the helpers below act for (`main` unless a test moves it).
    agent: &'static str,
    /// Each ready worker's link, newest last (the tests play their relays).
    links: Vec<LinkHandle>,
    _dir: tempfile::TempDir,
}

impl Harness {
    fn new(text: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let start = Instant::now();
        let wall0 = 1_700_000_000_000;
        let now = Now {
            at: start,
            wall_ms: wall0,
        };
        let (core, failed) = Control::new(deps(config(dir.path(), text), start), now);
        Self {
            core,
            start,
            wall0,
            ms: 0,
            failed,
            agent: "main",
            links: Vec::new(),
            _dir: dir,
        }
    }

    /// Handles `cmd` `ms` after the start (the clock never goes back).
    fn at(&mut self, ms: u64, cmd: Command) -> Vec<Effect> {
        assert!(ms >= self.ms, "the clock goes forward");
        self.ms = ms;
        let now = Now {
            at: self.start + Duration::from_millis(ms),
            wall_ms: self.wall0 + ms,
        };
        let effects = self.core.handle(cmd, now);
        assert!(
            self.core.unsettled_index_holds(),
            "the unsettled index is the run table's"
        );
        effects
    }

    fn tick(&mut self, ms: u64) -> Vec<Effect> {
        self.at(ms, Command::Tick)
    }

    fn dispatch(
        &mut self,
        ms: u64,
        run_id: &str,
    ) -> (Vec<Effect>, oneshot::Receiver<Arc<Outcome>>) {
        self.dispatch_with(ms, run_id, None)
    }

    fn dispatch_with(
        &mut self,
        ms: u64,
        run_id: &str,
        timeout_ms: Option<u64>,
    ) -> (Vec<Effect>, oneshot::Receiver<Arc<Outcome>>) {
        let (done, rx) = oneshot::channel();
        let run = SubmitRun {
            timeout_ms,
            ..SubmitRun::plain(
                run_id,
                &format!("agent:{}:s", self.agent),
                "hi",
                self.wall0 + ms,
            )
        };
        let d = Dispatch {
            run,
            agent_id: self.agent.into(),
            done,
            arrival: Arrival::Run,
        };
        (self.at(ms, Command::Dispatch(Box::new(d))), rx)
    }

    /// Worker `generation` of `main` is ready with `pid`; its link's frames come out of the
    /// returned receiver.
    fn ready(&mut self, ms: u64, generation: u64, pid: u32) -> mpsc::Receiver<ControlToWorker> {
        let (link, rx) = LinkHandle::for_tests(64);
        self.links.push(link.clone());
        let ev = LinkEvent::Ready {
            agent_id: self.agent.into(),
            generation,
            pid,
            link,
        };
        let effects = self.at(ms, Command::Link(ev));
        assert!(effects.is_empty(), "{effects:?}");
        rx
    }

    fn exited(&mut self, ms: u64, generation: u64, cause: &str) -> Vec<Effect> {
        self.exited_as(ms, generation, cause, false)
    }

    fn exited_as(
        &mut self,
        ms: u64,
        generation: u64,
        cause: &str,
        journal_stopped: bool,
    ) -> Vec<Effect> {
        let ev = LinkEvent::Exited {
            agent_id: self.agent.into(),
            generation,
            cause: cause.into(),
            journal_stopped,
            seen: HashMap::new(),
            unsent: Vec::new(),
        };
        self.at(ms, Command::Link(ev))
    }

    fn spawn_failed(&mut self, ms: u64, generation: u64) -> Vec<Effect> {
        let ev = LinkEvent::SpawnFailed {
            agent_id: self.agent.into(),
            generation,
            error: "no such file".into(),
        };
        self.at(ms, Command::Link(ev))
    }

    /// The link hands `msg` on (a `Finished` as a run its clients saw nothing of).
    fn message(&mut self, ms: u64, generation: u64, msg: WorkerToControl) -> Vec<Effect> {
        let agent_id = self.agent.into();
        let ev = match msg {
            WorkerToControl::Finished(t) => LinkEvent::Finished {
                agent_id,
                generation,
                terminal: Box::new(t),
                seen: None,
                gate: None,
            },
            msg => LinkEvent::Message {
                agent_id,
                generation,
                msg: Box::new(msg),
            },
        };
        self.at(ms, Command::Link(ev))
    }

    /// The newest link's relay tells clients run `run_id` started.
    fn started(&mut self, run_id: &str) {
        let link = self.links.last().expect("a ready worker");
        assert!(link
            .fence()
            .start(&self.core.deps.hub, run_id, 1, Some(1), &[]));
    }

    /// Run `run_id`'s worker (generation 1) says it ended `ok` at `ms`; its outcome is
    /// recorded 50 ms later.
    fn finish_ok(&mut self, ms: u64, run_id: &str) {
        let mut t =
            RunTerminal::without_work(run_id, RunStatus::Ok, self.wall0 + ms, String::new(), None);
        t.error = None;
        let effects = self.message(ms, 1, WorkerToControl::Finished(t));
        let (run_id, outcome) = persisted(&effects).remove(0);
        self.at(ms + 50, Command::Persisted { run_id, outcome });
    }

    fn state(&self) -> String {
        self.core.worker_statuses()[0].state.clone()
    }

    /// How long after now the next restart is due.
    fn backoff_left(&self) -> Duration {
        let wake = self.core.next_wake().expect("a restart is due");
        wake - (self.start + Duration::from_millis(self.ms))
    }

    fn wait(&mut self, ms: u64, run_id: &str) -> WaitReply {
        self.wait_as(ms, run_id, false)
    }

    fn wait_as(&mut self, ms: u64, run_id: &str, expected: bool) -> WaitReply {
        let (reply, mut rx) = oneshot::channel();
        let effects = self.at(
            ms,
            Command::Wait {
                run_id: run_id.into(),
                expected,
                reply,
            },
        );
        assert!(effects.is_empty());
        rx.try_recv().unwrap()
    }
}

/// The generation of the worker an effect list starts, if it starts one.
fn spawned(effects: &[Effect]) -> Option<u64> {
    effects.iter().find_map(|e| match e {
        Effect::Spawn(spec) => Some(spec.generation),
        _ => None,
    })
}

/// The outcomes an effect list asks to record, by run id.
fn persisted(effects: &[Effect]) -> Vec<(String, Arc<Outcome>)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Persist { run_id, outcome } => Some((run_id.clone(), outcome.clone())),
            _ => None,
        })
        .collect()
}

fn within(d: Duration, base_ms: u64) -> bool {
    let base = Duration::from_millis(base_ms);
    d >= base.mul_f64(0.75) && d <= base.mul_f64(1.25)
}

#[test]
fn restart_backoff_doubles_within_its_jitter_up_to_its_cap_and_waits_its_time() {
    let mut h = Harness::new(&CONFIG.replace("crash_loop_max = 3", "crash_loop_max = 100"));
    let (effects, _done) = h.dispatch(0, "r1");
    assert_eq!(
        spawned(&effects),
        Some(1),
        "the first run starts the worker"
    );
    let mut generation = 1;
    let mut t = 10;
    let mut delays = Vec::new();
    for attempt in 0..6u32 {
        let effects = h.spawn_failed(t, generation);
        assert_eq!(spawned(&effects), None, "no restart before the backoff");
        assert_eq!(h.state(), "backoff");
        let left = h.backoff_left();
        let base = (100u64 << attempt).min(1000);
        assert!(
            within(left, base),
            "attempt {attempt}: {left:?} vs {base} ms ±25 %"
        );
        delays.push(left);
        let due = t + left.as_millis() as u64;
        assert_eq!(spawned(&h.tick(due - 1)), None, "not before its time");
        generation += 1;
        assert_eq!(
            spawned(&h.tick(due + 1)),
            Some(generation),
            "restarted when due"
        );
        t = due + 2;
    }
    let exact: Vec<_> = (0..6u32)
        .map(|a| Duration::from_millis((100u64 << a).min(1000)))
        .collect();
    assert_ne!(delays, exact, "the delays are jittered");
    // A worker that ran longer than the crash-loop window starts over from the first delay.
    let _link = h.ready(t, generation, 7);
    h.exited(t + 10_001, generation, "killed by signal 9 (SIGKILL)");
    assert!(within(h.backoff_left(), 100), "{:?}", h.backoff_left());
}

#[test]
fn the_crash_loop_breaker_opens_at_its_count_within_the_window_and_an_operator_closes_it() {
    let mut h = Harness::new(CONFIG);
    let (_, mut queued) = h.dispatch(0, "r1");
    // Two crashes back off; the third within 10 s opens the breaker.
    let mut t = 10;
    for generation in 1..=2 {
        h.spawn_failed(t, generation);
        assert_eq!(h.state(), "backoff");
        t += h.backoff_left().as_millis() as u64 + 1;
        assert_eq!(spawned(&h.tick(t)), Some(generation + 1));
        t += 1;
    }
    let effects = h.spawn_failed(t, 3);
    assert_eq!(h.state(), "failed");
    assert!(h.failed.borrow().contains_key("main"));
    let failed = persisted(&effects);
    assert_eq!(failed.len(), 1, "the queued run ends with the breaker");
    assert_eq!(failed[0].1.status, RunStatus::Error);
    assert!(queued.try_recv().is_err(), "answered once recorded");
    // It stays open: no restart however long, new runs refused at once.
    assert_eq!(spawned(&h.tick(t + 600_000)), None);
    let (effects, _) = h.dispatch(t + 600_001, "r2");
    assert_eq!(spawned(&effects), None);
    let refused = persisted(&effects);
    assert!(
        refused[0]
            .1
            .error
            .as_deref()
            .unwrap_or("")
            .contains("marked failed"),
        "{:?}",
        refused[0].1.error
    );
    // An operator's restart closes it.
    let (reply, mut answer) = oneshot::channel();
    let cmd = Command::RestartWorker {
        agent_id: "main".into(),
        force: false,
        reply,
    };
    assert_eq!(spawned(&h.at(t + 600_002, cmd)), Some(4));
    assert!(!h.failed.borrow().contains_key("main"));
    let _link = h.ready(t + 600_003, 4, 9);
    assert!(answer.try_recv().unwrap().is_ok());
    assert_eq!(h.state(), "ready");
}

/// Cluster mode: a worker its agent's journal did not take (this gateway lost the agent,
/// or the engine did not answer) is not a crash. However often it happens, the agent is
/// never marked failed: with nothing waiting it goes back to idle, and what waits goes to
/// the next worker after a backoff.
#[test]
fn a_worker_the_journal_did_not_take_is_not_a_crash() {
    let mut h = Harness::new(CONFIG);
    let (_, _queued) = h.dispatch(0, "r1");
    let mut t = 10;
    for generation in 1..=5 {
        h.exited_as(t, generation, "exited with status 75", true);
        assert_eq!(h.state(), "backoff", "what waits goes to the next worker");
        t += h.backoff_left().as_millis() as u64 + 1;
        assert_eq!(spawned(&h.tick(t)), Some(generation + 1));
        t += 1;
    }
    assert!(!h.failed.borrow().contains_key("main"));
    // Nothing waits (the run went to worker 6, which then stopped): idle, no restart.
    let _link = h.ready(t, 6, 9);
    let mut t = t + 1;
    h.exited_as(t, 6, "exited with status 75", true);
    assert_ne!(h.state(), "failed");
    t += 600_000;
    assert_eq!(spawned(&h.tick(t)), None);
    assert!(!h.failed.borrow().contains_key("main"));
}

#[test]
fn crashes_spread_wider_than_the_window_never_open_the_breaker() {
    let mut h = Harness::new(CONFIG);
    h.dispatch(0, "r1");
    let mut t = 0;
    for generation in 1..=6 {
        // Each worker dies 6 s after it started: never 3 crashes within 10 s.
        let _link = h.ready(t + 1, generation, 100 + generation as u32);
        t += 6_000;
        h.exited(t, generation, "exited with status 1");
        assert_eq!(h.state(), "backoff", "crash {generation}");
        t += h.backoff_left().as_millis() as u64 + 1;
        assert_eq!(spawned(&h.tick(t)), Some(generation + 1));
    }
    assert!(h.failed.borrow().is_empty());
}

#[test]
fn a_worker_that_misses_its_heartbeats_is_killed_once() {
    let mut h = Harness::new(CONFIG);
    h.dispatch(0, "r1");
    let mut link = h.ready(10, 1, 42);
    assert!(matches!(link.try_recv(), Ok(ControlToWorker::Submit(_))));
    assert!(h
        .tick(500)
        .iter()
        .all(|e| !matches!(e, Effect::Kill { .. })));
    assert!(matches!(link.try_recv(), Ok(ControlToWorker::Ping { .. })));
    h.message(600, 1, WorkerToControl::Pong { nonce: 1 });
    // 1.9 s since the last answer: pinged again, alive.
    let effects = h.tick(2_500);
    assert!(effects.iter().all(|e| !matches!(e, Effect::Kill { .. })));
    assert!(matches!(link.try_recv(), Ok(ControlToWorker::Ping { .. })));
    // 2.1 s: killed, once.
    let effects = h.tick(2_700);
    assert!(
        effects
            .iter()
            .any(|e| matches!(e, Effect::Kill { pid: 42 })),
        "{effects:?}"
    );
    assert!(h
        .tick(2_800)
        .iter()
        .all(|e| !matches!(e, Effect::Kill { .. })));
    let effects = h.exited(2_810, 1, "killed by signal 9 (SIGKILL)");
    let failed = persisted(&effects);
    assert!(
        failed[0]
            .1
            .error
            .as_deref()
            .unwrap_or("")
            .contains("unresponsive"),
        "{:?}",
        failed[0].1.error
    );
    assert_eq!(h.state(), "backoff", "a hung worker counts as a crash");
}

#[test]
fn past_the_drain_deadline_what_is_left_ends_and_the_stop_completes() {
    let mut h = Harness::new(CONFIG);
    h.dispatch(0, "r1");
    let mut link = h.ready(10, 1, 42);
    assert!(matches!(link.try_recv(), Ok(ControlToWorker::Submit(_))));
    let (reply, mut stopped) = oneshot::channel();
    let cmd = Command::Shutdown {
        deadline: Duration::from_secs(1),
        reply,
    };
    h.at(1_000, cmd);
    assert!(matches!(
        link.try_recv(),
        Ok(ControlToWorker::Drain { deadline_ms: 1_000 })
    ));
    assert_eq!(h.state(), "draining");
    // The deadline, then 5 s of grace for the worker's own aborts.
    assert!(persisted(&h.tick(7_000)).is_empty());
    let effects = h.tick(7_001);
    let ended = persisted(&effects);
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].1.status, RunStatus::Aborted);
    assert_eq!(ended[0].1.stop_reason.as_deref(), Some("restart"));
    assert!(
        stopped.try_recv().is_err(),
        "not before the outcome is recorded"
    );
    let (run_id, outcome) = ended[0].clone();
    h.at(7_002, Command::Persisted { run_id, outcome });
    assert!(stopped.try_recv().is_ok(), "stopped");
}

/// An `agent.wait` that reaches the actor between the run's ack and its hand-over (seen
/// under load: a run that ended `ok` was reported `timeout` after the whole window) waits
/// for the run; one whose waiter gave up is dropped, not kept.
#[test]
fn a_wait_for_an_accepted_run_not_yet_handed_over_joins_it() {
    let mut h = Harness::new(CONFIG);
    assert!(matches!(h.wait(0, "r1"), WaitReply::Unknown));
    let WaitReply::Pending(mut early) = h.wait_as(0, "r1", true) else {
        panic!("an expected run is waited for");
    };
    let WaitReply::Pending(gave_up) = h.wait_as(0, "r0", true) else {
        panic!("an expected run is waited for");
    };
    drop(gave_up);
    let (_, mut done) = h.dispatch(5, "r1");
    let _link = h.ready(10, 1, 42);
    h.finish_ok(100, "r1");
    assert_eq!(done.try_recv().unwrap().status, RunStatus::Ok);
    assert_eq!(early.try_recv().unwrap().status, RunStatus::Ok);
    let WaitReply::Pending(_kept) = h.wait_as(200, "r2", true) else {
        panic!("an expected run is waited for");
    };
    assert_eq!(h.core.expected.len(), 1, "r0's waiter gave up: dropped");
}

#[test]
fn finished_outcomes_are_kept_a_minute_then_forgotten() {
    let mut h = Harness::new(CONFIG);
    let (_, mut done) = h.dispatch(0, "r1");
    let _link = h.ready(10, 1, 42);
    h.finish_ok(100, "r1");
    assert_eq!(done.try_recv().unwrap().status, RunStatus::Ok);
    assert!(matches!(h.wait(60_000, "r1"), WaitReply::Done(_)));
    h.tick(60_150);
    assert!(
        matches!(h.wait(60_150, "r1"), WaitReply::Done(_)),
        "60 s exactly"
    );
    h.tick(60_151);
    assert!(
        matches!(h.wait(60_151, "r1"), WaitReply::Unknown),
        "answered from the gateway db from now on"
    );
}

fn approval(id: &str, created_ms: u64, expires_ms: u64) -> WorkerToControl {
    WorkerToControl::ApprovalRequested(ApprovalRequest {
        id: id.into(),
        run_id: "r1".into(),
        session_key: "agent:main:s".into(),
        command: "make build".into(),
        argv: vec!["make".into(), "build".into()],
        cwd: "/ws".into(),
        created_at_ms: created_ms,
        expires_at_ms: expires_ms,
    })
}

fn resolve(h: &mut Harness, ms: u64, id: &str) -> approvals::ResolveResult {
    let (reply, mut rx) = oneshot::channel();
    let cmd = Command::ApprovalResolve {
        id: id.into(),
        decision: ApprovalDecision::Deny,
        by: None,
        reply,
    };
    h.at(ms, cmd);
    rx.try_recv().unwrap()
}

fn pending(h: &mut Harness, ms: u64) -> usize {
    let (reply, mut rx) = oneshot::channel();
    h.at(ms, Command::ApprovalList { reply });
    rx.try_recv().unwrap().len()
}

#[test]
fn approvals_close_at_their_deadline_and_a_repeated_decision_is_answered_for_15_s() {
    let mut h = Harness::new(CONFIG);
    let w = h.wall0;
    h.dispatch(0, "r1");
    let mut link = h.ready(10, 1, 42);
    // Decided after its deadline: its worker has denied it already.
    h.message(100, 1, approval("appr-0001-late", w + 100, w + 10_000));
    assert_eq!(pending(&mut h, 200), 1);
    assert!(resolve(&mut h, 10_001, "appr-0001-late").is_err());
    assert_eq!(pending(&mut h, 10_002), 0);
    // Never closed by its worker: listed 5 s past its deadline, then closed.
    h.message(
        11_000,
        1,
        approval("appr-0002-lost", w + 11_000, w + 20_000),
    );
    h.tick(25_000);
    assert_eq!(pending(&mut h, 25_000), 1);
    h.tick(25_001);
    assert_eq!(pending(&mut h, 25_001), 0);
    // Decided in time: the worker hears it; the same decision again is fine for 15 s.
    h.message(
        26_000,
        1,
        approval("appr-0003-kept", w + 26_000, w + 600_000),
    );
    while link.try_recv().is_ok() {}
    assert!(resolve(&mut h, 30_000, "appr-0003-kept").is_ok());
    assert!(matches!(
        link.try_recv(),
        Ok(ControlToWorker::ApprovalResolved { .. })
    ));
    assert!(resolve(&mut h, 44_999, "appr-0003-kept").is_ok());
    assert!(resolve(&mut h, 45_000, "appr-0003-kept").is_err());
}

/// The whole actor, shell included, on tokio's paused clock: a worker that cannot start
/// (its agent has no model) backs off twice, then the breaker opens and the run that waited
/// ends. Virtual time passes the two backoffs; nothing sleeps for real.
#[tokio::test(start_paused = true)]
async fn with_paused_time_a_worker_that_cannot_start_backs_off_then_the_breaker_opens() {
    let dir = tempfile::tempdir().unwrap();
    let text = CONFIG.replace("model = \"p/m\"", "");
    let config = config(dir.path(), &text);
    let (db, _) = crate::gatewaydb::GatewayDb::open(&dir.path().join("gateway.sqlite"), 1).unwrap();
    let started = tokio::time::Instant::now();
    let core = deps(config, started.into_std());
    let (control, mut failed, _task) = start(ControlDeps {
        config: core.config,
        db,
        hub: core.hub,
        worker_bin: core.worker_bin,
        env: core.env,
        started: core.started,
        notifier: crate::systemd::Notifier::new(None, None),
        allowed_exec: core.allowed_exec,
        metrics: core.metrics,
        cluster: Default::default(),
    });
    let (done, outcome) = oneshot::channel();
    let run = SubmitRun::plain("r1", "agent:main:s", "hi", 1);
    control
        .dispatch(Dispatch {
            run,
            agent_id: "main".into(),
            done,
            arrival: Arrival::Run,
        })
        .unwrap();
    while !failed.borrow().contains_key("main") {
        failed.changed().await.unwrap();
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(75 + 150),
        "two backoffs passed first: {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let outcome = outcome.await.unwrap();
    assert_eq!(outcome.status, RunStatus::Error);
    assert!(
        outcome
            .error
            .as_deref()
            .unwrap_or("")
            .contains("could not start"),
        "{:?}",
        outcome.error
    );
}

/// A run whose worker never reports its outcome (a lost terminal) is ended by the gateway
/// once it is past its deadline (every model call it may make counted) and 30 s of grace, counted from when it was seen started and
/// not while it waits for an operator; the worker is told to cancel it (issue 23).
#[test]
fn a_run_past_its_deadline_and_grace_with_no_outcome_is_ended_by_the_gateway() {
    let mut h = Harness::new(CONFIG);
    h.dispatch_with(0, "r1", Some(60_000));
    let mut link = h.ready(10, 1, 42);
    assert!(matches!(link.try_recv(), Ok(ControlToWorker::Submit(_))));
    // Queued in its lane for a minute: no deadline runs yet.
    assert!(persisted(&h.tick(60_000)).is_empty());
    h.started("r1");
    h.tick(60_500);
    // A message steered into r1's turn starts too, with a shorter deadline of its own: it
    // ends with r1's turn, so only r1's deadline counts while r1 runs.
    h.dispatch_with(61_000, "r2", Some(10_000));
    h.started("r2");
    assert!(persisted(&h.tick(61_001)).is_empty());
    // Keep the heartbeats answered.
    h.message(100_000, 1, WorkerToControl::Pong { nonce: 1 });
    // An approval wait of 40 s does not count.
    let w = h.wall0;
    h.message(
        100_000,
        1,
        approval("appr-0001-wait", w + 100_000, w + 600_000),
    );
    h.tick(100_001);
    h.message(
        140_000,
        1,
        WorkerToControl::ApprovalClosed {
            id: "appr-0001-wait".into(),
            why: ipc::approval::ApprovalClosed::RunEnded,
        },
    );
    h.message(140_000, 1, WorkerToControl::Pong { nonce: 2 });
    h.tick(140_001);
    // Its deadline is 60 s per model call (the call and a finalization pass: 120 s) and a
    // compaction's 30 s of grace, then 30 s of grace and 40 s waiting (as ticks saw it),
    // after its start at 60.5 s: due after 280.5 s.
    h.message(280_000, 1, WorkerToControl::Pong { nonce: 3 });
    assert!(persisted(&h.tick(280_400)).is_empty(), "r2 waits with r1");
    let effects = h.tick(280_600);
    let ended = persisted(&effects);
    assert_eq!(ended.len(), 1, "{effects:?}");
    assert_eq!(ended[0].0, "r1");
    assert_eq!(ended[0].1.status, RunStatus::Error);
    let error = ended[0].1.error.clone().unwrap_or_default();
    assert!(
        error.contains("deadline (150 s") && error.contains("30 s of grace"),
        "{error}"
    );
    let mut cancelled = false;
    while let Ok(f) = link.try_recv() {
        cancelled |= matches!(f, ControlToWorker::Cancel { ref run_id, .. } if run_id == "r1");
    }
    assert!(cancelled, "the worker is told to stop it");
    // With r1 ended, r2 is the session's run, long past its own deadline.
    let ended = persisted(&h.tick(280_700));
    assert_eq!(ended.len(), 1);
    assert_eq!(ended[0].0, "r2");
    // Its terminal, if it comes now, changes nothing (the first wins).
    let mut t = RunTerminal::without_work("r1", RunStatus::Ok, w + 281_000, String::new(), None);
    t.error = None;
    assert!(persisted(&h.message(281_000, 1, WorkerToControl::Finished(t))).is_empty());
}

mod keys;
mod queue_room;
mod retire;
mod terminal;
