//! Stuck-session diagnostics (R-I1, R-I2): which sessions made no observed progress past
//! the warning threshold, what they are, when the same unchanged session is reported again,
//! and which recovery is due. No I/O: the worker observes its lanes every tick
//! ([`Tracker::observe`]), publishes the reports and carries out the recoveries
//! (`crate::stuck`).
//!
//! Rules (`../shared/spec/agent-loop.md`, "Stuck session diagnostics"):
//! - an owned model call, tool, approval wait or retry backoff is `long_running`; an owned
//!   model call or tool turns `stalled` at the abort threshold; a run with nothing in flight
//!   is `stalled` at once (active work, no progress);
//! - `stuck` is stale bookkeeping only: a lane whose run has no live owner, a writer claim
//!   held by no live run, queued work nothing will start;
//! - recoveries are due only on the observation after the report, when the session is
//!   still exactly as reported (same processing generation and progress): a run that
//!   resumed or was replaced in between is never touched. Stalled runs are abort-drained
//!   only past the abort threshold; a pending approval protects its run;
//! - an unchanged `long_running` or `stuck` session is reported again after a back-off in
//!   idle time: next at max(last + warn, 2 x last), so 2, 4, 8, 16 minutes with the default;
//!   `stalled` ones every observation (as OpenClaw's).
//!
//! Reasons are OpenClaw's (`active_model_call_without_progress`, `blocked_tool_call`,
//! `active_work_without_progress`, `provider_retry_wait`, `human_input_wait`,
//! `stale_session_state`, `queued_work_without_active_run`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use ipc::diagnostics::{reasons, Activity, DiagnosticsPolicy, RecoveryAction, SessionClass};

/// What a running run's driver tells the diagnostics: progress and what it is doing. Shared
/// between the driver and the worker's main loop; lock-free.
pub struct Probe {
    started: Instant,
    /// Observed progress so far (events emitted, model output read, tool output).
    progress: AtomicU64,
    /// When the last progress was observed, in ms after `started`.
    last_ms: AtomicU64,
    activity: AtomicU8,
}

const ACTIVITIES: [Activity; 6] = [
    Activity::Run,
    Activity::ModelCall,
    Activity::ToolCall,
    Activity::Approval,
    Activity::Backoff,
    Activity::Finishing,
];

impl Probe {
    pub fn new(now: Instant) -> Self {
        Probe {
            started: now,
            progress: AtomicU64::new(0),
            last_ms: AtomicU64::new(0),
            activity: AtomicU8::new(0),
        }
    }

    /// Something observable happened (a reply delta, a tool step, a status, a block).
    pub fn progressed(&self) {
        let ms = self.started.elapsed().as_millis() as u64;
        self.last_ms.store(ms, Ordering::Relaxed);
        self.progress.fetch_add(1, Ordering::Release);
    }

    /// What the run does now. A change is progress: the quiet time of what came before
    /// (an operator deciding, a retry backoff) is not counted against what follows.
    pub fn set_activity(&self, a: Activity) {
        let i = ACTIVITIES.iter().position(|x| *x == a).unwrap_or(0) as u8;
        if self.activity.swap(i, Ordering::Relaxed) != i {
            self.progressed();
        }
    }

    pub fn activity(&self) -> Activity {
        ACTIVITIES
            .get(self.activity.load(Ordering::Relaxed) as usize)
            .copied()
            .unwrap_or(Activity::Run)
    }

    pub fn progress(&self) -> u64 {
        self.progress.load(Ordering::Acquire)
    }

    /// When the last progress was observed (the start if none yet).
    pub fn last_progress(&self) -> Instant {
        self.started + Duration::from_millis(self.last_ms.load(Ordering::Relaxed))
    }
}

/// A run as one observation saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSeen {
    pub run_id: String,
    /// The task driving it is still there.
    pub owner_alive: bool,
    pub activity: Activity,
    pub progress: u64,
    pub last_progress: Instant,
}

/// One session as one observation saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Seen {
    pub session_key: String,
    /// The lane's processing generation: bumped whenever a run starts in it.
    pub generation: u64,
    pub run: Option<RunSeen>,
    pub queue_depth: u32,
    /// Queued work nothing has scheduled, since when (no run, not ready, no quiet window,
    /// a free slot).
    pub unscheduled_since: Option<Instant>,
    /// A writer claim no live run of this worker holds: the run id and when it was first
    /// seen.
    pub stale_claim: Option<(String, Instant)>,
}

/// What the tracker asks the worker to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Report(Report),
    Recover(Recovery),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub session_key: String,
    pub class: SessionClass,
    pub reason: &'static str,
    pub activity: Activity,
    pub run_id: Option<String>,
    pub idle: Duration,
    pub queue_depth: u32,
    pub generation: u64,
    /// How many reports about the unchanged session came before this one.
    pub repeat: u32,
}

/// A recovery to carry out; `run_id`, `generation` and `progress` are what the observation
/// captured (the worker checks them again before it acts).
#[derive(Debug, Clone, PartialEq)]
pub struct Recovery {
    pub session_key: String,
    pub action: RecoveryAction,
    pub run_id: Option<String>,
    pub generation: u64,
    pub progress: u64,
}

/// What makes a session "unchanged" between observations.
#[derive(Debug, Clone, PartialEq)]
struct Fingerprint {
    generation: u64,
    run_id: Option<String>,
    progress: u64,
    claim: Option<String>,
    class: SessionClass,
}

struct Tracked {
    fp: Fingerprint,
    class: SessionClass,
    reason: &'static str,
    repeat: u32,
    /// Idle time of the last report (the back-off counts in idle time, as OpenClaw's).
    reported_at: Duration,
    /// A recovery was asked for this fingerprint (not asked twice).
    recovering: bool,
    /// The previous observation saw it exactly so (the recovery gate).
    confirmed: bool,
}

/// Per-worker diagnostic state: the sessions past the warning threshold.
pub struct Tracker {
    policy: DiagnosticsPolicy,
    tracked: HashMap<String, Tracked>,
}

/// A classification: class, reason, the activity shown and the recovery it calls for.
struct Verdict {
    class: SessionClass,
    reason: &'static str,
    activity: Activity,
    idle: Duration,
    /// The recovery, and whether it is already due by time (stalled: past the abort
    /// threshold).
    recovery: Option<RecoveryAction>,
}

impl Tracker {
    pub fn new(policy: DiagnosticsPolicy) -> Self {
        Tracker {
            policy,
            tracked: HashMap::new(),
        }
    }

    /// How often the worker should observe: a quarter of the warning threshold, between
    /// 100 ms and 30 s.
    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.policy.warn_ms / 4)
            .clamp(Duration::from_millis(100), Duration::from_secs(30))
    }

    fn warn(&self) -> Duration {
        Duration::from_millis(self.policy.warn_ms)
    }

    fn abort(&self) -> Duration {
        Duration::from_millis(self.policy.abort_ms())
    }

    /// The session's current class and reason, if it is past the warning threshold.
    pub fn class_of(&self, session_key: &str) -> Option<(SessionClass, &'static str)> {
        self.tracked.get(session_key).map(|t| (t.class, t.reason))
    }

    fn classify(&self, s: &Seen, now: Instant) -> Option<Verdict> {
        let (warn, abort) = (self.warn(), self.abort());
        if let Some(run) = &s.run {
            let idle = now.saturating_duration_since(run.last_progress);
            if idle < warn {
                return None;
            }
            if !run.owner_alive {
                // The lane still says running and nothing drives the run: stale bookkeeping.
                return Some(Verdict {
                    class: SessionClass::Stuck,
                    reason: reasons::STALE_SESSION_STATE,
                    activity: run.activity,
                    idle,
                    recovery: Some(RecoveryAction::ReleaseLane),
                });
            }
            let past_abort = idle >= abort;
            let stalled = |reason| Verdict {
                class: SessionClass::Stalled,
                reason,
                activity: run.activity,
                idle,
                recovery: past_abort.then_some(RecoveryAction::AbortRun),
            };
            let long = |reason| Verdict {
                class: SessionClass::LongRunning,
                reason,
                activity: run.activity,
                idle,
                recovery: None,
            };
            return Some(match run.activity {
                // Protected: an operator decides, within the approval's own timeout.
                Activity::Approval => long(reasons::HUMAN_INPUT_WAIT),
                // Bounded by the retry policy itself.
                Activity::Backoff => long(reasons::PROVIDER_RETRY_WAIT),
                // Slow or non-streaming providers are not stalled before the abort threshold.
                Activity::ModelCall if past_abort => stalled(reasons::WORK_WITHOUT_PROGRESS),
                Activity::ModelCall => long(reasons::MODEL_CALL_WITHOUT_PROGRESS),
                Activity::ToolCall => stalled(reasons::BLOCKED_TOOL_CALL),
                // Nothing in flight and no progress: active work that stopped.
                _ => stalled(reasons::WORK_WITHOUT_PROGRESS),
            });
        }
        if let Some((_, since)) = &s.stale_claim {
            let idle = now.saturating_duration_since(*since);
            return (idle >= warn).then_some(Verdict {
                class: SessionClass::Stuck,
                reason: reasons::STALE_SESSION_STATE,
                activity: Activity::Claim,
                idle,
                recovery: Some(RecoveryAction::ReleaseClaim),
            });
        }
        if let Some(since) = s.unscheduled_since {
            let idle = now.saturating_duration_since(since);
            return (idle >= warn).then_some(Verdict {
                class: SessionClass::Stuck,
                reason: reasons::QUEUED_WORK_WITHOUT_RUN,
                activity: Activity::Queued,
                idle,
                recovery: Some(RecoveryAction::Reschedule),
            });
        }
        None
    }

    /// One observation of every session the worker has state for; sessions not in `seen`
    /// are idle.
    pub fn observe(&mut self, now: Instant, seen: &[Seen]) -> Vec<Step> {
        let mut steps = Vec::new();
        let mut present = std::collections::HashSet::new();
        let warn = self.warn();
        for s in seen {
            present.insert(s.session_key.as_str());
            let Some(v) = self.classify(s, now) else {
                self.tracked.remove(&s.session_key);
                continue;
            };
            let fp = Fingerprint {
                generation: s.generation,
                run_id: s.run.as_ref().map(|r| r.run_id.clone()),
                progress: s.run.as_ref().map_or(0, |r| r.progress),
                claim: s.stale_claim.as_ref().map(|(id, _)| id.clone()),
                class: v.class,
            };
            let report = |repeat| {
                Step::Report(Report {
                    session_key: s.session_key.clone(),
                    class: v.class,
                    reason: v.reason,
                    activity: v.activity,
                    run_id: fp.run_id.clone(),
                    idle: v.idle,
                    queue_depth: s.queue_depth,
                    generation: s.generation,
                    repeat,
                })
            };
            let t = match self.tracked.get_mut(&s.session_key) {
                Some(t) if t.fp == fp => {
                    t.confirmed = true;
                    // Stalled sessions are reported every observation; the others back off
                    // while unchanged: next at max(last + warn, 2 x last) of idle time.
                    let next = t.reported_at.saturating_add(warn).max(t.reported_at * 2);
                    if v.class == SessionClass::Stalled || v.idle >= next {
                        t.repeat += 1;
                        t.reported_at = v.idle;
                        steps.push(report(t.repeat));
                    }
                    t
                }
                _ => {
                    // New, or changed (another class, run or generation): a fresh report.
                    steps.push(report(0));
                    self.tracked.insert(
                        s.session_key.clone(),
                        Tracked {
                            fp: fp.clone(),
                            class: v.class,
                            reason: v.reason,
                            repeat: 0,
                            reported_at: v.idle,
                            recovering: false,
                            confirmed: false,
                        },
                    );
                    continue;
                }
            };
            t.reason = v.reason;
            // Due only on an observation after the report that found the session unchanged.
            if let Some(action) = v.recovery.filter(|_| t.confirmed && !t.recovering) {
                t.recovering = true;
                steps.push(Step::Recover(Recovery {
                    session_key: s.session_key.clone(),
                    action,
                    run_id: fp.run_id.clone().or(fp.claim.clone()),
                    generation: s.generation,
                    progress: fp.progress,
                }));
            }
        }
        self.tracked.retain(|k, _| present.contains(k.as_str()));
        steps
    }

    /// A recovery of `session_key` at `generation` completed: its diagnostic state goes idle,
    /// unless another processing generation is current by now.
    pub fn recovered(&mut self, session_key: &str, generation: u64) {
        if self
            .tracked
            .get(session_key)
            .is_some_and(|t| t.fp.generation == generation)
        {
            self.tracked.remove(session_key);
        }
    }

    /// A recovery that did nothing (the session changed or was protected) may be asked
    /// again for a later observation.
    pub fn retry_later(&mut self, session_key: &str) {
        if let Some(t) = self.tracked.get_mut(session_key) {
            t.recovering = false;
            t.confirmed = false;
        }
    }

    /// Everything tracked is forgotten (diagnostics stopping).
    pub fn clear(&mut self) {
        self.tracked.clear();
    }
}

#[cfg(test)]
mod tests;
