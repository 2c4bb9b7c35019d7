//! loopgate-worker: runs one agent's loop in its own process.
//!
//! Layout:
//! - [`link`]: the control link to the supervisor (handshake, frames).
//! - `run` / `Worker`: the main loop: session lanes (runs of one session key execute one at
//!   a time, R-B2, with their queue modes in [`lanes`], R-B3), a global cap on concurrent
//!   runs, cancel, drain.
//! - [`agent`]: the turn (sans-IO core, driver, prompt rendering).
//! - [`llm`]: model providers.
//! - [`store`]: the agent database (one writer thread, one read-only reader thread).
//! - [`tools`]: the built-in tools (definitions from `ipc::tools`, validation, confinement,
//!   the exec policy, capped results).
//! - [`hooks`]: plugin hooks as external commands (R-H2); `frontmatter` reads `SKILL.md` and
//!   `HOOK.md` headers.
//! - [`outbox`]: the one ordered path of everything the worker tells the supervisor.
//! - `session_ops`: history, reset, delete, inject, compact and lanes, for the supervisor.
//! - [`diagnostics`] and `stuck`: stuck-session detection and recovery (R-I1..R-I3).
//!
//! Architecture Invariants: the worker never opens the gateway's sockets or database; it
//! talks only over its control link. Only `store::writer` writes the agent database.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![forbid(unsafe_code)]

pub mod agent;
pub mod diagnostics;
mod frontmatter;
pub mod hooks;
pub mod lanes;
pub mod link;
pub mod llm;
pub mod outbox;
mod session_ops;
pub mod store;
mod stuck;
pub mod tools;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ipc::approval::ApprovalDecision;
use ipc::control::{
    AgentSpec, ControlToWorker, ModelSpec, RunStatus, RunStopReason, RunTerminal, SessionReply,
    StopReason, SubmitRun, WorkerToControl,
};
use ipc::{ErrorCode, RpcError};
use tokio::sync::{mpsc, watch};

use crate::lanes::Lane;
use crate::llm::client::LlmClient;
use crate::llm::LlmError;
use crate::store::{FinishRun, Reader, Writer};

/// Ended runs waiting for the main loop.
const DONE_QUEUE: usize = 4096;
/// Approval decisions queued for one run.
const DECISION_QUEUE: usize = 8;
/// `allow-always` patterns a worker takes on while it runs.
const MAX_ALLOWED_SINCE: usize = 1000;
/// How long in-flight runs get to persist their outcome when the supervisor disappears.
const ORPHAN_GRACE: Duration = Duration::from_millis(700);

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The answer to session op `op_id`.
fn session_done(op_id: u64, result: Result<SessionReply, RpcError>) -> WorkerToControl {
    WorkerToControl::SessionDone {
        op_id,
        reply: result.unwrap_or_else(|error| SessionReply::Failed { error }),
    }
}

/// Model name recorded on a message an operator injected (no model wrote it).
pub const INJECTED_MODEL: &str = "gateway-injected";

/// A storage failure as a session op error (a lost claim means a run holds the session).
fn store_error(e: store::StoreError) -> RpcError {
    match e {
        store::StoreError::Fenced { .. } => RpcError::new(
            ErrorCode::SessionBusy,
            "session has an active run; abort it first",
        ),
        other => RpcError::new(ErrorCode::Storage, other.to_string()),
    }
}

/// What every turn of this worker shares.
pub struct Ctx {
    pub spec: AgentSpec,
    pub writer: Writer,
    pub reader: Reader,
    pub llm: Result<LlmClient, LlmError>,
    /// Clients of other providers, made on first use (`before_model_resolve` overrides).
    pub other_llms: std::sync::Mutex<HashMap<String, LlmClient>>,
    /// The provider keys the supervisor gave this worker, by variable name: in `Welcome`,
    /// and with a run on another provider since (`ControlToWorker::Keys`).
    pub keys: std::sync::RwLock<HashMap<String, String>>,
    /// What `exec` commands get instead: [`tools::exec_environment`] of `env`.
    pub exec_env: Arc<Vec<(String, String)>>,
    /// The agent's disk budget ([`tools::budget`]).
    pub disk: Arc<tools::budget::DiskBudget>,
    /// Everything the worker tells the supervisor, in one order ([`outbox`]).
    pub out: outbox::Outbox,
    pub hooks: hooks::Hooks,
    pub skills: agent::skills::SkillsCache,
    /// Allowlist patterns an operator added with `allow-always` since the worker started
    /// (the supervisor keeps them; the next worker gets them in its spec).
    pub allowed_since: std::sync::RwLock<Vec<String>>,
    /// Model requests by (provider, API, outcome), for `/metrics`.
    pub model_requests: std::sync::Mutex<HashMap<(String, &'static str, &'static str), u64>>,
}

/// Options from the command line and environment (read once in `main`).
pub struct Options {
    pub agent_id: String,
    pub connect: PathBuf,
    /// The plain variables of the worker's environment (`ipc::worker_env::PLAIN`).
    pub env: HashMap<String, String>,
}

/// Runs the worker until it is drained or its supervisor goes away.
pub async fn run(opts: Options) -> anyhow::Result<()> {
    let (spec, mut reader, mut writer) = link::connect(&opts.connect, &opts.agent_id).await?;
    let db_path = PathBuf::from(&spec.db_path);
    // Cluster mode: the database catches up with the agent's journal before anything else.
    let synced = match spec.journaled {
        true => Some(store::journal::sync(&db_path, &mut reader, &mut writer).await?),
        false => None,
    };
    let (out_tx, out_rx) = outbox::new(outbox::STREAM_CAP);
    let write_task = tokio::spawn(outbox::write_out(out_rx, writer));
    // Told when the journal stops taking this worker's writes: the worker stops.
    let journal_stopped = Arc::new(tokio::sync::Notify::new());
    let (mut frames, db_writer) =
        open_writer(&db_path, reader, synced, &out_tx, &journal_stopped).await?;
    let db_reader = Reader::open(&db_path)?;
    let ctx = Arc::new(Ctx::new(spec, db_writer, db_reader, &opts, out_tx.clone()));
    let stopped_by_journal = main_loop(ctx, &mut frames, &journal_stopped).await;
    drop(out_tx);
    let _ = tokio::time::timeout(Duration::from_secs(2), write_task).await;
    checkpoint_at_exit(db_path).await;
    if stopped_by_journal {
        return Err(store::journal::JournalStopped(
            "the agent's journal stopped taking this worker's writes".into(),
        )
        .into());
    }
    tracing::info!("Worker stopped.");
    Ok(())
}

/// Opens the database's writer (ending runs a crash left open) and the supervisor's frames;
/// in cluster mode (`synced`) every write is journaled first and the frames the sync read
/// early come first.
async fn open_writer(
    db_path: &Path,
    reader: link::LinkReader,
    synced: Option<store::journal::Synced>,
    out: &outbox::Outbox,
    journal_stopped: &Arc<tokio::sync::Notify>,
) -> anyhow::Result<(link::Frames, Writer)> {
    let (frames, db_writer, recovered) = match synced {
        None => {
            let (w, n) = Writer::open(db_path, now_ms())?;
            (link::frames(reader), w, n)
        }
        Some(synced) => {
            let pending = store::journal::Pending::default();
            let frames = store::journal::frames(reader, synced.early, pending.clone());
            let journal = store::journal::Link::new(
                out.clone(),
                pending,
                synced.last,
                journal_stopped.clone(),
            );
            let (w, n) = Writer::open_journaled(db_path, now_ms(), journal).await?;
            (frames, w, n)
        }
    };
    if recovered > 0 {
        tracing::warn!(
            runs = recovered,
            "Ended runs left open by a crash as errors."
        );
    }
    Ok((frames, db_writer))
}

impl Ctx {
    fn new(
        spec: AgentSpec,
        writer: Writer,
        reader: Reader,
        opts: &Options,
        out: outbox::Outbox,
    ) -> Ctx {
        let keys: HashMap<String, String> = spec.secrets.0.clone().into_iter().collect();
        let llm = build_llm(&spec.model, &keys);
        // The supervisor labels relayed lines with agent and pid.
        tracing::info!("Worker started.");
        let disk = Arc::new(tools::budget::DiskBudget::new(spec.disk, &spec.workspace));
        Ctx {
            hooks: hooks::Hooks::new(spec.hooks.clone()),
            skills: agent::skills::SkillsCache::default(),
            spec,
            writer,
            reader,
            llm,
            other_llms: Default::default(),
            exec_env: Arc::new(tools::exec_environment(&opts.env)),
            disk,
            keys: std::sync::RwLock::new(keys),
            out,
            allowed_since: Default::default(),
            model_requests: Default::default(),
        }
    }
}

/// The worker's main loop: frames from the supervisor, ended runs, diagnostics and timers,
/// until the worker is finished, orphaned past its grace or stopped by the journal (`true`).
/// A drained worker's last word is `Drained`.
async fn main_loop(
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

/// A clean stop leaves the whole database in its file, the WAL empty.
async fn checkpoint_at_exit(db_path: PathBuf) {
    let done = tokio::task::spawn_blocking(move || dbwriter::checkpoint(&db_path)).await;
    match done {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => tracing::warn!(
            "The final checkpoint could not finish (a reader held it); the WAL keeps the rest."
        ),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "The final checkpoint failed; the WAL keeps the rest.")
        }
        Err(e) => tracing::warn!(error = %e, "The final checkpoint did not run."),
    }
}

fn build_llm(spec: &ModelSpec, env: &HashMap<String, String>) -> Result<LlmClient, LlmError> {
    let key = match &spec.api_key_env {
        Some(var) => match env.get(var).filter(|v| !v.is_empty()) {
            Some(v) => Some(v.clone()),
            // A configuration fault: retrying cannot help.
            None => {
                return Err(LlmError::Config(format!(
                    "the API key variable {var} (models.providers.{}.api_key_env) is not set in the gateway's environment",
                    spec.provider
                )))
            }
        },
        None => None,
    };
    LlmClient::new(spec.clone(), key)
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

pub(crate) struct Done {
    session_key: String,
    terminal: RunTerminal,
    /// Steered runs the turn took.
    steered: Vec<String>,
}

struct Worker {
    ctx: Arc<Ctx>,
    done_tx: mpsc::Sender<Done>,
    lanes: HashMap<String, Lane>,
    /// Sessions with queued runs waiting for a global slot, in arrival order.
    ready: VecDeque<String>,
    ready_set: HashSet<String>,
    active: usize,
    /// When a collected batch's quiet window ends (R-B3).
    wake_at: Option<Instant>,
    cancels: HashMap<String, watch::Sender<Option<StopReason>>>,
    /// Where each running run hears operators' approval decisions.
    decisions: HashMap<String, mpsc::Sender<agent::driver::Decided>>,
    drain_deadline: Option<Instant>,
    drain_expired: bool,
    orphan_deadline: Option<Instant>,
    completed: u32,
    aborted: u32,
    /// Running runs' driver tasks and probes (R-I1).
    owners: HashMap<String, stuck::Owner>,
    /// Each lane's processing generation (bumped when a run starts in it).
    generations: HashMap<String, u64>,
    next_generation: u64,
    diag: stuck::Diag,
}

impl Worker {
    fn new(
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

    fn send(&self, msg: WorkerToControl) {
        if self.ctx.out.try_send(msg).is_err() {
            tracing::warn!("Link to the supervisor is full or closed; a frame was dropped.");
        }
    }

    /// Puts an outcome in the outbox at once, in order: never dropped, never waiting (the
    /// session's next run starts only after its previous run's terminal is in).
    fn send_outcome(&self, msg: WorkerToControl) {
        self.ctx.out.push(msg);
    }

    fn on_frame(&mut self, msg: ControlToWorker) {
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
    fn busy(&self, session_key: &str) -> bool {
        self.lanes.get(session_key).is_some_and(Lane::busy)
    }

    /// Messages waiting in all lanes.
    fn queued(&self) -> usize {
        self.lanes.values().map(Lane::waiting).sum()
    }

    fn submit(&mut self, run: SubmitRun) {
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

    fn mark_ready(&mut self, key: String) {
        let ready = self
            .lanes
            .get(&key)
            .is_some_and(|l| !l.is_running() && l.waiting() > 0);
        if ready && self.ready_set.insert(key.clone()) {
            self.ready.push_back(key);
        }
    }

    fn schedule(&mut self) {
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
    fn wake(&mut self) {
        self.wake_at = None;
        let keys: Vec<String> = self.lanes.keys().cloned().collect();
        for key in keys {
            self.mark_ready(key);
        }
        self.schedule();
    }

    fn start(&mut self, start: lanes::Start) {
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

    fn on_done(&mut self, done: Done) {
        // A lane stuck-session recovery released has had its end already.
        if self.owners.remove(&done.terminal.run_id).is_none() {
            return;
        }
        self.finish_run(done);
    }

    fn finish_run(&mut self, done: Done) {
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
                // The turn's tokens are the carrier's (counted once in the session's totals).
                usage: None,
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

    fn cancel(&mut self, run_id: &str, reason: StopReason) {
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
    fn drain_expired(&mut self) {
        self.drain_expired = true;
        self.abort_all(StopReason::Restart);
    }

    fn abort_all(&mut self, reason: StopReason) {
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
    fn orphaned(&mut self) {
        if self.orphan_deadline.is_none() {
            tracing::warn!("Supervisor link closed; stopping.");
            self.diag.stop();
            self.orphan_deadline = Some(Instant::now() + ORPHAN_GRACE);
            self.abort_all(StopReason::Restart);
        }
    }

    fn finished(&self) -> bool {
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

impl Ctx {
    /// Counts one model request's outcome (`ok`, `aborted`, or its failure class).
    pub fn model_request(&self, provider: &str, outcome: &'static str) {
        let api = if provider == self.spec.model.provider {
            self.spec.model.api
        } else {
            self.spec
                .providers
                .iter()
                .find(|p| p.provider == provider)
                .map_or(ipc::control::ProviderApi::Unknown, |p| p.api)
        };
        let mut m = self
            .model_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *m.entry((provider.to_owned(), api.as_str(), outcome))
            .or_default() += 1;
    }

    /// Everything this worker counted since it started.
    pub fn counters(&self) -> ipc::metrics::WorkerCounters {
        let m = self
            .model_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let c = self.writer.commits.snapshot();
        ipc::metrics::WorkerCounters {
            model_requests: m
                .iter()
                .map(
                    |((provider, api, outcome), count)| ipc::metrics::ModelRequests {
                        provider: provider.clone(),
                        api: (*api).to_owned(),
                        outcome: (*outcome).to_owned(),
                        count: *count,
                    },
                )
                .collect(),
            commits: ipc::metrics::Histogram {
                bounds: dbwriter::COMMIT_BUCKETS.to_vec(),
                cumulative: c.cumulative,
                sum: c.sum_seconds,
                count: c.count,
            },
        }
    }

    /// The agent's exec policy with the patterns operators allowed since the start.
    pub fn exec_policy(&self) -> ipc::control::ExecPolicy {
        let mut policy = self.spec.exec.clone();
        let added = self
            .allowed_since
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        policy.allowlist.extend(added.iter().cloned());
        policy
    }

    /// Hook context for a run (`run_id` empty for a session operation).
    /// The client for `provider` when a run picked another provider than the agent's.
    pub fn other_llm(&self, provider: &str) -> Result<LlmClient, LlmError> {
        let mut cache = self
            .other_llms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = cache.get(provider) {
            return Ok(c.clone());
        }
        let spec = self
            .spec
            .providers
            .iter()
            .find(|p| p.provider == provider)
            .ok_or_else(|| {
                LlmError::Config(format!(
                    "provider {provider:?} (picked by a before_model_resolve hook) is not configured under [models.providers]"
                ))
            })?;
        let keys = self
            .keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let client = build_llm(spec, &keys)?;
        cache.insert(provider.to_owned(), client.clone());
        Ok(client)
    }

    pub fn hook_ctx(&self, session_key: &str, run_id: &str) -> hooks::HookCtx {
        hooks::HookCtx {
            agent_id: self.spec.agent_id.clone(),
            session_key: session_key.to_owned(),
            run_id: run_id.to_owned(),
            workspace: PathBuf::from(&self.spec.workspace),
            hooks_dir: self.spec.hooks_dir.as_ref().map(PathBuf::from),
        }
    }

    /// Runs the `event` observer hooks in the background, once per entry of `fields`, in
    /// order. `fields` is built only when such hooks are configured (off the turn's path
    /// otherwise).
    pub fn observe_later(
        self: &Arc<Self>,
        hook_ctx: &hooks::HookCtx,
        event: &'static str,
        fields: impl FnOnce() -> Vec<serde_json::Value>,
    ) {
        if !self.hooks.has(event) {
            return;
        }
        let (ctx, hook_ctx, all) = (self.clone(), hook_ctx.clone(), fields());
        tokio::spawn(async move {
            for f in all {
                ctx.hooks.observe(&hook_ctx, event, f).await;
            }
        });
    }
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
