//! The model call in flight: its streaming task, and the merging of its text deltas already
//! queued before the turn sees them (R-D2).

use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

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

/// The most text one merged delta carries.
const MERGE_MAX_BYTES: usize = 64 << 10;

/// Next model item. Text deltas already queued behind the first are merged into it, with no
/// wait (R-D2: the supervisor paces what clients see; the transcript and tools never wait);
/// an item of another kind stays `held` for the next call, so order is kept.
pub(super) async fn next_model(
    call: &mut Option<ModelCall>,
    held: &mut Option<ModelItem>,
) -> Option<ModelItem> {
    let first = match held.take() {
        Some(item) => item,
        None => {
            let c = call.as_mut()?;
            let item = c.rx.recv().await?;
            if c.past_cap(&item) {
                return Some(too_large(call));
            }
            item
        }
    };
    let Ok(LlmEvent::Delta(mut text)) = first else {
        return Some(first);
    };
    while text.len() < MERGE_MAX_BYTES {
        let Some(c) = call.as_mut() else { break };
        let Ok(item) = c.rx.try_recv() else { break };
        if c.past_cap(&item) {
            return Some(too_large(call));
        }
        match item {
            Ok(LlmEvent::Delta(more)) => text.push_str(&more),
            other => {
                *held = Some(other);
                break;
            }
        }
    }
    Some(Ok(LlmEvent::Delta(text)))
}

impl ModelCall {
    /// Counts the text and reasoning `item` streams; true once the response is past
    /// [`REPLY_MAX_BYTES`].
    fn past_cap(&mut self, item: &ModelItem) -> bool {
        if let Ok(LlmEvent::Delta(t) | LlmEvent::Reasoning(t)) = item {
            self.streamed += t.len();
        }
        self.streamed > REPLY_MAX_BYTES
    }
}

/// The end of a response past [`REPLY_MAX_BYTES`]: the call is dropped (its task aborted)
/// and what it streamed since the last item with it.
fn too_large(call: &mut Option<ModelCall>) -> ModelItem {
    *call = None;
    Err(LlmError::Protocol(format!(
        "the model's reply is larger than the {} MiB cap on one response's text and reasoning",
        REPLY_MAX_BYTES >> 20
    )))
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
