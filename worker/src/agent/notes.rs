//! What a run's reply carries after its text, as OpenClaw adds it (`ipc::footer`): the usage
//! footer of `/usage tokens|full` and the raw trace of `/trace raw`. Pure: built once the
//! outcome is recorded, from the terminal and the turn's settings. The chat `final` shows
//! it after the reply and the payloads carry it; the transcript never does, so the model
//! never reads it back.

use ipc::control::{Payload, RunStatus, RunTerminal, Usage};
use ipc::footer::{grouped, tokens, usd, ModelPrice, UsageFooter};

/// What a run's reply is to carry after its text (part of the turn's settings).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NotesSpec {
    /// The usage footer (`/usage tokens|full`); `None`: none.
    pub usage_footer: Option<UsageFooter>,
    /// `/trace raw`: the raw trace, and what it shows of the request.
    pub raw_trace: Option<RawTraceSpec>,
}

/// What `/trace raw` shows of the request: its message and its settings.
#[derive(Clone, PartialEq, Eq)]
pub struct RawTraceSpec {
    pub message: String,
    pub thinking: Option<String>,
    pub reasoning: ipc::thinking::ReasoningMode,
    pub verbose: ipc::thinking::VerboseLevel,
    pub blocks: Option<ipc::blocks::BlockBoundary>,
}

/// What follows a reply: the usage footer line and the raw trace.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Notes {
    pub usage_line: Option<String>,
    pub trace: Option<String>,
}

// The user's message and the model's words stay out of logs.
impl std::fmt::Debug for RawTraceSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RawTraceSpec")
            .field("message_len", &self.message.len())
            .field("thinking", &self.thinking)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Notes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notes")
            .field("usage_line", &self.usage_line)
            .field("trace_len", &self.trace.as_ref().map(String::len))
            .finish()
    }
}

impl Notes {
    /// The notes of a run that ended with `t` after `output` (the last response's text as
    /// the model wrote it). Only a run that ended `ok` has any.
    pub fn of(spec: &NotesSpec, t: &RunTerminal, output: &str) -> Notes {
        if t.status != RunStatus::Ok {
            return Notes::default();
        }
        let provider = t.provider.as_deref().unwrap_or_default();
        let model = t.model.as_deref().unwrap_or_default();
        let usage = t.usage.unwrap_or_default();
        Notes {
            usage_line: spec
                .usage_footer
                .as_ref()
                .and_then(|f| usage_line(f, &usage, provider, model)),
            trace: spec
                .raw_trace
                .as_ref()
                .map(|r| raw_trace(r, t, provider, model, output)),
        }
    }

    /// What the chat `final` shows after the reply, with what parts it from the reply
    /// (`None`: nothing): the trace in a paragraph of its own (OpenClaw sends it as a payload
    /// of its own), then the usage line on a line of its own, as OpenClaw orders them.
    pub fn chat_text(&self) -> Option<String> {
        match (&self.usage_line, &self.trace) {
            (None, None) => None,
            (Some(u), None) => Some(format!("\n{u}")),
            (None, Some(t)) => Some(format!("\n\n{t}")),
            (Some(u), Some(t)) => Some(format!("\n\n{t}\n{u}")),
        }
    }

    /// The payloads with the notes, as OpenClaw adds them: the trace as a payload after
    /// them, then the usage line at the end of the last text (on a line of its own; alone
    /// if there is none).
    pub fn apply(&self, payloads: &mut Vec<Payload>) {
        if let Some(trace) = &self.trace {
            payloads.push(Payload {
                text: trace.clone(),
                is_error: false,
            });
        }
        if let Some(line) = &self.usage_line {
            match payloads.iter_mut().rev().find(|p| !p.text.is_empty()) {
                Some(p) => {
                    if !p.text.ends_with('\n') {
                        p.text.push('\n');
                    }
                    p.text.push_str(line);
                }
                None => payloads.push(Payload {
                    text: line.clone(),
                    is_error: false,
                }),
            }
        }
    }
}

/// The prompt tokens of `u` not read from or written to the cache.
fn fresh_input(u: &Usage) -> u64 {
    ipc::footer::fresh_input(u.input, u.cache_read, u.cache_write)
}

/// What `u` costs at price `p`.
fn cost(p: &ModelPrice, u: &Usage) -> f64 {
    let per = ipc::footer::per_million;
    per(fresh_input(u), p.input)
        + per(u.output, p.output)
        + per(u.cache_read, p.cache_read)
        + per(u.cache_write, p.cache_write)
}

/// The footer of a run that used `u` on `provider`/`model`, in OpenClaw's words
/// (`Usage: 1.2k in / 38 out · cache 800 cached / 0 new · est $0.0018`); `None` when the
/// run used no tokens. A model without a price has no estimate (as OpenClaw's without a
/// `cost`).
fn usage_line(f: &UsageFooter, u: &Usage, provider: &str, model: &str) -> Option<String> {
    if u.input == 0 && u.output == 0 && u.cache_read == 0 && u.cache_write == 0 {
        return None;
    }
    let price = f
        .prices
        .iter()
        .find(|p| p.provider == provider && p.model == model);
    let estimate = match (f.cost, price) {
        (true, Some(p)) => format!(" · est {}", usd(cost(p, u))),
        _ => String::new(),
    };
    let cache = if u.cache_read > 0 || u.cache_write > 0 {
        format!(
            " · cache {} cached / {} new",
            tokens(u.cache_read),
            tokens(u.cache_write)
        )
    } else {
        String::new()
    };
    Some(format!(
        "Usage: {} in / {} out{cache}{estimate}",
        tokens(fresh_input(u)),
        tokens(u.output)
    ))
}

/// OpenClaw's raw trace (its blocks and words, `/trace raw`), from what loopgate knows of
/// the run: usage, the model that answered, the request's settings, tools, the completion,
/// the message and the raw reply.
fn raw_trace(
    r: &RawTraceSpec,
    t: &RunTerminal,
    provider: &str,
    model: &str,
    output: &str,
) -> String {
    let winner = format!("{provider}/{model}");
    let stop = t.stop_reason.map(|s| s.as_str());
    let mut blocks = Vec::new();
    if let Some(u) = t.usage {
        let line = |label: &str, n: u64| format!("{label}={} tok ({})", grouped(n), tokens(n));
        blocks.push(fenced(
            "Usage (Last Turn Total)",
            &[
                line("input", u.input),
                line("output", u.output),
                line("cacheRead", u.cache_read),
                line("cacheWrite", u.cache_write),
                line("total", u.total),
            ],
        ));
    }
    let fallback = if t.fallbacks > 0 { "yes" } else { "no" };
    blocks.push(fenced(
        "Execution Result",
        &[
            format!("winner={winner}"),
            format!("fallbackUsed={fallback}"),
        ],
    ));
    let blocks_at = r.blocks.map(|b| match b {
        ipc::blocks::BlockBoundary::MessageEnd => "message_end",
        _ => "text_end",
    });
    let shaping: Vec<String> = [
        ("provider", Some(provider)),
        ("model", Some(model)),
        ("thinking", r.thinking.as_deref()),
        ("reasoning", Some(r.reasoning.as_str())),
        ("verbose", Some(r.verbose.as_str())),
        ("trace", Some("raw")),
        ("blockStreaming", blocks_at),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.map(|v| format!("{k}={v}")))
    .collect();
    blocks.push(fenced("Request Shaping", &shaping));
    if t.tool_calls > 0 {
        blocks.push(fenced(
            "Tool Summary",
            &[format!("calls={}", grouped(t.tool_calls.into()))],
        ));
    }
    if let Some(stop) = stop {
        blocks.push(fenced(
            "Completion",
            &[format!("finishReason={stop}"), format!("stopReason={stop}")],
        ));
    }
    blocks.push(raw_block("Model Input (User Role)", &r.message));
    blocks.push(raw_block("Model Output (Assistant Role)", output));
    blocks.push(summary(&winner, r, t, stop));
    blocks.join("\n\n\n")
}

/// `🔎 Title:` and its lines in a `~~~text` fence.
fn fenced(title: &str, lines: &[String]) -> String {
    format!("🔎 {title}:\n~~~text\n{}\n~~~", lines.join("\n"))
}

/// Text as written, in a fence it cannot close: every line break is a `\n`, and a line that
/// could close the fence (up to three spaces, then `~~~`) gets a `\` before its tildes.
fn raw_block(title: &str, text: &str) -> String {
    let shown = if text.trim().is_empty() {
        "<empty>".to_owned()
    } else {
        text.replace("\r\n", "\n")
            .replace('\r', "\n")
            .split('\n')
            .map(|l| {
                let indent = l.len() - l.trim_start_matches(' ').len();
                if indent <= 3 && l[indent..].starts_with("~~~") {
                    format!("{}\\{}", &l[..indent], &l[indent..])
                } else {
                    l.to_owned()
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    format!("🔎 {title}:\n~~~text\n{shown}\n~~~")
}

/// The one-line summary that ends the trace.
fn summary(winner: &str, r: &RawTraceSpec, t: &RunTerminal, stop: Option<&str>) -> String {
    let mut fields = vec![match &r.thinking {
        Some(level) => format!("winner={winner} 🧠 {level}"),
        None => format!("winner={winner}"),
    }];
    fields.push(format!(
        "fallback={}",
        if t.fallbacks > 0 { "yes" } else { "no" }
    ));
    if let Some(stop) = stop {
        fields.push(format!("stop={stop}"));
    }
    let u = t.usage.unwrap_or_default();
    for (mark, n) in [
        ("⬇️", u.input),
        ("⬆️", u.output),
        ("♻️", u.cache_read),
        ("🆕", u.cache_write),
        ("🔢", u.total),
    ] {
        if n > 0 {
            fields.push(format!("{mark} {}", tokens(n)));
        }
    }
    if t.tool_calls > 0 {
        fields.push(format!("tools={}", grouped(t.tool_calls.into())));
    }
    format!("Summary: {}", fields.join(" "))
}

#[cfg(test)]
mod tests;
