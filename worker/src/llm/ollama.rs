//! Ollama's native chat (`api = "ollama"`), streamed as NDJSON.
//!
//! `POST {base_url}/api/chat` (`base_url` is the host root, e.g. `http://127.0.0.1:11434`)
//! with `stream: true`. Each line is one JSON object: `message.content` (text),
//! `message.thinking` (reasoning, when the model thinks), `message.tool_calls` (whole calls,
//! arguments as an object); the last has `done: true`, `done_reason` (`stop`, `length`) and
//! the token counts (`prompt_eval_count`, `eval_count`). A line `{"error": ...}` is a failure.

use futures_util::StreamExt;
use ipc::control::{ModelSpec, Usage};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::calls::Calls;
use super::limits::{capped, Limits};
use super::{
    args_object, finish, send, ChatMessage, FunctionTool, LlmError, LlmEvent, ModelRequest,
    Terminal,
};

/// `POST /api/chat` body.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    messages: super::EachMessage<'a, Msg<'a>>,
    stream: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<FunctionTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    options: Option<Options>,
    /// `false` for `off`; `"low"`/`"medium"`/`"high"` for those levels; `true` for others.
    #[serde(skip_serializing_if = "Option::is_none")]
    think: Option<Value>,
}

#[derive(Serialize)]
struct Options {
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    num_predict: Option<u64>,
}

#[derive(Serialize)]
struct Msg<'a> {
    role: &'a str,
    /// The text's JSON literal, written once per message ([`super::Text::json`]).
    content: &'a serde_json::value::RawValue,
    /// The message's images, base64 (Ollama's own form).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    images: Vec<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<CallOut<'a>>,
}

#[derive(Serialize)]
struct CallOut<'a> {
    function: FnCall<'a>,
}

#[derive(Serialize)]
struct FnCall<'a> {
    name: &'a str,
    arguments: Value,
}

/// One message as the API takes it.
fn msg(m: &ChatMessage, takes_images: bool) -> Msg<'_> {
    Msg {
        role: m.role,
        content: m.text_for(takes_images).json(),
        images: m
            .images_for(takes_images)
            .iter()
            .map(|i| &*i.data)
            .collect(),
        tool_calls: m
            .tool_calls
            .iter()
            .map(|c| CallOut {
                function: FnCall {
                    name: &c.name,
                    arguments: args_object(&c.arguments),
                },
            })
            .collect(),
    }
}

/// The body for `req`.
pub fn body<'a>(model: &'a str, spec: &ModelSpec, req: &'a ModelRequest) -> Body<'a> {
    Body {
        model,
        messages: super::EachMessage::new(&req.messages, msg, spec.takes_images(model)),
        stream: true,
        tools: req.tools.iter().map(|t| FunctionTool::of(t)).collect(),
        options: (spec.temperature.is_some() || spec.max_output_tokens.is_some()).then_some(
            Options {
                temperature: spec.temperature,
                num_predict: spec.max_output_tokens,
            },
        ),
        think: req.thinking.and_then(|t| {
            use ipc::thinking::Thinking as T;
            match t {
                T::Off => Some(Value::Bool(false)),
                T::Low | T::Medium | T::High => Some(Value::String(t.as_str().to_owned())),
                T::Minimal | T::XHigh | T::Adaptive | T::Max | T::Ultra => Some(Value::Bool(true)),
                // Never sent (the driver drops it): the provider's default, as with no level.
                T::Unknown => None,
            }
        }),
    }
}

/// Reads an Ollama NDJSON body and sends what it says to `tx`. Any byte sequence is handled:
/// what is not the protocol is an [`LlmError`], never a panic.
pub async fn pump<S, B, E>(
    bytes: S,
    tx: &mpsc::Sender<Result<LlmEvent, LlmError>>,
    limits: Limits,
) -> Result<(), LlmError>
where
    S: futures_util::Stream<Item = Result<B, E>> + Unpin,
    B: AsRef<[u8]>,
    E: std::fmt::Display,
{
    let mut lines = super::sse::lines(capped(bytes, limits.body_bytes), limits.line_bytes);
    let mut calls = Calls::new(limits.tool_args_bytes);
    let mut next_key = 0u64;
    while let Some(line) = lines.next().await {
        let line = line.map_err(super::stream_error)?;
        let Some(line) = line else { break };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(line)
            .map_err(|e| LlmError::Protocol(format!("line is not JSON: {e}")))?;
        if let Some(err) = v.get("error") {
            let msg = err.as_str().unwrap_or("unknown error");
            return Err(LlmError::Protocol(format!(
                "provider reported an error mid-stream: {msg}"
            )));
        }
        let text = |p: &str| {
            v.pointer(p)
                .and_then(Value::as_str)
                .filter(|t| !t.is_empty())
        };
        if let Some(t) = text("/message/thinking") {
            if !send(tx, LlmEvent::Reasoning(t.to_owned())).await {
                return Ok(());
            }
        }
        if let Some(t) = text("/message/content") {
            if !send(tx, LlmEvent::Delta(t.to_owned())).await {
                return Ok(());
            }
        }
        for call in v
            .pointer("/message/tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let key = next_key;
            next_key += 1;
            let f = |p: &str| call.pointer(p).and_then(Value::as_str).unwrap_or("");
            let ev = calls.start(key, f("/id"), f("/function/name"))?;
            if !send(tx, ev).await {
                return Ok(());
            }
            let args = match call.pointer("/function/arguments") {
                Some(Value::String(s)) => s.clone(),
                Some(v) if !v.is_null() => v.to_string(),
                _ => String::new(),
            };
            calls.set_args(key, &args)?;
        }
        if v.get("done").and_then(Value::as_bool) == Some(true) {
            let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
            let (input, output) = (n("prompt_eval_count"), n("eval_count"));
            let usage = Usage {
                input,
                output,
                total: input + output,
                ..Usage::default()
            };
            if !send(tx, LlmEvent::Usage(usage)).await {
                return Ok(());
            }
            let reason = match v.get("done_reason").and_then(Value::as_str) {
                None | Some("stop") | Some("") => {
                    if calls.is_empty() {
                        "stop"
                    } else {
                        "tool_calls"
                    }
                }
                Some(other) => other,
            };
            finish(tx, calls, Terminal::reason(reason)).await;
            return Ok(());
        }
    }
    Err(LlmError::Transport(
        "the provider closed the stream before the response was complete".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pump_str(body: &str) -> (Result<(), LlmError>, Vec<LlmEvent>) {
        let (tx, mut rx) = mpsc::channel(1024);
        let chunks: Vec<Result<Vec<u8>, String>> =
            body.as_bytes().chunks(9).map(|c| Ok(c.to_vec())).collect();
        let r = pump(futures_util::stream::iter(chunks), &tx, Limits::DEFAULT).await;
        drop(tx);
        let mut out = Vec::new();
        while let Some(e) = rx.recv().await {
            out.extend(e.ok());
        }
        (r, out)
    }

    #[tokio::test]
    async fn thinking_text_tool_calls_and_done_r_g1() {
        let body = concat!(
            r#"{"message":{"role":"assistant","content":"","thinking":"hm"},"done":false}"#,
            "\n",
            r#"{"message":{"role":"assistant","content":"Ok"},"done":false}"#,
            "\n",
            r#"{"message":{"role":"assistant","content":"","tool_calls":[{"function":{"name":"read","arguments":{"path":"a"}}}]},"done":false}"#,
            "\n",
            r#"{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","prompt_eval_count":4,"eval_count":6}"#,
            "\n"
        );
        let (r, ev) = pump_str(body).await;
        r.unwrap();
        assert_eq!(ev[0], LlmEvent::Reasoning("hm".into()));
        assert_eq!(ev[1], LlmEvent::Delta("Ok".into()));
        let calls = ev.iter().find_map(|e| match e {
            LlmEvent::ToolCalls(c) => Some(c.clone()),
            _ => None,
        });
        assert_eq!(calls.unwrap()[0].arguments, r#"{"path":"a"}"#);
        assert_eq!(
            ev.last(),
            Some(&LlmEvent::Done(Terminal::reason("tool_calls")))
        );
    }

    #[tokio::test]
    async fn length_errors_and_cut_streams() {
        let (r, ev) = pump_str("{\"done\":true,\"done_reason\":\"length\"}").await;
        r.unwrap();
        assert_eq!(ev.last(), Some(&LlmEvent::Done(Terminal::reason("length"))));
        let (r, _) = pump_str("{\"error\":\"model not found\"}\n").await;
        assert!(r.unwrap_err().to_string().contains("model not found"));
        let (r, _) = pump_str("{\"message\":{\"content\":\"x\"},\"done\":false}\n").await;
        assert!(r.is_err());
    }
}
