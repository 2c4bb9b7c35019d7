//! The `loopgate` CLI: a Gateway protocol v4 client over the supervisor's unix socket.
//!
//! Architecture Invariant: this module depends on `ipc` (and std/tokio) only, never on the
//! supervisor's internals; it is just another client of the protocol.

mod audit;
mod browse;
mod conn;
pub mod devices;
mod render;

pub use audit::audit;
pub use browse::{history, logs, sessions};
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use ipc::gateway::{
    AgentParams, AgentWaitParams, GatewayDrainParams, Method, ServerFrame, StatusResult,
    WorkerRestartParams,
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

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("loopgate: {msg}");
    ExitCode::from(1)
}

/// Writes to stdout; a closed pipe (e.g. `| head`) ends the program quietly with 0.
fn emit(text: &str) {
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

pub async fn agent(socket: &Path, args: AgentArgs) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let run_id = uuid::Uuid::new_v4().to_string();
    let params = AgentParams {
        message: args.message,
        idempotency_key: run_id.clone(),
        agent_id: args.agent,
        session_key: args.session_key,
        timeout: args.timeout,
        model: args.model,
        ..Default::default()
    };
    let req_id = match client
        .send(
            Method::Agent,
            serde_json::to_value(&params).unwrap_or_default(),
        )
        .await
    {
        Ok(id) => id,
        Err(e) => return fail(e),
    };
    let mut streamed = false;
    loop {
        let frame = match client.next_frame().await {
            Ok(f) => f,
            Err(e) => {
                return fail(format!(
                    "lost the gateway while waiting for run {run_id}: {e}"
                ))
            }
        };
        match frame {
            ServerFrame::Event(ev) if ev.event == "agent" => {
                let Some(p) = ev.payload else { continue };
                if p.get("runId").and_then(Value::as_str) != Some(run_id.as_str()) {
                    continue;
                }
                if !args.json && p.get("stream").and_then(Value::as_str) == Some("assistant") {
                    if let Some(d) = p.pointer("/data/delta").and_then(Value::as_str) {
                        emit(d);
                        streamed |= !d.is_empty();
                    }
                }
            }
            ServerFrame::Event(_) => {}
            ServerFrame::Res(res) if res.id == req_id => {
                if !res.ok {
                    let msg = res
                        .error
                        .map(|e| e.message)
                        .unwrap_or_else(|| "request failed".into());
                    return fail(msg);
                }
                let payload = res.payload.unwrap_or(Value::Null);
                let status = payload
                    .get("status")
                    .and_then(Value::as_str)
                    .unwrap_or("error")
                    .to_owned();
                match status.as_str() {
                    "accepted" => continue,
                    "in_flight" => return fail(format!("run {run_id} is already in flight")),
                    _ => {}
                }
                if args.json {
                    emit(&format!("{payload}\n"));
                    return exit_for_status(&status);
                }
                if !streamed {
                    if let Some(ps) = payload
                        .pointer("/result/payloads")
                        .and_then(Value::as_array)
                    {
                        for p in ps
                            .iter()
                            .filter(|p| p.get("isError").and_then(Value::as_bool) != Some(true))
                        {
                            if let Some(t) = p.get("text").and_then(Value::as_str) {
                                emit(t);
                                streamed |= !t.is_empty();
                            }
                        }
                    }
                }
                if streamed {
                    emit("\n");
                }
                if status != "ok" {
                    let err = payload
                        .get("error")
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                        .unwrap_or_else(|| format!("run ended with status {status}"));
                    eprintln!(
                        "loopgate: run {run_id} {}: {err}",
                        if status == "timeout" {
                            "timed out"
                        } else {
                            "failed"
                        }
                    );
                }
                return exit_for_status(&status);
            }
            ServerFrame::Res(_) => {}
        }
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
                    emit(&render::status(&s));
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
