//! Stuck-session reports from workers (R-I1, R-I2): each classification and recovery step
//! goes to operator connections as a `diagnostic` event (scope `operator.read`) and into
//! the metrics. The worker already logged it (its log lines are relayed with `agent`).

use ipc::diagnostics::{LaneReport, RecoveryPhase, RecoveryReport, SessionClass};
use ipc::gateway::{DiagnosticEvent, SessionAttention, SessionRecovery};

use super::core::Control;
use crate::events::Deferred;

impl Control {
    pub(super) fn diagnostic(&mut self, agent_id: &str, r: LaneReport) {
        self.deps.metrics.classified(agent_id, r.class, &r.reason);
        let attention = SessionAttention {
            ts: r.observed_at_ms,
            agent_id: agent_id.to_owned(),
            state: if r.run_id.is_some() {
                "processing"
            } else if r.queue_depth > 0 {
                "waiting"
            } else {
                "idle"
            }
            .to_owned(),
            session_key: r.session_key,
            age_ms: r.idle_ms,
            queue_depth: r.queue_depth,
            classification: ipc::diagnostics::classification(r.class, &r.reason).to_owned(),
            reason: r.reason,
            active_work_kind: r.activity.as_str().to_owned(),
            run_id: r.run_id,
            state_generation: r.generation,
            repeat: r.repeat,
        };
        let ev = match r.class {
            SessionClass::Stalled => DiagnosticEvent::Stalled(attention),
            SessionClass::Stuck => DiagnosticEvent::Stuck(attention),
            _ => DiagnosticEvent::LongRunning(attention),
        };
        self.publish_diagnostic(&ev);
    }

    pub(super) fn recovery(&mut self, agent_id: &str, r: RecoveryReport) {
        if r.phase == RecoveryPhase::Completed {
            self.deps
                .metrics
                .recovered(agent_id, r.action, r.outcome.as_deref().unwrap_or(""));
        }
        let rec = SessionRecovery {
            ts: r.at_ms,
            agent_id: agent_id.to_owned(),
            session_key: r.session_key,
            action: r.action.as_str().to_owned(),
            run_id: r.run_id,
            state_generation: r.generation,
            status: r.outcome,
        };
        let ev = match r.phase {
            RecoveryPhase::Completed => DiagnosticEvent::RecoveryCompleted(rec),
            _ => DiagnosticEvent::RecoveryRequested(rec),
        };
        self.publish_diagnostic(&ev);
    }

    fn publish_diagnostic(&self, ev: &DiagnosticEvent) {
        self.deps.hub.publish_deferred(
            &Deferred::event(ipc::gateway::events::DIAGNOSTIC, ev)
                .for_scope(ipc::gateway::Scope::Read),
        );
    }
}
