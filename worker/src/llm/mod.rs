//! Model providers. A provider turns a [`ModelRequest`] into a stream of [`LlmEvent`]s or a
//! typed [`LlmError`]. Only `openai-completions` is implemented in this build; the others are
//! accepted in config and refused with a clear error until they land.

pub mod openai;

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
}

impl ChatMessage {
    pub fn text(role: &'static str, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

/// A request for one model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    pub messages: Vec<ChatMessage>,
    /// Tools the model may call (empty: none offered).
    pub tools: Vec<ToolDef>,
    /// Another provider or model for this run (`before_model_resolve`); `None`: the agent's.
    pub choice: Option<ModelChoice>,
}

/// A provider and model picked for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    pub provider: String,
    pub model: String,
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
