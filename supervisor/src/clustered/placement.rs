//! Which gateway runs which agent. Each agent has a preferred gateway among the live
//! members: the one whose name hashes highest with the agent's (rendezvous hashing), so the
//! agents spread over the gateways and each member's share moves only when members come or
//! go. A gateway takes an agent nobody holds if it is the preferred one, or if nobody has
//! taken it for a whole lease TTL (the preferred one may be starting or gone). A gateway
//! holding an agent another live member prefers hands it over once it is idle here (no run
//! in flight, no delivery being handled), never in the middle of a session's runs.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use cluster::Acquired;
use futures_util::future::join_all;

use super::Clustered;
use crate::gateway::Gateway;

/// The member that should run `agent` (`None`: no members).
pub(super) fn preferred<'a>(agent: &str, members: &'a [String]) -> Option<&'a str> {
    members
        .iter()
        .max_by_key(|node| cluster::names::digest(&format!("{agent}/{node}")))
        .map(String::as_str)
}

impl Clustered {
    /// Renews every lease held, all at once (while the engine is slow to answer, one
    /// agent's wait never delays another's renewal past its lease), then hands over, once
    /// idle, what another live member prefers.
    pub(super) async fn renew_round(self: &Arc<Self>, gw: &Arc<Gateway>) {
        let held: Vec<String> = self.held().keys().cloned().collect();
        let renewals = held
            .iter()
            .map(|agent| async move { (agent, self.renew(gw, agent).await) });
        let renewed = join_all(renewals).await;
        if gw.draining.load(Ordering::Relaxed) {
            return;
        }
        let members = self
            .members
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let me = self.engine.node();
        for (agent, still) in renewed {
            // Members unknown yet (no taking round done): nothing is handed over.
            let elsewhere = preferred(agent, &members).is_some_and(|p| p != me);
            if still && elsewhere {
                self.hand_over(gw, agent).await;
            }
        }
    }

    /// Says this gateway is alive, reads the live members, and takes the agents it should.
    pub(super) async fn take_round(self: &Arc<Self>, gw: &Arc<Gateway>) {
        let me = self.engine.node().to_owned();
        let (alive, members) = tokio::join!(self.engine.heartbeat(), self.engine.members());
        if let Err(e) = alive {
            tracing::warn!(error = %e, "Cannot tell the cluster this gateway is alive.");
        }
        let mut members = members.unwrap_or_default();
        if !members.contains(&me) {
            members.push(me.clone());
        }
        *self.members.lock().unwrap_or_else(|p| p.into_inner()) = members.clone();
        if gw.draining.load(Ordering::Relaxed) {
            return;
        }
        let free: Vec<String> = {
            let h = self.held();
            gw.config()
                .agent_ids()
                .into_iter()
                .filter(|a| !h.contains_key(a))
                .collect()
        };
        let mine = |agent: &str| preferred(agent, &members) == Some(me.as_str());
        join_all(
            free.iter()
                .map(|agent| self.take_if_due(gw, agent, mine(agent))),
        )
        .await;
    }

    /// Takes `agent` if this gateway prefers it, or if nobody has held it for a whole TTL.
    async fn take_if_due(self: &Arc<Self>, gw: &Arc<Gateway>, agent: &str, mine: bool) {
        if !mine && !self.unowned_long(agent).await {
            return;
        }
        // The lease is good for a TTL from before it was asked for (the engine's clock on
        // it starts no earlier).
        let asked = Instant::now();
        match self.engine.acquire(agent).await {
            Ok(Acquired::Held(lease)) => {
                self.unowned().remove(agent);
                self.took(gw, lease, asked)
            }
            Ok(Acquired::Owned { .. }) => {}
            Err(e) => {
                tracing::warn!(agent, error = %e, "Cannot ask for an agent's lease.")
            }
        }
    }

    fn unowned(&self) -> std::sync::MutexGuard<'_, std::collections::HashMap<String, Instant>> {
        self.unowned_since.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether nobody has held `agent` for a whole lease TTL, as this gateway saw it.
    async fn unowned_long(&self, agent: &str) -> bool {
        match self.engine.owner(agent).await {
            Ok(Some(_)) | Err(_) => {
                self.unowned().remove(agent);
                false
            }
            Ok(None) => {
                let mut unowned = self.unowned();
                let since = *unowned.entry(agent.to_owned()).or_insert_with(Instant::now);
                since.elapsed() >= self.engine.lease_ttl()
            }
        }
    }

    /// Renews `agent`'s lease; `false` when it is not held any more. A lease is good for a
    /// TTL from when its last successful renewal was sent; a renewal not answered by then
    /// loses it (another gateway may have taken it since).
    async fn renew(&self, gw: &Arc<Gateway>, agent: &str) -> bool {
        let Some((mut lease, confirmed)) = self
            .held()
            .get(agent)
            .map(|h| (h.lease.clone(), h.confirmed))
        else {
            return false;
        };
        let ttl = self.engine.lease_ttl();
        let sent = Instant::now();
        let left = (confirmed + ttl).saturating_duration_since(sent);
        match self.engine.renew(&mut lease, left).await {
            Ok(true) => {
                if let Some(h) = self.held().get_mut(agent) {
                    h.lease = lease;
                    h.confirmed = sent;
                }
                true
            }
            Ok(false) => {
                self.lost(gw, agent, "another gateway owns it now").await;
                false
            }
            Err(e) if confirmed.elapsed() >= ttl => {
                let why = format!("the lease could not be renewed for a whole TTL: {e}");
                self.lost(gw, agent, &why).await;
                false
            }
            Err(e) => {
                tracing::warn!(agent, error = %e, "Cannot renew an agent's lease; retrying.");
                true
            }
        }
    }

    /// Gives `agent` up to the member that prefers it, if nothing of it is in flight here.
    async fn hand_over(self: &Arc<Self>, gw: &Arc<Gateway>, agent: &str) {
        let me = self.engine.node().to_owned();
        let busy = |c: &Clustered| {
            c.held().get(agent).is_some_and(|h| {
                h.shared.deliveries.load(Ordering::SeqCst) > 0
                    || super::workspace::stays(&h.shared.workspace, &me)
            })
        };
        let running = match gw.control.active_runs().await {
            Ok(runs) => runs.get(agent).is_some_and(|r| !r.is_empty()),
            Err(_) => true,
        };
        if running || busy(self) {
            return;
        }
        // Stop pulling first; a delivery taken meanwhile keeps the agent here.
        let Some(held) = self.held().remove(agent) else {
            return;
        };
        held.queue.abort();
        if held.shared.deliveries.load(Ordering::SeqCst) > 0 {
            let queue = self.serve(gw, &held.lease, &held.shared);
            self.held()
                .insert(agent.to_owned(), super::Held { queue, ..held });
            return;
        }
        // The files of its last runs go with it (unchanged since the last run's end:
        // nothing is sent).
        self.snapshot_workspace(gw, &held.lease, &held.shared.workspace)
            .await;
        gw.metrics.cluster_let_go(agent, false);
        match self.engine.release(&held.lease).await {
            Ok(()) => tracing::info!(
                agent,
                epoch = held.lease.epoch,
                "Handed the agent to the gateway that prefers it."
            ),
            Err(e) => {
                tracing::warn!(agent, error = %e, "Cannot give an agent's lease up; it lapses after its TTL.")
            }
        }
        // Its worker's copy of the journal is the last this gateway saw: should the agent
        // come back here, the next worker syncs afresh (an idle one left running would name
        // a record long past and be refused mid-run).
        if let Err(e) = gw.control.stop_worker(agent.to_owned()).await {
            tracing::warn!(agent, error = %e, "Cannot stop the worker of an agent handed over.");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_spread_over_members_and_move_only_with_them() {
        let three: Vec<String> = ["h1", "h2", "h3"].map(String::from).to_vec();
        let agents: Vec<String> = (0..300).map(|i| format!("a{i}")).collect();
        let mut share = std::collections::HashMap::new();
        for a in &agents {
            *share.entry(preferred(a, &three).unwrap()).or_insert(0) += 1;
        }
        assert_eq!(share.len(), 3);
        assert!(share.values().all(|n| *n > 60), "{share:?}");
        // h3 leaves: only its agents move.
        let two = &three[..2];
        for a in &agents {
            let before = preferred(a, &three).unwrap();
            let after = preferred(a, two).unwrap();
            assert!(before == after || before == "h3");
        }
        assert_eq!(preferred("a", &[]), None);
    }
}
