//! [`Text`]: a message's text, shared and never changed, with its JSON string literal
//! written at most once. A session's history goes into every model request of the session;
//! escaping each message's text again per request was a growing share of a long session's
//! turn (issue 24). A changed text is a new `Text`, so the literal can never be stale.

use std::sync::{Arc, OnceLock};

use serde_json::value::RawValue;

/// Immutable, cheaply cloned text (clones share the text and its literal).
#[derive(Clone, Default)]
pub struct Text(Arc<Inner>);

#[derive(Default)]
struct Inner {
    text: Box<str>,
    /// The text as a JSON string literal, once a request body asked for it.
    json: OnceLock<Box<RawValue>>,
}

impl Text {
    pub fn new(text: impl Into<Box<str>>) -> Text {
        Text(Arc::new(Inner {
            text: text.into(),
            json: OnceLock::new(),
        }))
    }

    pub fn as_str(&self) -> &str {
        &self.0.text
    }

    /// The text as a JSON string (quoted and escaped), for request bodies: serializing this
    /// copies bytes, with no escaping pass.
    pub fn json(&self) -> &RawValue {
        self.0.json.get_or_init(|| {
            // Serializing a string cannot fail; the fallback (`null`) is never taken.
            serde_json::value::to_raw_value(&*self.0.text).unwrap_or_default()
        })
    }
}

impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0.text
    }
}

impl From<String> for Text {
    fn from(s: String) -> Text {
        Text::new(s)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::new(s)
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for Text {}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl std::fmt::Debug for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self.as_str(), f)
    }
}

impl std::fmt::Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_literal_is_what_serializing_the_text_writes() {
        for s in [
            "",
            "plain",
            "quote \" backslash \\ newline \n tab \t",
            "\u{1}\u{1f}",
            "é ✓ 😀",
            "</script>",
        ] {
            let t = Text::from(s);
            assert_eq!(t.json().get(), serde_json::to_string(s).unwrap(), "{s:?}");
            assert_eq!(t.json().get(), t.clone().json().get(), "clones share it");
            assert_eq!(&*t, s);
        }
    }
}
