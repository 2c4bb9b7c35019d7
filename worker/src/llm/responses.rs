//! OpenAI Responses (`api = "openai-responses"`), streamed over SSE.
//!
//! `POST {base_url}/responses` with `stream: true` and `store: false` (the gateway keeps the
//! transcript; nothing is left at the provider). System messages become `instructions`; the
//! conversation is `input` items: messages, and each tool round as `function_call` items with
//! their `function_call_output`s. The stream's typed events carry text
//! (`response.output_text.delta`), reasoning (`response.reasoning_text.delta`,
//! `response.reasoning_summary_text.delta`), tool calls (`response.output_item.added`, then
//! `response.function_call_arguments.delta`, whole in `.done` and `response.output_item.done`)
//! and one terminal: `response.completed`, `response.incomplete` (an output limit or a
//! filter) or `response.failed`. The terminal's `end_turn` is kept as the
//! `openai_responses_terminal` diagnostic (R-G2).

use futures_util::StreamExt;
use ipc::control::{ModelSpec, Usage};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::mpsc;

use super::calls::Calls;
use super::limits::{capped, Limits};
use super::media::{Content, DataUrl};
use super::{
    finish, send, EndTurn, LlmError, LlmEvent, Messages, ModelRequest, ResponsesTerminal, Terminal,
};

/// `POST /responses` body.
#[derive(Serialize)]
pub struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<String>,
    input: Input<'a>,
    stream: bool,
    store: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<ToolOut<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u64>,
}

/// `reasoning`: the effort, and a summary so the reasoning streams back as text.
#[derive(Serialize)]
struct Reasoning {
    effort: &'static str,
    summary: &'static str,
}

#[derive(Serialize)]
#[serde(untagged)]
enum Item<'a> {
    Message {
        role: &'a str,
        content: Content<'a, Part<'a>>,
    },
    Typed {
        #[serde(rename = "type")]
        kind: &'static str,
        call_id: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        name: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        arguments: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        output: Option<&'a serde_json::value::RawValue>,
    },
}

/// A content part: the text, or an image as a `data:` URL.
#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Part<'a> {
    InputText {
        text: &'a serde_json::value::RawValue,
    },
    InputImage {
        detail: &'static str,
        image_url: DataUrl<'a>,
    },
}

#[derive(Serialize)]
struct ToolOut<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::value::RawValue,
}

/// The conversation as `input` items: each message, and each tool call as its own
/// `function_call` item, written while the body is serialized (no list built first). The
/// flag: the model takes images.
pub struct Input<'a>(&'a Messages, bool);

impl Serialize for Input<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let mut seq = s.serialize_seq(None)?;
        for m in self.0.iter().filter(|m| m.role != "system") {
            if m.role == "tool" {
                seq.serialize_element(&Item::Typed {
                    kind: "function_call_output",
                    call_id: m.tool_call_id.as_deref().unwrap_or(""),
                    name: None,
                    arguments: None,
                    output: Some(m.content.json()),
                })?;
                continue;
            }
            if !m.content.is_empty() || m.tool_calls.is_empty() {
                let content = Content::of(
                    m,
                    self.1,
                    |text| Part::InputText { text },
                    |i| Part::InputImage {
                        detail: "auto",
                        image_url: DataUrl(i),
                    },
                );
                seq.serialize_element(&Item::Message {
                    role: m.role,
                    content,
                })?;
            }
            for c in &m.tool_calls {
                seq.serialize_element(&Item::Typed {
                    kind: "function_call",
                    call_id: &c.id,
                    name: Some(&c.name),
                    arguments: Some(&c.arguments),
                    output: None,
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
    Body {
        model,
        instructions: (!system.is_empty()).then(|| system.join("\n\n")),
        input: Input(&req.messages, spec.takes_images(model)),
        stream: true,
        store: false,
        temperature: spec.temperature,
        max_output_tokens: spec.max_output_tokens,
        reasoning: req
            .thinking
            .and_then(|t| t.openai_effort())
            .map(|effort| Reasoning {
                effort,
                summary: "auto",
            }),
        tools: req
            .tools
            .iter()
            .map(|t| ToolOut {
                kind: "function",
                name: t.name,
                description: t.description,
                parameters: &t.schema,
            })
            .collect(),
    }
}

/// Reads a Responses SSE body and sends what it says to `tx`. Any byte sequence is handled:
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
    let mut calls = Calls::new(limits.tool_args_bytes);
    while let Some(ev) = events.next().await {
        let ev = ev.map_err(super::stream_error)?;
        let data = ev.data.trim();
        if data.is_empty() || data == "[DONE]" {
            continue;
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| LlmError::Protocol(format!("event is not JSON: {e}")))?;
        let kind = v
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        let text = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("");
        let key = v.get("output_index").and_then(Value::as_u64).unwrap_or(0);
        let out = match kind {
            "response.output_text.delta" | "response.refusal.delta" => {
                Some(LlmEvent::Delta(text("delta").to_owned()))
            }
            "response.reasoning_text.delta" | "response.reasoning_summary_text.delta" => {
                Some(LlmEvent::Reasoning(text("delta").to_owned()))
            }
            "response.output_item.added" | "response.output_item.done" => {
                let item = v.get("item").unwrap_or(&Value::Null);
                if item.get("type").and_then(Value::as_str) != Some("function_call") {
                    continue;
                }
                let field = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
                if kind == "response.output_item.done" {
                    calls.set_args(key, field("arguments"))?;
                    continue;
                }
                let ev = calls.start(key, field("call_id"), field("name"))?;
                let args = field("arguments");
                if !args.is_empty() {
                    calls.set_args(key, args)?;
                }
                Some(ev)
            }
            "response.function_call_arguments.delta" => Some(calls.push_args(key, text("delta"))?),
            "response.function_call_arguments.done" => {
                calls.set_args(key, text("arguments"))?;
                continue;
            }
            "response.completed" | "response.incomplete" => {
                let response = v.get("response").unwrap_or(&Value::Null);
                if let Some(u) = response.get("usage").filter(|u| u.is_object()) {
                    if !send(tx, LlmEvent::Usage(parse_usage(u))).await {
                        return Ok(());
                    }
                }
                let terminal = terminal(kind, response, !calls.is_empty());
                finish(tx, calls, terminal).await;
                return Ok(());
            }
            "response.failed" => {
                let msg = v
                    .pointer("/response/error/message")
                    .and_then(Value::as_str)
                    .unwrap_or("the response failed");
                return Err(LlmError::Protocol(format!("provider reported: {msg}")));
            }
            "error" => {
                let msg = v
                    .get("message")
                    .or_else(|| v.pointer("/error/message"))
                    .and_then(Value::as_str)
                    .unwrap_or("unknown error");
                return Err(LlmError::Protocol(format!(
                    "provider reported an error mid-stream: {msg}"
                )));
            }
            _ => None,
        };
        if let Some(ev) = out
            .filter(|e| !matches!(e, LlmEvent::Delta(t) | LlmEvent::Reasoning(t) if t.is_empty()))
        {
            if !send(tx, ev).await {
                return Ok(());
            }
        }
    }
    Err(LlmError::Transport(
        "the provider closed the stream before the response was complete".into(),
    ))
}

/// The finish reason and diagnostic of a completed or incomplete response.
fn terminal(event_type: &str, response: &Value, has_calls: bool) -> Terminal {
    let end_turn = match response.get("end_turn").or_else(|| response.get("endTurn")) {
        None | Some(Value::Null) => EndTurn::Absent,
        Some(Value::Bool(true)) => EndTurn::Yes,
        Some(Value::Bool(false)) => EndTurn::No,
        Some(_) => EndTurn::Invalid,
    };
    let finish_reason = if event_type == "response.incomplete" {
        match response
            .pointer("/incomplete_details/reason")
            .and_then(Value::as_str)
        {
            Some("max_output_tokens") | None => "length".to_owned(),
            Some("content_filter") => "content_filter".to_owned(),
            Some(other) => other.to_owned(),
        }
    } else if has_calls {
        "tool_calls".to_owned()
    } else {
        "stop".to_owned()
    };
    Terminal {
        finish_reason: Some(finish_reason),
        responses: Some(ResponsesTerminal {
            event_type: event_type.to_owned(),
            end_turn,
        }),
    }
}

fn parse_usage(u: &Value) -> Usage {
    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let (input, output) = (n("/input_tokens"), n("/output_tokens"));
    Usage {
        input,
        output,
        cache_read: n("/input_tokens_details/cached_tokens"),
        cache_write: 0,
        total: u
            .get("total_tokens")
            .and_then(Value::as_u64)
            .unwrap_or(input + output),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::ChatMessage;
    use crate::tools::ToolCall;

    async fn pump_str(body: &str) -> (Result<(), LlmError>, Vec<LlmEvent>) {
        let (tx, mut rx) = mpsc::channel(1024);
        let chunks: Vec<Result<Vec<u8>, String>> =
            body.as_bytes().chunks(7).map(|c| Ok(c.to_vec())).collect();
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
    async fn text_reasoning_and_a_tool_call_then_the_terminal_r_g1() {
        let body = sse(&[
            serde_json::json!({"type":"response.created","response":{"id":"r1"}}),
            serde_json::json!({"type":"response.reasoning_summary_text.delta","delta":"hmm"}),
            serde_json::json!({"type":"response.output_text.delta","delta":"Hi"}),
            serde_json::json!({"type":"response.output_item.added","output_index":1,
                "item":{"type":"function_call","call_id":"c1","name":"read","arguments":""}}),
            serde_json::json!({"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"pa"}),
            serde_json::json!({"type":"response.function_call_arguments.delta","output_index":1,"delta":"th\":1}"}),
            serde_json::json!({"type":"response.completed","response":{"status":"completed","end_turn":false,
                "usage":{"input_tokens":5,"output_tokens":3,"total_tokens":8}}}),
        ]);
        let (r, ev) = pump_str(&body).await;
        r.unwrap();
        assert_eq!(ev[0], LlmEvent::Reasoning("hmm".into()));
        assert_eq!(ev[1], LlmEvent::Delta("Hi".into()));
        assert!(matches!(ev[2], LlmEvent::ToolCallStart { index: 0, .. }));
        let calls = ev.iter().find_map(|e| match e {
            LlmEvent::ToolCalls(c) => Some(c.clone()),
            _ => None,
        });
        assert_eq!(calls.unwrap()[0].arguments, "{\"path\":1}");
        let Some(LlmEvent::Done(t)) = ev.last() else {
            panic!("{ev:?}")
        };
        assert_eq!(t.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(t.responses.as_ref().unwrap().end_turn, EndTurn::No);
    }

    #[tokio::test]
    async fn incomplete_is_a_length_stop_and_odd_end_turns_are_invalid_r_g2() {
        let body = sse(
            &[serde_json::json!({"type":"response.incomplete","response":{
            "status":"incomplete","incomplete_details":{"reason":"max_output_tokens"},"end_turn":"yes"}})],
        );
        let (r, ev) = pump_str(&body).await;
        r.unwrap();
        let Some(LlmEvent::Done(t)) = ev.last() else {
            panic!("{ev:?}")
        };
        assert_eq!(t.finish_reason.as_deref(), Some("length"));
        let d = t.responses.as_ref().unwrap();
        assert_eq!(
            (d.event_type.as_str(), d.end_turn),
            ("response.incomplete", EndTurn::Invalid)
        );
    }

    #[tokio::test]
    async fn a_cut_stream_and_a_failed_response_are_errors() {
        let body = sse(&[serde_json::json!({"type":"response.output_text.delta","delta":"Hi"})]);
        assert!(pump_str(&body).await.0.is_err());
        let body = sse(&[
            serde_json::json!({"type":"response.failed","response":{"error":{"message":"boom"}}}),
        ]);
        let e = pump_str(&body).await.0.unwrap_err().to_string();
        assert!(e.contains("boom"), "{e}");
    }

    #[test]
    fn the_body_carries_instructions_calls_and_outputs() {
        let req = ModelRequest {
            messages: std::sync::Arc::new(
                vec![
                    ChatMessage::text("system", "be brief"),
                    ChatMessage::text("user", "hi"),
                    ChatMessage {
                        tool_calls: vec![ToolCall {
                            id: "c1".into(),
                            name: "read".into(),
                            arguments: "{}".into(),
                        }],
                        ..ChatMessage::text("assistant", "")
                    },
                    ChatMessage {
                        tool_call_id: Some("c1".into()),
                        ..ChatMessage::text("tool", "file")
                    },
                ]
                .into(),
            ),
            tools: vec![],
            choice: None,
            thinking: None,
        };
        let spec: ModelSpec = serde_json::from_value(serde_json::json!({
            "provider":"p","api":"openai-responses","base_url":"http://x","model":"m",
            "request_timeout_ms":1,"idle_timeout_ms":1}))
        .unwrap();
        let v = serde_json::to_value(body("m", &spec, &req)).unwrap();
        assert_eq!(v["instructions"], "be brief");
        assert_eq!(v["store"], false);
        assert_eq!(
            v["input"][0],
            serde_json::json!({"role":"user","content":"hi"})
        );
        assert_eq!(
            v["input"][1],
            serde_json::json!({"type":"function_call","call_id":"c1","name":"read","arguments":"{}"})
        );
        assert_eq!(
            v["input"][2],
            serde_json::json!({"type":"function_call_output","call_id":"c1","output":"file"})
        );
    }
}
