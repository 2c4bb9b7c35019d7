//! `loopgate sessions`, `loopgate history` and `loopgate logs`: the session index, one
//! session's transcript and the gateway's log lines, over the same methods OpenClaw's
//! clients use (`sessions.list`, `chat.history`, `logs.tail`).

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use ipc::gateway::{
    ChatHistoryParams, LogsTailParams, LogsTailResult, Method, SessionsListParams,
    SessionsListResult,
};
use serde_json::Value;

use super::{emit, fail, Client};

/// How often `loopgate logs --follow` asks for new lines.
const FOLLOW_EVERY: Duration = Duration::from_secs(1);

pub async fn sessions(socket: &Path, agent: Option<String>, limit: u32, as_json: bool) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let params = SessionsListParams {
        limit: Some(limit),
        agent_id: agent,
        ..Default::default()
    };
    let v: Value = match client.ask(Method::SessionsList, &params).await {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    if as_json {
        emit(&format!("{v}\n"));
        return ExitCode::SUCCESS;
    }
    match serde_json::from_value::<SessionsListResult>(v) {
        Ok(page) => {
            emit(&super::render::sessions(&page));
            ExitCode::SUCCESS
        }
        Err(e) => fail(format!("unexpected sessions.list reply: {e}")),
    }
}

pub async fn history(socket: &Path, key: String, limit: u32, as_json: bool) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let params = ChatHistoryParams {
        session_key: key,
        limit: Some(limit),
        ..Default::default()
    };
    let v: Value = match client.ask(Method::ChatHistory, &params).await {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    if as_json {
        emit(&format!("{v}\n"));
    } else {
        emit(&super::render::history(&v));
    }
    ExitCode::SUCCESS
}

pub async fn logs(socket: &Path, limit: u32, follow: bool) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let mut cursor: Option<u64> = None;
    loop {
        let params = LogsTailParams {
            cursor,
            limit: Some(u64::from(limit)),
            max_bytes: None,
        };
        let tail: LogsTailResult = match client.ask(Method::LogsTail, &params).await {
            Ok(t) => t,
            Err(e) => return fail(e),
        };
        if tail.truncated == Some(true) && cursor.is_some() {
            emit(&format!(
                "... {} bytes of older lines were dropped before they were read\n",
                tail.skipped_bytes.unwrap_or(0)
            ));
        }
        let mut text = String::new();
        for line in &tail.lines {
            text.push_str(line);
            text.push('\n');
        }
        emit(&text);
        if !follow {
            return ExitCode::SUCCESS;
        }
        cursor = Some(tail.cursor);
        tokio::time::sleep(FOLLOW_EVERY).await;
    }
}
