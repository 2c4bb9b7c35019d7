//! Compaction inside a turn (R-B7, R-G6): before a model call over the context budget, or
//! after the provider refused one as too large, the older messages go to the model for a
//! summary (`Phase::Compacting`), the summary is recorded, fenced (`Phase::CompactSaving`),
//! and the call goes on with the compacted request. A compaction that fails says so, and the
//! call goes on with the full request, unless the provider already refused that one.

use std::time::Instant;

use ipc::control::{EventBody, RunStatus, RunStopReason};

use super::{clip, Action, CompactJob, Input, Phase, Turn};
use crate::agent::compaction::{self, MAX_COMPACTIONS_PER_RUN};
use crate::agent::{prompt, reply};
use crate::llm::{LlmEvent, ModelRequest};
use crate::store::Compaction;

/// How long a compaction under way at the execution deadline may still take (once a run).
pub(super) const COMPACTION_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

impl Turn {
    /// `Compacting`: the summary of the older context streams in (shown to no one).
    pub(super) fn on_compacting(
        &mut self,
        run_deadline: Option<Instant>,
        idle_deadline: Instant,
        job: Box<CompactJob>,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match input {
            Input::Model(ev) => self.summary_streamed(ev, job, run_deadline, now, wall_ms),
            Input::ModelFailed(e) => {
                self.compaction_failed(job, run_deadline, now, e.to_string(), wall_ms)
            }
            // The run's deadline first, then the summary call's idle deadline. A summary
            // under way at the deadline gets one bounded grace to finish (R-B5): cutting it
            // off would lose the work and leave the session over its budget.
            Input::Tick if run_deadline.is_some_and(|d| now >= d) => {
                if !self.compaction_grace_used {
                    self.compaction_grace_used = true;
                    let phase = Phase::Compacting {
                        run_deadline: Some(now + COMPACTION_GRACE),
                        idle_deadline,
                        job,
                    };
                    return (phase, Vec::new());
                }
                self.time_out(Action::AbortModel, wall_ms)
            }
            Input::Tick if now >= idle_deadline => {
                let ms = self.spec.idle_timeout.as_millis();
                let (p, mut a) = self.compaction_failed(
                    job,
                    run_deadline,
                    now,
                    format!("the provider sent nothing for {ms} ms"),
                    wall_ms,
                );
                a.insert(0, Action::AbortModel);
                (p, a)
            }
            Input::Cancel(reason) => self.abort(Action::AbortModel, reason, wall_ms),
            // A tick before its deadline; no tool, record or approval is in flight.
            Input::Tick
            | Input::Begun { .. }
            | Input::BeginFailed(_)
            | Input::Appended(_)
            | Input::ToolUpdate(_)
            | Input::ToolDone(_)
            | Input::Persisted(_)
            | Input::Steer(_)
            | Input::ApprovalPending { .. }
            | Input::ApprovalDecided { .. } => (
                Phase::Compacting {
                    run_deadline,
                    idle_deadline,
                    job,
                },
                Vec::new(),
            ),
        }
    }

    /// One event of the summary call: its text and usage are kept; any event keeps it alive.
    fn summary_streamed(
        &mut self,
        ev: LlmEvent,
        mut job: Box<CompactJob>,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match ev {
            LlmEvent::Delta(d) => job.summary.push_str(&d),
            LlmEvent::Usage(u) => job.usage = Some(u),
            LlmEvent::ToolCalls(_)
            | LlmEvent::Reasoning(_)
            | LlmEvent::ReasoningSignature(_)
            | LlmEvent::ToolCallStart { .. }
            | LlmEvent::ToolCallDelta { .. } => {}
            LlmEvent::Done(_) => return self.summarized(job, run_deadline, now, wall_ms),
        }
        let idle_deadline = now + self.spec.idle_timeout;
        (
            Phase::Compacting {
                run_deadline,
                idle_deadline,
                job,
            },
            vec![],
        )
    }

    /// `CompactSaving`: the compaction is being recorded.
    pub(super) fn on_compact_saving(
        &mut self,
        run_deadline: Option<Instant>,
        job: Box<CompactJob>,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match input {
            Input::Appended(Ok(_)) => self.compacted(job, run_deadline, now, wall_ms),
            Input::Appended(Err(e)) => self.record_failed(e, "the compaction", wall_ms),
            Input::Tick if run_deadline.is_some_and(|d| now >= d) => {
                self.time_out(Action::AbortModel, wall_ms)
            }
            Input::Cancel(reason) => self.abort(Action::AbortModel, reason, wall_ms),
            // A tick before the deadline; the summary call is over, no tool or approval is in
            // flight.
            Input::Tick
            | Input::Begun { .. }
            | Input::BeginFailed(_)
            | Input::Model(_)
            | Input::ModelFailed(_)
            | Input::ToolUpdate(_)
            | Input::ToolDone(_)
            | Input::Persisted(_)
            | Input::Steer(_)
            | Input::ApprovalPending { .. }
            | Input::ApprovalDecided { .. } => {
                (Phase::CompactSaving { run_deadline, job }, Vec::new())
            }
        }
    }

    /// The compaction is recorded: the call goes on with the compacted request.
    fn compacted(
        &mut self,
        mut job: Box<CompactJob>,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let Some(next) = job.next.take() else {
            return self.end(
                RunStatus::Error,
                Some("internal error: the compaction lost its request".into()),
                Some(RunStopReason::Error),
                wall_ms,
            );
        };
        let end = Action::Emit(EventBody::Compaction {
            phase: ipc::control::CompactionPhase::End,
            completed: Some(true),
            will_retry: job.overflow.as_ref().map(|_| true),
            reason: None,
            messages: Some(job.cut as u64 - 1),
            tokens_before: Some(job.tokens_before),
            tokens_after: Some(compaction::estimate(&next)),
        });
        let (phase, call) = self.call_model(next, run_deadline, now);
        self.after_tools = job.after_tools;
        (phase, vec![end, call])
    }

    /// Starts a compaction of `req`: the older messages go to the model for a summary. `Err`
    /// gives the request back when there is nothing to compact (or this run already did
    /// [`MAX_COMPACTIONS_PER_RUN`]). `overflow`: the provider refused `req` as too large.
    pub(super) fn compact_first(
        &mut self,
        req: ModelRequest,
        run_deadline: Option<Instant>,
        now: Instant,
        overflow: Option<String>,
        after_tools: bool,
    ) -> Result<(Phase, Vec<Action>), ModelRequest> {
        if self.compactions >= MAX_COMPACTIONS_PER_RUN {
            return Err(req);
        }
        let Some(cut) = compaction::cut(&req.messages, self.spec.context.keep_recent) else {
            return Err(req);
        };
        self.compactions += 1;
        let tokens_before = compaction::estimate(&req);
        let max_chars = (self.spec.context.limit as usize)
            .saturating_mul(4)
            .saturating_sub(2_000)
            .max(4_000);
        let mut summarize = prompt::compaction_request(&req.messages.cloned(1..cut), max_chars);
        summarize.choice.clone_from(&req.choice);
        let start = Action::Emit(EventBody::Compaction {
            phase: ipc::control::CompactionPhase::Start,
            completed: None,
            will_retry: overflow.as_ref().map(|_| true),
            reason: Some(
                if overflow.is_some() {
                    "overflow"
                } else {
                    "threshold"
                }
                .into(),
            ),
            messages: Some(cut as u64 - 1),
            tokens_before: Some(tokens_before),
            tokens_after: None,
        });
        let job = Box::new(CompactJob {
            pending: req,
            cut,
            summary: String::new(),
            usage: None,
            reason: if overflow.is_some() {
                "overflow"
            } else {
                "threshold"
            },
            overflow,
            tokens_before,
            next: None,
            after_tools,
        });
        Ok((
            Phase::Compacting {
                run_deadline,
                idle_deadline: now + self.spec.idle_timeout,
                job,
            },
            vec![start, Action::CallModel(summarize)],
        ))
    }

    /// The summary is in: record it (fenced), then continue with the compacted request.
    fn summarized(
        &mut self,
        mut job: Box<CompactJob>,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        // The summary call's usage counts towards the run's.
        if let Some(u) = job.usage.take() {
            let usage = self.usage.take();
            self.usage = Some(u);
            self.prior_usage = self.total_usage();
            self.usage = usage;
        }
        let summary = job.summary.trim().to_owned();
        if !reply::has_visible_text(&summary) {
            return self.compaction_failed(
                job,
                run_deadline,
                now,
                "the model returned an empty summary".into(),
                wall_ms,
            );
        }
        let Some(kept_from_seq) = job.pending.messages.get(job.cut).and_then(|m| m.seq) else {
            return self.compaction_failed(
                job,
                run_deadline,
                now,
                "internal error: the kept messages are not recorded".into(),
                wall_ms,
            );
        };
        let mut messages = Vec::with_capacity(job.pending.messages.len() - job.cut + 2);
        messages.extend(job.pending.messages.first().cloned());
        messages.push(prompt::summary_message(&summary));
        messages.extend(job.pending.messages.iter().skip(job.cut).cloned());
        let next = ModelRequest {
            messages: std::sync::Arc::new(messages.into()),
            tools: job.pending.tools.clone(),
            choice: job.pending.choice.clone(),
            thinking: job.pending.thinking,
        };
        let record = Compaction {
            summary,
            kept_from_seq,
            tokens_before: job.tokens_before,
            tokens_after: compaction::estimate(&next),
            messages: job.cut as u64 - 1,
            created_at: wall_ms,
        };
        job.next = Some(next);
        (
            Phase::CompactSaving { run_deadline, job },
            vec![Action::Compact(Box::new(record))],
        )
    }

    /// The compaction did not happen: say so, then go on with the full request, unless the
    /// provider already refused it as too large (then the run fails with both reasons).
    fn compaction_failed(
        &mut self,
        job: Box<CompactJob>,
        run_deadline: Option<Instant>,
        now: Instant,
        why: String,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let end = Action::Emit(EventBody::Compaction {
            phase: ipc::control::CompactionPhase::End,
            completed: Some(false),
            will_retry: Some(false),
            reason: Some(clip(&why)),
            messages: None,
            tokens_before: Some(job.tokens_before),
            tokens_after: None,
        });
        if let Some(overflow) = job.overflow {
            let (p, mut a) = self.end(
                RunStatus::Error,
                Some(format!(
                    "model request failed: {overflow}; compacting the context failed: {why}"
                )),
                Some(RunStopReason::Error),
                wall_ms,
            );
            a.insert(0, end);
            return (p, a);
        }
        tracing::warn!(reason = job.reason, error = %why, "Compaction failed; calling the model with the full context.");
        let (phase, call) = self.call_model(job.pending, run_deadline, now);
        self.after_tools = job.after_tools;
        (phase, vec![end, call])
    }
}
