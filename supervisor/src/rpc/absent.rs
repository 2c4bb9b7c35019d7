//! Methods for features loopgate does not have: each answers what a gateway with nothing of
//! that kind configured answers (see `ipc::gateway::absent` and docs/protocol.md), never a
//! made-up entry.

use super::*;
use ipc::gateway::{
    ApprovalHistoryResult, BranchesResult, ChannelsStatusResult, CronListResult, CronStatusResult,
    NodeListResult, NodePairListResult, ProgressCardResult, TalkCatalogResult, TasksListResult,
    UpdateStatusResult,
};

/// `cron.list`'s page size when none is asked (OpenClaw's).
const CRON_DEFAULT_LIMIT: u32 = 50;

/// `sha256:` of the empty job list: the revision of a catalog that never changes.
fn empty_revision() -> String {
    use sha2::{Digest, Sha256};
    let hex: String = Sha256::digest(b"[]")
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

pub(super) async fn absent(gw: &Arc<Gateway>, req: Request, out: &Out, method: Method) {
    match method {
        Method::CronList => {
            let Some(p) = params::<m::CronList>(&req, out).await else {
                return;
            };
            let limit = p.limit.unwrap_or(CRON_DEFAULT_LIMIT);
            if !(1..=200).contains(&limit) {
                return out
                    .err(
                        &req.id,
                        ErrorShape::invalid("invalid cron.list params: limit must be 1..200"),
                    )
                    .await;
            }
            let previews = !(p.compact == Some(true) || p.include_delivery_previews == Some(false));
            let r = CronListResult {
                jobs: Vec::new(),
                snapshot_revision: empty_revision(),
                total: 0,
                offset: p.offset.unwrap_or(0),
                limit,
                has_more: false,
                next_offset: None,
                delivery_previews: previews.then(serde_json::Map::new),
            };
            reply::<m::CronList>(out, &req.id, &r).await
        }
        Method::CronStatus => {
            if params::<m::CronStatus>(&req, out).await.is_some() {
                let r = CronStatusResult {
                    enabled: false,
                    triggers_enabled: false,
                    jobs: 0,
                    next_wake_at_ms: None,
                };
                reply::<m::CronStatus>(out, &req.id, &r).await
            }
        }
        Method::TasksList => {
            if params::<m::TasksList>(&req, out).await.is_some() {
                reply::<m::TasksList>(out, &req.id, &TasksListResult::default()).await
            }
        }
        Method::TalkCatalog => {
            if params::<m::TalkCatalog>(&req, out).await.is_some() {
                reply::<m::TalkCatalog>(out, &req.id, &TalkCatalogResult::default()).await
            }
        }
        Method::UpdateStatus => {
            if params::<m::UpdateStatus>(&req, out).await.is_some() {
                reply::<m::UpdateStatus>(out, &req.id, &UpdateStatusResult::default()).await
            }
        }
        Method::ProgressCardGet | Method::SessionsBranchesList => {
            let Some(p) = params::<m::ProgressCardGet>(&req, out).await else {
                return;
            };
            if route_key(gw, &req, out, &p.session_key, p.agent_id.as_deref())
                .await
                .is_none()
            {
                return;
            }
            if method == Method::ProgressCardGet {
                reply::<m::ProgressCardGet>(out, &req.id, &ProgressCardResult::default()).await
            } else {
                reply::<m::SessionsBranchesList>(out, &req.id, &BranchesResult::default()).await
            }
        }
        // OpenClaw's own answers when the session has no side chat / observer.
        Method::SessionsCompanionState => {
            if params::<m::SessionsCompanionState>(&req, out)
                .await
                .is_some()
            {
                out.err(
                    &req.id,
                    ErrorShape::unavailable("Side chat is unavailable.", None),
                )
                .await
            }
        }
        Method::SessionsObserverVisibility => {
            out.err(
                &req.id,
                ErrorShape::unavailable("Session observer is unavailable.", None),
            )
            .await
        }
        Method::ChannelsStatus => {
            if params::<m::ChannelsStatus>(&req, out).await.is_some() {
                let r = ChannelsStatusResult {
                    ts: now_ms(),
                    ..Default::default()
                };
                reply::<m::ChannelsStatus>(out, &req.id, &r).await
            }
        }
        // No heartbeats run: there is no last one (`null`).
        Method::LastHeartbeat => reply::<m::LastHeartbeat>(out, &req.id, &None).await,
        Method::NodeList => {
            if params::<m::NodeList>(&req, out).await.is_some() {
                let r = NodeListResult {
                    ts: now_ms(),
                    nodes: Vec::new(),
                };
                reply::<m::NodeList>(out, &req.id, &r).await
            }
        }
        Method::NodePairList => {
            if params::<m::NodePairList>(&req, out).await.is_some() {
                reply::<m::NodePairList>(out, &req.id, &NodePairListResult::default()).await
            }
        }
        // Bare arrays, as OpenClaw answers them: nothing waits for a decision (plugins and
        // OpenClaw's own agents do not exist here; exec approvals are `rpc::approvals`).
        Method::PluginApprovalList | Method::OpenclawApprovalList => {
            if params::<m::PluginApprovalList>(&req, out).await.is_some() {
                reply::<m::PluginApprovalList>(out, &req.id, &Vec::new()).await
            }
        }
        Method::ApprovalHistory => {
            if params::<m::ApprovalHistory>(&req, out).await.is_some() {
                reply::<m::ApprovalHistory>(out, &req.id, &ApprovalHistoryResult::default()).await
            }
        }
        other => {
            tracing::error!(method = other.as_str(), "Not an absent-feature method.");
            out.err(
                &req.id,
                ErrorShape::invalid(format!("unknown method: {}", other.as_str())),
            )
            .await
        }
    }
}
