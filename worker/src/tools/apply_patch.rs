//! `apply_patch`: a `*** Begin Patch` patch over the workspace (the format in `patch.rs`).
//! All of it or none of it: every file's new text is worked out, every path confined to the
//! workspace (as the other file tools confine theirs) and the disk budget charged before
//! anything is written, then the files change as one (`patch_write.rs`: new bytes staged
//! beside each file first, then renamed into place, old versions kept under links until
//! the end and put back if a step fails). OpenClaw writes file by file and leaves the first
//! changed when the second fails. A file over 16 MiB is not patched; a deleted link is the
//! link, not what it points to. Its words are OpenClaw's: `Success. Updated the following files:` and, for a
//! failure, its JSON error with the reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::budget::DiskBudget;
use super::fs::{blocking, load, resolve, PathRefused};
use super::patch::{apply_chunks, parse, FileOp};
use super::patch_write::{write_all, Write};
use super::ToolOutcome;

/// Bytes a file the patch updates may have (it is held and indexed in memory).
const PATCH_FILE_MAX_BYTES: u64 = 16 << 20;

/// A file as the patch has made it so far.
enum Now {
    Absent,
    /// As it is on disk, not read (a deletion needs no contents).
    OnDisk,
    Bytes(Vec<u8>),
}

/// What the patch does to one file: its size and (when read) bytes before, and now.
struct Change {
    path: PathBuf,
    shown: String,
    before_size: Option<u64>,
    before: Option<Vec<u8>>,
    now: Now,
}

impl Change {
    fn exists(&self) -> bool {
        !matches!(self.now, Now::Absent)
    }

    /// Its bytes now, read from disk if the patch has not read them yet.
    fn bytes(&mut self) -> Result<Option<&[u8]>, String> {
        if let Now::OnDisk = self.now {
            let (_, bytes) = on_disk(&self.path, &self.shown, true)?;
            self.before.clone_from(&bytes);
            self.now = bytes.map_or(Now::Absent, Now::Bytes);
        }
        Ok(match &self.now {
            Now::Bytes(b) => Some(b),
            _ => None,
        })
    }

    fn changed(&self) -> bool {
        match &self.now {
            Now::OnDisk => false,
            Now::Absent => self.before_size.is_some(),
            Now::Bytes(b) => self.before.as_ref() != Some(b),
        }
    }

    /// Its new bytes (`None`: removed).
    fn after(&self) -> Option<&[u8]> {
        match &self.now {
            Now::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

/// The files a patch added, changed (a moved file under its new name) and deleted, named
/// from the workspace, each once.
#[derive(Default)]
struct Summary {
    added: Vec<String>,
    modified: Vec<String>,
    deleted: Vec<String>,
}

impl Summary {
    fn note(list: &mut Vec<String>, path: String) {
        if !list.contains(&path) {
            list.push(path);
        }
    }

    fn text(&self) -> String {
        if self.added.is_empty() && self.modified.is_empty() && self.deleted.is_empty() {
            return "No files were modified.".into();
        }
        let mut out = String::from("Success. Updated the following files:");
        for (mark, paths) in [
            ("A", &self.added),
            ("M", &self.modified),
            ("D", &self.deleted),
        ] {
            for p in paths {
                out.push_str(&format!("\n{mark} {p}"));
            }
        }
        out
    }
}

/// OpenClaw's failure of a tool: `{status:"error", tool, error}`, indented.
#[derive(serde::Serialize)]
struct Failed<'a> {
    status: &'static str,
    tool: &'static str,
    error: &'a str,
}

fn failed(error: &str) -> ToolOutcome {
    let shown = Failed {
        status: "error",
        tool: "apply_patch",
        error,
    };
    ToolOutcome::err(serde_json::to_string_pretty(&shown).unwrap_or_else(|_| error.to_owned()))
}

pub async fn apply_patch(workspace: &Path, budget: Arc<DiskBudget>, args: &Value) -> ToolOutcome {
    let ws = workspace.to_owned();
    let input = args
        .get("input")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    blocking(move || match run(&ws, &budget, &input) {
        Ok(summary) => ToolOutcome::ok(summary.text()),
        Err(e) => failed(&e),
    })
    .await
}

fn run(ws: &Path, budget: &DiskBudget, input: &str) -> Result<Summary, String> {
    let ops = parse(input)?;
    let (changes, summary) = plan(ws, &ops)?;
    commit(budget, &changes)?;
    Ok(summary)
}

/// The files as they stand while the patch is worked out: each touched one as it is on
/// disk and as the patch has made it so far (later parts see earlier ones).
#[derive(Default)]
struct Files {
    by_path: BTreeMap<PathBuf, Change>,
}

impl Files {
    /// The file at `path` (its bytes read when `read`: not for a deletion, which removes a
    /// link itself and needs no contents).
    fn entry(&mut self, path: PathBuf, shown: &str, read: bool) -> Result<&mut Change, String> {
        if !self.by_path.contains_key(&path) {
            let (before_size, before) = on_disk(&path, shown, read)?;
            let now = match (&before, before_size) {
                (Some(b), _) => Now::Bytes(b.clone()),
                (None, Some(_)) => Now::OnDisk,
                (None, None) => Now::Absent,
            };
            let change = Change {
                path: path.clone(),
                shown: shown.to_owned(),
                before_size,
                before,
                now,
            };
            self.by_path.insert(path.clone(), change);
        }
        self.by_path
            .get_mut(&path)
            .ok_or_else(|| format!("cannot read {shown}"))
    }
}

/// A file's size and (when `read`) bytes, `None` when nothing is there. A file larger than
/// a patch may update is refused, never read in part.
fn on_disk(p: &Path, shown: &str, read: bool) -> Result<(Option<u64>, Option<Vec<u8>>), String> {
    let meta = match std::fs::symlink_metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((None, None)),
        Err(e) => return Err(format!("cannot read {shown}: {e}")),
        Ok(m) => m,
    };
    if !read {
        if meta.is_dir() {
            return Err(format!("cannot delete {shown}: it is a directory"));
        }
        return Ok((Some(meta.len()), None));
    }
    if meta.len() > PATCH_FILE_MAX_BYTES {
        return Err(format!(
            "Failed to read file to update {}: larger than {} MiB",
            p.display(),
            PATCH_FILE_MAX_BYTES >> 20
        ));
    }
    let bytes = load(p, shown)?;
    Ok((Some(bytes.len() as u64), Some(bytes)))
}

/// A path of the patch inside the workspace, refused in OpenClaw's words if it leads out.
fn confined(ws: &Path, path: &str) -> Result<PathBuf, String> {
    resolve(ws, path).map_err(|e| match e {
        PathRefused::LeavesWorkspace(_) => {
            format!("Path escapes sandbox root ({}): {path}", ws.display())
        }
        PathRefused::Other(m) => m,
    })
}

/// Every file's new bytes, or why the patch cannot apply (nothing written yet).
fn plan(ws: &Path, ops: &[FileOp]) -> Result<(Vec<Change>, Summary), String> {
    let root = std::fs::canonicalize(ws).unwrap_or_else(|_| ws.to_owned());
    let named = |p: &Path| {
        p.strip_prefix(&root)
            .map_or_else(|_| p.display().to_string(), |r| r.display().to_string())
    };
    let mut files = Files::default();
    let mut summary = Summary::default();
    for op in ops {
        let path = op.path();
        match op {
            FileOp::Add { text, .. } => {
                let p = confined(ws, path)?;
                let name = named(&p);
                let f = files.entry(p, path, false)?;
                if f.exists() {
                    return Err(format!(
                        "Cannot create {path}: the file already exists. Use \"*** Update File: {path}\" to change it, or delete it earlier in the same patch."
                    ));
                }
                f.now = Now::Bytes(text.clone().into_bytes());
                Summary::note(&mut summary.added, name);
            }
            FileOp::Delete { .. } => {
                // The name itself goes (a link, not what it points to).
                let p = link_itself(ws, path)?;
                let name = named(&p);
                let f = files.entry(p, path, false)?;
                if !f.exists() {
                    return Err("file not found".into());
                }
                f.now = Now::Absent;
                Summary::note(&mut summary.deleted, name);
            }
            FileOp::Update {
                move_to, chunks, ..
            } => {
                let p = confined(ws, path)?;
                let shown = p.display().to_string();
                let name = named(&p);
                let f = files.entry(p, path, true)?;
                let Some(bytes) = f.bytes()? else {
                    return Err(format!(
                        "Failed to read file to update {shown}: path not found"
                    ));
                };
                let text = std::str::from_utf8(bytes).map_err(|_| {
                    format!("Failed to read file to update {shown}: not UTF-8 text")
                })?;
                let new = apply_chunks(text, chunks, &shown)?.into_bytes();
                match move_to {
                    Some(dest) => {
                        f.now = Now::Absent;
                        let q = confined(ws, dest)?;
                        let dest_name = named(&q);
                        files.entry(q, dest, false)?.now = Now::Bytes(new);
                        Summary::note(&mut summary.modified, dest_name);
                    }
                    None => {
                        f.now = Now::Bytes(new);
                        Summary::note(&mut summary.modified, name);
                    }
                }
            }
        }
    }
    let changes = files
        .by_path
        .into_values()
        .filter(Change::changed)
        .collect();
    Ok((changes, summary))
}

/// `path` inside the workspace with its directory resolved and its last name kept as it
/// is: a link there is the link, not what it points to.
fn link_itself(ws: &Path, path: &str) -> Result<PathBuf, String> {
    let rel = Path::new(path);
    let name = match rel.file_name() {
        Some(n)
            if rel
                .components()
                .next_back()
                .is_some_and(|c| matches!(c, std::path::Component::Normal(_))) =>
        {
            n
        }
        _ => return confined(ws, path),
    };
    let dir = rel
        .parent()
        .map(|d| d.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(confined(ws, &dir)?.join(name))
}

/// Charges the disk budget for every file, then writes them all as one change
/// (`patch_write.rs`): all of them, or none.
fn commit(budget: &DiskBudget, changes: &[Change]) -> Result<(), String> {
    let size = |b: Option<&[u8]>| b.map_or(0, |b| b.len() as u64);
    // Every new file's bytes are staged before any old one goes: the floor is for them all.
    let staged: u64 = changes.iter().map(|c| size(c.after())).sum();
    budget.has_room(staged, "the patch's files")?;
    let mut taken = Vec::new();
    for c in changes {
        match budget.take(
            &c.path,
            &c.shown,
            c.before_size.unwrap_or(0),
            size(c.after()),
        ) {
            Ok(t) => taken.push(t),
            Err(e) => {
                taken.into_iter().for_each(|t| t.give_back());
                return Err(e);
            }
        }
    }
    let writes: Vec<Write<'_>> = changes
        .iter()
        .map(|c| Write {
            path: &c.path,
            shown: &c.shown,
            after: c.after(),
        })
        .collect();
    if let Err(e) = write_all(&writes) {
        taken.into_iter().for_each(|t| t.give_back());
        return Err(e);
    }
    Ok(())
}
