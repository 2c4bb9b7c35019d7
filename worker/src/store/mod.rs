//! The agent database (`<state>/agents/<id>/agent.sqlite`): sessions, runs and transcript
//! entries.
//!
//! Architecture Invariant: one writer. [`writer`] owns the only read-write connection, on its
//! own thread, and orders every mutation of this agent (R-C2). Transcript writes carry the
//! run's `expectedWriterRunId` and are checked against the session's `active_writer_run_id`
//! inside the same transaction (R-C1), so a superseded run can never commit. [`reader`] owns
//! a read-only connection on another thread for history and enrichment reads (R-J6); it never
//! blocks the writer (WAL).

pub mod journal;
mod media;
pub mod reader;
pub mod schema;
pub mod writer;

use ipc::control::{RunStatus, Usage};

pub use reader::{DisplayHistory, Reader};
pub use writer::{SessionInfo, Writer};

/// The bytes of the database at `path` and its WAL (what the disk budget counts).
pub fn db_bytes(path: &std::path::Path) -> u64 {
    let len = |p: &std::path::Path| std::fs::metadata(p).map_or(0, |m| m.len());
    let mut wal = path.as_os_str().to_owned();
    wal.push("-wal");
    len(path).saturating_add(len(std::path::Path::new(&wal)))
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    #[error("transcript write refused: run {expected} no longer holds the session's writer claim (held by {})", .actual.as_deref().unwrap_or("nobody"))]
    Fenced {
        expected: String,
        actual: Option<String>,
    },
    #[error("storage error: {0}")]
    Sqlite(String),
    #[error("storage queue is full")]
    Overloaded,
    #[error("storage writer has stopped")]
    Closed,
    #[error("the session changed meanwhile")]
    Changed,
    /// Cluster mode: the agent's journal did not take the write, so nothing was committed.
    #[error("not recorded in the cluster: {0}")]
    Journal(String),
}

impl From<dbwriter::QueueError> for StoreError {
    fn from(e: dbwriter::QueueError) -> Self {
        match e {
            dbwriter::QueueError::Full => StoreError::Overloaded,
            dbwriter::QueueError::Gone => StoreError::Closed,
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        match dbwriter::journal::refusal(&e) {
            Some(why) => StoreError::Journal(why.to_owned()),
            None => StoreError::Sqlite(e.to_string()),
        }
    }
}

/// Who wrote a transcript message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
    /// A tool's result, answering an assistant tool call.
    ToolResult,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::ToolResult => "toolResult",
        }
    }
}

/// A compaction to record: the summary of the older context and the first transcript row
/// kept verbatim after it.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    pub summary: String,
    pub kept_from_seq: i64,
    pub tokens_before: u64,
    pub tokens_after: u64,
    /// Messages the summary replaces.
    pub messages: u64,
    pub created_at: u64,
}

/// A message just recorded in a transcript: where, and as `chat.history` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct Appended {
    pub seq: i64,
    pub entry_id: String,
    /// The message as the control link carries it ([`reader::stored_message`]); `None` when
    /// history hides it (an empty or silent reply).
    pub display: Option<ipc::control::StoredMessage>,
}

/// A transcript message to append.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMessage {
    pub role: Role,
    pub text: String,
    pub created_at: u64,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub usage: Option<Usage>,
    /// Assistant stop reason (`stop`, `length`, `error`, `aborted`).
    pub stop_reason: Option<String>,
    pub error: Option<String>,
    /// Assistant: the tool calls it made.
    pub tool_calls: Vec<crate::tools::ToolCall>,
    /// Tool result: `(call id, tool name, is_error)`.
    pub tool_result: Option<(String, String, bool)>,
    /// Assistant: the response's reasoning (a `thinking` block; never part of the reply).
    pub reasoning: Option<String>,
    /// Assistant: provider diagnostics (`{type, details}`), as OpenClaw saves them.
    pub diagnostics: Vec<serde_json::Value>,
    /// User: the run whose message this is when it is not the writing run's own (a message
    /// steered into a running turn keeps its own run id, so `inputRunIds` finds it).
    pub input_run_id: Option<String>,
    /// User: the message's attachments (kept once per content in the `media` table).
    pub media: Vec<ipc::control::Attachment>,
    /// A slash command's message (the command, or the gateway's reply to it).
    pub command: Option<CommandRow>,
}

/// Which row of a recorded slash command a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommandRow {
    /// The command as sent; part of the model's context unless `context_free`.
    Command { context_free: bool },
    /// The gateway's reply; never part of the model's context. `notice`: it tells of a
    /// change to the session.
    Reply { notice: bool, context_free: bool },
}

impl CommandRow {
    /// Whether the model sees the row.
    pub fn in_context(self) -> bool {
        matches!(
            self,
            CommandRow::Command {
                context_free: false
            }
        )
    }

    fn context_free(self) -> bool {
        match self {
            CommandRow::Command { context_free } | CommandRow::Reply { context_free, .. } => {
                context_free
            }
        }
    }
}

impl NewMessage {
    /// A plain text message.
    pub fn text(role: Role, text: impl Into<String>, created_at: u64) -> Self {
        Self {
            role,
            text: text.into(),
            created_at,
            provider: None,
            model: None,
            usage: None,
            stop_reason: None,
            error: None,
            tool_calls: Vec::new(),
            tool_result: None,
            reasoning: None,
            diagnostics: Vec::new(),
            input_run_id: None,
            media: Vec::new(),
            command: None,
        }
    }
}

/// One audit ledger record (R-D6): what happened, never content (no prompts, messages,
/// tool arguments, results or error text).
#[derive(Debug, Clone, PartialEq)]
pub struct AuditRecord {
    pub ts: u64,
    pub run_id: String,
    pub session_key: String,
    /// `lifecycle` or `tool`.
    pub kind: &'static str,
    /// lifecycle `start`/`end`/`error`; tool `start`/`result`.
    pub phase: String,
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    /// Result code: `ok`, `error`, `timeout`, `aborted`.
    pub result: Option<&'static str>,
    pub duration_ms: Option<u64>,
}

/// A run is starting: claim the session and record the user's message.
#[derive(Debug, Clone)]
pub struct BeginRun {
    pub run_id: String,
    pub session_key: String,
    pub accepted_at: u64,
    pub started_at: u64,
    pub user_text: String,
    /// The user message's attachments.
    pub attachments: Vec<ipc::control::Attachment>,
    /// Runs whose messages this one's user text carries (collected, summarized): their
    /// receipts point at it.
    pub carried: Vec<String>,
}

/// A run is ending: record its outcome (and the assistant message, fenced) and release the
/// session's writer claim if it still holds it.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishRun {
    pub run_id: String,
    pub session_key: String,
    pub status: RunStatus,
    pub ended_at: u64,
    pub error: Option<String>,
    pub stop_reason: Option<String>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub usage: Option<Usage>,
    pub assistant: Option<NewMessage>,
}
