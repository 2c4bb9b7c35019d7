//! Test support: start the real `loopgate serve` (which spawns real `loopgate-worker`s) in a
//! fresh temp state dir, with an in-process scripted model server, and talk to it over the real
//! unix socket with a small Gateway protocol v4 client.
//!
//! Waiting is always on an event (a log line announcing readiness, a frame, a process exit),
//! with a generous upper bound so a broken build fails instead of hanging.
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub mod client;
pub mod typed;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use scripted_model::ScriptedModel;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::watch;

pub use client::Client;

/// Upper bound on any single wait in the suite.
pub const WAIT: Duration = Duration::from_secs(30);
/// Less than the gateway's delay before answering a refused `connect` (a lower bound only).
pub const FAILED_AUTH_DELAY_FLOOR: Duration = Duration::from_millis(400);

/// Path of a workspace binary, built by `cargo build --workspace --bins` (scripts/test does
/// this before running the suite).
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --workspace --bins` first (scripts/test does)",
        path.display()
    );
    path
}

/// Captured stderr lines of a process, with a way to wait for one.
#[derive(Clone)]
pub struct Logs {
    lines: Arc<Mutex<Vec<String>>>,
    changed: watch::Sender<usize>,
}

impl Logs {
    fn new() -> Self {
        Self {
            lines: Arc::new(Mutex::new(Vec::new())),
            changed: watch::channel(0).0,
        }
    }

    fn push(&self, line: String) {
        let mut l = self.lines.lock().unwrap();
        l.push(line);
        let n = l.len();
        drop(l);
        self.changed.send_replace(n);
    }

    pub fn all(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    /// Waits until a line containing `needle` has been logged.
    pub async fn wait_for(&self, needle: &str) -> String {
        let mut rx = self.changed.subscribe();
        let fut = async {
            loop {
                if let Some(l) = self.all().into_iter().find(|l| l.contains(needle)) {
                    return l;
                }
                if rx.changed().await.is_err() {
                    panic!("log stream ended before {needle:?}");
                }
            }
        };
        match tokio::time::timeout(WAIT, fut).await {
            Ok(l) => l,
            Err(_) => panic!(
                "no log line containing {needle:?}; logs:\n{}",
                self.all().join("\n")
            ),
        }
    }

    /// Waits until at least `n` lines containing `needle` have been logged.
    pub async fn wait_for_count(&self, needle: &str, n: usize) {
        let mut rx = self.changed.subscribe();
        let fut = async {
            loop {
                if self.all().iter().filter(|l| l.contains(needle)).count() >= n {
                    return;
                }
                if rx.changed().await.is_err() {
                    panic!("log stream ended before {n} x {needle:?}");
                }
            }
        };
        if tokio::time::timeout(WAIT, fut).await.is_err() {
            panic!(
                "fewer than {n} log lines containing {needle:?}; logs:\n{}",
                self.all().join("\n")
            );
        }
    }

    /// Fails if a WARN or ERROR line was logged that contains none of `allowed`.
    pub fn assert_clean(&self, allowed: &[&str]) {
        let bad: Vec<String> = self
            .all()
            .into_iter()
            .filter(|l| l.contains(" WARN ") || l.contains(" ERROR "))
            .filter(|l| !allowed.iter().any(|a| l.contains(a)))
            .collect();
        assert!(
            bad.is_empty(),
            "unexpected warnings/errors:\n{}",
            bad.join("\n")
        );
    }
}

fn forward(name: String, stream: impl tokio::io::AsyncRead + Unpin + Send + 'static, logs: Logs) {
    tokio::spawn(async move {
        let mut lines = BufReader::new(stream).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            eprintln!("[{name}] {line}");
            logs.push(line);
        }
    });
}

/// A running gateway in its own temp state dir.
pub struct Gateway {
    pub dir: tempfile::TempDir,
    pub model: ScriptedModel,
    pub child: Option<Child>,
    pub logs: Logs,
    extra_config: String,
    idle_timeout_seconds: f64,
    gateway_keys: String,
    /// `(base_url, model)` of a real provider instead of the scripted model.
    provider: Option<(String, String)>,
    /// The wire API the agent's provider speaks to the scripted model.
    api: scripted_model::wire::Api,
    /// The uid (and gid) `loopgate serve` and the CLI run as, when not the test's own.
    run_as: Option<u32>,
}

impl Gateway {
    /// Starts a scripted model and a gateway whose `main` agent uses it.
    pub async fn start() -> Gateway {
        Self::start_with("").await
    }

    /// Like [`Gateway::start`], appending `extra` TOML to the generated config.
    pub async fn start_with(extra: &str) -> Gateway {
        Self::start_opts(extra, 30.0).await
    }

    /// A gateway with a second provider, `second` (chat completions), on a scripted model
    /// of its own, returned beside it.
    pub async fn start_with_second() -> (Gateway, scripted_model::ScriptedModel) {
        let second = scripted_model::ScriptedModel::start()
            .await
            .expect("a second scripted model");
        let gw = Self::start_with(&format!(
            "[models.providers.second]\napi = \"openai-completions\"\nbase_url = \"{}\"\n",
            second.base_url()
        ))
        .await;
        (gw, second)
    }

    /// Full control: extra TOML and the scripted provider's model idle timeout.
    pub async fn start_opts(extra: &str, idle_timeout_seconds: f64) -> Gateway {
        Self::start_full("", extra, idle_timeout_seconds).await
    }

    /// A gateway whose agents use a real OpenAI-compatible server at `base_url`.
    pub async fn start_with_provider(base_url: &str, model: &str) -> Gateway {
        Self::start_with_provider_config(base_url, model, "").await
    }

    /// Like [`Gateway::start_with_provider`], appending `extra` TOML to the config (right
    /// after the `[models.providers.local]` table, so leading keys extend it).
    pub async fn start_with_provider_config(base_url: &str, model: &str, extra: &str) -> Gateway {
        Self::start_with_provider_api(
            scripted_model::wire::Api::Completions,
            base_url,
            model,
            extra,
        )
        .await
    }

    /// A gateway whose agents use a real server speaking `api` at `base_url`.
    pub async fn start_with_provider_api(
        api: scripted_model::wire::Api,
        base_url: &str,
        model: &str,
        extra: &str,
    ) -> Gateway {
        let scripted = ScriptedModel::start().await.expect("scripted model");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut gw = Gateway {
            dir,
            model: scripted,
            child: None,
            logs: Logs::new(),
            extra_config: extra.to_owned(),
            idle_timeout_seconds: 120.0,
            gateway_keys: String::new(),
            provider: Some((base_url.to_owned(), model.to_owned())),
            api,
            run_as: None,
        };
        gw.write_config();
        gw.spawn().await;
        gw
    }

    /// With extra keys inside `[gateway]` and extra TOML tables.
    pub async fn start_gateway_keys(gateway_keys: &str, extra: &str) -> Gateway {
        Self::start_full(gateway_keys, extra, 30.0).await
    }

    async fn start_full(gateway_keys: &str, extra: &str, idle_timeout_seconds: f64) -> Gateway {
        Self::start_api(
            scripted_model::wire::Api::Completions,
            gateway_keys,
            extra,
            idle_timeout_seconds,
        )
        .await
    }

    /// A gateway whose `main` agent talks to the scripted model in `api`'s wire format.
    pub async fn start_api(
        api: scripted_model::wire::Api,
        gateway_keys: &str,
        extra: &str,
        idle_timeout_seconds: f64,
    ) -> Gateway {
        let mut gw = Self::prepare(api, gateway_keys, extra, idle_timeout_seconds).await;
        gw.spawn().await;
        gw
    }

    /// A gateway whose `loopgate serve` (and `gw.cli`) run as `uid` (gid `uid` too, no other
    /// groups), with `extra` TOML and `env` added to its environment; the state dir and the
    /// config belong to `uid`. Needs root; clients must use `gw.cli` (the unix socket only
    /// admits `uid`).
    pub async fn start_as(uid: u32, extra: &str, env: &[(&str, &str)]) -> Gateway {
        let mut gw = Self::prepare(scripted_model::wire::Api::Completions, "", extra, 30.0).await;
        let owner = Some(nix::unistd::Uid::from_raw(uid));
        let group = Some(nix::unistd::Gid::from_raw(uid));
        for p in [gw.state().to_path_buf(), gw.state().join("loopgate.toml")] {
            nix::unistd::chown(&p, owner, group).expect("chown the state dir to the gateway's uid");
        }
        gw.run_as = Some(uid);
        gw.spawn_with_env(env).await;
        gw
    }

    /// The scripted model, the state dir and its config, without starting the gateway.
    async fn prepare(
        api: scripted_model::wire::Api,
        gateway_keys: &str,
        extra: &str,
        idle_timeout_seconds: f64,
    ) -> Gateway {
        let model = ScriptedModel::start().await.expect("scripted model");
        let dir = tempfile::tempdir().expect("tempdir");
        let gw = Gateway {
            dir,
            model,
            child: None,
            logs: Logs::new(),
            extra_config: extra.to_owned(),
            idle_timeout_seconds,
            gateway_keys: gateway_keys.to_owned(),
            provider: None,
            api,
            run_as: None,
        };
        gw.write_config();
        gw
    }

    pub fn config_text(&self) -> String {
        if let Some((url, model)) = &self.provider {
            return format!(
                "[gateway]\nport = 0\n\n[agents.defaults]\nmodel = \"local/{model}\"\nskip_bootstrap = true\n\n\
                 [models.providers.local]\napi = \"{}\"\nbase_url = \"{url}\"\n\
                 idle_timeout_seconds = {}\n{}\n",
                self.api.config_name(),
                self.idle_timeout_seconds,
                self.extra_config
            );
        }
        format!(
            "[gateway]\nport = 0\n{}\n[agents.defaults]\nmodel = \"scripted/scripted-1\"\nskip_bootstrap = true\n\n\
             [models.providers.scripted]\napi = \"{}\"\nbase_url = \"{}\"\n\
             idle_timeout_seconds = {}\n{}\n",
            self.gateway_keys,
            self.api.config_name(),
            self.api.base_url(self.model.addr()),
            self.idle_timeout_seconds,
            self.extra_config
        )
    }

    fn write_config(&self) {
        std::fs::write(self.state().join("loopgate.toml"), self.config_text()).unwrap();
    }

    pub fn state(&self) -> &Path {
        self.dir.path()
    }

    /// The operator's internal-hook directory of an agent (`<state>/agents/<id>/hooks`),
    /// created.
    pub fn hooks_dir(&self, agent: &str) -> PathBuf {
        let dir = self.state().join("agents").join(agent).join("hooks");
        std::fs::create_dir_all(&dir).expect("create the hooks dir");
        dir
    }

    /// The agent's workspace directory, created (a test usually puts files there before the
    /// worker's first run creates it).
    pub fn workspace(&self, agent: &str) -> PathBuf {
        let ws = self.state().join("agents").join(agent).join("workspace");
        std::fs::create_dir_all(&ws).expect("create the workspace");
        ws
    }

    pub fn socket(&self) -> PathBuf {
        self.state().join("gateway.sock")
    }

    /// `loopgate serve` for this state dir (not started).
    pub fn serve_command(&self) -> Command {
        let mut cmd = Command::new(bin("loopgate"));
        cmd.arg("serve")
            .arg("--state-dir")
            .arg(self.state())
            .env("LOOPGATE_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(uid) = self.run_as {
            cmd.uid(uid).gid(uid);
        }
        cmd
    }

    /// Starts `loopgate serve` and waits until it announces readiness.
    pub async fn spawn(&mut self) {
        self.spawn_with_env(&[]).await;
    }

    /// Like [`Gateway::spawn`] with extra environment variables for the gateway.
    pub async fn spawn_with_env(&mut self, env: &[(&str, &str)]) {
        self.logs = Logs::new();
        let mut cmd = self.serve_command();
        cmd.envs(env.iter().copied());
        let mut child = cmd.spawn().expect("spawn loopgate serve");
        forward(
            "serve".into(),
            child.stderr.take().unwrap(),
            self.logs.clone(),
        );
        forward(
            "serve-out".into(),
            child.stdout.take().unwrap(),
            self.logs.clone(),
        );
        self.child = Some(child);
        self.logs.wait_for("Gateway ready.").await;
    }

    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .and_then(|c| c.id())
            .expect("gateway running")
    }

    /// Sends `sig` and waits for the exit status.
    pub async fn stop(&mut self, sig: nix::sys::signal::Signal) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("gateway running");
        if let Some(pid) = child.id() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig);
        }
        tokio::time::timeout(WAIT, child.wait())
            .await
            .expect("gateway exits")
            .expect("wait")
    }

    pub async fn connect(&self) -> Client {
        Client::connect(&self.socket()).await
    }

    /// `status` over a fresh connection.
    pub async fn status(&self) -> serde_json::Value {
        let mut c = self.connect().await;
        c.call("loopgate.status", serde_json::json!({})).await["payload"].clone()
    }

    /// The pid of `agent`'s worker per `status`, if it has one.
    pub async fn worker_pid(&self, agent: &str) -> Option<u32> {
        let s = self.status().await;
        s["workers"]
            .as_array()?
            .iter()
            .find(|w| w["agentId"] == agent)?["pid"]
            .as_u64()
            .map(|p| p as u32)
    }

    /// Rewrites the config with different extra TOML (same model server).
    pub fn rewrite_config(&mut self, gateway_keys: &str, extra: &str) {
        self.gateway_keys = gateway_keys.to_owned();
        self.extra_config = extra.to_owned();
        self.write_config();
    }

    /// The gateway token `serve` made for its state dir (`<state>/gateway.token`).
    pub fn token(&self) -> String {
        std::fs::read_to_string(self.state().join("gateway.token"))
            .expect("serve writes gateway.token")
            .trim()
            .to_owned()
    }

    /// The WebSocket listener's address, from `<state>/gateway.addr`.
    pub fn ws_addr(&self) -> String {
        std::fs::read_to_string(self.state().join("gateway.addr"))
            .expect("gateway.addr is written once the gateway is ready")
            .trim()
            .to_owned()
    }

    /// A plain HTTP GET on the WebSocket port; returns (status, body).
    pub async fn http_get(&self, path: &str) -> (u16, String) {
        let r = self.http("GET", path, &[]).await;
        (r.status, r.text())
    }

    /// Sends one HTTP/1.1 request (`method path`, extra header lines) to the WebSocket
    /// port; returns the status, the headers (names lowercased) and the body.
    pub async fn http(&self, method: &str, path: &str, headers: &[&str]) -> HttpAnswer {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.ws_addr();
        let mut s = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connect");
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        for h in headers {
            req.push_str(h);
            req.push_str("\r\n");
        }
        req.push_str("\r\n");
        s.write_all(req.as_bytes()).await.expect("write");
        let mut buf = Vec::new();
        tokio::time::timeout(WAIT, s.read_to_end(&mut buf))
            .await
            .expect("response")
            .expect("read");
        let split = buf
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or(buf.len());
        let head = String::from_utf8_lossy(&buf[..split]).into_owned();
        let body = buf.get(split + 4..).unwrap_or_default().to_vec();
        let mut lines = head.lines();
        let status = lines
            .next()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        HttpAnswer {
            status,
            headers,
            body,
        }
    }

    /// Runs the `loopgate` CLI against this gateway.
    pub async fn cli(&self, args: &[&str]) -> std::process::Output {
        let mut cmd = Command::new(bin("loopgate"));
        cmd.arg("--state-dir")
            .arg(self.state())
            .args(args)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        if let Some(uid) = self.run_as {
            cmd.uid(uid).gid(uid);
        }
        let out = cmd.output();
        tokio::time::timeout(WAIT, out)
            .await
            .expect("cli finishes")
            .expect("cli runs")
    }

    /// Opens the agent database (for assertions).
    pub fn agent_db(&self, agent: &str) -> rusqlite::Connection {
        let path = self.state().join("agents").join(agent).join("agent.sqlite");
        let c = rusqlite::Connection::open(path).expect("open agent db");
        c.busy_timeout(Duration::from_secs(5)).unwrap();
        c
    }
}

/// The texts of a final `agent` response's payloads, in order.
pub fn payload_texts(fin: &serde_json::Value) -> Vec<String> {
    fin["payload"]["result"]["payloads"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

/// A scripted model reply of `text` in one chunk.
pub fn reply(text: &str) -> scripted_model::Step {
    streamed(text, 1, 0)
}

/// A scripted model reply of `text` in `chunks` pieces, `delay_ms` apart.
pub fn streamed(text: &str, chunks: usize, delay_ms: u64) -> scripted_model::Step {
    scripted_model::Step::Text {
        text: text.into(),
        chunks,
        delay_ms,
        finish_reason: None,
        reasoning: String::new(),
        keepalive_ms: 0,
        end_turn: None,
    }
}

/// A reply of `text` in two pieces that stops after the first until
/// `ScriptedModel::release` (a run the test holds streaming).
pub fn hold(text: &str) -> scripted_model::Step {
    scripted_model::Step::Hold {
        text: text.into(),
        chunks: 2,
        after_chunks: 1,
    }
}

/// A `message_sending` hook that cancels a text with `forbidden` in it and rewrites any
/// other to `[reviewed] ok` (R-H2).
pub const REVIEW_HOOK: &str = concat!(
    "[[hooks.message_sending]]\n",
    "command = [\"sh\", \"-c\", \"if grep -q forbidden; then echo '{\\\"cancel\\\": true}'; else echo '{\\\"content\\\": \\\"[reviewed] ok\\\"}'; fi\"]\n",
);

/// A model response that asks for one tool call.
pub fn tool_call(id: &str, name: &str, arguments: &str) -> scripted_model::Step {
    scripted_model::Step::ToolCalls {
        text: String::new(),
        calls: vec![scripted_model::ScriptedCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }],
        cut: false,
        delay_ms: 0,
        reasoning: String::new(),
    }
}

/// The result the model got for tool call `id`, from the request after it.
pub fn tool_result(gw: &Gateway, id: &str) -> String {
    gw.model
        .requests()
        .iter()
        .flat_map(|r| r.body["messages"].as_array().cloned().unwrap_or_default())
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no result for tool call {id}"))
}

/// True while a process with `pid` exists (zombies count as gone).
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Checks, at 10 ms intervals, that `pid` is gone within `within`; returns how long it took.
/// (A bounded check of a deadline the requirement states, not a synchronisation sleep.)
pub async fn gone_within(pid: u32, within: Duration) -> Option<Duration> {
    let start = std::time::Instant::now();
    while start.elapsed() <= within {
        if !alive(pid) {
            return Some(start.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

/// One HTTP answer.
#[derive(Debug)]
pub struct HttpAnswer {
    pub status: u16,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl HttpAnswer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Runs `loopgate serve` once on `state_dir` (expecting it to refuse to start); returns its
/// exit code and stderr.
pub async fn serve_refusal(state_dir: &Path) -> (Option<i32>, String) {
    let out = Command::new(bin("loopgate"))
        .args(["serve", "--state-dir"])
        .arg(state_dir)
        .stdin(Stdio::null())
        .output();
    let out = tokio::time::timeout(WAIT, out)
        .await
        .expect("serve exits")
        .expect("serve runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A FIFO that hook commands write their events to, one JSON object per line (one write
/// each, so concurrent hooks do not interleave); the test reads them as they come, without
/// polling. Opened read-write, so a hook that has not run yet is not an end of file.
pub struct HookFifo {
    lines: tokio::io::Lines<BufReader<tokio::net::unix::pipe::Receiver>>,
}

impl HookFifo {
    /// Creates the FIFO at `path` (its directory must exist).
    pub fn create(path: &Path) -> HookFifo {
        nix::unistd::mkfifo(path, nix::sys::stat::Mode::from_bits_truncate(0o600)).expect("mkfifo");
        let rx = tokio::net::unix::pipe::OpenOptions::new()
            .read_write(true)
            .open_receiver(path)
            .expect("open the FIFO");
        HookFifo {
            lines: BufReader::new(rx).lines(),
        }
    }

    /// The next event a hook wrote (fails the test after [`WAIT`]).
    pub async fn next(&mut self) -> serde_json::Value {
        let line = tokio::time::timeout(WAIT, self.lines.next_line())
            .await
            .expect("a hook wrote its event")
            .expect("read the FIFO")
            .expect("the FIFO stays open");
        serde_json::from_str(&line).expect("a hook event is JSON")
    }

    /// The next `n` events, by event name (hooks that run concurrently come in any order).
    pub async fn next_by_event(
        &mut self,
        n: usize,
    ) -> std::collections::BTreeMap<String, serde_json::Value> {
        let mut got = std::collections::BTreeMap::new();
        for _ in 0..n {
            let ev = self.next().await;
            let name = ev["event"].as_str().unwrap_or_default().to_owned();
            got.insert(name, ev);
        }
        got
    }
}
