//! The files a new agent's workspace starts with (`agents.create`), written for loopgate:
//! `AGENTS.md`, `SOUL.md`, `IDENTITY.md`, `USER.md`, `BOOTSTRAP.md`. Seeding never replaces
//! a file that is there.

use std::path::Path;

use crate::workspace_files::{self as files, FileError};

/// Each template's name and text.
pub const TEMPLATES: &[(&str, &str)] = &[
    ("AGENTS.md", include_str!("../templates/AGENTS.md")),
    ("SOUL.md", include_str!("../templates/SOUL.md")),
    ("IDENTITY.md", include_str!("../templates/IDENTITY.md")),
    ("USER.md", include_str!("../templates/USER.md")),
    ("BOOTSTRAP.md", include_str!("../templates/BOOTSTRAP.md")),
];

/// Writes the templates `workspace` lacks; `IDENTITY.md` names the agent (and its emoji).
pub fn seed(workspace: &Path, name: &str, emoji: Option<&str>) -> Result<(), FileError> {
    for (file, text) in TEMPLATES {
        if files::read(workspace, file, false)?.present.is_some() {
            continue;
        }
        let text = match *file {
            "IDENTITY.md" => with_identity(text, Some(name), emoji),
            _ => (*text).to_owned(),
        };
        files::write(workspace, file, &text, None)?;
    }
    Ok(())
}

/// `IDENTITY.md`'s `- Name:` and `- Emoji:` lines set to `name` and `emoji` (those given).
pub fn with_identity(text: &str, name: Option<&str>, emoji: Option<&str>) -> String {
    let line = |l: &str| {
        let t = l.trim_start();
        match (name, emoji) {
            (Some(n), _) if t.starts_with("- Name:") => format!("- Name: {n}"),
            (_, Some(e)) if t.starts_with("- Emoji:") => format!("- Emoji: {e}"),
            _ => l.to_owned(),
        }
    };
    let mut out: Vec<String> = text.lines().map(line).collect();
    if text.ends_with('\n') {
        out.push(String::new());
    }
    out.join("\n")
}

/// Renames the agent in its `IDENTITY.md`, if it has one.
pub fn rename(workspace: &Path, name: Option<&str>, emoji: Option<&str>) -> Result<(), FileError> {
    let Some(present) = files::read(workspace, "IDENTITY.md", true)?.present else {
        return Ok(());
    };
    let text = present.content.unwrap_or_default();
    let new = with_identity(&text, name, emoji);
    if new != text {
        files::write(workspace, "IDENTITY.md", &new, Some(&present.hash))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_new_workspace_gets_every_template_and_keeps_what_it_has() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("SOUL.md"), "mine").unwrap();
        seed(&ws, "Ops Probe", Some("🤖")).unwrap();
        assert_eq!(std::fs::read_to_string(ws.join("SOUL.md")).unwrap(), "mine");
        let id = std::fs::read_to_string(ws.join("IDENTITY.md")).unwrap();
        assert!(
            id.contains("- Name: Ops Probe\n") && id.contains("- Emoji: 🤖\n"),
            "{id}"
        );
        for (name, _) in TEMPLATES {
            assert!(ws.join(name).exists(), "{name}");
        }
        rename(&ws, Some("Ops Two"), None).unwrap();
        let id = std::fs::read_to_string(ws.join("IDENTITY.md")).unwrap();
        assert!(
            id.contains("- Name: Ops Two\n") && id.contains("- Emoji: 🤖\n"),
            "{id}"
        );
    }
}
