//! Everything model-visible is rendered here and nowhere else: the system prompt (base prompt,
//! workspace bootstrap files under their caps, the skills list from [`super::skills`],
//! per-run additions) and the history.

use std::path::Path;

pub use crate::llm::messages::{summary_message, SUMMARY_PREFIX};
use crate::llm::{ChatMessage, History, Messages, ModelRequest};
use crate::tools::ToolDef;

/// Built-in base prompt (replaced by `agents.*.system_prompt`).
pub const BASE_PROMPT: &str = "You are a helpful assistant running inside loopgate, an agent gateway. \
Answer the user directly and concisely. Files from your workspace that describe who you are and how to \
work are included below when present.";

/// Workspace files injected into the system prompt, in this order (R-B6, R-B7).
pub const BOOTSTRAP_FILES: &[&str] = &[
    "AGENTS.md",
    "SOUL.md",
    "TOOLS.md",
    "IDENTITY.md",
    "USER.md",
    "HEARTBEAT.md",
    "MEMORY.md",
];
/// `USER.md` has its own smaller cap, as in OpenClaw.
pub const USER_MD_MAX_CHARS: usize = 4000;
/// A safety cap on the history messages read for the model. The window itself is bounded by
/// tokens: it starts at the latest compaction, and a prompt over the context budget is
/// compacted first (a message-count cap would drop old messages with no summary).
pub const HISTORY_LIMIT: usize = 100_000;

#[derive(Debug, Clone, PartialEq)]
pub struct BootstrapFile {
    pub name: String,
    pub content: String,
    pub truncated: bool,
}

/// Caps on bootstrap context, in characters.
#[derive(Debug, Clone, Copy)]
pub struct Caps {
    pub per_file: usize,
    pub total: usize,
}

/// Truncates `text` to `max` characters (on a char boundary).
fn cap(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((idx, _)) => (text[..idx].to_owned(), true),
        None => (text.to_owned(), false),
    }
}

/// Creates the workspace if needed and reads the bootstrap files present in it, applying the
/// per-file and total caps. Missing files are skipped; unreadable ones are reported and
/// skipped. All file work happens in one blocking task (one hop off the async runtime).
pub async fn load_bootstrap(workspace: &Path, caps: Caps) -> Result<Vec<BootstrapFile>, String> {
    let workspace = workspace.to_owned();
    tokio::task::spawn_blocking(move || read_workspace(&workspace, caps))
        .await
        .map_err(|e| format!("reading the workspace failed: {e}"))?
}

/// The blocking part of [`load_bootstrap`], for callers already off the async runtime.
pub fn read_workspace(workspace: &Path, caps: Caps) -> Result<Vec<BootstrapFile>, String> {
    std::fs::create_dir_all(workspace)
        .map_err(|e| format!("cannot create workspace {}: {e}", workspace.display()))?;
    Ok(read_bootstrap(workspace, caps))
}

fn read_bootstrap(workspace: &Path, caps: Caps) -> Vec<BootstrapFile> {
    let mut out = Vec::new();
    let mut used = 0usize;
    for name in BOOTSTRAP_FILES {
        if used >= caps.total {
            break;
        }
        let path = workspace.join(name);
        let raw = match std::fs::read(&path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "Cannot read bootstrap file; skipping it.");
                continue;
            }
        };
        let per_file = if *name == "USER.md" {
            caps.per_file.min(USER_MD_MAX_CHARS)
        } else {
            caps.per_file
        };
        let limit = per_file.min(caps.total - used);
        let (content, truncated) = cap(&raw, limit);
        used += content.chars().count();
        out.push(BootstrapFile {
            name: (*name).to_owned(),
            content,
            truncated,
        });
    }
    out
}

/// Applies the caps again to a list an `agent:bootstrap` hook returned (it may add, remove
/// or edit files).
pub fn recap(files: Vec<(String, String)>, caps: Caps) -> Vec<BootstrapFile> {
    let mut out = Vec::new();
    let mut used = 0usize;
    for (name, raw) in files {
        if used >= caps.total {
            break;
        }
        let per_file = if name == "USER.md" {
            caps.per_file.min(USER_MD_MAX_CHARS)
        } else {
            caps.per_file
        };
        let (content, truncated) = cap(&raw, per_file.min(caps.total - used));
        used += content.chars().count();
        out.push(BootstrapFile {
            name,
            content,
            truncated,
        });
    }
    out
}

/// Renders the system prompt.
pub fn system_prompt(
    base: Option<&str>,
    files: &[BootstrapFile],
    skills: &str,
    extra: Option<&str>,
) -> String {
    let mut s = String::from(base.unwrap_or(BASE_PROMPT));
    if !files.is_empty() {
        s.push_str("\n\n# Workspace Files\n");
        for f in files {
            s.push_str(&format!("\n## {}\n\n{}\n", f.name, f.content.trim_end()));
            if f.truncated {
                s.push_str("\n[This file was truncated to fit the context limit.]\n");
            }
        }
    }
    if !skills.is_empty() {
        s.push_str("\n\n");
        s.push_str(skills);
    }
    if let Some(extra) = extra.map(str::trim).filter(|e| !e.is_empty()) {
        s.push_str("\n\n");
        s.push_str(extra);
    }
    s
}

/// The instructions for the model call that writes a compaction summary.
pub const COMPACTION_PROMPT: &str = "You summarize a conversation so that it can continue with \
less context. Keep what the rest of the conversation needs: the user's goals and requests, \
decisions made, facts learned, open tasks, and exact names, paths, identifiers and numbers. \
Leave out small talk. Answer with the summary only, as plain text.";

/// Builds the model request that summarizes `older` (the messages a compaction replaces),
/// keeping at most `max_chars` of them (the newest; an older summary always stays first).
pub fn compaction_request(older: &[ChatMessage], max_chars: usize) -> ModelRequest {
    let line = |m: &ChatMessage| {
        let mut s = match m.role {
            "tool" => format!(
                "[tool result {}]: {}",
                m.tool_call_id.as_deref().unwrap_or(""),
                m.content
            ),
            role => format!("[{role}]: {}", m.content),
        };
        for c in &m.tool_calls {
            s.push_str(&format!(
                "\n[tool call {} {}]: {}",
                c.id, c.name, c.arguments
            ));
        }
        s
    };
    let mut lines: Vec<String> = older.iter().map(line).collect();
    let mut total: usize = lines.iter().map(|l| l.len() + 2).sum();
    // Drop the oldest lines past the budget (a previous summary, first, stays).
    let keep_first = older
        .first()
        .is_some_and(|m| m.content.starts_with(SUMMARY_PREFIX));
    let mut dropped = 0;
    while total > max_chars && lines.len() > usize::from(keep_first) + 1 {
        let i = usize::from(keep_first);
        total -= lines[i].len() + 2;
        lines.remove(i);
        dropped += 1;
    }
    if dropped > 0 {
        let i = usize::from(keep_first);
        lines.insert(i, format!("[{dropped} older messages left out]"));
    }
    let mut transcript = lines.join("\n\n");
    if transcript.len() > max_chars {
        let mut cut = transcript.len() - max_chars;
        while !transcript.is_char_boundary(cut) {
            cut += 1;
        }
        transcript = transcript[cut..].to_owned();
    }
    ModelRequest {
        messages: std::sync::Arc::new(
            vec![
                ChatMessage::text("system", COMPACTION_PROMPT),
                ChatMessage::text(
                    "user",
                    format!("Summarize this conversation:\n\n{transcript}"),
                ),
            ]
            .into(),
        ),
        tools: Vec::new(),
        choice: None,
        thinking: None,
    }
}

/// Builds the model request: system prompt then the history (which ends with the current
/// user message, already persisted), shared with the reader's cache, not copied.
pub fn request(system: String, history: &History, tools: Vec<&'static ToolDef>) -> ModelRequest {
    ModelRequest {
        messages: std::sync::Arc::new(Messages::new(
            vec![ChatMessage::text("system", system)],
            history.messages.clone(),
        )),
        tools,
        choice: None,
        thinking: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::messages::{Conversion, Row};

    #[tokio::test]
    async fn bootstrap_caps_per_file_and_total_r_b7() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "a".repeat(50)).unwrap();
        std::fs::write(dir.path().join("SOUL.md"), "s".repeat(50)).unwrap();
        std::fs::write(dir.path().join("USER.md"), "u".repeat(10)).unwrap();
        let files = load_bootstrap(
            dir.path(),
            Caps {
                per_file: 30,
                total: 45,
            },
        )
        .await
        .unwrap();
        assert_eq!(files.len(), 2, "total cap reached before USER.md");
        assert_eq!(files[0].content.len(), 30);
        assert!(files[0].truncated);
        assert_eq!(files[1].content.len(), 15);
        let p = system_prompt(None, &files, "# Skills", Some("extra rule"));
        assert!(p.contains("\n\n# Skills\n\nextra rule"));
        assert!(p.starts_with(BASE_PROMPT));
        assert!(p.contains("## AGENTS.md") && p.contains("## SOUL.md"));
        assert!(p.ends_with("extra rule"));
    }

    #[test]
    fn cap_respects_char_boundaries() {
        assert_eq!(cap("héllo", 2), ("hé".to_owned(), true));
        assert_eq!(cap("hi", 5), ("hi".to_owned(), false));
    }

    /// The history as the reader's cache converts it.
    fn history(rows: Vec<Row>) -> History {
        let mut conversion = Conversion::default();
        let mut messages = Vec::new();
        let count = rows.len();
        for r in rows {
            conversion.push(&mut messages, r);
        }
        History {
            messages: std::sync::Arc::new(messages),
            rows: count,
        }
    }

    #[test]
    fn request_puts_system_first_and_keeps_order() {
        let h = history(vec![
            item("user", "one", None),
            item("assistant", "two", None),
            item("user", "three", None),
        ]);
        let r = request("sys".into(), &h, vec![]);
        let roles: Vec<_> = r.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["system", "user", "assistant", "user"]);
    }

    fn item(role: &str, text: &str, call_id: Option<&str>) -> Row {
        Row {
            role: role.into(),
            text: text.into(),
            tool_calls: vec![],
            tool_call_id: call_id.map(Into::into),
            seq: None,
            media: Vec::new(),
        }
    }

    #[test]
    fn request_pairs_tool_calls_and_drops_orphan_results() {
        let call = crate::tools::ToolCall {
            id: "c1".into(),
            name: "ls".into(),
            arguments: "{}".into(),
        };
        let h = history(vec![
            item("toolResult", "orphan", Some("c0")),
            item("user", "list", None),
            Row {
                tool_calls: vec![call.clone()],
                ..item("assistant", "", None)
            },
            item("toolResult", "a.txt", Some("c1")),
            item("assistant", "done", None),
        ]);
        let r = request("sys".into(), &h, vec![]);
        let roles: Vec<_> = r.messages.iter().map(|m| m.role).collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
        assert_eq!(r.messages[2].tool_calls, vec![call]);
        assert_eq!(r.messages[3].tool_call_id.as_deref(), Some("c1"));
    }
}
