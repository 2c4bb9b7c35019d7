//! Inline directives (issue 26 item 2): a message with `/think <level>` (`/t`, `/thinking`,
//! `/think:<level>`) or `/verbose <level>` (`/v`) among other text runs with that level for
//! this message only, and the model gets the text without it, as OpenClaw's "inline
//! directive on the message (applies only to that message)". As on OpenClaw, a directive
//! is a word of its own (at the start or after whitespace), anywhere in the message. A
//! message that is only a directive is a command (`commands.rs`: it sets the session's
//! level). Stricter than OpenClaw: only a level's own name makes a directive (`high`,
//! `full`; not the word aliases a command also takes), else the words stay text
//! (`/think about it`, `/v yes please`).

use ipc::thinking::{Thinking, VerboseLevel};

/// The levels a message's directives asked for (names as written; checked like a
/// request's when the run is planned).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Inline {
    pub thinking: Option<String>,
    pub verbose: Option<String>,
}

/// The message's directives (the first of each kind) and its text without them; `None`
/// when it has none, or nothing else.
pub(super) fn inline(message: &str) -> Option<(Inline, String)> {
    // Most messages have no word starting with `/`: no allocation for them.
    let slash_word = message.char_indices().any(|(i, c)| {
        c == '/'
            && message[..i]
                .chars()
                .next_back()
                .is_none_or(char::is_whitespace)
    });
    if !slash_word {
        return None;
    }
    let words = words(message);
    let mut inline = Inline::default();
    let mut spans = Vec::new();
    let mut k = 0;
    while k < words.len() {
        let (start, end) = words[k];
        let word = &message[start..end];
        k += 1;
        let Some(directive) = word.strip_prefix('/') else {
            continue;
        };
        let (name, attached) = match directive.split_once(':') {
            Some((name, level)) => (name, Some(level)),
            None => (directive, None),
        };
        // The level: after the `:`, else the next word.
        let (level, level_end, next) = match attached {
            Some(level) => (level, end, k),
            None => match words.get(k) {
                Some(&(s, e)) => (&message[s..e], e, k + 1),
                None => continue,
            },
        };
        let slot = match name.to_ascii_lowercase().as_str() {
            "think" | "thinking" | "t" if is_name(level, Thinking::parse, Thinking::as_str) => {
                &mut inline.thinking
            }
            "verbose" | "v" if is_name(level, VerboseLevel::parse, VerboseLevel::as_str) => {
                &mut inline.verbose
            }
            _ => continue,
        };
        if slot.is_some() {
            continue;
        }
        *slot = Some(level.to_owned());
        spans.push((start, level_end));
        k = next;
    }
    if spans.is_empty() {
        return None;
    }
    let rest = without(message, &spans);
    (!rest.is_empty()).then_some((inline, rest))
}

/// Whether `level` is a level's own name (any case), not one of its aliases.
fn is_name<L: Copy>(
    level: &str,
    parse: fn(&str) -> Option<L>,
    name: fn(L) -> &'static str,
) -> bool {
    parse(level).is_some_and(|l| name(l).eq_ignore_ascii_case(level))
}

/// The byte spans of the whitespace-separated words of `s`.
fn words(s: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(st)) => {
                out.push((st, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(st) = start {
        out.push((st, s.len()));
    }
    out
}

/// `s` without `spans` (in order), each with the spaces after it (or, at a line's end,
/// before it), trimmed.
fn without(s: &str, spans: &[(usize, usize)]) -> String {
    let mut out = String::with_capacity(s.len());
    let mut pos = 0;
    for &(a, b) in spans {
        out.push_str(&s[pos..a]);
        let rest = &s[b..];
        let after = rest.trim_start_matches([' ', '\t']);
        pos = b + (rest.len() - after.len());
        if after.is_empty() || after.starts_with(['\n', '\r']) {
            let kept = out.trim_end_matches([' ', '\t']).len();
            out.truncate(kept);
        }
    }
    out.push_str(&s[pos..]);
    out.trim().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rest(text: &str) -> Option<(Option<String>, Option<String>, String)> {
        inline(text).map(|(i, r)| (i.thinking, i.verbose, r))
    }

    #[test]
    fn directives_anywhere_are_taken_and_the_rest_is_the_message() {
        let high = Some("high".to_owned());
        assert_eq!(
            rest("/think high what is 2+2?"),
            Some((high.clone(), None, "what is 2+2?".into()))
        );
        assert_eq!(
            rest("what is 2+2? /think high"),
            Some((high.clone(), None, "what is 2+2?".into()))
        );
        assert_eq!(
            rest("what is /t:high 2+2?"),
            Some((high, None, "what is 2+2?".into()))
        );
        assert_eq!(
            rest("  /t:low /v full\nlist the files"),
            Some((
                Some("low".into()),
                Some("full".into()),
                "list the files".into()
            ))
        );
        // A line keeps its end.
        assert_eq!(
            rest("first line /v on\nsecond line"),
            Some((None, Some("on".into()), "first line\nsecond line".into()))
        );
    }

    #[test]
    fn anything_else_is_text() {
        for text in [
            "/think high",             // directive only: a command
            "/think about it please",  // not a level
            "please think/high first", // not a word of its own
            "/tmp/x is full",
            "/new hello",    // not a directive
            "/v yes please", // an alias word, not a level's name
            "/t none of these work",
            "ends with /think",
            "",
        ] {
            assert_eq!(inline(text), None, "{text:?}");
        }
        // A second directive of the same kind is text (the first stands).
        assert_eq!(
            rest("/think high /think low x"),
            Some((Some("high".into()), None, "/think low x".into()))
        );
    }
}
