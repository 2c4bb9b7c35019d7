//! Exec approvals in the control actor: a worker's request is shown to operators
//! (`exec.approval.requested`, to connections with `operator.approvals`), listed
//! (`exec.approval.list`), decided (`exec.approval.resolve`, the decision goes back to the
//! worker) and announced (`exec.approval.resolved`); one left past its deadline is closed.
//! `allow-always` adds the command's exact pattern to the agent's allowlist, kept in the
//! gateway db and given to every later worker.

use ipc::approval::{ApprovalClosed, ApprovalDecision, ApprovalRequest};
use ipc::control::ControlToWorker;
use ipc::gateway::{ErrorShape, ExecApproval, ExecApprovalResolved};
use serde_json::json;
use tokio::sync::oneshot;

use super::approvals::{
    listed, not_found, view, Pending, ResolveResult, EXPIRY_GRACE_MS, MAX_PENDING, MIN_PREFIX,
    REPEAT_GRACE,
};
use super::core::{Control, Effect};
use super::run_table::RunEntry;
use crate::events::Deferred;

impl Control {
    /// A worker's run waits for an operator.
    pub(super) fn approval_requested(&mut self, agent_id: &str, request: ApprovalRequest) {
        if self.approvals.pending.len() >= MAX_PENDING {
            tracing::warn!(
                agent = agent_id,
                "Too many pending exec approvals; denied one."
            );
            self.send_decision(agent_id, &request, ApprovalDecision::Deny, None);
            return;
        }
        // allow-always only for a program on the safe list (one that cannot run a file the
        // model writes), looked for through wrappers: allowing anything else for good could
        // let the model run anything.
        let pattern = match execpolicy::safe::check_argv(&request.argv) {
            Ok(()) => execpolicy::argv::exact_pattern(&request.argv),
            Err(why) => {
                tracing::debug!(agent = agent_id, why, "No allow-always for this exec.");
                None
            }
        };
        let pending = Pending {
            agent_id: agent_id.to_owned(),
            request,
            pattern,
        };
        tracing::info!(
            agent = agent_id,
            run_id = pending.request.run_id.as_str(),
            approval = pending.request.id.as_str(),
            "An exec waits for an operator's approval."
        );
        let ev = listed(&pending);
        self.deps.hub.publish_deferred(
            &Deferred::event(ipc::gateway::events::EXEC_APPROVAL_REQUESTED, &ev)
                .for_scope(ipc::gateway::Scope::Approvals),
        );
        self.approvals
            .pending
            .insert(pending.request.id.clone(), pending);
    }

    /// A pending approval ended without a decision (expired, or its run ended).
    pub(super) fn approval_closed(&mut self, id: &str, why: ApprovalClosed) {
        if let Some(p) = self.approvals.pending.remove(id) {
            tracing::info!(
                approval = id,
                ?why,
                "An exec approval ended undecided (denied)."
            );
            self.announce(&p, ApprovalDecision::Deny, None);
        }
    }

    pub(super) fn approval_list(&self) -> Vec<ExecApproval> {
        let mut all: Vec<ExecApproval> = self.approvals.pending.values().map(listed).collect();
        all.sort_by_key(|a| a.created_at_ms);
        all
    }

    /// An operator's decision on `id` (or a unique prefix of one).
    pub(super) fn approval_resolve(
        &mut self,
        id: &str,
        decision: ApprovalDecision,
        by: Option<String>,
    ) -> ResolveResult {
        let now = self.now.at;
        self.approvals
            .decided
            .retain(|(_, _, at)| now.duration_since(*at) < REPEAT_GRACE);
        // A prefix must be long enough not to hit a request the operator never saw.
        let matching: Vec<String> = self
            .approvals
            .pending
            .keys()
            .filter(|k| k.as_str() == id || (id.len() >= MIN_PREFIX && k.starts_with(id)))
            .cloned()
            .collect();
        let full = match matching.as_slice() {
            [one] => one.clone(),
            [] => {
                return match self.approvals.decided.iter().find(|(d, _, _)| d == id) {
                    Some((_, earlier, _)) if *earlier == decision => Ok(()),
                    Some(_) => Err(ErrorShape::invalid("approval already resolved")
                        .with_details(json!({"reason": "APPROVAL_ALREADY_RESOLVED", "id": id}))),
                    None => Err(not_found(id)),
                }
            }
            _ => {
                return Err(ErrorShape::invalid(
                    "ambiguous approval id prefix; use the full id",
                ))
            }
        };
        let Some(p) = self.approvals.pending.get(&full) else {
            return Err(not_found(id));
        };
        // Past its deadline the worker has denied it: a late decision would not reach it.
        if self.now.wall_ms > p.request.expires_at_ms {
            self.approval_closed(&full, ApprovalClosed::Expired);
            return Err(not_found(id));
        }
        let pattern = match decision {
            ApprovalDecision::AllowAlways => match &p.pattern {
                Some(pattern) => Some(pattern.clone()),
                None => {
                    return Err(
                        ErrorShape::invalid("allow-always is unavailable for this command")
                            .with_details(json!({"reason": "APPROVAL_ALLOW_ALWAYS_UNAVAILABLE"})),
                    )
                }
            },
            ApprovalDecision::AllowOnce | ApprovalDecision::Deny => None,
            ApprovalDecision::Unknown => return Err(ErrorShape::invalid("invalid decision")),
        };
        let Some(p) = self.approvals.pending.remove(&full) else {
            return Err(not_found(id));
        };
        if let Some(pattern) = &pattern {
            self.allow_always(&p.agent_id, pattern.clone());
        }
        tracing::info!(
            agent = p.agent_id.as_str(),
            approval = full.as_str(),
            decision = decision.as_str(),
            "An exec approval was decided."
        );
        self.send_decision(&p.agent_id, &p.request, decision, pattern);
        self.announce(&p, decision, by);
        self.approvals.decided.push_back((full, decision, now));
        Ok(())
    }

    /// Approvals whose run is over (its worker died, or it ended otherwise) are dropped, and
    /// so are those left past their deadline (their worker denies them then and says so;
    /// this is the backstop if it never does).
    pub(super) fn prune_approvals(&mut self) {
        let now_ms = self.now.wall_ms;
        let mut closed: Vec<(String, ApprovalClosed)> = Vec::new();
        for (id, p) in &self.approvals.pending {
            let run_live = self
                .runs
                .get(&p.request.run_id)
                .is_some_and(RunEntry::is_active);
            if !run_live {
                closed.push((id.clone(), ApprovalClosed::RunEnded));
            } else if now_ms > p.request.expires_at_ms.saturating_add(EXPIRY_GRACE_MS) {
                closed.push((id.clone(), ApprovalClosed::Expired));
            }
        }
        for (id, why) in closed {
            self.approval_closed(&id, why);
        }
    }

    fn send_decision(
        &mut self,
        agent_id: &str,
        request: &ApprovalRequest,
        decision: ApprovalDecision,
        pattern: Option<String>,
    ) {
        self.send_if_ready(
            agent_id,
            ControlToWorker::ApprovalResolved {
                run_id: request.run_id.clone(),
                id: request.id.clone(),
                decision,
                pattern,
            },
        );
    }

    fn announce(&self, p: &Pending, decision: ApprovalDecision, by: Option<String>) {
        let ev = ExecApprovalResolved {
            id: p.request.id.clone(),
            decision: decision.as_str().to_owned(),
            resolved_by: by,
            ts: self.now.wall_ms,
            request: view(p),
        };
        self.deps.hub.publish_deferred(
            &Deferred::event(ipc::gateway::events::EXEC_APPROVAL_RESOLVED, &ev)
                .for_scope(ipc::gateway::Scope::Approvals),
        );
    }

    /// `allow-always`: the pattern joins the agent's allowlist now (the running worker gets
    /// it with the decision, later workers in their spec) and is kept in the gateway db.
    fn allow_always(&mut self, agent_id: &str, pattern: String) {
        let list = self.allowed.entry(agent_id.to_owned()).or_default();
        if list.contains(&pattern) {
            return;
        }
        // As many as the gateway db keeps: beyond it the command was allowed once only.
        if list.len() as i64 >= crate::gatewaydb::MAX_ALLOWED_PER_AGENT {
            tracing::warn!(
                agent = agent_id,
                "The agent has the most allow-always patterns kept; this one was allowed once only (revoke some with `loopgate approvals revoke`)."
            );
            return;
        }
        list.push(pattern.clone());
        self.effects.push(Effect::AllowExec {
            agent_id: agent_id.to_owned(),
            pattern,
            at_ms: self.now.wall_ms,
        });
    }
}

impl Control {
    /// Every kept pattern, by agent id, each agent's in the order they were allowed.
    pub(super) fn allowed_list(&self) -> Vec<(String, String)> {
        let mut agents: Vec<&String> = self.allowed.keys().collect();
        agents.sort();
        agents
            .into_iter()
            .flat_map(|a| self.allowed[a].iter().map(move |p| (a.clone(), p.clone())))
            .collect()
    }

    /// Forgets a kept pattern: at once for later workers, and in the gateway db (answered
    /// once that is written).
    pub(super) fn disallow(
        &mut self,
        agent_id: String,
        pattern: String,
        reply: oneshot::Sender<Result<bool, crate::gatewaydb::DbError>>,
    ) {
        let held = self
            .allowed
            .get_mut(&agent_id)
            .map(|list| {
                let before = list.len();
                list.retain(|p| *p != pattern);
                before != list.len()
            })
            .unwrap_or(false);
        self.effects.push(Effect::DisallowExec {
            agent_id,
            pattern,
            held,
            reply,
        });
    }
}
