//! Exec approvals across the control link: a worker asks (`tools.exec.security = "ask"`, a
//! command no allowlist pattern matches), the supervisor shows operators the request and
//! sends back their decision.

use serde::{Deserialize, Serialize};

/// What an operator decided.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalDecision {
    /// Run this command this once.
    AllowOnce,
    /// Run it, and add it to the agent's allowlist (kept in the gateway db).
    AllowAlways,
    Deny,
    #[serde(other)]
    Unknown,
}

impl ApprovalDecision {
    pub fn parse(s: &str) -> Option<ApprovalDecision> {
        Some(match s {
            "allow-once" => ApprovalDecision::AllowOnce,
            "allow-always" => ApprovalDecision::AllowAlways,
            "deny" => ApprovalDecision::Deny,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalDecision::AllowOnce => "allow-once",
            ApprovalDecision::AllowAlways => "allow-always",
            ApprovalDecision::Deny => "deny",
            ApprovalDecision::Unknown => "unknown",
        }
    }

    pub fn allows(self) -> bool {
        matches!(
            self,
            ApprovalDecision::AllowOnce | ApprovalDecision::AllowAlways
        )
    }
}

/// A command waiting for an operator.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    pub id: String,
    pub run_id: String,
    pub session_key: String,
    /// The command as the model wrote it, and its words (it runs without a shell).
    pub command: String,
    pub argv: Vec<String>,
    /// The workspace it runs in.
    pub cwd: String,
    pub created_at_ms: u64,
    /// Denied if unresolved by then.
    pub expires_at_ms: u64,
}

/// Why a pending approval ended without a decision.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalClosed {
    /// Unresolved past its deadline: denied.
    Expired,
    /// Its run ended (aborted, timed out) while it waited.
    RunEnded,
    #[serde(other)]
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decisions_use_openclaws_names() {
        for d in [
            ApprovalDecision::AllowOnce,
            ApprovalDecision::AllowAlways,
            ApprovalDecision::Deny,
        ] {
            assert_eq!(ApprovalDecision::parse(d.as_str()), Some(d));
            let json = serde_json::to_string(&d).unwrap();
            assert_eq!(json, format!("\"{}\"", d.as_str()));
        }
        assert_eq!(ApprovalDecision::parse("allow"), None);
        let later: ApprovalDecision = serde_json::from_str("\"allow-for-a-day\"").unwrap();
        assert_eq!(later, ApprovalDecision::Unknown);
        assert!(!later.allows());
    }
}
