//! A response's tool calls (`Phase::Tools`): the response is recorded, then its calls run
//! one at a time, each result streamed, recorded and added to the request, and the model is
//! called again once the batch is done (after the messages steered meanwhile are recorded).
//! A response continued after `end_turn: false` is recorded here too, with no calls.

use std::collections::VecDeque;
use std::time::Instant;

use ipc::control::{EventBody, RunStatus, RunStopReason};

use super::{clip, Action, Input, Phase, Turn};
use crate::agent::reply;
use crate::llm::ChatMessage;
use crate::store::{NewMessage, Role};
use crate::tools::{ToolCall, ToolOutcome};

impl Turn {
    /// `Tools`: `running` is the call started and not finished yet; with none, the last
    /// message (the response or a result) is being recorded.
    pub(super) fn on_tools(
        &mut self,
        run_deadline: Option<Instant>,
        queue: VecDeque<ToolCall>,
        running: Option<ToolCall>,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match (running, input) {
            (None, Input::Appended(Ok(seq))) => {
                self.run_next(run_deadline, queue, seq, now, wall_ms)
            }
            (_, Input::Appended(Err(e))) => self.record_failed(e, "the tool call", wall_ms),
            (Some(call), Input::ToolDone(outcome)) => {
                self.tool_done(run_deadline, queue, call, outcome, wall_ms)
            }
            (Some(call), Input::ToolUpdate(text)) => {
                self.tool_update(run_deadline, queue, call, text)
            }
            (Some(call), Input::ApprovalPending { id }) => {
                self.await_approval(run_deadline, queue, call, id, now)
            }
            (_, Input::Tick) if run_deadline.is_some_and(|d| now >= d) => {
                self.time_out(Action::AbortTool, wall_ms)
            }
            (_, Input::Cancel(reason)) => self.abort(Action::AbortTool, reason, wall_ms),
            // A record's answer while a tool runs, a tool's news while none does, a tick before
            // the deadline; no model call or approval is in flight.
            (running @ Some(_), Input::Appended(Ok(_)))
            | (
                running @ None,
                Input::ToolDone(_) | Input::ToolUpdate(_) | Input::ApprovalPending { .. },
            )
            | (
                running,
                Input::Tick
                | Input::Begun { .. }
                | Input::BeginFailed(_)
                | Input::Model(_)
                | Input::ModelFailed(_)
                | Input::Persisted(_)
                | Input::Steer(_)
                | Input::ApprovalDecided { .. },
            ) => (
                Phase::Tools {
                    run_deadline,
                    queue,
                    running,
                },
                Vec::new(),
            ),
        }
    }

    /// The last message is recorded (at `seq`): the batch's next call starts (or is skipped,
    /// for a steered message); with none left, the model is called again.
    fn run_next(
        &mut self,
        run_deadline: Option<Instant>,
        mut queue: VecDeque<ToolCall>,
        seq: i64,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        // Tag the message just recorded with its transcript position.
        if let Some(m) = self
            .request
            .as_mut()
            .and_then(|r| std::sync::Arc::make_mut(&mut r.messages).last_mut())
        {
            m.seq.get_or_insert(seq);
        }
        match queue.pop_front() {
            Some(call) if self.is_steered() => self.skip_call(call, queue, run_deadline, wall_ms),
            Some(call) => {
                let start = Action::Emit(EventBody::Tool {
                    phase: ipc::control::ToolPhase::Start,
                    tool_call_id: call.id.clone(),
                    name: call.name.clone(),
                    args_json: Some(clip(&call.arguments)),
                    result_json: None,
                    is_error: None,
                });
                let run = Action::RunTool(call.clone());
                if let Some(note) =
                    crate::agent::verbose::summary(self.spec.verbose, &call.name, &call.arguments)
                {
                    self.tool_notes.push(note);
                }
                (
                    Phase::Tools {
                        run_deadline,
                        queue,
                        running: Some(call),
                    },
                    vec![start, run],
                )
            }
            None => {
                let Some(req) = self.request.take() else {
                    return self.end(
                        RunStatus::Error,
                        Some("internal error: the tool round lost its request".into()),
                        Some(RunStopReason::Error),
                        wall_ms,
                    );
                };
                // After a continued response, not a tool batch: no finalization pass.
                let after_tools = !std::mem::take(&mut self.continuing);
                if self.is_steered() {
                    self.request = Some(req);
                    return self.steer_next(run_deadline, now, wall_ms);
                }
                self.next_call(req, run_deadline, now, after_tools)
            }
        }
    }

    /// The running call finished: its result is streamed, recorded and added to the request.
    pub(super) fn tool_done(
        &mut self,
        run_deadline: Option<Instant>,
        queue: VecDeque<ToolCall>,
        call: ToolCall,
        outcome: ToolOutcome,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let result = Action::Emit(EventBody::Tool {
            phase: ipc::control::ToolPhase::Result,
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            args_json: None,
            result_json: Some(serde_json::Value::String(clip(&outcome.content)).to_string()),
            is_error: Some(outcome.is_error),
        });
        if outcome.is_error {
            self.tool_error = Some((call.name.clone(), outcome.content.clone()));
        }
        if let Some(note) = crate::agent::verbose::output(
            self.spec.verbose,
            &call.name,
            &call.arguments,
            &outcome.content,
        ) {
            self.tool_notes.push(note);
        }
        // A sent message reaches the user now, on the assistant stream.
        let mut delivered = Vec::new();
        if call.name == crate::tools::MESSAGE_TOOL && !outcome.is_error {
            let text = outcome
                .delivered
                .clone()
                .or_else(|| crate::tools::message_text(&call.arguments));
            if let Some(text) = text {
                delivered.push(Action::Emit(EventBody::Assistant {
                    delta: format!("{text}\n\n"),
                }));
                self.sent.push(text);
                self.answered_by_send = true;
            }
        }
        if let Some(req) = self.request.as_mut() {
            std::sync::Arc::make_mut(&mut req.messages).push(ChatMessage {
                tool_call_id: Some(call.id.clone()),
                ..ChatMessage::text("tool", outcome.content.clone())
            });
        }
        let message = NewMessage {
            tool_result: Some((call.id, call.name, outcome.is_error)),
            ..NewMessage::text(Role::ToolResult, outcome.content, wall_ms)
        };
        delivered.push(result);
        delivered.push(Action::Append(Box::new(message)));
        (
            Phase::Tools {
                run_deadline,
                queue,
                running: None,
            },
            delivered,
        )
    }

    /// Partial output of the running call, streamed.
    fn tool_update(
        &mut self,
        run_deadline: Option<Instant>,
        queue: VecDeque<ToolCall>,
        call: ToolCall,
        text: String,
    ) -> (Phase, Vec<Action>) {
        let update = Action::Emit(EventBody::Tool {
            phase: ipc::control::ToolPhase::Update,
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            args_json: None,
            result_json: Some(serde_json::Value::String(clip(&text)).to_string()),
            is_error: None,
        });
        (
            Phase::Tools {
                run_deadline,
                queue,
                running: Some(call),
            },
            vec![update],
        )
    }

    /// The response ended with `end_turn: false` (R-G2): record it (with its diagnostic),
    /// then ask the model for the next response of the same turn.
    pub(super) fn continue_response(
        &mut self,
        run_deadline: Option<Instant>,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let text = std::mem::take(&mut self.text);
        if let Some(req) = self.request.as_mut() {
            std::sync::Arc::make_mut(&mut req.messages)
                .push(ChatMessage::text("assistant", text.clone()));
        }
        if reply::has_visible_text(&text) && !reply::is_silent(&text) {
            self.continued.push(text.clone());
        }
        self.continuing = true;
        let message = NewMessage {
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.usage,
            stop_reason: Some("stop".into()),
            reasoning: (!self.reasoning.is_empty()).then(|| std::mem::take(&mut self.reasoning)),
            diagnostics: self.diagnostic.take().into_iter().collect(),
            ..NewMessage::text(Role::Assistant, text, wall_ms)
        };
        (
            Phase::Tools {
                run_deadline,
                queue: VecDeque::new(),
                running: None,
            },
            vec![Action::Append(Box::new(message))],
        )
    }

    /// The response asked for tools: record it, then run the calls in order.
    pub(super) fn start_tools(
        &mut self,
        run_deadline: Option<Instant>,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let calls = std::mem::take(&mut self.calls);
        let text = std::mem::take(&mut self.text);
        self.tool_calls += calls.len();
        self.tool_error = None;
        self.answered_by_send = false;
        let signed = (!self.reasoning_signature.is_empty()).then(|| crate::llm::SignedThinking {
            text: self.reasoning.clone(),
            signature: std::mem::take(&mut self.reasoning_signature),
        });
        if let Some(req) = self.request.as_mut() {
            std::sync::Arc::make_mut(&mut req.messages).push(ChatMessage {
                tool_calls: calls.clone(),
                thinking: signed,
                ..ChatMessage::text("assistant", text.clone())
            });
        }
        let message = NewMessage {
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.usage,
            stop_reason: Some("toolUse".into()),
            tool_calls: calls.clone(),
            reasoning: (!self.reasoning.is_empty()).then(|| std::mem::take(&mut self.reasoning)),
            diagnostics: self.diagnostic.take().into_iter().collect(),
            ..NewMessage::text(Role::Assistant, text, wall_ms)
        };
        (
            Phase::Tools {
                run_deadline,
                queue: calls.into(),
                running: None,
            },
            vec![Action::Append(Box::new(message))],
        )
    }
}
