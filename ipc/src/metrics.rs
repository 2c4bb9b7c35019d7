//! What a worker counts for the supervisor's `/metrics` (sent as `Counters`, cumulative
//! since the worker started: a lost frame loses nothing, the next one has it all).
//! Since: protocol v2 (additive).

use serde::{Deserialize, Serialize};

/// A worker's counters since it started.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WorkerCounters {
    /// Model requests by provider, API and outcome (`ok`, `aborted`, or the failure class:
    /// `rate_limit`, `http_4xx`, `http_5xx`, `network`, `timeout`, `protocol`, `config`).
    pub model_requests: Vec<ModelRequests>,
    /// The agent db's commit latency.
    pub commits: Histogram,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRequests {
    pub provider: String,
    pub api: String,
    pub outcome: String,
    pub count: u64,
}

/// A histogram reading: cumulative counts per upper bound (`bounds`, then `+Inf` last), the
/// sum and the count.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    pub bounds: Vec<f64>,
    pub cumulative: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}
