//! Starting what the benchmark measures: the scripted model (in this process) and
//! `loopgate serve` (a child process in a temp state dir).

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use scripted_model::wire::Api;
use scripted_model::{DefaultReply, ScriptedModel};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, Command};

use crate::client::Client;

const READY_WAIT: Duration = Duration::from_secs(30);

/// A running gateway; killed when dropped.
pub struct Spawned {
    pub url: String,
    pub token: String,
    pub pid: u32,
    _child: Child,
    _model: ScriptedModel,
    _dir: tempfile::TempDir,
}

/// `[workers]` settings a scenario asks for (each written only when set: builds from before
/// a key existed refuse it).
#[derive(Debug, Clone, Copy, Default)]
pub struct Workers {
    /// `workers.idle_exit_seconds`.
    pub idle_exit: Option<u64>,
    /// `workers.max_live`.
    pub max_live: Option<usize>,
}

pub(crate) fn config(
    model: &ScriptedModel,
    api: Api,
    agents: &[String],
    token: &str,
    workers: Workers,
) -> String {
    let (api_name, model_url) = (api.config_name(), api.base_url(model.addr()));
    let mut c = format!(
        "[gateway]\nport = 0\n\n[gateway.auth]\ntoken = \"{token}\"\n\n[agents.defaults]\nmodel = \"scripted/scripted-1\"\nskip_bootstrap = true\n\n\
         [models.providers.scripted]\napi = \"{api_name}\"\nbase_url = \"{model_url}\"\n\n\
         # The crash-recovery scenario kills workers on purpose.\n[workers]\ncrash_loop_max = 1000\n"
    );
    if let Some(s) = workers.idle_exit {
        c.push_str(&format!("idle_exit_seconds = {s}\n"));
    }
    if let Some(n) = workers.max_live {
        c.push_str(&format!("max_live = {n}\n"));
    }
    for a in agents.iter().filter(|a| a.as_str() != "main") {
        c.push_str(&format!("\n[agents.list.{a}]\n"));
    }
    c
}

impl Spawned {
    /// `stamped`: answer with `(chunks, delay_ms)` time-stamped chunks instead of an echo.
    pub async fn start(
        loopgate: &Path,
        agents: &[String],
        stamped: Option<(usize, u64)>,
        api: Api,
    ) -> anyhow::Result<Spawned> {
        Self::start_with(loopgate, agents, stamped, api, Workers::default()).await
    }

    /// Like [`Spawned::start`], with `[workers]` settings.
    pub async fn start_with(
        loopgate: &Path,
        agents: &[String],
        stamped: Option<(usize, u64)>,
        api: Api,
        workers: Workers,
    ) -> anyhow::Result<Spawned> {
        let model = ScriptedModel::start().await?;
        model.set_default(match stamped {
            Some((chunks, delay_ms)) => DefaultReply::Stamped { chunks, delay_ms },
            None => DefaultReply::Echo {
                prefix: "Echo: ".into(),
                chunks: 4,
                delay_ms: 0,
            },
        });
        let dir = tempfile::tempdir()?;
        let token = format!("bench-{}", scripted_model::now_micros());
        let toml = config(&model, api, agents, &token, workers);
        let (child, pid, url) = serve_with(loopgate, dir.path(), &toml).await?;
        Ok(Spawned {
            url,
            token,
            pid,
            _child: child,
            _model: model,
            _dir: dir,
        })
    }
}

/// A gateway of a cluster this benchmark started, answered by a model shared by all of
/// them; killed when dropped.
pub struct Member {
    pub url: String,
    pub pid: u32,
    pub state: std::path::PathBuf,
    _child: Child,
    _dir: tempfile::TempDir,
}

impl Member {
    /// Starts `loopgate serve` with `agents` on `model` and the `[cluster]` table `cluster`.
    pub async fn start(
        loopgate: &Path,
        model: &ScriptedModel,
        agents: &[String],
        token: &str,
        cluster: &str,
    ) -> anyhow::Result<Member> {
        let dir = tempfile::tempdir()?;
        let mut toml = config(model, Api::Completions, agents, token, Workers::default());
        toml.push_str(cluster);
        let (child, pid, url) = serve_with(loopgate, dir.path(), &toml).await?;
        Ok(Member {
            url,
            pid,
            state: dir.path().to_owned(),
            _child: child,
            _dir: dir,
        })
    }
}

/// Writes `toml` as the config in `state`, starts `loopgate serve` there and waits until it
/// is ready: the child, its pid and its WebSocket URL.
pub(crate) async fn serve_with(
    loopgate: &Path,
    state: &Path,
    toml: &str,
) -> anyhow::Result<(Child, u32, String)> {
    std::fs::write(state.join("loopgate.toml"), toml)?;
    let (child, _) = start_serve(loopgate, state).await?;
    let pid = child.id().context("gateway pid")?;
    let addr = std::fs::read_to_string(state.join("gateway.addr"))?;
    Ok((child, pid, format!("ws://{}/", addr.trim())))
}

/// Starts `loopgate serve` and waits for its readiness line; returns the child and the time
/// it took.
async fn start_serve(loopgate: &Path, state: &Path) -> anyhow::Result<(Child, Duration)> {
    let start = Instant::now();
    let mut child = Command::new(loopgate)
        .arg("serve")
        .arg("--state-dir")
        .arg(state)
        .env("LOOPGATE_LOG", "warn,supervisor::serve=info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .with_context(|| format!("cannot start {}", loopgate.display()))?;
    let stderr = child.stderr.take().context("stderr")?;
    let mut lines = BufReader::new(stderr).lines();
    let ready = tokio::time::timeout(READY_WAIT, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if line.contains("Gateway ready.") {
                return true;
            }
        }
        false
    })
    .await;
    if !matches!(ready, Ok(true)) {
        bail!("loopgate serve did not become ready");
    }
    // Keep draining stderr so the child never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok((child, start.elapsed()))
}

/// Start-to-health and start-to-first-completed-turn (worker spawn included) for a fresh
/// gateway. Health is polled from the moment the process starts (the first answer counts).
pub async fn measure_startup(loopgate: &Path) -> anyhow::Result<(Duration, Duration)> {
    let model = ScriptedModel::start().await?;
    let dir = tempfile::tempdir()?;
    let token = "startup";
    std::fs::write(
        dir.path().join("loopgate.toml"),
        config(
            &model,
            Api::Completions,
            &["main".into()],
            token,
            Workers::default(),
        ),
    )?;
    let start = Instant::now();
    let mut child = Command::new(loopgate)
        .arg("serve")
        .arg("--state-dir")
        .arg(dir.path())
        .env("LOOPGATE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let addr_file = dir.path().join("gateway.addr");
    // The address file appears when the listener is bound; try until health answers.
    let health = loop {
        if start.elapsed() > READY_WAIT {
            bail!("no health answer within {READY_WAIT:?}");
        }
        if let Ok(addr) = std::fs::read_to_string(&addr_file) {
            if let Ok(mut c) = Client::connect(&format!("ws://{}/", addr.trim()), Some(token)).await
            {
                if c.call(
                    ipc::gateway::Method::Health,
                    &ipc::gateway::HealthParams::default(),
                )
                .await
                .is_ok()
                {
                    let h = start.elapsed();
                    let fin = c
                        .turn(
                            ipc::gateway::AgentParams {
                                message: "first".into(),
                                idempotency_key: "first-turn".into(),
                                deliver: Some(false),
                                ..Default::default()
                            },
                            |_| {},
                        )
                        .await?;
                    crate::check_ok(&fin)?;
                    break (h, start.elapsed());
                }
            }
        }
        tokio::time::sleep(Duration::from_micros(200)).await;
    };
    let _ = child.kill().await;
    Ok(health)
}

/// Sends `n` streaming chat requests straight to a scripted model; returns how many completed.
pub async fn raw_chat_requests(addr: std::net::SocketAddr, n: usize) -> anyhow::Result<usize> {
    let body =
        json!({"model": "m", "stream": true, "messages": [{"role": "user", "content": "hi"}]})
            .to_string();
    let mut done = 0;
    for _ in 0..n {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        let req = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await?;
        let mut resp = Vec::new();
        s.read_to_end(&mut resp).await?;
        if String::from_utf8_lossy(&resp).contains("[DONE]") {
            done += 1;
        }
    }
    Ok(done)
}
