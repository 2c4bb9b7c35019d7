//! Session operations on the control link: what the supervisor asks of an agent's worker
//! about one session (read its history, reset, delete, inject a note), and the typed answer.
//!
//! The worker speaks in its own terms here (stored transcript messages, session ids); the
//! supervisor projects them into Gateway payloads. No Gateway field name is decided here.

use serde::{Deserialize, Serialize};

use crate::error::RpcError;

/// Why a session's transcript window starts over.
///
/// Since: protocol v1 (a string then; the same bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResetReason {
    /// `/new`: a new conversation.
    New,
    /// `/reset`: the same conversation, emptied.
    Reset,
    #[serde(other)]
    Unknown,
}

impl ResetReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ResetReason::New => "new",
            ResetReason::Reset | ResetReason::Unknown => "reset",
        }
    }
}

/// A session operation the worker performs on its agent database.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionOp {
    /// Since: protocol v1. The visible messages of the current transcript window, newest
    /// `limit`, within `max_bytes` of stored message text (the newest that fit).
    History {
        session_key: String,
        limit: u32,
        /// Since: protocol v2. Transcript rows to skip, newest first (paging back).
        #[serde(default)]
        offset: u64,
        /// Since: protocol v2. `None`: the worker's cap.
        #[serde(default)]
        max_bytes: Option<u64>,
        /// Since: protocol v2. Runs whose recorded user message to look up (at most 50),
        /// wherever it is in the transcript.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        input_run_ids: Vec<String>,
    },
    /// Since: protocol v1. Start a new transcript window (keeps the session id).
    Reset {
        session_key: String,
        reason: ResetReason,
    },
    /// Since: protocol v1. Delete the session (and its transcript if asked).
    Delete {
        session_key: String,
        delete_transcript: bool,
    },
    /// Since: protocol v2. Append an assistant message written by an operator (not by the
    /// model) to an existing session, through the writer queue.
    Inject { session_key: String, text: String },
    /// Since: protocol v2. Compact the session's context now: the older messages are
    /// summarized by the agent's model and the summary replaces them for the model, through
    /// the writer fence (refused if a run holds the session or it changed meanwhile).
    Compact { session_key: String },
    /// Since: protocol v2 (additive). Every session lane of the worker, with its
    /// diagnostic classification (`diagnostics.lanes`). `session_key` is unused (empty).
    Lanes,
    /// Since: protocol v2 (additive). An attachment a message of the session carries, by
    /// the digits of its digest a `media://inbound/` name holds (the Control UI shows it).
    Media { session_key: String, digest: String },
    /// Since: protocol v2 (additive). Record a slash command the supervisor answered, as
    /// OpenClaw records one: the command as a user message and the gateway's reply as an
    /// assistant message, both of run `record.run_id` (the session is made if it has none).
    /// Not recorded while a run holds the session (the answer says so).
    Command {
        session_key: String,
        record: CommandRecord,
    },
    #[serde(other)]
    Unknown,
}

/// A slash command and the gateway's reply to it, to record.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandRecord {
    pub run_id: String,
    /// The message as sent (`/think high`).
    pub command: String,
    pub reply: String,
    pub timestamp: u64,
    /// The reply tells of a change to the session (OpenClaw's `openclawStatusNotice`).
    #[serde(default)]
    pub notice: bool,
    /// Neither row is part of the model's context (`/status`: OpenClaw's
    /// `contextFreeCommand`). Replies never are; commands otherwise are.
    #[serde(default)]
    pub context_free: bool,
}

impl SessionOp {
    /// Longest the supervisor waits for the answer, in seconds (a compaction calls the
    /// model).
    pub fn timeout_secs(&self) -> u64 {
        match self {
            SessionOp::Compact { .. } => 600,
            SessionOp::Lanes => 10,
            _ => 60,
        }
    }
}

/// A message as recorded in a transcript: where it is and what was stored.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredMessage {
    /// The transcript entry's id.
    pub entry_id: String,
    /// Transcript position.
    pub seq: i64,
    /// `user`, `assistant` or `toolResult`.
    pub role: String,
    /// The run that wrote it (`None`: not written by a run, e.g. injected).
    #[serde(default)]
    pub run_id: Option<String>,
    /// The stored message object (pi-style `{role, content, timestamp, ...}`), JSON text;
    /// `{}` when `omitted_bytes` is set.
    pub message_json: String,
    /// The message was larger than the whole page's byte cap: it is left out and only its
    /// place and size are given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub omitted_bytes: Option<u64>,
}

/// A run's user message, recorded in the transcript.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputConsumed {
    pub run_id: String,
    pub entry_id: String,
}

/// Most run ids one history read looks up.
pub const MAX_INPUT_RUN_IDS: usize = 50;

/// What a session operation produced.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionReply {
    History {
        /// `None`: the session does not exist.
        #[serde(default)]
        session_id: Option<String>,
        /// Oldest first.
        messages: Vec<StoredMessage>,
        /// Older rows remain: the `offset` that reads them.
        #[serde(default)]
        next_offset: Option<u64>,
        /// The asked-for runs that recorded their user message, and its entry id.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        consumed: Vec<InputConsumed>,
    },
    Reset {
        session_id: String,
        updated_at: u64,
    },
    Delete {
        deleted: bool,
    },
    Inject {
        session_id: String,
        /// `None`: recorded, but history hides it (it is only the silent `NO_REPLY`).
        #[serde(default)]
        message: Option<StoredMessage>,
    },
    /// Since: protocol v2 (additive). `session_id: None`: not recorded (a run holds the
    /// session); else the two recorded messages, oldest first.
    Command {
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        messages: Vec<StoredMessage>,
    },
    /// `compacted: false` with `reason` when there was nothing to do.
    Compact {
        compacted: bool,
        #[serde(default)]
        reason: Option<String>,
        /// Messages the summary replaced.
        #[serde(default)]
        messages: u64,
        #[serde(default)]
        tokens_before: u64,
        #[serde(default)]
        tokens_after: u64,
    },
    /// Since: protocol v2 (additive).
    Lanes {
        lanes: Vec<crate::diagnostics::LaneView>,
        /// Messages waiting in the worker, all sessions.
        queued: u32,
        /// Runs executing now.
        active: u32,
    },
    /// Since: protocol v2 (additive). `None`: no message of the session carries it.
    Media {
        #[serde(default)]
        found: Option<MediaBytes>,
    },
    Failed {
        error: RpcError,
    },
    #[serde(other)]
    Unknown,
}

/// An attachment's bytes, as stored.
///
/// Since: protocol v2 (additive).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct MediaBytes {
    pub mime_type: String,
    pub size_bytes: u64,
    /// Base64.
    pub data: String,
}

impl std::fmt::Debug for MediaBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaBytes")
            .field("mime_type", &self.mime_type)
            .field("size_bytes", &self.size_bytes)
            .finish()
    }
}
