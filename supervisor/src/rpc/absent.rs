//! Methods for features loopgate does not have: each answers what a gateway with nothing of
//! that kind configured answers (see `ipc::gateway::absent` and docs/protocol.md), never a
//! made-up entry. Each takes its params and gives its answer (`serve` answers).

use std::future::ready;

use super::*;
use ipc::gateway::{ChannelsStatusResult, Never, NodeListResult, SessionRefParams};

/// `progressCard.get` and `sessions.branches.list`: nothing, for a session key that routes
/// to a configured agent.
pub(super) fn of_session<T: Default>(
    config: &crate::config::Config,
    method: Method,
    p: SessionRefParams,
) -> Answer<T> {
    routed(config, method, &p.session_key, p.agent_id.as_deref())?;
    Ok(T::default())
}

/// `sessions.companion.state`: OpenClaw's answer when the session has no side chat.
pub(super) fn companion_state() -> Answer<Never> {
    Err(ErrorShape::unavailable("Side chat is unavailable.", None))
}

/// `sessions.observer.visibility`: OpenClaw's answer when there is no session observer.
pub(super) fn observer_visibility() -> Answer<Never> {
    Err(ErrorShape::unavailable(
        "Session observer is unavailable.",
        None,
    ))
}

/// `channels.status`: no channels.
pub(super) fn channels_status() -> Answer<ChannelsStatusResult> {
    Ok(ChannelsStatusResult {
        ts: now_ms(),
        ..Default::default()
    })
}

/// `node.list`: no nodes.
pub(super) fn node_list() -> Answer<NodeListResult> {
    Ok(NodeListResult {
        ts: now_ms(),
        nodes: Vec::new(),
    })
}

/// Answers one method of a feature loopgate lacks (`config`: the agents a session key may
/// route to).
pub(super) async fn answer(
    config: &crate::config::Config,
    method: Method,
    req: Request,
    out: &Out,
) {
    match method {
        Method::TasksList => {
            serve::<m::TasksList, _>(req, out, |_| ready(Ok(Default::default()))).await
        }
        Method::TalkCatalog => {
            serve::<m::TalkCatalog, _>(req, out, |_| ready(Ok(Default::default()))).await
        }
        Method::UpdateStatus => {
            serve::<m::UpdateStatus, _>(req, out, |_| ready(Ok(Default::default()))).await
        }
        Method::ProgressCardGet => {
            serve::<m::ProgressCardGet, _>(req, out, |p| ready(of_session(config, method, p))).await
        }
        Method::SessionsBranchesList => {
            serve::<m::SessionsBranchesList, _>(req, out, |p| ready(of_session(config, method, p)))
                .await
        }
        Method::SessionsCompanionState => {
            serve::<m::SessionsCompanionState, _>(req, out, |_| ready(companion_state())).await
        }
        Method::SessionsObserverVisibility => {
            serve::<m::SessionsObserverVisibility, _>(req, out, |_| ready(observer_visibility()))
                .await
        }
        Method::ChannelsStatus => {
            serve::<m::ChannelsStatus, _>(req, out, |_| ready(channels_status())).await
        }
        // No heartbeats run: there is no last one (`null`).
        Method::LastHeartbeat => serve::<m::LastHeartbeat, _>(req, out, |_| ready(Ok(None))).await,
        Method::NodeList => serve::<m::NodeList, _>(req, out, |_| ready(node_list())).await,
        Method::NodePairList => {
            serve::<m::NodePairList, _>(req, out, |_| ready(Ok(Default::default()))).await
        }
        // Bare arrays, as OpenClaw answers them: nothing waits for a decision (plugins and
        // OpenClaw's own agents do not exist here; exec approvals are `approvals`).
        Method::PluginApprovalList => {
            serve::<m::PluginApprovalList, _>(req, out, |_| ready(Ok(Vec::new()))).await
        }
        Method::OpenclawApprovalList => {
            serve::<m::OpenclawApprovalList, _>(req, out, |_| ready(Ok(Vec::new()))).await
        }
        Method::ApprovalHistory => {
            serve::<m::ApprovalHistory, _>(req, out, |_| ready(Ok(Default::default()))).await
        }
        other => {
            tracing::error!(method = other.as_str(), "Not an absent-feature method.");
            let e = ErrorShape::invalid(format!("unknown method: {}", other.as_str()));
            refuse(out, &req.id, e).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_loopgate_lacks_answers_as_openclaw_with_none_configured() {
        assert_eq!(
            companion_state().unwrap_err().message,
            "Side chat is unavailable."
        );
        assert_eq!(observer_visibility().unwrap_err().code, "UNAVAILABLE");
        assert!(channels_status().unwrap().ts > 0);
        assert!(node_list().unwrap().nodes.is_empty());
    }
}
