//! Hides tool calls a model serialized into its text (R-D4): complete
//! `<tool_call>…</tool_call>` blocks (Hermes/Qwen and GLM's `arg_key`/`arg_value` payloads),
//! `<function_calls>`/`<invoke>`/`<parameter>` blocks and the like are removed from the
//! streamed and final reply. A `<` that may still become such a tag waits for more text; a
//! block waits for its closing tag. Only complete blocks are hidden: a tag that is never
//! closed was a literal mention and is delivered as written when the response ends. Text in
//! Markdown code (fenced or inline) is never touched.

/// Tags whose complete blocks are hidden.
const TAGS: &[&str] = &[
    "tool_call",
    "tool_calls",
    "function_call",
    "function_calls",
    "invoke",
    "parameter",
    "arg_key",
    "arg_value",
];

/// Held text beyond this is released as written (a runaway "block" is not a tool call).
const MAX_HELD: usize = 64 * 1024;

#[derive(Debug, Default)]
pub struct XmlFilter {
    held: String,
    in_fence: bool,
    in_inline: bool,
}

enum Tag {
    /// `<` plus text that can still become an opening tag.
    Maybe,
    /// An opening tag of `name`.
    Open(&'static str),
    No,
}

fn classify(rest: &str) -> Tag {
    // rest starts with '<'.
    let mut maybe = false;
    for name in TAGS {
        let open_len = 1 + name.len();
        if rest.len() <= open_len {
            if format!("<{name}").starts_with(rest) {
                maybe = true;
            }
            continue;
        }
        if rest.starts_with('<') && rest[1..].starts_with(name) {
            match rest[open_len..].chars().next() {
                Some(c) if c == '>' || c == '/' || c.is_whitespace() => return Tag::Open(name),
                _ => {}
            }
        }
    }
    if maybe {
        Tag::Maybe
    } else {
        Tag::No
    }
}

impl XmlFilter {
    /// Feeds streamed text; returns what may be shown now.
    pub fn push(&mut self, text: &str) -> String {
        let mut buf = std::mem::take(&mut self.held);
        buf.push_str(text);
        let mut out = String::with_capacity(buf.len());
        let mut i = 0;
        while i < buf.len() {
            let rest = &buf[i..];
            if self.in_fence {
                match rest.find("```") {
                    Some(j) => {
                        out.push_str(&rest[..j + 3]);
                        i += j + 3;
                        self.in_fence = false;
                    }
                    None => {
                        // Keep a trailing "`"/"``" that may start the closing fence.
                        let keep = rest.len() - rest.trim_end_matches('`').len();
                        out.push_str(&rest[..rest.len() - keep]);
                        self.held = rest[rest.len() - keep..].to_owned();
                        return out;
                    }
                }
                continue;
            }
            let Some(k) = rest.find(['`', '<', '\n']) else {
                out.push_str(rest);
                break;
            };
            out.push_str(&rest[..k]);
            let at = &rest[k..];
            if at.starts_with('\n') {
                self.in_inline = false;
                out.push('\n');
                i += k + 1;
            } else if at.starts_with('`') {
                if at.starts_with("```") {
                    self.in_fence = true;
                    self.in_inline = false;
                    out.push_str("```");
                    i += k + 3;
                } else if at.len() < 3 && at.chars().all(|c| c == '`') {
                    // Could still become a fence.
                    self.held = at.to_owned();
                    return out;
                } else {
                    self.in_inline = !self.in_inline;
                    out.push('`');
                    i += k + 1;
                }
            } else if self.in_inline {
                out.push('<');
                i += k + 1;
            } else {
                match classify(at) {
                    Tag::No => {
                        out.push('<');
                        i += k + 1;
                    }
                    Tag::Maybe => {
                        self.held = at.to_owned();
                        return out;
                    }
                    Tag::Open(name) => {
                        let close = format!("</{name}>");
                        match at.find(&close) {
                            Some(end) => i += k + end + close.len(),
                            None if at.len() > MAX_HELD => {
                                out.push_str(at);
                                return out;
                            }
                            None => {
                                self.held = at.to_owned();
                                return out;
                            }
                        }
                    }
                }
            }
        }
        out
    }

    /// The response is complete: whatever is still held was not a tool call.
    pub fn finish(&mut self) -> String {
        self.in_fence = false;
        self.in_inline = false;
        std::mem::take(&mut self.held)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `text` in pieces of `n` bytes (on char boundaries) and returns all output.
    fn run(text: &str, n: usize) -> String {
        let mut f = XmlFilter::default();
        let mut out = String::new();
        let chars: Vec<char> = text.chars().collect();
        for piece in chars.chunks(n) {
            out.push_str(&f.push(&piece.iter().collect::<String>()));
        }
        out.push_str(&f.finish());
        out
    }

    fn all_splits(text: &str, want: &str) {
        for n in [1, 2, 3, 5, 7, 1000] {
            assert_eq!(run(text, n), want, "split {n}: {text:?}");
        }
    }

    #[test]
    fn hides_complete_tool_call_blocks_r_d4() {
        all_splits(
            "Checking.<tool_call>{\"name\": \"read\", \"arguments\": {\"path\": \"a\"}}</tool_call> Done.",
            "Checking. Done.",
        );
        all_splits(
            "A<tool_call>read<arg_key>path</arg_key><arg_value>a.txt</arg_value></tool_call>B",
            "AB",
        );
        all_splits(
            "Sure.\n<function_calls>\n<invoke name=\"ls\">\n<parameter name=\"path\">.</parameter>\n</invoke>\n</function_calls>\nOk",
            "Sure.\n\nOk",
        );
        all_splits(
            "x<invoke name=\"a\"><parameter name=\"b\">c</parameter></invoke>y",
            "xy",
        );
    }

    #[test]
    fn literal_mentions_and_code_stay_visible_r_d4() {
        all_splits("Use `<tool_call>` tags.", "Use `<tool_call>` tags.");
        all_splits(
            "Example:\n```xml\n<tool_call>{\"name\":\"x\"}</tool_call>\n```\nThat is all.",
            "Example:\n```xml\n<tool_call>{\"name\":\"x\"}</tool_call>\n```\nThat is all.",
        );
        all_splits(
            "The <tool_call> tag starts a call.",
            "The <tool_call> tag starts a call.",
        );
        all_splits(
            "a < b and <tool> and <b>bold</b> <",
            "a < b and <tool> and <b>bold</b> <",
        );
        all_splits("ends with <tool_ca", "ends with <tool_ca");
    }

    #[test]
    fn ambiguous_prefix_waits() {
        let mut f = XmlFilter::default();
        assert_eq!(f.push("Hi <tool_"), "Hi ");
        assert_eq!(f.push("call>{}</tool_call>!"), "!");
        assert_eq!(f.push("<b"), "<b");
        assert_eq!(f.finish(), "");
    }
}
