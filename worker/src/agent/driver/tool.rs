//! The tool call in flight: its own task, with the call's hooks, and its partial output.

use std::sync::Arc;

use serde_json::json;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::hooks::HookCtx;
use crate::tools::{self, ToolCall, ToolCtx, ToolOutcome};
use crate::Ctx;

/// A tool running in its own task; dropping it aborts the task (and, for `exec`, kills the
/// child, which is spawned with kill-on-drop).
pub(super) struct ToolRun {
    task: JoinHandle<ToolOutcome>,
    updates: mpsc::Receiver<String>,
}

/// Partial tool output queued before the driver reads it (updates beyond it are dropped).
const TOOL_UPDATE_QUEUE: usize = 16;

pub(super) enum ToolItem {
    Update(String),
    Done(ToolOutcome),
}

impl Drop for ToolRun {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs one call with its hooks: `before_tool_call` guards (may block or rewrite the
/// arguments), the tool, `tool_result_persist` (may rewrite the result), and
/// `after_tool_call` observers (in the background, off the run's path).
pub(super) fn start_tool(
    ctx: &Arc<Ctx>,
    tools_ctx: &ToolCtx,
    hook_ctx: &HookCtx,
    call: ToolCall,
) -> ToolRun {
    let (ctx, mut tools_ctx, hook_ctx) = (ctx.clone(), tools_ctx.clone(), hook_ctx.clone());
    let (tx, updates) = mpsc::channel(TOOL_UPDATE_QUEUE);
    tools_ctx.progress = Some(tx);
    ToolRun {
        updates,
        task: tokio::spawn(async move {
            let call = match ctx.hooks.before_tool_call(&hook_ctx, &call).await {
                Ok(call) => call,
                Err(reason) => {
                    return ToolOutcome {
                        delivered: None,
                        content: reason,
                        is_error: true,
                    }
                }
            };
            // A message goes through the `message_sending` guards before it is delivered: a
            // cancelled one is not sent (an error the model sees, never delivery proof), a
            // rewritten one is delivered as rewritten (R-H2).
            let mut delivered = None;
            if call.name == tools::MESSAGE_TOOL && ctx.hooks.has("message_sending") {
                if let Some(text) = tools::message_text(&call.arguments) {
                    match ctx.hooks.message_sending(&hook_ctx, &text).await {
                        None => {
                            return ToolOutcome {
                                content: "Not sent: a message_sending hook cancelled the message."
                                    .into(),
                                is_error: true,
                                delivered: None,
                            }
                        }
                        Some(kept) => delivered = Some(kept),
                    }
                }
            }
            let mut outcome = tools::execute(&tools_ctx, &call).await;
            if !outcome.is_error {
                outcome.delivered = delivered;
            }
            ctx.observe_later(&hook_ctx, "after_tool_call", || {
                vec![json!({
                    "toolName": call.name, "toolCallId": call.id,
                    "result": outcome.content, "isError": outcome.is_error,
                })]
            });
            ctx.hooks
                .tool_result_persist(&hook_ctx, &call, outcome)
                .await
        }),
    }
}

/// The running tool's next update, or its outcome once every queued update was read (the
/// task drops its sender when it ends, so updates always come before the outcome).
pub(super) async fn next_tool(tool: &mut Option<ToolRun>) -> ToolItem {
    let Some(t) = tool.as_mut() else {
        return std::future::pending().await;
    };
    tokio::select! {
        biased;
        Some(text) = t.updates.recv() => ToolItem::Update(text),
        res = &mut t.task => ToolItem::Done(match res {
            Ok(outcome) => outcome,
            Err(e) => ToolOutcome {
                delivered: None,
                content: format!("the tool failed: {e}"),
                is_error: true,
            },
        }),
    }
}
