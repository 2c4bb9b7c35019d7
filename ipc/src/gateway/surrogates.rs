//! Lone surrogates in JSON text: `"\ud800"` is JSON by its grammar, but no Rust string can
//! hold the code point it names, so serde_json refuses the whole text. A request frame with
//! one would then read as "not JSON" and, over WebSocket, be ignored without an answer. Found
//! by [`replace_lone_surrogates`], the frame is read with U+FFFD in their place, only to
//! answer its id with a typed error.

/// `text` with every `\uXXXX` escape that names an unpaired surrogate replaced by `\ufffd`,
/// and the first one found; `None` when there is none.
pub fn replace_lone_surrogates(text: &str) -> Option<(String, u16)> {
    let b = text.as_bytes();
    let mut out: Option<(String, u16)> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let Some(unit) = escape_at(b, i) else {
            // Another escape (`\\`, `\"`, `\n`, ...): its second byte is never a new escape.
            i += 2;
            continue;
        };
        let paired = match unit {
            0xD800..=0xDBFF => escape_at(b, i + 6).is_some_and(|u| (0xDC00..=0xDFFF).contains(&u)),
            0xDC00..=0xDFFF => false,
            _ => {
                i += 6;
                continue;
            }
        };
        if paired {
            i += 12;
            continue;
        }
        let (s, _) = out.get_or_insert_with(|| (String::with_capacity(text.len()), unit));
        s.push_str(&text[copied..i]);
        s.push_str("\\ufffd");
        i += 6;
        copied = i;
    }
    let (mut s, first) = out?;
    s.push_str(&text[copied..]);
    Some((s, first))
}

/// The code unit of a `\uXXXX` escape starting at `i`.
fn escape_at(b: &[u8], i: usize) -> Option<u16> {
    let e = b.get(i..i + 6)?;
    if e[0] != b'\\' || e[1] != b'u' {
        return None;
    }
    let hex = std::str::from_utf8(&e[2..]).ok()?;
    u16::from_str_radix(hex, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_unpaired_surrogates_are_replaced_issue_23() {
        assert_eq!(
            replace_lone_surrogates(r#"{"a":"x\u00e9\ud83d\ude00"}"#),
            None
        );
        assert_eq!(
            replace_lone_surrogates(r#"{"a":"\\ud800"}"#),
            None,
            "an escaped backslash"
        );
        let (s, first) =
            replace_lone_surrogates(r#"{"k":"\ud800","m":"a\udfffb\ud800\u0041"}"#).unwrap();
        assert_eq!(s, r#"{"k":"\ufffd","m":"a\ufffdb\ufffd\u0041"}"#);
        assert_eq!(first, 0xD800);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["k"], "\u{fffd}");
        // A high surrogate at the very end, and a truncated escape.
        assert_eq!(
            replace_lone_surrogates(r#""\udbff""#).unwrap().0,
            r#""\ufffd""#
        );
        assert_eq!(replace_lone_surrogates(r#""\ud8"#), None);
    }
}
