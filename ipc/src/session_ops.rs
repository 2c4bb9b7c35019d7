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
/// Each operation's fields are a struct of its own, so that the supervisor can ask for one
/// kind and be handed that kind's reply ([`Op`]). An internally tagged newtype variant
/// holding a struct encodes exactly as the struct variant it replaced did (the `kind` tag
/// among the struct's fields); `ipc/tests/compat.rs` pins the bytes.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionOp {
    /// Since: protocol v1. The visible messages of the current transcript window, newest
    /// `limit`, within `max_bytes` of stored message text (the newest that fit).
    History(HistoryOp),
    /// Since: protocol v1. Start a new transcript window (keeps the session id).
    Reset(ResetOp),
    /// Since: protocol v1. Delete the session (and its transcript if asked).
    Delete(DeleteOp),
    /// Since: protocol v2. Append an assistant message written by an operator (not by the
    /// model) to an existing session, through the writer queue.
    Inject(InjectOp),
    /// Since: protocol v2. Compact the session's context now: the older messages are
    /// summarized by the agent's model and the summary replaces them for the model, through
    /// the writer fence (refused if a run holds the session or it changed meanwhile).
    Compact(CompactOp),
    /// Since: protocol v2 (additive). Every session lane of the worker, with its
    /// diagnostic classification (`diagnostics.lanes`). `session_key` is unused (empty).
    /// No fields: asked with [`LanesOp`].
    Lanes,
    /// Since: protocol v2 (additive). An attachment a message of the session carries, by
    /// the digits of its digest a `media://inbound/` name holds (the Control UI shows it).
    Media(MediaOp),
    /// Since: protocol v2 (additive). Record a slash command the supervisor answered, as
    /// OpenClaw records one: the command as a user message and the gateway's reply as an
    /// assistant message, both of run `record.run_id` (the session is made if it has none).
    /// Not recorded while a run holds the session (the answer says so).
    Command(CommandOp),
    /// Since: protocol v2 (additive). The skills in the agent's workspace and whether this
    /// worker's host meets what each requires (`skills.status`). `session_key` is unused. No
    /// fields: asked with [`SkillsOp`].
    Skills,
    #[serde(other)]
    Unknown,
}

/// [`SessionOp::History`]'s fields.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryOp {
    pub session_key: String,
    pub limit: u32,
    /// Since: protocol v2. Transcript rows to skip, newest first (paging back).
    #[serde(default)]
    pub offset: u64,
    /// Since: protocol v2. `None`: the worker's cap.
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// Since: protocol v2. Runs whose recorded user message to look up (at most 50),
    /// wherever it is in the transcript.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_run_ids: Vec<String>,
}

/// [`SessionOp::Reset`]'s fields.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResetOp {
    pub session_key: String,
    pub reason: ResetReason,
}

/// [`SessionOp::Delete`]'s fields.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeleteOp {
    pub session_key: String,
    pub delete_transcript: bool,
}

/// [`SessionOp::Inject`]'s fields.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InjectOp {
    pub session_key: String,
    pub text: String,
}

/// [`SessionOp::Compact`]'s fields.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactOp {
    pub session_key: String,
}

/// [`SessionOp::Lanes`], which has no fields on the link: this marker only names the kind,
/// so it can be asked for like the others.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LanesOp;

/// Asks for [`SessionOp::Skills`].
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SkillsOp;

/// [`SessionReply::Skills`]'s fields: the workspace's skills, first root first.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillsReply {
    pub workspace: String,
    pub skills: Vec<SkillState>,
}

/// One skill as its worker sees it.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkillState {
    pub name: String,
    pub description: String,
    /// Its `SKILL.md`, relative to the workspace.
    pub location: String,
    /// Not `disable-model-invocation`.
    pub model_visible: bool,
    /// The operator's settings keep it from being offered (`enabled = false`).
    #[serde(default)]
    pub disabled: bool,
    /// The agent's `skills` filter leaves it out.
    #[serde(default)]
    pub blocked_by_agent_filter: bool,
    /// `metadata.openclaw.always`: offered whatever the host has.
    pub always: bool,
    /// Offered to the model on this host now.
    pub eligible: bool,
    pub requires: SkillNeeds,
    /// What this host lacks of `requires`.
    pub missing: SkillNeeds,
    #[serde(default)]
    pub emoji: Option<String>,
    #[serde(default)]
    pub homepage: Option<String>,
}

/// Programs, variables and platforms a skill needs (`metadata.openclaw.requires`, `os`).
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SkillNeeds {
    pub bins: Vec<String>,
    pub any_bins: Vec<String>,
    pub env: Vec<String>,
    pub os: Vec<String>,
}

/// [`SessionOp::Media`]'s fields.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MediaOp {
    pub session_key: String,
    /// The digest's hex digits, lower case.
    pub digest: String,
}

/// [`SessionOp::Command`]'s fields.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandOp {
    pub session_key: String,
    pub record: CommandRecord,
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
            SessionOp::Compact(_) => 600,
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

/// What a session operation produced: the reply of the operation's kind, or `Failed`.
/// As with [`SessionOp`], each kind's fields are a struct, encoded as the struct variant
/// they replaced was.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SessionReply {
    History(HistoryReply),
    Reset(ResetReply),
    Delete(DeleteReply),
    Inject(InjectReply),
    /// Since: protocol v2 (additive). `session_id: None`: not recorded (a run holds the
    /// session); else the two recorded messages, oldest first.
    Command(CommandReply),
    /// `compacted: false` with `reason` when there was nothing to do.
    Compact(CompactReply),
    /// Since: protocol v2 (additive).
    Lanes(LanesReply),
    /// Since: protocol v2 (additive). `None`: no message of the session carries it.
    Media(MediaReply),
    /// Since: protocol v2 (additive).
    Skills(SkillsReply),
    Failed {
        error: RpcError,
    },
    #[serde(other)]
    Unknown,
}

/// [`SessionReply::History`]'s fields.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryReply {
    /// `None`: the session does not exist.
    #[serde(default)]
    pub session_id: Option<String>,
    /// Oldest first.
    pub messages: Vec<StoredMessage>,
    /// Older rows remain: the `offset` that reads them.
    #[serde(default)]
    pub next_offset: Option<u64>,
    /// The asked-for runs that recorded their user message, and its entry id.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumed: Vec<InputConsumed>,
}

/// [`SessionReply::Reset`]'s fields.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResetReply {
    pub session_id: String,
    pub updated_at: u64,
}

/// [`SessionReply::Delete`]'s fields.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeleteReply {
    pub deleted: bool,
}

/// [`SessionReply::Inject`]'s fields.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InjectReply {
    pub session_id: String,
    /// `None`: recorded, but history hides it (it is only the silent `NO_REPLY`).
    #[serde(default)]
    pub message: Option<StoredMessage>,
}

/// [`SessionReply::Command`]'s fields.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandReply {
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub messages: Vec<StoredMessage>,
}

/// [`SessionReply::Compact`]'s fields.
///
/// Since: protocol v2.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompactReply {
    pub compacted: bool,
    #[serde(default)]
    pub reason: Option<String>,
    /// Messages the summary replaced.
    #[serde(default)]
    pub messages: u64,
    #[serde(default)]
    pub tokens_before: u64,
    #[serde(default)]
    pub tokens_after: u64,
}

/// [`SessionReply::Lanes`]'s fields.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LanesReply {
    pub lanes: Vec<crate::diagnostics::LaneView>,
    /// Messages waiting in the worker, all sessions.
    pub queued: u32,
    /// Runs executing now.
    pub active: u32,
}

/// [`SessionReply::Media`]'s fields.
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MediaReply {
    #[serde(default)]
    pub found: Option<MediaBytes>,
}

/// A session operation of one kind, with the kind of reply it is answered with: the
/// supervisor asks with the operation and is handed its reply, so a caller never matches
/// on [`SessionReply`] itself. The op crosses the link as a [`SessionOp`] (`Into`).
pub trait Op: Into<SessionOp> {
    /// What the worker answers this operation with.
    type Reply;

    /// The reply of this operation's kind out of `reply`; any other reply (`Failed`,
    /// `Unknown`, a reply of another kind) is handed back for the caller to tell apart.
    // The reply handed back is the one that came in, moved once on its way to an error;
    // boxing it would only add an allocation.
    #[allow(clippy::result_large_err)]
    fn reply(reply: SessionReply) -> Result<Self::Reply, SessionReply>;
}

/// Pairs an operation struct with its [`SessionOp`] variant and its reply struct with the
/// [`SessionReply`] variant of the same name: the `From`s both ways of the link and the
/// [`Op`] that ties them.
macro_rules! session_op {
    ($($variant:ident: $op:ident => $reply:ident;)+) => {$(
        impl From<$op> for SessionOp {
            fn from(op: $op) -> Self {
                SessionOp::$variant(op)
            }
        }

        impl From<$reply> for SessionReply {
            fn from(reply: $reply) -> Self {
                SessionReply::$variant(reply)
            }
        }

        impl Op for $op {
            type Reply = $reply;

            fn reply(reply: SessionReply) -> Result<$reply, SessionReply> {
                match reply {
                    SessionReply::$variant(r) => Ok(r),
                    other => Err(other),
                }
            }
        }
    )+};
}

session_op! {
    History: HistoryOp => HistoryReply;
    Reset: ResetOp => ResetReply;
    Delete: DeleteOp => DeleteReply;
    Inject: InjectOp => InjectReply;
    Compact: CompactOp => CompactReply;
    Media: MediaOp => MediaReply;
    Command: CommandOp => CommandReply;
}

impl From<SkillsOp> for SessionOp {
    fn from(_: SkillsOp) -> Self {
        SessionOp::Skills
    }
}

impl From<SkillsReply> for SessionReply {
    fn from(reply: SkillsReply) -> Self {
        SessionReply::Skills(reply)
    }
}

impl Op for SkillsOp {
    type Reply = SkillsReply;

    fn reply(reply: SessionReply) -> Result<SkillsReply, SessionReply> {
        match reply {
            SessionReply::Skills(r) => Ok(r),
            other => Err(other),
        }
    }
}

impl From<LanesOp> for SessionOp {
    fn from(_: LanesOp) -> Self {
        SessionOp::Lanes
    }
}

impl From<LanesReply> for SessionReply {
    fn from(reply: LanesReply) -> Self {
        SessionReply::Lanes(reply)
    }
}

impl Op for LanesOp {
    type Reply = LanesReply;

    fn reply(reply: SessionReply) -> Result<LanesReply, SessionReply> {
        match reply {
            SessionReply::Lanes(r) => Ok(r),
            other => Err(other),
        }
    }
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
