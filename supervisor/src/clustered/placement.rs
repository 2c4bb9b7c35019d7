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
    /// One round: say this gateway is alive, renew what is held (handing over what another
    /// member prefers, once idle), take what this gateway should.
    pub(super) async fn place(self: &Arc<Self>, gw: &Arc<Gateway>) {
        if let Err(e) = self.engine.heartbeat().await {
            tracing::warn!(error = %e, "Cannot tell the cluster this gateway is alive.");
        }
        let me = self.engine.node().to_owned();
        let mut members = self.engine.members().await.unwrap_or_default();
        if !members.contains(&me) {
            members.push(me.clone());
        }
        let agents = gw.config().agent_ids();
        let draining = gw.draining.load(Ordering::Relaxed);
        for agent in agents {
            let mine = preferred(&agent, &members) == Some(me.as_str());
            if self.held().contains_key(&agent) {
                if self.renew(gw, &agent).await && !mine && !draining {
                    self.hand_over(gw, &agent).await;
                }
            } else if !draining && (mine || self.unowned_long(&agent).await) {
                match self.engine.acquire(&agent).await {
                    Ok(Acquired::Held(lease)) => {
                        self.unowned().remove(&agent);
                        self.took(gw, lease)
                    }
                    Ok(Acquired::Owned { .. }) => {}
                    Err(e) => {
                        tracing::warn!(agent = agent.as_str(), error = %e, "Cannot ask for an agent's lease.")
                    }
                }
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

    /// Renews `agent`'s lease; `false` when it is not held any more.
    async fn renew(&self, gw: &Arc<Gateway>, agent: &str) -> bool {
        let Some((mut lease, confirmed)) = self
            .held()
            .get(agent)
            .map(|h| (h.lease.clone(), h.confirmed))
        else {
            return false;
        };
        match self.engine.renew(&mut lease).await {
            Ok(true) => {
                if let Some(h) = self.held().get_mut(agent) {
                    h.lease = lease;
                    h.confirmed = Instant::now();
                }
                true
            }
            Ok(false) => {
                self.lost(gw, agent, "another gateway owns it now").await;
                false
            }
            Err(e) if confirmed.elapsed() >= self.engine.lease_ttl() => {
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
        let busy = |c: &Clustered| {
            c.held()
                .get(agent)
                .is_some_and(|h| h.deliveries.load(Ordering::SeqCst) > 0)
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
        if held.deliveries.load(Ordering::SeqCst) > 0 {
            let queue = self.serve(gw, &held.lease, &held.deliveries, &held.taken);
            self.held()
                .insert(agent.to_owned(), super::Held { queue, ..held });
            return;
        }
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
