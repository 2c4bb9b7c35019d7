//! Typed errors: [`Error`] for the framing/codec layer, [`RpcError`] for errors carried on the
//! wire between processes.

use serde::{Deserialize, Serialize};

/// Errors from reading or writing control-link frames.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("frame of {len} bytes exceeds the {max}-byte limit")]
    FrameTooLarge { len: usize, max: usize },
    #[error("connection closed in the middle of a frame ({remaining} bytes unread)")]
    Truncated { remaining: usize },
    #[error("malformed frame: {0}")]
    Decode(#[from] rmp_serde::decode::Error),
    #[error("cannot encode frame: {0}")]
    Encode(#[from] rmp_serde::encode::Error),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

/// Machine-readable error codes carried in [`RpcError`].
///
/// Since: protocol v1. New codes may be added; older peers decode them as `Unknown`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// A bounded queue is full; retry later.
    Overloaded,
    /// The peer has not completed the handshake.
    NotInitialized,
    /// The process is draining and admits no new work.
    Draining,
    /// The agent id is not configured.
    UnknownAgent,
    /// No common protocol version.
    VersionMismatch,
    /// The request was malformed or refers to something that does not exist.
    InvalidRequest,
    /// Storage failed.
    Storage,
    /// The session has a run in progress.
    SessionBusy,
    /// Anything else that went wrong inside the peer.
    Internal,
    #[serde(other)]
    Unknown,
}

/// An error carried on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(default)]
    pub retryable: bool,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let retryable = matches!(code, ErrorCode::Overloaded | ErrorCode::Draining);
        Self {
            code,
            message: message.into(),
            retryable,
        }
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.code, self.message)
    }
}

impl std::error::Error for RpcError {}
