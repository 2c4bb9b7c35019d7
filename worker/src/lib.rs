//! loopgate-worker: runs one agent's loop in its own process.
//!
//! Layout:
//! - [`link`]: the control link to the supervisor (handshake, frames).
//! - `run`: the worker's start (the writer, plain or journaled; the context every run
//!   shares) and stop; `serving` (`Worker`, `main_loop`): session lanes (runs of one session
//!   key execute one at a time, R-B2, with their queue modes in [`lanes`], R-B3), a global
//!   cap on concurrent runs, cancel, drain.
//! - [`agent`]: the turn (sans-IO core, driver, prompt rendering).
//! - [`llm`]: model providers.
//! - [`store`]: the agent database (one writer thread, one read-only reader thread).
//! - [`tools`]: the built-in tools (definitions from `ipc::tools`, validation, confinement,
//!   the exec policy, capped results).
//! - [`hooks`]: plugin hooks as external commands (R-H2); `frontmatter` reads `SKILL.md` and
//!   `HOOK.md` headers.
//! - [`outbox`]: the one ordered path of everything the worker tells the supervisor.
//! - `session_ops`: history, reset, delete, inject, compact and lanes, for the supervisor.
//! - [`diagnostics`] and `stuck`: stuck-session detection and recovery (R-I1..R-I3).
//!
//! Architecture Invariants: the worker never opens the gateway's sockets or database; it
//! talks only over its control link. Only `store::writer` writes the agent database.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![forbid(unsafe_code)]

pub mod agent;
pub mod diagnostics;
mod frontmatter;
pub mod hooks;
pub mod lanes;
pub mod link;
pub mod llm;
pub mod outbox;
mod serving;
mod session_ops;
pub mod store;
mod stuck;
pub mod tools;

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use ipc::approval::ApprovalDecision;
use ipc::control::{
    AgentSpec, ControlToWorker, ModelSpec, RunStatus, RunStopReason, RunTerminal, SessionReply,
    StopReason, SubmitRun, WorkerToControl,
};
use ipc::{ErrorCode, RpcError};
use tokio::sync::{mpsc, watch};

use crate::lanes::Lane;
use crate::llm::client::LlmClient;
use crate::llm::LlmError;
use crate::store::{FinishRun, Reader, Writer};
use serving::{main_loop, Worker};

/// Ended runs waiting for the main loop.
const DONE_QUEUE: usize = 4096;
/// Approval decisions queued for one run.
const DECISION_QUEUE: usize = 8;
/// `allow-always` patterns a worker takes on while it runs.
const MAX_ALLOWED_SINCE: usize = 1000;
/// How long in-flight runs get to persist their outcome when the supervisor disappears.
const ORPHAN_GRACE: Duration = Duration::from_millis(700);

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// The answer to session op `op_id`.
fn session_done(op_id: u64, result: Result<SessionReply, RpcError>) -> WorkerToControl {
    WorkerToControl::SessionDone {
        op_id,
        reply: result.unwrap_or_else(|error| SessionReply::Failed { error }),
    }
}

/// Model name recorded on a message an operator injected (no model wrote it).
pub const INJECTED_MODEL: &str = "gateway-injected";

/// A storage failure as a session op error (a lost claim means a run holds the session).
fn store_error(e: store::StoreError) -> RpcError {
    match e {
        store::StoreError::Fenced { .. } => RpcError::new(
            ErrorCode::SessionBusy,
            "session has an active run; abort it first",
        ),
        other => RpcError::new(ErrorCode::Storage, other.to_string()),
    }
}

/// What every turn of this worker shares.
pub struct Ctx {
    pub spec: AgentSpec,
    pub writer: Writer,
    pub reader: Reader,
    pub llm: Result<LlmClient, LlmError>,
    /// Clients of other providers, made on first use (`before_model_resolve` overrides).
    pub other_llms: std::sync::Mutex<HashMap<String, LlmClient>>,
    /// The provider keys the supervisor gave this worker, by variable name: in `Welcome`,
    /// and with a run on another provider since (`ControlToWorker::Keys`).
    pub keys: std::sync::RwLock<HashMap<String, String>>,
    /// What `exec` commands get instead: [`tools::exec_environment`] of `env`.
    pub exec_env: Arc<Vec<(String, String)>>,
    /// The agent's disk budget ([`tools::budget`]).
    pub disk: Arc<tools::budget::DiskBudget>,
    /// What `web_fetch` may reach (the spec's, shared by every run).
    pub web: Arc<ipc::web::WebFetchPolicy>,
    /// The memory tools' index (`memory.sqlite` beside the agent's database).
    pub memory: Arc<tools::memory::MemoryIndex>,
    /// Background `exec` sessions (their ledger: `exec-sessions.json` beside the database).
    pub background: Arc<tools::background::Registry>,
    /// Everything the worker tells the supervisor, in one order ([`outbox`]).
    pub out: outbox::Outbox,
    pub hooks: hooks::Hooks,
    pub skills: agent::skills::SkillsCache,
    /// Allowlist patterns an operator added with `allow-always` since the worker started
    /// (the supervisor keeps them; the next worker gets them in its spec).
    pub allowed_since: std::sync::RwLock<Vec<String>>,
    /// Model requests by (provider, API, outcome), for `/metrics`.
    pub model_requests: std::sync::Mutex<HashMap<(String, &'static str, &'static str), u64>>,
}

/// Options from the command line and environment (read once in `main`).
pub struct Options {
    pub agent_id: String,
    pub connect: PathBuf,
    /// The plain variables of the worker's environment (`ipc::worker_env::PLAIN`).
    pub env: HashMap<String, String>,
}

/// Runs the worker until it is drained or its supervisor goes away.
pub async fn run(opts: Options) -> anyhow::Result<()> {
    let (spec, mut reader, mut writer) = link::connect(&opts.connect, &opts.agent_id).await?;
    let db_path = PathBuf::from(&spec.db_path);
    // Cluster mode: the database catches up with the agent's journal before anything else.
    let synced = match spec.journaled {
        true => Some(store::journal::sync(&db_path, &mut reader, &mut writer).await?),
        false => None,
    };
    let (out_tx, out_rx) = outbox::new(outbox::STREAM_CAP);
    let write_task = tokio::spawn(outbox::write_out(out_rx, writer));
    // Told when the journal stops taking this worker's writes: the worker stops.
    let journal_stopped = Arc::new(tokio::sync::Notify::new());
    let (mut frames, db_writer) =
        open_writer(&db_path, reader, synced, &out_tx, &journal_stopped).await?;
    let db_reader = Reader::open(&db_path)?;
    let ctx = Arc::new(Ctx::new(spec, db_writer, db_reader, &opts, out_tx.clone()));
    let stopped_by_journal = main_loop(ctx, &mut frames, &journal_stopped).await;
    drop(out_tx);
    let _ = tokio::time::timeout(Duration::from_secs(2), write_task).await;
    checkpoint_at_exit(db_path).await;
    if stopped_by_journal {
        return Err(store::journal::JournalStopped(
            "the agent's journal stopped taking this worker's writes".into(),
        )
        .into());
    }
    tracing::info!("Worker stopped.");
    Ok(())
}

/// Opens the database's writer (ending runs a crash left open) and the supervisor's frames;
/// in cluster mode (`synced`) every write is journaled first and the frames the sync read
/// early come first.
async fn open_writer(
    db_path: &Path,
    reader: link::LinkReader,
    synced: Option<store::journal::Synced>,
    out: &outbox::Outbox,
    journal_stopped: &Arc<tokio::sync::Notify>,
) -> anyhow::Result<(link::Frames, Writer)> {
    let (frames, db_writer, recovered) = match synced {
        None => {
            let (w, n) = Writer::open(db_path, now_ms())?;
            (link::frames(reader), w, n)
        }
        Some(synced) => {
            let pending = store::journal::Pending::default();
            let frames = store::journal::frames(reader, synced.early, pending.clone());
            let journal = store::journal::Link::new(
                out.clone(),
                pending,
                synced.last,
                journal_stopped.clone(),
            );
            let (w, n) = Writer::open_journaled(db_path, now_ms(), journal).await?;
            (frames, w, n)
        }
    };
    if recovered > 0 {
        tracing::warn!(
            runs = recovered,
            "Ended runs left open by a crash as errors."
        );
    }
    Ok((frames, db_writer))
}

impl Ctx {
    fn new(
        spec: AgentSpec,
        writer: Writer,
        reader: Reader,
        opts: &Options,
        out: outbox::Outbox,
    ) -> Ctx {
        let keys: HashMap<String, String> = spec.secrets.0.clone().into_iter().collect();
        let llm = build_llm(&spec.model, &keys);
        // The supervisor labels relayed lines with agent and pid.
        tracing::info!("Worker started.");
        let disk = Arc::new(tools::budget::DiskBudget::new(spec.disk, &spec.workspace));
        let memory = Arc::new(tools::memory::MemoryIndex::new(memory_db(&spec.db_path)));
        let web = Arc::new(spec.web_fetch.clone());
        let background = Arc::new(tools::background::Registry::new(
            Path::new(&spec.db_path).with_file_name("exec-sessions.json"),
        ));
        Ctx {
            hooks: hooks::Hooks::new(spec.hooks.clone()),
            skills: agent::skills::SkillsCache::new(agent::skills::Configured::new(
                &spec.skills,
                spec.skill_filter.clone(),
                &keys,
            )),
            spec,
            writer,
            reader,
            llm,
            other_llms: Default::default(),
            exec_env: Arc::new(tools::exec_environment(&opts.env)),
            disk,
            web,
            memory,
            background,
            keys: std::sync::RwLock::new(keys),
            out,
            allowed_since: Default::default(),
            model_requests: Default::default(),
        }
    }
}

/// `memory.sqlite` beside the agent's database.
fn memory_db(db_path: &str) -> PathBuf {
    Path::new(db_path).with_file_name("memory.sqlite")
}

/// A clean stop leaves the whole database in its file, the WAL empty.
async fn checkpoint_at_exit(db_path: PathBuf) {
    let done = tokio::task::spawn_blocking(move || dbwriter::checkpoint(&db_path)).await;
    match done {
        Ok(Ok(true)) => {}
        Ok(Ok(false)) => tracing::warn!(
            "The final checkpoint could not finish (a reader held it); the WAL keeps the rest."
        ),
        Ok(Err(e)) => {
            tracing::warn!(error = %e, "The final checkpoint failed; the WAL keeps the rest.")
        }
        Err(e) => tracing::warn!(error = %e, "The final checkpoint did not run."),
    }
}

fn build_llm(spec: &ModelSpec, env: &HashMap<String, String>) -> Result<LlmClient, LlmError> {
    let key = match &spec.api_key_env {
        Some(var) => match env.get(var).filter(|v| !v.is_empty()) {
            Some(v) => Some(v.clone()),
            // A configuration fault: retrying cannot help.
            None => {
                return Err(LlmError::Config(format!(
                    "the API key variable {var} (models.providers.{}.api_key_env) is not set in the gateway's environment",
                    spec.provider
                )))
            }
        },
        None => None,
    };
    LlmClient::new(spec.clone(), key)
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

pub(crate) struct Done {
    session_key: String,
    terminal: RunTerminal,
    /// Steered runs the turn took.
    steered: Vec<String>,
}

impl Ctx {
    /// Counts one model request's outcome (`ok`, `aborted`, or its failure class).
    pub fn model_request(&self, provider: &str, outcome: &'static str) {
        let api = if provider == self.spec.model.provider {
            self.spec.model.api
        } else {
            self.spec
                .providers
                .iter()
                .find(|p| p.provider == provider)
                .map_or(ipc::control::ProviderApi::Unknown, |p| p.api)
        };
        let mut m = self
            .model_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *m.entry((provider.to_owned(), api.as_str(), outcome))
            .or_default() += 1;
    }

    /// Everything this worker counted since it started.
    pub fn counters(&self) -> ipc::metrics::WorkerCounters {
        let m = self
            .model_requests
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let c = self.writer.commits.snapshot();
        ipc::metrics::WorkerCounters {
            model_requests: m
                .iter()
                .map(
                    |((provider, api, outcome), count)| ipc::metrics::ModelRequests {
                        provider: provider.clone(),
                        api: (*api).to_owned(),
                        outcome: (*outcome).to_owned(),
                        count: *count,
                    },
                )
                .collect(),
            commits: ipc::metrics::Histogram {
                bounds: dbwriter::COMMIT_BUCKETS.to_vec(),
                cumulative: c.cumulative,
                sum: c.sum_seconds,
                count: c.count,
            },
        }
    }

    /// The agent's exec policy with the patterns operators allowed since the start.
    pub fn exec_policy(&self) -> ipc::control::ExecPolicy {
        let mut policy = self.spec.exec.clone();
        let added = self
            .allowed_since
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        policy.allowlist.extend(added.iter().cloned());
        policy
    }

    /// Hook context for a run (`run_id` empty for a session operation).
    /// The client for `provider` when a run picked another provider than the agent's.
    pub fn other_llm(&self, provider: &str) -> Result<LlmClient, LlmError> {
        let mut cache = self
            .other_llms
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(c) = cache.get(provider) {
            return Ok(c.clone());
        }
        let spec = self
            .spec
            .providers
            .iter()
            .find(|p| p.provider == provider)
            .ok_or_else(|| {
                LlmError::Config(format!(
                    "provider {provider:?} (picked by a before_model_resolve hook) is not configured under [models.providers]"
                ))
            })?;
        let keys = self
            .keys
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let client = build_llm(spec, &keys)?;
        cache.insert(provider.to_owned(), client.clone());
        Ok(client)
    }

    pub fn hook_ctx(&self, session_key: &str, run_id: &str) -> hooks::HookCtx {
        hooks::HookCtx {
            agent_id: self.spec.agent_id.clone(),
            session_key: session_key.to_owned(),
            run_id: run_id.to_owned(),
            workspace: PathBuf::from(&self.spec.workspace),
            hooks_dir: self.spec.hooks_dir.as_ref().map(PathBuf::from),
        }
    }

    /// Runs the `event` observer hooks in the background, once per entry of `fields`, in
    /// order. `fields` is built only when such hooks are configured (off the turn's path
    /// otherwise).
    pub fn observe_later(
        self: &Arc<Self>,
        hook_ctx: &hooks::HookCtx,
        event: &'static str,
        fields: impl FnOnce() -> Vec<serde_json::Value>,
    ) {
        if !self.hooks.has(event) {
            return;
        }
        let (ctx, hook_ctx, all) = (self.clone(), hook_ctx.clone(), fields());
        tokio::spawn(async move {
            for f in all {
                ctx.hooks.observe(&hook_ctx, event, f).await;
            }
        });
    }
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
