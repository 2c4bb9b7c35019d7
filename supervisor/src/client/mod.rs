//! The `loopgate` CLI: a Gateway protocol v4 client over the supervisor's unix socket.
//!
//! Architecture Invariant: this module depends on `ipc` (and std/tokio) only, never on the
//! supervisor's internals; it is just another client of the protocol.

mod agent;
pub mod approvals;
mod audit;
mod browse;
mod config;
mod conn;
pub mod devices;
mod reload;
mod render;
pub use reload::reload;

pub use agent::agent;
pub use audit::audit;
pub use browse::{history, logs, sessions};
pub use config::{config_get, config_patch, config_set};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use ipc::gateway::{
    AgentWaitParams, GatewayDrainParams, Method, StatusResult, WorkerRestartParams,
};
use serde_json::Value;

pub use conn::{Client, ClientError};

/// `loopgate agent` options.
pub struct AgentArgs {
    pub message: String,
    pub agent: Option<String>,
    pub session_key: Option<String>,
    pub timeout: Option<u64>,
    /// `"<provider>/<model>"` or a model name on the agent's provider.
    pub model: Option<String>,
    pub json: bool,
}

/// Reports an error on stderr; exits 1.
fn fail(msg: impl std::fmt::Display) -> ExitCode {
    note(msg);
    ExitCode::from(1)
}

/// Writes `loopgate: <msg>` on stderr, through the printable filter (messages quote what
/// clients chose).
fn note(msg: impl std::fmt::Display) {
    eprintln!("loopgate: {}", ipc::text::printable_lines(&msg.to_string()));
}

/// Writes to stdout; a closed pipe (e.g. `| head`) ends the program quietly with 0. Every
/// line goes through the one printable filter ([`ipc::text::printable_lines`]): what
/// clients chose (session keys, run ids, device names, replies) cannot move the cursor,
/// clear the screen or reorder text; table cells also escape newlines
/// ([`ipc::text::printable`]) so a value cannot fake a row.
fn emit(text: &str) {
    let text = ipc::text::printable_lines(text);
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
    }
}

fn exit_for_status(status: &str) -> ExitCode {
    match status {
        "ok" => ExitCode::SUCCESS,
        // The wait ended first (the run goes on, queued or running): wait again.
        "timeout" | "pending" => ExitCode::from(2),
        _ => ExitCode::from(1),
    }
}

pub async fn wait(socket: &Path, run_id: String, timeout_ms: Option<u64>) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let params = AgentWaitParams { run_id, timeout_ms };
    match client
        .call(
            Method::AgentWait,
            serde_json::to_value(&params).unwrap_or_default(),
        )
        .await
    {
        Ok(v) => {
            emit(&format!("{v}\n"));
            exit_for_status(v.get("status").and_then(Value::as_str).unwrap_or("error"))
        }
        Err(e) => fail(e),
    }
}

pub async fn status(socket: &Path, as_json: bool) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match client
        .ask::<_, Value>(Method::GatewayStatus, &ipc::gateway::NoParams {})
        .await
    {
        Ok(v) => {
            if as_json {
                emit(&format!("{v}\n"));
                return ExitCode::SUCCESS;
            }
            match serde_json::from_value::<StatusResult>(v) {
                Ok(s) => {
                    let mut out = render::status(&s);
                    // Stuck-session diagnostics; an older gateway without them shows none.
                    if let Ok(d) = client
                        .ask::<_, ipc::gateway::DiagnosticsLanes>(
                            Method::DiagnosticsLanes,
                            &ipc::gateway::NoParams {},
                        )
                        .await
                    {
                        out.push_str(&render::flagged_sessions(&d));
                    }
                    emit(&out);
                    ExitCode::SUCCESS
                }
                Err(e) => fail(format!("unexpected status reply: {e}")),
            }
        }
        Err(e) => fail(e),
    }
}

pub async fn drain(socket: &Path, timeout_secs: Option<u64>) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let params = GatewayDrainParams {
        timeout_ms: timeout_secs.map(|s| s.saturating_mul(1000)),
    };
    match client
        .call(
            Method::GatewayDrain,
            serde_json::to_value(&params).unwrap_or_default(),
        )
        .await
    {
        Ok(v) => match v.get("deadlineMs").and_then(Value::as_u64) {
            Some(ms) => eprintln!(
                "loopgate: draining (deadline {} s); waiting for the gateway to stop",
                ms / 1000
            ),
            None => eprintln!("loopgate: the gateway is already draining; waiting for it to stop"),
        },
        Err(e) => return fail(e),
    }
    // The gateway closes every connection when it stops.
    loop {
        match client.next_frame().await {
            Ok(_) => continue,
            Err(ClientError::Closed) | Err(ClientError::Io(_)) => break,
            Err(e) => return fail(e),
        }
    }
    eprintln!("loopgate: gateway stopped");
    ExitCode::SUCCESS
}

pub async fn worker_restart(socket: &Path, agent: String, force: bool) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let params = WorkerRestartParams {
        agent_id: agent.clone(),
        force: force.then_some(true),
    };
    match client
        .call(
            Method::WorkerRestart,
            serde_json::to_value(&params).unwrap_or_default(),
        )
        .await
    {
        Ok(v) => {
            let pid = v
                .get("pid")
                .and_then(Value::as_u64)
                .map(|p| p.to_string())
                .unwrap_or_else(|| "?".into());
            emit(&format!("worker for agent {agent} restarted (pid {pid})\n"));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

pub async fn health(socket: &Path) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    match client
        .ask::<_, Value>(Method::Health, &ipc::gateway::HealthParams::default())
        .await
    {
        Ok(v) => {
            emit(&format!("{v}\n"));
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}
