//! The owner's side: an owned agent's run queue, served while the lease is held. Each run
//! is started once cluster-wide, then runs here exactly as a run admitted here does (the
//! gateway db records it, the control actor dispatches it to the agent's worker); once its
//! outcome is recorded locally it is recorded in the cluster (first writer wins) and only
//! then is the delivery acknowledged.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use cluster::{Delivery, Ended, Lease, Start, StartRecord};

use super::{Clustered, Travelling, PULL_AGAIN};
use crate::backend::local::{self, RunStart, StartRefused, Started};
use crate::control::WaitReply;
use crate::events::now_ms;
use crate::gateway::Gateway;
use crate::outcome::StoredTerminal;

/// Pulls `lease.agent`'s runs until the task is aborted (the lease lost or given up).
/// `deliveries` counts those still being handled (the agent is handed to another gateway
/// only when none is).
pub(super) async fn serve_queue(
    gw: Arc<Gateway>,
    c: Arc<Clustered>,
    lease: Lease,
    shared: super::Serving,
) {
    let super::Serving {
        deliveries,
        delivered,
        taken,
        workspace,
    } = shared;
    // Nothing of the agent runs or is closed here before its previous owner is fenced off
    // the journal: after this record, whatever it still sends is refused. Once per lease:
    // a second takeover record would fence this gateway's own synced worker.
    if !*taken.borrow() {
        if let Err(why) = take_over(&c, &lease, &workspace, &gw).await {
            // This lease is stale. Let the agent go from outside this task (letting go
            // aborts it, and stops the worker).
            let (c, gw, agent, epoch) = (c.clone(), gw.clone(), lease.agent.clone(), lease.epoch);
            tokio::spawn(async move {
                let still = c.held().get(&agent).is_some_and(|h| h.lease.epoch == epoch);
                if still {
                    c.lost(&gw, &agent, why).await
                }
            });
            return;
        }
        taken.send_replace(true);
    }
    loop {
        let mut queue = match c.engine.run_queue(&lease.agent).await {
            Ok(q) => q,
            Err(e) => {
                tracing::warn!(agent = lease.agent.as_str(), error = %e, "Cannot pull the agent's runs; trying again.");
                tokio::time::sleep(PULL_AGAIN).await;
                continue;
            }
        };
        while let Some(next) = queue.next().await {
            match next {
                Ok(d) => {
                    deliveries.fetch_add(1, Ordering::SeqCst);
                    let (gw, c, lease, ws, count, done) = (
                        gw.clone(),
                        c.clone(),
                        lease.clone(),
                        workspace.clone(),
                        deliveries.clone(),
                        delivered.clone(),
                    );
                    tokio::spawn(async move {
                        run_delivery(gw, c, lease, ws, d).await;
                        count.fetch_sub(1, Ordering::SeqCst);
                        done.notify_waiters();
                    });
                }
                Err(e) => {
                    tracing::warn!(agent = lease.agent.as_str(), error = %e, "A delivery of the agent's runs failed.");
                    break;
                }
            }
        }
        tokio::time::sleep(PULL_AGAIN).await;
    }
}

/// Fences the previous owner off the agent's journal and its workspace head, and restores
/// the workspace, retrying while the engine fails; `Err`: a newer owner did it first.
async fn take_over(
    c: &Clustered,
    lease: &Lease,
    workspace: &super::workspace::Workspace,
    gw: &Gateway,
) -> Result<(), &'static str> {
    let agent = lease.agent.as_str();
    loop {
        match c.engine.journal_takeover(lease).await {
            Ok(Ok(seq)) => {
                tracing::info!(
                    agent,
                    epoch = lease.epoch,
                    seq,
                    "Took the agent's journal over."
                );
                break;
            }
            Ok(Err(cluster::Refused)) => return Err("a newer owner took the agent's journal over"),
            Err(e) => {
                tracing::warn!(agent, error = %e, "Cannot take the agent's journal over; trying again.");
                tokio::time::sleep(PULL_AGAIN).await;
            }
        }
    }
    loop {
        match c.restore_workspace(gw, lease, workspace).await {
            Ok(true) => return Ok(()),
            Ok(false) => return Err("a newer owner took the agent's workspace over"),
            Err(e) => {
                tracing::warn!(agent, error = %e, "Cannot claim the agent's workspace; trying again.");
                tokio::time::sleep(PULL_AGAIN).await;
            }
        }
    }
}

/// One delivered run, from its start to its acknowledgement.
async fn run_delivery(
    gw: Arc<Gateway>,
    c: Arc<Clustered>,
    lease: Lease,
    ws: super::workspace::Workspace,
    d: Delivery,
) {
    let t: Travelling = match serde_json::from_slice(&d.payload) {
        Ok(t) => t,
        Err(e) => {
            // Nothing can run it: dropped, said once.
            tracing::error!(agent = lease.agent.as_str(), error = %e, "Dropping an unreadable queued run.");
            let _ = d.ack().await;
            return;
        }
    };
    let run_id = t.run.run_id.clone();
    let terminal = match decide(&c, &lease, &t).await {
        Ok(Decision::Done) => {
            let _ = d.ack().await;
            return;
        }
        Ok(Decision::Orphan(by)) => {
            gw.metrics.cluster_orphan(&t.agent_id);
            // Ended by the control actor as any run ends (recorded here, its terminal
            // events told), never run again.
            let lost = local::Entry::Orphaned(orphan_reason(&by));
            match run_here(&gw, &d, t, lost, c.engine.lease_ttl() / 3).await {
                Some(terminal) => terminal,
                None => return,
            }
        }
        Ok(Decision::Run) => match run_here(
            &gw,
            &d,
            t,
            local::Entry::Delivered,
            c.engine.lease_ttl() / 3,
        )
        .await
        {
            Some(terminal) => {
                // Its files go with the agent before its outcome is told: a run that ended
                // ok never comes back without them on another owner.
                c.snapshot_workspace(&gw, &lease, &ws).await;
                terminal
            }
            // The gateway is stopping: the delivery goes to the next owner.
            None => return,
        },
        Err(e) => {
            // Not acknowledged: delivered again after the ack wait.
            tracing::warn!(run_id = run_id.as_str(), error = %e, "Cannot start a queued run now.");
            return;
        }
    };
    record(&c, &d, &run_id, &terminal).await;
}

enum Decision {
    /// Ended already: nothing to do.
    Done,
    /// Started by an owner that is gone (or by this gateway before it restarted).
    Orphan(StartRecord),
    /// This gateway runs it.
    Run,
}

async fn decide(
    c: &Clustered,
    lease: &Lease,
    t: &Travelling,
) -> Result<Decision, cluster::ClusterError> {
    // The start mark first: for a run not started yet (nearly every delivery) it is all
    // there is to read. A run ended already (its acknowledgement lost) that this gateway
    // started ends here again from its own record, the first terminal standing.
    Ok(match c.engine.start(&t.run.run_id, lease).await? {
        Start::Mine => Decision::Run,
        Start::Taken(by) => match c.engine.outcome(&t.run.run_id).await? {
            Some(_) => Decision::Done,
            None => Decision::Orphan(by),
        },
        // Queued but never accepted cannot happen (accept comes first); nothing to run.
        Start::Unknown => Decision::Done,
    })
}

/// Why a run whose owner was lost while it ran ends `error`: it is not run again, its
/// tools may have run (fail-stop, as OpenClaw).
fn orphan_reason(by: &StartRecord) -> String {
    format!(
        "the gateway running this run ({}, epoch {}) was lost; the run was not retried because its tools may have run",
        by.node, by.epoch
    )
}

/// The run ended `error` without running, saying why.
fn error_terminal(run_id: &str, session_key: &str, agent_id: &str, why: String) -> StoredTerminal {
    let run = crate::projection::RunRef {
        run_id,
        session_key,
        agent_id,
    };
    crate::run_end::GatewayEnd::error(why, now_ms())
        .outcome(&run)
        .stored()
}

/// Runs `t` through this gateway's control actor, started as a run admitted here is
/// (`backend::local::start`: the local record, the hand-over, room in the agent's queues
/// charged then; `entry`: a delivered run, or an orphan the actor ends at once); its
/// terminal once recorded locally. The delivery is kept from going to another owner while
/// the run lasts. `progress`: how often the delivery is told the run goes on.
async fn run_here(
    gw: &Arc<Gateway>,
    d: &Delivery,
    t: Travelling,
    entry: local::Entry,
    progress: std::time::Duration,
) -> Option<StoredTerminal> {
    let run_id = t.run.run_id.clone();
    let (session_key, agent_id) = (t.run.session_key.clone(), t.agent_id.clone());
    let start = RunStart {
        agent_id: t.agent_id,
        request_hash: t.request_hash,
        run: t.run,
    };
    // Charged as it is handed over: the run was accepted cluster-wide, so one the agent's
    // queues here have no room for ends `error`, recorded here and in the cluster, its
    // clients told as for any run's end.
    let mut rx = match local::start(&gw.db, &gw.control, start, entry, async |_| {}).await {
        Ok(Started::New(rx)) => rx,
        Ok(Started::Finished(terminal)) => return Some(terminal),
        Ok(Started::InFlight { .. }) => match gw.control.wait(run_id.clone()).await {
            Ok(WaitReply::Done(o)) => return Some(o.stored()),
            Ok(WaitReply::Pending(rx)) => rx,
            Ok(WaitReply::Unknown) | Err(_) => return None,
        },
        // This gateway's db holds the key for another request (it ran it before it joined
        // the cluster): nothing of it can be recorded here.
        Err(StartRefused::Conflict { why, .. }) => {
            let why = format!("cannot run it here: {why}");
            return Some(error_terminal(&run_id, &session_key, &agent_id, why));
        }
        // The gateway is stopping or cannot record it now: not acknowledged, the delivery
        // comes again (here or at the next owner). (No room is not refused here: it is
        // charged at dispatch.)
        Err(
            e @ (StartRefused::Record(_) | StartRefused::Control(_) | StartRefused::QueueFull(_)),
        ) => {
            tracing::warn!(run_id = run_id.as_str(), error = %e, "Cannot start a queued run.");
            return None;
        }
    };
    let mut tick = tokio::time::interval(progress);
    loop {
        tokio::select! {
            done = &mut rx => return done.ok().map(|o| o.stored()),
            _ = tick.tick() => { let _ = d.progress().await; }
        }
    }
}

/// Records `terminal` as the run's outcome in the cluster, then acknowledges the delivery.
/// Unrecorded, the delivery is not acknowledged: the next owner finds the run started and
/// closes it.
async fn record(c: &Clustered, d: &Delivery, run_id: &str, terminal: &StoredTerminal) {
    let raw = match serde_json::to_string(terminal).map(serde_json::value::RawValue::from_string) {
        Ok(Ok(raw)) => raw,
        _ => return,
    };
    match c.engine.end(run_id, raw).await {
        Ok(Ended::First) | Ok(Ended::Already(_)) => {
            if let Err(e) = d.ack().await {
                tracing::warn!(run_id, error = %e, "A run's outcome is recorded but its delivery could not be acknowledged; it is seen again and skipped.");
            }
        }
        Err(e) => {
            tracing::warn!(run_id, error = %e, "Cannot record a run's outcome in the cluster.")
        }
    }
}
