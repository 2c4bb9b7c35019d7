//! Tool summaries for a verbose reply (R-B1; OpenClaw's `verboseLevel`): with `on`, a line
//! per tool call in the final payloads, before the answer (`📖 Read: `AGENTS.md``, an emoji
//! and label per tool, the detail as code); with `full`, each command shown too and each
//! tool's output after it (in a `txt` block, cut at 8 000 characters). Pure.

use ipc::thinking::VerboseLevel;

/// Most characters of a tool's output a `full` reply shows.
pub const MAX_OUTPUT_CHARS: usize = 8_000;

/// The emoji and label of a tool, and the argument that says what it worked on: the tool
/// table's (`ipc::tools`), or a generic one for a name it does not have.
fn display(name: &str) -> (&'static str, String, &'static str) {
    if let Some(t) = ipc::tools::find(name) {
        return (
            t.display.emoji,
            t.display.label.to_owned(),
            t.display.detail,
        );
    }
    let mut label: String = name.replace('_', " ");
    if let Some(first) = label.get(..1) {
        label = first.to_ascii_uppercase() + label.get(1..).unwrap_or("");
    }
    ("🧩", label, "path")
}

/// A call's summary line, or `None` when the level shows none.
pub fn summary(level: VerboseLevel, name: &str, arguments: &str) -> Option<String> {
    if !matches!(level, VerboseLevel::On | VerboseLevel::Full) {
        return None;
    }
    let (emoji, label, key) = display(name);
    let args: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    let detail = args
        .get(key)
        .and_then(|v| v.as_str())
        .map(|d| {
            d.lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(200)
                .collect::<String>()
        })
        .filter(|d| !d.trim().is_empty());
    let command = key == "command";
    Some(match detail {
        // A command is shown only at `full` (it may hold what `on` should not show).
        Some(_) if command && level != VerboseLevel::Full => format!("{emoji} {label}"),
        Some(d) if command => format!("{emoji} {}", code(&d)),
        Some(d) => format!("{emoji} {label}: {}", code(&d)),
        None => format!("{emoji} {label}"),
    })
}

/// A finished call's output block (`full` only).
pub fn output(level: VerboseLevel, name: &str, arguments: &str, content: &str) -> Option<String> {
    if level != VerboseLevel::Full {
        return None;
    }
    let head = summary(level, name, arguments)?;
    let text = content.trim_end();
    if text.is_empty() {
        return Some(format!("{head}\n(no output)"));
    }
    let shown: String = match text.char_indices().nth(MAX_OUTPUT_CHARS) {
        Some((cut, _)) => format!("{}\n…(truncated)…", &text[..cut]),
        None => text.to_owned(),
    };
    // A fence longer than any run of backticks in the output keeps it one block.
    let fence = "`".repeat(longest_run(&shown, '`').max(2) + 1);
    Some(format!("{head}\n{fence}txt\n{shown}\n{fence}"))
}

/// `s` as inline code (a longer backtick run around one it holds).
fn code(s: &str) -> String {
    let ticks = "`".repeat(longest_run(s, '`') + 1);
    let pad = if s.starts_with('`') || s.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{ticks}{pad}{s}{pad}{ticks}")
}

fn longest_run(s: &str, c: char) -> usize {
    let (mut best, mut run) = (0, 0);
    for ch in s.chars() {
        run = if ch == c { run + 1 } else { 0 };
        best = best.max(run);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_follow_the_level() {
        let read = r#"{"path":"AGENTS.md"}"#;
        assert_eq!(summary(VerboseLevel::Off, "read", read), None);
        assert_eq!(
            summary(VerboseLevel::On, "read", read).unwrap(),
            "📖 Read: `AGENTS.md`"
        );
        let exec = r#"{"command":"ls -la"}"#;
        assert_eq!(summary(VerboseLevel::On, "exec", exec).unwrap(), "🛠️ Exec");
        assert_eq!(
            summary(VerboseLevel::Full, "exec", exec).unwrap(),
            "🛠️ `ls -la`"
        );
        assert_eq!(summary(VerboseLevel::On, "ls", "{}").unwrap(), "🧩 Ls");
        assert_eq!(
            summary(VerboseLevel::On, "read", r#"{"path":"a`b"}"#).unwrap(),
            "📖 Read: ``a`b``"
        );
        assert_eq!(output(VerboseLevel::On, "read", read, "x"), None);
        assert_eq!(
            output(VerboseLevel::Full, "read", read, "# Hi\n").unwrap(),
            "📖 Read: `AGENTS.md`\n```txt\n# Hi\n```"
        );
        assert!(output(VerboseLevel::Full, "read", read, "")
            .unwrap()
            .ends_with("\n(no output)"));
        let long = "y".repeat(MAX_OUTPUT_CHARS + 1);
        assert!(output(VerboseLevel::Full, "read", read, &long)
            .unwrap()
            .contains("\n…(truncated)…\n```"));
        let fenced = output(VerboseLevel::Full, "read", read, "```\nrm -rf\n```").unwrap();
        assert!(
            fenced.contains("````txt\n```\nrm -rf\n```\n````"),
            "{fenced}"
        );
    }
}
