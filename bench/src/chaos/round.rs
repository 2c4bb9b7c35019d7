//! One round: runs submitted, a fault on the victim host mid-run, its agents' failover
//! timed, the host healed, the round's runs ended and the agents back where they belong.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::Context;
use tokio::sync::oneshot;

use super::drive::{self, Run};
use super::{Fault, Rng, Round, World, HOSTS, SETTLE_WITHIN};

/// Longest wait for the victim to be running one of the round's runs.
const MID_RUN_WITHIN: Duration = Duration::from_secs(10);
/// Packets a lossy link drops.
const LOSS_PERCENT: u32 = 50;

impl World {
    pub(super) async fn round(
        &mut self,
        round: usize,
        victim: usize,
        fault: Fault,
        n: usize,
        rng: &mut Rng,
    ) -> anyhow::Result<Round> {
        let owners = self.owners().await;
        let node = self.hosts[victim].node();
        let agents = &self.setup.agents;
        let mut theirs: Vec<String> = agents
            .iter()
            .filter(|a| owners.get(*a) == Some(&node))
            .cloned()
            .collect();
        theirs.sort();
        // The victim's agents first, so the fault lands on runs in flight.
        let mut runs: Vec<Run> = (0..n)
            .map(|k| {
                let agent = match theirs.get(k) {
                    Some(a) => a.clone(),
                    None => agents[rng.below(agents.len())].clone(),
                };
                let session = format!("s{}", rng.below(2));
                Run::new(format!("r{round}-{k}"), &agent, &session)
            })
            .collect();
        let before = self.model.requests().len();
        let mut accepted = Vec::new();
        for run in &runs {
            let first = rng.below(HOSTS);
            let fronts = (0..HOSTS)
                .map(|i| self.hosts[(first + i) % HOSTS].url())
                .collect();
            let (tx, rx) = oneshot::channel();
            tokio::spawn(drive::submit(
                run.clone(),
                fronts,
                self.setup.token.clone(),
                tx,
            ));
            accepted.push(rx);
        }
        for (run, rx) in runs.iter_mut().zip(accepted) {
            match rx.await {
                Ok(Ok(id)) => run.run_id = Some(id),
                Ok(Err(e)) => eprintln!("{} was not accepted: {e:#}", run.key),
                Err(_) => eprintln!("{}: its client ended", run.key),
            }
        }
        self.until_mid_run(&node, &runs, before).await;

        let t0 = Instant::now();
        self.apply(victim, fault)?;
        let (probes, failover, probes_failed) = self.probes(round, victim, &theirs, t0).await;
        runs.extend(probes);
        self.heal(victim, fault)?;
        let deadline = Instant::now() + SETTLE_WITHIN;
        for run in &runs {
            let Some(id) = &run.run_id else { continue };
            // The engine may be electing leaders after the fault: ask again.
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                match tokio::time::timeout(left, self.engine.wait_outcome(id)).await {
                    Ok(Ok(_)) => break,
                    Ok(Err(e)) if Instant::now() < deadline => {
                        eprintln!("waiting for {}: {e}; again", run.key);
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                    Ok(Err(e)) => {
                        return Err(e).with_context(|| format!("{} never ended", run.key))
                    }
                    Err(_) => anyhow::bail!("{} did not end within {SETTLE_WITHIN:?}", run.key),
                }
            }
        }
        self.settled().await?;
        Ok(Round {
            runs,
            failover,
            probes_failed,
        })
    }

    /// Waits until a model request of one of `runs` came from `node`.
    async fn until_mid_run(&self, node: &str, runs: &[Run], before: usize) {
        let key = format!("Bearer {node}");
        let mine: HashSet<&str> = runs.iter().map(|r| r.message.as_str()).collect();
        let deadline = Instant::now() + MID_RUN_WITHIN;
        while Instant::now() < deadline {
            let reqs = self.model.requests();
            let hit = reqs.iter().skip(before).any(|r| {
                r.authorization.as_deref() == Some(key.as_str())
                    && r.body["messages"]
                        .as_array()
                        .and_then(|m| m.last())
                        .and_then(|m| m["content"].as_str())
                        .is_some_and(|t| mine.contains(t))
            });
            if hit {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!("no run reached {node} within {MID_RUN_WITHIN:?}; faulting it anyway");
    }

    /// A probe run per agent the victim owned, on a survivor: how long until the agent
    /// completes a run again.
    async fn probes(
        &self,
        round: usize,
        victim: usize,
        theirs: &[String],
        t0: Instant,
    ) -> (Vec<Run>, Vec<Duration>, Vec<String>) {
        let survivors: Vec<usize> = (0..HOSTS).filter(|i| *i != victim).collect();
        let mut set = tokio::task::JoinSet::new();
        for (k, agent) in theirs.iter().enumerate() {
            let run = Run::new(format!("p{round}-{agent}"), agent, "s0");
            let url = self.hosts[survivors[k % survivors.len()]].url();
            let token = self.setup.token.clone();
            set.spawn(async move { drive::probe(&url, &token, &run, t0).await });
        }
        let (mut runs, mut took, mut failed) = (Vec::new(), Vec::new(), Vec::new());
        while let Some(done) = set.join_next().await {
            let Ok((made, r)) = done else { continue };
            match r {
                Ok(d) => took.push(d),
                Err(e) => {
                    let key = made.first().map(|r| r.key.clone()).unwrap_or_default();
                    eprintln!("probe {key} failed: {e:#}");
                    failed.push(format!("{key}: {e:#}"));
                }
            }
            runs.extend(made);
        }
        (runs, took, failed)
    }

    fn apply(&mut self, victim: usize, fault: Fault) -> anyhow::Result<()> {
        match fault {
            Fault::Kill => {
                self.hosts[victim].kill();
                Ok(())
            }
            Fault::Cut => self.net.cut(victim),
            Fault::Lossy => {
                let how = self.net.lossy(victim, LOSS_PERCENT)?;
                eprintln!("h{}'s link is lossy ({how})", victim + 1);
                Ok(())
            }
        }
    }

    fn heal(&mut self, victim: usize, fault: Fault) -> anyhow::Result<()> {
        match fault {
            Fault::Kill => {
                let ips: Vec<String> = self.hosts.iter().map(|h| h.ip.clone()).collect();
                let h = &mut self.hosts[victim];
                h.start_nats(&self.net, &self.setup, &ips)?;
                h.wait_nats()?;
                h.start_gateway(&self.net, &self.setup, &ips)
            }
            Fault::Cut | Fault::Lossy => self.net.heal(victim),
        }
    }
}
