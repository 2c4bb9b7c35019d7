//! Block streaming (R-D5): the visible text of a response cut into blocks a client can
//! deliver as they are, while the model is still writing.
//!
//! A block is never shorter than `min_chars` (unless the text ends) nor longer than
//! `max_chars`. Below `max_chars`, a block ends only at the preferred kind of break (a blank
//! line, by default) and otherwise waits for more text; at `max_chars` it ends at the last
//! break of that kind or any finer one (line end, sentence end, space) in the window, and
//! only when there is none is it cut at `max_chars`. A Markdown code fence is never split at
//! a break; cut inside one, the block closes it and the next opens it again. Pure: the turn
//! feeds it text and says when the text or the message ended.

use ipc::blocks::{BlockBoundary, BlockStreaming, BreakPreference, MAX_CHARS_LIMIT};

#[derive(Debug)]
pub struct Chunker {
    boundary: BlockBoundary,
    prefer: BreakPreference,
    min: usize,
    max: usize,
    buf: String,
}

/// The kinds of break, coarsest first.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Break {
    Paragraph,
    Line,
    Sentence,
    Space,
}

impl Chunker {
    pub fn new(spec: BlockStreaming) -> Self {
        // The supervisor checks the settings; numbers from a peer that did not are made sane.
        let max = spec.max_chars.clamp(1, MAX_CHARS_LIMIT) as usize;
        Chunker {
            boundary: spec.boundary,
            prefer: spec.prefer,
            min: (spec.min_chars as usize).clamp(1, max),
            max,
            buf: String::new(),
        }
    }

    /// Text of the response, as streamed; the blocks it completes (`text_end` only: with
    /// `message_end` everything waits for the message to end).
    pub fn push(&mut self, text: &str) -> Vec<String> {
        self.buf.push_str(text);
        if self.boundary == BlockBoundary::TextEnd {
            self.drain(false)
        } else {
            Vec::new()
        }
    }

    /// Whether blocks go out before the message ends.
    pub fn streams_text(&self) -> bool {
        self.boundary == BlockBoundary::TextEnd
    }

    /// The text (or the message) ended: everything buffered, as blocks.
    pub fn flush(&mut self) -> Vec<String> {
        self.drain(true)
    }

    /// A new model call begins: whatever an earlier response left buffered is dropped (none
    /// should be: a response's text is flushed when it ends).
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    fn drain(&mut self, force: bool) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(block) = self.cut(force) {
            if !block.trim().is_empty() {
                out.push(block);
            }
        }
        if force {
            self.buf.clear();
        }
        out
    }

    /// The next block, if one is complete.
    fn cut(&mut self, force: bool) -> Option<String> {
        if self.buf.trim().is_empty() {
            return None;
        }
        let chars = self.buf.chars().count();
        if chars <= self.max && force {
            return Some(std::mem::take(&mut self.buf).trim_end().to_owned());
        }
        if chars < self.min {
            return None;
        }
        let lo = byte_at(&self.buf, self.min);
        let hi = byte_at(&self.buf, self.max.min(chars));
        let kinds: &[Break] = if chars < self.max {
            // Room to wait: only the preferred kind ends a block early.
            &self.kinds()[..1]
        } else {
            self.kinds()
        };
        let fences = fence_spans(&self.buf);
        if let Some(at) = kinds
            .iter()
            .find_map(|&k| last_break(&self.buf, lo, hi, k, &fences))
        {
            let block = self.buf[..at].trim_end().to_owned();
            let rest = self.buf[at..].trim_start_matches([' ', '\t', '\r', '\n']);
            self.buf = rest.to_owned();
            return Some(block);
        }
        if chars < self.max {
            return None;
        }
        // Inside a code fence to the end of the window: cut at its last line end there (the
        // fence is closed and opened again), else at the high bound.
        let at = self.buf[lo..hi]
            .rfind('\n')
            .map(|i| lo + i)
            .filter(|&at| shrinks(&self.buf, at))
            .unwrap_or(hi);
        Some(self.hard_cut(at))
    }

    fn kinds(&self) -> &'static [Break] {
        const ALL: [Break; 4] = [Break::Paragraph, Break::Line, Break::Sentence, Break::Space];
        match self.prefer {
            BreakPreference::Paragraph | BreakPreference::Unknown => &ALL,
            BreakPreference::Newline => &ALL[1..],
            BreakPreference::Sentence => &ALL[2..],
        }
    }

    /// A block of exactly the first `at` bytes; a code fence open there is closed in it
    /// and opened again in what follows.
    fn hard_cut(&mut self, at: usize) -> String {
        let rest = self.buf.split_off(at);
        let mut block = std::mem::replace(&mut self.buf, rest);
        if let Some(opener) = open_fence(&block) {
            // Only when the reopened fence leaves room for progress: every cut must shrink
            // the buffer (the fence's opening line comes back), or the chunker would cut
            // the same text for ever.
            if (opener.chars().count() + 4) * 2 <= self.max && at > opener.len() + 1 {
                let rest = self.buf.strip_prefix('\n').unwrap_or(&self.buf);
                self.buf = format!("{opener}\n{rest}");
                if !block.ends_with('\n') {
                    block.push('\n');
                }
                block.push_str("```");
            }
        }
        block
    }
}

/// The byte offset of the `n`th character (the end for a shorter text).
fn byte_at(s: &str, n: usize) -> usize {
    s.char_indices().nth(n).map_or(s.len(), |(i, _)| i)
}

/// Whether a block of `s[..at]` leaves less behind, the fence open there reopened.
fn shrinks(s: &str, at: usize) -> bool {
    match open_fence(&s[..at]) {
        Some(opener) => at > opener.len() + 1,
        None => at > 0,
    }
}

/// The byte ranges inside code fences: from just after an opening fence's backticks to
/// just after the closing one's (to the end while one is open). One pass over `s`.
fn fence_spans(s: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut open: Option<usize> = None;
    let mut start = 0;
    for line in s.split('\n') {
        let t = line.trim_start_matches(' ');
        let indent = line.len() - t.len();
        if indent <= 3 && t.starts_with("```") {
            let marker = start + indent + 3;
            match open.take() {
                None => open = Some(marker),
                Some(from) => spans.push((from, marker)),
            }
        }
        start += line.len() + 1;
    }
    if let Some(from) = open {
        spans.push((from, usize::MAX));
    }
    spans
}

/// Where the last break of `kind` lies with `lo <= at <= hi` outside a code fence
/// (`fences`, from [`fence_spans`]): the block is `s[..at]`.
fn last_break(
    s: &str,
    lo: usize,
    hi: usize,
    kind: Break,
    fences: &[(usize, usize)],
) -> Option<usize> {
    let window = &s[..hi];
    let candidates: Vec<usize> = match kind {
        Break::Paragraph => window.match_indices("\n\n").map(|(i, _)| i).collect(),
        Break::Line => window.match_indices('\n').map(|(i, _)| i).collect(),
        Break::Sentence => window
            .char_indices()
            .filter(|&(i, c)| {
                matches!(c, '.' | '!' | '?') && s[i + 1..].starts_with(|n: char| n.is_whitespace())
            })
            .map(|(i, _)| i + 1)
            .collect(),
        Break::Space => window
            .char_indices()
            .filter(|&(_, c)| c == ' ' || c == '\t')
            .map(|(i, _)| i)
            .collect(),
    };
    candidates
        .into_iter()
        .rev()
        .filter(|&at| at >= lo && at > 0)
        .find(|&at| !fences.iter().any(|&(from, to)| from <= at && at < to))
}

/// The opening line of the code fence still open at the end of `s`, if one is.
fn open_fence(s: &str) -> Option<String> {
    let mut open: Option<&str> = None;
    for line in s.split('\n') {
        let t = line.trim_start_matches(' ');
        if line.len() - t.len() <= 3 && t.starts_with("```") {
            open = match open {
                None => Some(line),
                Some(_) => None,
            };
        }
    }
    // A fence line still being written (the text ends inside it) counts as open too.
    open.map(|l| l.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunker(boundary: BlockBoundary, min: u32, max: u32, prefer: BreakPreference) -> Chunker {
        Chunker::new(BlockStreaming {
            boundary,
            min_chars: min,
            max_chars: max,
            prefer,
        })
    }

    fn text_end(min: u32, max: u32) -> Chunker {
        chunker(BlockBoundary::TextEnd, min, max, BreakPreference::Paragraph)
    }

    /// R-D5: with `text_end` a block goes out at a paragraph break once it is long
    /// enough, before the text ends; the rest when it ends.
    #[test]
    fn text_end_streams_paragraph_blocks_and_flushes_the_rest() {
        let mut c = text_end(10, 100);
        let mut out = c.push("First paragraph here.");
        assert!(out.is_empty(), "no break yet: {out:?}");
        out = c.push("\n\nSecond one");
        assert_eq!(out, vec!["First paragraph here."]);
        assert!(c.push(" goes on.").is_empty());
        assert_eq!(c.flush(), vec!["Second one goes on."]);
        assert!(c.flush().is_empty());
    }

    /// A break before `min_chars` does not end a block; below `max_chars` a finer break
    /// does not either.
    #[test]
    fn blocks_respect_the_low_bound_and_the_preference() {
        let mut c = text_end(20, 200);
        assert!(c.push("Short.\n\nAnother short one.\nA line").is_empty());
        let out = c.push(" more.\n\nTail");
        assert_eq!(out, vec!["Short.\n\nAnother short one.\nA line more."]);
        assert_eq!(c.flush(), vec!["Tail"]);
    }

    /// At `max_chars` with no paragraph break, the last finer break in the window ends the
    /// block; with none at all, the block is cut at exactly `max_chars` characters.
    #[test]
    fn the_high_bound_falls_back_to_finer_breaks_then_cuts() {
        let mut c = text_end(5, 20);
        let out = c.push("one two three four five six");
        assert_eq!(out, vec!["one two three four"]);
        assert_eq!(c.flush(), vec!["five six"]);
        let mut c = text_end(5, 10);
        let out = c.push("abcdefghijklmnopqrstuvwxyz");
        assert_eq!(out, vec!["abcdefghij", "klmnopqrst"]);
        assert_eq!(c.flush(), vec!["uvwxyz"]);
        // Characters, not bytes.
        let mut c = text_end(2, 3);
        assert_eq!(c.push("éééé"), vec!["ééé"]);
        assert_eq!(c.flush(), vec!["é"]);
    }

    #[test]
    fn sentence_preference_breaks_after_sentence_ends() {
        let mut c = chunker(BlockBoundary::TextEnd, 5, 100, BreakPreference::Sentence);
        assert_eq!(c.push("It works. Then"), vec!["It works."]);
        assert_eq!(c.flush(), vec!["Then"]);
    }

    /// `message_end`: nothing before the message ends, then blocks within the bounds.
    #[test]
    fn message_end_waits_then_cuts_within_bounds() {
        let mut c = chunker(BlockBoundary::MessageEnd, 5, 12, BreakPreference::Paragraph);
        assert!(c.push("Alpha beta.\n\nGamma delta epsilon").is_empty());
        assert_eq!(c.flush(), vec!["Alpha beta.", "Gamma delta", "epsilon"]);
    }

    /// A code fence is not split at a break inside it; cut inside one by the high bound,
    /// both halves are valid Markdown.
    #[test]
    fn code_fences_stay_whole_or_are_closed_and_reopened() {
        let mut c = text_end(5, 200);
        let out = c.push("Code:\n```rust\nlet a = 1;\n\nlet b = 2;\n```\n\nAfter");
        assert_eq!(out, vec!["Code:\n```rust\nlet a = 1;\n\nlet b = 2;\n```"]);
        assert_eq!(c.flush(), vec!["After"]);
        // Cut at the fence's last line end in the window, closed and reopened.
        let mut c = text_end(5, 24);
        let out = c.push("```sh\nls -la\ncd /tmp\nmake all\nrm x\n```");
        assert_eq!(out, vec!["```sh\nls -la\ncd /tmp\n```"]);
        assert_eq!(c.flush(), vec!["```sh\nmake all\nrm x\n```"]);
        // No line end in the window: cut at the high bound, still closed and reopened.
        let mut c = text_end(5, 20);
        let out = c.push("```\nabcdefghijklmnopqrstuvwxyz\n```");
        assert_eq!(out[0], "```\nabcdefghijklmnop\n```");
        assert_eq!(c.flush(), vec!["```\nqrstuvwxyz\n```"]);
        // A bound too small to reopen a fence in still makes progress.
        let mut c = text_end(1, 4);
        let blocks = c.push("```python\nprint(1)\n```");
        let rest = c.flush();
        let all: Vec<String> = blocks.into_iter().chain(rest).collect();
        assert!(all.iter().all(|b| b.chars().count() <= 4), "{all:?}");
        assert_eq!(all.concat().replace('\n', ""), "```pythonprint(1)```");
    }

    /// Every cut shrinks the buffer, whatever the fence: a fence line as long as the low
    /// bound, a code line past the high bound, a long info string (these once cut the same
    /// text for ever).
    #[test]
    fn fenced_text_always_makes_progress() {
        let long_line = format!("```javascript\nconst s = '{}';\n```", "x".repeat(80));
        let bare = format!("```\n{}", "x".repeat(160));
        let info = format!("```{}\n{}", "a".repeat(120), "x".repeat(2000));
        for (text, min, max) in [
            (long_line.as_str(), 10, 60),
            (bare.as_str(), 1, 14),
            (info.as_str(), 100, 1200),
        ] {
            for boundary in [BlockBoundary::TextEnd, BlockBoundary::MessageEnd] {
                let mut c = chunker(boundary, min, max, BreakPreference::Paragraph);
                let mut blocks = c.push(text);
                blocks.extend(c.flush());
                assert!(blocks.len() < 1000, "{} blocks", blocks.len());
                // Nothing lost: every `x` of the text is in exactly one block.
                let kept: usize = blocks.iter().map(|b| b.matches('x').count()).sum();
                assert_eq!(kept, text.matches('x').count(), "{blocks:?}");
            }
        }
    }

    /// Whitespace alone is never a block; a failed attempt's buffer is dropped.
    #[test]
    fn blank_text_and_cleared_buffers_make_no_blocks() {
        let mut c = text_end(1, 10);
        assert!(c.push("  \n\n ").is_empty());
        assert!(c.flush().is_empty());
        c.push("partial");
        c.clear();
        assert!(c.flush().is_empty());
    }
}
