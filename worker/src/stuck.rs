//! The worker's side of stuck-session diagnostics (R-I1..R-I3, R-J6): every tick it
//! observes its lanes (runs with their [`Probe`]s, queued work, writer claims read by the
//! background reader), lets [`Tracker`] classify them, publishes the reports (a frame to the
//! supervisor at once; a log line whose transcript excerpt the read worker adds, only when
//! that log level is enabled) and carries out the recoveries, each checked again against
//! the session as it is now.
//!
//! Nothing here waits on the reader or the writer: claims and excerpts arrive later as
//! [`DiagMsg`]s, so a slow reader never delays a classification or a recovery.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ipc::control::{RunStatus, RunTerminal, StopReason, WorkerToControl};
use ipc::diagnostics::{
    excerpt, Activity, LaneReport, LaneView, RecoveryAction, RecoveryPhase, RecoveryReport,
    SessionClass,
};
use tokio::sync::mpsc;

use crate::diagnostics::{Probe, Recovery, Report, RunSeen, Seen, Step};
use crate::{now_ms, Done, Worker};

/// Longest a log line waits for its transcript excerpt; it is published without one after.
const ENRICH_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an abort-drained run gets to end by itself before its task is force-cleared.
const SETTLE: Duration = Duration::from_secs(15);
/// Messages queued from background reads to the main loop.
pub const DIAG_QUEUE: usize = 256;

/// What background reads and writes of the diagnostics bring back to the main loop.
pub enum DiagMsg {
    Claims(Vec<crate::store::reader::Claim>),
    Enriched {
        token: u64,
        report: LaneReport,
        text: Option<String>,
    },
    ClaimReleased {
        session_key: String,
        run_id: String,
        generation: u64,
        result: Result<bool, String>,
    },
}

/// A running run's driver task and what diagnostics know of it.
pub struct Owner {
    pub probe: Arc<Probe>,
    /// The task that reports the run's end; finished means nothing drives the run any more.
    pub outer: tokio::task::JoinHandle<()>,
    pub inner: tokio::task::AbortHandle,
    /// Set when recovery force-clears the run (its terminal then says `stalled`).
    pub forced: Arc<AtomicBool>,
    /// The task handed its end to the main loop (it is on its way there).
    pub reported: Arc<AtomicBool>,
}

impl Owner {
    /// Something still drives the run or its end is on the way to the main loop.
    fn alive(&self) -> bool {
        !self.outer.is_finished() || self.reported.load(Ordering::Acquire)
    }
}

/// A stalled run being abort-drained.
pub struct Draining {
    session_key: String,
    generation: u64,
    force_at: Instant,
    forced: bool,
}

/// The diagnostics state a worker keeps.
pub struct Diag {
    pub tracker: crate::diagnostics::Tracker,
    pub tx: mpsc::Sender<DiagMsg>,
    /// Writer claims no live run holds, with when each was first seen.
    claims: HashMap<String, (String, Instant)>,
    claims_reading: bool,
    /// Pending log publications: token -> session key (a reset or delete discards them).
    pending: HashMap<u64, String>,
    next_token: u64,
    tasks: tokio::task::JoinSet<()>,
    draining: HashMap<String, Draining>,
    stopped: bool,
}

impl Diag {
    pub fn new(policy: ipc::diagnostics::DiagnosticsPolicy, tx: mpsc::Sender<DiagMsg>) -> Self {
        Diag {
            tracker: crate::diagnostics::Tracker::new(policy),
            tx,
            claims: HashMap::new(),
            claims_reading: false,
            pending: HashMap::new(),
            next_token: 0,
            tasks: tokio::task::JoinSet::new(),
            draining: HashMap::new(),
            stopped: !policy.enabled,
        }
    }

    /// The session was replaced (reset, deleted): its pending excerpts are discarded.
    pub fn replaced(&mut self, session_key: &str) {
        self.pending.retain(|_, k| k != session_key);
    }

    pub fn running(&self) -> bool {
        !self.stopped
    }

    /// Diagnostics stop (drain, orphaned): pending publications are retired.
    pub fn stop(&mut self) {
        self.stopped = true;
        self.tasks.abort_all();
        self.pending.clear();
        self.tracker.clear();
    }
}

impl Worker {
    /// One observation of every lane (a diagnostics tick).
    pub(crate) fn diagnose(&mut self) {
        if self.diag.stopped {
            return;
        }
        let now = Instant::now();
        while self.diag.tasks.try_join_next().is_some() {}
        self.force_overdue(now);
        self.read_claims();
        let seen = self.observe(now);
        for step in self.diag.tracker.observe(now, &seen) {
            match step {
                Step::Report(r) => self.publish(r),
                Step::Recover(r) => self.recover(r, now),
            }
        }
    }

    fn read_claims(&mut self) {
        if self.diag.claims_reading {
            return;
        }
        self.diag.claims_reading = true;
        let (reader, tx) = (self.ctx.reader.clone(), self.diag.tx.clone());
        self.diag.tasks.spawn(async move {
            let claims = reader.claims().await.unwrap_or_default();
            let _ = tx.send(DiagMsg::Claims(claims)).await;
        });
    }

    /// Whether `run_id` is a live run of this worker.
    fn live(&self, run_id: &str) -> bool {
        self.owners.contains_key(run_id)
    }

    fn observe(&self, now: Instant) -> Vec<Seen> {
        let cap = self.ctx.spec.max_concurrent.max(1) as usize;
        let mut seen: Vec<Seen> = Vec::with_capacity(self.lanes.len());
        for (key, lane) in &self.lanes {
            let run = lane.running().map(|id| match self.owners.get(id) {
                Some(o) => RunSeen {
                    run_id: id.to_owned(),
                    owner_alive: o.alive(),
                    activity: o.probe.activity(),
                    progress: o.probe.progress(),
                    last_progress: o.probe.last_progress(),
                },
                // A lane running a run nothing drives (never expected): stale at once.
                None => RunSeen {
                    run_id: id.to_owned(),
                    owner_alive: false,
                    activity: Activity::Run,
                    progress: 0,
                    last_progress: now
                        .checked_sub(Duration::from_millis(self.ctx.spec.diagnostics.warn_ms))
                        .unwrap_or(now),
                },
            });
            let unscheduled = !lane.is_running()
                && lane.waiting() > 0
                && !self.ready_set.contains(key)
                && self.wake_at.is_none()
                && self.active < cap;
            seen.push(Seen {
                session_key: key.clone(),
                generation: self.generations.get(key).copied().unwrap_or(0),
                run,
                queue_depth: lane.waiting() as u32,
                unscheduled_since: unscheduled.then(|| lane.waiting_since()).flatten(),
                stale_claim: self.stale_claim(key, lane.running()),
            });
        }
        for key in self.diag.claims.keys() {
            if !self.lanes.contains_key(key) {
                seen.push(Seen {
                    session_key: key.clone(),
                    generation: self.generations.get(key).copied().unwrap_or(0),
                    run: None,
                    queue_depth: 0,
                    unscheduled_since: None,
                    stale_claim: self.stale_claim(key, None),
                });
            }
        }
        seen
    }

    fn stale_claim(&self, key: &str, running: Option<&str>) -> Option<(String, Instant)> {
        self.diag
            .claims
            .get(key)
            .filter(|(id, _)| Some(id.as_str()) != running && !self.live(id))
            .cloned()
    }

    fn publish(&mut self, r: Report) {
        let report = LaneReport {
            session_key: r.session_key.clone(),
            class: r.class,
            reason: r.reason.to_owned(),
            activity: r.activity,
            run_id: r.run_id.clone(),
            idle_ms: r.idle.as_millis() as u64,
            queue_depth: r.queue_depth,
            generation: r.generation,
            observed_at_ms: now_ms(),
            repeat: r.repeat,
            excerpt: None,
        };
        // Classification is never delayed: the supervisor hears it now.
        self.send_outcome(WorkerToControl::Diagnostic(report.clone()));
        let quiet = r.class == SessionClass::LongRunning && r.queue_depth == 0;
        let enabled = if quiet {
            tracing::enabled!(target: "diagnostic", tracing::Level::DEBUG)
        } else {
            tracing::enabled!(target: "diagnostic", tracing::Level::WARN)
        };
        if !enabled {
            // The log line is not wanted: the session context is not read.
            return;
        }
        self.diag.next_token += 1;
        let token = self.diag.next_token;
        self.diag.pending.insert(token, r.session_key.clone());
        let (reader, tx) = (self.ctx.reader.clone(), self.diag.tx.clone());
        self.diag.tasks.spawn(async move {
            let text = tokio::time::timeout(ENRICH_TIMEOUT, reader.last_assistant(r.session_key))
                .await
                .ok()
                .and_then(Result::ok)
                .flatten();
            let _ = tx
                .send(DiagMsg::Enriched {
                    token,
                    report,
                    text,
                })
                .await;
        });
    }

    pub(crate) fn on_diag(&mut self, msg: DiagMsg) {
        match msg {
            DiagMsg::Claims(claims) => {
                self.diag.claims_reading = false;
                if self.diag.stopped {
                    return;
                }
                let now = Instant::now();
                let mut next = HashMap::new();
                for c in claims {
                    let running = self.lanes.get(&c.session_key).and_then(|l| l.running());
                    if running == Some(c.run_id.as_str()) || self.live(&c.run_id) {
                        continue;
                    }
                    let since = match self.diag.claims.get(&c.session_key) {
                        Some((id, at)) if *id == c.run_id => *at,
                        _ => now,
                    };
                    next.insert(c.session_key, (c.run_id, since));
                }
                self.diag.claims = next;
            }
            DiagMsg::Enriched {
                token,
                report,
                text,
            } => {
                // Discarded when the session was replaced meanwhile, or diagnostics stopped.
                let Some(_) = self.diag.pending.remove(&token) else {
                    return;
                };
                log_report(&report, text.as_deref().map(excerpt).as_deref());
            }
            DiagMsg::ClaimReleased {
                session_key,
                run_id,
                generation,
                result,
            } => {
                let outcome = match &result {
                    Ok(true) => "released".to_owned(),
                    Ok(false) => "replaced".to_owned(),
                    Err(e) => format!("failed: {e}"),
                };
                if result == Ok(true) {
                    self.diag.claims.remove(&session_key);
                    self.diag.tracker.recovered(&session_key, generation);
                } else {
                    self.diag.tracker.retry_later(&session_key);
                }
                self.recovery(
                    &session_key,
                    RecoveryPhase::Completed,
                    RecoveryAction::ReleaseClaim,
                    Some(run_id),
                    generation,
                    Some(outcome),
                );
            }
        }
    }

    fn recovery(
        &self,
        session_key: &str,
        phase: RecoveryPhase,
        action: RecoveryAction,
        run_id: Option<String>,
        generation: u64,
        outcome: Option<String>,
    ) {
        tracing::warn!(
            target: "diagnostic",
            session_key,
            phase = ?phase,
            action = action.as_str(),
            run_id = run_id.as_deref().unwrap_or(""),
            generation,
            outcome = outcome.as_deref().unwrap_or(""),
            "stuck session recovery"
        );
        self.send_outcome(WorkerToControl::Recovery(RecoveryReport {
            session_key: session_key.to_owned(),
            phase,
            action,
            run_id,
            generation,
            outcome,
            at_ms: now_ms(),
        }));
    }

    /// Carries out a recovery the tracker found due, after checking that the session is
    /// still what the observation saw (the same generation, run and progress).
    fn recover(&mut self, r: Recovery, now: Instant) {
        let current_gen = self.generations.get(&r.session_key).copied().unwrap_or(0);
        let running = self
            .lanes
            .get(&r.session_key)
            .and_then(|l| l.running())
            .map(str::to_owned);
        self.recovery(
            &r.session_key,
            RecoveryPhase::Requested,
            r.action,
            r.run_id.clone(),
            r.generation,
            None,
        );
        if current_gen != r.generation {
            return self.recovery_skipped(&r, "replaced");
        }
        let done = match r.action {
            RecoveryAction::AbortRun => self.abort_stalled(&r, running.as_ref(), now),
            RecoveryAction::ReleaseLane => self.release_lane(&r, running.as_ref()),
            RecoveryAction::ReleaseClaim => self.release_stale_claim(&r, running.as_ref()),
            RecoveryAction::Reschedule => {
                self.reschedule(&r);
                Ok(())
            }
            RecoveryAction::Unknown => Err("unsupported"),
        };
        if let Err(why) = done {
            self.recovery_skipped(&r, why);
        }
    }

    /// The recovery no longer applies (`why`): the tracker tries again later.
    fn recovery_skipped(&mut self, r: &Recovery, why: &str) {
        self.diag.tracker.retry_later(&r.session_key);
        self.recovery(
            &r.session_key,
            RecoveryPhase::Completed,
            r.action,
            r.run_id.clone(),
            r.generation,
            Some(why.to_owned()),
        );
    }

    /// The run that observed stalled, if it is still the lane's running run.
    fn still_running(r: &Recovery, running: Option<&String>) -> Option<String> {
        r.run_id.clone().filter(|id| running == Some(id))
    }

    /// `AbortRun`: the stalled run is asked to stop and is abort-drained; it is
    /// force-cleared if it has not ended after the settle time.
    fn abort_stalled(
        &mut self,
        r: &Recovery,
        running: Option<&String>,
        now: Instant,
    ) -> Result<(), &'static str> {
        let run_id = Self::still_running(r, running).ok_or("replaced")?;
        let owner = self.owners.get(&run_id).ok_or("replaced")?;
        if owner.probe.progress() != r.progress {
            return Err("resumed");
        }
        if owner.probe.activity() == Activity::Approval {
            return Err("protected");
        }
        if let Some(tx) = self.cancels.get(&run_id) {
            let _ = tx.send(Some(StopReason::Stalled));
        }
        self.diag.draining.insert(
            run_id,
            Draining {
                session_key: r.session_key.clone(),
                generation: r.generation,
                force_at: now + SETTLE,
                forced: false,
            },
        );
        Ok(())
    }

    /// `ReleaseLane`: a run whose task ended without an outcome is finished as an error and
    /// what it left open in the store is released.
    fn release_lane(&mut self, r: &Recovery, running: Option<&String>) -> Result<(), &'static str> {
        let run_id = Self::still_running(r, running).ok_or("replaced")?;
        if self.owners.get(&run_id).is_some_and(Owner::alive) {
            return Err("resumed");
        }
        let key = r.session_key.clone();
        self.owners.remove(&run_id);
        let error = "the run's task ended without an outcome; its lane was released by stuck-session recovery".to_owned();
        let ended_at = now_ms();
        let writer = self.ctx.writer.clone();
        let (k, id) = (key.clone(), run_id.clone());
        // Only what the run left open: its claim, and its row if still `running`.
        tokio::spawn(async move {
            let _ = writer.release_claim(k, id, ended_at).await;
        });
        self.finish_run(Done {
            session_key: key.clone(),
            terminal: RunTerminal::without_work(&run_id, RunStatus::Error, ended_at, error, None),
            steered: Vec::new(),
        });
        self.diag.tracker.recovered(&key, r.generation);
        self.recovery(
            &key,
            RecoveryPhase::Completed,
            r.action,
            Some(run_id),
            r.generation,
            Some("released".into()),
        );
        Ok(())
    }

    /// `ReleaseClaim`: a writer claim no live run holds is released in the background; the
    /// outcome comes back as [`DiagMsg::ClaimReleased`].
    fn release_stale_claim(
        &mut self,
        r: &Recovery,
        running: Option<&String>,
    ) -> Result<(), &'static str> {
        let run_id = r.run_id.clone().ok_or("replaced")?;
        if running == Some(&run_id) || self.live(&run_id) {
            return Err("resumed");
        }
        let (writer, tx) = (self.ctx.writer.clone(), self.diag.tx.clone());
        let (key, generation) = (r.session_key.clone(), r.generation);
        self.diag.tasks.spawn(async move {
            let result = writer
                .release_claim(key.clone(), run_id.clone(), now_ms())
                .await
                .map_err(|e| e.to_string());
            let _ = tx
                .send(DiagMsg::ClaimReleased {
                    session_key: key,
                    run_id,
                    generation,
                    result,
                })
                .await;
        });
        Ok(())
    }

    /// `Reschedule`: queued work nothing scheduled is made ready again.
    fn reschedule(&mut self, r: &Recovery) {
        let key = r.session_key.clone();
        self.mark_ready(key.clone());
        self.schedule();
        self.diag.tracker.recovered(&key, r.generation);
        self.recovery(
            &key,
            RecoveryPhase::Completed,
            r.action,
            None,
            r.generation,
            Some("rescheduled".into()),
        );
    }

    /// Stalled runs that ignored their abort past the settle time are force-cleared.
    fn force_overdue(&mut self, now: Instant) {
        for (run_id, d) in self.diag.draining.iter_mut() {
            if d.forced || now < d.force_at {
                continue;
            }
            if let Some(o) = self.owners.get(run_id) {
                d.forced = true;
                o.forced.store(true, Ordering::Release);
                o.inner.abort();
                tracing::warn!(
                    target: "diagnostic",
                    run_id = run_id.as_str(),
                    "A stalled run ignored its abort; force-cleared its task."
                );
            }
        }
    }

    /// A run ended: an abort-drain of it is complete (or the run finished by itself first).
    pub(crate) fn drained_run(&mut self, run_id: &str, status: RunStatus) {
        if let Some(d) = self.diag.draining.remove(run_id) {
            self.diag.tracker.recovered(&d.session_key, d.generation);
            let outcome = match (d.forced, status) {
                (true, _) => "force_cleared",
                (false, RunStatus::Aborted) => "aborted",
                (false, _) => "resumed",
            };
            self.recovery(
                &d.session_key,
                RecoveryPhase::Completed,
                RecoveryAction::AbortRun,
                Some(run_id.to_owned()),
                d.generation,
                Some(outcome.into()),
            );
        }
    }

    /// `diagnostics.lanes`: every lane, with its classification.
    pub(crate) fn lane_views(&self) -> Vec<LaneView> {
        let mut out: Vec<LaneView> = self
            .lanes
            .iter()
            .map(|(key, lane)| {
                let owner = lane.running().and_then(|id| self.owners.get(id));
                let (class, reason) = self.diag.tracker.class_of(key).unzip();
                LaneView {
                    session_key: key.clone(),
                    run_id: lane.running().map(str::to_owned),
                    activity: owner.map_or(Activity::Queued, |o| o.probe.activity()),
                    queue_depth: lane.waiting() as u32,
                    last_progress_ms: owner.map_or_else(
                        || lane.waiting_since().map_or(now_ms(), wall_ms),
                        |o| wall_ms(o.probe.last_progress()),
                    ),
                    class,
                    reason: reason.map(str::to_owned),
                }
            })
            .collect();
        for (key, (run_id, since)) in &self.diag.claims {
            if self.lanes.contains_key(key) {
                continue;
            }
            let (class, reason) = self.diag.tracker.class_of(key).unzip();
            out.push(LaneView {
                session_key: key.clone(),
                run_id: Some(run_id.clone()),
                activity: Activity::Claim,
                queue_depth: 0,
                last_progress_ms: wall_ms(*since),
                class,
                reason: reason.map(str::to_owned),
            });
        }
        out.sort_by(|a, b| a.session_key.cmp(&b.session_key));
        out
    }
}

/// An `Instant` in the past as wall-clock ms since the epoch.
fn wall_ms(at: Instant) -> u64 {
    now_ms().saturating_sub(at.elapsed().as_millis() as u64)
}

/// The report's log line, in OpenClaw's words (`stuck session: ...`); warn, except a
/// long-running session with nothing queued behind it (debug).
fn log_report(r: &LaneReport, last_assistant: Option<&str>) {
    let label = match r.class {
        SessionClass::Stuck => "stuck session",
        SessionClass::Stalled => "stalled session",
        _ => "long-running session",
    };
    let age_s = r.idle_ms / 1000;
    let recovery = match r.class {
        SessionClass::LongRunning => "none",
        _ => "checking",
    };
    let classification = ipc::diagnostics::classification(r.class, &r.reason);
    macro_rules! line {
        ($level:ident) => {
            tracing::$level!(
                target: "diagnostic",
                session_key = r.session_key.as_str(),
                state = r.class.short(),
                age_s,
                queue_depth = r.queue_depth,
                reason = r.reason.as_str(),
                classification,
                active_work_kind = r.activity.as_str(),
                run_id = r.run_id.as_deref().unwrap_or(""),
                repeat = r.repeat,
                // Quoted (OpenClaw's `lastAssistant="..."`): it holds spaces.
                last_assistant = ?last_assistant.unwrap_or(""),
                recovery,
                "{label}"
            )
        };
    }
    if r.class == SessionClass::LongRunning && r.queue_depth == 0 {
        line!(debug);
    } else {
        line!(warn);
    }
}

#[cfg(test)]
mod tests;
