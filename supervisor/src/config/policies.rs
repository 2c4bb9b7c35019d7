//! The runtime policies: worker supervision (`[workers]` → [`WorkersConfig`]), what a
//! message does while its session is busy (`[messages.queue]` → `ipc::queue::QueuePolicy`)
//! and stuck-session diagnostics (`[diagnostics]` → `ipc::diagnostics::DiagnosticsPolicy`).

use std::time::Duration;

use serde::Deserialize;

use super::invalid::Invalid;
use super::secs_to_ms;

/// Default time a worker may have nothing to do before it retires.
pub const DEFAULT_IDLE_EXIT_SECONDS: u64 = 300;

/// Default time a worker may leave heartbeats unanswered before it is killed as hung.
pub const DEFAULT_HEARTBEAT_TIMEOUT_SECONDS: f64 = 10.0;

/// Worker supervision settings (`[workers]`).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawWorkers {
    /// A worker that answers no heartbeat for this long is killed as hung.
    pub heartbeat_timeout_seconds: Option<f64>,
    /// First restart delay after a crash; doubles per consecutive crash (with jitter).
    pub restart_backoff_initial_ms: Option<u64>,
    pub restart_backoff_max_ms: Option<u64>,
    /// This many crashes within `crash_loop_window_seconds` mark the agent failed.
    pub crash_loop_max: Option<u32>,
    pub crash_loop_window_seconds: Option<u64>,
    /// A worker with nothing to do for this long drains and exits (0: never).
    pub idle_exit_seconds: Option<u64>,
    /// Most workers running at once (0: no cap): past it, the least recently used idle
    /// ones retire early.
    pub max_live: Option<usize>,
}

/// Worker supervision policy.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkersConfig {
    pub heartbeat_timeout: Duration,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
    pub crash_loop_max: u32,
    pub crash_loop_window: Duration,
    /// How long a worker may have nothing to do before it retires (`None`: never).
    pub idle_exit: Option<Duration>,
    /// Most workers running at once (`None`: no cap); see `control::retire`.
    pub max_live: Option<usize>,
}

pub(super) fn resolve_workers(w: &RawWorkers) -> Result<WorkersConfig, Invalid> {
    let heartbeat = w
        .heartbeat_timeout_seconds
        .unwrap_or(DEFAULT_HEARTBEAT_TIMEOUT_SECONDS);
    if !(heartbeat.is_finite() && heartbeat >= 0.1) {
        return Err(Invalid::new(
            "workers.heartbeat_timeout_seconds",
            "must be at least 0.1",
        ));
    }
    Ok(WorkersConfig {
        heartbeat_timeout: Duration::from_millis(secs_to_ms(heartbeat)),
        backoff_initial: Duration::from_millis(w.restart_backoff_initial_ms.unwrap_or(50)),
        backoff_max: Duration::from_millis(w.restart_backoff_max_ms.unwrap_or(30_000)),
        crash_loop_max: match w.crash_loop_max.unwrap_or(5) {
            0 => return Err(Invalid::new(
                "workers.crash_loop_max",
                "must be at least 1 (crashes within the window before an agent is marked failed)",
            )),
            n => n,
        },
        crash_loop_window: Duration::from_secs(w.crash_loop_window_seconds.unwrap_or(60)),
        idle_exit: match w.idle_exit_seconds.unwrap_or(DEFAULT_IDLE_EXIT_SECONDS) {
            0 => None,
            s => Some(Duration::from_secs(s)),
        },
        max_live: w.max_live.filter(|n| *n > 0),
    })
}

/// `[messages]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawMessages {
    #[serde(default)]
    pub queue: RawQueue,
}

/// `[messages.queue]`: OpenClaw's `messages.queue` (defaults `steer`, 500 ms, 20,
/// `summarize`).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawQueue {
    pub mode: Option<String>,
    pub debounce_ms: Option<u64>,
    pub cap: Option<u32>,
    pub drop: Option<String>,
    /// Messages waiting for a busy session, over all of one agent's sessions.
    pub max_queued_per_agent: Option<usize>,
    /// Their bytes.
    pub max_queued_bytes_per_agent: Option<u64>,
    /// Messages waiting for a busy session, over all agents.
    pub max_queued_total: Option<usize>,
    /// Their bytes.
    pub max_queued_bytes_total: Option<u64>,
}

/// How many messages may wait for busy sessions, and how many bytes they may hold, per agent
/// and in all (`messages.queue.max_queued_*`). A message past them is refused `UNAVAILABLE`
/// (retryable) at admission: the per-session `cap` alone let 40 sessions hold 800 messages of
/// 256 KiB (230 MB in the supervisor, as much again in the worker).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    pub per_agent: usize,
    pub per_agent_bytes: u64,
    pub total: usize,
    pub total_bytes: u64,
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits {
            per_agent: 200,
            per_agent_bytes: 32 * 1024 * 1024,
            total: 1000,
            total_bytes: 128 * 1024 * 1024,
        }
    }
}

pub(super) fn resolve_queue_limits(q: &RawQueue) -> Result<QueueLimits, Invalid> {
    let d = QueueLimits::default();
    let l = QueueLimits {
        per_agent: q.max_queued_per_agent.unwrap_or(d.per_agent),
        per_agent_bytes: q.max_queued_bytes_per_agent.unwrap_or(d.per_agent_bytes),
        total: q.max_queued_total.unwrap_or(d.total),
        total_bytes: q.max_queued_bytes_total.unwrap_or(d.total_bytes),
    };
    if l.per_agent == 0 || l.total == 0 || l.per_agent_bytes == 0 || l.total_bytes == 0 {
        return Err(Invalid::new(
            "messages.queue.max_queued_*",
            "must be at least 1",
        ));
    }
    Ok(l)
}

/// Longest `collect` quiet window accepted (also a session's own, `/queue debounce:`).
pub const MAX_DEBOUNCE_MS: u64 = 60_000;
/// Largest `messages.queue.cap` accepted (a session's waiting messages are held in memory;
/// also a session's own, `/queue cap:`).
pub const MAX_QUEUE_CAP: u32 = 1000;

pub(super) fn resolve_queue(q: &RawQueue) -> Result<ipc::queue::QueuePolicy, Invalid> {
    use ipc::queue::{QueueDrop, QueueMode, QueuePolicy};
    let d = QueuePolicy::default();
    let mode = match &q.mode {
        None => d.mode,
        Some(m) => QueueMode::parse(m).ok_or_else(|| {
            Invalid::new(
                "messages.queue.mode",
                format!("{m:?} is not one of steer, followup, collect, interrupt"),
            )
        })?,
    };
    let drop = match &q.drop {
        None => d.drop,
        Some(x) => QueueDrop::parse(x).ok_or_else(|| {
            Invalid::new(
                "messages.queue.drop",
                format!("{x:?} is not one of old, new, summarize"),
            )
        })?,
    };
    let debounce_ms = q.debounce_ms.unwrap_or(d.debounce_ms);
    if debounce_ms > MAX_DEBOUNCE_MS {
        return Err(Invalid::new(
            "messages.queue.debounce_ms",
            format!("at most {MAX_DEBOUNCE_MS}"),
        ));
    }
    let cap = q.cap.unwrap_or(d.cap);
    if !(1..=MAX_QUEUE_CAP).contains(&cap) {
        return Err(Invalid::new(
            "messages.queue.cap",
            format!("between 1 and {MAX_QUEUE_CAP}"),
        ));
    }
    Ok(QueuePolicy {
        mode,
        debounce_ms,
        cap,
        drop,
    })
}

/// `[diagnostics]`: OpenClaw's `diagnostics.enabled` / `stuckSessionWarnMs`, and the floor of
/// the abort threshold (5 minutes; lowered by tests).
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDiagnostics {
    pub enabled: Option<bool>,
    pub stuck_session_warn_ms: Option<u64>,
    pub stuck_session_abort_min_ms: Option<u64>,
}

/// Bounds of the diagnostics thresholds: 100 ms .. 1 day.
const DIAG_MIN_MS: u64 = 100;
const DIAG_MAX_MS: u64 = 86_400_000;

pub(super) fn resolve_diagnostics(
    d: &RawDiagnostics,
) -> Result<ipc::diagnostics::DiagnosticsPolicy, Invalid> {
    let def = ipc::diagnostics::DiagnosticsPolicy::default();
    let check = |v: Option<u64>, key: &str, default: u64| match v {
        None => Ok(default),
        Some(ms) if (DIAG_MIN_MS..=DIAG_MAX_MS).contains(&ms) => Ok(ms),
        Some(_) => Err(Invalid::new(
            format!("diagnostics.{key}"),
            format!("between {DIAG_MIN_MS} and {DIAG_MAX_MS} (milliseconds)"),
        )),
    };
    Ok(ipc::diagnostics::DiagnosticsPolicy {
        enabled: d.enabled.unwrap_or(def.enabled),
        warn_ms: check(
            d.stuck_session_warn_ms,
            "stuck_session_warn_ms",
            def.warn_ms,
        )?,
        abort_min_ms: check(
            d.stuck_session_abort_min_ms,
            "stuck_session_abort_min_ms",
            def.abort_min_ms,
        )?,
    })
}
