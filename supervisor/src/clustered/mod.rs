//! Cluster mode in the gateway (`[cluster]`, issue 25): every gateway is a front door, and
//! each agent runs on the one gateway that holds its placement lease.
//!
//! - `front.rs`: admission's cluster path: the idempotency key claimed cluster-wide
//!   (`cluster::Engine::accept`), the run put on its agent's queue, the final answer and
//!   `agent.wait` from the cluster's outcome record (first writer wins).
//! - `owner.rs`: an owned agent's queue: each run is started once cluster-wide, handed to
//!   this gateway's control actor as if admitted here, and its outcome recorded in the
//!   cluster before the delivery is acknowledged. A run that a lost owner started is closed
//!   `error` (never run again: its tools may have run).
//! - `waiters.rs`: one watch per gateway on every outcome, waking the runs waited for here.
//! - `relay.rs`: run events between gateways, so a client sees a run's stream on any
//!   gateway (at most once across gateways; outcomes are durable).
//! - `journal.rs`: the agents' journals for this gateway's workers (a worker's database is
//!   a cache of its agent's journal: replayed at start, each transaction recorded before it
//!   commits).
//! - `ops.rs`: session operations asked here for an agent another gateway owns, carried out
//!   there.
//! - here: the placement loop, which renews held leases three times per TTL (on a lost
//!   lease stopping the agent's worker at once) and, beside it, says this gateway is alive
//!   and takes unowned agents.
//!
//! Without `[cluster]` none of this runs: no NATS, today's code paths.

mod front;
mod journal;
mod ops;
mod owner;
mod placement;
mod relay;
mod seam;
mod waiters;
mod workspace;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cluster::{Engine, Lease, Settings};
use serde::{Deserialize, Serialize};

use crate::gateway::Gateway;

/// A run on its way to its agent's owner.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Travelling {
    agent_id: String,
    request_hash: String,
    run: ipc::control::SubmitRun,
}

/// This gateway's place in the cluster.
pub struct Clustered {
    pub engine: Engine,
    held: Mutex<HashMap<String, Held>>,
    /// Agents another gateway should take, since when this gateway saw nobody holding them.
    unowned_since: Mutex<HashMap<String, Instant>>,
    /// The live members as the last taking round read them (this gateway included).
    members: Mutex<Vec<String>>,
    /// Runs whose outcome someone here waits for.
    waiters: waiters::Waiters,
}

/// A lease this gateway holds, and the task serving the agent's run queue under it.
struct Held {
    lease: Lease,
    /// When the renewal (or the take) the engine last confirmed was sent: the lease is
    /// good for a TTL from then (a lease not confirmed for a TTL may have been taken: the
    /// agent stops here).
    confirmed: Instant,
    queue: tokio::task::JoinHandle<()>,
    shared: Serving,
}

/// What the task serving a lease shares with the rest of the gateway.
#[derive(Clone)]
struct Serving {
    /// Deliveries of the agent's queue still being handled here.
    deliveries: Arc<std::sync::atomic::AtomicUsize>,
    /// Notified each time one of them is done.
    delivered: Arc<tokio::sync::Notify>,
    /// True once this lease's takeover record is in the agent's journal and its workspace
    /// is restored: workers sync only after it (a worker synced before it would be fenced
    /// by its own owner's record).
    taken: Arc<tokio::sync::watch::Sender<bool>>,
    /// The agent's workspace snapshot, as this owner knows it.
    workspace: workspace::Workspace,
}

impl Serving {
    /// Waits until no delivery is being handled (at most `within`, then says so).
    async fn settled(&self, within: Duration) {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            // Made before the check, so a delivery ending in between still wakes it.
            let done = self.delivered.notified();
            if self.deliveries.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, done).await.is_err() {
                tracing::warn!("Runs' outcomes not recorded in the cluster in time; the next owner closes them.");
                return;
            }
        }
    }

    fn new() -> Serving {
        Serving {
            deliveries: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            delivered: Arc::new(tokio::sync::Notify::new()),
            taken: Arc::new(tokio::sync::watch::Sender::new(false)),
            workspace: Arc::default(),
        }
    }
}

impl Clustered {
    /// Connects to the cluster (making its streams and buckets if this gateway is first).
    /// `env`: the gateway's environment (`cluster.token_env` is read from it).
    pub async fn connect(
        settings: &Settings,
        env: &HashMap<String, String>,
    ) -> Result<Arc<Clustered>, cluster::ClusterError> {
        Ok(Arc::new(Clustered {
            engine: Engine::connect(settings, &|name| env.get(name).cloned()).await?,
            held: Mutex::new(HashMap::new()),
            unowned_since: Mutex::new(HashMap::new()),
            members: Mutex::new(Vec::new()),
            waiters: waiters::Waiters::default(),
        }))
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, Held>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The agents this gateway owns now, with their epochs.
    pub fn owned(&self) -> Vec<(String, u64)> {
        let mut v: Vec<_> = self
            .held()
            .iter()
            .map(|(a, h)| (a.clone(), h.lease.epoch))
            .collect();
        v.sort();
        v
    }

    /// The cluster as this gateway sees it now (`status`). What the engine cannot answer
    /// shows as unknown, never as an error of the whole status.
    pub async fn status(&self, agents: &[String]) -> ipc::gateway::ClusterStatus {
        let members = self.engine.members().await.unwrap_or_default();
        let mut out = Vec::with_capacity(agents.len());
        for agent in agents {
            let owner = self.engine.owner(agent).await.ok().flatten();
            let head = self.engine.workspace_head(agent).await.ok().flatten();
            out.push(ipc::gateway::ClusterAgent {
                agent_id: agent.clone(),
                owner: owner.as_ref().map(|(node, _)| node.clone()),
                epoch: owner.map(|(_, epoch)| epoch),
                workspace_bytes: head
                    .as_ref()
                    .filter(|h| h.object.is_some())
                    .map(|h| h.bytes),
                pinned_to: head.and_then(|h| h.pinned).map(|p| p.node),
            });
        }
        ipc::gateway::ClusterStatus {
            node: self.engine.node().to_owned(),
            members,
            engine: self.engine.health().await,
            agents: out,
        }
    }

    /// Relays run events between this gateway and the others, and runs the placement loop
    /// until the gateway stops.
    pub async fn start(self: &Arc<Self>, gw: Arc<Gateway>) -> tokio::task::JoinHandle<()> {
        relay::start(&gw.hub, &gw.stopping, self).await;
        waiters::start(self, gw.stopping.clone());
        self.serve_ops(gw.clone()).await;
        let me = self.clone();
        tokio::spawn(async move {
            let every = me.engine.lease_ttl() / 3;
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            // Renewals never wait on the rest: a heartbeat, a member listing or a take can
            // each hang for the engine's request timeout while a stream elects a leader, and
            // a round that waited on them renewed too late (seen in the chaos run: survivors
            // lost every lease they held, took them again, and lost them again, for 30 s
            // after a kill). One taking round runs at a time, beside the renewals.
            let mut taking: Option<tokio::task::JoinHandle<()>> = None;
            loop {
                tokio::select! {
                    _ = tick.tick() => {
                        if taking.as_ref().is_none_or(|t| t.is_finished()) {
                            let (me, gw) = (me.clone(), gw.clone());
                            taking = Some(tokio::spawn(async move { me.take_round(&gw).await }));
                        }
                        me.renew_round(&gw).await;
                    }
                    _ = gw.stopping.cancelled() => break,
                }
            }
            if let Some(t) = taking {
                t.abort();
            }
        })
    }

    /// `asked`: when the lease was asked for (it is good for a TTL from then).
    fn took(self: &Arc<Self>, gw: &Arc<Gateway>, lease: Lease, asked: Instant) {
        tracing::info!(
            agent = lease.agent.as_str(),
            epoch = lease.epoch,
            "This gateway owns the agent now."
        );
        gw.metrics.cluster_took(&lease.agent);
        let shared = Serving::new();
        let queue = self.serve(gw, &lease, &shared);
        self.held().insert(
            lease.agent.clone(),
            Held {
                lease,
                confirmed: asked,
                queue,
                shared,
            },
        );
    }

    fn serve(
        self: &Arc<Self>,
        gw: &Arc<Gateway>,
        lease: &Lease,
        shared: &Serving,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(owner::serve_queue(
            gw.clone(),
            self.clone(),
            lease.clone(),
            shared.clone(),
        ))
    }

    /// The lease is gone: nothing more of the agent runs here. Its runs end (their outcomes
    /// lose to the new owner's, who closes them); the worker is stopped at once so that no
    /// tool runs on under a stale epoch.
    async fn lost(&self, gw: &Arc<Gateway>, agent: &str, why: &str) {
        let Some(h) = self.held().remove(agent) else {
            return;
        };
        h.queue.abort();
        gw.metrics.cluster_let_go(agent, true);
        tracing::error!(
            agent,
            epoch = h.lease.epoch,
            why,
            "This gateway lost the agent; stopping its worker."
        );
        if let Err(e) = gw.control.stop_worker(agent.to_owned()).await {
            tracing::warn!(agent, error = %e, "Cannot stop the worker of a lost agent.");
        }
    }

    /// Gives every lease up (the gateway drained): other gateways take the agents at once.
    pub async fn release_all(&self, gw: &Gateway) {
        let held: Vec<Held> = self.held().drain().map(|(_, h)| h).collect();
        for h in held {
            h.queue.abort();
            // A run the drain let finish is recorded in the cluster by its delivery's task:
            // let it, or the next owner would close the run as a lost owner's.
            h.shared.settled(RECORD_WAIT).await;
            // What the last runs left goes with the agent (unchanged: nothing is sent).
            self.snapshot_workspace(gw, &h.lease, &h.shared.workspace)
                .await;
            gw.metrics.cluster_let_go(&h.lease.agent, false);
            if let Err(e) = self.engine.release(&h.lease).await {
                tracing::warn!(agent = h.lease.agent.as_str(), error = %e, "Cannot give an agent's lease up; it lapses after its TTL.");
            }
        }
    }
}

/// Longest wait of a drained gateway for its runs' outcomes to be recorded in the cluster.
const RECORD_WAIT: Duration = Duration::from_secs(30);

/// How long the queue of an agent waits before pulling again after the engine failed it.
const PULL_AGAIN: Duration = Duration::from_millis(500);
