//! Exec approvals in the turn (`tools.exec.security = "ask"`): a call the driver found to
//! need an operator's decision waits in `Phase::Approval`. The run's deadline is paused
//! while it waits and resumes with the budget it had left (R-B5); unresolved past the
//! approval timeout it is denied. A denial is a tool error the model sees, and the run's
//! reply carries the failure even if the model then answers (R-F4).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Action, ApprovalWait, Input, Phase, Turn};
use crate::tools::{ToolCall, ToolOutcome};

/// What the model gets for a denied command, as OpenClaw words it (`reason`: `user-denied`
/// or `approval-timeout`).
pub fn denied(id: &str, reason: &str, command: &str) -> String {
    format!("Exec denied (gateway id={id}, {reason}): {command}")
}

impl Turn {
    /// The running call waits for approval `id`; its run deadline stops counting.
    pub(super) fn await_approval(
        &mut self,
        run_deadline: Option<Instant>,
        queue: VecDeque<ToolCall>,
        call: ToolCall,
        id: String,
        now: Instant,
    ) -> (Phase, Vec<Action>) {
        (
            Phase::Approval(ApprovalWait {
                run_left: run_deadline.map(|d| d.saturating_duration_since(now)),
                until: now + self.spec.approval_timeout,
                id,
                queue,
                call,
            }),
            vec![],
        )
    }

    /// `Approval`: the call waits for its decision, until the approval timeout.
    pub(super) fn on_approval(
        &mut self,
        wait: ApprovalWait,
        input: Input,
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        match input {
            Input::ApprovalDecided { id: decided, allow } if decided == wait.id => {
                let ApprovalWait {
                    run_left,
                    id,
                    queue,
                    call,
                    ..
                } = wait;
                let verdict = (id.as_str(), allow, "user-denied");
                self.decided(run_left, queue, call, verdict, now, wall_ms)
            }
            Input::Tick if now >= wait.until => {
                let ApprovalWait {
                    run_left,
                    id,
                    queue,
                    call,
                    ..
                } = wait;
                let verdict = (id.as_str(), false, "approval-timeout");
                let (p, mut a) = self.decided(run_left, queue, call, verdict, now, wall_ms);
                a.insert(0, Action::ApprovalExpired { id });
                (p, a)
            }
            Input::Cancel(reason) => self.abort(Action::AbortTool, reason, wall_ms),
            // Another approval's decision, a tick before the timeout; the call has not
            // started, no model call or record is in flight.
            Input::ApprovalDecided { .. }
            | Input::Tick
            | Input::Begun { .. }
            | Input::BeginFailed(_)
            | Input::Model(_)
            | Input::ModelFailed(_)
            | Input::Appended(_)
            | Input::ToolUpdate(_)
            | Input::ToolDone(_)
            | Input::Persisted(_)
            | Input::Steer(_)
            | Input::ApprovalPending { .. } => (Phase::Approval(wait), Vec::new()),
        }
    }

    /// The decision (or the timeout): the budget resumes where it was; allowed, the call
    /// runs; denied, it gets an error result.
    pub(super) fn decided(
        &mut self,
        run_left: Option<Duration>,
        queue: VecDeque<ToolCall>,
        call: ToolCall,
        (id, allow, reason): (&str, bool, &str),
        now: Instant,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let run_deadline = run_left.map(|left| now + left);
        if allow {
            return (
                Phase::Tools {
                    run_deadline,
                    queue,
                    running: Some(call.clone()),
                },
                vec![Action::RunApproved(call)],
            );
        }
        let command = crate::tools::exec::command_of(&call.arguments).unwrap_or_default();
        let content = denied(id, reason, &command);
        self.denied = Some(content.clone());
        let outcome = ToolOutcome {
            delivered: None,
            content,
            is_error: true,
        };
        self.tool_done(run_deadline, queue, call, outcome, wall_ms)
    }
}
