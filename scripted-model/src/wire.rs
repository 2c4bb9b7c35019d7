//! The four wire APIs the scripted model speaks. A scripted reply is a sequence of abstract
//! [`Out`] events (text and reasoning pieces, tool call heads and argument pieces, the finish);
//! an [`Encoder`] writes each in one API's streaming format, as that provider sends it:
//! Chat Completions and Responses SSE, Anthropic Messages SSE, Ollama NDJSON.

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;

/// A wire API, by the path it is served on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST /v1/chat/completions`.
    Completions,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/messages`.
    Anthropic,
    /// `POST /api/chat`.
    Ollama,
}

/// What a request asked, as far as a scripted answer cares.
#[derive(Debug, Clone, Default)]
pub struct Asked {
    /// The last user message's text (echoed by the default reply).
    pub last_user: String,
    /// A rough prompt size (whitespace-separated words of every message).
    pub prompt_tokens: u64,
    pub stream: bool,
    /// Chat Completions `stream_options.include_usage`.
    pub include_usage: bool,
}

/// The parts of a request body [`Api::asked`] reads, left unparsed until needed.
#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow, default)]
    messages: Option<&'a RawValue>,
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow, default)]
    instructions: Option<&'a RawValue>,
    #[serde(borrow, default)]
    stream: Option<&'a RawValue>,
    #[serde(borrow, default)]
    stream_options: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct StreamOptions<'a> {
    #[serde(borrow, default)]
    include_usage: Option<&'a RawValue>,
}

/// One message of the list; anything that is not an object reads as empty.
#[derive(Deserialize, Default)]
struct Message<'a> {
    #[serde(borrow, default)]
    role: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
}

/// A message `content`: a string (most messages), or anything else parsed as JSON.
enum Content<'a> {
    Text(Cow<'a, str>),
    Other(Value),
}

impl<'a> Content<'a> {
    fn read(raw: &'a RawValue) -> Self {
        #[derive(Deserialize)]
        struct Borrowed<'b>(#[serde(borrow)] Cow<'b, str>);
        match serde_json::from_str::<Borrowed>(raw.get()) {
            Ok(Borrowed(s)) => Content::Text(s),
            Err(_) => Content::Other(serde_json::from_str(raw.get()).unwrap_or(Value::Null)),
        }
    }

    fn is_string(&self) -> bool {
        matches!(self, Content::Text(_))
    }

    /// The text: the string, or the text of its blocks.
    fn text(&self) -> Cow<'_, str> {
        match self {
            Content::Text(s) => Cow::Borrowed(s),
            Content::Other(v) => Cow::Owned(content_text(v)),
        }
    }

    /// The string, or its last text block.
    fn last_text(&self) -> String {
        match self {
            Content::Text(s) => s.to_string(),
            Content::Other(Value::Array(blocks)) => blocks
                .iter()
                .rev()
                .find_map(|b| b.get("text").and_then(Value::as_str))
                .unwrap_or_default()
                .to_owned(),
            Content::Other(other) => content_text(other),
        }
    }
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count().max(1) as u64
}

/// The text of a message `content`: a string, or the text of its blocks.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

impl Api {
    pub const ALL: [Api; 4] = [
        Api::Completions,
        Api::Responses,
        Api::Anthropic,
        Api::Ollama,
    ];

    /// The name a loopgate config gives it (`models.providers.<id>.api`).
    pub fn config_name(self) -> &'static str {
        match self {
            Api::Completions => "openai-completions",
            Api::Responses => "openai-responses",
            Api::Anthropic => "anthropic-messages",
            Api::Ollama => "ollama",
        }
    }

    /// The `base_url` a client of this API is configured with for a server at `addr`: the
    /// OpenAI APIs under `/v1`, Anthropic and Ollama at the host root (their clients add
    /// `/v1/messages` and `/api/chat`).
    pub fn base_url(self, addr: std::net::SocketAddr) -> String {
        match self {
            Api::Completions | Api::Responses => format!("http://{addr}/v1"),
            Api::Anthropic | Api::Ollama => format!("http://{addr}"),
        }
    }

    /// Reads `body` as this API's request; `Err` is the provider's complaint. Only what an
    /// answer needs is parsed; the rest is checked as JSON and skipped (a long context is
    /// megabytes, and the benchmark must measure the gateway, not this parse).
    pub fn asked(self, body: &[u8]) -> Result<Asked, String> {
        let list = match self {
            Api::Responses => "input",
            _ => "messages",
        };
        let req: Request =
            serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
        let messages = match self {
            Api::Responses => req.input,
            _ => req.messages,
        };
        let Some(messages) = messages else {
            return Err(format!("Expected '{list}' to be an array"));
        };
        // One pass for the usual list; element by element (anything that is not an object
        // reads as empty) only when that fails.
        let messages: Vec<Message> = match serde_json::from_str(messages.get()) {
            Ok(list) => list,
            Err(_) => serde_json::from_str::<Vec<&RawValue>>(messages.get())
                .map_err(|_| format!("Expected '{list}' to be an array"))?
                .iter()
                .map(|m| serde_json::from_str(m.get()).unwrap_or_default())
                .collect(),
        };
        let mut last_user = None;
        let mut prompt_tokens = 0;
        for m in &messages {
            let Some(content) = m.content else { continue };
            let content = Content::read(content);
            prompt_tokens += words(&content.text());
            // An Anthropic tool result round is a user message too: not what was said.
            if m.role.as_deref() == Some("user")
                && (content.is_string() || !content.text().is_empty())
            {
                last_user = Some(content);
            }
        }
        for raw in [req.system, req.instructions].into_iter().flatten() {
            prompt_tokens += words(&Content::read(raw).text());
        }
        // Ollama streams unless told not to; the others only when asked.
        let flag =
            |raw: Option<&RawValue>| raw.and_then(|r| serde_json::from_str::<bool>(r.get()).ok());
        Ok(Asked {
            // Of blocks, the last text one (Anthropic merges consecutive user messages).
            last_user: last_user.map(|c| c.last_text()).unwrap_or_default(),
            prompt_tokens,
            stream: flag(req.stream).unwrap_or(self == Api::Ollama),
            include_usage: req
                .stream_options
                .and_then(|o| serde_json::from_str::<StreamOptions>(o.get()).ok())
                .and_then(|o| flag(o.include_usage))
                .unwrap_or(false),
        })
    }

    /// The error body this API's provider sends with an HTTP error.
    pub fn error_body(self, status: u16, message: &str) -> Value {
        match self {
            Api::Anthropic => {
                let kind = match status {
                    429 => "rate_limit_error",
                    529 => "overloaded_error",
                    400 => "invalid_request_error",
                    _ => "api_error",
                };
                json!({"type": "error", "error": {"type": kind, "message": message}})
            }
            Api::Ollama => json!({"error": message}),
            Api::Completions | Api::Responses => {
                json!({"error": {"code": status, "message": message, "type": "invalid_request_error"}})
            }
        }
    }

    pub fn content_type(self) -> &'static str {
        match self {
            Api::Ollama => "application/x-ndjson",
            _ => "text/event-stream",
        }
    }
}

/// One abstract piece of a streamed reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Start,
    Text(String),
    Reasoning(String),
    CallStart {
        index: usize,
        id: String,
        name: String,
    },
    CallArgs {
        index: usize,
        piece: String,
    },
    /// Nothing but a keep-alive (an SSE comment, an Anthropic `ping`, a blank NDJSON line).
    KeepAlive,
    /// The end: `reason` in Chat Completions' words (`stop`, `length`, `tool_calls`);
    /// `end_turn` is put on a Responses terminal as given.
    Finish {
        reason: String,
        completion_tokens: u64,
        end_turn: Option<Value>,
    },
}

/// Which Anthropic content block is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Block {
    Text,
    Thinking,
    Tool,
}

/// Writes [`Out`]s in one API's stream format.
pub struct Encoder {
    api: Api,
    model: String,
    created: u64,
    prompt_tokens: u64,
    include_usage: bool,
    /// Anthropic: the open block and its index; Responses: the open item's output index.
    open: Option<(Block, usize)>,
    next_index: usize,
    /// Tool calls so far: (output index or block index, id, name, arguments).
    calls: Vec<(usize, String, String, String)>,
}

fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// An SSE event named by its data's `type`.
fn typed_sse(data: Value) -> String {
    sse(data["type"].as_str(), &data)
}

impl Encoder {
    pub fn new(api: Api, model: &str, created: u64, asked: &Asked) -> Self {
        Self {
            api,
            model: model.to_owned(),
            created,
            prompt_tokens: asked.prompt_tokens,
            include_usage: asked.include_usage,
            open: None,
            next_index: 0,
            calls: Vec::new(),
        }
    }

    /// The bytes for `out`, in this API's format.
    pub fn encode(&mut self, out: Out) -> String {
        match self.api {
            Api::Completions => self.completions(out),
            Api::Responses => self.responses(out),
            Api::Anthropic => self.anthropic(out),
            Api::Ollama => self.ollama(out),
        }
    }

    fn completions(&mut self, out: Out) -> String {
        let chunk = |delta: Value, finish: Option<&str>| {
            sse(
                None,
                &json!({
                    "id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                    "created": self.created, "model": self.model,
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                }),
            )
        };
        match out {
            Out::Start => chunk(json!({"role": "assistant", "content": ""}), None),
            Out::Text(t) => chunk(json!({"content": t}), None),
            Out::Reasoning(t) => chunk(json!({"reasoning_content": t}), None),
            Out::CallStart { index, id, name } => chunk(
                json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                                        "function": {"name": name, "arguments": ""}}]}),
                None,
            ),
            Out::CallArgs { index, piece } => chunk(
                json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                None,
            ),
            Out::KeepAlive => ": keep-alive\n\n".into(),
            Out::Finish {
                reason,
                completion_tokens,
                ..
            } => {
                let mut s = chunk(json!({}), Some(&reason));
                if self.include_usage {
                    let total = self.prompt_tokens + completion_tokens;
                    s.push_str(&sse(
                        None,
                        &json!({
                            "id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                            "created": self.created, "model": self.model, "choices": [],
                            "usage": {"prompt_tokens": self.prompt_tokens,
                                      "completion_tokens": completion_tokens, "total_tokens": total}
                        }),
                    ));
                }
                s.push_str("data: [DONE]\n\n");
                s
            }
        }
    }

    fn responses(&mut self, out: Out) -> String {
        let ev = typed_sse;
        let mut s = String::new();
        match out {
            Out::Start => s.push_str(&ev(json!({"type": "response.created",
                "response": {"id": "resp_scripted", "object": "response", "status": "in_progress",
                             "model": self.model}}))),
            Out::Text(t) => {
                let i = self.responses_item(Block::Text, &mut s);
                s.push_str(&ev(
                    json!({"type": "response.output_text.delta", "item_id": format!("msg_{i}"),
                                      "output_index": i, "content_index": 0, "delta": t}),
                ));
            }
            Out::Reasoning(t) => {
                let i = self.responses_item(Block::Thinking, &mut s);
                s.push_str(&ev(json!({"type": "response.reasoning_summary_text.delta",
                                      "item_id": format!("rs_{i}"), "output_index": i,
                                      "summary_index": 0, "delta": t})));
            }
            Out::CallStart { id, name, .. } => {
                let i = self.next_index;
                self.next_index += 1;
                self.open = Some((Block::Tool, i));
                self.calls
                    .push((i, id.clone(), name.clone(), String::new()));
                s.push_str(&ev(
                    json!({"type": "response.output_item.added", "output_index": i,
                    "item": {"type": "function_call", "id": format!("fc_{i}"), "call_id": id,
                             "name": name, "arguments": "", "status": "in_progress"}}),
                ));
            }
            Out::CallArgs { piece, .. } => {
                if let Some(c) = self.calls.last_mut() {
                    c.3.push_str(&piece);
                    s.push_str(&ev(
                        json!({"type": "response.function_call_arguments.delta",
                        "item_id": format!("fc_{}", c.0), "output_index": c.0, "delta": piece}),
                    ));
                }
            }
            Out::KeepAlive => s.push_str(": keep-alive\n\n"),
            Out::Finish {
                reason,
                completion_tokens,
                end_turn,
            } => self.responses_finish(&reason, completion_tokens, end_turn, &mut s),
        }
        s
    }

    /// Responses: opens an output item of `kind` unless one is open; its output index.
    fn responses_item(&mut self, kind: Block, s: &mut String) -> usize {
        if let Some((open, i)) = self.open {
            if open == kind {
                return i;
            }
        }
        let i = self.next_index;
        self.next_index += 1;
        self.open = Some((kind, i));
        let item = match kind {
            Block::Text => json!({"type": "message", "id": format!("msg_{i}"),
                                  "role": "assistant", "content": []}),
            _ => json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": []}),
        };
        s.push_str(&typed_sse(json!({"type": "response.output_item.added",
                               "output_index": i, "item": item})));
        i
    }

    /// Responses: the tool calls complete (but one cut by the output limit), then the
    /// response does, or is incomplete.
    fn responses_finish(
        &self,
        reason: &str,
        completion_tokens: u64,
        end_turn: Option<Value>,
        s: &mut String,
    ) {
        let ev = typed_sse;
        let cut = reason == "length";
        let n = self.calls.len();
        for (k, (i, id, name, args)) in self.calls.iter().enumerate() {
            // A call cut by the output limit never completes.
            if cut && k + 1 == n {
                break;
            }
            s.push_str(&ev(json!({"type": "response.function_call_arguments.done",
                "item_id": format!("fc_{i}"), "output_index": i, "arguments": args})));
            s.push_str(&ev(
                json!({"type": "response.output_item.done", "output_index": i,
                "item": {"type": "function_call", "id": format!("fc_{i}"), "call_id": id,
                         "name": name, "arguments": args, "status": "completed"}}),
            ));
        }
        let mut response = json!({
            "id": "resp_scripted", "object": "response", "model": self.model,
            "status": if cut { "incomplete" } else { "completed" },
            "usage": {"input_tokens": self.prompt_tokens, "output_tokens": completion_tokens,
                      "total_tokens": self.prompt_tokens + completion_tokens}
        });
        if cut {
            response["incomplete_details"] = json!({"reason": "max_output_tokens"});
        }
        if let Some(e) = end_turn {
            response["end_turn"] = e;
        }
        let kind = if cut {
            "response.incomplete"
        } else {
            "response.completed"
        };
        s.push_str(&ev(json!({"type": kind, "response": response})));
    }

    fn anthropic(&mut self, out: Out) -> String {
        let ev = |data: Value| sse(data["type"].as_str(), &data);
        let mut s = String::new();
        let close = |enc: &mut Self, s: &mut String| {
            if let Some((kind, i)) = enc.open.take() {
                // A thinking block is signed at its end, as Anthropic does.
                if kind == Block::Thinking {
                    s.push_str(&ev(json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "signature_delta", "signature": format!("scripted-sig-{i}")}})));
                }
                s.push_str(&ev(json!({"type": "content_block_stop", "index": i})));
            }
        };
        let open = |enc: &mut Self, kind: Block, block: Value, s: &mut String| -> usize {
            if let Some((k, i)) = enc.open {
                if k == kind && kind != Block::Tool {
                    return i;
                }
            }
            close(enc, s);
            let i = enc.next_index;
            enc.next_index += 1;
            enc.open = Some((kind, i));
            s.push_str(&ev(
                json!({"type": "content_block_start", "index": i, "content_block": block}),
            ));
            i
        };
        match out {
            Out::Start => s.push_str(&ev(json!({"type": "message_start", "message": {
                "id": "msg_scripted", "type": "message", "role": "assistant", "model": self.model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": self.prompt_tokens, "output_tokens": 1}}}))),
            Out::Text(t) => {
                let i = open(
                    self,
                    Block::Text,
                    json!({"type": "text", "text": ""}),
                    &mut s,
                );
                s.push_str(&ev(json!({"type": "content_block_delta", "index": i,
                                      "delta": {"type": "text_delta", "text": t}})));
            }
            Out::Reasoning(t) => {
                let i = open(
                    self,
                    Block::Thinking,
                    json!({"type": "thinking", "thinking": ""}),
                    &mut s,
                );
                s.push_str(&ev(json!({"type": "content_block_delta", "index": i,
                                      "delta": {"type": "thinking_delta", "thinking": t}})));
            }
            Out::CallStart { id, name, .. } => {
                open(
                    self,
                    Block::Tool,
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    &mut s,
                );
            }
            Out::CallArgs { piece, .. } => {
                if let Some((Block::Tool, i)) = self.open {
                    s.push_str(&ev(json!({"type": "content_block_delta", "index": i,
                        "delta": {"type": "input_json_delta", "partial_json": piece}})));
                }
            }
            Out::KeepAlive => s.push_str(&ev(json!({"type": "ping"}))),
            Out::Finish {
                reason,
                completion_tokens,
                ..
            } => {
                close(self, &mut s);
                let stop = match reason.as_str() {
                    "length" => "max_tokens",
                    "tool_calls" => "tool_use",
                    _ => "end_turn",
                };
                s.push_str(&ev(json!({"type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": null},
                    "usage": {"output_tokens": completion_tokens}})));
                s.push_str(&ev(json!({"type": "message_stop"})));
            }
        }
        s
    }

    fn ollama(&mut self, out: Out) -> String {
        let line = |message: Value| {
            format!(
                "{}\n",
                json!({"model": self.model, "created_at": "2026-12-01T00:00:00Z",
                       "message": message, "done": false})
            )
        };
        match out {
            Out::Start => String::new(),
            Out::Text(t) => line(json!({"role": "assistant", "content": t})),
            Out::Reasoning(t) => line(json!({"role": "assistant", "content": "", "thinking": t})),
            // Ollama sends each call whole, once it is complete.
            Out::CallStart { index, id, name } => {
                self.calls.push((index, id, name, String::new()));
                String::new()
            }
            Out::CallArgs { piece, .. } => {
                if let Some(c) = self.calls.last_mut() {
                    c.3.push_str(&piece);
                }
                String::new()
            }
            Out::KeepAlive => "\n".into(),
            Out::Finish {
                reason,
                completion_tokens,
                ..
            } => {
                let mut calls = std::mem::take(&mut self.calls);
                if reason == "length" {
                    calls.pop();
                }
                let mut s = String::new();
                if !calls.is_empty() {
                    let list: Vec<Value> = calls
                        .iter()
                        .map(|(_, _, name, args)| {
                            let args: Value = serde_json::from_str(args)
                                .unwrap_or_else(|_| Value::String(args.clone()));
                            json!({"function": {"name": name, "arguments": args}})
                        })
                        .collect();
                    s.push_str(&line(
                        json!({"role": "assistant", "content": "", "tool_calls": list}),
                    ));
                }
                let done_reason = if reason == "length" { "length" } else { "stop" };
                s.push_str(&format!(
                    "{}\n",
                    json!({"model": self.model, "created_at": "2026-12-01T00:00:00Z",
                           "message": {"role": "assistant", "content": ""}, "done": true,
                           "done_reason": done_reason, "prompt_eval_count": self.prompt_tokens,
                           "eval_count": completion_tokens})
                ));
                s
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_read_for_its_last_user_text_size_and_stream_flags() {
        let body = json!({
            "model": "m",
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": [
                {"role": "system", "content": "be brief"},
                {"role": "user", "content": "first \"quoted\"\nline"},
                7,
                {"role": "assistant", "content": [{"type": "text", "text": "two words"}]},
                {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "last one"}]},
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]},
            ],
        });
        let a = Api::Completions.asked(body.to_string().as_bytes()).unwrap();
        assert_eq!(
            a.last_user, "last one",
            "a tool result round is not what was said"
        );
        // be brief (2) + first "quoted" line (3) + two words (2) + alast one (2) + empty (1).
        assert_eq!(a.prompt_tokens, 10);
        assert!(a.stream && a.include_usage);
        let ollama = json!({"messages": [{"role": "user", "content": "hi"}]});
        let a = Api::Ollama.asked(ollama.to_string().as_bytes()).unwrap();
        assert!(a.stream, "Ollama streams unless told not to");
        assert!(!a.include_usage);
    }

    #[test]
    fn what_is_not_the_api_is_refused_as_the_provider_would() {
        let e = Api::Responses.asked(br#"{"messages": []}"#).unwrap_err();
        assert_eq!(e, "Expected 'input' to be an array");
        let e = Api::Completions
            .asked(br#"{"messages": "no"}"#)
            .unwrap_err();
        assert_eq!(e, "Expected 'messages' to be an array");
        let e = Api::Completions.asked(b"{\"messages\": [").unwrap_err();
        assert!(e.starts_with("invalid JSON"), "{e}");
        let a = Api::Responses
            .asked(br#"{"input": [{"role": "user", "content": "x"}], "stream": "yes", "instructions": "a b"}"#)
            .unwrap();
        assert!(!a.stream, "a stream flag that is not a bool is not one");
        assert_eq!((a.last_user.as_str(), a.prompt_tokens), ("x", 3));
    }
}
