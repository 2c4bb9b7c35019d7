//! One worker process: spawn, handshake, the link's reader and writer, and its exit.
//!
//! [`spawn`] starts a task that binds a private local socket (`<state>/run/`), spawns
//! `loopgate-worker` pointed at it with a one-time token, accepts exactly one connection, runs
//! the version handshake (answering with the agent's resolved [`AgentSpec`]) and reports
//! [`LinkEvent::Ready`] to the control actor. From then on it relays frames: run events are
//! projected for clients (the cumulative assistant text is kept here, per run) and published
//! through the link's [`RunFence`], other messages go to the control actor. A run's end is
//! not decided here: its worker's terminal events are held, and its `Finished` goes to the
//! control core with what clients saw of it ([`Seen`]); the core decides what clients are
//! told, and ends a run it stops itself through the same fence. When the connection ends it
//! waits for the child's exit status and reports [`LinkEvent::Exited`] with what it saw of the
//! runs it never saw finish.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use ipc::control::{ControlToWorker, EventBody, Phase, RunStatusPhase, WorkerToControl};
use ipc::frame::Codec;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio_util::codec::{FramedRead, FramedWrite};

use crate::config::AgentConfig;
use crate::events::{Deferred, EventHub};
use crate::link_order::SessionGates;
use crate::projection::RunRef;
use crate::run_end::Seen;

mod fence;
mod finished;
mod start;
pub use fence::{RunFence, Told};
mod stderr;
mod to_clients;
use start::{start, LastError, Started};
#[cfg(test)]
use to_clients::project;
use to_clients::{count, flush_due, publish};

/// First size of a link's read and write buffers and of its stderr reader.
const LINK_BUFFER: usize = 1024;
/// Frames queued towards one worker before `submit` reports it full.
pub const LINK_QUEUE: usize = 4096;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// How to start a worker.
#[derive(Clone)]
pub struct SpawnSpec {
    pub agent: AgentConfig,
    pub generation: u64,
    pub worker_bin: PathBuf,
    pub run_dir: PathBuf,
    /// Environment passed to the worker (an allow-list of plain variables; everything else
    /// is cleared).
    pub env: Vec<(String, String)>,
    /// The provider keys the worker is given in its `Welcome` (never in its environment).
    pub secrets: ipc::control::Secrets,
    pub metrics: crate::metrics::Metrics,
    /// Cluster mode: the agent's journal, which the worker's database is a cache of.
    pub journal: Option<std::sync::Arc<dyn Journal>>,
}

/// Cluster mode's journal, as a worker's link needs it (cluster mode implements it): the
/// records a starting worker lacks, and each transaction recorded before it commits.
pub trait Journal: Send + Sync {
    /// Sends `agent`'s records after `after` to its worker on `to` (`JournalReplay`).
    fn sync<'a>(
        &'a self,
        agent: &'a str,
        after: u64,
        to: &'a mpsc::Sender<ControlToWorker>,
    ) -> futures_util::future::BoxFuture<'a, ()>;

    /// Records one transaction of `agent`'s worker after record `after`.
    fn write<'a>(
        &'a self,
        agent: &'a str,
        after: u64,
        changes: &'a str,
    ) -> futures_util::future::BoxFuture<'a, ipc::control::JournalAck>;
}

/// Where the control actor finds the journal for the workers it starts: empty until the
/// gateway joins its cluster (and for good on a single host).
pub type JournalCell = std::sync::Arc<std::sync::OnceLock<std::sync::Arc<dyn Journal>>>;

/// What a link reports to the control actor.
#[derive(Debug)]
pub enum LinkEvent {
    Ready {
        agent_id: String,
        generation: u64,
        pid: u32,
        link: LinkHandle,
    },
    SpawnFailed {
        agent_id: String,
        generation: u64,
        error: String,
    },
    /// The worker ended a run (its `Finished`): what clients saw of it (`None`: it never
    /// started on the wire), and its session's gate, which holds the session's later frames
    /// until the control core has published the run's terminal or dropped the gate.
    Finished {
        agent_id: String,
        generation: u64,
        terminal: Box<ipc::control::RunTerminal>,
        seen: Option<Seen>,
        gate: Option<tokio::sync::oneshot::Sender<()>>,
    },
    /// Any other message of the worker's for the control actor.
    Message {
        agent_id: String,
        generation: u64,
        msg: Box<WorkerToControl>,
    },
    Exited {
        agent_id: String,
        generation: u64,
        /// Human-readable cause, e.g. `killed by signal 9 (SIGKILL)`.
        cause: String,
        /// It exited `ipc::control::EXIT_JOURNAL_STOPPED` (cluster mode): not a crash.
        journal_stopped: bool,
        /// What clients saw of each run the link saw start and never saw finish.
        seen: HashMap<String, Seen>,
        /// Frames accepted by [`LinkHandle`] that were never written to the worker, in
        /// order: they carry over to the next worker instead of failing.
        unsent: Vec<ControlToWorker>,
    },
}

/// Sends frames to one worker; its runs' fence, shared with the link's relay.
#[derive(Clone, Debug)]
pub struct LinkHandle {
    tx: mpsc::Sender<ControlToWorker>,
    fence: Arc<RunFence>,
}

impl LinkHandle {
    /// How far clients were told of the link's runs, and the way to end one.
    pub fn fence(&self) -> &Arc<RunFence> {
        &self.fence
    }

    /// Queues a frame; fails when the link is full or gone (never waits), giving it back.
    pub fn send(&self, msg: ControlToWorker) -> Result<(), Box<ControlToWorker>> {
        self.try_send(msg).map_err(|e| match e {
            LinkSendError::Full(m) | LinkSendError::Closed(m) => m,
        })
    }

    /// Like [`LinkHandle::send`], saying whether the link was full or already closed (the
    /// worker is exiting and its exit has not been seen yet).
    pub fn try_send(&self, msg: ControlToWorker) -> Result<(), LinkSendError> {
        self.tx.try_send(msg).map_err(|e| match e {
            mpsc::error::TrySendError::Full(m) => LinkSendError::Full(Box::new(m)),
            mpsc::error::TrySendError::Closed(m) => LinkSendError::Closed(Box::new(m)),
        })
    }
}

/// Why a frame could not be queued on a link.
pub enum LinkSendError {
    Full(Box<ControlToWorker>),
    Closed(Box<ControlToWorker>),
}

/// Starts the worker for `spec` in the background; everything it learns arrives as
/// [`LinkEvent`]s on `events`.
pub fn spawn(spec: SpawnSpec, hub: EventHub, events: mpsc::Sender<LinkEvent>) {
    tokio::spawn(async move {
        let agent_id = spec.agent.id.as_str().to_owned();
        let generation = spec.generation;
        match start(&spec).await {
            Err(error) => {
                let _ = events
                    .send(LinkEvent::SpawnFailed {
                        agent_id,
                        generation,
                        error: error.to_string(),
                    })
                    .await;
            }
            Ok(started) => {
                let metrics = spec.metrics.clone();
                let journal = spec.journal.clone();
                relay(started, agent_id, generation, hub, events, metrics, journal).await
            }
        }
    });
}

/// Per-run streaming state kept by the link.
struct Streaming {
    session_key: String,
    /// The reply text told so far, per message and for the run.
    text: crate::projection::ReplyText,
    /// The run's reasoning told so far (only runs that asked to show it send any).
    thinking: String,
    /// Live text merged and not sent yet (R-D2).
    pace: crate::live_text::RunPace,
    /// When the run started, as its worker said.
    started_at: Option<u64>,
    /// The worker's terminal events, held for the control core.
    terminal: Vec<Deferred>,
    /// Where the run's reply was recorded (`{id, seq, runId}`), for its chat `final`.
    reply_place: Option<ipc::gateway::MessagePlace>,
    /// Steered into another run's turn: its clients were told so, and hear nothing more.
    carried: bool,
}

impl Streaming {
    fn new(session_key: String, started_at: Option<u64>) -> Self {
        Self {
            session_key,
            text: Default::default(),
            thinking: String::new(),
            pace: Default::default(),
            started_at,
            terminal: Vec::new(),
            reply_place: None,
            carried: false,
        }
    }

    /// What clients saw of the run (`told`: the fence's account), for the control core.
    fn seen(self, told: Option<Told>) -> Seen {
        let told = told.unwrap_or_default();
        Seen {
            session_key: self.session_key,
            last_seq: told.last_seq,
            started_at: self.started_at,
            terminal: self.terminal,
            taken_in: self.carried,
        }
    }
}

async fn relay(
    started: Started,
    agent_id: String,
    generation: u64,
    hub: EventHub,
    events: mpsc::Sender<LinkEvent>,
    metrics: crate::metrics::Metrics,
    journal: Option<std::sync::Arc<dyn Journal>>,
) {
    let Started {
        mut child,
        pid,
        last_error,
        stderr_task,
        mut reader,
        writer,
    } = started;
    let (tx, rx) = mpsc::channel::<ControlToWorker>(LINK_QUEUE);
    let fence = Arc::new(RunFence::default());
    let journal = journal.map(|c| JournalPort {
        cluster: c,
        answers: tx.clone(),
    });
    let ready = LinkEvent::Ready {
        agent_id: agent_id.clone(),
        generation,
        pid,
        link: LinkHandle {
            tx,
            fence: fence.clone(),
        },
    };
    if events.send(ready).await.is_err() {
        return;
    }
    let (stop_writer, stopped) = tokio::sync::oneshot::channel::<()>();
    let write_task = tokio::spawn(write_frames(rx, writer, stopped));
    let mut relay = Relay {
        metrics,
        hub,
        agent_id: agent_id.clone(),
        generation,
        events: events.clone(),
        runs: HashMap::new(),
        fence,
        gates: SessionGates::new(),
        closing: false,
        journal,
    };
    let exit = relay.read_frames(&mut reader, &mut child, pid).await;
    // What still waits for a gate goes on now, in order and ungated: its worker is gone, and
    // a held `Finished` must not close a new gate that nothing would open.
    relay.closing = true;
    for msg in relay.gates.drain() {
        relay.handle(msg).await;
    }
    // What clients were still to get of the live text goes now.
    let end = std::time::Instant::now() + crate::live_text::LIVE_TEXT_PACE;
    flush_due(
        &relay.hub,
        &relay.fence,
        &relay.agent_id,
        &mut relay.runs,
        end,
    );
    let Relay { runs, fence, .. } = relay;
    let _ = stop_writer.send(());
    let unsent = write_task.await.unwrap_or_default();
    let status = match exit {
        Some(s) => s,
        None => reap(&mut child, &agent_id, pid).await,
    };
    let journal_stopped = status
        .as_ref()
        .is_ok_and(|s| s.code() == Some(i32::from(ipc::control::EXIT_JOURNAL_STOPPED)));
    let cause = exit_cause(status, stderr_task, &last_error).await;
    let seen = runs
        .into_iter()
        .map(|(id, st)| {
            let told = fence.told(&id);
            (id, st.seen(told))
        })
        .collect();
    let _ = events
        .send(LinkEvent::Exited {
            agent_id,
            generation,
            cause,
            journal_stopped,
            seen,
            unsent,
        })
        .await;
}

/// Writes frames to the worker until the link is stopped or breaks; returns the frames
/// accepted by the [`LinkHandle`] and never written, in order.
async fn write_frames(
    mut rx: mpsc::Receiver<ControlToWorker>,
    mut writer: FramedWrite<
        tokio::io::WriteHalf<tokio::net::UnixStream>,
        Codec<WorkerToControl, ControlToWorker>,
    >,
    mut stopped: tokio::sync::oneshot::Receiver<()>,
) -> Vec<ControlToWorker> {
    loop {
        let msg = tokio::select! {
            biased;
            _ = &mut stopped => break,
            m = rx.recv() => match m {
                Some(m) => m,
                None => break,
            },
        };
        // A frame cut off mid-write may or may not have reached the worker: it counts as
        // sent (its run fails with the worker), never as unsent.
        let sent = tokio::select! {
            biased;
            _ = &mut stopped => break,
            r = writer.send(msg) => r,
        };
        match sent {
            Ok(()) => {}
            // Nothing was written: the link stays usable (admission caps keep runs far below
            // the frame cap, so this is a bug, not a client's doing).
            Err(e @ ipc::Error::FrameTooLarge { .. }) => {
                tracing::error!(error = %e, "A message to the worker was too large for the link; dropped it.");
            }
            Err(e) => {
                tracing::warn!(error = %e, "Writing to worker failed.");
                break;
            }
        }
    }
    rx.close();
    let mut unsent = Vec::new();
    while let Ok(m) = rx.try_recv() {
        unsent.push(m);
    }
    unsent
}

/// The exit status of a worker that closed its link, killing it if it does not exit.
async fn reap(child: &mut Child, agent_id: &str, pid: u32) -> std::io::Result<ExitStatus> {
    match tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
        Ok(s) => s,
        Err(_) => {
            tracing::warn!(
                agent = agent_id,
                pid,
                "Worker closed its link but did not exit; killing it."
            );
            let _ = child.kill().await;
            child.wait().await
        }
    }
}

/// Why the worker exited: its status, and for a failure its last ERROR line (read to the
/// end of its stderr first).
async fn exit_cause(
    status: std::io::Result<ExitStatus>,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
    last_error: &LastError,
) -> String {
    let failed = status.as_ref().is_ok_and(|s| !s.success());
    if failed {
        if let Some(t) = stderr_task {
            let _ = tokio::time::timeout(Duration::from_secs(1), t).await;
        }
    }
    let mut cause = match status {
        Ok(s) => describe_exit(s),
        Err(e) => format!("unknown exit ({e})"),
    };
    if failed {
        if let Some(why) = last_error.lock().ok().and_then(|mut l| l.take()) {
            cause = format!("{cause}: {why}");
        }
    }
    cause
}

/// The link's reading side: per-run streaming state and the per-session order.
struct Relay {
    hub: EventHub,
    agent_id: String,
    generation: u64,
    events: mpsc::Sender<LinkEvent>,
    metrics: crate::metrics::Metrics,
    runs: HashMap<String, Streaming>,
    /// Where the runs' events are published, fenced against the ends the core decides.
    fence: Arc<RunFence>,
    gates: SessionGates<WorkerToControl>,
    /// The link is ending: frames are handed on without gating.
    closing: bool,
    /// Cluster mode: where the worker's journal frames go.
    journal: Option<JournalPort>,
}

/// Cluster mode: the worker's journal requests, carried out and answered on its link.
struct JournalPort {
    cluster: std::sync::Arc<dyn Journal>,
    answers: mpsc::Sender<ControlToWorker>,
}

impl Relay {
    /// Reads the worker's frames until its link ends, holding each session's in order (see
    /// `link_order`); returns the worker's exit status if it was seen meanwhile.
    async fn read_frames(
        &mut self,
        reader: &mut FramedRead<
            tokio::io::ReadHalf<tokio::net::UnixStream>,
            Codec<WorkerToControl, ControlToWorker>,
        >,
        child: &mut Child,
        pid: u32,
    ) -> Option<std::io::Result<ExitStatus>> {
        let mut exit = None;
        loop {
            let due = self.runs.values().filter_map(|st| st.pace.due()).min();
            tokio::select! {
                _ = sleep_until(due), if due.is_some() => {
                    flush_due(&self.hub, &self.fence, &self.agent_id, &mut self.runs, std::time::Instant::now());
                }
                Some((_, held)) = self.gates.next_open(), if self.gates.waiting() => {
                    for msg in held {
                        if !self.handle(msg).await {
                            return exit;
                        }
                    }
                }
                frame = reader.next() => match frame {
                    Some(Ok(msg)) => {
                        if !self.handle(msg).await {
                            return exit;
                        }
                    }
                    Some(Err(e @ (ipc::Error::Io(_) | ipc::Error::Truncated { .. }))) => {
                        // The worker died mid-write; its exit status tells why.
                        tracing::debug!(agent = self.agent_id.as_str(), pid, error = %e, "Worker link broke.");
                        return exit;
                    }
                    Some(Err(e)) => {
                        tracing::warn!(agent = self.agent_id.as_str(), pid, error = %e, "Bad frame from worker; closing its link.");
                        return exit;
                    }
                    None => return exit,
                },
                status = child.wait(), if exit.is_none() => {
                    exit = Some(status);
                    // Keep reading what the worker wrote before it died.
                }
            }
        }
    }

    /// Cluster mode: the worker asks for the journal records its database lacks.
    fn journal_sync(&self, after: u64) {
        let Some(port) = &self.journal else {
            tracing::warn!(
                agent = self.agent_id.as_str(),
                "A worker asked for a journal sync outside cluster mode."
            );
            return;
        };
        let (cluster, to, agent) = (
            port.cluster.clone(),
            port.answers.clone(),
            self.agent_id.clone(),
        );
        tokio::spawn(async move { cluster.sync(&agent, after, &to).await });
    }

    /// Cluster mode: the worker records a transaction before committing it (its writer
    /// waits for the answer, so a worker's writes arrive one at a time).
    fn journal_write(&self, id: u64, after: u64, changes: String) {
        let Some(port) = &self.journal else {
            tracing::warn!(
                agent = self.agent_id.as_str(),
                "A worker sent a journal write outside cluster mode."
            );
            return;
        };
        let (cluster, to, agent, metrics) = (
            port.cluster.clone(),
            port.answers.clone(),
            self.agent_id.clone(),
            self.metrics.clone(),
        );
        tokio::spawn(async move {
            let ack = cluster.write(&agent, after, &changes).await;
            if let ipc::control::JournalAck::Refused { reason } = &ack {
                metrics.cluster_refused(&agent);
                tracing::warn!(
                    agent = agent.as_str(),
                    reason = reason.as_str(),
                    "The agent's journal refused a write of its worker here."
                );
            }
            let _ = to.send(ControlToWorker::Journaled { id, ack }).await;
        });
    }

    /// The session a frame belongs to, if it belongs to one.
    fn session_of(&self, msg: &WorkerToControl) -> Option<(String, String)> {
        let run_id = match msg {
            WorkerToControl::Event(ev) => {
                if let EventBody::Lifecycle(l) = &ev.body {
                    if l.phase == Phase::Start {
                        let key = l.session_key.clone().unwrap_or_default();
                        return Some((key, ev.run_id.clone()));
                    }
                }
                &ev.run_id
            }
            WorkerToControl::Finished(t) => {
                // A collected or summarized run never started on the wire: the worker names
                // its session (its carrier's), so it waits behind the carrier's terminal.
                if let Some(key) = t.session_key.as_ref().filter(|_| t.carried_by.is_some()) {
                    return Some((key.clone(), t.run_id.clone()));
                }
                &t.run_id
            }
            _ => return None,
        };
        let session = match self.runs.get(run_id) {
            Some(st) => st.session_key.clone(),
            None => self.gates.session_of_held_run(run_id)?.to_owned(),
        };
        Some((session, run_id.clone()))
    }

    /// Publishes or forwards one frame, unless its session waits for an earlier run's
    /// terminal events (then it is held). `false` once the control actor is gone.
    async fn handle(&mut self, msg: WorkerToControl) -> bool {
        let Some(msg) = self.journal_request(msg) else {
            return true;
        };
        let session = self.session_of(&msg).filter(|_| !self.closing);
        let msg = match &session {
            Some((key, run)) => match self.gates.admit(key, Some(run), msg) {
                Some(msg) => msg,
                None => return true,
            },
            None => msg,
        };
        let ev = match msg {
            WorkerToControl::Event(ev) => {
                self.run_event(ev, session.as_ref());
                return true;
            }
            WorkerToControl::Finished(t) => self.finished(t, session.as_ref()),
            msg => LinkEvent::Message {
                agent_id: self.agent_id.clone(),
                generation: self.generation,
                msg: Box::new(msg),
            },
        };
        self.events.send(ev).await.is_ok()
    }

    /// Cluster mode: carries out a journal request of the worker here (it never reaches
    /// the control actor); any other frame is given back.
    fn journal_request(&self, msg: WorkerToControl) -> Option<WorkerToControl> {
        match msg {
            WorkerToControl::JournalSync { after } => {
                self.journal_sync(after);
                None
            }
            WorkerToControl::Journal { id, after, changes } => {
                self.journal_write(id, after, changes);
                None
            }
            other => Some(other),
        }
    }

    /// A run event: counted, projected and published to clients; from the run's terminal
    /// event on, `session`'s next run waits for it.
    fn run_event(&mut self, ev: ipc::control::RunEvent, session: Option<&(String, String)>) {
        count(&self.metrics, &self.agent_id, &self.runs, &ev);
        let run_id = ev.run_id.clone();
        let terminal = publish(&self.hub, &self.fence, &self.agent_id, &mut self.runs, ev);
        if let Some((key, _)) = session.filter(|_| terminal) {
            self.gates.close(key, &run_id);
        }
    }
}

/// Sleeps until `at` (never, if `None`).
async fn sleep_until(at: Option<std::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at.into()).await,
        None => std::future::pending().await,
    }
}

/// `exited with status 3`, `killed by signal 9 (SIGKILL)`.
pub fn describe_exit(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        format!("exited with status {code}")
    } else if let Some(sig) = status.signal() {
        let name = nix::sys::signal::Signal::try_from(sig)
            .map(|s| s.as_str().to_owned())
            .unwrap_or_else(|_| "unknown".into());
        let core = if status.core_dumped() {
            ", core dumped"
        } else {
            ""
        };
        format!("killed by signal {sig} ({name}{core})")
    } else {
        "exited".into()
    }
}

#[cfg(test)]
impl LinkHandle {
    /// A link whose frames go to the returned receiver (no worker behind it).
    pub fn for_tests(cap: usize) -> (Self, mpsc::Receiver<ControlToWorker>) {
        let (tx, rx) = mpsc::channel(cap);
        let fence = Arc::default();
        (Self { tx, fence }, rx)
    }
}

#[cfg(test)]
mod tests;
