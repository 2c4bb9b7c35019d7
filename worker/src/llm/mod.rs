//! Model providers. A provider turns a [`ModelRequest`] into a stream of [`LlmEvent`]s or a
//! typed [`LlmError`], whichever of the four wire APIs it speaks ([`client::LlmClient`]
//! dispatches): OpenAI Chat Completions, OpenAI Responses, Anthropic Messages and Ollama's
//! native chat. Each API's module builds its request body and parses its stream; what they
//! share (tool call assembly, bounds, SSE and NDJSON framing) lives beside them.

pub mod anthropic;
pub mod calls;
pub mod client;
pub mod completions;
pub mod limits;
pub mod media;
pub mod messages;
pub mod ollama;
pub mod responses;
pub mod sse;
pub mod text;

pub use messages::{History, Messages};
pub use text::Text;

use ipc::control::Usage;
use tokio::sync::mpsc;

use crate::tools::{ToolCall, ToolDef};

/// One message sent to the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatMessage {
    pub role: &'static str,
    /// Shared with the reader's history cache: a turn neither copies nor escapes its
    /// history's text again.
    pub content: Text,
    /// Assistant messages: the tool calls it made.
    pub tool_calls: Vec<ToolCall>,
    /// Tool messages: the call this answers.
    pub tool_call_id: Option<String>,
    /// The transcript position it came from (not sent; compaction cuts on it).
    pub seq: Option<i64>,
    /// Assistant: the response's signed reasoning (Anthropic wants it back, first, on the
    /// assistant turn that called tools while thinking).
    pub thinking: Option<SignedThinking>,
    /// User: the message's images, and its text for a model that takes none
    /// ([`media::user_message`]).
    pub images: Option<std::sync::Arc<media::Images>>,
}

/// Reasoning with the provider's signature over it.
#[derive(Debug, Clone, PartialEq)]
pub struct SignedThinking {
    pub text: String,
    pub signature: String,
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
    pub fn text(role: &'static str, content: impl Into<Text>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            seq: None,
            thinking: None,
            images: None,
        }
    }
}

/// A JSON array of `messages`, each as `wire` makes it (told whether the model takes
/// images), written while the body is serialized: no list of wire messages is built first
/// (a long history allocated one per message on every request).
pub struct EachMessage<'a, T> {
    messages: &'a Messages,
    wire: fn(&'a ChatMessage, bool) -> T,
    images: bool,
}

impl<'a, T> EachMessage<'a, T> {
    pub fn new(messages: &'a Messages, wire: fn(&'a ChatMessage, bool) -> T, images: bool) -> Self {
        EachMessage {
            messages,
            wire,
            images,
        }
    }
}

impl<'a, T: serde::Serialize> serde::Serialize for EachMessage<'a, T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.messages.iter().map(|m| (self.wire)(m, self.images)))
    }
}

/// A request for one model response.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRequest {
    /// Shared, not copied: the turn keeps the request it sent (to retry it, or to append the
    /// tool round), and the model call holds it only until its body is written. A change
    /// (`Arc::make_mut`) copies only if the call still holds it.
    pub messages: std::sync::Arc<Messages>,
    /// Tools the model may call (empty: none offered).
    pub tools: Vec<&'static ToolDef>,
    /// Another provider or model for this run (`before_model_resolve`); `None`: the agent's.
    pub choice: Option<ModelChoice>,
    /// How hard the model thinks (R-D5); `None`: the provider's default. Each API maps it
    /// onto its own knob (OpenAI `reasoning_effort`, Anthropic's thinking budget, Ollama's
    /// `think`).
    pub thinking: Option<ipc::thinking::Thinking>,
}

impl ModelRequest {
    /// About the size of this request's JSON body: its text plus room for each message's
    /// and tool's framing (a guess, for the buffer; any API's body may exceed it).
    pub fn body_size_hint(&self) -> usize {
        let messages: usize = self
            .messages
            .iter()
            .map(|m| {
                m.content.len()
                    + m.images.as_ref().map_or(0, |i| {
                        i.images.iter().map(|x| x.data.len() + 64).sum::<usize>()
                    })
                    + 64
                    + m.tool_calls
                        .iter()
                        .map(|c| c.arguments.len() + c.name.len() + c.id.len() + 96)
                        .sum::<usize>()
            })
            .sum();
        let tools: usize = self
            .tools
            .iter()
            .map(|t| t.schema.get().len() + t.description.len() + t.name.len() + 64)
            .sum();
        // Escapes and fields the estimate leaves out.
        (messages + tools + 512) * 9 / 8
    }
}

/// A provider and model picked for one run.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelChoice {
    pub provider: String,
    pub model: String,
    /// The provider's context window (`None`: the default).
    pub context_window: Option<u64>,
}

/// What a streaming response yields, whichever API it came from.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmEvent {
    /// Text appended to the assistant message.
    Delta(String),
    /// Reasoning (thinking) appended: never part of the reply.
    Reasoning(String),
    /// The provider's signature over the response's reasoning (Anthropic).
    ReasoningSignature(String),
    /// A tool call began streaming (its arguments follow). Progress only.
    ToolCallStart { index: usize, name: String },
    /// Bytes of a tool call's arguments arrived. Progress only: nothing runs before
    /// `ToolCalls`, and a response cut short runs none of its calls.
    ToolCallDelta { index: usize, bytes: usize },
    /// Token usage so far (the last one wins).
    Usage(Usage),
    /// The complete tool calls of this response (sent before `Done`).
    ToolCalls(Vec<ToolCall>),
    /// The response is complete.
    Done(Terminal),
}

/// How a response ended.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Terminal {
    /// In Chat Completions' words, whatever the API: `stop`, `length` (an output limit),
    /// `tool_calls`, `content_filter` (a refusal), or the provider's own word.
    pub finish_reason: Option<String>,
    /// OpenAI Responses: the terminal event and its `end_turn` signal (R-G2).
    pub responses: Option<ResponsesTerminal>,
}

impl Terminal {
    pub fn reason(finish_reason: &str) -> Self {
        Self {
            finish_reason: Some(finish_reason.to_owned()),
            responses: None,
        }
    }
}

/// A Responses response's terminal facts, saved as the `openai_responses_terminal`
/// diagnostic of its assistant message.
#[derive(Debug, Clone, PartialEq)]
pub struct ResponsesTerminal {
    /// `response.completed` or `response.incomplete`.
    pub event_type: String,
    pub end_turn: EndTurn,
}

impl ResponsesTerminal {
    /// The `openai_responses_terminal` diagnostic saved on the response's assistant message.
    pub fn diagnostic(&self, stop_reason: Option<&str>) -> serde_json::Value {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Details<'a> {
            event_type: &'a str,
            end_turn: serde_json::Value,
            #[serde(skip_serializing_if = "Option::is_none")]
            stop_reason: Option<&'a str>,
        }
        #[derive(serde::Serialize)]
        struct Diagnostic<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            details: Details<'a>,
        }
        let end_turn = match self.end_turn {
            EndTurn::Yes => serde_json::Value::Bool(true),
            EndTurn::No => serde_json::Value::Bool(false),
            EndTurn::Absent => "absent".into(),
            EndTurn::Invalid => "invalid".into(),
        };
        let stop_reason = stop_reason.map(|r| match r {
            "length" => "length",
            "tool_calls" => "toolUse",
            _ => "stop",
        });
        serde_json::to_value(Diagnostic {
            kind: "openai_responses_terminal",
            details: Details {
                event_type: &self.event_type,
                end_turn,
                stop_reason,
            },
        })
        .unwrap_or(serde_json::Value::Null)
    }
}

/// The provider's `end_turn` signal as it was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndTurn {
    Yes,
    No,
    /// Not sent.
    Absent,
    /// Sent, but not a boolean (the value itself is not kept).
    Invalid,
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
    #[error("provider api {0:?} is not supported by this build (supported: openai-completions, openai-responses, anthropic-messages, ollama)")]
    Unsupported(String),
}

/// A tool as the OpenAI-style APIs (Chat Completions, Ollama) offer it:
/// `{type: "function", function: {name, description, parameters}}`.
#[derive(serde::Serialize)]
pub(crate) struct FunctionTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: FunctionDef<'a>,
}

#[derive(serde::Serialize)]
struct FunctionDef<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::value::RawValue,
}

impl<'a> FunctionTool<'a> {
    pub(crate) fn of(t: &'a ToolDef) -> Self {
        Self {
            kind: "function",
            function: FunctionDef {
                name: t.name,
                description: t.description,
                parameters: &t.schema,
            },
        }
    }
}

/// A call's arguments as a JSON object, for the APIs that take them parsed (Anthropic,
/// Ollama); arguments that are not one are sent empty.
pub(crate) fn args_object(arguments: &str) -> serde_json::Value {
    serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .filter(serde_json::Value::is_object)
        .unwrap_or_else(|| serde_json::Value::Object(Default::default()))
}

/// What broke a response stream: a bound the provider overstepped or bytes that are not
/// text is the provider's fault (`Protocol`, not retried); anything else is the connection
/// (`Transport`, retried while nothing was shown).
pub(crate) fn stream_error(e: String) -> LlmError {
    let provider_fault = [sse::LONG_LINE, sse::NOT_UTF8, limits::TOO_LARGE]
        .iter()
        .any(|m| e.starts_with(m));
    if provider_fault {
        LlmError::Protocol(e)
    } else {
        LlmError::Transport(format!("stream broke: {e}"))
    }
}

/// Sends one event; `false` once nobody listens (the call was dropped).
pub(crate) async fn send(tx: &mpsc::Sender<Result<LlmEvent, LlmError>>, ev: LlmEvent) -> bool {
    tx.send(Ok(ev)).await.is_ok()
}

/// The response is complete: its tool calls, then `Done`.
pub(crate) async fn finish(
    tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
    calls: calls::Calls,
    terminal: Terminal,
) {
    let calls = calls.finish();
    if !calls.is_empty() {
        let _ = tx.send(Ok(LlmEvent::ToolCalls(calls))).await;
    }
    let _ = tx.send(Ok(LlmEvent::Done(terminal))).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every API's body carries each message's text exactly, whatever it holds, now that the
    /// texts go in as literals written once ([`Text::json`]).
    #[test]
    fn each_apis_body_carries_the_texts_exactly() {
        let texts = [
            "quote \" and backslash \\",
            "line\nbreak\ttab \u{1}",
            "emoji 😀 and </script>",
        ];
        let call = crate::tools::ToolCall {
            id: "c1".into(),
            name: "read".into(),
            arguments: "{\"path\":\"a\"}".into(),
        };
        // System prompt, shared history and the turn's own message: the three parts of a
        // request's list, written as one.
        let mut messages = Messages::new(
            vec![ChatMessage::text("system", "sys")],
            std::sync::Arc::new(vec![
                ChatMessage::text("user", texts[0]),
                ChatMessage {
                    tool_calls: vec![call],
                    ..ChatMessage::text("assistant", texts[1])
                },
            ]),
        );
        messages.push(ChatMessage {
            tool_call_id: Some("c1".into()),
            ..ChatMessage::text("tool", texts[2])
        });
        let req = ModelRequest {
            messages: std::sync::Arc::new(messages),
            tools: vec![],
            choice: None,
            thinking: None,
        };
        fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
            match v {
                serde_json::Value::String(s) => out.push(s.clone()),
                serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
                serde_json::Value::Object(o) => o.values().for_each(|x| strings(x, out)),
                _ => {}
            }
        }
        for api in [
            "openai-completions",
            "openai-responses",
            "anthropic-messages",
            "ollama",
        ] {
            let spec: ipc::control::ModelSpec = serde_json::from_value(serde_json::json!({
                "provider": "p", "api": api, "base_url": "http://x", "model": "m",
                "request_timeout_ms": 1, "idle_timeout_ms": 1}))
            .unwrap();
            let bytes = match api {
                "openai-completions" => serde_json::to_vec(&completions::body("m", &spec, &req)),
                "openai-responses" => serde_json::to_vec(&responses::body("m", &spec, &req)),
                "anthropic-messages" => serde_json::to_vec(&anthropic::body("m", &spec, &req)),
                _ => serde_json::to_vec(&ollama::body("m", &spec, &req)),
            }
            .unwrap();
            let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            let mut found = Vec::new();
            strings(&v, &mut found);
            for t in texts {
                assert!(found.iter().any(|s| s == t), "{api}: {t:?} not in {v}");
            }
        }
    }
}
