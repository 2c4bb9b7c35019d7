//! Streaming a model response (`Phase::Streaming`) and waiting to send a failed one again
//! (`Phase::Backoff`): text, reasoning and tool calls as they arrive, the idle and run
//! deadlines, and what a complete or failed response leads to: its tool calls, another
//! response of the same turn, a retry for a reply that came back empty, a retry after a
//! transient failure, a fallback model, a compaction after an overflow, or the outcome.

use std::time::Instant;

use ipc::control::{EventBody, RetryReason, RunStatus, RunStatusPhase, RunStopReason};
use ipc::thinking::ReasoningMode;

use super::{
    seed_of, Action, Input, Phase, Turn, MAX_EMPTY_RETRIES, MAX_LENGTH_RECOVERIES, MAX_MODEL_CALLS,
    MAX_TOOL_CALLS,
};
use crate::agent::compaction::ContextBudget;
use crate::agent::reply;
use crate::agent::retry::{self, Retries};
use crate::agent::xml::XmlFilter;
use crate::llm::{LlmError, LlmEvent, Terminal};
use crate::tools::ToolCall;

impl Turn {
    /// `Streaming`: a model response is coming in.
    pub(super) fn on_streaming(
        &mut self,
        run_deadline: Option<Instant>,
        idle_deadline: Instant,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match input {
            Input::Model(ev) => self.streamed(ev, run_deadline, idle_deadline, now, wall_ms),
            Input::ModelFailed(e) => self.model_failed(e, run_deadline, now, wall_ms),
            // The execution deadline first, then the attempt's idle deadline. The deadline is
            // the attempt's: a fallback model takes the request with a fresh one (R-B4,
            // R-B5); with none left, the run times out.
            Input::Tick if run_deadline.is_some_and(|d| now >= d) => {
                let fresh = self.spec.timeout.map(|t| now + t);
                if let Some(next) = self.fall_back(fresh, now, RetryReason::Timeout) {
                    return next;
                }
                self.time_out(Action::AbortModel, wall_ms)
            }
            Input::Tick if now >= idle_deadline => self.idle_timed_out(run_deadline, now, wall_ms),
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
                Phase::Streaming {
                    run_deadline,
                    idle_deadline,
                },
                Vec::new(),
            ),
        }
    }

    /// One event of the response: visible text streams (unless it may be a silent reply),
    /// reasoning and tool calls are kept.
    fn streamed(
        &mut self,
        ev: LlmEvent,
        run_deadline: Option<Instant>,
        idle_deadline: Instant,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        // Streaming goes on; output restarts the idle deadline (an empty delta, usage that
        // did not advance and a signature do not).
        let streaming = |idle_deadline| Phase::Streaming {
            run_deadline,
            idle_deadline,
        };
        match ev {
            LlmEvent::Delta(d) => {
                if d.is_empty() {
                    return (streaming(idle_deadline), vec![]);
                }
                let phase = streaming(now + self.spec.idle_timeout);
                // Serialized tool calls never reach the reply (R-D4).
                let visible = self.xml.push(&d);
                (phase, self.accept_text(visible))
            }
            LlmEvent::Usage(u) => {
                // Only advancing counts are progress (R-G5).
                let advanced = self.usage.is_none_or(|old| {
                    u.input > old.input || u.output > old.output || u.total > old.total
                });
                self.usage = Some(u);
                let idle = if advanced {
                    now + self.spec.idle_timeout
                } else {
                    idle_deadline
                };
                (streaming(idle), vec![])
            }
            // Reasoning and a tool call's arguments streaming are output too: they keep
            // the attempt alive (R-B4, R-G5), though nothing of them is shown as reply.
            LlmEvent::Reasoning(r) => {
                self.reasoning.push_str(&r);
                let shown = (self.spec.reasoning == ReasoningMode::Stream && !r.is_empty())
                    .then_some(Action::Emit(EventBody::Thinking { delta: r }));
                (
                    streaming(now + self.spec.idle_timeout),
                    shown.into_iter().collect(),
                )
            }
            LlmEvent::ReasoningSignature(sig) => {
                self.reasoning_signature.push_str(&sig);
                (streaming(idle_deadline), vec![])
            }
            // A tool call ends the response's text: with `text_end`, its last block goes.
            LlmEvent::ToolCallStart { .. } => {
                let ended = match &self.chunker {
                    Some(c) if c.streams_text() => self.text_ended(),
                    _ => Vec::new(),
                };
                (streaming(now + self.spec.idle_timeout), ended)
            }
            LlmEvent::ToolCallDelta { .. } => (streaming(now + self.spec.idle_timeout), vec![]),
            LlmEvent::ToolCalls(calls) => {
                self.calls.extend(calls);
                (streaming(now + self.spec.idle_timeout), vec![])
            }
            LlmEvent::Done(done) => self.response_done(done, run_deadline, now, wall_ms),
        }
    }

    /// The response is complete: a reply, tool calls to run, or a response cut by the
    /// output limit to recover from.
    fn response_done(
        &mut self,
        done: Terminal,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let Terminal {
            finish_reason,
            responses,
        } = done;
        self.retries.succeeded();
        // Responses `end_turn: false`: the provider wants another response, even
        // after one of text only (R-G2). Not after an output limit or a refusal.
        let more = responses
            .as_ref()
            .is_some_and(|r| r.end_turn == crate::llm::EndTurn::No)
            && !matches!(finish_reason.as_deref(), Some("length" | "content_filter"));
        self.diagnostic = responses.map(|r| r.diagnostic(finish_reason.as_deref()));
        let tail = self.xml.finish();
        // `reasoning: on`: the response's reasoning, whole, once it is complete.
        let mut shown = Vec::new();
        if self.spec.reasoning == ReasoningMode::On && !self.reasoning.is_empty() {
            shown.push(Action::Emit(EventBody::Thinking {
                delta: self.reasoning.clone(),
            }));
        }
        let mut held = shown;
        held.extend(self.accept_text(tail));
        held.extend(self.flush_held());
        held.extend(self.text_ended());
        if finish_reason.as_deref() == Some("length") {
            if let Some(next) = self.after_length_cut(run_deadline, now, wall_ms) {
                let (p, mut a) = next;
                a.splice(0..0, held);
                return (p, a);
            }
        }
        if self.calls.is_empty() {
            return self.reply_done(held, more, finish_reason, run_deadline, now, wall_ms);
        }
        if self.tool_calls + self.calls.len() > MAX_TOOL_CALLS {
            return self.end(
                RunStatus::Error,
                Some(format!(
                    "tool loop stopped: the run would exceed {MAX_TOOL_CALLS} tool calls"
                )),
                Some(RunStopReason::Error),
                wall_ms,
            );
        }
        if self.model_calls >= MAX_MODEL_CALLS {
            return self.end(
                RunStatus::Error,
                Some(format!(
                    "tool loop stopped: the model still wanted tools after {MAX_MODEL_CALLS} model calls"
                )),
                Some(RunStopReason::Error),
                wall_ms,
            );
        }
        let (p, mut a) = self.start_tools(run_deadline, wall_ms);
        a.splice(0..0, held);
        (p, a)
    }

    /// A complete response without tool calls (`held`: its events not sent yet; `more`: the
    /// provider wants another response of the turn): the turn goes on, the reply is asked
    /// for again, or the run ends with it.
    fn reply_done(
        &mut self,
        mut held: Vec<Action>,
        more: bool,
        finish_reason: Option<String>,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        // A steered message waits: this response is recorded and the model
        // answers the message in the same run (R-B3).
        if (more || self.is_steered()) && self.model_calls < MAX_MODEL_CALLS {
            let (p, mut a) = self.continue_response(run_deadline, wall_ms);
            a.splice(0..0, held);
            return (p, a);
        }
        if let Some(again) = self.retry_for_reply(run_deadline, now) {
            return again;
        }
        if !self.visible()
            && self.tool_error.is_none()
            && !self.answered_by_send
            && self.continued.is_empty()
        {
            // Retries exhausted: report it, and leave a notice in history (R-F3).
            self.text = reply::TRY_AGAIN_NOTICE.into();
            return self.end(
                RunStatus::Error,
                Some(format!(
                    "the model returned no visible reply ({} attempts)",
                    self.empty_retries + 1
                )),
                Some(RunStopReason::Error),
                wall_ms,
            );
        }
        if let Some(warning) = self.warning() {
            // After a visible answer (a denied exec, R-F4), on its own line.
            let delta = if self.visible() {
                format!("\n\n{warning}")
            } else {
                warning
            };
            held.extend(self.spoken(delta));
            held.extend(self.text_ended());
        }
        let stop = reply_stop_reason(finish_reason.as_deref());
        let (p, mut a) = self.end(RunStatus::Ok, None, Some(stop), wall_ms);
        a.splice(0..0, held);
        (p, a)
    }

    /// The attempt failed: retried after a backoff, on the next model, or after compacting
    /// an overflowing context; otherwise the run ends in error.
    fn model_failed(
        &mut self,
        e: LlmError,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        // A rate limit or a transient failure before any visible output: the same
        // request again after a backoff, the lifecycle left open (R-B4).
        let produced = !self.text.is_empty() || !self.calls.is_empty();
        if let Some(r) = self.retries.next(&e, produced, now) {
            let until = now + r.delay;
            if run_deadline.is_none_or(|d| until < d) {
                self.reasoning.clear();
                self.xml = XmlFilter::default();
                let status = EventBody::RunStatus {
                    phase: RunStatusPhase::Retrying,
                    attempt: r.attempt,
                    max_attempts: r.max_attempts,
                    reason: r.reason,
                };
                return (
                    Phase::Backoff {
                        run_deadline,
                        until,
                    },
                    vec![Action::AbortModel, Action::Emit(status)],
                );
            }
        }
        // Retries spent on a failure worth them: the next model, if there is one.
        if let Some(why) = retry::reason(&e, produced) {
            if let Some(next) = self.fall_back(run_deadline, now, why) {
                return next;
            }
        }
        // The prompt did not fit the model's context: compact, then retry (R-G6).
        if e.is_context_overflow() && self.text.is_empty() && self.calls.is_empty() {
            if let Some(req) = self.request.take() {
                let after_tools = self.after_tools;
                // Not a new attempt: the retry below takes this call's place.
                self.model_calls = self.model_calls.saturating_sub(1);
                match self.compact_first(req, run_deadline, now, Some(e.to_string()), after_tools) {
                    Ok(next) => return next,
                    Err(req) => self.request = Some(req),
                }
            }
        }
        self.end_stopping(
            Action::AbortModel,
            RunStatus::Error,
            format!("model request failed: {e}"),
            RunStopReason::Error,
            wall_ms,
        )
    }

    /// The attempt sent nothing for the idle timeout (R-B4).
    fn idle_timed_out(
        &mut self,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        // The attempt passed its deadline: the next model, with a fresh budget.
        if let Some(next) = self.fall_back(run_deadline, now, RetryReason::Timeout) {
            return next;
        }
        let ms = self.spec.idle_timeout.as_millis();
        self.end_stopping(
            Action::AbortModel,
            RunStatus::Error,
            format!("model idle timeout: the provider sent nothing for {ms} ms"),
            RunStopReason::Error,
            wall_ms,
        )
    }

    /// `Backoff`: waiting to send the failed request again at `until`.
    pub(super) fn on_backoff(
        &mut self,
        run_deadline: Option<Instant>,
        until: Instant,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match input {
            Input::Tick if run_deadline.is_some_and(|d| now >= d) => {
                self.time_out(Action::AbortModel, wall_ms)
            }
            Input::Tick if now >= until => match self.request.take() {
                Some(req) => {
                    // The same call again: not one more of the run's model calls.
                    self.model_calls = self.model_calls.saturating_sub(1);
                    let after_tools = self.after_tools;
                    let (phase, call) = self.call_model(req, run_deadline, now);
                    self.after_tools = after_tools;
                    (phase, vec![call])
                }
                None => self.end(
                    RunStatus::Error,
                    Some("the model request to retry was lost".into()),
                    Some(RunStopReason::Error),
                    wall_ms,
                ),
            },
            Input::Cancel(reason) => self.abort(Action::AbortModel, reason, wall_ms),
            // A tick before its time; the failed attempt was aborted, nothing else is in
            // flight.
            Input::Tick
            | Input::Begun { .. }
            | Input::BeginFailed(_)
            | Input::Model(_)
            | Input::ModelFailed(_)
            | Input::Appended(_)
            | Input::ToolUpdate(_)
            | Input::ToolDone(_)
            | Input::Persisted(_)
            | Input::Steer(_)
            | Input::ApprovalPending { .. }
            | Input::ApprovalDecided { .. } => (
                Phase::Backoff {
                    run_deadline,
                    until,
                },
                Vec::new(),
            ),
        }
    }

    /// The current model failed for good: runs the same request on the next fallback model
    /// (R-B5) with a fresh retry budget, once the failed attempt is dropped. `None` when
    /// there is none left, or the attempt already showed output (it cannot be taken back).
    fn fall_back(
        &mut self,
        run_deadline: Option<Instant>,
        now: Instant,
        why: RetryReason,
    ) -> Option<(Phase, Vec<Action>)> {
        if !self.text.is_empty() || !self.calls.is_empty() {
            return None;
        }
        let next = self
            .spec
            .fallbacks
            .get(self.fallbacks_used as usize)?
            .clone();
        let mut req = self.request.take()?;
        self.fallbacks_used += 1;
        self.spec.provider.clone_from(&next.provider);
        self.spec.model.clone_from(&next.model);
        self.spec.context = ContextBudget::new(next.context_window, &self.spec.compaction);
        req.choice = Some(next);
        self.retries = Retries::new(
            self.spec.retry_base,
            self.spec.retry_max,
            seed_of(&self.spec.run_id) ^ u64::from(self.fallbacks_used),
        );
        self.model_calls = self.model_calls.saturating_sub(1);
        let after_tools = self.after_tools;
        let (phase, call) = self.call_model(req, run_deadline, now);
        self.after_tools = after_tools;
        let status = EventBody::RunStatus {
            phase: RunStatusPhase::Fallback,
            attempt: self.fallbacks_used + 1,
            max_attempts: self.spec.fallbacks.len() as u32 + 1,
            reason: why,
        };
        Some((phase, vec![Action::AbortModel, Action::Emit(status), call]))
    }

    /// Text held back as a possible silent reply that turned out not to be one, as an
    /// event (the response is complete, so nothing more can make it silent).
    pub(super) fn flush_held(&mut self) -> Vec<Action> {
        if self.released || !reply::has_visible_text(&self.text) || reply::is_silent(&self.text) {
            return vec![];
        }
        self.released = true;
        self.spoken(self.text.clone())
    }

    /// Whether the current response says something a user can see (not only whitespace or
    /// zero-width characters).
    pub(super) fn visible(&self) -> bool {
        reply::has_visible_text(&self.text) && !reply::is_silent(&self.text)
    }

    /// A required reply that came back empty gets another model call (R-F3, R-F4): after a
    /// settled tool batch, one tool-free finalization pass over the results; otherwise a
    /// plain retry, up to [`MAX_EMPTY_RETRIES`]. A model's `NO_REPLY` is empty output, not a
    /// waiver of the reply (R-F1): every `agent` / `chat.send` run is a direct request.
    fn retry_for_reply(
        &mut self,
        run_deadline: Option<Instant>,
        now: Instant,
    ) -> Option<(Phase, Vec<Action>)> {
        if self.visible()
            || self.answered_by_send
            || !self.continued.is_empty()
            || self.model_calls >= MAX_MODEL_CALLS
        {
            return None;
        }
        let mut req = self.request.take()?;
        let mut deadline = run_deadline;
        if self.after_tools && !self.finalized {
            self.finalized = true;
            req.tools.clear();
            // The pass is a call of its own: it gets its own deadline, not what the
            // settled attempt left (R-B5).
            deadline = self.spec.timeout.map(|t| now + t);
        } else if self.empty_retries < MAX_EMPTY_RETRIES && self.tool_error.is_none() {
            self.empty_retries += 1;
        } else {
            self.request = Some(req);
            return None;
        }
        let (phase, call) = self.call_model(req, deadline, now);
        Some((phase, vec![call]))
    }

    /// were complete run, and the model goes on from their recorded results; the call that
    /// was cut (its arguments not whole JSON) never runs. With nothing at all (R-G4): the
    /// same transcript goes again, tools and all. Both within [`MAX_LENGTH_RECOVERIES`] per
    /// run; `None` leaves the response to end as it is (a cut but visible reply).
    fn after_length_cut(
        &mut self,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> Option<(Phase, Vec<Action>)> {
        let whole = |c: &ToolCall| {
            serde_json::from_str::<serde_json::Value>(&c.arguments).is_ok_and(|v| v.is_object())
        };
        let cut = self.calls.iter().any(|c| !whole(c));
        let empty = self.calls.is_empty() && !self.visible() && self.sent.is_empty();
        if !cut && !empty {
            return None;
        }
        if self.length_recoveries >= MAX_LENGTH_RECOVERIES || self.model_calls >= MAX_MODEL_CALLS {
            return Some(self.end(
                RunStatus::Error,
                Some(format!(
                    "the model kept hitting its output limit ({} recoveries)",
                    self.length_recoveries
                )),
                Some(RunStopReason::Length),
                wall_ms,
            ));
        }
        self.length_recoveries += 1;
        self.calls.retain(whole);
        if !self.calls.is_empty() {
            return Some(self.start_tools(run_deadline, wall_ms));
        }
        // Text before the cut call was shown: it is recorded, and the model goes on after it.
        if self.visible() {
            return Some(self.continue_response(run_deadline, wall_ms));
        }
        let req = self.request.take()?;
        let after_tools = self.after_tools;
        let (phase, call) = self.call_model(req, run_deadline, now);
        self.after_tools = after_tools;
        Some((phase, vec![call]))
    }
}

/// The run's stop reason for a reply that ended with the provider's `finish_reason` (as the
/// llm layer names it). A reason the gateway does not know reads as `stop`, as the Responses
/// diagnostic reads it: the reply is complete either way, and the link carries a closed set.
pub(super) fn reply_stop_reason(finish_reason: Option<&str>) -> RunStopReason {
    match finish_reason {
        Some("length") => RunStopReason::Length,
        Some("tool_calls") => RunStopReason::ToolCalls,
        Some("content_filter") => RunStopReason::ContentFilter,
        Some(_) | None => RunStopReason::Stop,
    }
}
