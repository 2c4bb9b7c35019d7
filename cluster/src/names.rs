//! Names in the engine: buckets, streams, subjects and keys. Client-chosen strings (run ids,
//! which are idempotency keys, and session keys) never appear in a subject or a key as
//! written: they go in as a digest, and the records carry them in full.

use sha2::{Digest, Sha256};

/// Run records by run id (the idempotency key): claimed with create, so one per key.
pub const RUNS_BUCKET: &str = "lg-runs";
/// Terminal outcomes by run id: written with create, so the first writer wins.
pub const OUTCOMES_BUCKET: &str = "lg-outcomes";
/// Agent placement leases by agent id; the revision is the owner's epoch.
pub const PLACEMENT_BUCKET: &str = "lg-placement";
/// The gateways of the cluster, each key renewed while its gateway runs (lease TTL).
pub const NODES_BUCKET: &str = "lg-nodes";
/// Each agent's current workspace snapshot (see `workspace`), written with the revision
/// its writer last saw.
pub const WORKSPACE_HEADS_BUCKET: &str = "lg-workspace";
/// The workspace snapshots themselves (object store).
pub const WORKSPACE_OBJECTS: &str = "lg-workspaces";
/// Object store: run outcomes too large for one message (`OutcomeRecord::body`).
pub const OUTCOME_BODIES: &str = "lg-outcome-bodies";
/// The stream of runs waiting for their owner.
pub const RUNS_STREAM: &str = "LG_RUNS";
/// Its subjects: one per agent.
pub const RUNS_SUBJECTS: &str = "lg.run.*";
/// The agents' journals: one subject per agent ([`journal_subject`]).
pub const TX_STREAM: &str = "LG_TX";
/// Subjects of [`TX_STREAM`].
pub const TX_SUBJECTS: &str = "lg.tx.>";

/// A node or agent name usable as a subject token and a key: 1-64 of `a-z A-Z 0-9 _ -`.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{name:?} is not 1-64 characters of a-z, A-Z, 0-9, '_' or '-'"
        ))
    }
}

/// Hex SHA-256 of `s`: a key or subject token for a client-chosen string.
pub fn digest(s: &str) -> String {
    Sha256::digest(s.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The journal subject of an agent (a checked name: see [`check_name`]).
pub fn journal_subject(agent: &str) -> String {
    format!("lg.tx.{agent}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn client_strings_become_safe_tokens() {
        assert_eq!(digest("a").len(), 64);
        assert_eq!(journal_subject("main"), "lg.tx.main");
        assert!(check_name("h-1_A").is_ok());
        for bad in ["", "a.b", "a*", "a>", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
    }
}
