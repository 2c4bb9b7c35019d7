//! `memory_search` and `memory_get`: the agent's memory files (`MEMORY.md`, `USER.md`,
//! `memory/**/*.md`) searched by full text ([`index`]) and read by excerpt, in OpenClaw's
//! result shapes as recorded (`tools-cron-2026.9.6.md` section 5; its `provider:"none"`
//! keyword search, which is what loopgate has: no embeddings).

mod chunk;
mod index;
mod paths;

use std::path::Path;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

pub use index::MemoryIndex;

use super::ToolOutcome;

/// Results when the call names no `maxResults`.
const DEFAULT_MAX_RESULTS: usize = 6;
const MAX_RESULTS: usize = 50;
/// Most characters of a chunk quoted in a result's snippet.
const SNIPPET_CHARS: usize = 700;
/// Most lines `memory_get` returns when the call names no `lines`.
const DEFAULT_GET_LINES: usize = 400;
/// Most characters `memory_get` returns at once.
const GET_CHARS: usize = 12_000;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Found {
    path: String,
    start_line: usize,
    end_line: usize,
    score: f64,
    text_score: f64,
    snippet: String,
    source: &'static str,
    corpus: &'static str,
    citation: String,
}

#[derive(Serialize)]
struct Searched {
    results: Vec<Found>,
    provider: &'static str,
    citations: &'static str,
    debug: Debug,
}

#[derive(Serialize)]
struct Debug {
    backend: &'static str,
    hits: usize,
}

/// `path#L4-L5` (`path#L4` for one line).
fn citation(path: &str, start: usize, end: usize) -> String {
    if start == end {
        format!("{path}#L{start}")
    } else {
        format!("{path}#L{start}-L{end}")
    }
}

fn json(v: &impl Serialize) -> String {
    serde_json::to_string_pretty(v).unwrap_or_default()
}

/// Runs one `memory_search` call.
pub async fn memory_search(
    index: &Arc<MemoryIndex>,
    workspace: &Path,
    args: &Value,
) -> ToolOutcome {
    let query = args
        .get("query")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let max = args
        .get("maxResults")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_MAX_RESULTS, |n| {
            usize::try_from(n).unwrap_or(MAX_RESULTS)
        })
        .clamp(1, MAX_RESULTS);
    let min_score = args.get("minScore").and_then(Value::as_f64).unwrap_or(0.0);
    // loopgate has no wiki and does not index sessions: those corpora find nothing.
    let memory = matches!(
        args.get("corpus").and_then(Value::as_str),
        None | Some("memory" | "all")
    );
    let hits = if memory {
        let (index, ws) = (index.clone(), workspace.to_owned());
        match tokio::task::spawn_blocking(move || index.search(&ws, &query, max)).await {
            Ok(Ok(hits)) => hits,
            Ok(Err(e)) => return ToolOutcome::err(e.to_string()),
            Err(e) => return ToolOutcome::err(format!("memory search failed: {e}")),
        }
    } else {
        Vec::new()
    };
    let results: Vec<Found> = hits
        .into_iter()
        .filter(|h| h.score >= min_score)
        .map(|h| {
            let cite = citation(&h.path, h.start_line, h.end_line);
            let quoted: String = h.text.trim_end().chars().take(SNIPPET_CHARS).collect();
            Found {
                snippet: format!("{quoted}\n\nSource: {cite}"),
                path: h.path,
                start_line: h.start_line,
                end_line: h.end_line,
                score: (h.score * 1000.0).round() / 1000.0,
                text_score: (h.text_score * 1000.0).round() / 1000.0,
                source: "memory",
                corpus: "memory",
                citation: cite,
            }
        })
        .collect();
    let hits = results.len();
    ToolOutcome::ok(json(&Searched {
        results,
        provider: "none",
        citations: "auto",
        debug: Debug {
            backend: "builtin",
            hits,
        },
    }))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Got<'a> {
    status: &'static str,
    text: String,
    path: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    from: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lines: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    truncated: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_from: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl<'a> Got<'a> {
    fn status(status: &'static str, path: &'a str) -> Got<'a> {
        Got {
            status,
            text: String::new(),
            path,
            from: None,
            lines: None,
            truncated: None,
            next_from: None,
            code: None,
            error: None,
        }
    }

    fn failed(path: &'a str, code: &'static str, error: String) -> ToolOutcome {
        ToolOutcome::err(json(&Got {
            code: Some(code),
            error: Some(error),
            ..Got::status("error", path)
        }))
    }
}

/// Runs one `memory_get` call: lines `from..from+lines` of one memory file.
pub async fn memory_get(workspace: &Path, args: &Value) -> ToolOutcome {
    let path = args.get("path").and_then(Value::as_str).unwrap_or("");
    let rel = path.trim_start_matches("./");
    if !paths::is_memory_path(rel) {
        return Got::failed(
            path,
            "MEMORY_PATH_NOT_ALLOWED",
            "path is not an allowed Markdown memory file".into(),
        );
    }
    if matches!(args.get("corpus").and_then(Value::as_str), Some("wiki")) {
        return ToolOutcome::ok(json(&Got::status("not_found", path)));
    }
    let from = args
        .get("from")
        .and_then(Value::as_u64)
        .map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX).max(1));
    let want = args
        .get("lines")
        .and_then(Value::as_u64)
        .map_or(DEFAULT_GET_LINES, |n| {
            usize::try_from(n).unwrap_or(usize::MAX).max(1)
        });
    let refused = || {
        Got::failed(
            path,
            "MEMORY_PATH_NOT_ALLOWED",
            "path is not an allowed Markdown memory file".into(),
        )
    };
    let abs = match super::fs::resolve(workspace, rel) {
        Ok(abs) => abs,
        Err(e) => return Got::failed(path, "MEMORY_PATH_NOT_ALLOWED", String::from(e)),
    };
    // Through links, the path must still name a memory file of the workspace.
    let root = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_owned());
    let resolved = abs.strip_prefix(&root).ok().and_then(|r| r.to_str());
    if !resolved.is_some_and(paths::is_memory_path) {
        return refused();
    }
    let bytes = match tokio::task::spawn_blocking(move || read_capped(&abs)).await {
        Ok(Ok(Some(b))) => b,
        Ok(Ok(None)) => return ToolOutcome::ok(json(&Got::status("not_found", path))),
        Ok(Err(e)) if e.raw_os_error() == Some(nix::libc::ELOOP) => return refused(),
        Ok(Err(e)) => return Got::failed(path, "MEMORY_READ_FAILED", e.to_string()),
        Err(e) => return Got::failed(path, "MEMORY_READ_FAILED", e.to_string()),
    };
    let text = String::from_utf8_lossy(&bytes);
    let all: Vec<&str> = text.lines().collect();
    let start = from - 1;
    let mut taken: Vec<&str> = Vec::new();
    let mut chars = 0;
    for line in all.iter().skip(start).take(want) {
        if !taken.is_empty() && chars + line.len() > GET_CHARS {
            break;
        }
        chars += line.len() + 1;
        taken.push(line);
    }
    let next = start + taken.len();
    let more = next < all.len();
    let mut body = taken.join("\n");
    if more {
        body.push_str(&format!(
            "\n\n[More content available. Use from={} to continue.]",
            next + 1
        ));
    }
    ToolOutcome::ok(json(&Got {
        text: body,
        from: Some(from),
        lines: Some(taken.len()),
        truncated: more.then_some(true),
        next_from: more.then_some(next + 1),
        ..Got::status("ok", path)
    }))
}

/// The file's first [`index::MAX_FILE_BYTES`] (`None`: it does not exist), never through a
/// link put in its place since it was resolved, never blocking on a FIFO.
fn read_capped(abs: &Path) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let file = match super::fs::open_plain(abs) {
        Ok((f, _)) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut bytes = Vec::new();
    file.take(index::MAX_FILE_BYTES).read_to_end(&mut bytes)?;
    Ok(Some(bytes))
}
