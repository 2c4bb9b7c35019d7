//! Inline directives (issue 26 item 2): a message that starts with `/think <level>` (`/t`,
//! `/thinking`, `/think:<level>`) or `/verbose <level>` (`/v`) and goes on with more text
//! runs with that level for this message only, and the model gets the rest, as OpenClaw's
//! "inline directive on the message (applies only to that message)". A message that is
//! only a directive is a command (`commands.rs`: it sets the session's level). Only
//! directives at the start count, and only with a level's own name (`high`, `full`; not
//! the word aliases a command also takes): `/t` in the middle of a sentence, `/think about
//! it` or `/v yes please` is text.

use ipc::thinking::{Thinking, VerboseLevel};

/// The levels a message's leading directives asked for (names as written; checked like a
/// request's when the run is planned).
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Inline {
    pub thinking: Option<String>,
    pub verbose: Option<String>,
}

/// The message's leading directives and the text after them; `None` when it has none, or
/// nothing after them.
pub(super) fn leading(message: &str) -> Option<(Inline, &str)> {
    let mut inline = Inline::default();
    let mut text = message.trim_start();
    while let Some(rest) = text.strip_prefix('/') {
        let name_end = rest
            .find(|c: char| c.is_whitespace() || c == ':')
            .unwrap_or(rest.len());
        let (name, tail) = rest.split_at(name_end);
        // The level: after a `:` (no space) or after spaces on the same line.
        let tail = match tail.strip_prefix(':') {
            Some(t) => t,
            None => tail.trim_start_matches([' ', '\t']),
        };
        let level_end = tail.find(char::is_whitespace).unwrap_or(tail.len());
        let (level, after) = tail.split_at(level_end);
        match name.to_ascii_lowercase().as_str() {
            // A level's own name, not one of its word aliases (`/v yes please` is text).
            "think" | "thinking" | "t" if inline.thinking.is_none() => {
                let parsed = Thinking::parse(level)?;
                (parsed.as_str() == level.to_ascii_lowercase()).then_some(())?;
                inline.thinking = Some(level.to_owned());
            }
            "verbose" | "v" if inline.verbose.is_none() => {
                let parsed = VerboseLevel::parse(level)?;
                (parsed.as_str() == level.to_ascii_lowercase()).then_some(())?;
                inline.verbose = Some(level.to_owned());
            }
            _ => break,
        }
        text = after.trim_start();
    }
    (inline != Inline::default() && !text.is_empty()).then_some((inline, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_directives_are_taken_and_the_rest_is_the_message() {
        let (i, rest) = leading("/think high what is 2+2?").unwrap();
        assert_eq!(i.thinking.as_deref(), Some("high"));
        assert_eq!(rest, "what is 2+2?");
        let (i, rest) = leading("  /t:low /v full\nlist the files").unwrap();
        assert_eq!(
            (i.thinking.as_deref(), i.verbose.as_deref()),
            (Some("low"), Some("full"))
        );
        assert_eq!(rest, "list the files");
    }

    #[test]
    fn anything_else_is_text() {
        for text in [
            "/think high",              // directive only: a command
            "/think about it please",   // not a level
            "please /think high first", // not at the start
            "/tmp/x is full",
            "/new hello",    // not a directive
            "/v yes please", // an alias word, not a level's name
            "/t none of these work",
            "",
        ] {
            assert_eq!(leading(text), None, "{text:?}");
        }
        // A second directive of the same kind is text (the first stands).
        let (i, rest) = leading("/think high /think low x").unwrap();
        assert_eq!(
            (i.thinking.as_deref(), rest),
            (Some("high"), "/think low x")
        );
    }
}
