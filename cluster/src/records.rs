//! What the cluster stores, typed once: the engine writes and reads only these (JSON, so the
//! chaos checker and an operator with the `nats` CLI can read them too).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// A run some gateway accepted: what its idempotency key (the run id) is bound to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunRecord {
    pub run_id: String,
    pub agent_id: String,
    pub session_key: String,
    /// Unix ms.
    pub accepted_at: u64,
    /// What identifies the request besides its key (a retry must ask the same).
    pub request_hash: String,
    /// The gateway that accepted it.
    pub node: String,
    /// Who started it: set once, so a run executes at most once cluster-wide.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<StartRecord>,
}

impl RunRecord {
    /// Whether `other` is the same acceptance (whatever happened to the run since).
    pub fn same_request(&self, other: &RunRecord) -> bool {
        self.run_id == other.run_id
            && self.agent_id == other.agent_id
            && self.session_key == other.session_key
            && self.accepted_at == other.accepted_at
            && self.request_hash == other.request_hash
            && self.node == other.node
    }
}

/// The gateway that started a run, under which placement epoch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StartRecord {
    pub node: String,
    pub epoch: u64,
}

/// A run's terminal: the first one written is the run's, whoever wrote it.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OutcomeRecord {
    pub run_id: String,
    /// Who wrote it: the owner, or the gateway that closed the run of a lost owner.
    pub node: String,
    /// The gateway's stored terminal, as that gateway serialized it. As read through the
    /// engine it is always here; as stored, it is `null` when `body` names it instead.
    pub terminal: Box<RawValue>,
    /// The object (store `lg-outcome-bodies`) holding `terminal`, for an outcome too large
    /// for one message (a long reply); the engine reads it back before anyone sees the
    /// record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
}

/// An agent's placement: which gateway runs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementRecord {
    pub node: String,
    /// The ownership's epoch, once a renewal wrote it (before: the entry's revision).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
}

/// A gateway of the cluster, renewed while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeRecord {
    pub node: String,
    /// Unix ms of the last renewal.
    pub at: u64,
}
