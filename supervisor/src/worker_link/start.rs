//! Starting a worker: its private socket, the child process with its plain environment,
//! the child's own connection (its peer pid, no token) and the handshake, whose `Welcome`
//! carries the agent's spec and its provider keys.

use std::process::Stdio;

use futures_util::{SinkExt, StreamExt};
use ipc::control::{
    AgentSpec, ControlToWorker, Hello, HelloReply, ModelSpec, Role, Supported, WorkerToControl,
};
use ipc::frame::{Codec, MAX_FRAME};
use tokio::process::{Child, Command};
use tokio_util::codec::{FramedRead, FramedWrite};

use super::stderr::relay_stderr;
use super::{describe_exit, SpawnSpec, CONNECT_TIMEOUT, HELLO_TIMEOUT, LINK_BUFFER};
use crate::config::AgentConfig;

fn agent_spec(
    agent: &AgentConfig,
    journaled: bool,
    secrets: ipc::control::Secrets,
) -> Result<AgentSpec, String> {
    let model = agent.model.as_ref().ok_or_else(|| {
        format!(
            "agent {:?} has no model configured (set agents.defaults.model or agents.list.{}.model)",
            agent.id.as_str(),
            agent.id.as_str()
        )
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
    })
}

/// The worker's last ERROR log line (why it exited, when it failed before its link could
/// say so: a database it cannot open, say).
pub(super) type LastError = std::sync::Arc<std::sync::Mutex<Option<String>>>;

pub(super) struct Started {
    pub(super) child: Child,
    pub(super) pid: u32,
    pub(super) last_error: LastError,
    /// The stderr relay; it ends at the worker's exit, after its last line.
    pub(super) stderr_task: Option<tokio::task::JoinHandle<()>>,
    pub(super) reader: FramedRead<
        tokio::io::ReadHalf<tokio::net::UnixStream>,
        Codec<WorkerToControl, ControlToWorker>,
    >,
    pub(super) writer: FramedWrite<
        tokio::io::WriteHalf<tokio::net::UnixStream>,
        Codec<WorkerToControl, ControlToWorker>,
    >,
}

pub(super) async fn start(spec: &SpawnSpec) -> Result<Started, String> {
    let agent_spec = agent_spec(&spec.agent, spec.journal.is_some(), spec.secrets.clone())?;
    std::fs::create_dir_all(&spec.run_dir)
        .map_err(|e| format!("cannot create {}: {e}", spec.run_dir.display()))?;
    set_private(&spec.run_dir);
    // Unique per spawn: workers of several agents start at once (generations are per agent).
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let sock_path = spec.run_dir.join(format!("w-{}.sock", &nonce[..12]));
    let _ = std::fs::remove_file(&sock_path);
    let listener = tokio::net::UnixListener::bind(&sock_path)
        .map_err(|e| format!("cannot listen on {}: {e}", sock_path.display()))?;

    let mut cmd = Command::new(&spec.worker_bin);
    cmd.arg("--agent")
        .arg(spec.agent.id.as_str())
        .arg("--connect")
        .arg(&sock_path)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .process_group(0);
    crate::sys::kill_child_with_parent(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", spec.worker_bin.display()))?;
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

    let accepted = tokio::select! {
        r = tokio::time::timeout(CONNECT_TIMEOUT, accept_child(&listener, pid, spec.agent.id.as_str())) => r,
        status = child.wait() => {
            let _ = std::fs::remove_file(&sock_path);
            return Err(match status {
                Ok(s) => format!("worker exited before connecting: {}", describe_exit(s)),
                Err(e) => format!("worker exited before connecting: {e}"),
            });
        }
    };
    let _ = std::fs::remove_file(&sock_path);
    let stream = match accepted {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(format!("accepting worker connection failed: {e}")),
        Err(_) => return Err(format!("worker did not connect within {CONNECT_TIMEOUT:?}")),
    };
    drop(listener);
    let (rd, wr) = tokio::io::split(stream);
    // Small first buffers (they grow for a large frame): a link's 8 KB defaults, freed at
    // every retirement, left the heap fragmented (about 13 KB per agent ever run, issue 24).
    let mut hello_reader =
        FramedRead::with_capacity(rd, Codec::<Hello, HelloReply>::new(), LINK_BUFFER);
    let hello = match tokio::time::timeout(HELLO_TIMEOUT, hello_reader.next()).await {
        Ok(Some(Ok(h))) => h,
        Ok(Some(Err(e))) => return Err(format!("bad worker handshake: {e}")),
        Ok(None) => return Err("worker closed the link during the handshake".into()),
        Err(_) => return Err(format!("worker sent no Hello within {HELLO_TIMEOUT:?}")),
    };
    let mut hello_writer = FramedWrite::with_capacity(
        wr,
        Codec::<Hello, HelloReply>::with_max_frame(MAX_FRAME),
        LINK_BUFFER,
    );
    let rejection = match &hello.role {
        // The connection is the child's own (`accept_child`): no token needed.
        Role::Worker { agent_id, .. } if agent_id == spec.agent.id.as_str() => {
            match ipc::version::negotiate(hello.min_protocol, hello.protocol) {
                Some(_) => None,
                None => Some(format!(
                    "no common protocol version (worker speaks {}..={}, supervisor {}..={})",
                    hello.min_protocol,
                    hello.protocol,
                    ipc::version::MIN_PROTOCOL_VERSION,
                    ipc::version::PROTOCOL_VERSION
                )),
            }
        }
        Role::Worker { .. } => Some("worker identity mismatch".into()),
        Role::Unknown => Some("unknown role".into()),
    };
    let supported = Supported {
        min: ipc::version::MIN_PROTOCOL_VERSION,
        max: ipc::version::PROTOCOL_VERSION,
    };
    if let Some(reason) = rejection {
        let _ = hello_writer
            .send(HelloReply::Rejected {
                reason: reason.clone(),
                supported,
            })
            .await;
        return Err(format!("worker handshake rejected: {reason}"));
    }
    let protocol = ipc::version::negotiate(hello.min_protocol, hello.protocol)
        .unwrap_or(ipc::version::PROTOCOL_VERSION);
    hello_writer
        .send(HelloReply::Welcome {
            protocol,
            build: ipc::version::BUILD.into(),
            spec: Box::new(agent_spec),
        })
        .await
        .map_err(|e| format!("cannot send Welcome: {e}"))?;
    // Switch codecs in place so nothing already buffered is lost.
    let writer = hello_writer
        .map_encoder(|_| Codec::<WorkerToControl, ControlToWorker>::with_max_frame(MAX_FRAME));
    let reader = hello_reader
        .map_decoder(|_| Codec::<WorkerToControl, ControlToWorker>::with_max_frame(MAX_FRAME));
    tracing::info!(
        agent = spec.agent.id.as_str(),
        pid,
        protocol,
        "Worker ready."
    );
    Ok(Started {
        last_error,
        stderr_task,
        child,
        pid,
        reader,
        writer,
    })
}

/// The worker's connection: the first one made by the child `pid` itself (its credentials
/// from the socket). Another process of the same uid that connects first is turned away, so
/// the link needs no secret in the worker's environment.
async fn accept_child(
    listener: &tokio::net::UnixListener,
    pid: u32,
    agent: &str,
) -> std::io::Result<tokio::net::UnixStream> {
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

fn set_private(dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
}
