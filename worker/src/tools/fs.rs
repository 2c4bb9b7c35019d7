//! The workspace tools. Every path is confined to the agent's workspace: relative paths are
//! joined to it, `..` may not climb out, absolute paths must lie inside it, and the deepest
//! existing ancestor is resolved through symlinks and checked again (no symlink escapes).

use std::path::{Component, Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::{exec_allowed, ToolCtx, ToolOutcome, DEFAULT_EXEC_TIMEOUT};

/// Largest file `read` returns, in bytes, and the default line limit.
const READ_MAX_BYTES: usize = 50 * 1024;
const READ_MAX_LINES: usize = 2000;
const EXEC_MAX_OUTPUT: usize = 50 * 1024;

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// Resolves `rel` inside `workspace`, refusing anything that escapes it.
pub fn resolve(workspace: &Path, rel: &str) -> Result<PathBuf, String> {
    std::fs::create_dir_all(workspace).map_err(|e| format!("cannot create the workspace: {e}"))?;
    let root = std::fs::canonicalize(workspace)
        .map_err(|e| format!("cannot resolve the workspace: {e}"))?;
    let raw = Path::new(rel);
    let joined = if raw.is_absolute() {
        raw.to_owned()
    } else {
        root.join(raw)
    };
    let mut normal = PathBuf::new();
    for c in joined.components() {
        match c {
            Component::ParentDir => {
                if !normal.pop() {
                    return Err(format!("path {rel:?} escapes the workspace"));
                }
            }
            Component::CurDir => {}
            other => normal.push(other.as_os_str()),
        }
    }
    if !normal.starts_with(&root) {
        return Err(format!("path {rel:?} is outside the workspace"));
    }
    // Follow symlinks of the deepest existing ancestor.
    let mut existing = normal.clone();
    let mut rest = Vec::new();
    while !existing.exists() {
        match (
            existing.file_name().map(|n| n.to_owned()),
            existing.parent().map(Path::to_owned),
        ) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                existing = parent;
            }
            _ => break,
        }
    }
    let real =
        std::fs::canonicalize(&existing).map_err(|e| format!("cannot resolve {rel:?}: {e}"))?;
    if !real.starts_with(&root) {
        return Err(format!(
            "path {rel:?} leads outside the workspace (symlink)"
        ));
    }
    let mut out = real;
    for name in rest.into_iter().rev() {
        out.push(name);
    }
    Ok(out)
}

async fn blocking<F>(f: F) -> ToolOutcome
where
    F: FnOnce() -> ToolOutcome + Send + 'static,
{
    tokio::task::spawn_blocking(f)
        .await
        .unwrap_or_else(|e| ToolOutcome::err(format!("tool task failed: {e}")))
}

pub async fn read(workspace: &Path, args: &Value) -> ToolOutcome {
    let (ws, path) = (
        workspace.to_owned(),
        arg(args, "path").unwrap_or("").to_owned(),
    );
    let offset = args
        .get("offset")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .max(1) as usize;
    let limit = args
        .get("limit")
        .and_then(Value::as_u64)
        .map_or(READ_MAX_LINES, |l| l as usize);
    blocking(move || {
        let p = match resolve(&ws, &path) {
            Ok(p) => p,
            Err(e) => return ToolOutcome::err(e),
        };
        let bytes = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) => return ToolOutcome::err(format!("cannot read {path}: {e}")),
        };
        let text = String::from_utf8_lossy(&bytes);
        let mut out = String::new();
        for line in text.lines().skip(offset - 1).take(limit) {
            if out.len() + line.len() + 1 > READ_MAX_BYTES {
                out.push_str("[... truncated at 50 KiB]\n");
                break;
            }
            out.push_str(line);
            out.push('\n');
        }
        ToolOutcome::ok(out)
    })
    .await
}

pub async fn write(workspace: &Path, args: &Value) -> ToolOutcome {
    let (ws, path) = (
        workspace.to_owned(),
        arg(args, "path").unwrap_or("").to_owned(),
    );
    let content = arg(args, "content").unwrap_or("").to_owned();
    blocking(move || {
        let p = match resolve(&ws, &path) {
            Ok(p) => p,
            Err(e) => return ToolOutcome::err(e),
        };
        if let Some(parent) = p.parent() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                return ToolOutcome::err(format!("cannot create {}: {e}", parent.display()));
            }
        }
        let changed = std::fs::read(&p)
            .map(|old| old != content.as_bytes())
            .unwrap_or(true);
        match std::fs::write(&p, content.as_bytes()) {
            Ok(()) => ToolOutcome::ok(format!(
                "{{\"changed\":{changed},\"bytes\":{}}}",
                content.len()
            )),
            Err(e) => ToolOutcome::err(format!("cannot write {path}: {e}")),
        }
    })
    .await
}

pub async fn edit(workspace: &Path, args: &Value) -> ToolOutcome {
    let (ws, path) = (
        workspace.to_owned(),
        arg(args, "path").unwrap_or("").to_owned(),
    );
    let edits: Vec<(String, String)> = args
        .get("edits")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .map(|e| {
                    (
                        arg(e, "oldText").unwrap_or("").to_owned(),
                        arg(e, "newText").unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    blocking(move || {
        let p = match resolve(&ws, &path) {
            Ok(p) => p,
            Err(e) => return ToolOutcome::err(e),
        };
        let mut text = match std::fs::read_to_string(&p) {
            Ok(t) => t,
            Err(e) => return ToolOutcome::err(format!("cannot read {path}: {e}")),
        };
        for (i, (old, new)) in edits.iter().enumerate() {
            match text.matches(old.as_str()).count() {
                0 => {
                    return ToolOutcome::err(format!("edit {}: oldText not found in {path}", i + 1))
                }
                1 => text = text.replacen(old.as_str(), new, 1),
                n => {
                    return ToolOutcome::err(format!(
                        "edit {}: oldText occurs {n} times in {path}; make it unique",
                        i + 1
                    ))
                }
            }
        }
        match std::fs::write(&p, text.as_bytes()) {
            Ok(()) => ToolOutcome::ok(format!("applied {} edit(s) to {path}", edits.len())),
            Err(e) => ToolOutcome::err(format!("cannot write {path}: {e}")),
        }
    })
    .await
}

pub async fn ls(workspace: &Path, args: &Value) -> ToolOutcome {
    let (ws, path) = (
        workspace.to_owned(),
        arg(args, "path").unwrap_or(".").to_owned(),
    );
    blocking(move || {
        let p = match resolve(&ws, &path) {
            Ok(p) => p,
            Err(e) => return ToolOutcome::err(e),
        };
        let entries = match std::fs::read_dir(&p) {
            Ok(e) => e,
            Err(e) => return ToolOutcome::err(format!("cannot list {path}: {e}")),
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                    format!("{name}/")
                } else {
                    name
                }
            })
            .collect();
        names.sort();
        ToolOutcome::ok(names.join("\n"))
    })
    .await
}

pub async fn exec(ctx: &ToolCtx, args: &Value) -> ToolOutcome {
    let command = arg(args, "command").unwrap_or("").to_owned();
    if let Err(why) = exec_allowed(&ctx.exec, &command) {
        return ToolOutcome::err(why);
    }
    // The operator's limit caps whatever the model asks for.
    let limit = ctx
        .exec
        .timeout_ms
        .map(Duration::from_millis)
        .unwrap_or(DEFAULT_EXEC_TIMEOUT);
    let timeout = args
        .get("timeoutSeconds")
        .and_then(Value::as_u64)
        .map_or(limit, |s| Duration::from_secs(s).min(limit));
    if let Err(e) = std::fs::create_dir_all(&ctx.workspace) {
        return ToolOutcome::err(format!("cannot create the workspace: {e}"));
    }
    let mut child = match tokio::process::Command::new("sh")
        .arg("-c")
        .arg(&command)
        .current_dir(&ctx.workspace)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return ToolOutcome::err(format!("cannot run the command: {e}")),
    };
    let pgid = child.id();
    // If this future is dropped (the run was aborted), the whole group goes, not just `sh`.
    let mut group = hookcmd::GroupKill(pgid);
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let progress = ctx.progress.clone();
    let read_all = |s: Option<tokio::process::ChildStdout>| async move {
        let mut buf = Vec::new();
        let Some(mut s) = s else {
            return buf;
        };
        let mut chunk = vec![0u8; 8192];
        while buf.len() < EXEC_MAX_OUTPUT {
            let room = chunk.len().min(EXEC_MAX_OUTPUT - buf.len());
            match s.read(&mut chunk[..room]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    // Partial output is best effort: a full queue drops an update, never
                    // blocks the command (the result has everything).
                    if let Some(tx) = &progress {
                        let _ = tx.try_send(String::from_utf8_lossy(&chunk[..n]).into_owned());
                    }
                }
            }
        }
        buf
    };
    let read_err = |s: Option<tokio::process::ChildStderr>| async move {
        let mut buf = Vec::new();
        if let Some(mut s) = s {
            let _ = (&mut s)
                .take(EXEC_MAX_OUTPUT as u64)
                .read_to_end(&mut buf)
                .await;
        }
        buf
    };
    let run = async {
        let (out, err) = tokio::join!(read_all(stdout.take()), read_err(stderr.take()));
        let status = child.wait().await;
        (out, err, status)
    };
    match tokio::time::timeout(timeout, run).await {
        Ok((out, err, status)) => {
            group.0 = None;
            let code = status.ok().and_then(|s| s.code());
            let mut text = String::from_utf8_lossy(&out).into_owned();
            if !err.is_empty() {
                text.push_str("\n[stderr]\n");
                text.push_str(&String::from_utf8_lossy(&err));
            }
            match code {
                Some(0) => ToolOutcome::ok(text),
                Some(c) => ToolOutcome::err(format!("exit status {c}\n{text}")),
                None => ToolOutcome::err(format!("killed by a signal\n{text}")),
            }
        }
        Err(_) => {
            // Kill the whole process group, not just the shell.
            group.kill();
            ToolOutcome::err(format!(
                "command timed out after {} s and was killed",
                timeout.as_secs()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confinement() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        assert!(resolve(&ws, "a.txt").is_ok());
        assert!(resolve(&ws, "sub/../a.txt").is_ok());
        assert!(resolve(&ws, "new/dir/file").is_ok());
        assert!(resolve(&ws, "../outside").is_err());
        assert!(resolve(&ws, "/etc/passwd").is_err());
        std::os::unix::fs::symlink("/etc", ws.join("link")).unwrap();
        assert!(resolve(&ws, "link/passwd").unwrap_err().contains("symlink"));
        let abs_inside = std::fs::canonicalize(&ws).unwrap().join("x");
        assert!(resolve(&ws, abs_inside.to_str().unwrap()).is_ok());
    }
}
