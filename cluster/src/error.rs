//! What the engine's operations fail with, and the retry of the ones safe to repeat.

use std::time::Duration;

/// How long one engine request may take before it counts as failed (a lost quorum stalls
/// writes; the caller sees an error, never a silent success).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("cannot reach the NATS cluster at {urls}: {why}")]
    Connect { urls: String, why: String },
    /// The engine refused or did not answer (no quorum, timeout, server gone): nothing is
    /// known to be recorded.
    #[error("the cluster engine did not record it: {0}")]
    Engine(String),
    #[error("corrupt cluster record {key}: {why}")]
    Corrupt { key: String, why: String },
    #[error("invalid name: {0}")]
    Name(String),
    /// This gateway's settings disagree with the cluster's.
    #[error("{0}")]
    Mismatch(String),
}

impl ClusterError {
    pub(crate) fn engine(e: impl std::fmt::Display) -> ClusterError {
        ClusterError::Engine(e.to_string())
    }
}

/// Runs `op` again while the engine fails it, until it succeeds, fails otherwise or
/// `within` has passed. For operations that are safe to repeat (conditional writes,
/// deduplicated publishes, reads): while a stream elects a leader or a route comes up the
/// engine answers "no responders" or nothing at all for a few seconds.
pub(crate) async fn retrying<T, F, Fut>(within: Duration, mut op: F) -> Result<T, ClusterError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClusterError>>,
{
    let deadline = tokio::time::Instant::now() + within;
    let mut pause = Duration::from_millis(25);
    loop {
        match op().await {
            Err(ClusterError::Engine(why)) if tokio::time::Instant::now() < deadline => {
                tracing::debug!(why = why.as_str(), "Cluster engine busy; trying again.");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(500));
            }
            other => return other,
        }
    }
}

/// Whether `e` (or what caused it) is the engine refusing a conditional write because the
/// subject's last sequence was not the expected one (both of the server's codes for it).
pub(crate) fn wrong_last_sequence(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = cur {
        if let Some(js) = err.downcast_ref::<async_nats::jetstream::Error>() {
            let code = js.error_code();
            return code == async_nats::jetstream::ErrorCode::STREAM_WRONG_LAST_SEQUENCE
                || code == async_nats::jetstream::ErrorCode::STREAM_WRONG_LAST_SEQUENCE_CONSTANT;
        }
        cur = err.source();
    }
    false
}
