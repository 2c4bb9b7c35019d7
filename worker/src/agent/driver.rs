//! The thin async driver of one turn: carries out the core's actions (events to the
//! supervisor, model streaming, persistence) and feeds it inputs (model stream, cancel,
//! deadlines). Adjacent text deltas already queued are merged before the core sees them,
//! adding no delay (R-D2).
//!
//! `driver/model.rs`: the model call's task and the pacing of its text; `driver/tool.rs`: the
//! tool's task with its hooks; `driver/prepare.rs`: the run's model request.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use ipc::control::{
    EventBody, Phase as LPhase, RunEvent, RunTerminal, StopReason, SubmitRun, WorkerToControl,
};
use tokio::sync::{mpsc, watch};

use super::compaction::ContextBudget;
use super::core::{Action, Input, SteerMsg, Turn, TurnSpec};
use crate::hooks::{self, HookCtx};
use crate::llm::{LlmError, LlmEvent, ModelChoice};
use crate::store::{AuditRecord, BeginRun};
use crate::tools::{self, ToolCtx};
use crate::{now_ms, Ctx};
use serde_json::json;

mod model;
mod prepare;
mod tool;

use model::{failure_class, next_model, start_model, ModelCall, ModelItem, Paced};
use prepare::prepare;
use tool::{next_tool, start_tool, ToolItem, ToolRun};

/// How long an `exec` waits for an operator by default (`tools.exec.approval_timeout_seconds`;
/// OpenClaw's 30 minutes).
pub const DEFAULT_APPROVAL_TIMEOUT_MS: u64 = 1_800_000;

/// An operator's decision on one of the run's approvals.
#[derive(Debug)]
pub struct Decided {
    pub id: String,
    pub decision: ipc::approval::ApprovalDecision,
}

/// How a turn ended.
pub struct Driven {
    pub terminal: RunTerminal,
    /// Runs whose steered messages the turn took (they end with its outcome); the other
    /// messages steered into it were declined and run after it.
    pub steered: Vec<String>,
}

/// Runs one turn to its terminal outcome (already persisted when this returns, unless
/// persistence itself failed, which the outcome then says). `steer` brings messages sent
/// to the session meanwhile (queue mode `steer`, R-B3).
pub async fn drive(
    ctx: Arc<Ctx>,
    run: SubmitRun,
    mut cancel: watch::Receiver<Option<StopReason>>,
    mut steer: mpsc::Receiver<SteerMsg>,
    mut decisions: mpsc::Receiver<Decided>,
    probe: Arc<crate::diagnostics::Probe>,
    carried: Vec<String>,
) -> Driven {
    let approval_ms = ctx
        .spec
        .exec
        .approval_timeout_ms
        .unwrap_or(DEFAULT_APPROVAL_TIMEOUT_MS);
    let model = &ctx.spec.model;
    let spec = TurnSpec {
        run_id: run.run_id.clone(),
        session_key: run.session_key.clone(),
        provider: model.provider.clone(),
        model: model.model.clone(),
        timeout: run.timeout_ms.map(std::time::Duration::from_millis),
        idle_timeout: std::time::Duration::from_millis(model.idle_timeout_ms),
        context: ContextBudget::new(model.context_window, &ctx.spec.compaction),
        compaction: ctx.spec.compaction.clone(),
        retry_base: std::time::Duration::from_millis(model.retry_base_ms.unwrap_or(1000)),
        retry_max: std::time::Duration::from_millis(model.retry_max_ms.unwrap_or(30_000)),
        approval_timeout: std::time::Duration::from_millis(approval_ms),
        reasoning: run
            .reasoning
            .as_deref()
            .and_then(ipc::thinking::ReasoningMode::parse)
            .unwrap_or_default(),
        // A model the request named is strict: no fallback, as in OpenClaw.
        fallbacks: if run.strict_model {
            Vec::new()
        } else {
            ctx.spec
                .fallbacks
                .iter()
                .map(|f| ModelChoice {
                    provider: f.provider.clone(),
                    model: f.model.clone(),
                    context_window: ctx
                        .spec
                        .providers
                        .iter()
                        .find(|p| p.provider == f.provider)
                        .and_then(|p| p.context_window),
                })
                .collect()
        },
    };
    let mut turn = Turn::new(spec, Instant::now(), now_ms());
    let hook_ctx = ctx.hook_ctx(&run.session_key, &run.run_id);
    ctx.observe_later(&hook_ctx, "message_received", || {
        vec![json!({"content": run.message})]
    });
    let begun = ctx
        .writer
        .begin_run(BeginRun {
            run_id: run.run_id.clone(),
            session_key: run.session_key.clone(),
            accepted_at: run.accepted_at,
            started_at: turn.started_at(),
            user_text: run.message.clone(),
            carried,
        })
        .await;
    // The user message, told to clients once the run has started.
    let mut user_message = None;
    let first = match begun {
        Ok((session_id, created, user)) => {
            user_message = user.display;
            if created {
                ctx.observe_later(&hook_ctx, "session_start", || {
                    vec![json!({"sessionId": session_id})]
                });
            }
            Input::Begun {
                request: prepare(&ctx, &run, &hook_ctx).await,
                session_id,
            }
        }
        Err(e) => Input::BeginFailed(e.to_string()),
    };
    let mut pending = VecDeque::from([first]);
    let mut call: Option<ModelCall> = None;
    let mut tool: Option<ToolRun> = None;
    let mut tool_started: Option<Instant> = None;
    let tool_ctx = ToolCtx {
        workspace: std::path::PathBuf::from(&ctx.spec.workspace),
        exec: ctx.spec.exec.clone(),
        allow: ctx.spec.tools_allow.clone(),
        progress: None,
        // This very binary, in reaper mode (`hookcmd::reaper`).
        reaper: std::path::PathBuf::from("/proc/self/exe"),
        exec_env: ctx.exec_env.clone(),
        approved: None,
    };
    // The approval this run waits for, if any (closed if the run ends first).
    let mut pending_approval: Option<String> = None;
    let mut decisions_open = true;
    let mut held: Option<ModelItem> = None;
    // The provider of the model request in flight (counted once it ends, for `/metrics`).
    let mut calling: Option<String> = None;
    let mut paced = Paced::default();
    let mut seq = 0u64;
    let mut cancel_open = true;
    let mut steer_open = true;
    loop {
        while let Some(input) = pending.pop_front() {
            let progressed = matches!(input, Input::Model(_) | Input::ToolUpdate(_));
            let actions = turn.handle(input, Instant::now(), now_ms());
            probe.set_activity(turn.activity());
            if progressed {
                probe.progressed();
            }
            for action in actions {
                match action {
                    Action::Emit(body) => {
                        // Observed progress: a reply delta, a tool step, a status (R-I1).
                        probe.progressed();
                        if let Some(rec) = audit_record(&run, &body, &mut tool_started) {
                            ctx.writer.audit(rec);
                        }
                        if let EventBody::Compaction { .. } = &body {
                            compaction_hooks(&ctx, &hook_ctx, &body);
                        }
                        seq += 1;
                        let started = matches!(&body, EventBody::Lifecycle(l) if l.phase == ipc::control::Phase::Start);
                        let ev = RunEvent {
                            run_id: run.run_id.clone(),
                            seq,
                            ts: now_ms(),
                            body,
                        };
                        // If the supervisor is gone, the run still finishes and persists.
                        let _ = ctx.out.send(WorkerToControl::Event(ev)).await;
                        if started {
                            if let Some(m) = user_message.take() {
                                told(&ctx, &run.run_id, seq, m).await;
                            }
                        }
                    }
                    Action::CallModel(req) => {
                        calling = Some(
                            req.choice
                                .as_ref()
                                .map_or(ctx.spec.model.provider.clone(), |c| c.provider.clone()),
                        );
                        call = Some(start_model(&ctx, req));
                    }
                    Action::AbortModel => {
                        if let Some(p) = calling.take() {
                            ctx.model_request(&p, "aborted");
                        }
                        call = None;
                        held = None;
                        paced.text.clear();
                    }
                    Action::Append(m) => {
                        let res = ctx
                            .writer
                            .append(run.session_key.clone(), run.run_id.clone(), *m)
                            .await;
                        if let Ok(a) = &res {
                            if let Some(m) = a.display.clone() {
                                told(&ctx, &run.run_id, seq, m).await;
                            }
                        }
                        pending.push_back(Input::Appended(res.map(|a| a.seq)));
                    }
                    Action::Compact(k) => {
                        let res = ctx
                            .writer
                            .compact(run.session_key.clone(), run.run_id.clone(), *k)
                            .await;
                        pending.push_back(Input::Appended(res));
                    }
                    Action::RunTool(c) => {
                        let tc = ToolCtx {
                            exec: ctx.exec_policy(),
                            ..tool_ctx.clone()
                        };
                        // An operator is asked only for an exec that may run at all: one
                        // `tools.allow` leaves out is refused as such, without asking.
                        let offered = tc
                            .allow
                            .as_ref()
                            .is_none_or(|allow| allow.iter().any(|t| t == "exec"));
                        let ask = (c.name == "exec" && offered)
                            .then(|| tools::exec::needs_approval(&tc.exec, &c.arguments))
                            .flatten();
                        match ask {
                            // An operator decides first (`tools.exec.security = "ask"`).
                            Some((command, argv)) => {
                                let id = uuid::Uuid::new_v4().to_string();
                                let at = now_ms();
                                let req = ipc::approval::ApprovalRequest {
                                    id: id.clone(),
                                    run_id: run.run_id.clone(),
                                    session_key: run.session_key.clone(),
                                    command,
                                    argv,
                                    cwd: ctx.spec.workspace.clone(),
                                    created_at_ms: at,
                                    expires_at_ms: at + approval_ms,
                                };
                                let _ = ctx.out.send(WorkerToControl::ApprovalRequested(req)).await;
                                pending_approval = Some(id.clone());
                                pending.push_back(Input::ApprovalPending { id });
                            }
                            None => tool = Some(start_tool(&ctx, &tc, &hook_ctx, c)),
                        }
                    }
                    Action::RunApproved(c) => {
                        let tc = ToolCtx {
                            exec: ctx.exec_policy(),
                            approved: tools::exec::command_of(&c.arguments),
                            ..tool_ctx.clone()
                        };
                        tool = Some(start_tool(&ctx, &tc, &hook_ctx, c));
                    }
                    Action::ApprovalExpired { id } => {
                        pending_approval = None;
                        let why = ipc::approval::ApprovalClosed::Expired;
                        let _ = ctx
                            .out
                            .send(WorkerToControl::ApprovalClosed { id, why })
                            .await;
                    }
                    Action::AbortTool => tool = None,
                    Action::Persist(f) => {
                        // Model work is over: clients hear `finishing` while the outcome is
                        // recorded (the terminal event follows the write).
                        seq += 1;
                        let finishing = RunEvent {
                            run_id: run.run_id.clone(),
                            seq,
                            ts: now_ms(),
                            body: turn.finishing(),
                        };
                        let _ = ctx.out.send(WorkerToControl::Event(finishing)).await;
                        let res = ctx.writer.finish(*f).await;
                        // The reply is told before the lifecycle end that follows it.
                        if let Ok(Some(a)) = &res {
                            if let Some(m) = a.display.clone() {
                                told(&ctx, &run.run_id, seq, m).await;
                            }
                        }
                        pending.push_back(Input::Persisted(res.map(|_| ())));
                    }
                    Action::Finish(mut t) => {
                        if ctx.hooks.has("message_sending") && !t.payloads.is_empty() {
                            let mut kept = Vec::with_capacity(t.payloads.len());
                            for p in std::mem::take(&mut t.payloads) {
                                if let Some(text) =
                                    ctx.hooks.message_sending(&hook_ctx, &p.text).await
                                {
                                    kept.push(ipc::control::Payload { text, ..p });
                                }
                            }
                            t.payloads = kept;
                        }
                        ctx.observe_later(&hook_ctx, "message_sent", || {
                            t.payloads
                                .iter()
                                .map(|p| json!({"content": p.text, "success": true}))
                                .collect()
                        });
                        ctx.observe_later(&hook_ctx, "agent_end", || {
                            vec![json!({
                                "status": t.status, "error": t.error,
                                "durationMs": t.duration_ms, "stopReason": t.stop_reason,
                            })]
                        });
                        if let Some(id) = pending_approval.take() {
                            let why = ipc::approval::ApprovalClosed::RunEnded;
                            let _ = ctx
                                .out
                                .send(WorkerToControl::ApprovalClosed { id, why })
                                .await;
                        }
                        return Driven {
                            terminal: *t,
                            steered: turn.steered(),
                        };
                    }
                }
            }
        }
        let deadline = turn.next_deadline();
        let input = tokio::select! {
            item = next_model(&mut call, &mut held, &mut paced), if call.is_some() || held.is_some() || !paced.text.is_empty() => match item {
                Some(Ok(ev)) => {
                    if matches!(ev, LlmEvent::Done(_)) {
                        if let Some(p) = calling.take() {
                            ctx.model_request(&p, "ok");
                        }
                        // The response is over: steered messages already sent (and ones
                        // taken back by an abort) count before the turn moves on, whichever
                        // channel was read first.
                        while let Ok(m) = steer.try_recv() {
                            match m {
                                SteerMsg::Add(s) if turn.accepts_steering() => {
                                    steered_start(&ctx, &run.session_key, s.run_id.clone()).await;
                                    pending.push_back(Input::Steer(s));
                                }
                                SteerMsg::Add(_) => {}
                                SteerMsg::Drop(id) => turn.unsteer(&id),
                            }
                        }
                    }
                    Input::Model(ev)
                }
                Some(Err(e)) => {
                    if let Some(p) = calling.take() {
                        ctx.model_request(&p, failure_class(&e));
                    }
                    Input::ModelFailed(e)
                }
                None => {
                    if let Some(p) = calling.take() {
                        ctx.model_request(&p, "network");
                    }
                    call = None;
                    Input::ModelFailed(LlmError::Transport("the model stream ended without a result".into()))
                }
            },
            item = next_tool(&mut tool), if tool.is_some() => match item {
                ToolItem::Update(text) => Input::ToolUpdate(text),
                ToolItem::Done(outcome) => {
                    tool = None;
                    Input::ToolDone(outcome)
                }
            },
            changed = cancel.changed(), if cancel_open => match changed {
                Ok(()) => match *cancel.borrow_and_update() {
                    Some(reason) => {
                        if reason == StopReason::Rpc {
                            // A user stop is the `command:stop` internal hook event (R-H1).
                            let hook_ctx = hook_ctx.clone();
                            tokio::spawn(async move {
                                hooks::run_internal(&hook_ctx, "command:stop", serde_json::json!({})).await;
                            });
                        }
                        Input::Cancel(reason)
                    }
                    None => continue,
                },
                Err(_) => {
                    cancel_open = false;
                    continue;
                }
            },
            s = steer.recv(), if steer_open => match s {
                // Taken: its run has started, in this turn (R-B3). Declined ones (the outcome
                // is being recorded) are handed back to run after.
                Some(SteerMsg::Add(s)) if turn.accepts_steering() => {
                    steered_start(&ctx, &run.session_key, s.run_id.clone()).await;
                    Input::Steer(s)
                }
                Some(SteerMsg::Add(_)) => continue,
                Some(SteerMsg::Drop(id)) => {
                    turn.unsteer(&id);
                    continue;
                }
                None => {
                    steer_open = false;
                    continue;
                }
            },
            d = decisions.recv(), if decisions_open => match d {
                Some(d) => {
                    if pending_approval.as_deref() == Some(d.id.as_str()) {
                        pending_approval = None;
                    }
                    Input::ApprovalDecided {
                        id: d.id,
                        allow: d.decision.allows(),
                    }
                }
                None => {
                    decisions_open = false;
                    continue;
                }
            },
            _ = sleep_until(deadline), if deadline.is_some() => Input::Tick,
        };
        pending.push_back(input);
    }
}

/// Tells the supervisor a message was recorded (`seq`: the run's last event's; this is not
/// a run event of its own).
/// The lifecycle `start` of a run whose message was steered into another run's turn; its
/// terminal follows that turn's.
async fn steered_start(ctx: &Arc<Ctx>, session_key: &str, run_id: String) {
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
        }),
    };
    let _ = ctx.out.send(WorkerToControl::Event(ev)).await;
}

async fn told(ctx: &Arc<Ctx>, run_id: &str, seq: u64, message: ipc::control::StoredMessage) {
    let ev = RunEvent {
        run_id: run_id.to_owned(),
        seq,
        ts: now_ms(),
        body: EventBody::Message(message),
    };
    let _ = ctx.out.send(WorkerToControl::Event(ev)).await;
}

/// `before_compaction` / `after_compaction` observers, from the compaction events.
fn compaction_hooks(ctx: &Arc<Ctx>, hook_ctx: &HookCtx, body: &EventBody) {
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
fn audit_record(
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
                LPhase::Error if l.stop_reason.as_deref() == Some("timeout") => {
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

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
