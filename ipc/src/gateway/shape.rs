//! What a frame may cost before anything is built from it: one pass over its bytes, no
//! allocation, that measures how deep it nests and how many members its arrays and objects
//! hold, and refuses a frame past [`Limits`]. A JSON tree costs far more than its text (a
//! `{"":0}` is 7 bytes of text and about 190 bytes of `serde_json::Value`), so the parser
//! that follows is only ever handed text whose tree is bounded whatever it is parsed into.
//!
//! The pass reads structure only (brackets, commas and colons outside strings); whether the
//! text is JSON at all is the parser's to say after it. A member is one array element or one
//! object entry: the number of commas plus one per non-empty container.

/// The bounds one frame's structure must keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Deepest nesting of arrays and objects (the frame's own object is depth 1).
    pub depth: u32,
    /// Arrays and objects in the whole frame.
    pub containers: u32,
    /// Array elements and object entries in the whole frame.
    pub members: u32,
}

impl Limits {
    /// After `connect`: room for every method's params (a config patch of thousands of
    /// keys, 32 attachments, an array of a million byte values), not for a tree of gigabytes:
    /// at most 1 Mi members and 32 Ki containers, so a tree built from any frame stays
    /// within tens of MiB.
    pub const FRAME: Limits = Limits {
        depth: 64,
        containers: 32 * 1024,
        members: 1024 * 1024,
    };
    /// The `connect` frame: a flat object of a few dozen fields.
    pub const PREAUTH: Limits = Limits {
        depth: 8,
        containers: 64,
        members: 1024,
    };
}

/// How a frame broke its [`Limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TooComplex {
    #[error("nested deeper than {0} levels")]
    Depth(u32),
    #[error("more than {0} arrays and objects")]
    Containers(u32),
    #[error("more than {0} array elements and object entries")]
    Members(u32),
}

/// Measures `text` against `limits`, stopping at the first bound it passes.
pub fn check(text: &[u8], limits: Limits) -> Result<(), TooComplex> {
    let mut depth = 0u32;
    let mut containers = 0u32;
    let mut members = 0u32;
    // Whether the innermost open container holds a member yet (`[]` and `{}` hold none).
    let mut empty = false;
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                members += u32::from(std::mem::take(&mut empty));
                i = string_end(text, i + 1);
                continue;
            }
            b'{' | b'[' => {
                members += u32::from(std::mem::take(&mut empty));
                depth += 1;
                containers += 1;
                if depth > limits.depth {
                    return Err(TooComplex::Depth(limits.depth));
                }
                if containers > limits.containers {
                    return Err(TooComplex::Containers(limits.containers));
                }
                empty = true;
            }
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                empty = false;
            }
            b',' => members += 1,
            b' ' | b'\t' | b'\n' | b'\r' | b':' => {}
            // A number, `true`, `false`, `null` (or not JSON, for the parser to refuse).
            _ => members += u32::from(std::mem::take(&mut empty)),
        }
        if members > limits.members {
            return Err(TooComplex::Members(limits.members));
        }
        i += 1;
    }
    Ok(())
}

/// The index just past the string whose contents start at `i` (or the end of the text).
fn string_end(text: &[u8], mut i: usize) -> usize {
    while i < text.len() {
        match text[i] {
            b'"' => return i + 1,
            // An escape's second byte is never the string's end.
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMALL: Limits = Limits {
        depth: 3,
        containers: 4,
        members: 6,
    };

    #[test]
    fn counts_members_and_containers_outside_strings() {
        // 3 members in the array, 2 entries in the object; brackets inside strings and
        // escaped quotes do not count.
        assert_eq!(check(br#"{"a":[1,"]\"[,",{}],"b":{}}"#, SMALL), Ok(()));
        assert_eq!(check(b"[]", SMALL), Ok(()));
        assert_eq!(check(b"", SMALL), Ok(()));
        assert_eq!(
            check(b"[1,2,3,4,5,6,7]", SMALL),
            Err(TooComplex::Members(6))
        );
        assert_eq!(check(b"[1,2,3,4,5,6]", SMALL), Ok(()));
        // Empty containers hold no member, and one member needs no comma.
        assert_eq!(check(b"[[],[],[]]", SMALL), Ok(()));
        assert_eq!(
            check(b"[[],[],[],[]]", SMALL),
            Err(TooComplex::Containers(4))
        );
        assert_eq!(check(b"[[[]]]", SMALL), Ok(()));
        assert_eq!(check(b"[[[[]]]]", SMALL), Err(TooComplex::Depth(3)));
    }

    #[test]
    fn a_string_never_ends_on_an_escaped_quote() {
        // The whole frame is one string: nothing inside it counts.
        let text = br#""\"[[[[[[,,,,,,,,\\"[1,2]"#;
        assert_eq!(check(text, SMALL), Ok(()));
        // Unterminated: everything after the quote is string.
        assert_eq!(check(br#"["[[[[[[[[[["#, SMALL), Ok(()));
    }

    #[test]
    fn the_frame_of_tiny_objects_is_refused_early() {
        let mut frame = String::from(r#"{"type":"req","id":"1","method":"health","params":{"x":["#);
        for i in 0..100_000 {
            if i > 0 {
                frame.push(',');
            }
            frame.push_str(r#"{"":0}"#);
        }
        frame.push_str("]}}");
        assert_eq!(
            check(frame.as_bytes(), Limits::FRAME),
            Err(TooComplex::Containers(Limits::FRAME.containers))
        );
        // An image sent as an array of byte values: one container, a million members.
        let bytes = format!("[{}]", vec!["255"; 1_000_000].join(","));
        assert_eq!(check(bytes.as_bytes(), Limits::FRAME), Ok(()));
    }
}
