//! The workspace tools. Every path is confined to the agent's workspace: relative paths are
//! joined to it, `..` may not climb out, absolute paths must lie inside it, and every
//! symlink on the way (intermediate components, the final one, dangling links included) is
//! followed by hand and must point inside the workspace. Files the tools write are never
//! executable: nothing the model writes can become a program loopgate or `exec` runs.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use std::sync::Arc;

use serde_json::Value;

use super::budget::DiskBudget;
use super::ToolOutcome;

/// Largest file `read` returns, in bytes, and the default line limit.
const READ_MAX_BYTES: usize = 50 * 1024;
const READ_MAX_LINES: usize = 2000;
/// Most bytes of a file `read` and `edit` load (a huge file must not exhaust the worker).
const LOAD_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// Most symlinks followed while resolving one path (as the kernel's `ELOOP`).
const MAX_SYMLINK_HOPS: u32 = 40;

fn arg<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// `path` with `.` and `..` applied lexically; `None` if `..` climbs above the root.
fn normalize(path: &Path) -> Option<PathBuf> {
    let mut normal = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                if !normal.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => normal.push(other.as_os_str()),
        }
    }
    Some(normal)
}

/// The components of `path` below `root` (`path` starts with `root`).
fn below(root: &Path, path: &Path) -> VecDeque<OsString> {
    path.strip_prefix(root)
        .map(|rest| {
            rest.components()
                .map(|c| c.as_os_str().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Why a path is refused; its text is the tool's error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PathRefused {
    /// It leads out of the workspace (`..` above it, a path elsewhere, a link pointing out).
    LeavesWorkspace(String),
    /// Anything else (a NUL byte, a link loop, an I/O error).
    Other(String),
}

impl From<PathRefused> for String {
    fn from(e: PathRefused) -> String {
        match e {
            PathRefused::LeavesWorkspace(m) | PathRefused::Other(m) => m,
        }
    }
}

/// Resolves `rel` inside `workspace`, refusing anything that escapes it. The result has no
/// symlink in it (up to what does not exist yet), so opening it cannot leave the workspace
/// unless the tree changes in between.
pub fn resolve(workspace: &Path, rel: &str) -> Result<PathBuf, PathRefused> {
    use PathRefused::{LeavesWorkspace, Other};
    std::fs::create_dir_all(workspace)
        .map_err(|e| Other(format!("cannot create the workspace: {e}")))?;
    let root = std::fs::canonicalize(workspace)
        .map_err(|e| Other(format!("cannot resolve the workspace: {e}")))?;
    let raw = Path::new(rel);
    if rel.contains('\0') {
        return Err(Other(format!("path {rel:?} contains a NUL byte")));
    }
    let joined = if raw.is_absolute() {
        raw.to_owned()
    } else {
        root.join(raw)
    };
    let normal = normalize(&joined)
        .ok_or_else(|| LeavesWorkspace(format!("path {rel:?} escapes the workspace")))?;
    if !normal.starts_with(&root) {
        return Err(LeavesWorkspace(format!(
            "path {rel:?} is outside the workspace"
        )));
    }
    let mut queue = below(&root, &normal);
    let mut cur = root.clone();
    let mut hops = 0;
    while let Some(name) = queue.pop_front() {
        let next = cur.join(&name);
        match std::fs::symlink_metadata(&next) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // Nothing below a missing component exists either.
                cur = next;
                cur.extend(queue.drain(..));
                break;
            }
            Err(e) => return Err(Other(format!("cannot resolve {rel:?}: {e}"))),
            Ok(m) if m.file_type().is_symlink() => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(Other(format!("path {rel:?}: too many levels of symlinks")));
                }
                let target = std::fs::read_link(&next)
                    .map_err(|e| Other(format!("cannot resolve {rel:?}: {e}")))?;
                // `cur` holds no symlink, so `..` in the target can be applied lexically.
                let to = normalize(&cur.join(target)).unwrap_or_default();
                if !to.starts_with(&root) {
                    return Err(LeavesWorkspace(format!(
                        "path {rel:?} leads outside the workspace (symlink)"
                    )));
                }
                let mut rest = below(&root, &to);
                rest.extend(queue.drain(..));
                queue = rest;
                cur = root.clone();
            }
            Ok(_) => cur = next,
        }
    }
    Ok(cur)
}

/// Opens a resolved path for reading as a regular file only: never through a link put in its
/// place since it was resolved (`ELOOP`), never blocking on a FIFO or a device (refused as
/// `InvalidInput`, "not a regular file"). The file tools, the memory tools and their index
/// read through it.
pub(super) fn open_plain(p: &Path) -> std::io::Result<(std::fs::File, std::fs::Metadata)> {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(p)?;
    let meta = f.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ));
    }
    Ok((f, meta))
}

/// Reads at most [`LOAD_MAX_BYTES`] of a resolved file, refusing anything but a regular file
/// (a FIFO or a device would block or never end).
pub(super) fn load(p: &Path, shown: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let (f, _) = open_plain(p).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let mut buf = Vec::new();
    f.take(LOAD_MAX_BYTES)
        .read_to_end(&mut buf)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    Ok(buf)
}

/// Writes `bytes` to a resolved path as a plain, non-executable file: created `0644` (less the
/// umask), an existing file loses its execute, setuid and setgid bits, and a symlink put in
/// the path's place since it was resolved is not followed.
pub(super) fn store(p: &Path, bytes: &[u8], shown: &str) -> Result<(), String> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o644)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(p)
        .map_err(|e| format!("cannot write {shown}: {e}"))?;
    let meta = f
        .metadata()
        .map_err(|e| format!("cannot write {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("cannot write {shown}: not a regular file"));
    }
    let mode = meta.permissions().mode();
    if mode & 0o7111 != 0 {
        f.set_permissions(std::fs::Permissions::from_mode(mode & 0o666))
            .map_err(|e| format!("cannot write {shown}: {e}"))?;
    }
    f.write_all(bytes)
        .map_err(|e| format!("cannot write {shown}: {e}"))
}

pub(super) async fn blocking<F>(f: F) -> ToolOutcome
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
        let bytes = match load(&p, &path) {
            Ok(b) => b,
            Err(e) => return ToolOutcome::err(e),
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

pub async fn write(workspace: &Path, budget: Arc<DiskBudget>, args: &Value) -> ToolOutcome {
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
        let old = load(&p, &path).ok();
        let changed = old.as_deref().is_none_or(|old| old != content.as_bytes());
        let old_len = old.map_or(0, |o| o.len() as u64);
        let taken = match budget.take(&p, &path, old_len, content.len() as u64) {
            Ok(t) => t,
            Err(e) => return ToolOutcome::err(e),
        };
        match store(&p, content.as_bytes(), &path) {
            Ok(()) => ToolOutcome::ok(format!(
                "{{\"changed\":{changed},\"bytes\":{}}}",
                content.len()
            )),
            Err(e) => {
                taken.give_back();
                ToolOutcome::err(e)
            }
        }
    })
    .await
}

pub async fn edit(workspace: &Path, budget: Arc<DiskBudget>, args: &Value) -> ToolOutcome {
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
        let mut text = match load(&p, &path).map(String::from_utf8) {
            Ok(Ok(t)) => t,
            Ok(Err(_)) => return ToolOutcome::err(format!("cannot edit {path}: not UTF-8 text")),
            Err(e) => return ToolOutcome::err(e),
        };
        let old_len = text.len() as u64;
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
        let taken = match budget.take(&p, &path, old_len, text.len() as u64) {
            Ok(t) => t,
            Err(e) => return ToolOutcome::err(e),
        };
        match store(&p, text.as_bytes(), &path) {
            Ok(()) => ToolOutcome::ok(format!("applied {} edit(s) to {path}", edits.len())),
            Err(e) => {
                taken.give_back();
                ToolOutcome::err(e)
            }
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
        assert!(String::from(resolve(&ws, "link/passwd").unwrap_err()).contains("symlink"));
        let abs_inside = std::fs::canonicalize(&ws).unwrap().join("x");
        assert!(resolve(&ws, abs_inside.to_str().unwrap()).is_ok());
    }

    #[test]
    fn symlinks_never_lead_out_even_dangling_or_last() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(outside.join("x"), ws.join("dangle")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("out")).unwrap();
        std::os::unix::fs::symlink("../../outside/y", ws.join("sub/rel")).unwrap();
        std::os::unix::fs::symlink("loop2", ws.join("loop1")).unwrap();
        std::os::unix::fs::symlink("loop1", ws.join("loop2")).unwrap();
        for bad in ["dangle", "out", "out/new", "sub/rel", "sub/rel/deeper"] {
            let e = String::from(resolve(&ws, bad).unwrap_err());
            assert!(e.contains("outside the workspace"), "{bad}: {e}");
        }
        assert!(String::from(resolve(&ws, "loop1").unwrap_err()).contains("too many"));
        // Links that stay inside resolve to their real target, dangling ones too.
        std::os::unix::fs::symlink("sub", ws.join("in")).unwrap();
        std::os::unix::fs::symlink("sub/later", ws.join("in_dangle")).unwrap();
        let real = std::fs::canonicalize(&ws).unwrap();
        assert_eq!(resolve(&ws, "in/f").unwrap(), real.join("sub/f"));
        assert_eq!(resolve(&ws, "in_dangle").unwrap(), real.join("sub/later"));
    }

    #[test]
    fn written_files_are_never_executable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("handler");
        std::fs::write(&p, "old").unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o4755)).unwrap();
        store(&p, b"#!/bin/sh\nid\n", "handler").unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode, 0o644);
        let fresh = dir.path().join("fresh");
        store(&fresh, b"x", "fresh").unwrap();
        assert_eq!(
            std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o111,
            0
        );
        // A symlink swapped in after resolution is not followed.
        std::os::unix::fs::symlink(dir.path().join("target"), dir.path().join("swapped")).unwrap();
        assert!(store(&dir.path().join("swapped"), b"x", "swapped").is_err());
        assert!(!dir.path().join("target").exists());
    }
}
