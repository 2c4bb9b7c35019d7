//! How a turn ends: the outcome is recorded (`Phase::Persisting`), a failed run's error
//! left in history (R-B1), and the terminal lifecycle event follows the write (R-A5), once
//! (R-D3). The reply's payloads: messages sent with the `message` tool, continued responses,
//! the final text unless it repeats a sent message (R-E3), and the tool-error warning (R-F2,
//! R-F4).

use ipc::control::{
    EventBody, Lifecycle, Payload, Phase as LPhase, RunStatus, RunStopReason, RunTerminal, Usage,
};

use super::{Action, Input, Phase, Turn};
use crate::agent::reply;
use crate::store::{FinishRun, NewMessage, Role, StoreError};

impl Turn {
    /// `Persisting`: the outcome is being recorded; only its result moves the turn on.
    pub(super) fn on_persisting(
        &mut self,
        terminal: Box<RunTerminal>,
        input: Input,
    ) -> (Phase, Vec<Action>) {
        match input {
            Input::Persisted(res) => self.persisted(terminal, res),
            // The outcome is decided: a cancel, a tick or late news of the run's work change
            // nothing (R-D3).
            Input::Begun { .. }
            | Input::BeginFailed(_)
            | Input::Model(_)
            | Input::ModelFailed(_)
            | Input::Cancel(_)
            | Input::Tick
            | Input::Appended(_)
            | Input::ToolUpdate(_)
            | Input::ToolDone(_)
            | Input::Steer(_)
            | Input::ApprovalPending { .. }
            | Input::ApprovalDecided { .. } => (Phase::Persisting { terminal }, Vec::new()),
        }
    }

    /// The outcome is recorded (or not: then the run failed): the terminal lifecycle event,
    /// then the terminal.
    fn persisted(
        &mut self,
        mut terminal: Box<RunTerminal>,
        res: Result<(), StoreError>,
    ) -> (Phase, Vec<Action>) {
        if let Err(e) = res {
            terminal.status = RunStatus::Error;
            terminal.error = Some(record_error(e, "the run"));
            terminal.payloads.clear();
        }
        self.notes = crate::agent::notes::Notes::of(
            &self.spec.notes,
            &terminal,
            self.guarded_output.as_deref().unwrap_or(&self.text),
        );
        let lifecycle = match terminal.status {
            RunStatus::Ok => Lifecycle {
                ended_at: Some(terminal.ended_at),
                stop_reason: terminal.stop_reason,
                footer: self.notes.chat_text(),
                ..self.lifecycle(LPhase::End)
            },
            RunStatus::Error | RunStatus::Timeout | RunStatus::Aborted | RunStatus::Unknown => {
                Lifecycle {
                    ended_at: Some(terminal.ended_at),
                    error: terminal.error.clone(),
                    stop_reason: terminal.stop_reason,
                    aborted: matches!(terminal.status, RunStatus::Aborted).then_some(true),
                    ..self.lifecycle(LPhase::Error)
                }
            }
        };
        (
            Phase::Done,
            vec![
                Action::Emit(EventBody::Lifecycle(lifecycle)),
                Action::Finish(terminal),
            ],
        )
    }

    /// The fallback tool-error warning, when the last tool batch failed and the final
    /// response says nothing visible (R-F2).
    pub(super) fn warning(&self) -> Option<String> {
        if self.answered_by_send {
            // The last tool batch delivered the reply with the `message` tool.
            return None;
        }
        // A denied exec fails the automation even when the model then answers (R-F4).
        if let Some(why) = &self.denied {
            return Some(reply::tool_error_warning("exec", why));
        }
        match &self.tool_error {
            Some((tool, error)) if !self.visible() => Some(reply::tool_error_warning(tool, error)),
            _ => None,
        }
    }

    /// Usage summed over the run's model calls.
    pub(super) fn total_usage(&self) -> Option<Usage> {
        match (self.prior_usage, self.usage) {
            (Some(a), Some(b)) => Some(Usage {
                input: a.input + b.input,
                output: a.output + b.output,
                cache_read: a.cache_read + b.cache_read,
                cache_write: a.cache_write + b.cache_write,
                total: a.total + b.total,
            }),
            (a, b) => a.or(b),
        }
    }

    pub(super) fn terminal(
        &self,
        status: RunStatus,
        error: Option<String>,
        stop_reason: Option<RunStopReason>,
        wall_ms: u64,
    ) -> RunTerminal {
        let visible = self.visible();
        // Messages sent with the `message` tool are delivered replies; a final text that only
        // repeats one of them is a duplicate confirmation and is dropped (R-E3).
        let mut payloads: Vec<Payload> = if status == RunStatus::Ok {
            self.tool_notes
                .iter()
                .chain(&self.sent)
                .chain(&self.continued)
                .map(|t| Payload {
                    text: t.clone(),
                    is_error: false,
                })
                .collect()
        } else {
            vec![]
        };
        match (self.warning(), status) {
            (warning, RunStatus::Ok)
                if visible && !reply::duplicates_sent(&self.text, &self.sent) =>
            {
                payloads.push(Payload {
                    text: self.text.clone(),
                    is_error: false,
                });
                // A denied exec stays a failure of the run's work, whatever the model then
                // said (R-F4).
                if let Some(text) = warning.filter(|_| self.denied.is_some()) {
                    payloads.push(Payload {
                        text,
                        is_error: true,
                    });
                }
            }
            // A failed tool and nothing else to say: tell the user (R-F2).
            (Some(text), RunStatus::Ok) => payloads.push(Payload {
                text,
                is_error: true,
            }),
            _ => {}
        }
        RunTerminal {
            run_id: self.spec.run_id.clone(),
            status,
            session_id: self.session_id.clone(),
            started_at: Some(self.started_at),
            ended_at: wall_ms,
            error,
            stop_reason,
            payloads,
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.total_usage(),
            duration_ms: wall_ms.saturating_sub(self.started_at),
            source_reply_delivered: !self.sent.is_empty(),
            fallbacks: self.fallbacks_used,
            carried_by: None,
            session_key: None,
            tool_calls: u32::try_from(self.tool_calls).unwrap_or(u32::MAX),
        }
    }

    /// Moves to `Persisting` with the outcome to record.
    pub(super) fn end(
        &mut self,
        status: RunStatus,
        error: Option<String>,
        stop_reason: Option<RunStopReason>,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let terminal = self.terminal(status, error.clone(), stop_reason, wall_ms);
        // The stores keep the name the link sends.
        let stop_reason = stop_reason.map(|r| r.as_str().to_owned());
        // A failed run leaves its failure in history even with no text (R-B1): an assistant
        // message with the error, written before the terminal is published.
        let failed = status == RunStatus::Error && error.is_some();
        // An aborted run's partial reply is recorded as OpenClaw records one: stop reason
        // `aborted` (its clients know no other word for it), and no error.
        let aborted = status == RunStatus::Aborted;
        let assistant = (!self.text.is_empty() || failed).then(|| NewMessage {
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.total_usage(),
            stop_reason: if aborted {
                Some("aborted".into())
            } else {
                stop_reason.clone()
            },
            error: error.clone().filter(|_| !aborted),
            reasoning: (!self.reasoning.is_empty()).then(|| self.reasoning.clone()),
            diagnostics: self.diagnostic.clone().into_iter().collect(),
            ..NewMessage::text(Role::Assistant, self.text.clone(), wall_ms)
        });
        let finish = FinishRun {
            run_id: self.spec.run_id.clone(),
            session_key: self.spec.session_key.clone(),
            status,
            ended_at: wall_ms,
            error,
            stop_reason,
            provider: Some(self.spec.provider.clone()),
            model: Some(self.spec.model.clone()),
            usage: self.total_usage(),
            assistant,
        };
        (
            Phase::Persisting {
                terminal: Box::new(terminal),
            },
            vec![Action::Persist(Box::new(finish))],
        )
    }
}

/// Why recording `what` failed: a lost claim means another run took the session over.
pub(super) fn record_error(e: StoreError, what: &str) -> String {
    match e {
        StoreError::Fenced { .. } => format!("run superseded: {e}"),
        other => format!("cannot record {what}: {other}"),
    }
}

impl Turn {
    /// Ends the run because recording `what` failed.
    pub(super) fn record_failed(
        &mut self,
        e: StoreError,
        what: &str,
        wall_ms: u64,
    ) -> (Phase, Vec<Action>) {
        let error = record_error(e, what);
        self.end(
            RunStatus::Error,
            Some(error),
            Some(RunStopReason::Error),
            wall_ms,
        )
    }
}
