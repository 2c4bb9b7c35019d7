//! OpenAI Chat Completions (`api = "openai-completions"`), streamed over SSE. Also what
//! llama.cpp, vLLM, LM Studio and most "OpenAI-compatible" servers speak.
//!
//! `POST {base_url}/chat/completions` with `stream: true` and
//! `stream_options.include_usage: true`; chunks carry `choices[0].delta.content`, the last
//! choice a `finish_reason`, a final chunk the `usage`, then `data: [DONE]`. A stream that ends
//! without `[DONE]` or a finish reason is an error (the provider dropped the connection).

use super::calls::Calls;
use super::limits::{capped, Limits};
use super::media::{Content, DataUrl};
use futures_util::StreamExt;
use ipc::control::{ModelSpec, Usage};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::{finish, send, ChatMessage, FunctionTool, LlmError, LlmEvent, ModelRequest, Terminal};

/// `POST /chat/completions` body.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    messages: super::EachMessage<'a, Msg<'a>>,
    stream: bool,
    stream_options: StreamOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<FunctionTool<'a>>,
    /// The thinking level (`minimal`, `low`, `medium`, `high`).
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_effort: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u64>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Msg<'a> {
    role: &'a str,
    content: Content<'a, Part<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<CallOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
}

/// A content part: the text, or an image as a `data:` URL.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    Text {
        text: &'a serde_json::value::RawValue,
    },
    ImageUrl {
        image_url: ImageUrl<'a>,
    },
}

#[derive(Serialize)]
struct ImageUrl<'a> {
    url: DataUrl<'a>,
}

#[derive(Serialize)]
struct CallOut<'a> {
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
    function: FnCall<'a>,
}

#[derive(Serialize)]
struct FnCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

/// One message as the API takes it.
fn msg(m: &ChatMessage, takes_images: bool) -> Msg<'_> {
    Msg {
        role: m.role,
        content: Content::of(
            m,
            takes_images,
            |text| Part::Text { text },
            |i| Part::ImageUrl {
                image_url: ImageUrl { url: DataUrl(i) },
            },
        ),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| CallOut {
                id: &c.id,
                kind: "function",
                function: FnCall {
                    name: &c.name,
                    arguments: &c.arguments,
                },
            })
            .collect(),
        tool_call_id: m.tool_call_id.as_deref(),
    }
}

/// The `POST {base_url}/chat/completions` body for `req`.
pub fn body<'a>(model: &'a str, spec: &ModelSpec, req: &'a ModelRequest) -> Body<'a> {
    Body {
        model,
        messages: super::EachMessage::new(&req.messages, msg, spec.takes_images(model)),
        stream: true,
        stream_options: StreamOptions {
            include_usage: true,
        },
        temperature: spec.temperature,
        reasoning_effort: req.thinking.and_then(|t| t.openai_effort()),
        max_tokens: spec.max_output_tokens,
        tools: req.tools.iter().map(|t| FunctionTool::of(t)).collect(),
    }
}

/// Reads a Chat Completions SSE body (`bytes`, as it arrives) and sends what it says to `tx`:
/// text deltas, usage, assembled tool calls, then `Done`. Any byte sequence is handled: what
/// is not the protocol is an [`LlmError`], never a panic.
pub async fn pump<S, B, E>(
    bytes: S,
    tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
) -> Result<(), LlmError>
where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    pump_within(bytes, tx, Limits::DEFAULT).await
}

/// [`pump`] within `limits` (a response past one is an error; nothing past it is buffered).
pub async fn pump_within<S, B, E>(
    bytes: S,
    tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
    limits: Limits,
) -> Result<(), LlmError>
where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    let mut events = super::sse::events(capped(bytes, limits.body_bytes), limits.line_bytes);
    let mut finished: Option<String> = None;
    let mut calls = Calls::new(limits.tool_args_bytes);
    while let Some(ev) = events.next().await {
        let ev = ev.map_err(super::stream_error)?;
        let data = ev.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            complete(tx, calls, finished).await;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::Protocol(format!("chunk is not JSON: {e}")))?;
        if let Some(err) = chunk.get("error") {
            let msg = err
                .get("message")
                .and_then(Value::as_str)
                .unwrap_or("unknown error");
            return Err(LlmError::Protocol(format!(
                "provider reported an error mid-stream: {msg}"
            )));
        }
        if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
            if !send(tx, LlmEvent::Usage(parse_usage(u))).await {
                return Ok(());
            }
        }
        let Some(choice) = chunk
            .get("choices")
            .and_then(Value::as_array)
            .and_then(|c| c.first())
        else {
            continue;
        };
        let delta = |k: &str| {
            choice
                .pointer(&format!("/delta/{k}"))
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
        };
        if let Some(text) = delta("content") {
            if !send(tx, LlmEvent::Delta(text.to_owned())).await {
                return Ok(());
            }
        }
        // llama.cpp and vLLM name it `reasoning_content`; OpenRouter and others `reasoning`.
        if let Some(text) = delta("reasoning_content").or_else(|| delta("reasoning")) {
            if !send(tx, LlmEvent::Reasoning(text.to_owned())).await {
                return Ok(());
            }
        }
        if let Some(deltas) = choice
            .pointer("/delta/tool_calls")
            .and_then(Value::as_array)
        {
            for d in deltas {
                let key = d.get("index").and_then(Value::as_u64).unwrap_or(0);
                let str_at = |p: &str| d.pointer(p).and_then(Value::as_str).unwrap_or("");
                let (id, name) = (str_at("/id"), str_at("/function/name"));
                if !id.is_empty() || !name.is_empty() {
                    let ev = calls.start(key, id, name)?;
                    if !send(tx, ev).await {
                        return Ok(());
                    }
                }
                let args = str_at("/function/arguments");
                if !args.is_empty() {
                    let ev = calls.push_args(key, args)?;
                    if !send(tx, ev).await {
                        return Ok(());
                    }
                }
            }
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            // The usage chunk follows the finish chunk; `Done` waits for `[DONE]`.
            finished = Some(reason.to_owned());
        }
    }
    if finished.is_some() {
        // Some servers close without `[DONE]` after the finish chunk; that is complete.
        complete(tx, calls, finished).await;
        return Ok(());
    }
    Err(LlmError::Transport(
        "the provider closed the stream before the response was complete".into(),
    ))
}

async fn complete(
    tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
    calls: Calls,
    finish_reason: Option<String>,
) {
    let terminal = Terminal {
        finish_reason,
        responses: None,
    };
    finish(tx, calls, terminal).await;
}

fn parse_usage(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let input = n("prompt_tokens");
    let output = n("completion_tokens");
    let total = u
        .get("total_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(input + output);
    let cache_read = u
        .pointer("/prompt_tokens_details/cached_tokens")
        .and_then(Value::as_u64)
        .unwrap_or(0);
    Usage {
        input,
        output,
        cache_read,
        cache_write: 0,
        total,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        line_bytes: 4096,
        body_bytes: 1 << 20,
        tool_args_bytes: 2048,
    };

    async fn pump_all(chunks: Vec<Vec<u8>>) -> (Result<(), LlmError>, Vec<LlmEvent>) {
        let (tx, mut rx) = mpsc::channel(1024);
        let stream = futures_util::stream::iter(chunks.into_iter().map(Ok::<_, String>));
        let r = pump_within(stream, &tx, SMALL).await;
        drop(tx);
        let mut events = Vec::new();
        while let Some(ev) = rx.recv().await {
            events.extend(ev.ok());
        }
        (r, events)
    }

    /// A provider that never sends a line break is cut off at the line cap instead of
    /// growing the parser's buffer without limit.
    #[tokio::test]
    async fn a_stream_without_line_breaks_is_refused_at_the_cap() {
        let chunks = vec![vec![b'x'; 1000]; 5];
        let (r, _) = pump_all(chunks).await;
        let err = r.unwrap_err().to_string();
        assert!(err.contains("line longer than"), "{err}");
    }

    /// Tool call arguments streamed without end are refused at their cap.
    #[tokio::test]
    async fn endless_tool_call_arguments_are_refused() {
        let piece = "a".repeat(1000);
        let mut chunks = vec![
            br#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":"read","arguments":""}}]}}]}"#
                .to_vec(),
            b"\n\n".to_vec(),
        ];
        for _ in 0..3 {
            let ev = serde_json::json!({"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments": piece}}]}}]});
            chunks.push(format!("data: {ev}\n\n").into_bytes());
        }
        let (r, events) = pump_all(chunks).await;
        let err = r.unwrap_err().to_string();
        assert!(err.contains("arguments longer than"), "{err}");
        assert!(
            !events.iter().any(|e| matches!(e, LlmEvent::ToolCalls(_))),
            "the cut call never executes"
        );
    }

    /// A well-formed response of many short lines stops at the body cap.
    #[tokio::test]
    async fn an_endless_response_is_refused_at_the_body_cap() {
        let ev = serde_json::json!({"choices":[{"delta":{"content": "x".repeat(1000)}}]});
        let chunks = vec![format!("data: {ev}\n\n").into_bytes(); 2000];
        let (r, events) = pump_all(chunks).await;
        let err = r.unwrap_err().to_string();
        assert!(err.contains("larger than"), "{err}");
        assert!(events.len() < 1100, "{}", events.len());
    }
}
