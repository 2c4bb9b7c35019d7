//! Which files are an agent's memory: `MEMORY.md`, `USER.md` and the Markdown files under
//! `memory/`, at any depth, never through a symbolic link. Pure but for the walk.

use std::path::{Component, Path, PathBuf};

/// Most files walked (a workspace with more is indexed in part).
const MAX_FILES: usize = 10_000;
/// Most directory entries looked at in one walk, memory files or not.
const MAX_ENTRIES: usize = 100_000;
/// Most bytes of memory files taken in one walk (files past it are left out).
pub const MAX_TOTAL_BYTES: u64 = 64 * 1024 * 1024;
/// Deepest folder under `memory/` walked.
const MAX_DEPTH: usize = 16;

/// A memory file as the walk found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    /// Relative to the workspace, `/`-separated.
    pub rel: String,
    pub abs: PathBuf,
    pub mtime_ns: i64,
    pub size: i64,
    /// Which file it is: what is read must be the file the walk saw (no swap for a link).
    pub dev: u64,
    pub ino: u64,
}

/// Whether `rel` names a memory file: `MEMORY.md`, `USER.md` or `memory/**/*.md`, plain
/// relative components only.
pub fn is_memory_path(rel: &str) -> bool {
    let p = Path::new(rel);
    if !p.components().all(|c| matches!(c, Component::Normal(_))) || rel.contains('\\') {
        return false;
    }
    match rel {
        "MEMORY.md" | "USER.md" => true,
        _ => {
            rel.starts_with("memory/")
                && p.extension().is_some_and(|e| e.eq_ignore_ascii_case("md"))
        }
    }
}

fn stamp(rel: String, abs: PathBuf, meta: &std::fs::Metadata) -> FileStamp {
    use std::os::unix::fs::MetadataExt;
    FileStamp {
        rel,
        abs,
        mtime_ns: meta
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(meta.mtime_nsec()),
        size: i64::try_from(meta.len()).unwrap_or(i64::MAX),
        dev: meta.dev(),
        ino: meta.ino(),
    }
}

/// The memory files of `workspace`, regular files only, each file once however many names
/// (hard links) it has, within [`MAX_FILES`], [`MAX_ENTRIES`] and [`MAX_TOTAL_BYTES`].
pub fn memory_files(workspace: &Path) -> Vec<FileStamp> {
    let mut out = walk(workspace);
    let mut seen = std::collections::HashSet::new();
    let mut total = 0u64;
    out.retain(|f| {
        let keep = seen.insert((f.dev, f.ino)) && total + f.size.unsigned_abs() <= MAX_TOTAL_BYTES;
        if keep {
            total += f.size.unsigned_abs();
        }
        keep
    });
    out
}

fn walk(workspace: &Path) -> Vec<FileStamp> {
    let mut out = Vec::new();
    let mut entries_seen = 0usize;
    for name in ["MEMORY.md", "USER.md"] {
        let abs = workspace.join(name);
        if let Ok(meta) = std::fs::symlink_metadata(&abs) {
            if meta.is_file() {
                out.push(stamp(name.to_owned(), abs, &meta));
            }
        }
    }
    let mut dirs = vec![(workspace.join("memory"), "memory".to_owned(), 0usize)];
    while let Some((dir, rel, depth)) = dirs.pop() {
        let Ok(meta) = std::fs::symlink_metadata(&dir) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            entries_seen += 1;
            if out.len() >= MAX_FILES || entries_seen > MAX_ENTRIES {
                return out;
            }
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            let child = format!("{rel}/{name}");
            if meta.is_dir() && depth < MAX_DEPTH {
                dirs.push((entry.path(), child, depth + 1));
            } else if meta.is_file() && is_memory_path(&child) {
                out.push(stamp(child, entry.path(), &meta));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_memory_markdown_counts() {
        for ok in [
            "MEMORY.md",
            "USER.md",
            "memory/a.md",
            "memory/x/y/2026-12-01.MD",
        ] {
            assert!(is_memory_path(ok), "{ok}");
        }
        for no in [
            "AGENTS.md",
            "/MEMORY.md",
            "./MEMORY.md",
            "memory/../AGENTS.md",
            "memory/a.txt",
            "memory",
            "memories/a.md",
            "x/memory/a.md",
            "memory\\a.md",
            "",
        ] {
            assert!(!is_memory_path(no), "{no}");
        }
    }

    #[test]
    fn the_walk_skips_links_and_other_files() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path();
        std::fs::create_dir_all(ws.join("memory/sub")).unwrap();
        std::fs::write(ws.join("memory/sub/a.md"), "a").unwrap();
        std::fs::write(ws.join("memory/b.txt"), "b").unwrap();
        std::fs::write(ws.join("USER.md"), "u").unwrap();
        std::os::unix::fs::symlink("/etc", ws.join("memory/etc")).unwrap();
        std::os::unix::fs::symlink(ws.join("USER.md"), ws.join("memory/link.md")).unwrap();
        std::fs::hard_link(ws.join("memory/sub/a.md"), ws.join("memory/sub/b.md")).unwrap();
        let mut rels: Vec<String> = memory_files(ws).into_iter().map(|f| f.rel).collect();
        rels.sort();
        assert_eq!(rels.len(), 2, "{rels:?}");
        assert_eq!(rels[0], "USER.md");
        assert!(
            rels[1] == "memory/sub/a.md" || rels[1] == "memory/sub/b.md",
            "one name of a hard-linked file"
        );
    }
}
