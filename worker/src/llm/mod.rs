//! Model providers. A provider turns a [`ModelRequest`] into a stream of [`LlmEvent`]s or a
//! typed [`LlmError`]. Only `openai-completions` is implemented in this build; the others are
//! accepted in config and refused with a clear error until they land.

pub mod limits;
pub mod openai;
pub mod sse;

use ipc::control::Usage;

use crate::tools::{ToolCall, ToolDef};

/// One message sent to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: &'static str,
    pub content: String,
    /// Assistant messages: the tool calls it made.
    pub tool_calls: Vec<ToolCall>,
    /// Tool messages: the call this answers.
    pub tool_call_id: Option<String>,
    /// The transcript position it came from (not sent; compaction cuts on it).
    pub seq: Option<i64>,
}

impl LlmError {
    /// The provider refused the request because the prompt does not fit the model's
    /// context (OpenAI `context_length_exceeded`, llama.cpp `exceed_context_size_error`, and
    /// the usual wordings of others).
    pub fn is_context_overflow(&self) -> bool {
        let LlmError::Http { status, message } = self else {
            return false;
        };
        if !matches!(status, 400 | 413 | 422) {
            return false;
        }
        let m = message.to_ascii_lowercase();
        [
            "context_length_exceeded",
            "maximum context length",
            "context window",
            "exceed_context_size",
            "exceeds the available context size",
            "prompt is too long",
            "too many tokens",
        ]
        .iter()
        .any(|p| m.contains(p))
    }
}

impl ChatMessage {
    pub fn text(role: &'static str, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            seq: None,
        }
    }
}

/// A request for one model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call (empty: none offered).
    pub tools: Vec<&'static ToolDef>,
    /// Another provider or model for this run (`before_model_resolve`); `None`: the agent's.
    pub choice: Option<ModelChoice>,
}

/// A provider and model picked for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    pub provider: String,
    pub model: String,
    /// The provider's context window (`None`: the default).
    pub context_window: Option<u64>,
}

/// What a streaming response yields.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmEvent {
    /// Text appended to the assistant message.
    Delta(String),
    /// Token usage so far (the last one wins).
    Usage(Usage),
    /// The complete tool calls of this response (sent before `Done`).
    ToolCalls(Vec<ToolCall>),
    /// The response is complete.
    Done { finish_reason: Option<String> },
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LlmError {
    #[error("provider returned HTTP {status}: {message}")]
    Http { status: u16, message: String },
    #[error("rate limited by the provider: {message}")]
    RateLimited {
        retry_after_ms: Option<u64>,
        message: String,
    },
    #[error("cannot reach the provider: {0}")]
    Transport(String),
    #[error("{0}")]
    Config(String),
    #[error("provider sent an invalid stream: {0}")]
    Protocol(String),
    #[error("provider did not answer within {0} ms")]
    Timeout(u64),
    #[error("provider api {0:?} is not supported by this build (supported: openai-completions)")]
    Unsupported(String),
}
