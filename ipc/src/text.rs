//! Text that reaches a human's terminal or an operator's eyes: what would hide or fake what
//! is shown (control characters, bidirectional-text marks), in one place.

/// A bidirectional-text mark or override (it can reorder what a reader sees).
pub fn is_bidi(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}' | '\u{061C}')
}

/// A character that does not show as itself: a control character or a bidi mark.
pub fn is_unshowable(c: char) -> bool {
    c.is_control() || is_bidi(c)
}

/// `text` safe to print on a terminal: unshowable characters as `?` (session keys and run
/// ids are chosen by clients).
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if is_unshowable(c) { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_and_bidi_marks_are_not_printed() {
        assert_eq!(printable("a\u{1b}[31mb\u{202E}c\nd"), "a?[31mb?c?d");
        assert!(is_unshowable('\u{2067}'));
        assert!(!is_unshowable('é'));
    }
}
