//! Thinking levels and reasoning visibility, as OpenClaw names them
//! (`../shared/spec/openclaw-protocol.md` 6.3). A level crosses the control link as its
//! canonical name; each wire API maps it onto its own knob in the worker.

use serde::{Deserialize, Serialize};

/// How hard a reasoning model thinks before it answers. On the control link it is the
/// canonical name (`SubmitRun::thinking`).
///
/// Since: protocol v2 (additive; the names crossed as strings before the type did).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Thinking {
    Off,
    Minimal,
    Low,
    Medium,
    High,
    XHigh,
    Adaptive,
    Max,
    Ultra,
    /// A level a newer peer named; the worker leaves the provider's default (as for no level).
    #[serde(other)]
    Unknown,
}

impl Thinking {
    pub const ALL: [Thinking; 9] = [
        Thinking::Off,
        Thinking::Minimal,
        Thinking::Low,
        Thinking::Medium,
        Thinking::High,
        Thinking::XHigh,
        Thinking::Adaptive,
        Thinking::Max,
        Thinking::Ultra,
    ];

    /// A level by name, OpenClaw's aliases included (`x-high` → `xhigh`, `highest` →
    /// `high`); case and surrounding space do not matter.
    pub fn parse(s: &str) -> Option<Thinking> {
        let s = s.trim().to_ascii_lowercase();
        Some(match s.as_str() {
            "off" | "none" => Thinking::Off,
            "minimal" => Thinking::Minimal,
            "low" => Thinking::Low,
            "medium" => Thinking::Medium,
            "high" | "highest" => Thinking::High,
            "xhigh" | "x-high" | "x_high" => Thinking::XHigh,
            "adaptive" => Thinking::Adaptive,
            "max" => Thinking::Max,
            "ultra" => Thinking::Ultra,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Thinking::Off => "off",
            Thinking::Minimal => "minimal",
            Thinking::Low => "low",
            Thinking::Medium => "medium",
            Thinking::High => "high",
            Thinking::XHigh => "xhigh",
            Thinking::Adaptive => "adaptive",
            Thinking::Max => "max",
            Thinking::Ultra => "ultra",
            Thinking::Unknown => "unknown",
        }
    }

    /// OpenAI's `reasoning_effort` / `reasoning.effort` (`minimal`, `low`, `medium`, `high`).
    pub fn openai_effort(self) -> Option<&'static str> {
        match self {
            Thinking::Off | Thinking::Unknown => None,
            Thinking::Minimal => Some("minimal"),
            Thinking::Low => Some("low"),
            Thinking::Medium | Thinking::Adaptive => Some("medium"),
            Thinking::High | Thinking::XHigh | Thinking::Max | Thinking::Ultra => Some("high"),
        }
    }

    /// Anthropic's extended thinking `budget_tokens` (the API's minimum is 1024).
    pub fn anthropic_budget(self) -> Option<u64> {
        match self {
            Thinking::Off | Thinking::Unknown => None,
            Thinking::Minimal => Some(1024),
            Thinking::Low => Some(2048),
            Thinking::Medium | Thinking::Adaptive => Some(8192),
            Thinking::High => Some(16_384),
            Thinking::XHigh => Some(24_576),
            Thinking::Max | Thinking::Ultra => Some(32_000),
        }
    }
}

/// Whether a run's reasoning reaches clients (OpenClaw's `reasoning` / `reasoningLevel`):
/// never (`off`), once the response is complete (`on`), or as it streams (`stream`). It is
/// saved with the assistant message either way, and never part of the reply. On the control
/// link only `on` and `stream` are sent (`SubmitRun::reasoning`; `None` is off).
///
/// Since: protocol v2 (additive; the names crossed as strings before the type did).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReasoningMode {
    #[default]
    Off,
    On,
    Stream,
    /// A mode a newer peer named; the worker shows no reasoning (as with `off`).
    #[serde(other)]
    Unknown,
}

impl ReasoningMode {
    pub fn parse(s: &str) -> Option<ReasoningMode> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "off" => ReasoningMode::Off,
            "on" => ReasoningMode::On,
            "stream" => ReasoningMode::Stream,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningMode::Off => "off",
            ReasoningMode::On => "on",
            ReasoningMode::Stream => "stream",
            ReasoningMode::Unknown => "unknown",
        }
    }
}

/// How much of a run's tool work its final reply tells (OpenClaw's `verboseLevel`): `off`;
/// `on`: a summary line per tool call; `full`: also each tool's output, and a failed tool's
/// error in the warning. `SubmitRun::verbose`; `None` is off.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum VerboseLevel {
    #[default]
    Off,
    On,
    Full,
    /// A level a newer peer named; the worker tells nothing more (as with `off`).
    #[serde(other)]
    Unknown,
}

impl VerboseLevel {
    /// A level by name or one of OpenClaw's aliases.
    pub fn parse(s: &str) -> Option<VerboseLevel> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "off" | "false" | "no" | "0" => VerboseLevel::Off,
            "on" | "minimal" | "true" | "yes" | "1" => VerboseLevel::On,
            "full" | "all" | "everything" => VerboseLevel::Full,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            VerboseLevel::Off => "off",
            VerboseLevel::On => "on",
            VerboseLevel::Full => "full",
            VerboseLevel::Unknown => "unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbose_levels_take_openclaws_aliases() {
        assert_eq!(VerboseLevel::parse(" Yes"), Some(VerboseLevel::On));
        assert_eq!(VerboseLevel::parse("everything"), Some(VerboseLevel::Full));
        assert_eq!(VerboseLevel::parse("0"), Some(VerboseLevel::Off));
        assert_eq!(VerboseLevel::parse("loud"), None);
        for l in [VerboseLevel::Off, VerboseLevel::On, VerboseLevel::Full] {
            assert_eq!(VerboseLevel::parse(l.as_str()), Some(l));
        }
    }

    #[test]
    fn levels_round_trip_and_aliases_resolve() {
        for t in Thinking::ALL {
            assert_eq!(Thinking::parse(t.as_str()), Some(t));
        }
        assert_eq!(Thinking::parse(" X-High "), Some(Thinking::XHigh));
        assert_eq!(Thinking::parse("highest"), Some(Thinking::High));
        assert_eq!(Thinking::parse("extreme"), None);
        assert_eq!(Thinking::Off.openai_effort(), None);
        assert_eq!(Thinking::Ultra.anthropic_budget(), Some(32_000));
        assert_eq!(ReasoningMode::parse("Stream"), Some(ReasoningMode::Stream));
        assert_eq!(ReasoningMode::parse("full"), None);
        // A newer peer's level (issue 22 item 5) asks no provider for anything, and no name
        // parses to it.
        assert_eq!(Thinking::Unknown.openai_effort(), None);
        assert_eq!(Thinking::Unknown.anthropic_budget(), None);
        assert_eq!(Thinking::parse("unknown"), None);
        assert_eq!(ReasoningMode::parse("unknown"), None);
    }
}
