//! One worker slot: an agent's worker lifecycle as a state machine whose data lives only in
//! the state it belongs to, with the pure parts of its policy (restart backoff with jitter,
//! the environment a worker gets, the refusal of a failed agent).

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use ipc::control::{ControlToWorker, Secrets};
use ipc::RpcError;

use tokio::sync::oneshot;

use crate::config::AgentConfig;
use crate::worker_link::LinkHandle;

/// Frames queued for a worker that is starting, backing off or restarting.
pub(super) const MAX_QUEUED: usize = 4096;

/// What happens when a draining worker exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterExit {
    /// The gateway is stopping.
    Stop,
    /// Start a new worker at once (operator restart, changed config).
    Restart,
    /// The agent was removed from config.
    Remove,
    /// It had nothing to do for `workers.idle_exit_seconds`: the agent goes back to `Idle`
    /// (a run that arrives meanwhile waits and starts the next worker).
    Retire,
}

/// Worker lifecycle. Data lives only in the state it belongs to.
pub(super) enum WorkerState {
    /// Never started (workers start on their agent's first run or session operation).
    Idle,
    Spawning {
        since: Instant,
        /// Frames (runs, session ops) waiting for the worker's handshake.
        queued: VecDeque<ControlToWorker>,
    },
    Ready {
        pid: u32,
        since: Instant,
        link: LinkHandle,
        last_pong: Instant,
    },
    Draining {
        pid: u32,
        since: Instant,
        then: AfterExit,
        queued: VecDeque<ControlToWorker>,
        /// The draining worker's link: cancels still reach the runs it finishes.
        link: Option<LinkHandle>,
    },
    /// Crashed; restarts at `until`.
    Backoff {
        until: Instant,
        queued: VecDeque<ControlToWorker>,
    },
    /// The crash-loop breaker tripped; runs are refused until an operator restarts it.
    Failed { since: Instant, reason: String },
    /// Stopped on purpose; starts again on the next run.
    Exited,
}

pub(super) struct WorkerSlot {
    pub agent: AgentConfig,
    pub state: WorkerState,
    pub generation: u64,
    pub restarts: u32,
    pub last_exit: Option<String>,
    /// Runs handed to the current generation's link and not yet terminal (runs still
    /// queued for a worker are in the queue, not here).
    pub in_flight: Vec<String>,
    /// Frames that found the link closed while the worker's exit was not yet reported;
    /// [`Control::worker_gone`] carries them over like queued frames.
    pub(super) held: VecDeque<ControlToWorker>,
    /// Cancels and approval decisions the worker's full link could not take yet: sent again
    /// on every tick (an abort was already told to clients; it must reach the run).
    pub(super) retry: VecDeque<ControlToWorker>,
    /// Recent crash times (within the crash-loop window).
    pub(super) crashes: VecDeque<Instant>,
    /// Consecutive crashes, for the backoff exponent.
    pub(super) attempt: u32,
    /// Why the supervisor killed this worker, if it did.
    pub(super) kill_reason: Option<String>,
    /// Since when a ready worker has had nothing to do (see `retire_idle`).
    pub(super) idle_since: Option<Instant>,
    /// The worker retired when idle: the next one is not a restart.
    pub(super) retired: bool,
    /// When a frame was last handed to this agent's worker (least recently used first when
    /// `workers.max_live` needs room).
    pub(super) last_used: Option<Instant>,
    /// The provider keys (by variable name) the current generation was given: at its start
    /// ([`worker_keys`]) and with runs on other providers since (`ControlToWorker::Keys`).
    pub(super) keys: std::collections::BTreeSet<String>,
    /// Operator restarts waiting for the new worker.
    pub(super) restart_waiters:
        Vec<oneshot::Sender<Result<ipc::gateway::WorkerRestartResult, RpcError>>>,
}

impl WorkerSlot {
    /// The link of the worker, while it has one (ready, or draining its runs).
    pub(super) fn link(&self) -> Option<&LinkHandle> {
        match &self.state {
            WorkerState::Ready { link, .. }
            | WorkerState::Draining {
                link: Some(link), ..
            } => Some(link),
            _ => None,
        }
    }

    pub(super) fn new(agent: AgentConfig) -> Self {
        Self {
            agent,
            state: WorkerState::Idle,
            generation: 0,
            restarts: 0,
            last_exit: None,
            in_flight: Vec::new(),
            held: VecDeque::new(),
            retry: VecDeque::new(),
            crashes: VecDeque::new(),
            attempt: 0,
            keys: Default::default(),
            kill_reason: None,
            idle_since: None,
            retired: false,
            last_used: None,
            restart_waiters: Vec::new(),
        }
    }

    pub fn is_ready(&self) -> bool {
        matches!(self.state, WorkerState::Ready { .. })
    }

    pub fn is_failed(&self) -> bool {
        matches!(self.state, WorkerState::Failed { .. })
    }

    pub(super) fn queued_mut(&mut self) -> Option<&mut VecDeque<ControlToWorker>> {
        match &mut self.state {
            WorkerState::Spawning { queued, .. }
            | WorkerState::Backoff { queued, .. }
            | WorkerState::Draining {
                then: AfterExit::Restart | AfterExit::Retire,
                queued,
                ..
            } => Some(queued),
            WorkerState::Idle
            | WorkerState::Ready { .. }
            | WorkerState::Draining { .. }
            | WorkerState::Failed { .. }
            | WorkerState::Exited => None,
        }
    }

    /// Frames waiting for a worker, oldest first: those held from a closed link, then the
    /// state's queue.
    pub(super) fn take_queued(&mut self) -> VecDeque<ControlToWorker> {
        let mut frames = std::mem::take(&mut self.held);
        frames.extend(self.queued_mut().map(std::mem::take).unwrap_or_default());
        frames
    }

    /// Runs waiting for a worker (queued or held), for status.
    pub(super) fn queued_runs(&self) -> usize {
        let state = match &self.state {
            WorkerState::Spawning { queued, .. }
            | WorkerState::Backoff { queued, .. }
            | WorkerState::Draining { queued, .. } => Some(queued),
            _ => None,
        };
        self.held
            .iter()
            .chain(state.into_iter().flatten())
            .filter(|m| matches!(m, ControlToWorker::Submit(_)))
            .count()
    }

    pub(super) fn answer_restart(
        &mut self,
        result: Result<ipc::gateway::WorkerRestartResult, RpcError>,
    ) {
        for w in self.restart_waiters.drain(..) {
            let _ = w.send(result.clone());
        }
    }
}

/// How a frame for a worker was handled.
pub(super) enum Delivery {
    Sent,
    Queued,
    Refused(String),
}

/// Delay before restart attempt `attempt` (0-based): doubling from `initial` up to `max`,
/// with up to ±25 % jitter so crashed workers do not restart in lockstep.
pub(super) fn backoff(
    initial: Duration,
    max: Duration,
    attempt: u32,
    jitter_seed: u64,
) -> Duration {
    // Cheap deterministic jitter from the seed (splitmix64 step).
    let mut z = jitter_seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    let unit = ((z ^ (z >> 31)) % 1000) as f64 / 1000.0; // [0, 1)
    backoff::delay(initial, max, attempt, 0.25, unit)
}

/// The environment a worker starts with: the plain variables the supervisor has, no secret
/// (`ipc::worker_env`); keys go over the link ([`worker_keys`]).
pub(super) fn worker_env(env: &HashMap<String, String>) -> Vec<(String, String)> {
    ipc::worker_env::PLAIN
        .iter()
        .filter_map(|k| env.get(*k).map(|v| ((*k).to_owned(), v.clone())))
        .collect()
}

/// The keys `agent`'s worker starts with: those of its model and its fallbacks (every
/// configured provider's when a `before_model_resolve` hook may pick any of them) and its
/// skills'. A run on another provider brings its key along ([`run_keys`]).
pub(super) fn worker_keys(agent: &AgentConfig, env: &HashMap<String, String>) -> Secrets {
    let picks_any = agent
        .hooks
        .iter()
        .any(|h| h.event == ipc::control::HookEvent::BeforeModelResolve);
    let models = agent.model.iter().chain(&agent.fallbacks);
    let mut names: Vec<&str> = if picks_any {
        models
            .chain(&agent.providers)
            .filter_map(key_name)
            .collect()
    } else {
        models.filter_map(key_name).collect()
    };
    // The keys of the skills it may be offered (`[skills.entries.<name>] api_key_env`,
    // R-B6): not a disabled one's, not one its `skills` filter leaves out.
    names.extend(
        agent
            .skills
            .iter()
            .filter(|s| {
                s.enabled
                    && agent
                        .skill_filter
                        .as_ref()
                        .is_none_or(|f| f.contains(&s.name))
            })
            .filter_map(|s| s.api_key_env.as_deref()),
    );
    secrets(names, env)
}

/// The key a run needs that its worker was not given (its model is on another provider,
/// by a per-run or per-session override).
pub(super) fn run_keys(
    agent: &AgentConfig,
    run: &ipc::control::SubmitRun,
    given: &std::collections::BTreeSet<String>,
    env: &HashMap<String, String>,
) -> Option<Secrets> {
    let provider = &run.model.as_ref()?.provider;
    let name = agent
        .providers
        .iter()
        .find(|p| &p.provider == provider)
        .and_then(key_name)?;
    let keys = secrets([name].into_iter().filter(|n| !given.contains(*n)), env);
    (!keys.is_empty()).then_some(keys)
}

fn key_name(m: &crate::config::ResolvedModel) -> Option<&str> {
    m.api_key_env.as_deref()
}

fn secrets<'a>(names: impl IntoIterator<Item = &'a str>, env: &HashMap<String, String>) -> Secrets {
    Secrets(
        names
            .into_iter()
            .filter_map(|k| env.get(k).map(|v| (k.to_owned(), v.clone())))
            .collect(),
    )
}

pub(super) fn failed_message(agent_id: &str, reason: &str) -> String {
    format!(
        "agent {agent_id:?} is marked failed after repeated worker crashes ({reason}); retry after an operator runs `loopgate worker restart {agent_id}`"
    )
}

/// The refusal for runs of a failed agent (used before acceptance too).
pub fn failed_agent_message(agent_id: &str, reason: &str) -> String {
    failed_message(agent_id, reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_with_jitter_and_caps() {
        let i = Duration::from_millis(100);
        let m = Duration::from_secs(5);
        for seed in 0..50 {
            let d0 = backoff(i, m, 0, seed);
            assert!(
                d0 >= Duration::from_millis(75) && d0 <= Duration::from_millis(125),
                "{d0:?}"
            );
            let d3 = backoff(i, m, 3, seed);
            assert!(
                d3 >= Duration::from_millis(600) && d3 <= Duration::from_millis(1000),
                "{d3:?}"
            );
            let d20 = backoff(i, m, 20, seed);
            assert!(d20 <= m.mul_f64(1.25), "{d20:?}");
        }
        let spread: std::collections::HashSet<_> = (0..20).map(|s| backoff(i, m, 2, s)).collect();
        assert!(spread.len() > 5, "jitter varies");
    }
}
