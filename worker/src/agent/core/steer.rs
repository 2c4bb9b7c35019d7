//! Steering (R-B3 `steer`): a message sent while the turn runs joins it. Running tools
//! finish; calls of the batch not started yet are skipped with a synthetic error result; the
//! message is recorded (under its own run id) and is in the next model request. A turn
//! already recording its outcome takes no more messages: the driver hands them back and they
//! run after. A message the turn took stays with it (agent-loop.md: steering remains
//! associated with its target run), and its run ends with the turn's outcome.

use std::collections::VecDeque;
use std::time::Instant;

use ipc::control::{EventBody, RunStatus, RunStopReason, ToolPhase};

use super::{clip, Action, Input, Phase, Turn};
use crate::llm::media::{user_message, Media};
use crate::llm::ChatMessage;
use crate::store::{NewMessage, Role};
use crate::tools::ToolCall;

/// The result a skipped call gets; the model sees it in place of the tool's.
pub const SKIPPED: &str =
    "Skipped: the user sent a new message before this tool call started. Read it first.";

/// A message steered into a running turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Steered {
    pub run_id: String,
    pub text: String,
    /// The message's attachments (recorded with it; images reach the model as parts).
    pub attachments: Vec<ipc::control::Attachment>,
    /// Its sender may see the turn's trace (`/trace`): one who may not takes it away.
    pub traced: bool,
}

/// What the lane tells a running turn.
#[derive(Debug)]
pub enum SteerMsg {
    /// A message to take.
    Add(Steered),
    /// The run was cancelled: drop its message if it is not recorded yet.
    Drop(String),
}

impl Turn {
    /// Steered messages this turn took and recorded, in order: their runs end with its
    /// outcome. One it took but never recorded (the turn ended first, e.g. at its model-call
    /// cap) is not among them: it runs after.
    pub fn steered(&self) -> Vec<String> {
        self.steered
            .iter()
            .filter(|id| !self.steering.iter().any(|s| &s.run_id == *id))
            .cloned()
            .collect()
    }

    /// A cancelled run's message leaves the turn, unless it is recorded already.
    pub fn unsteer(&mut self, run_id: &str) {
        if let Some(pos) = self.steering.iter().position(|s| s.run_id == run_id) {
            self.steering.remove(pos);
            self.steered.retain(|id| id != run_id);
        }
    }

    /// Whether a message steered now would reach the model in this turn: not once the
    /// outcome is being recorded.
    pub fn accepts_steering(&self) -> bool {
        !matches!(self.phase, Phase::Persisting { .. } | Phase::Done)
    }

    pub(super) fn take_steered(&mut self, s: Steered) {
        if self.accepts_steering() {
            // The turn's outcome is this message's too: no trace unless its sender may see it.
            if !s.traced {
                self.spec.notes.raw_trace = None;
            }
            self.steered.push(s.run_id.clone());
            self.steering.push_back(s);
        }
    }

    pub(super) fn is_steered(&self) -> bool {
        !self.steering.is_empty()
    }

    /// A call of the current batch that has not started: skipped, with an error result.
    pub(super) fn skip_call(
        &mut self,
        call: ToolCall,
        queue: VecDeque<ToolCall>,
        run_deadline: Option<Instant>,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let result = Action::Emit(EventBody::Tool {
            phase: ToolPhase::Result,
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            args_json: Some(clip(&call.arguments)),
            result_json: Some(serde_json::Value::String(SKIPPED.into()).to_string()),
            is_error: Some(true),
        });
        if let Some(req) = self.request.as_mut() {
            std::sync::Arc::make_mut(&mut req.messages).push(ChatMessage {
                tool_call_id: Some(call.id.clone()),
                ..ChatMessage::text("tool", SKIPPED)
            });
        }
        let message = NewMessage {
            tool_result: Some((call.id, call.name, true)),
            ..NewMessage::text(Role::ToolResult, SKIPPED, wall_ms)
        };
        (
            Phase::Tools {
                run_deadline,
                queue,
                running: None,
            },
            vec![result, Action::Append(Box::new(message))],
        )
    }

    /// `Steering`: a steered message is being recorded.
    pub(super) fn on_steering(
        &mut self,
        run_deadline: Option<Instant>,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match input {
            Input::Appended(Ok(seq)) => {
                if let Some(m) = self
                    .request
                    .as_mut()
                    .and_then(|r| std::sync::Arc::make_mut(&mut r.messages).last_mut())
                {
                    m.seq.get_or_insert(seq);
                }
                self.steer_next(run_deadline, now, wall_ms)
            }
            Input::Appended(Err(e)) => self.record_failed(e, "the steered message", wall_ms),
            Input::Tick if run_deadline.is_some_and(|d| now >= d) => {
                self.time_out(Action::AbortTool, wall_ms)
            }
            Input::Cancel(reason) => self.abort(Action::AbortTool, reason, wall_ms),
            // A tick before the deadline; no model call, tool or approval is in flight.
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
            | Input::ApprovalDecided { .. } => (Phase::Steering { run_deadline }, Vec::new()),
        }
    }

    /// Records the next steered message; the model is called once all are in.
    pub(super) fn steer_next(
        &mut self,
        run_deadline: Option<Instant>,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let Some(s) = self.steering.pop_front() else {
            let Some(req) = self.request.take() else {
                return self.end(
                    RunStatus::Error,
                    Some("internal error: steering lost the request".into()),
                    Some(RunStopReason::Error),
                    wall_ms,
                );
            };
            return self.next_call(req, run_deadline, now, false);
        };
        if let Some(req) = self.request.as_mut() {
            let media: Vec<Media> = s
                .attachments
                .iter()
                .map(|a| Media {
                    stored: a.stored(),
                    data: a.data.as_str().into(),
                })
                .collect();
            std::sync::Arc::make_mut(&mut req.messages).push(user_message(&s.text, &media));
        }
        let message = NewMessage {
            input_run_id: Some(s.run_id.clone()),
            media: s.attachments,
            ..NewMessage::text(Role::User, s.text, wall_ms)
        };
        (
            Phase::Steering { run_deadline },
            vec![Action::Append(Box::new(message))],
        )
    }
}
