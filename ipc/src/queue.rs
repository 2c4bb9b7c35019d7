//! Queue modes: what a message does when it arrives while its session is busy
//! (`../shared/spec/openclaw-protocol.md` section 5, R-B3). The supervisor resolves a run's
//! policy (request > session > config) and hands it over with the run; the worker's session
//! lane applies it.

use serde::{Deserialize, Serialize};

/// What a message that arrives while its session is busy does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueMode {
    /// Joins the running turn: running tools finish, unstarted ones are skipped, the model
    /// sees the message before its next call. A run that cannot take it runs it after.
    #[default]
    Steer,
    /// Waits and runs as its own turn after the earlier ones.
    Followup,
    /// Waits; messages queued together run as one turn after the quiet window.
    Collect,
    /// Aborts the running turn (stop reason `interrupt`), then runs next.
    Interrupt,
}

impl QueueMode {
    pub const ALL: [QueueMode; 4] = [
        QueueMode::Steer,
        QueueMode::Followup,
        QueueMode::Collect,
        QueueMode::Interrupt,
    ];

    /// A mode by name; OpenClaw's `queue` is `followup` and `steer-backlog` is `steer`.
    pub fn parse(s: &str) -> Option<QueueMode> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "steer" | "steer-backlog" | "steer+backlog" => QueueMode::Steer,
            "followup" | "follow-up" | "queue" => QueueMode::Followup,
            "collect" => QueueMode::Collect,
            "interrupt" => QueueMode::Interrupt,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueMode::Steer => "steer",
            QueueMode::Followup => "followup",
            QueueMode::Collect => "collect",
            QueueMode::Interrupt => "interrupt",
        }
    }
}

/// Which message gives way when a session's queue is full.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum QueueDrop {
    /// The oldest waiting message ends as an error.
    Old,
    /// The arriving message ends as an error.
    New,
    /// The oldest waiting message is folded into a summary line the next turn carries.
    #[default]
    Summarize,
}

impl QueueDrop {
    pub fn parse(s: &str) -> Option<QueueDrop> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "old" => QueueDrop::Old,
            "new" => QueueDrop::New,
            "summarize" => QueueDrop::Summarize,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            QueueDrop::Old => "old",
            QueueDrop::New => "new",
            QueueDrop::Summarize => "summarize",
        }
    }
}

/// The queue policy of one run.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueuePolicy {
    pub mode: QueueMode,
    /// `collect`'s quiet window: the batch starts this long after its newest message.
    pub debounce_ms: u64,
    /// Messages waiting in one session at most.
    pub cap: u32,
    pub drop: QueueDrop,
}

impl Default for QueuePolicy {
    /// OpenClaw's defaults: `steer`, 500 ms, 20, `summarize`.
    fn default() -> Self {
        QueuePolicy {
            mode: QueueMode::Steer,
            debounce_ms: 500,
            cap: 20,
            drop: QueueDrop::Summarize,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases_parse() {
        for m in QueueMode::ALL {
            assert_eq!(QueueMode::parse(m.as_str()), Some(m));
        }
        assert_eq!(QueueMode::parse(" Queue "), Some(QueueMode::Followup));
        assert_eq!(QueueMode::parse("steer-backlog"), Some(QueueMode::Steer));
        assert_eq!(QueueMode::parse("later"), None);
        for d in [QueueDrop::Old, QueueDrop::New, QueueDrop::Summarize] {
            assert_eq!(QueueDrop::parse(d.as_str()), Some(d));
        }
        assert_eq!(QueueDrop::parse("oldest"), None);
    }
}
