//! Session operations in the worker (`ControlToWorker::Session`): history, reset, delete,
//! inject, compact and the lane view, each answered in the background through the reader or
//! the writer (mutations refused while the session has a run).

use std::future::Future;

use ipc::control::{ResetReason, SessionOp, SessionReply};
use ipc::session_ops::{
    CommandOp, CommandReply, DeleteOp, DeleteReply, HistoryOp, HistoryReply, InjectOp, InjectReply,
    LanesReply, MediaOp, MediaReply, ResetOp, ResetReply,
};
use ipc::{ErrorCode, RpcError};

use crate::{agent, hooks, now_ms, session_done, store, store_error, Worker, INJECTED_MODEL};

impl Worker {
    pub(crate) fn session_op(&mut self, op_id: u64, op: SessionOp) {
        match op {
            SessionOp::History(HistoryOp {
                session_key,
                limit,
                offset,
                max_bytes,
                input_run_ids,
            }) => self.session_history(op_id, session_key, limit, offset, max_bytes, input_run_ids),
            SessionOp::Reset(ResetOp {
                session_key,
                reason,
            }) => self.session_reset(op_id, session_key, reason),
            SessionOp::Delete(DeleteOp {
                session_key,
                delete_transcript,
            }) => self.session_delete(op_id, session_key, delete_transcript),
            SessionOp::Inject(InjectOp { session_key, text }) => {
                self.session_inject(op_id, session_key, text)
            }
            SessionOp::Compact(c) => self.session_compact(op_id, c.session_key),
            SessionOp::Lanes => self.session_lanes(op_id),
            SessionOp::Skills => {
                let workspace = std::path::PathBuf::from(&self.ctx.spec.workspace);
                let ctx = self.ctx.clone();
                self.answer(op_id, async move {
                    let shown = workspace.display().to_string();
                    let skills = tokio::task::spawn_blocking(move || {
                        crate::agent::skills::states(&workspace, ctx.skills.configured())
                    })
                    .await
                    .map_err(|e| RpcError::new(ErrorCode::Internal, e.to_string()))?;
                    Ok(ipc::session_ops::SkillsReply {
                        workspace: shown,
                        skills,
                    })
                })
            }
            SessionOp::Media(MediaOp {
                session_key,
                digest,
            }) => {
                let ctx = self.ctx.clone();
                self.answer(op_id, async move {
                    let found = ctx
                        .reader
                        .media(session_key, digest)
                        .await
                        .map_err(store_error)?;
                    Ok(MediaReply { found })
                })
            }
            SessionOp::Command(CommandOp {
                session_key,
                record,
            }) => self.session_command(op_id, session_key, record),
            SessionOp::Unknown => self.send_outcome(session_done(
                op_id,
                Err(RpcError::new(
                    ErrorCode::InvalidRequest,
                    "unsupported session operation",
                )),
            )),
        }
    }

    /// Records a slash command the supervisor answered: the command (of the command's run,
    /// so history names its request) and the gateway's reply, as OpenClaw records them.
    fn session_command(&self, op_id: u64, session_key: String, r: ipc::session_ops::CommandRecord) {
        use store::CommandRow;
        // Runs are queued or running in the session: the rows would land inside or before
        // their turns. Not recorded (the command took effect and was answered anyway).
        if self.busy(&session_key) {
            return self.answer(op_id, async {
                Ok(CommandReply {
                    session_id: None,
                    messages: Vec::new(),
                })
            });
        }
        let ctx = self.ctx.clone();
        self.answer(op_id, async move {
            let command = store::NewMessage {
                command: Some(CommandRow::Command {
                    context_free: r.context_free,
                }),
                ..store::NewMessage::text(store::Role::User, r.command, r.timestamp)
            };
            let reply = store::NewMessage {
                provider: Some("openclaw".into()),
                model: Some(INJECTED_MODEL.into()),
                stop_reason: Some("stop".into()),
                command: Some(CommandRow::Reply {
                    notice: r.notice,
                    context_free: r.context_free,
                }),
                ..store::NewMessage::text(store::Role::Assistant, r.reply, r.timestamp)
            };
            let recorded = ctx
                .writer
                .command(session_key.clone(), r.run_id, vec![command, reply])
                .await
                .map_err(store_error)?;
            Ok(match recorded {
                Some((session_id, created, rows)) => {
                    // The session began with this command (a client made the key, e.g. the
                    // Control UI's `/new`, then sent a command first).
                    if created {
                        let hook_ctx = ctx.hook_ctx(&session_key, "");
                        let sid = session_id.clone();
                        ctx.observe_later(&hook_ctx, "session_start", || {
                            vec![serde_json::json!({"sessionId": sid})]
                        });
                    }
                    CommandReply {
                        session_id: Some(session_id),
                        messages: rows.into_iter().filter_map(|a| a.display).collect(),
                    }
                }
                None => CommandReply {
                    session_id: None,
                    messages: Vec::new(),
                },
            })
        })
    }

    /// Answers the op with what `work` produces (the reply struct of the op's kind), in the
    /// background.
    fn answer<R: Into<SessionReply>>(
        &self,
        op_id: u64,
        work: impl Future<Output = Result<R, RpcError>> + Send + 'static,
    ) {
        let out = self.ctx.out.clone();
        tokio::spawn(async move {
            let _ = out
                .send(session_done(op_id, work.await.map(Into::into)))
                .await;
        });
    }

    /// Mutations are refused while the session has a run running or queued: `true` when
    /// this one was (and is answered so).
    fn refused_busy(&self, op_id: u64, session_key: &str) -> bool {
        if !self.busy(session_key) {
            return false;
        }
        let e = RpcError::new(
            ErrorCode::SessionBusy,
            format!("session {session_key} has an active run; retry after it finishes"),
        );
        self.send_outcome(session_done(op_id, Err(e)));
        true
    }

    fn session_history(
        &self,
        op_id: u64,
        session_key: String,
        limit: u32,
        offset: u64,
        max_bytes: Option<u64>,
        input_run_ids: Vec<String>,
    ) {
        let ctx = self.ctx.clone();
        self.answer(op_id, async move {
            let max_bytes = max_bytes.map_or(usize::MAX, |b| b as usize);
            let h = ctx
                .reader
                .display(
                    session_key,
                    limit as usize,
                    offset,
                    max_bytes,
                    input_run_ids,
                )
                .await
                .map_err(store_error)?;
            Ok(HistoryReply {
                session_id: h.session_id,
                messages: h.messages,
                next_offset: h.next_offset,
                consumed: h.consumed,
            })
        })
    }

    fn session_reset(&mut self, op_id: u64, session_key: String, reason: ResetReason) {
        if self.refused_busy(op_id, &session_key) {
            return;
        }
        self.diag.replaced(&session_key);
        let ctx = self.ctx.clone();
        self.answer(op_id, async move {
            let event = if reason == ResetReason::New {
                "command:new"
            } else {
                "command:reset"
            };
            let info = ctx
                .writer
                .reset(session_key.clone(), reason.as_str().to_owned(), now_ms())
                .await
                .map_err(store_error)?;
            let hook_ctx = ctx.hook_ctx(&session_key, "");
            let hooks_ctx = ctx.clone();
            // Internal hooks for /new and /reset (R-H1), then the session_end
            // observers; the reply does not wait.
            tokio::spawn(async move {
                hooks::run_internal(&hook_ctx, event, serde_json::json!({})).await;
                hooks_ctx.observe_later(&hook_ctx, "session_end", || {
                    vec![serde_json::json!({"reason": event.trim_start_matches("command:")})]
                });
            });
            Ok(ResetReply {
                session_id: info.session_id,
                updated_at: info.updated_at,
            })
        })
    }

    fn session_delete(&mut self, op_id: u64, session_key: String, delete_transcript: bool) {
        if self.refused_busy(op_id, &session_key) {
            return;
        }
        self.diag.replaced(&session_key);
        let ctx = self.ctx.clone();
        self.answer(op_id, async move {
            let deleted = ctx
                .writer
                .delete(session_key.clone(), delete_transcript)
                .await
                .map_err(store_error)?;
            if deleted {
                let hook_ctx = ctx.hook_ctx(&session_key, "");
                ctx.observe_later(&hook_ctx, "session_end", || {
                    vec![serde_json::json!({"reason": "delete"})]
                });
            }
            Ok(DeleteReply { deleted })
        })
    }

    fn session_inject(&self, op_id: u64, session_key: String, text: String) {
        if self.refused_busy(op_id, &session_key) {
            return;
        }
        let ctx = self.ctx.clone();
        self.answer(op_id, async move {
            let message = store::NewMessage {
                provider: Some("loopgate".into()),
                model: Some(INJECTED_MODEL.into()),
                stop_reason: Some("stop".into()),
                ..store::NewMessage::text(store::Role::Assistant, text, now_ms())
            };
            let (session_id, appended) = ctx
                .writer
                .inject(session_key.clone(), message)
                .await
                .map_err(store_error)?
                .ok_or_else(|| {
                    RpcError::new(
                        ErrorCode::InvalidRequest,
                        format!("session not found: {session_key}"),
                    )
                })?;
            Ok(InjectReply {
                session_id,
                message: appended.display,
            })
        })
    }

    fn session_compact(&self, op_id: u64, session_key: String) {
        if self.refused_busy(op_id, &session_key) {
            return;
        }
        let work = agent::compact_now::compact_now(self.ctx.clone(), session_key);
        self.answer(op_id, work)
    }

    fn session_lanes(&self, op_id: u64) {
        let reply = LanesReply {
            lanes: self.lane_views(),
            queued: self.queued() as u32,
            active: self.active as u32,
        };
        self.send_outcome(session_done(op_id, Ok(reply.into())))
    }
}
