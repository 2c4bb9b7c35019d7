//! What a run says on the link: its events ([`RunEvent`], [`EventBody`], [`Lifecycle`]),
//! their closed sets (phases, retry reasons, stop reasons) and its terminal ([`RunTerminal`]).

use std::fmt;

use serde::{Deserialize, Serialize};

use super::*;

/// One event of a run.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEvent {
    pub run_id: String,
    /// Per-run sequence number, from 1, strictly increasing.
    pub seq: u64,
    /// Emit time, ms since the epoch.
    pub ts: u64,
    pub body: EventBody,
}

/// What an event says.
///
/// Since: protocol v1.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "stream", rename_all = "snake_case")]
pub enum EventBody {
    /// Since: protocol v1. Lifecycle phase change.
    Lifecycle(Lifecycle),
    /// Since: protocol v1. Text appended to the current assistant message. Only the increment
    /// crosses the link; the supervisor keeps the cumulative text.
    Assistant { delta: String },
    /// Since: protocol v1. A tool call started (`start`) or finished (`result`). Arguments and
    /// results are JSON text, already size-capped.
    Tool {
        phase: ToolPhase,
        tool_call_id: String,
        name: String,
        #[serde(default)]
        args_json: Option<String>,
        #[serde(default)]
        result_json: Option<String>,
        #[serde(default)]
        is_error: Option<bool>,
    },
    /// Since: protocol v1. Auto-compaction of the session's context (`start` / `end`).
    Compaction {
        phase: CompactionPhase,
        /// `end`: whether a summary replaced the older messages.
        #[serde(default)]
        completed: Option<bool>,
        /// `true` when the model call that overflowed the context is retried after it.
        #[serde(default)]
        will_retry: Option<bool>,
        /// Why it started (`threshold`, `overflow`) or, on an incomplete `end`, why it failed.
        #[serde(default)]
        reason: Option<String>,
        /// Messages summarized.
        #[serde(default)]
        messages: Option<u64>,
        /// Estimated context tokens before / after.
        #[serde(default)]
        tokens_before: Option<u64>,
        #[serde(default)]
        tokens_after: Option<u64>,
    },
    /// Since: protocol v2. A message visible in history was recorded in the session's
    /// transcript. Its `seq` repeats the run's last event's (it is not a run event of its
    /// own).
    Message(StoredMessage),
    /// Since: protocol v2 (additive). Reasoning of the current response, for clients that
    /// asked to see it (the run's `reasoning` is `on` or `stream`); never reply text.
    Thinking { delta: String },
    /// Since: protocol v2 (additive). The run is still going but waiting: a model attempt
    /// failed in a way worth retrying (`phase: "retrying"`), and the next starts after a
    /// backoff, or the model failed for good and the next fallback model takes the request
    /// (`phase: "fallback"`). Not a terminal.
    RunStatus {
        phase: RunStatusPhase,
        /// The attempt about to run (the first retry is attempt 2; with `fallback`, the
        /// model about to run, the first fallback being 2).
        attempt: u32,
        max_attempts: u32,
        reason: RetryReason,
    },
    /// Since: protocol v2 (additive). A block of the reply, complete and ready to deliver
    /// (block streaming, R-D5): `index` counts the run's blocks from 0; `reasoning`: the
    /// response's reasoning as a block of its own (reasoning `on`).
    Block {
        text: String,
        index: u32,
        #[serde(default)]
        reasoning: bool,
    },
    #[serde(other)]
    Unknown,
}

impl fmt::Debug for EventBody {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventBody::Lifecycle(l) => f.debug_tuple("Lifecycle").field(l).finish(),
            EventBody::Assistant { delta } => f
                .debug_struct("Assistant")
                .field("delta_len", &delta.len())
                .finish(),
            EventBody::Tool {
                phase,
                tool_call_id,
                name,
                is_error,
                ..
            } => f
                .debug_struct("Tool")
                .field("phase", phase)
                .field("tool_call_id", tool_call_id)
                .field("name", name)
                .field("is_error", is_error)
                .finish(),
            EventBody::Compaction {
                phase, completed, ..
            } => f
                .debug_struct("Compaction")
                .field("phase", phase)
                .field("completed", completed)
                .finish(),
            EventBody::Message(m) => f
                .debug_struct("Message")
                .field("seq", &m.seq)
                .field("role", &m.role)
                .field("len", &m.message_json.len())
                .finish(),
            EventBody::RunStatus {
                phase,
                attempt,
                max_attempts,
                reason,
            } => f
                .debug_struct("RunStatus")
                .field("phase", phase)
                .field("attempt", attempt)
                .field("max_attempts", max_attempts)
                .field("reason", reason)
                .finish(),
            EventBody::Block {
                text,
                index,
                reasoning,
            } => f
                .debug_struct("Block")
                .field("index", index)
                .field("reasoning", reasoning)
                .field("len", &text.len())
                .finish(),
            EventBody::Thinking { delta } => f
                .debug_struct("Thinking")
                .field("delta_len", &delta.len())
                .finish(),
            EventBody::Unknown => f.write_str("Unknown"),
        }
    }
}

/// What a `run_status` event says the run is doing.
///
/// Since: protocol v2 (additive; the names crossed as strings before the type did).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatusPhase {
    /// The same request again on the same model, after a backoff.
    Retrying,
    /// The request on the next fallback model.
    Fallback,
    #[serde(other)]
    Unknown,
}

impl RunStatusPhase {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatusPhase::Retrying => "retrying",
            RunStatusPhase::Fallback => "fallback",
            RunStatusPhase::Unknown => "unknown",
        }
    }
}

/// Why a model attempt is retried (or its request moves to a fallback model).
///
/// Since: protocol v2 (additive; the names crossed as strings before the type did).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryReason {
    /// The provider said 429 (or its rate-limit error).
    RateLimit,
    /// HTTP 408 or a 5xx other than 529.
    ServerError,
    /// HTTP 529.
    Overloaded,
    /// The connection failed or the stream broke before any visible output.
    Network,
    /// The provider did not answer in time.
    Timeout,
    #[serde(other)]
    Unknown,
}

impl RetryReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RetryReason::RateLimit => "rate_limit",
            RetryReason::ServerError => "server_error",
            RetryReason::Overloaded => "overloaded",
            RetryReason::Network => "network",
            RetryReason::Timeout => "timeout",
            RetryReason::Unknown => "unknown",
        }
    }
}

/// Why a run ended (`stop_reason` of its lifecycle `end`/`error` and of its terminal): how
/// the model's last response finished, for a run that answered, or what ended it.
///
/// Since: protocol v2 (additive; the names crossed as strings before the type did).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStopReason {
    /// The model finished its reply (also any finish reason the worker does not know).
    Stop,
    /// The reply was cut by the output limit.
    Length,
    /// The provider said tool calls but sent none to run.
    ToolCalls,
    /// The provider refused or filtered the reply.
    ContentFilter,
    /// The run failed.
    Error,
    /// The run's deadline passed.
    Timeout,
    /// Aborted: see [`StopReason`].
    Rpc,
    Restart,
    Interrupt,
    Stalled,
    #[serde(other)]
    Unknown,
}

impl RunStopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStopReason::Stop => "stop",
            RunStopReason::Length => "length",
            RunStopReason::ToolCalls => "tool_calls",
            RunStopReason::ContentFilter => "content_filter",
            RunStopReason::Error => "error",
            RunStopReason::Timeout => "timeout",
            RunStopReason::Rpc => "rpc",
            RunStopReason::Restart => "restart",
            RunStopReason::Interrupt => "interrupt",
            RunStopReason::Stalled => "stalled",
            RunStopReason::Unknown => "unknown",
        }
    }
}

impl From<StopReason> for RunStopReason {
    fn from(r: StopReason) -> Self {
        match r {
            StopReason::Rpc => RunStopReason::Rpc,
            StopReason::Restart => RunStopReason::Restart,
            StopReason::Timeout => RunStopReason::Timeout,
            StopReason::Interrupt => RunStopReason::Interrupt,
            StopReason::Stalled => RunStopReason::Stalled,
            // The user stopped it: `stop`, as OpenClaw says for `/stop`.
            StopReason::Command => RunStopReason::Stop,
            StopReason::Unknown => RunStopReason::Unknown,
        }
    }
}

/// Lifecycle phases.
///
/// Since: protocol v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Start,
    Finishing,
    End,
    Error,
    #[serde(other)]
    Unknown,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Start => "start",
            Phase::Finishing => "finishing",
            Phase::End => "end",
            Phase::Error => "error",
            Phase::Unknown => "unknown",
        }
    }
}

/// Lifecycle event data.
///
/// Since: protocol v1.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Lifecycle {
    pub phase: Phase,
    #[serde(default)]
    pub started_at: Option<u64>,
    #[serde(default)]
    pub ended_at: Option<u64>,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub stop_reason: Option<RunStopReason>,
    #[serde(default)]
    pub aborted: Option<bool>,
    /// The session's transcript id (sent with `start`).
    #[serde(default)]
    pub session_id: Option<String>,
    /// The session key the run belongs to (sent with `start`).
    #[serde(default)]
    pub session_key: Option<String>,
    /// Since: protocol v2 (additive). On a `start`: the run's message was taken into this
    /// other run's turn (steered, R-B3) and has no turn of its own; its clients hear only
    /// that (OpenClaw's shape), and its outcome follows with the carrier's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_by: Option<String>,
    /// Since: protocol v2 (additive). On an `end`: the run's final reply as the
    /// `message_sending` guards left it, sent only when they changed it (empty: cancelled);
    /// the chat `final` shows it in place of the streamed text of that message (R-H2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<String>,
    /// Since: protocol v2 (additive). On an `end`: the run's earlier replies (responses the
    /// turn went on after: a steered message waited, or the provider wanted more) that the
    /// guards changed, as streamed and as kept (empty: cancelled); the chat `final` shows
    /// them as kept (R-H2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub guarded: Vec<GuardedReply>,
    /// Since: protocol v2 (additive). On an `end`: what the chat `final` shows after the
    /// reply (the usage footer, the raw trace, `crate::footer`), starting with the line
    /// breaks that part it from the reply; never recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footer: Option<String>,
}

impl fmt::Debug for Lifecycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The reply and the footer (a raw trace holds the user's message) stay out of logs.
        f.debug_struct("Lifecycle")
            .field("phase", &self.phase)
            .field("started_at", &self.started_at)
            .field("ended_at", &self.ended_at)
            .field("error", &self.error)
            .field("stop_reason", &self.stop_reason)
            .field("aborted", &self.aborted)
            .field("session_id", &self.session_id)
            .field("session_key", &self.session_key)
            .field("carried_by", &self.carried_by)
            .field("reply_len", &self.reply.as_ref().map(String::len))
            .field("guarded", &self.guarded.len())
            .field("footer_len", &self.footer.as_ref().map(String::len))
            .finish()
    }
}

/// A reply the `message_sending` guards changed: the text clients were streamed and what
/// the guards kept of it (empty: cancelled).
///
/// Since: protocol v2 (additive).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GuardedReply {
    pub streamed: String,
    pub kept: String,
}

/// Terminal status of a run.
///
/// Since: protocol v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Ok,
    Error,
    Timeout,
    Aborted,
    #[serde(other)]
    Unknown,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Timeout => "timeout",
            RunStatus::Aborted => "aborted",
            RunStatus::Unknown => "error",
        }
    }
}

/// One user-visible reply payload.
///
/// Since: protocol v1.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct Payload {
    pub text: String,
    #[serde(default)]
    pub is_error: bool,
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Payload")
            .field("text_len", &self.text.len())
            .field("is_error", &self.is_error)
            .finish()
    }
}

/// Token usage of a run.
///
/// Since: protocol v1.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    #[serde(default)]
    pub cache_read: u64,
    #[serde(default)]
    pub cache_write: u64,
    pub total: u64,
}

/// A run's terminal outcome.
///
/// Since: protocol v1.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunTerminal {
    pub run_id: String,
    pub status: RunStatus,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub started_at: Option<u64>,
    pub ended_at: u64,
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub stop_reason: Option<RunStopReason>,
    #[serde(default)]
    pub payloads: Vec<Payload>,
    #[serde(default)]
    pub provider: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub usage: Option<Usage>,
    pub duration_ms: u64,
    /// Since: protocol v1. The run delivered a reply to its source conversation through the
    /// `message` tool (`terminalReceipt.sourceReplyDelivered`).
    #[serde(default)]
    pub source_reply_delivered: bool,
    /// Since: protocol v2 (additive). Fallback models that ran after the first model failed
    /// (`provider`/`model` name the one that answered).
    #[serde(default)]
    pub fallbacks: u32,
    /// Since: protocol v2 (additive). The run's message was carried by this other run's
    /// turn (steered into it, collected with it, or folded into its summary line); the
    /// outcome is that turn's.
    #[serde(default)]
    pub carried_by: Option<String>,
    /// Since: protocol v2 (additive). A carried run's session (it never started on the
    /// wire, so the supervisor cannot know it otherwise); `None` for the others.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_key: Option<String>,
    /// Since: protocol v2 (additive). Tool calls the run's turn made (0 for a carried run:
    /// they are the carrier's), for the usage rollups. Absent when 0, so a terminal without
    /// tools keeps the bytes of protocol v2.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl RunTerminal {
    /// The outcome of a run that ended before any model work: refused at hand-over, aborted
    /// while queued, or ended because its worker went away.
    pub fn without_work(
        run_id: &str,
        status: RunStatus,
        ended_at: u64,
        error: String,
        stop_reason: Option<RunStopReason>,
    ) -> RunTerminal {
        RunTerminal {
            run_id: run_id.to_owned(),
            status,
            session_id: None,
            started_at: None,
            ended_at,
            error: Some(error),
            stop_reason,
            payloads: Vec::new(),
            provider: None,
            model: None,
            usage: None,
            duration_ms: 0,
            source_reply_delivered: false,
            fallbacks: 0,
            carried_by: None,
            session_key: None,
            tool_calls: 0,
        }
    }
}
