//! The model call in flight: its streaming task, and the pacing of its text deltas before
//! the turn sees them (R-D2).

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::sleep_until;
use crate::llm::{LlmError, LlmEvent, ModelRequest};
use crate::Ctx;

/// Model events buffered between the streaming task and the driver (a provider sending 64 KiB
/// deltas fills it with 4 MiB, twice the reply cap).
const MODEL_QUEUE: usize = 64;

/// The most text and reasoning one model response may stream, together. A larger one ends
/// the call as the provider's fault (the run ends `error` naming this cap, unless a fallback
/// model answers), so every frame and transcript entry about a reply stays far under the
/// control link's 16 MiB frame: 2 MiB is over 500 000 tokens, and JSON escaping at most
/// sextuples it.
pub const REPLY_MAX_BYTES: usize = 2 << 20;

pub(super) type ModelItem = Result<LlmEvent, LlmError>;

pub(super) struct ModelCall {
    task: JoinHandle<()>,
    rx: mpsc::Receiver<ModelItem>,
    /// Bytes of text and reasoning this response has streamed.
    streamed: usize,
}

impl Drop for ModelCall {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How often a run's text is passed on while the model streams (OpenClaw paces live text at
/// 75 ms). Every assistant and chat event carries the whole text so far, so without pacing a
/// long reply in small deltas costs the square of its length; paced, it grows with time.
const TEXT_PACE: std::time::Duration = std::time::Duration::from_millis(75);

/// Text deltas not passed on yet, and when text last was. Kept outside [`next_model`] so a
/// select that drops its future loses nothing.
#[derive(Default)]
pub(super) struct Paced {
    pub(super) text: String,
    last_emit: Option<Instant>,
}

impl Paced {
    fn emit(&mut self) -> ModelItem {
        self.last_emit = Some(Instant::now());
        Ok(LlmEvent::Delta(std::mem::take(&mut self.text)))
    }
}

/// Next model item. Text deltas are merged: the first one after a pause goes at once, later
/// ones at most every [`TEXT_PACE`]; any other item (a tool call, the end) first flushes the
/// text before it, so order is kept.
pub(super) async fn next_model(
    call: &mut Option<ModelCall>,
    held: &mut Option<ModelItem>,
    paced: &mut Paced,
) -> Option<ModelItem> {
    loop {
        let due = paced.last_emit.map(|t| t + TEXT_PACE);
        if !paced.text.is_empty() && due.is_none_or(|d| Instant::now() >= d) {
            return Some(paced.emit());
        }
        let item = match held.take() {
            Some(item) => Some(item),
            None => match call.as_mut() {
                None => None,
                Some(c) => {
                    let item = tokio::select! {
                        item = c.rx.recv() => item,
                        _ = sleep_until(due), if !paced.text.is_empty() => continue,
                    };
                    if let Some(Ok(LlmEvent::Delta(t) | LlmEvent::Reasoning(t))) = &item {
                        c.streamed += t.len();
                    }
                    if c.streamed > REPLY_MAX_BYTES {
                        // The call is dropped (its task aborted) and the unsent text with it.
                        *call = None;
                        paced.text.clear();
                        return Some(Err(too_large()));
                    }
                    item
                }
            },
        };
        match item {
            Some(Ok(LlmEvent::Delta(more))) => paced.text.push_str(&more),
            Some(other) if !paced.text.is_empty() => {
                *held = Some(other);
                return Some(paced.emit());
            }
            None if !paced.text.is_empty() => return Some(paced.emit()),
            other => return other,
        }
    }
}

/// The failure of a response past [`REPLY_MAX_BYTES`].
fn too_large() -> LlmError {
    LlmError::Protocol(format!(
        "the model's reply is larger than the {} MiB cap on one response's text and reasoning",
        REPLY_MAX_BYTES >> 20
    ))
}

/// A failed model request's class in `/metrics` (bounded: never the provider's words).
pub(super) fn failure_class(e: &LlmError) -> &'static str {
    match e {
        LlmError::RateLimited { .. } => "rate_limit",
        LlmError::Http { status, .. } if *status >= 500 => "http_5xx",
        LlmError::Http { .. } => "http_4xx",
        LlmError::Transport(_) => "network",
        LlmError::Timeout(_) => "timeout",
        LlmError::Protocol(_) => "protocol",
        LlmError::Config(_) | LlmError::Unsupported(_) => "config",
    }
}

pub(super) fn start_model(ctx: &Arc<Ctx>, req: ModelRequest) -> ModelCall {
    let (tx, rx) = mpsc::channel(MODEL_QUEUE);
    let ctx = ctx.clone();
    let task = tokio::spawn(async move {
        let other = req
            .choice
            .as_ref()
            .filter(|c| c.provider != ctx.spec.model.provider)
            .map(|c| ctx.other_llm(&c.provider));
        match other.as_ref().unwrap_or(&ctx.llm) {
            Ok(client) => client.stream(req, &tx).await,
            Err(e) => {
                let _ = tx.send(Err(e.clone())).await;
            }
        }
    });
    ModelCall {
        task,
        rx,
        streamed: 0,
    }
}
