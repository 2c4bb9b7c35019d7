//! What a turn tells and records beside its own events: a steered run's start in its
//! carrier's turn and a message recorded for it, the compaction hooks, and the audit
//! ledger's view of an event (R-D6).

use std::sync::Arc;
use std::time::Instant;

use ipc::control::{
    EventBody, Phase as LPhase, RunEvent, RunStopReason, SubmitRun, WorkerToControl,
};
use serde_json::json;

use crate::hooks::HookCtx;
use crate::store::AuditRecord;
use crate::{now_ms, Ctx};

/// Tells the supervisor a steered run's message was taken into `carrier`'s turn: that
/// run's `start`, marked `carried_by` (it has no turn of its own; R-B3).
pub(super) async fn taken_in(ctx: &Arc<Ctx>, session_key: &str, run_id: String, carrier: &str) {
    let at = now_ms();
    let ev = RunEvent {
        run_id,
        seq: 1,
        ts: at,
        body: EventBody::Lifecycle(ipc::control::Lifecycle {
            phase: LPhase::Start,
            started_at: Some(at),
            ended_at: None,
            error: None,
            stop_reason: None,
            aborted: None,
            session_id: None,
            session_key: Some(session_key.to_owned()),
            carried_by: Some(carrier.to_owned()),
            reply: None,
            guarded: Vec::new(),
            footer: None,
        }),
    };
    let _ = ctx.out.send(WorkerToControl::Event(ev)).await;
}

/// Tells the supervisor a message was recorded (`seq`: the run's last event's; this is not
/// a run event of its own).
pub(super) async fn told(
    ctx: &Arc<Ctx>,
    run_id: &str,
    seq: u64,
    message: ipc::control::StoredMessage,
) {
    let ev = RunEvent {
        run_id: run_id.to_owned(),
        seq,
        ts: now_ms(),
        body: EventBody::Message(message),
    };
    let _ = ctx.out.send(WorkerToControl::Event(ev)).await;
}

/// `before_compaction` / `after_compaction` observers, from the compaction events.
pub(super) fn compaction_hooks(ctx: &Arc<Ctx>, hook_ctx: &HookCtx, body: &EventBody) {
    let EventBody::Compaction {
        phase,
        completed,
        reason,
        messages,
        tokens_before,
        tokens_after,
        ..
    } = body
    else {
        return;
    };
    if *phase == ipc::control::CompactionPhase::Start {
        ctx.observe_later(hook_ctx, "before_compaction", || {
            vec![json!({"messageCount": messages, "tokenCount": tokens_before, "reason": reason})]
        });
    } else {
        ctx.observe_later(hook_ctx, "after_compaction", || {
            vec![json!({
                "completed": completed, "compactedCount": messages,
                "tokensBefore": tokens_before, "tokenCount": tokens_after, "reason": reason,
            })]
        });
    }
}

/// The audit ledger's view of an event (R-D6): lifecycle and tool start/terminal, with
/// result codes and timings, never content.
pub(super) fn audit_record(
    run: &SubmitRun,
    body: &EventBody,
    tool_started: &mut Option<Instant>,
) -> Option<AuditRecord> {
    let base = |kind, phase: &str| AuditRecord {
        ts: now_ms(),
        run_id: run.run_id.clone(),
        session_key: run.session_key.clone(),
        kind,
        phase: phase.to_owned(),
        tool_name: None,
        tool_call_id: None,
        result: None,
        duration_ms: None,
    };
    match body {
        EventBody::Lifecycle(l) => {
            let (phase, result) = match l.phase {
                LPhase::Start => ("start", None),
                LPhase::End => ("end", Some("ok")),
                LPhase::Error if l.aborted == Some(true) => ("error", Some("aborted")),
                LPhase::Error if l.stop_reason == Some(RunStopReason::Timeout) => {
                    ("error", Some("timeout"))
                }
                LPhase::Error => ("error", Some("error")),
                _ => return None,
            };
            Some(AuditRecord {
                result,
                duration_ms: l
                    .ended_at
                    .zip(l.started_at)
                    .map(|(e, s)| e.saturating_sub(s)),
                ..base("lifecycle", phase)
            })
        }
        EventBody::Tool {
            phase,
            tool_call_id,
            name,
            is_error,
            ..
        } => {
            if *phase == ipc::control::ToolPhase::Update {
                return None;
            }
            let duration_ms = if *phase == ipc::control::ToolPhase::Start {
                *tool_started = Some(Instant::now());
                None
            } else {
                tool_started.take().map(|t| t.elapsed().as_millis() as u64)
            };
            Some(AuditRecord {
                tool_name: Some(name.clone()),
                tool_call_id: Some(tool_call_id.clone()),
                result: is_error.map(|e| if e { "error" } else { "ok" }),
                duration_ms,
                ..base(
                    "tool",
                    match phase {
                        ipc::control::ToolPhase::Start => "start",
                        _ => "result",
                    },
                )
            })
        }
        _ => None,
    }
}
