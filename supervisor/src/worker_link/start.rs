//! Starting a worker: its private socket, the child process with its plain environment,
//! the child's own connection (its peer pid, no token) and the handshake, whose `Welcome`
//! carries the agent's spec and its provider keys.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use futures_util::{SinkExt, StreamExt};
use ipc::control::{
    AgentSpec, ControlToWorker, Hello, HelloReply, ModelSpec, Role, Supported, WorkerToControl,
};
use ipc::frame::{Codec, MAX_FRAME};
use tokio::net::{UnixListener, UnixStream};
use tokio::process::{Child, Command};
use tokio_util::codec::{FramedRead, FramedWrite};

use super::stderr::relay_stderr;
use super::{describe_exit, SpawnSpec, CONNECT_TIMEOUT, HELLO_TIMEOUT, LINK_BUFFER};
use crate::config::AgentConfig;

/// Why a worker did not start; the step that failed, said in the worker's last error.
#[derive(Debug, thiserror::Error)]
pub(super) enum StartError {
    #[error("agent {agent:?} has no model configured (set agents.defaults.model or agents.list.{agent}.model)")]
    NoModel { agent: String },
    #[error("cannot create {}: {why}", dir.display())]
    RunDir { dir: PathBuf, why: std::io::Error },
    #[error("cannot listen on {}: {why}", path.display())]
    Listen { path: PathBuf, why: std::io::Error },
    #[error("cannot start {}: {why}", bin.display())]
    Spawn { bin: PathBuf, why: std::io::Error },
    /// How it exited (or why its exit could not be read).
    #[error("worker exited before connecting: {0}")]
    ExitedEarly(String),
    #[error("accepting worker connection failed: {0}")]
    Accept(std::io::Error),
    #[error("worker did not connect within {CONNECT_TIMEOUT:?}")]
    NoConnection,
    #[error("bad worker handshake: {0}")]
    BadHello(ipc::Error),
    #[error("worker closed the link during the handshake")]
    ClosedInHandshake,
    #[error("worker sent no Hello within {HELLO_TIMEOUT:?}")]
    NoHello,
    #[error("worker handshake rejected: {0}")]
    Rejected(Rejection),
    #[error("cannot send Welcome: {0}")]
    Welcome(ipc::Error),
}

/// Why a worker's `Hello` is answered `Rejected` (the reason it is told).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Rejection {
    #[error(
        "no common protocol version (worker speaks {min}..={max}, supervisor {}..={})",
        ipc::version::MIN_PROTOCOL_VERSION,
        ipc::version::PROTOCOL_VERSION
    )]
    NoCommonVersion { min: u32, max: u32 },
    #[error("worker identity mismatch")]
    IdentityMismatch,
    #[error("unknown role")]
    UnknownRole,
}

fn agent_spec(
    agent: &AgentConfig,
    journaled: bool,
    secrets: ipc::control::Secrets,
) -> Result<AgentSpec, StartError> {
    let model = agent.model.as_ref().ok_or_else(|| StartError::NoModel {
        agent: agent.id.as_str().to_owned(),
    })?;
    let spec = |m: &crate::config::ResolvedModel| ModelSpec {
        provider: m.provider.clone(),
        api: m.api,
        base_url: m.base_url.clone(),
        api_key_env: m.api_key_env.clone(),
        model: m.model.clone(),
        request_timeout_ms: m.request_timeout_ms,
        idle_timeout_ms: m.idle_timeout_ms,
        temperature: m.temperature,
        context_window: m.context_window,
        retry_base_ms: m.retry_base_ms,
        retry_max_ms: m.retry_max_ms,
        max_output_tokens: m.max_output_tokens,
        image_models: m.image_models(),
    };
    Ok(AgentSpec {
        agent_id: agent.id.as_str().to_owned(),
        db_path: agent.db_path.display().to_string(),
        workspace: agent.workspace.display().to_string(),
        model: spec(model),
        providers: agent.providers.iter().map(spec).collect(),
        max_concurrent: agent.max_concurrent,
        bootstrap_max_chars: agent.bootstrap_max_chars,
        bootstrap_total_max_chars: agent.bootstrap_total_max_chars,
        base_prompt: agent.system_prompt.clone(),
        max_queued: 4096,
        exec: agent.exec.clone(),
        hooks: agent.hooks.clone(),
        tools_allow: agent.tools_allow.clone(),
        compaction: agent.compaction.clone(),
        diagnostics: agent.diagnostics,
        disk: agent.disk,
        hooks_dir: Some(agent.hooks_dir.display().to_string()),
        fallbacks: agent
            .fallbacks
            .iter()
            .map(|m| ipc::control::RunModel {
                provider: m.provider.clone(),
                model: m.model.clone(),
            })
            .collect(),
        journaled,
        secrets,
        skills: agent
            .skills
            .iter()
            .map(|s| ipc::control::SkillSettings {
                name: s.name.clone(),
                enabled: s.enabled,
                env: ipc::control::Secrets(s.env.clone()),
                api_key_env: s.api_key_env.clone(),
            })
            .collect(),
        skill_filter: agent.skill_filter.clone(),
        web_fetch: agent.web_fetch.clone(),
    })
}

/// The worker's last ERROR log line (why it exited, when it failed before its link could
/// say so: a database it cannot open, say).
pub(super) type LastError = std::sync::Arc<std::sync::Mutex<Option<String>>>;

/// The link's reading side, once the handshake is over.
pub(super) type LinkReader =
    FramedRead<tokio::io::ReadHalf<UnixStream>, Codec<WorkerToControl, ControlToWorker>>;
/// The link's writing side, once the handshake is over.
pub(super) type LinkWriter =
    FramedWrite<tokio::io::WriteHalf<UnixStream>, Codec<WorkerToControl, ControlToWorker>>;

pub(super) struct Started {
    pub(super) child: Child,
    pub(super) pid: u32,
    pub(super) last_error: LastError,
    /// The stderr relay; it ends at the worker's exit, after its last line.
    pub(super) stderr_task: Option<tokio::task::JoinHandle<()>>,
    pub(super) reader: LinkReader,
    pub(super) writer: LinkWriter,
}

/// Starts the worker for `spec`: its socket, the child, the child's connection and the
/// handshake, in that order; the error says which step failed.
pub(super) async fn start(spec: &SpawnSpec) -> Result<Started, StartError> {
    let agent_spec = agent_spec(&spec.agent, spec.journal.is_some(), spec.secrets.clone())?;
    seed_new_workspace(&spec.agent);
    let (sock_path, listener) = listen(&spec.run_dir)?;
    let Spawned {
        mut child,
        pid,
        last_error,
        stderr_task,
    } = spawn_child(spec, &sock_path)?;
    let agent = spec.agent.id.as_str();
    let stream = connection(&listener, &mut child, &sock_path, pid, agent).await?;
    drop(listener);
    let (reader, writer, protocol) = handshake(stream, agent, agent_spec).await?;
    tracing::info!(agent, pid, protocol, "Worker ready.");
    Ok(Started {
        last_error,
        stderr_task,
        child,
        pid,
        reader,
        writer,
    })
}

/// A workspace that does not exist yet starts with the bootstrap files, as OpenClaw seeds a
/// brand-new one (`skip_bootstrap` leaves it empty). One that exists, even empty, is the
/// operator's and is left as it is. A failure is logged; the worker starts anyway.
fn seed_new_workspace(agent: &AgentConfig) {
    let ws = &agent.workspace;
    if !agent.seed_workspace || ws.exists() {
        return;
    }
    let name = agent.name.as_deref().unwrap_or(agent.id.as_str());
    let seeded = std::fs::create_dir_all(ws)
        .map_err(|e| e.to_string())
        .and_then(|()| crate::agent_templates::seed(ws, name, None).map_err(|e| e.to_string()));
    match seeded {
        Ok(()) => tracing::info!(
            agent = agent.id.as_str(),
            workspace = %ws.display(),
            "A new workspace got the bootstrap files."
        ),
        Err(e) => tracing::warn!(
            agent = agent.id.as_str(),
            workspace = %ws.display(),
            error = e.as_str(),
            "Cannot write the bootstrap files into a new workspace; the agent starts without them."
        ),
    }
}

/// Binds a socket of its own for the worker about to start, in the private `run_dir`.
fn listen(run_dir: &Path) -> Result<(PathBuf, UnixListener), StartError> {
    std::fs::create_dir_all(run_dir).map_err(|why| StartError::RunDir {
        dir: run_dir.to_owned(),
        why,
    })?;
    set_private(run_dir);
    // Unique per spawn: workers of several agents start at once (generations are per agent).
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let sock_path = run_dir.join(format!("w-{}.sock", &nonce[..12]));
    let _ = std::fs::remove_file(&sock_path);
    let listener = UnixListener::bind(&sock_path).map_err(|why| StartError::Listen {
        path: sock_path.clone(),
        why,
    })?;
    Ok((sock_path, listener))
}

/// A worker process just started, with its stderr relayed.
struct Spawned {
    child: Child,
    pid: u32,
    last_error: LastError,
    stderr_task: Option<tokio::task::JoinHandle<()>>,
}

/// Starts the worker process pointed at `sock_path`, with only the allowed environment, in
/// its own process group, killed with the supervisor; its stderr is relayed as log lines.
fn spawn_child(spec: &SpawnSpec, sock_path: &Path) -> Result<Spawned, StartError> {
    let mut cmd = Command::new(&spec.worker_bin);
    cmd.arg("--agent")
        .arg(spec.agent.id.as_str())
        .arg("--connect")
        .arg(sock_path)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    crate::sys::kill_child_with_parent(&mut cmd);
    let mut child = cmd.spawn().map_err(|why| StartError::Spawn {
        bin: spec.worker_bin.clone(),
        why,
    })?;
    let pid = child.id().unwrap_or(0);
    let last_error = LastError::default();
    let mut stderr_task = None;
    if let Some(stderr) = child.stderr.take() {
        stderr_task = Some(tokio::spawn(relay_stderr(
            stderr,
            spec.agent.id.as_str().to_owned(),
            pid,
            last_error.clone(),
        )));
    }
    Ok(Spawned {
        child,
        pid,
        last_error,
        stderr_task,
    })
}

/// The child's connection, within [`CONNECT_TIMEOUT`] and unless it exits first; its socket
/// file is removed either way.
async fn connection(
    listener: &UnixListener,
    child: &mut Child,
    sock_path: &Path,
    pid: u32,
    agent: &str,
) -> Result<UnixStream, StartError> {
    let accepted = tokio::select! {
        r = tokio::time::timeout(CONNECT_TIMEOUT, accept_child(listener, pid, agent)) => r,
        status = child.wait() => {
            let _ = std::fs::remove_file(sock_path);
            return Err(StartError::ExitedEarly(match status {
                Ok(s) => describe_exit(s),
                Err(e) => e.to_string(),
            }));
        }
    };
    let _ = std::fs::remove_file(sock_path);
    match accepted {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(StartError::Accept(e)),
        Err(_) => Err(StartError::NoConnection),
    }
}

/// The version handshake on the worker's connection: its `Hello` (within [`HELLO_TIMEOUT`]),
/// answered `Rejected` or `Welcome` with the agent's spec; then the link's codecs, switched in
/// place so nothing already buffered is lost. Gives the protocol agreed on too.
async fn handshake(
    stream: UnixStream,
    agent: &str,
    agent_spec: AgentSpec,
) -> Result<(LinkReader, LinkWriter, u32), StartError> {
    let (rd, wr) = tokio::io::split(stream);
    // Small first buffers (they grow for a large frame): a link's 8 KB defaults, freed at
    // every retirement, left the heap fragmented (about 13 KB per agent ever run, issue 24).
    let mut hello_reader =
        FramedRead::with_capacity(rd, Codec::<Hello, HelloReply>::new(), LINK_BUFFER);
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, hello_reader.next()).await {
        Ok(Some(Ok(h))) => h,
        Ok(Some(Err(e))) => return Err(StartError::BadHello(e)),
        Ok(None) => return Err(StartError::ClosedInHandshake),
        Err(_) => return Err(StartError::NoHello),
    };
    let mut hello_writer = FramedWrite::with_capacity(
        wr,
        Codec::<Hello, HelloReply>::with_max_frame(MAX_FRAME),
        LINK_BUFFER,
    );
    let protocol = match protocol_for(&hello, agent) {
        Ok(p) => p,
        Err(reason) => {
            let supported = Supported {
                min: ipc::version::MIN_PROTOCOL_VERSION,
                max: ipc::version::PROTOCOL_VERSION,
            };
            let _ = hello_writer
                .send(HelloReply::Rejected {
                    reason: reason.to_string(),
                    supported,
                })
                .await;
            return Err(StartError::Rejected(reason));
        }
    };
    hello_writer
        .send(HelloReply::Welcome {
            protocol,
            build: ipc::version::BUILD.into(),
            spec: Box::new(agent_spec),
        })
        .await
        .map_err(StartError::Welcome)?;
    let writer = hello_writer
        .map_encoder(|_| Codec::<WorkerToControl, ControlToWorker>::with_max_frame(MAX_FRAME));
    let reader = hello_reader
        .map_decoder(|_| Codec::<WorkerToControl, ControlToWorker>::with_max_frame(MAX_FRAME));
    Ok((reader, writer, protocol))
}

/// The protocol to speak with the worker that sent `hello`, or why it is rejected: it must
/// be a worker for `agent` (the connection is the child's own, see `accept_child`: no token
/// needed) and share a protocol version with this build.
fn protocol_for(hello: &Hello, agent: &str) -> Result<u32, Rejection> {
    match &hello.role {
        Role::Worker { agent_id, .. } if agent_id == agent => {
            ipc::version::negotiate(hello.min_protocol, hello.protocol).ok_or(
                Rejection::NoCommonVersion {
                    min: hello.min_protocol,
                    max: hello.protocol,
                },
            )
        }
        Role::Worker { .. } => Err(Rejection::IdentityMismatch),
        Role::Unknown => Err(Rejection::UnknownRole),
    }
}

/// The worker's connection: the first one made by the child `pid` itself (its credentials
/// from the socket). Another process of the same uid that connects first is turned away, so
/// the link needs no secret in the worker's environment.
async fn accept_child(
    listener: &UnixListener,
    pid: u32,
    agent: &str,
) -> std::io::Result<UnixStream> {
    loop {
        let (stream, _) = listener.accept().await?;
        let peer = stream.peer_cred().ok().and_then(|c| c.pid());
        if peer.is_some_and(|p| i64::from(p) == i64::from(pid)) {
            return Ok(stream);
        }
        tracing::warn!(
            agent,
            worker_pid = pid,
            peer_pid = ?peer,
            "Refused a connection to a worker's socket: not the worker that was started."
        );
    }
}

/// Only the supervisor's user may reach the worker sockets in `dir`.
fn set_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc::version::{MIN_PROTOCOL_VERSION, PROTOCOL_VERSION};

    fn hello(role: Role, min_protocol: u32, protocol: u32) -> Hello {
        Hello {
            protocol,
            min_protocol,
            build: "test".into(),
            role,
        }
    }

    fn worker(agent: &str) -> Role {
        Role::Worker {
            agent_id: agent.into(),
            token: String::new(),
        }
    }

    #[test]
    fn the_agents_own_worker_gets_the_highest_common_protocol() {
        let h = hello(worker("main"), MIN_PROTOCOL_VERSION, PROTOCOL_VERSION + 3);
        assert_eq!(protocol_for(&h, "main"), Ok(PROTOCOL_VERSION));
        let h = hello(worker("main"), 0, MIN_PROTOCOL_VERSION);
        assert_eq!(protocol_for(&h, "main"), Ok(MIN_PROTOCOL_VERSION));
    }

    #[test]
    fn a_worker_for_another_agent_an_unknown_role_or_no_common_version_is_rejected() {
        let both = (MIN_PROTOCOL_VERSION, PROTOCOL_VERSION);
        let h = hello(worker("ops"), both.0, both.1);
        assert_eq!(protocol_for(&h, "main"), Err(Rejection::IdentityMismatch));
        let h = hello(Role::Unknown, both.0, both.1);
        assert_eq!(protocol_for(&h, "main"), Err(Rejection::UnknownRole));
        let newer = PROTOCOL_VERSION + 1;
        let h = hello(worker("main"), newer, newer);
        let refused = protocol_for(&h, "main");
        assert_eq!(
            refused,
            Err(Rejection::NoCommonVersion {
                min: newer,
                max: newer
            })
        );
        // The reason the worker is told.
        assert_eq!(
            refused.map_err(|r| r.to_string()),
            Err(format!(
                "no common protocol version (worker speaks {newer}..={newer}, supervisor \
                 {MIN_PROTOCOL_VERSION}..={PROTOCOL_VERSION})"
            ))
        );
    }
}
