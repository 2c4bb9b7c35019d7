//! The main loop's state: session lanes (a session's runs one at a time, R-B2, with their
//! queue modes, R-B3), the global cap on runs at once, cancels, approval decisions, drain,
//! and the runs' owners for stuck-session diagnostics.

use super::*;

pub(crate) struct Worker {
    pub(crate) ctx: Arc<Ctx>,
    pub(crate) done_tx: mpsc::Sender<Done>,
    pub(crate) lanes: HashMap<String, Lane>,
    /// Sessions with queued runs waiting for a global slot, in arrival order.
    pub(crate) ready: VecDeque<String>,
    pub(crate) ready_set: HashSet<String>,
    pub(crate) active: usize,
    /// When a collected batch's quiet window ends (R-B3).
    pub(crate) wake_at: Option<Instant>,
    pub(crate) cancels: HashMap<String, watch::Sender<Option<StopReason>>>,
    /// Where each running run hears operators' approval decisions.
    pub(crate) decisions: HashMap<String, mpsc::Sender<agent::driver::Decided>>,
    pub(crate) drain_deadline: Option<Instant>,
    pub(crate) drain_expired: bool,
    pub(crate) orphan_deadline: Option<Instant>,
    pub(crate) completed: u32,
    pub(crate) aborted: u32,
    /// Running runs' driver tasks and probes (R-I1).
    pub(crate) owners: HashMap<String, stuck::Owner>,
    /// Each lane's processing generation (bumped when a run starts in it).
    pub(crate) generations: HashMap<String, u64>,
    pub(crate) next_generation: u64,
    pub(crate) diag: stuck::Diag,
}

impl Worker {
    pub(crate) fn new(
        ctx: Arc<Ctx>,
        done_tx: mpsc::Sender<Done>,
        diag_tx: mpsc::Sender<stuck::DiagMsg>,
    ) -> Self {
        Self {
            diag: stuck::Diag::new(ctx.spec.diagnostics, diag_tx),
            owners: HashMap::new(),
            generations: HashMap::new(),
            next_generation: 0,
            ctx,
            done_tx,
            lanes: HashMap::new(),
            ready: VecDeque::new(),
            ready_set: HashSet::new(),
            active: 0,
            wake_at: None,
            cancels: HashMap::new(),
            decisions: HashMap::new(),
            drain_deadline: None,
            drain_expired: false,
            orphan_deadline: None,
            completed: 0,
            aborted: 0,
        }
    }

    pub(crate) fn send(&self, msg: WorkerToControl) {
        if self.ctx.out.try_send(msg).is_err() {
            tracing::warn!("Link to the supervisor is full or closed; a frame was dropped.");
        }
    }

    /// Puts an outcome in the outbox at once, in order: never dropped, never waiting (the
    /// session's next run starts only after its previous run's terminal is in).
    pub(crate) fn send_outcome(&self, msg: WorkerToControl) {
        self.ctx.out.push(msg);
    }

    pub(crate) fn on_frame(&mut self, msg: ControlToWorker) {
        match msg {
            ControlToWorker::Submit(run) => self.submit(run),
            ControlToWorker::Cancel { run_id, reason } => self.cancel(&run_id, reason),
            ControlToWorker::Drain { deadline_ms } => {
                tracing::info!(deadline_ms, "Draining.");
                self.diag.stop();
                self.drain_deadline = Some(Instant::now() + Duration::from_millis(deadline_ms));
            }
            ControlToWorker::Ping { nonce } => {
                self.send(WorkerToControl::Pong { nonce });
                self.send(WorkerToControl::Counters(self.ctx.counters()));
            }
            ControlToWorker::Session { op_id, op } => self.session_op(op_id, op),
            ControlToWorker::ApprovalResolved {
                run_id,
                id,
                decision,
                pattern,
            } => {
                if let Some(p) = pattern.filter(|_| decision == ApprovalDecision::AllowAlways) {
                    let mut added = self
                        .ctx
                        .allowed_since
                        .write()
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                    if !added.contains(&p) && added.len() < MAX_ALLOWED_SINCE {
                        added.push(p);
                    }
                }
                if let Some(tx) = self.decisions.get(&run_id) {
                    let _ = tx.try_send(agent::driver::Decided { id, decision });
                }
            }
            ControlToWorker::Keys(more) => {
                self.ctx
                    .keys
                    .write()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .extend(more.0);
            }
            ControlToWorker::JournalReplay { .. } | ControlToWorker::Journaled { .. } => {
                tracing::warn!("Ignoring a journal frame outside the journal's sync.")
            }
            ControlToWorker::Unknown => {
                tracing::warn!("Ignoring an unknown frame from a newer supervisor.")
            }
        }
    }

    /// True while the session has a run running or queued.
    pub(crate) fn busy(&self, session_key: &str) -> bool {
        self.lanes.get(session_key).is_some_and(Lane::busy)
    }

    /// Messages waiting in all lanes.
    pub(crate) fn queued(&self) -> usize {
        self.lanes.values().map(Lane::waiting).sum()
    }

    pub(crate) fn submit(&mut self, run: SubmitRun) {
        let refuse = if self.drain_deadline.is_some() || self.orphan_deadline.is_some() {
            Some(RpcError::new(ErrorCode::Draining, "worker is draining"))
        } else if self.queued() >= self.ctx.spec.max_queued as usize {
            Some(RpcError::new(ErrorCode::Overloaded, "worker queue is full"))
        } else {
            None
        };
        if let Some(error) = refuse {
            self.send_outcome(WorkerToControl::Rejected {
                run_id: run.run_id,
                error,
            });
            return;
        }
        let key = run.session_key.clone();
        let effects = self
            .lanes
            .entry(key.clone())
            .or_default()
            .arrive(run, Instant::now());
        for effect in effects {
            match effect {
                lanes::Effect::Dropped { run_id, error } => {
                    self.completed += 1;
                    let t =
                        RunTerminal::without_work(&run_id, RunStatus::Error, now_ms(), error, None);
                    self.send_outcome(WorkerToControl::Finished(t));
                }
                lanes::Effect::Interrupt { run_id } => {
                    if let Some(tx) = self.cancels.get(&run_id) {
                        let _ = tx.send(Some(StopReason::Interrupt));
                    }
                }
            }
        }
        self.mark_ready(key);
        self.schedule();
    }

    pub(crate) fn mark_ready(&mut self, key: String) {
        let ready = self
            .lanes
            .get(&key)
            .is_some_and(|l| !l.is_running() && l.waiting() > 0);
        if ready && self.ready_set.insert(key.clone()) {
            self.ready.push_back(key);
        }
    }

    pub(crate) fn schedule(&mut self) {
        let cap = self.ctx.spec.max_concurrent.max(1) as usize;
        let now = Instant::now();
        while self.active < cap {
            let Some(key) = self.ready.pop_front() else {
                break;
            };
            self.ready_set.remove(&key);
            let Some(lane) = self.lanes.get_mut(&key) else {
                continue;
            };
            match lane.next(now) {
                Ok(Some(start)) => {
                    self.active += 1;
                    self.start(start);
                }
                Ok(None) => {}
                // A collected batch waits for its quiet window.
                Err(at) => self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at))),
            }
        }
    }

    /// A quiet window ended: lanes waiting for one are ready again.
    pub(crate) fn wake(&mut self) {
        self.wake_at = None;
        let keys: Vec<String> = self.lanes.keys().cloned().collect();
        for key in keys {
            self.mark_ready(key);
        }
        self.schedule();
    }

    pub(crate) fn start(&mut self, start: lanes::Start) {
        let lanes::Start {
            run,
            steer,
            carried,
        } = start;
        let (cancel_tx, cancel_rx) = watch::channel(None);
        if self.drain_expired || self.orphan_deadline.is_some() {
            let _ = cancel_tx.send(Some(StopReason::Restart));
        }
        self.cancels.insert(run.run_id.clone(), cancel_tx);
        let (decide_tx, decide_rx) = mpsc::channel(DECISION_QUEUE);
        self.decisions.insert(run.run_id.clone(), decide_tx);
        let ctx = self.ctx.clone();
        let done = self.done_tx.clone();
        let session_key = run.session_key.clone();
        let run_id = run.run_id.clone();
        self.next_generation += 1;
        self.generations
            .insert(session_key.clone(), self.next_generation);
        let probe = Arc::new(diagnostics::Probe::new(Instant::now()));
        let forced = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let reported = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let was_reported = reported.clone();
        let inner = tokio::spawn(agent::driver::drive(
            ctx.clone(),
            run,
            cancel_rx,
            steer,
            decide_rx,
            probe.clone(),
            carried,
        ));
        let inner_abort = inner.abort_handle();
        let was_forced = forced.clone();
        let owner_run = run_id.clone();
        let outer = tokio::spawn(async move {
            let driven = match inner.await {
                Ok(d) => d,
                // Stuck-session recovery force-cleared a stalled run that ignored its abort.
                Err(_) if was_forced.load(std::sync::atomic::Ordering::Acquire) => {
                    let error = "run aborted (stalled): no progress past the abort threshold; force-cleared".to_owned();
                    let stop = Some(RunStopReason::Stalled);
                    ended_without_outcome(
                        &ctx,
                        &run_id,
                        &session_key,
                        RunStatus::Aborted,
                        error,
                        stop,
                    )
                    .await
                }
                Err(e) => {
                    // A bug in the loop must not leave the run open (invariant 1).
                    let error = format!("the agent loop failed: {e}");
                    tracing::error!(
                        run_id = run_id.as_str(),
                        error = error.as_str(),
                        "Run crashed."
                    );
                    ended_without_outcome(
                        &ctx,
                        &run_id,
                        &session_key,
                        RunStatus::Error,
                        error,
                        None,
                    )
                    .await
                }
            };
            let sent = done
                .send(Done {
                    session_key,
                    terminal: driven.terminal,
                    steered: driven.steered,
                })
                .await;
            was_reported.store(sent.is_ok(), std::sync::atomic::Ordering::Release);
        });
        self.owners.insert(
            owner_run,
            stuck::Owner {
                probe,
                outer,
                inner: inner_abort,
                forced,
                reported,
            },
        );
    }

    pub(crate) fn on_done(&mut self, done: Done) {
        // A lane stuck-session recovery released has had its end already.
        if self.owners.remove(&done.terminal.run_id).is_none() {
            return;
        }
        self.finish_run(done);
    }

    pub(crate) fn finish_run(&mut self, done: Done) {
        self.drained_run(&done.terminal.run_id, done.terminal.status);
        self.active = self.active.saturating_sub(1);
        self.cancels.remove(&done.terminal.run_id);
        self.decisions.remove(&done.terminal.run_id);
        match done.terminal.status {
            RunStatus::Aborted => self.aborted += 1,
            _ => self.completed += 1,
        }
        let stopping = self.drain_expired || self.orphan_deadline.is_some();
        let mut carried = Vec::new();
        let mut aborted = Vec::new();
        if let Some(lane) = self.lanes.get_mut(&done.session_key) {
            carried = lane.finished(&done.steered);
            if stopping {
                // Steered messages the turn did not take have no turn left to run in.
                aborted = lane.take_waiting();
            }
        }
        // The carrier's terminal first; the carried runs end with its outcome (R-B3).
        let carried: Vec<RunTerminal> = carried
            .into_iter()
            .map(|run_id| RunTerminal {
                run_id,
                carried_by: Some(done.terminal.run_id.clone()),
                session_key: Some(done.session_key.clone()),
                // The turn's tokens and tools are the carrier's (counted once in the totals).
                usage: None,
                tool_calls: 0,
                ..done.terminal.clone()
            })
            .collect();
        // The counters first: a client that saw the terminal finds them in `/metrics`.
        self.send_outcome(WorkerToControl::Counters(self.ctx.counters()));
        self.send_outcome(WorkerToControl::Finished(done.terminal));
        for t in carried {
            self.send_outcome(WorkerToControl::Finished(t));
        }
        for run_id in aborted {
            self.aborted += 1;
            self.send_outcome(WorkerToControl::Finished(queued_abort(
                &run_id,
                StopReason::Restart,
            )));
        }
        if self.lanes.get(&done.session_key).is_some_and(Lane::is_idle) {
            self.lanes.remove(&done.session_key);
            self.generations.remove(&done.session_key);
        } else {
            self.mark_ready(done.session_key);
        }
        self.schedule();
    }

    pub(crate) fn cancel(&mut self, run_id: &str, reason: StopReason) {
        if let Some(tx) = self.cancels.get(run_id) {
            let _ = tx.send(Some(reason));
            return;
        }
        let mut found = lanes::Found::NotHere;
        for lane in self.lanes.values_mut() {
            found = lane.cancel(run_id);
            if found != lanes::Found::NotHere {
                break;
            }
        }
        match found {
            lanes::Found::Removed => {
                self.aborted += 1;
                self.send_outcome(WorkerToControl::Finished(queued_abort(run_id, reason)));
            }
            lanes::Found::NotHere => {}
        }
    }

    /// Past the drain deadline: abort everything still running or queued.
    pub(crate) fn drain_expired(&mut self) {
        self.drain_expired = true;
        self.abort_all(StopReason::Restart);
    }

    pub(crate) fn abort_all(&mut self, reason: StopReason) {
        for tx in self.cancels.values() {
            let _ = tx.send(Some(reason));
        }
        let queued: Vec<String> = self
            .lanes
            .values_mut()
            .flat_map(Lane::take_waiting)
            .collect();
        for run_id in queued {
            self.aborted += 1;
            self.send_outcome(WorkerToControl::Finished(queued_abort(&run_id, reason)));
        }
    }

    /// The supervisor is gone: abort everything, give runs a moment to persist, then exit.
    pub(crate) fn orphaned(&mut self) {
        if self.orphan_deadline.is_none() {
            tracing::warn!("Supervisor link closed; stopping.");
            self.diag.stop();
            self.orphan_deadline = Some(Instant::now() + ORPHAN_GRACE);
            self.abort_all(StopReason::Restart);
        }
    }

    pub(crate) fn finished(&self) -> bool {
        (self.drain_deadline.is_some() || self.orphan_deadline.is_some())
            && self.active == 0
            && self.queued() == 0
    }
}

/// Records the end of a run whose loop task ended without its outcome (it failed, or
/// recovery force-cleared it) and gives its terminal.
async fn ended_without_outcome(
    ctx: &Ctx,
    run_id: &str,
    session_key: &str,
    status: RunStatus,
    error: String,
    stop_reason: Option<RunStopReason>,
) -> agent::driver::Driven {
    let ended_at = now_ms();
    let _ = ctx
        .writer
        .finish(FinishRun {
            run_id: run_id.to_owned(),
            session_key: session_key.to_owned(),
            status,
            ended_at,
            error: Some(error.clone()),
            stop_reason: stop_reason.map(|r| r.as_str().to_owned()),
            provider: None,
            model: None,
            usage: None,
            assistant: None,
        })
        .await;
    agent::driver::Driven {
        terminal: RunTerminal::without_work(run_id, status, ended_at, error, stop_reason),
        steered: Vec::new(),
    }
}

fn queued_abort(run_id: &str, reason: StopReason) -> RunTerminal {
    RunTerminal::without_work(
        run_id,
        RunStatus::Aborted,
        now_ms(),
        format!("run aborted while queued ({})", reason.as_str()),
        Some(reason.into()),
    )
}

/// The worker's main loop: frames from the supervisor, ended runs, diagnostics and timers,
/// until the worker is finished, orphaned past its grace or stopped by the journal (`true`).
/// A drained worker's last word is `Drained`.
pub(crate) async fn main_loop(
    ctx: Arc<Ctx>,
    frames: &mut link::Frames,
    journal_stopped: &tokio::sync::Notify,
) -> bool {
    let (done_tx, mut done_rx) = mpsc::channel::<Done>(DONE_QUEUE);
    let (diag_tx, mut diag_rx) = mpsc::channel::<stuck::DiagMsg>(stuck::DIAG_QUEUE);
    let mut w = Worker::new(ctx, done_tx, diag_tx);
    let mut stopped_by_journal = false;
    let mut diag_tick = tokio::time::interval(w.diag.tracker.tick());
    diag_tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            frame = frames.next() => match frame {
                Some(Ok(msg)) => w.on_frame(msg),
                Some(Err(e)) => {
                    tracing::error!(error = %e, "Bad frame from the supervisor; stopping.");
                    w.orphaned();
                }
                None => w.orphaned(),
            },
            Some(done) = done_rx.recv() => w.on_done(done),
            _ = diag_tick.tick(), if w.diag.running() => w.diagnose(),
            Some(msg) = diag_rx.recv() => w.on_diag(msg),
            _ = sleep_until(w.wake_at), if w.wake_at.is_some() => w.wake(),
            _ = sleep_until(w.drain_deadline), if w.drain_deadline.is_some() && !w.drain_expired => w.drain_expired(),
            _ = sleep_until(w.orphan_deadline), if w.orphan_deadline.is_some() => break,
            _ = journal_stopped.notified() => {
                stopped_by_journal = true;
                break;
            }
        }
        if w.finished() {
            break;
        }
    }
    let drained = w.drain_deadline.is_some() && w.orphan_deadline.is_none();
    if drained {
        // After every outcome (the outbox keeps one order).
        w.send_outcome(WorkerToControl::Drained {
            completed: w.completed,
            aborted: w.aborted,
        });
    }
    stopped_by_journal
}
