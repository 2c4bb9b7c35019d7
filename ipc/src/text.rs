//! Text that reaches a human's terminal or an operator's eyes: what would hide or fake what
//! is shown (control characters, bidirectional-text marks), in one place.

/// A bidirectional-text mark or override (it can reorder what a reader sees).
pub fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// An invisible formatting character: zero-width spaces and joiners, word joiners and
/// invisible operators, the byte-order mark, the soft hyphen, deprecated format controls.
pub fn is_invisible(c: char) -> bool {
    matches!(c, '\u{00AD}' | '\u{180E}' | '\u{200B}'..='\u{200D}' | '\u{2060}'..='\u{2064}'
        | '\u{206A}'..='\u{206F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}')
}

/// A character that does not show as itself: a control character (C0, DEL, C1), a bidi
/// mark, an invisible formatting character, or a line or paragraph separator.
pub fn is_unshowable(c: char) -> bool {
    c.is_control() || is_bidi(c) || is_invisible(c) || matches!(c, '\u{2028}' | '\u{2029}')
}

/// A character a file name may keep where it is shown or quoted in a prompt: one that shows
/// as itself and cannot close an attribute or a tag (`"<>`).
pub fn name_char(c: char) -> bool {
    !is_unshowable(c) && !matches!(c, '"' | '<' | '>')
}

/// A client's file name as it may be shown and put in a prompt: its last path component,
/// without unshowable characters or `"<>`, blanks trimmed, at most 255 characters; `None`
/// when nothing is left.
pub fn file_name(name: &str) -> Option<String> {
    let last = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let kept: String = last.chars().filter(|c| name_char(*c)).take(255).collect();
    let kept = kept.trim();
    (!kept.is_empty() && kept != "." && kept != "..").then(|| kept.to_owned())
}

/// `text` safe to print on a terminal as one field (a table cell, a word in a line):
/// every unshowable character, newlines included, escaped visibly as `\uXXXX` (all of them
/// are in the Basic Multilingual Plane). Session keys, run ids, device names and commands are
/// chosen by clients; keys stored by older versions may still hold escapes. The escape is
/// also JSON's, so JSON text stays valid JSON with the same meaning after it.
pub fn printable(text: &str) -> String {
    escape(text, |_| false)
}

/// `text` safe to print on a terminal as lines (a transcript message, a whole reply, JSON
/// lines): as [`printable`], but newlines and tabs are kept.
pub fn printable_lines(text: &str) -> String {
    // A reply's CRLF line ends are line ends, not a cursor trick: shown as `\n`. A lone CR
    // (which could overwrite a line already printed) is escaped.
    escape(&text.replace("\r\n", "\n"), |c| c == '\n' || c == '\t')
}

fn escape(text: &str, keep: impl Fn(char) -> bool) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_unshowable(c) && !keep(c) {
            out.push_str(&format!("\\u{:04x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_keep_what_shows() {
        assert_eq!(
            file_name("x.txt mime=text/plain/file\u{2028}\u{2029}SYSTEM\u{202e}b\u{200b}\"<>")
                .as_deref(),
            Some("fileSYSTEMb")
        );
        assert_eq!(file_name("../../etc/passwd").as_deref(), Some("passwd"));
        assert_eq!(
            file_name("report 2026.pdf").as_deref(),
            Some("report 2026.pdf")
        );
        assert_eq!(file_name("\u{200b}"), None);
        assert_eq!(file_name(".."), None);
    }

    #[test]
    fn escapes_and_bidi_marks_are_not_printed() {
        assert_eq!(
            printable("a\u{1b}[31mb\u{202E}c\nd\u{9b}"),
            "a\\u001b[31mb\\u202ec\\u000ad\\u009b"
        );
        assert_eq!(
            printable_lines("a\u{1b}]0;x\u{7}\n\tb"),
            "a\\u001b]0;x\\u0007\n\tb"
        );
        assert_eq!(printable_lines("one\r\ntwo\rX"), "one\ntwo\\u000dX");
        let json = serde_json::json!({"k": "x\u{202E}y\u{85}"}).to_string();
        let back: serde_json::Value = serde_json::from_str(&printable_lines(&json)).unwrap();
        assert_eq!(back["k"], "x\u{202E}y\u{85}");
        assert!(is_unshowable('\u{2067}'));
        assert!(!is_unshowable('é'));
    }
}
