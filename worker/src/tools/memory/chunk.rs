//! A memory file cut into the pieces search finds: a list item, a paragraph, or a heading
//! with what follows it, each with its blank lines, none longer than [`MAX_LINES`] lines or
//! about [`MAX_CHARS`] characters. Pure.

/// Most lines in one chunk.
pub const MAX_LINES: usize = 40;
/// A chunk ends at the line that takes it past this many characters.
pub const MAX_CHARS: usize = 2_000;

/// One piece of a file: its lines (1-based, inclusive) and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub start_line: usize,
    pub end_line: usize,
    pub text: String,
}

fn is_heading(line: &str) -> bool {
    let t = line.trim_start();
    let hashes = t.bytes().take_while(|b| *b == b'#').count();
    (1..=6).contains(&hashes) && t[hashes..].starts_with([' ', '\t'])
}

fn is_item(line: &str) -> bool {
    let t = line.trim_start();
    if t.starts_with("- ") || t.starts_with("* ") || t.starts_with("+ ") {
        return true;
    }
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    digits > 0 && (t[digits..].starts_with(". ") || t[digits..].starts_with(") "))
}

/// `text` in chunks, in order; blank files have none.
pub fn chunks(text: &str) -> Vec<Chunk> {
    let mut out: Vec<Chunk> = Vec::new();
    let mut cur: Option<Chunk> = None;
    // The chunk so far is a heading and blank lines only: what follows joins it.
    let mut heading_only = false;
    let mut after_blank = false;
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        let blank = line.trim().is_empty();
        let starts =
            !blank && (is_heading(line) || (!heading_only && (is_item(line) || after_blank)));
        let full = cur.as_ref().is_some_and(|c| {
            c.end_line + 1 - c.start_line >= MAX_LINES || c.text.len() >= MAX_CHARS
        });
        if starts || full || cur.is_none() {
            if let Some(c) = cur.take() {
                out.push(c);
            }
            cur = Some(Chunk {
                start_line: n,
                end_line: n,
                text: String::new(),
            });
            heading_only = is_heading(line);
        } else if !blank {
            heading_only = false;
        }
        if let Some(c) = cur.as_mut() {
            if !c.text.is_empty() || n > c.start_line {
                c.text.push('\n');
            }
            c.text.push_str(line);
            c.end_line = n;
        }
        after_blank = blank;
    }
    out.extend(cur);
    out.retain(|c| !c.text.trim().is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str) -> Vec<(usize, usize)> {
        chunks(text)
            .iter()
            .map(|c| (c.start_line, c.end_line))
            .collect()
    }

    #[test]
    fn items_paragraphs_and_headings_with_what_follows() {
        let memory = "# Memory\n\n- The deploy password rotation happens on Tuesdays.\n- Favourite fruit of the ops team: kumquat.\n\nA paragraph\nover two lines.\n";
        assert_eq!(spans(memory), [(1, 3), (4, 5), (6, 7)]);
        let c = &chunks(memory)[1];
        assert_eq!(c.text, "- Favourite fruit of the ops team: kumquat.\n");
        let daily = "# 2026-12-01\n\nMeeting notes: the staging cluster is named BLUEHERON-7.\nTLS certificate renew due.\n";
        assert_eq!(spans(daily), [(1, 4)]);
        assert!(chunks("\n\n  \n").is_empty());
    }

    #[test]
    fn long_blocks_are_cut() {
        let text = "line\n".repeat(100);
        assert_eq!(spans(&text), [(1, 40), (41, 80), (81, 100)]);
        let wide = format!("{}\n{}\n", "x".repeat(2_500), "y");
        assert_eq!(spans(&wide), [(1, 1), (2, 2)]);
    }
}
