//! `agents.files.list|get|set`: an agent's bootstrap files for operators (the Control UI's
//! file editor), read and written safely in its workspace (`workspace_files`); the next
//! turn's prompt carries what was written.

use std::path::Path;

use ipc::gateway::{
    AgentFile, AgentFileConflict, AgentFileResult, AgentFilesGetParams, AgentFilesListParams,
    AgentFilesListResult, AgentFilesSetParams, ErrorShape,
};

use super::Answer;
use crate::config::Config;
use crate::workspace_files::{self as files, FileError, FileState};

/// The files `agents.files.list` lists (`IDENTITY.md` is not, as OpenClaw's).
const LISTED: &[&str] = &[
    "AGENTS.md",
    "SOUL.md",
    "USER.md",
    "BOOTSTRAP.md",
    "MEMORY.md",
];

/// The workspace of `agent_id` (`agent "<id>" not found` otherwise).
fn workspace<'a>(config: &'a Config, agent_id: &str) -> Result<&'a Path, ErrorShape> {
    config
        .agent(agent_id)
        .map(|a| a.workspace.as_path())
        .ok_or_else(|| ErrorShape::invalid(format!("agent {agent_id:?} not found")))
}

/// A missing file that a fresh workspace usually lacks.
fn expected_absent(name: &str) -> bool {
    matches!(name, "SOUL.md" | "USER.md" | "MEMORY.md")
}

fn shown(name: &str, state: FileState) -> AgentFile {
    let path = state.path.display().to_string();
    match state.present {
        None => AgentFile {
            name: name.to_owned(),
            path,
            missing: true,
            expected_absent: Some(expected_absent(name)),
            size: None,
            updated_at_ms: None,
            hash: None,
            content: None,
        },
        Some(p) => AgentFile {
            name: name.to_owned(),
            path,
            missing: false,
            expected_absent: None,
            size: Some(p.size),
            updated_at_ms: Some(p.updated_at_ms),
            hash: Some(p.hash),
            content: p.content,
        },
    }
}

fn refused(e: FileError) -> ErrorShape {
    match e {
        FileError::Changed { name, current } => {
            let details = AgentFileConflict {
                kind: "agent_file_conflict".into(),
                name: name.clone(),
                current_hash: current,
            };
            let shape =
                ErrorShape::invalid(format!("agent file {name:?} changed since it was read"));
            match serde_json::to_value(&details) {
                Ok(v) => shape.with_details(v),
                Err(_) => shape,
            }
        }
        FileError::Io(e) => ErrorShape::unavailable(format!("cannot use the workspace: {e}"), None),
        other => ErrorShape::invalid(other.to_string()),
    }
}

/// `f` on a blocking thread, for work that cannot fail.
async fn blocking_ok<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, ErrorShape> {
    blocking(move || Ok(f())).await
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, FileError> + Send + 'static,
) -> Result<T, ErrorShape> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ErrorShape::unavailable(format!("cannot use the workspace: {e}"), None))?
        .map_err(refused)
}

/// `agents.files.list`.
pub(super) async fn agents_files_list(
    config: &Config,
    p: AgentFilesListParams,
) -> Answer<AgentFilesListResult> {
    let ws = workspace(config, &p.agent_id)?.to_owned();
    let states = blocking_ok({
        let ws = ws.clone();
        move || {
            LISTED
                .iter()
                .map(|name| match files::read(&ws, name, false) {
                    Ok(s) => (*name, s),
                    // A file the gateway will not or cannot read (a link, FIFO, socket, hard
                    // link, one too large or unreadable) is listed as not there.
                    Err(e) => {
                        tracing::debug!(file = name, error = %e, "An agent file is listed as missing.");
                        (
                            *name,
                            FileState {
                                path: ws.join(name),
                                present: None,
                            },
                        )
                    }
                })
                .collect::<Vec<_>>()
        }
    })
    .await?;
    let files = states
        .into_iter()
        // `BOOTSTRAP.md` is listed while it is there (its setup is not done).
        .filter(|(name, s)| *name != "BOOTSTRAP.md" || s.present.is_some())
        .map(|(name, s)| shown(name, s))
        .collect();
    Ok(AgentFilesListResult {
        agent_id: p.agent_id,
        workspace: ws.display().to_string(),
        files,
    })
}

/// `agents.files.get`: the file with its text, or `missing` (not an error).
pub(super) async fn agents_files_get(
    config: &Config,
    p: AgentFilesGetParams,
) -> Answer<AgentFileResult> {
    let ws = workspace(config, &p.agent_id)?.to_owned();
    let state = blocking({
        let (ws, name) = (ws.clone(), p.name.clone());
        move || files::read(&ws, &name, true)
    })
    .await?;
    Ok(AgentFileResult {
        ok: None,
        agent_id: p.agent_id,
        workspace: ws.display().to_string(),
        file: shown(&p.name, state),
    })
}

/// `agents.files.set`: written whole, unless `expectedHash` names a hash the file no longer
/// has.
pub(super) async fn agents_files_set(
    config: &Config,
    p: AgentFilesSetParams,
) -> Answer<AgentFileResult> {
    if let Some(h) = &p.expected_hash {
        if h.len() != 64 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
            let short = if h.len() < 64 {
                "at /expectedHash: must not have fewer than 64 characters; "
            } else {
                ""
            };
            return Err(ErrorShape::invalid(format!(
                "invalid agents.files.set params: {short}at /expectedHash: must match pattern \"^[a-fA-F0-9]{{64}}$\""
            )));
        }
    }
    let ws = workspace(config, &p.agent_id)?.to_owned();
    let state = blocking({
        let ws = ws.clone();
        let (name, content, expected) = (p.name.clone(), p.content, p.expected_hash);
        move || files::write(&ws, &name, &content, expected.as_deref())
    })
    .await?;
    Ok(AgentFileResult {
        ok: Some(true),
        agent_id: p.agent_id,
        workspace: ws.display().to_string(),
        file: shown(&p.name, state),
    })
}
