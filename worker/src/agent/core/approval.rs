//! Exec approvals in the turn (`tools.exec.security = "ask"`): a call the driver found to
//! need an operator's decision waits in `Phase::Approval`. The run's deadline is paused
//! while it waits and resumes with the budget it had left (R-B5); unresolved past the
//! approval timeout it is denied. A denial is a tool error the model sees, and the run's
//! reply carries the failure even if the model then answers (R-F4).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::{Action, Input, Phase, Turn};
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
            Phase::Approval {
                run_left: run_deadline.map(|d| d.saturating_duration_since(now)),
                until: now + self.spec.approval_timeout,
                id,
                queue,
                call,
            },
            vec![],
        )
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
        let running = Phase::Tools {
            run_deadline,
            queue,
            running: Some(call),
        };
        self.step(
            running,
            Input::ToolDone(ToolOutcome {
                content,
                is_error: true,
            }),
            now,
            wall_ms,
        )
    }
}
