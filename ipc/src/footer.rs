//! What a run's reply may carry after its text, as OpenClaw adds it: the usage footer of a
//! session's `/usage tokens|full` (`responseUsage`) and the raw trace of its `/trace raw`
//! (`traceLevel`); the settings a run is sent with ([`UsageFooter`], [`TraceLevel`]) and the
//! human formats of token counts and dollars that the worker's footer and `/usage cost`
//! share.

use serde::{Deserialize, Serialize};

/// A session's usage footer mode (`responseUsage`, `/usage off|tokens|full`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseUsage {
    Off,
    Tokens,
    Full,
    /// A mode a newer peer named: no footer.
    #[serde(other)]
    Unknown,
}

impl ResponseUsage {
    /// A mode by name or one of OpenClaw's aliases (`on` is `tokens`, `session` is `full`).
    pub fn parse(s: &str) -> Option<ResponseUsage> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "off" | "false" | "no" | "0" | "disable" | "disabled" => ResponseUsage::Off,
            "on" | "true" | "yes" | "1" | "enable" | "enabled" | "tokens" | "token" | "tok"
            | "minimal" | "min" => ResponseUsage::Tokens,
            "full" | "session" => ResponseUsage::Full,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ResponseUsage::Off => "off",
            ResponseUsage::Tokens => "tokens",
            ResponseUsage::Full => "full",
            ResponseUsage::Unknown => "unknown",
        }
    }
}

/// A session's trace level (`traceLevel`, `/trace on|off|raw`).
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceLevel {
    Off,
    /// OpenClaw's plugin trace lines: loopgate has no plugins, so nothing is added.
    On,
    /// A raw trace of the run after its reply.
    Raw,
    #[serde(other)]
    Unknown,
}

impl TraceLevel {
    /// A level by name or one of OpenClaw's aliases.
    pub fn parse(s: &str) -> Option<TraceLevel> {
        Some(match s.trim().to_ascii_lowercase().as_str() {
            "off" | "false" | "no" | "0" => TraceLevel::Off,
            "on" | "true" | "yes" | "1" => TraceLevel::On,
            "raw" | "unfiltered" => TraceLevel::Raw,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            TraceLevel::Off => "off",
            TraceLevel::On => "on",
            TraceLevel::Raw => "raw",
            TraceLevel::Unknown => "unknown",
        }
    }
}

/// A model's prices, in dollars per million tokens (the config's `cost`).
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPrice {
    pub provider: String,
    pub model: String,
    pub input: f64,
    pub output: f64,
    pub cache_read: f64,
    pub cache_write: f64,
}

/// The usage footer a run's reply carries (`SubmitRun::usage_footer`).
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UsageFooter {
    /// `full`: with the estimated cost (`tokens`: without).
    pub cost: bool,
    /// The prices of the models the run may use (its model and fallbacks that have one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub prices: Vec<ModelPrice>,
}

/// The prompt tokens neither read from nor written to the cache: a run's `input` counts
/// every prompt token, as providers report them; OpenClaw shows and prices these apart.
pub fn fresh_input(input: u64, cache_read: u64, cache_write: u64) -> u64 {
    input.saturating_sub(cache_read).saturating_sub(cache_write)
}

/// What `tokens` cost at `dollars` per million.
pub fn per_million(tokens: u64, dollars: f64) -> f64 {
    tokens as f64 * dollars / 1_000_000.0
}

/// Dollars as OpenClaw shows them: two decimals from a cent, four below.
pub fn usd(v: f64) -> String {
    if v >= 0.01 {
        format!("${v:.2}")
    } else {
        format!("${v:.4}")
    }
}

/// A token count as OpenClaw shows it: `950`, `1.2k`, `12k`, `1.5m`.
pub fn tokens(n: u64) -> String {
    if n < 1000 {
        return n.to_string();
    }
    if n < 1_000_000 {
        let k = n as f64 / 1000.0;
        let shown = if n >= 10_000 {
            format!("{k:.0}")
        } else {
            format!("{k:.1}")
        };
        if shown.parse::<f64>().is_ok_and(|v| v < 1000.0) {
            return format!("{shown}k");
        }
    }
    format!("{:.1}m", n as f64 / 1_000_000.0)
}

/// A count with thousands separators, as OpenClaw's `toLocaleString()` shows it: `12,345`.
pub fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_dollars_read_as_openclaws() {
        assert_eq!(tokens(950), "950");
        assert_eq!(tokens(1234), "1.2k");
        assert_eq!(tokens(12_345), "12k");
        assert_eq!(tokens(999_999), "1.0m");
        assert_eq!(tokens(1_500_000), "1.5m");
        assert_eq!(usd(0.0018), "$0.0018");
        assert_eq!(usd(1.5), "$1.50");
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1234), "1,234");
        assert_eq!(grouped(1_234_567), "1,234,567");
    }

    #[test]
    fn modes_and_levels_take_openclaws_aliases() {
        assert_eq!(ResponseUsage::parse("on"), Some(ResponseUsage::Tokens));
        assert_eq!(ResponseUsage::parse("Session"), Some(ResponseUsage::Full));
        assert_eq!(ResponseUsage::parse("disabled"), Some(ResponseUsage::Off));
        assert_eq!(ResponseUsage::parse("loud"), None);
        assert_eq!(TraceLevel::parse("unfiltered"), Some(TraceLevel::Raw));
        assert_eq!(TraceLevel::parse("YES"), Some(TraceLevel::On));
        assert_eq!(TraceLevel::parse("full"), None);
    }
}
