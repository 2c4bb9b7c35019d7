//! `sessions.compact`: a compaction asked for by an operator, outside any run. The older
//! messages of the session's model view go to the agent's model for a summary (the same cut
//! and prompt as an automatic compaction), and the summary is recorded through the writer
//! fence: refused if a run holds the session when it is written, or if the rows it keeps
//! are no longer the model's view (a reset or another compaction came first). A run that
//! started and ended meanwhile is fine: its messages come after the kept rows.

use std::sync::Arc;
use std::time::Duration;

use ipc::session_ops::CompactReply;
use ipc::{ErrorCode, RpcError};
use serde_json::json;
use tokio::sync::mpsc;

use super::compaction::{self, ContextBudget};
use super::prompt;
use crate::llm::LlmEvent;
use crate::store::{Compaction, StoreError};
use crate::Ctx;

/// Longest the summary call may take.
const SUMMARY_DEADLINE: Duration = Duration::from_secs(300);

fn nothing(reason: &str) -> CompactReply {
    CompactReply {
        compacted: false,
        reason: Some(reason.to_owned()),
        messages: 0,
        tokens_before: 0,
        tokens_after: 0,
    }
}

fn unavailable(m: String) -> RpcError {
    RpcError::new(ErrorCode::Internal, m)
}

/// What a compaction of the session would do.
struct Plan {
    /// The conversation it is about (checked again when it is recorded).
    session_id: String,
    /// The session's model view.
    req: crate::llm::ModelRequest,
    /// `req.messages[1..cut]` are summarized, the rest kept.
    cut: usize,
    kept_from_seq: i64,
    /// Longest the summary may be.
    max_chars: usize,
}

pub async fn compact_now(ctx: Arc<Ctx>, session_key: String) -> Result<CompactReply, RpcError> {
    let plan = match plan(&ctx, &session_key).await? {
        Ok(plan) => plan,
        Err(reason) => return Ok(nothing(reason)),
    };
    let tokens_before = compaction::estimate(&plan.req);
    let hook_ctx = ctx.hook_ctx(&session_key, "");
    let summarized = plan.cut as u64 - 1;
    ctx.observe_later(&hook_ctx, "before_compaction", || {
        vec![json!({"messageCount": summarized, "tokenCount": tokens_before, "reason": "manual"})]
    });
    let summary = summarize(&ctx, &plan).await?;
    let tokens_after = tokens_after(&plan, &summary);
    if tokens_after >= tokens_before {
        // A summary as long as what it replaces helps nothing: nothing is recorded.
        return Ok(nothing("the summary would not shrink the context"));
    }
    let record = Compaction {
        summary,
        kept_from_seq: plan.kept_from_seq,
        tokens_before,
        tokens_after,
        messages: summarized,
        created_at: crate::now_ms(),
    };
    save(&ctx, &session_key, plan.session_id, record).await?;
    tracing::info!(
        session_key = session_key.as_str(),
        messages = summarized,
        tokens_before,
        tokens_after,
        "Compacted a session on request."
    );
    ctx.observe_later(&hook_ctx, "after_compaction", || {
        vec![json!({
            "completed": true, "compactedCount": summarized,
            "tokensBefore": tokens_before, "tokenCount": tokens_after, "reason": "manual",
        })]
    });
    Ok(CompactReply {
        compacted: true,
        reason: None,
        messages: summarized,
        tokens_before,
        tokens_after,
    })
}

/// Reads the session and chooses its cut (the same as an automatic compaction's);
/// `Ok(Err(reason))` when there is nothing to compact.
async fn plan(ctx: &Ctx, session_key: &str) -> Result<Result<Plan, &'static str>, RpcError> {
    let Some(session_id) = ctx
        .reader
        .display(session_key.to_owned(), 1, 0, 1024, Vec::new())
        .await
        .map_err(|e| unavailable(format!("cannot read the session: {e}")))?
        .session_id
    else {
        return Ok(Err("no sessionId"));
    };
    let history = ctx
        .reader
        .history(session_key.to_owned(), prompt::HISTORY_LIMIT)
        .await
        .map_err(|e| unavailable(format!("cannot read the session history: {e}")))?;
    if history.messages.is_empty() {
        return Ok(Err("no transcript"));
    }
    let req = prompt::request(String::new(), &history, Vec::new());
    let budget = ContextBudget::new(ctx.spec.model.context_window, &ctx.spec.compaction);
    let Some(cut) = compaction::cut(&req.messages, budget.keep_recent) else {
        return Ok(Err("nothing to compact"));
    };
    let Some(kept_from_seq) = req.messages.get(cut).and_then(|m| m.seq) else {
        return Ok(Err("nothing to compact"));
    };
    let max_chars = (budget.limit as usize)
        .saturating_mul(4)
        .saturating_sub(2_000)
        .max(4_000);
    Ok(Ok(Plan {
        session_id,
        req,
        cut,
        kept_from_seq,
        max_chars,
    }))
}

/// The model's summary of the messages the plan cuts, trimmed; refused when it is empty.
async fn summarize(ctx: &Arc<Ctx>, plan: &Plan) -> Result<String, RpcError> {
    let summarize =
        prompt::compaction_request(&plan.req.messages.cloned(1..plan.cut), plan.max_chars);
    let summary = tokio::time::timeout(SUMMARY_DEADLINE, summary_of(ctx, &summarize))
        .await
        .map_err(|_| unavailable("the model did not summarize within 300 s".into()))??;
    if summary.trim().is_empty() {
        return Err(unavailable(
            "the model's summary was empty; nothing was changed".into(),
        ));
    }
    Ok(summary.trim().to_owned())
}

/// The estimated size of the model view once the summary replaces what it summarizes.
fn tokens_after(plan: &Plan, summary: &str) -> u64 {
    let messages = &plan.req.messages;
    let mut compacted = messages.cloned(plan.cut..messages.len());
    compacted.insert(0, prompt::summary_message(summary));
    compaction::estimate(&crate::llm::ModelRequest {
        messages: std::sync::Arc::new(compacted.into()),
        tools: Vec::new(),
        choice: None,
        thinking: None,
    })
}

/// Records the compaction through the writer fence; a run holding the session, or a change
/// of the rows it keeps, refuses it.
async fn save(
    ctx: &Ctx,
    session_key: &str,
    session_id: String,
    record: Compaction,
) -> Result<(), RpcError> {
    match ctx
        .writer
        .compact_now(session_key.to_owned(), session_id, record)
        .await
    {
        Ok(_) => Ok(()),
        Err(StoreError::Fenced { .. }) => Err(RpcError::new(
            ErrorCode::SessionBusy,
            format!("Session {session_key} has an active run; retry after it finishes."),
        )),
        Err(StoreError::Changed) => Err(RpcError::new(
            ErrorCode::InvalidRequest,
            format!("Session {session_key} changed before compaction. Retry."),
        )),
        Err(e) => Err(RpcError::new(ErrorCode::Storage, e.to_string())),
    }
}

/// The model's answer to the summary request (text only).
async fn summary_of(ctx: &Arc<Ctx>, req: &crate::llm::ModelRequest) -> Result<String, RpcError> {
    let client = ctx.llm.as_ref().map_err(|e| {
        RpcError::new(
            ErrorCode::Internal,
            format!("the agent's model is not usable: {e}"),
        )
    })?;
    let (tx, mut rx) = mpsc::channel(64);
    let call = async move {
        client.stream(req.clone(), &tx).await;
    };
    let collect = async {
        let mut text = String::new();
        while let Some(ev) = rx.recv().await {
            match ev {
                Ok(LlmEvent::Delta(d)) => text.push_str(&d),
                Ok(LlmEvent::Done(_)) => return Ok(text),
                Ok(_) => {}
                Err(e) => {
                    return Err(RpcError::new(
                        ErrorCode::Internal,
                        format!("the summary call failed: {e}"),
                    ))
                }
            }
        }
        Ok(text)
    };
    let ((), text) = tokio::join!(call, collect);
    text
}
