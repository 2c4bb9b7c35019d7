//! Stuck-session diagnostics across the control link (R-I1..R-I3): the policy a worker gets
//! in its spec, what it reports about its session lanes, and the lane view
//! `diagnostics.lanes` shows. Since: protocol v2 (additive).

use serde::{Deserialize, Serialize};

/// OpenClaw's built-in warning threshold: two minutes without observed progress.
pub const DEFAULT_WARN_MS: u64 = 120_000;
/// The floor of the abort threshold (`diagnostics.stuck_session_abort_min_ms`).
pub const DEFAULT_ABORT_MIN_MS: u64 = 300_000;
/// Longest a transcript excerpt in a report is, in characters (R-I3).
pub const EXCERPT_MAX_CHARS: usize = 140;

/// `[diagnostics]` as a worker applies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiagnosticsPolicy {
    pub enabled: bool,
    /// No observed progress for this long makes a processing session worth reporting.
    pub warn_ms: u64,
    /// The abort threshold is at least this (and at least 3 x `warn_ms`).
    pub abort_min_ms: u64,
}

impl Default for DiagnosticsPolicy {
    fn default() -> Self {
        DiagnosticsPolicy {
            enabled: true,
            warn_ms: DEFAULT_WARN_MS,
            abort_min_ms: DEFAULT_ABORT_MIN_MS,
        }
    }
}

impl DiagnosticsPolicy {
    /// max(floor, 3 x warn): owned model calls turn `stalled` here, and stalled runs are
    /// abort-drained only past it (R-I2).
    pub fn abort_ms(&self) -> u64 {
        self.abort_min_ms.max(self.warn_ms.saturating_mul(3))
    }
}

/// How a session that made no observed progress past the warning threshold is classified.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SessionClass {
    /// Owned active work that may be quiet: a model call (until the abort threshold), a tool,
    /// an approval wait, a retry backoff.
    #[serde(rename = "session.long_running")]
    LongRunning,
    /// Active work with no recent progress: an owned model call or tool past the abort
    /// threshold, or a run between steps with nothing in flight.
    #[serde(rename = "session.stalled")]
    Stalled,
    /// Recoverable stale bookkeeping only: a lane or writer claim with no live owner, or
    /// queued work nothing will start.
    #[serde(rename = "session.stuck")]
    Stuck,
    #[serde(other)]
    Unknown,
}

impl SessionClass {
    pub fn as_str(self) -> &'static str {
        match self {
            SessionClass::LongRunning => "session.long_running",
            SessionClass::Stalled => "session.stalled",
            SessionClass::Stuck => "session.stuck",
            SessionClass::Unknown => "unknown",
        }
    }

    /// The label value in metrics (`long_running`, `stalled`, `stuck`).
    pub fn short(self) -> &'static str {
        self.as_str().trim_start_matches("session.")
    }
}

/// What the session's run was doing when it was observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Activity {
    /// Setting up the turn (hooks, prompt assembly) or between steps.
    Run,
    /// Waiting for the model's response.
    ModelCall,
    /// A tool is running.
    ToolCall,
    /// An `exec` waits for an operator's decision (protected from recovery).
    Approval,
    /// Waiting before a model retry.
    Backoff,
    /// Recording the outcome.
    Finishing,
    /// No run: the session has queued messages only.
    Queued,
    /// No run: a writer claim with no live owner.
    Claim,
    #[serde(other)]
    Unknown,
}

impl Activity {
    pub fn as_str(self) -> &'static str {
        match self {
            Activity::Run => "run",
            Activity::ModelCall => "model_call",
            Activity::ToolCall => "tool_call",
            Activity::Approval => "approval",
            Activity::Backoff => "backoff",
            Activity::Finishing => "finishing",
            Activity::Queued => "queued",
            Activity::Claim => "claim",
            Activity::Unknown => "unknown",
        }
    }
}

/// Why a session got its class, in words a log can carry (OpenClaw's, [`reasons`]).
pub type Reason = String;

/// The reasons a session is classified with (OpenClaw's words).
pub mod reasons {
    pub const MODEL_CALL_WITHOUT_PROGRESS: &str = "active_model_call_without_progress";
    pub const WORK_WITHOUT_PROGRESS: &str = "active_work_without_progress";
    pub const BLOCKED_TOOL_CALL: &str = "blocked_tool_call";
    pub const PROVIDER_RETRY_WAIT: &str = "provider_retry_wait";
    pub const HUMAN_INPUT_WAIT: &str = "human_input_wait";
    pub const STALE_SESSION_STATE: &str = "stale_session_state";
    pub const QUEUED_WORK_WITHOUT_RUN: &str = "queued_work_without_active_run";
    pub const ALL: &[&str] = &[
        MODEL_CALL_WITHOUT_PROGRESS,
        WORK_WITHOUT_PROGRESS,
        BLOCKED_TOOL_CALL,
        PROVIDER_RETRY_WAIT,
        HUMAN_INPUT_WAIT,
        STALE_SESSION_STATE,
        QUEUED_WORK_WITHOUT_RUN,
    ];
}

/// OpenClaw's `classification` of a report: `long_running`, `stalled_agent_run`,
/// `blocked_tool_call` or `stale_session_state`.
pub fn classification(class: SessionClass, reason: &str) -> &'static str {
    match (class, reason) {
        (SessionClass::Stuck, _) => "stale_session_state",
        (SessionClass::Stalled, reasons::BLOCKED_TOOL_CALL) => "blocked_tool_call",
        (SessionClass::Stalled, _) => "stalled_agent_run",
        _ => "long_running",
    }
}

/// One classification of one session (sent when it changes, and again with back-off while
/// the session stays the same).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneReport {
    pub session_key: String,
    pub class: SessionClass,
    pub reason: Reason,
    pub activity: Activity,
    #[serde(default)]
    pub run_id: Option<String>,
    /// Since the session's last observed progress (or since its stale state was first seen).
    pub idle_ms: u64,
    /// Messages waiting behind the run.
    pub queue_depth: u32,
    /// The processing generation the observation captured.
    pub generation: u64,
    pub observed_at_ms: u64,
    /// This report repeats an earlier one about the unchanged session (after back-off).
    #[serde(default)]
    pub repeat: u32,
    /// The session's latest transcript text, at most [`EXCERPT_MAX_CHARS`], one line, added
    /// by the background read worker (R-I3); absent when it was not ready in time.
    #[serde(default)]
    pub excerpt: Option<String>,
}

/// What a recovery does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryAction {
    /// Abort-drain a stalled run (stop reason `stalled`); queued work then runs.
    AbortRun,
    /// Release a lane whose run has no live owner.
    ReleaseLane,
    /// Release a writer claim no live run holds.
    ReleaseClaim,
    /// Start queued work nothing had scheduled.
    Reschedule,
    #[serde(other)]
    Unknown,
}

impl RecoveryAction {
    pub fn as_str(self) -> &'static str {
        match self {
            RecoveryAction::AbortRun => "abort_run",
            RecoveryAction::ReleaseLane => "release_lane",
            RecoveryAction::ReleaseClaim => "release_claim",
            RecoveryAction::Reschedule => "reschedule",
            RecoveryAction::Unknown => "unknown",
        }
    }
}

/// A recovery's phase: `requested` when it is decided, `completed` once it took effect (or
/// was given up: `outcome` says why).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecoveryPhase {
    Requested,
    Completed,
    #[serde(other)]
    Unknown,
}

/// One recovery step of one session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    pub session_key: String,
    pub phase: RecoveryPhase,
    pub action: RecoveryAction,
    #[serde(default)]
    pub run_id: Option<String>,
    pub generation: u64,
    /// `completed`: `recovered`, or why nothing was done (`resumed`, `replaced`, `protected`,
    /// `failed: ...`).
    #[serde(default)]
    pub outcome: Option<String>,
    pub at_ms: u64,
}

/// One session lane as `diagnostics.lanes` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaneView {
    pub session_key: String,
    #[serde(default)]
    pub run_id: Option<String>,
    pub activity: Activity,
    pub queue_depth: u32,
    /// Last observed progress of the running run (ms since the epoch); when the lane started
    /// waiting, for queued-only lanes.
    pub last_progress_ms: u64,
    /// The current classification, if the session is past the warning threshold.
    #[serde(default)]
    pub class: Option<SessionClass>,
    #[serde(default)]
    pub reason: Option<Reason>,
}

/// Makes `text` fit a report: one line, control and bidi characters replaced, whitespace
/// folded to single spaces, at most [`EXCERPT_MAX_CHARS`] characters (a longer text keeps
/// its first 137 and `...`, as OpenClaw's log fields).
pub fn excerpt(text: &str) -> String {
    let line = one_line(text, EXCERPT_MAX_CHARS + 1);
    if line.chars().count() <= EXCERPT_MAX_CHARS {
        return line;
    }
    let mut cut: String = line.chars().take(EXCERPT_MAX_CHARS - 3).collect();
    cut.push_str("...");
    cut
}

fn one_line(text: &str, max: usize) -> String {
    let mut out = String::new();
    let mut count = 0usize;
    let mut space = false;
    for c in text.chars() {
        let c = if crate::text::is_unshowable(c) || c.is_whitespace() {
            ' '
        } else {
            c
        };
        if c == ' ' {
            if space || out.is_empty() {
                continue;
            }
            space = true;
        } else {
            space = false;
        }
        if count == max {
            break;
        }
        out.push(c);
        count += 1;
    }
    if out.ends_with(' ') {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_abort_threshold_is_the_floor_or_three_warnings_r_i2() {
        let p = DiagnosticsPolicy::default();
        assert_eq!(p.abort_ms(), 360_000);
        let low = DiagnosticsPolicy {
            enabled: true,
            warn_ms: 1000,
            abort_min_ms: 2000,
        };
        assert_eq!(low.abort_ms(), 3000);
        let floor = DiagnosticsPolicy {
            warn_ms: 1000,
            abort_min_ms: 5000,
            ..low
        };
        assert_eq!(floor.abort_ms(), 5000);
    }

    #[test]
    fn an_excerpt_is_one_line_of_at_most_140_characters_r_i3() {
        let long = "é".repeat(500);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), EXCERPT_MAX_CHARS);
        assert!(cut.ends_with("..."));
        let exact = "x".repeat(EXCERPT_MAX_CHARS);
        assert_eq!(excerpt(&exact), exact);
        assert_eq!(
            excerpt("  line one\n\n\tline\u{202E}two\u{1b}[31m  "),
            "line one line two [31m"
        );
        assert_eq!(excerpt(""), "");
    }

    #[test]
    fn classes_have_openclaws_names() {
        assert_eq!(
            serde_json::to_value(SessionClass::Stalled).unwrap(),
            "session.stalled"
        );
        assert_eq!(SessionClass::Stuck.short(), "stuck");
    }
}
