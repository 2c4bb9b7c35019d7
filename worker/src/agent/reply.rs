//! Reply shaping: the silent token (R-F1) and the fallback tool-error warning (R-F2).

/// The exact silent token: a reply that is only this is no reply.
pub const SILENT_TOKEN: &str = "NO_REPLY";

/// Saved in history when the model gave no visible reply and retries ran out (R-F3).
pub const TRY_AGAIN_NOTICE: &str = "⚠️ No reply was produced for this message. Please try again.";

/// Whether `text` has anything but whitespace and zero-width characters.
pub fn has_visible_text(text: &str) -> bool {
    text.chars().any(|c| {
        !(c.is_whitespace()
            || matches!(
                c,
                '\u{200B}' | '\u{200C}' | '\u{200D}' | '\u{2060}' | '\u{FEFF}'
            ))
    })
}

/// Longest text still held back as a possible silent reply while streaming.
const HOLD_MAX: usize = 64;

fn is_sep(c: char) -> bool {
    !(c.is_alphanumeric() || c == '_')
}

fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(is_sep).filter(|t| !t.is_empty())
}

/// Whether the whole reply is silent: the token (any case, repeated, edge punctuation
/// ignored), the JSON string `"NO_REPLY"`, or `{"action":"NO_REPLY"}`.
pub fn is_silent(text: &str) -> bool {
    let t = text.trim();
    if t.starts_with('{') {
        return serde_json::from_str::<serde_json::Value>(t)
            .ok()
            .and_then(|v| {
                let obj = v.as_object()?;
                (obj.len() == 1).then_some(())?;
                obj.get("action")?.as_str().map(str::to_owned)
            })
            .is_some_and(|a| a.trim().eq_ignore_ascii_case(SILENT_TOKEN));
    }
    let mut any = false;
    for tok in tokens(t) {
        if !tok.eq_ignore_ascii_case(SILENT_TOKEN) {
            return false;
        }
        any = true;
    }
    any
}

fn prefix_ci(prefix: &str, of: &str) -> bool {
    prefix.len() <= of.len()
        && of.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

/// Whether streamed text so far could still turn out to be a silent reply, so it must not
/// be delivered yet (no prefix of the token leaks into the stream).
pub fn may_become_silent(text: &str) -> bool {
    let t = text.trim_start();
    if t.len() > HOLD_MAX {
        return false;
    }
    let json = t.starts_with('{');
    let toks: Vec<&str> = tokens(t).collect();
    let Some((last, done)) = toks.split_last() else {
        // Only whitespace or punctuation so far.
        return t
            .chars()
            .all(|c| c.is_whitespace() || "\"'{}:.,!".contains(c));
    };
    let whole = |tok: &str| tok.eq_ignore_ascii_case(SILENT_TOKEN) || (json && tok == "action");
    let partial = |tok: &str| prefix_ci(tok, SILENT_TOKEN) || (json && prefix_ci(tok, "action"));
    // Text after the last token (a separator) means the last token is complete.
    let ends_in_token = !t.ends_with(is_sep);
    done.iter().all(|t| whole(t))
        && if ends_in_token {
            partial(last)
        } else {
            whole(last)
        }
}

fn normalize(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .trim_end_matches(['.', '!'])
        .to_lowercase()
}

/// Whether a final reply only repeats a message already sent with the `message` tool
/// (same text up to whitespace, case and final punctuation) (R-E3).
pub fn duplicates_sent(text: &str, sent: &[String]) -> bool {
    let t = normalize(text);
    !t.is_empty() && sent.iter().any(|s| normalize(s) == t)
}

/// The warning sent when a run ends with a failed tool and no reply (R-F2).
pub fn tool_error_warning(tool: &str, error: &str) -> String {
    let first = error.lines().next().unwrap_or("").trim();
    let summary: String = first.chars().take(200).collect();
    format!("⚠️ The {tool} tool failed: {summary}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn silent_forms_r_f1() {
        for t in [
            "NO_REPLY",
            "  no_reply. ",
            "NO_REPLY NO_REPLY",
            "\"NO_REPLY\"",
            "{\"action\":\"NO_REPLY\"}",
            "{ \"action\": \"no_reply\" }",
        ] {
            assert!(is_silent(t), "{t:?}");
        }
        for t in [
            "",
            "NO_REPLY but here is more",
            "NO_REPLYING",
            "I will NO_REPLY",
            "{\"action\":\"NO_REPLY\",\"x\":1}",
            "{\"action\":\"reply\"}",
        ] {
            assert!(!is_silent(t), "{t:?}");
        }
    }

    #[test]
    fn streaming_holds_only_possible_silent_prefixes_r_f1() {
        for t in [
            "",
            "N",
            "NO_",
            "no_rep",
            "NO_REPLY",
            "NO_REPLY ",
            "\"NO",
            "{\"act",
            "{\"action\":\"NO_RE",
        ] {
            assert!(may_become_silent(t), "{t:?}");
        }
        for t in [
            "Hello",
            "No way",
            "NO_REPLYING",
            "Nope",
            "action",
            "NO_REPLY and more",
        ] {
            assert!(!may_become_silent(t), "{t:?}");
        }
    }

    #[test]
    fn duplicate_confirmations_r_e3() {
        let sent = vec!["The build is green.".to_owned()];
        assert!(duplicates_sent("the build is  green", &sent));
        assert!(!duplicates_sent("The build is green, and deployed.", &sent));
        assert!(!duplicates_sent("", &sent));
    }

    #[test]
    fn warning_is_one_short_line() {
        let w = tool_error_warning("exec", &format!("{}\nsecond", "x".repeat(500)));
        assert!(w.starts_with("⚠️ The exec tool failed: xxx"));
        assert!(!w.contains('\n'));
        assert!(w.chars().count() < 240);
    }
}
