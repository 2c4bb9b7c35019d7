//! `apply_patch`: a `*** Begin Patch` patch over the workspace (the format in `patch.rs`).
//! All of it or none of it: every file's new text is worked out, every path confined to the
//! workspace (as the other file tools confine theirs) and the disk budget charged before
//! anything is written; if a write then fails, the files already written get their old
//! bytes back. (OpenClaw writes file by file and leaves the first changed when the second
//! fails.) Its words are OpenClaw's: `Success. Updated the following files:` and, for a
//! failure, its JSON error with the reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::budget::DiskBudget;
use super::fs::{blocking, load, resolve, store};
use super::patch::{apply_chunks, parse, FileOp};
use super::ToolOutcome;

/// What the patch does to one file: its bytes before (`None`: absent) and after.
struct Change {
    path: PathBuf,
    shown: String,
    before: Option<Vec<u8>>,
    after: Option<Vec<u8>>,
}

/// The files a patch added, changed (a moved file under its new name) and deleted.
#[derive(Default)]
struct Summary {
    added: Vec<String>,
    modified: Vec<String>,
    deleted: Vec<String>,
}

impl Summary {
    fn text(&self) -> String {
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

/// The files as they stand while the patch is worked out: each touched one's bytes on disk
/// and as the patch has made them so far (later parts see earlier ones).
#[derive(Default)]
struct Files {
    by_path: BTreeMap<PathBuf, Change>,
}

impl Files {
    fn entry(&mut self, path: PathBuf, shown: &str) -> Result<&mut Change, String> {
        if !self.by_path.contains_key(&path) {
            let before = read_if_there(&path, shown)?;
            let change = Change {
                path: path.clone(),
                shown: shown.to_owned(),
                after: before.clone(),
                before,
            };
            self.by_path.insert(path.clone(), change);
        }
        self.by_path
            .get_mut(&path)
            .ok_or_else(|| format!("cannot read {shown}"))
    }
}

/// A file's bytes, `None` when nothing is there.
fn read_if_there(p: &Path, shown: &str) -> Result<Option<Vec<u8>>, String> {
    match std::fs::symlink_metadata(p) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("cannot read {shown}: {e}")),
        Ok(_) => load(p, shown).map(Some),
    }
}

/// A path of the patch inside the workspace, refused in OpenClaw's words if it leads out.
fn confined(ws: &Path, path: &str) -> Result<PathBuf, String> {
    resolve(ws, path).map_err(|e| {
        if ["escapes", "outside"].iter().any(|w| e.contains(w)) {
            format!("Path escapes sandbox root ({}): {path}", ws.display())
        } else {
            e
        }
    })
}

/// Every file's new bytes, or why the patch cannot apply (nothing written yet).
fn plan(ws: &Path, ops: &[FileOp]) -> Result<(Vec<Change>, Summary), String> {
    let mut files = Files::default();
    let mut summary = Summary::default();
    for op in ops {
        let path = op.path();
        let p = confined(ws, path)?;
        match op {
            FileOp::Add { text, .. } => {
                let f = files.entry(p, path)?;
                if f.after.is_some() {
                    return Err(format!(
                        "Cannot create {path}: the file already exists. Use \"*** Update File: {path}\" to change it, or delete it earlier in the same patch."
                    ));
                }
                f.after = Some(text.clone().into_bytes());
                summary.added.push(path.to_owned());
            }
            FileOp::Delete { .. } => {
                let f = files.entry(p, path)?;
                if f.after.take().is_none() {
                    return Err("file not found".into());
                }
                summary.deleted.push(path.to_owned());
            }
            FileOp::Update {
                move_to, chunks, ..
            } => {
                let shown = p.display().to_string();
                let f = files.entry(p, path)?;
                let Some(bytes) = &f.after else {
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
                        f.after = None;
                        let q = confined(ws, dest)?;
                        files.entry(q, dest)?.after = Some(new);
                        summary.modified.push(dest.clone());
                    }
                    None => {
                        f.after = Some(new);
                        summary.modified.push(path.to_owned());
                    }
                }
            }
        }
    }
    let changes = files
        .by_path
        .into_values()
        .filter(|c| c.before != c.after)
        .collect();
    Ok((changes, summary))
}

/// Charges the disk budget for every file, then writes them (deletions last); a failed
/// write puts back what was written before it, so the workspace is as it was.
fn commit(budget: &DiskBudget, changes: &[Change]) -> Result<(), String> {
    let size = |b: &Option<Vec<u8>>| b.as_ref().map_or(0, |b| b.len() as u64);
    let mut taken = Vec::new();
    for c in changes {
        match budget.take(&c.path, &c.shown, size(&c.before), size(&c.after)) {
            Ok(t) => taken.push(t),
            Err(e) => {
                taken.into_iter().for_each(|t| t.give_back());
                return Err(e);
            }
        }
    }
    let mut order: Vec<&Change> = changes.iter().filter(|c| c.after.is_some()).collect();
    order.extend(changes.iter().filter(|c| c.after.is_none()));
    let mut done: Vec<&Change> = Vec::new();
    for c in order {
        if let Err(e) = put(&c.path, c.after.as_deref(), &c.shown) {
            for d in done.into_iter().rev() {
                if let Err(undo) = put(&d.path, d.before.as_deref(), &d.shown) {
                    tracing::warn!(
                        file = d.shown.as_str(),
                        error = undo.as_str(),
                        "apply_patch could not put a file back after a failed write."
                    );
                }
            }
            taken.into_iter().for_each(|t| t.give_back());
            return Err(e);
        }
        done.push(c);
    }
    Ok(())
}

/// A file made to hold `bytes`, or removed (`None`).
fn put(p: &Path, bytes: Option<&[u8]>, shown: &str) -> Result<(), String> {
    match bytes {
        Some(bytes) => {
            if let Some(parent) = p.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
            }
            store(p, bytes, shown)
        }
        None => match std::fs::remove_file(p) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("cannot delete {shown}: {e}"))
            }
            _ => Ok(()),
        },
    }
}
