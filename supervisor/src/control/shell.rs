//! The control actor's I/O shell: it reads the command queue and the timers, hands each
//! command to the core with the time, and carries out the [`Effect`]s the core returns
//! (worker processes, the gateway db, systemd). It decides nothing.

use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::command::Command;
use super::core::{Control, Effect, Now};
use crate::events::EventHub;
use crate::gatewaydb::GatewayDb;
use crate::systemd::Notifier;
use crate::worker_link::{self, LinkEvent};

pub(super) struct Shell {
    pub core: Control,
    pub db: GatewayDb,
    pub hub: EventHub,
    pub notifier: Notifier,
    /// The actor's own queue: db writes report back on it.
    pub tx: mpsc::Sender<Command>,
    /// Where worker links report.
    pub link_tx: mpsc::Sender<LinkEvent>,
    pub cluster: crate::worker_link::JournalCell,
}

impl Shell {
    pub async fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut tick_every = (self.core.deps.config.workers.heartbeat_timeout / 4)
            .clamp(Duration::from_millis(25), Duration::from_secs(1));
        // The systemd watchdog is pet on this tick: at least twice per watchdog interval.
        if let Some(w) = self.notifier.watchdog_interval() {
            tick_every = tick_every.min((w / 2).max(Duration::from_millis(10)));
        }
        let mut tick = tokio::time::interval(tick_every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            let wake = self.core.next_wake();
            let (cmd, ticked) = tokio::select! {
                c = rx.recv() => match c { Some(c) => (c, false), None => break },
                _ = tick.tick() => (Command::Tick, true),
                _ = sleep_until(wake), if wake.is_some() => (Command::Tick, true),
            };
            for effect in self.core.handle(cmd, Now::real()) {
                self.apply(effect);
            }
            if ticked {
                self.notifier.watchdog();
            }
        }
    }

    fn apply(&mut self, effect: Effect) {
        match effect {
            Effect::Spawn(mut spec) => {
                spec.journal = self.cluster.get().cloned();
                worker_link::spawn(*spec, self.hub.clone(), self.link_tx.clone())
            }
            Effect::Kill { pid } => {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid as i32),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            Effect::Persist { run_id, outcome } => {
                let (db, tx) = (self.db.clone(), self.tx.clone());
                tokio::spawn(async move {
                    if let Err(e) = db.finish(run_id.clone(), outcome.stored()).await {
                        tracing::error!(run_id = run_id.as_str(), error = %e, "Recording a run's outcome failed; waiters are answered anyway.");
                    }
                    let _ = tx.send(Command::Persisted { run_id, outcome }).await;
                });
            }
            Effect::AllowExec {
                agent_id,
                pattern,
                at_ms,
            } => {
                let db = self.db.clone();
                tokio::spawn(async move {
                    if let Err(e) = db.allow_exec(agent_id.clone(), pattern, at_ms).await {
                        tracing::error!(agent = agent_id.as_str(), error = %e, "Cannot record an allow-always exec pattern; it holds until the worker restarts.");
                    }
                });
            }
            Effect::DisallowExec {
                agent_id,
                pattern,
                held,
                reply,
            } => {
                let db = self.db.clone();
                tokio::spawn(async move {
                    let stored = db.disallow_exec(agent_id, pattern).await;
                    let _ = reply.send(stored.map(|in_db| held || in_db));
                });
            }
            Effect::Status(status) => self.notifier.status(&status),
            Effect::TrimHeap => crate::sys::trim_heap(),
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}
