//! Exec approvals in the control actor: a worker's request is shown to operators
//! (`exec.approval.requested`, to connections with `operator.approvals`), listed
//! (`exec.approval.list`), decided (`exec.approval.resolve`, the decision goes back to the
//! worker) and announced (`exec.approval.resolved`). `allow-always` adds the command's exact
//! pattern to the agent's allowlist, kept in the gateway db and given to every later worker.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use ipc::approval::{ApprovalClosed, ApprovalDecision, ApprovalRequest};
use ipc::control::ControlToWorker;
use ipc::gateway::{ErrorShape, ExecApproval, ExecApprovalRequestView, ExecApprovalResolved};
use serde_json::json;
use tokio::sync::oneshot;

use super::Control;
use crate::events::{now_ms, Deferred};

/// Pending approvals at most; a request beyond it is denied at once.
const MAX_PENDING: usize = 1000;
/// The shortest id prefix `exec.approval.resolve` takes for a whole id.
const MIN_PREFIX: usize = 8;
/// A decision repeated this soon after is answered `ok` again (as OpenClaw).
const REPEAT_GRACE: Duration = Duration::from_secs(15);

pub(super) struct Pending {
    agent_id: String,
    request: ApprovalRequest,
    /// The exact allowlist pattern of the command, if it has one (`allow-always`).
    pattern: Option<String>,
}

#[derive(Default)]
pub(super) struct Approvals {
    pending: HashMap<String, Pending>,
    /// Recent decisions: `(id, decision, when)`.
    decided: VecDeque<(String, ApprovalDecision, Instant)>,
}

/// What `exec.approval.resolve` answers.
pub type ResolveResult = Result<(), ErrorShape>;

fn view(p: &Pending) -> ExecApprovalRequestView {
    let mut allowed = vec!["allow-once".to_owned()];
    if p.pattern.is_some() {
        allowed.push("allow-always".into());
    }
    allowed.push("deny".into());
    ExecApprovalRequestView {
        command: p.request.command.clone(),
        command_argv: p.request.argv.clone(),
        cwd: p.request.cwd.clone(),
        host: "gateway".into(),
        security: "allowlist".into(),
        ask: "on-miss".into(),
        agent_id: p.agent_id.clone(),
        session_key: p.request.session_key.clone(),
        run_id: p.request.run_id.clone(),
        allowed_decisions: allowed,
    }
}

fn listed(p: &Pending) -> ExecApproval {
    ExecApproval {
        approval_kind: "exec".into(),
        id: p.request.id.clone(),
        request: view(p),
        created_at_ms: p.request.created_at_ms,
        expires_at_ms: p.request.expires_at_ms,
    }
}

fn not_found(id: &str) -> ErrorShape {
    ErrorShape::invalid("unknown or expired approval id").with_details(json!({
        "reason": "APPROVAL_NOT_FOUND",
        "id": id,
        "remediation": "list pending approvals with exec.approval.list (loopgate approvals list)",
    }))
}

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
        // No allow-always for a program that takes instructions from files or arguments the
        // model controls (allowing it for good would let the model run anything).
        let pattern = execpolicy::argv::exact_pattern(&request.argv).filter(|_| {
            !request
                .argv
                .first()
                .is_some_and(|p| execpolicy::argv::is_unsafe_program(p))
        });
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
                .for_scope(crate::gateway::scopes::APPROVALS),
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
        let now = Instant::now();
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

    /// Approvals whose run is over (its worker died, or it ended otherwise) are dropped.
    pub(super) fn prune_approvals(&mut self) {
        let gone: Vec<String> = self
            .approvals
            .pending
            .iter()
            .filter(|(_, p)| {
                !self
                    .runs
                    .get(&p.request.run_id)
                    .is_some_and(super::runs::RunEntry::is_active)
            })
            .map(|(id, _)| id.clone())
            .collect();
        for id in gone {
            self.approval_closed(&id, ApprovalClosed::RunEnded);
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
            ts: now_ms(),
            request: view(p),
        };
        self.deps.hub.publish_deferred(
            &Deferred::event(ipc::gateway::events::EXEC_APPROVAL_RESOLVED, &ev)
                .for_scope(crate::gateway::scopes::APPROVALS),
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
        let db = self.deps.db.clone();
        let agent = agent_id.to_owned();
        tokio::spawn(async move {
            if let Err(e) = db.allow_exec(agent.clone(), pattern, now_ms()).await {
                tracing::error!(agent = agent.as_str(), error = %e, "Cannot record an allow-always exec pattern; it holds until the worker restarts.");
            }
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
        reply: oneshot::Sender<Result<bool, String>>,
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
        let db = self.deps.db.clone();
        tokio::spawn(async move {
            let stored = db.disallow_exec(agent_id, pattern).await;
            let _ = reply.send(match stored {
                Ok(in_db) => Ok(held || in_db),
                Err(e) => Err(format!(
                    "cannot remove the pattern from the gateway db: {e}"
                )),
            });
        });
    }
}

/// Loaded once at start: `(agent id, pattern)` rows of the gateway db.
pub fn by_agent(rows: Vec<(String, String)>) -> HashMap<String, Vec<String>> {
    let mut out: HashMap<String, Vec<String>> = HashMap::new();
    for (agent, pattern) in rows {
        out.entry(agent).or_default().push(pattern);
    }
    out
}
