//! Anthropic Messages (`api = "anthropic-messages"`), streamed over SSE.
//!
//! `POST {base_url}/v1/messages` (`base_url` is the host root, as OpenClaw's
//! `https://api.anthropic.com`) with `x-api-key` and `anthropic-version`. System messages go
//! in the top-level `system`; the conversation alternates `user` and `assistant` messages of
//! content blocks: text, `tool_use` (the model's calls) and, in the next user message,
//! `tool_result`s. `max_tokens` is required. The stream: `message_start` (input usage),
//! `content_block_start` / `content_block_delta` / `content_block_stop` per block (text,
//! `thinking`, `tool_use` with `input_json_delta` pieces), `message_delta` (the stop reason
//! and output usage), `message_stop`; `ping`s keep the connection open and are not progress.

use futures_util::StreamExt;
use ipc::control::{ModelSpec, Usage};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::calls::Calls;
use super::limits::{capped, Limits};
use super::{
    finish, send, ChatMessage, LlmError, LlmEvent, Messages, ModelRequest, SignedThinking, Terminal,
};

/// The `anthropic-version` header.
pub const VERSION: &str = "2023-06-01";

/// `max_tokens` of every request (the API requires one).
pub const MAX_TOKENS: u64 = 8192;

/// `POST /v1/messages` body.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    max_tokens: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    system: Option<String>,
    messages: Conversation<'a>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    thinking: Option<ThinkingOut>,
}

/// Extended thinking: `{type: "enabled", budget_tokens}`.
#[derive(Serialize)]
struct ThinkingOut {
    #[serde(rename = "type")]
    kind: &'static str,
    budget_tokens: u64,
}

#[derive(Serialize)]
struct Msg<C> {
    role: &'static str,
    content: C,
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Block<'a> {
    Thinking {
        thinking: &'a str,
        signature: &'a str,
    },
    /// The text's JSON literal ([`super::Text::json`]).
    Text {
        text: &'a serde_json::value::RawValue,
    },
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    ToolResult {
        tool_use_id: &'a str,
        content: &'a serde_json::value::RawValue,
    },
    Image {
        source: ImageSource<'a>,
    },
}

/// An image block's bytes: `{type: "base64", media_type, data}`.
#[derive(Serialize)]
struct ImageSource<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    media_type: &'a str,
    data: &'a str,
}

#[derive(Serialize)]
struct ToolOut<'a> {
    name: &'a str,
    description: &'a str,
    input_schema: &'a serde_json::value::RawValue,
}

/// The conversation as the API takes it: system messages left out (they go in `system`),
/// consecutive messages of one role merged into one (the tool results of a round become one
/// user message), empty text blocks left out (the API refuses them). Written while the body
/// is serialized: no list of wire messages is built first. The flag: the model takes images.
pub struct Conversation<'a>(&'a Messages, bool);

/// The role `m` is sent under, or `None` when it gives no block.
fn wire_role(m: &ChatMessage) -> Option<&'static str> {
    match m.role {
        "system" => None,
        "tool" => Some("user"),
        "assistant" => (signed(m).is_some() || !m.content.is_empty() || !m.tool_calls.is_empty())
            .then_some("assistant"),
        _ => (!m.content.is_empty()).then_some("user"),
    }
}

/// Signed reasoning to send back (unsigned reasoning is not sent).
fn signed(m: &ChatMessage) -> Option<&SignedThinking> {
    m.thinking.as_ref().filter(|t| !t.signature.is_empty())
}

impl Serialize for Conversation<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(None)?;
        let mut group: Vec<&ChatMessage> = Vec::new();
        let mut role = "";
        for m in self.0.iter() {
            let Some(r) = wire_role(m) else {
                continue;
            };
            if r != role && !group.is_empty() {
                seq.serialize_element(&Msg {
                    role,
                    content: Blocks(&group, self.1),
                })?;
                group.clear();
            }
            role = r;
            group.push(m);
        }
        if !group.is_empty() {
            seq.serialize_element(&Msg {
                role,
                content: Blocks(&group, self.1),
            })?;
        }
        seq.end()
    }
}

/// The content blocks of messages merged into one (the flag: the model takes images).
struct Blocks<'g, 'a>(&'g [&'a ChatMessage], bool);

impl Serialize for Blocks<'_, '_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(None)?;
        for m in self.0 {
            if m.role == "tool" {
                seq.serialize_element(&Block::ToolResult {
                    tool_use_id: m.tool_call_id.as_deref().unwrap_or(""),
                    content: m.content.json(),
                })?;
                continue;
            }
            // Signed reasoning goes back first, as the API requires when the turn called
            // tools while thinking.
            if let Some(t) = signed(m) {
                seq.serialize_element(&Block::Thinking {
                    thinking: &t.text,
                    signature: &t.signature,
                })?;
            }
            let text = m.text_for(self.1);
            if !text.is_empty() {
                seq.serialize_element(&Block::Text { text: text.json() })?;
            }
            for i in m.images_for(self.1) {
                seq.serialize_element(&Block::Image {
                    source: ImageSource {
                        kind: "base64",
                        media_type: &i.mime_type,
                        data: &i.data,
                    },
                })?;
            }
            for c in &m.tool_calls {
                // The API wants an object; arguments that are not one are sent empty.
                seq.serialize_element(&Block::ToolUse {
                    id: &c.id,
                    name: &c.name,
                    input: super::args_object(&c.arguments),
                })?;
            }
        }
        seq.end()
    }
}

/// The body for `req`.
pub fn body<'a>(model: &'a str, spec: &ModelSpec, req: &'a ModelRequest) -> Body<'a> {
    let system: Vec<&str> = req
        .messages
        .iter()
        .filter(|m| m.role == "system")
        .map(|m| &*m.content)
        .collect();
    let budget = req.thinking.and_then(|t| t.anthropic_budget());
    Body {
        model,
        // The thinking budget is part of `max_tokens`: the reply keeps its own room.
        max_tokens: spec.max_output_tokens.unwrap_or(MAX_TOKENS) + budget.unwrap_or(0),
        system: (!system.is_empty()).then(|| system.join("\n\n")),
        messages: Conversation(&req.messages, spec.takes_images(model)),
        stream: true,
        // Thinking requires the default temperature.
        temperature: spec.temperature.filter(|_| budget.is_none()),
        thinking: budget.map(|budget_tokens| ThinkingOut {
            kind: "enabled",
            budget_tokens,
        }),
        tools: req
            .tools
            .iter()
            .map(|t| ToolOut {
                name: t.name,
                description: t.description,
                input_schema: &t.schema,
            })
            .collect(),
    }
}

/// Reads a Messages SSE body and sends what it says to `tx`. Any byte sequence is handled:
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
    let mut events = super::sse::events(capped(bytes, limits.body_bytes), limits.line_bytes);
    let mut reply = Reply {
        calls: Calls::new(limits.tool_args_bytes),
        usage: Usage::default(),
        stop: None,
    };
    while let Some(ev) = events.next().await {
        let ev = ev.map_err(super::stream_error)?;
        let data = ev.data.trim();
        if data.is_empty() {
            continue;
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::Protocol(format!("event is not JSON: {e}")))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        let out = match kind {
            "message_stop" => {
                let reason = finish_reason(reply.stop.as_deref());
                finish(tx, reply.calls, Terminal::reason(reason)).await;
                return Ok(());
            }
            "error" => return Err(provider_error(&v)),
            _ => reply.event(kind, &v)?,
        };
        if let Some(ev) = out.filter(|ev| !empty_text(ev)) {
            if !send(tx, ev).await {
                return Ok(());
            }
        }
    }
    Err(LlmError::Transport(
        "the provider closed the stream before the response was complete".into(),
    ))
}

/// What the stream said so far of the response.
struct Reply {
    calls: Calls,
    usage: Usage,
    /// `message_delta`'s stop reason, the provider's word.
    stop: Option<String>,
}

impl Reply {
    /// What to pass on for an event before the response's end (`message_stop`).
    fn event(&mut self, kind: &str, v: &Value) -> Result<Option<LlmEvent>, LlmError> {
        let key = v.get("index").and_then(Value::as_u64).unwrap_or(0);
        Ok(match kind {
            "message_start" => Some(self.start(v)),
            "content_block_start" => match str_at(v, "/content_block/type") {
                "tool_use" => Some(self.calls.start(
                    key,
                    str_at(v, "/content_block/id"),
                    str_at(v, "/content_block/name"),
                )?),
                "text" => Some(LlmEvent::Delta(str_at(v, "/content_block/text").to_owned())),
                "thinking" => Some(LlmEvent::Reasoning(
                    str_at(v, "/content_block/thinking").to_owned(),
                )),
                _ => None,
            },
            "content_block_delta" => self.delta(key, v)?,
            "message_delta" => self.message_delta(v),
            // `ping`, `content_block_stop`, signatures: nothing to pass on.
            _ => None,
        })
    }

    /// `message_start`: the input usage.
    fn start(&mut self, v: &Value) -> LlmEvent {
        let n = |k: &str| {
            v.pointer(&format!("/message/usage/{k}"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
        };
        let usage = &mut self.usage;
        usage.input = n("input_tokens") + n("cache_read_input_tokens");
        usage.cache_read = n("cache_read_input_tokens");
        usage.cache_write = n("cache_creation_input_tokens");
        usage.input += usage.cache_write;
        usage.output = n("output_tokens");
        usage.total = usage.input + usage.output;
        LlmEvent::Usage(*usage)
    }

    /// `content_block_delta`: a piece of the block at `key`.
    fn delta(&mut self, key: u64, v: &Value) -> Result<Option<LlmEvent>, LlmError> {
        Ok(match str_at(v, "/delta/type") {
            "text_delta" => Some(LlmEvent::Delta(str_at(v, "/delta/text").to_owned())),
            "thinking_delta" => Some(LlmEvent::Reasoning(str_at(v, "/delta/thinking").to_owned())),
            "input_json_delta" => Some(
                self.calls
                    .push_args(key, str_at(v, "/delta/partial_json"))?,
            ),
            "signature_delta" => Some(LlmEvent::ReasoningSignature(
                str_at(v, "/delta/signature").to_owned(),
            )),
            _ => None,
        })
    }

    /// `message_delta`: the stop reason and the output usage.
    fn message_delta(&mut self, v: &Value) -> Option<LlmEvent> {
        if let Some(s) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
            self.stop = Some(s.to_owned());
        }
        let out = v.pointer("/usage/output_tokens").and_then(Value::as_u64)?;
        self.usage.output = out;
        self.usage.total = self.usage.input + out;
        Some(LlmEvent::Usage(self.usage))
    }
}

/// The string at JSON pointer `p`, empty if there is none.
fn str_at<'v>(v: &'v Value, p: &str) -> &'v str {
    v.pointer(p).and_then(Value::as_str).unwrap_or("")
}

/// The finish reason (OpenAI's words) for Anthropic's stop reason.
fn finish_reason(stop: Option<&str>) -> &str {
    match stop {
        Some("end_turn") | Some("stop_sequence") | Some("pause_turn") | None => "stop",
        Some("max_tokens") | Some("model_context_window_exceeded") => "length",
        Some("tool_use") => "tool_calls",
        Some("refusal") => "content_filter",
        Some(other) => other,
    }
}

/// A mid-stream `error` event: an overload is the HTTP 529 it stands for.
fn provider_error(v: &Value) -> LlmError {
    let msg = str_at(v, "/error/message");
    let msg = if msg.is_empty() { "unknown error" } else { msg };
    if str_at(v, "/error/type") == "overloaded_error" {
        return LlmError::Http {
            status: 529,
            message: msg.to_owned(),
        };
    }
    LlmError::Protocol(format!("provider reported an error mid-stream: {msg}"))
}

/// An empty text, reasoning or signature piece: nothing to pass on.
fn empty_text(ev: &LlmEvent) -> bool {
    matches!(
        ev,
        LlmEvent::Delta(t) | LlmEvent::Reasoning(t) | LlmEvent::ReasoningSignature(t)
            if t.is_empty()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;
    use crate::tools::ToolCall;

    async fn pump_str(body: &str) -> (Result<(), LlmError>, Vec<LlmEvent>) {
        let (tx, mut rx) = mpsc::channel(1024);
        let chunks: Vec<Result<Vec<u8>, String>> =
            body.as_bytes().chunks(5).map(|c| Ok(c.to_vec())).collect();
        let r = pump(futures_util::stream::iter(chunks), &tx, Limits::DEFAULT).await;
        drop(tx);
        let mut out = Vec::new();
        while let Some(e) = rx.recv().await {
            out.extend(e.ok());
        }
        (r, out)
    }

    fn sse(events: &[Value]) -> String {
        events
            .iter()
            .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
            .collect()
    }

    #[tokio::test]
    async fn thinking_text_and_tool_use_then_the_stop_r_g1() {
        use serde_json::json;
        let body = sse(&[
            json!({"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}),
            json!({"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":""}}),
            json!({"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"let me see"}}),
            json!({"type":"ping"}),
            json!({"type":"content_block_start","index":1,"content_block":{"type":"text","text":""}}),
            json!({"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"Reading."}}),
            json!({"type":"content_block_start","index":2,"content_block":{"type":"tool_use","id":"tu1","name":"read","input":{}}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"{\"path\":"}}),
            json!({"type":"content_block_delta","index":2,"delta":{"type":"input_json_delta","partial_json":"\"a\"}"}}),
            json!({"type":"content_block_stop","index":2}),
            json!({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":20}}),
            json!({"type":"message_stop"}),
        ]);
        let (r, ev) = pump_str(&body).await;
        r.unwrap();
        assert!(ev.contains(&LlmEvent::Reasoning("let me see".into())));
        assert!(ev.contains(&LlmEvent::Delta("Reading.".into())));
        let calls = ev.iter().find_map(|e| match e {
            LlmEvent::ToolCalls(c) => Some(c.clone()),
            _ => None,
        });
        let calls = calls.unwrap();
        assert_eq!(
            (calls[0].id.as_str(), calls[0].arguments.as_str()),
            ("tu1", "{\"path\":\"a\"}")
        );
        assert!(ev
            .iter()
            .any(|e| matches!(e, LlmEvent::Usage(u) if u.output == 20 && u.total == 30)));
        assert_eq!(
            ev.last(),
            Some(&LlmEvent::Done(Terminal::reason("tool_calls")))
        );
    }

    #[tokio::test]
    async fn max_tokens_is_a_length_stop_and_overload_is_transient() {
        use serde_json::json;
        let body = sse(&[
            json!({"type":"message_delta","delta":{"stop_reason":"max_tokens"}}),
            json!({"type":"message_stop"}),
        ]);
        let (r, ev) = pump_str(&body).await;
        r.unwrap();
        assert_eq!(ev.last(), Some(&LlmEvent::Done(Terminal::reason("length"))));
        let body =
            sse(&[json!({"type":"error","error":{"type":"overloaded_error","message":"busy"}})]);
        assert!(matches!(
            pump_str(&body).await.0,
            Err(LlmError::Http { status: 529, .. })
        ));
        let body = sse(&[json!({"type":"ping"})]);
        assert!(
            pump_str(&body).await.0.is_err(),
            "a stream cut before message_stop"
        );
    }

    #[test]
    fn tool_results_of_a_round_are_one_user_message() {
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "read".into(),
            arguments: "{\"path\":\"a\"}".into(),
        };
        let result = |id: &str| ChatMessage {
            tool_call_id: Some(id.into()),
            ..ChatMessage::text("tool", "x")
        };
        let req = ModelRequest {
            messages: std::sync::Arc::new(
                vec![
                    ChatMessage::text("system", "sys"),
                    ChatMessage::text("user", "hi"),
                    ChatMessage {
                        tool_calls: vec![call("a"), call("b")],
                        ..ChatMessage::text("assistant", "")
                    },
                    result("a"),
                    result("b"),
                ]
                .into(),
            ),
            tools: vec![],
            choice: None,
            thinking: None,
        };
        let spec: ModelSpec = serde_json::from_value(serde_json::json!({
            "provider":"p","api":"anthropic-messages","base_url":"http://x","model":"m",
            "request_timeout_ms":1,"idle_timeout_ms":1}))
        .unwrap();
        let v = serde_json::to_value(body("m", &spec, &req)).unwrap();
        assert_eq!(v["system"], "sys");
        assert_eq!(v["max_tokens"], MAX_TOKENS);
        let msgs = v["messages"].as_array().unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[1]["content"][0]["type"], "tool_use");
        assert_eq!(msgs[1]["content"][0]["input"]["path"], "a");
        assert_eq!(msgs[2]["role"], "user");
        assert_eq!(msgs[2]["content"].as_array().unwrap().len(), 2);
        assert_eq!(msgs[2]["content"][1]["tool_use_id"], "b");
    }
}
