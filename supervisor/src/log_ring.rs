//! The last log lines of the gateway (the supervisor's and, relayed, its workers'), kept in
//! memory for `logs.tail`: a bounded ring addressed by byte offsets, as OpenClaw's log file is.
//!
//! Logging writes through [`TeeWriter`]: each line goes to stderr as before and into the
//! ring. The ring keeps at most [`MAX_LINES`] lines and [`MAX_BYTES`] bytes; a line longer
//! than [`MAX_LINE_BYTES`] is cut. Offsets count every byte ever logged, so a client's cursor
//! stays valid while the lines it points at are kept, and a cursor into what was dropped is
//! answered with what remains, marked `truncated`.

use std::collections::VecDeque;
use std::io::Write;
use std::sync::Mutex;

use ipc::gateway::LogsTailResult;

pub const MAX_LINES: usize = 5000;
pub const MAX_BYTES: usize = 4 << 20;
pub const MAX_LINE_BYTES: usize = 16 << 10;

/// What `logs.tail` answers as `file`: there is no file, the lines are in memory.
pub const SOURCE: &str = "loopgate: in memory, the last 5000 lines";

#[derive(Default)]
struct Ring {
    /// (offset of the line's first byte, the line without its newline).
    lines: VecDeque<(u64, String)>,
    bytes: usize,
    /// Every byte logged so far (the offset the next line starts at).
    end: u64,
    /// A line being written in pieces.
    partial: Vec<u8>,
}

pub struct LogRing {
    ring: Mutex<Ring>,
}

/// The gateway's ring (the logger is process-wide, so is its ring).
pub static LOGS: LogRing = LogRing {
    ring: Mutex::new(Ring {
        lines: VecDeque::new(),
        bytes: 0,
        end: 0,
        partial: Vec::new(),
    }),
};

impl LogRing {
    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Adds logged bytes (any split; lines end at `\n`).
    pub fn append(&self, bytes: &[u8]) {
        let mut r = self.lock();
        for piece in bytes.split_inclusive(|&b| b == b'\n') {
            let ends = piece.last() == Some(&b'\n');
            let body = if ends {
                &piece[..piece.len() - 1]
            } else {
                piece
            };
            let room = MAX_LINE_BYTES.saturating_sub(r.partial.len());
            r.partial.extend_from_slice(&body[..body.len().min(room)]);
            r.end += piece.len() as u64;
            if ends {
                let line = String::from_utf8_lossy(&std::mem::take(&mut r.partial)).into_owned();
                let start = r.end - piece.len() as u64;
                r.bytes += line.len() + 1;
                r.lines.push_back((start, line));
                while r.lines.len() > MAX_LINES || r.bytes > MAX_BYTES {
                    match r.lines.pop_front() {
                        Some((_, old)) => r.bytes -= old.len() + 1,
                        None => break,
                    }
                }
            }
        }
    }

    /// The lines from `cursor` on (the newest ones, when there are more than `limit` or
    /// `max_bytes` allow), in OpenClaw's `logs.tail` shape.
    pub fn tail(&self, cursor: Option<u64>, limit: usize, max_bytes: usize) -> LogsTailResult {
        let r = self.lock();
        let first = r.lines.front().map_or(r.end, |(o, _)| *o);
        let (from, reset) = match cursor {
            // Past the end: the log began again (a restart); read its tail.
            Some(c) if c > r.end => (first, true),
            Some(c) => (c, false),
            None => (first, false),
        };
        let wanted: Vec<&(u64, String)> = r.lines.iter().filter(|(o, _)| *o >= from).collect();
        // Keep the newest lines that fit.
        let mut taken = Vec::new();
        let mut size = 0usize;
        for (_, line) in wanted.iter().rev() {
            if taken.len() == limit || size + line.len() + 1 > max_bytes {
                break;
            }
            size += line.len() + 1;
            taken.push(line.clone());
        }
        taken.reverse();
        let skipped_lines = wanted.len() - taken.len();
        let dropped_before = from < first && cursor.is_some() && !reset;
        let skipped_bytes = wanted
            .iter()
            .take(skipped_lines)
            .map(|(_, l)| l.len() as u64 + 1)
            .sum::<u64>()
            + if dropped_before { first - from } else { 0 };
        let truncated = skipped_bytes > 0;
        LogsTailResult {
            file: SOURCE.into(),
            cursor: r.end,
            size: r.end,
            lines: taken,
            truncated: truncated.then_some(true),
            reset: reset.then_some(true),
            skipped_bytes: truncated.then_some(skipped_bytes),
        }
    }
}

/// Writes log output to stderr and into [`LOGS`].
pub struct TeeWriter;

impl Write for TeeWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        LOGS.append(buf);
        std::io::stderr().write_all(buf)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring() -> LogRing {
        LogRing {
            ring: Mutex::new(Ring::default()),
        }
    }

    #[test]
    fn lines_are_addressed_by_byte_offsets_across_any_split() {
        let r = ring();
        r.append(b"one\ntw");
        r.append(b"o\nthree\n");
        let all = r.tail(None, 100, 10_000);
        assert_eq!(all.lines, ["one", "two", "three"]);
        assert_eq!(all.cursor, 14);
        assert_eq!(all.truncated, None);
        r.append(b"four\n");
        let next = r.tail(Some(all.cursor), 100, 10_000);
        assert_eq!(next.lines, ["four"]);
        assert_eq!(next.cursor, 19);
        assert!(r.tail(Some(19), 100, 10_000).lines.is_empty());
    }

    #[test]
    fn limits_keep_the_newest_and_say_what_was_skipped() {
        let r = ring();
        r.append(b"aaaa\nbbbb\ncccc\n");
        let t = r.tail(Some(0), 2, 10_000);
        assert_eq!(t.lines, ["bbbb", "cccc"]);
        assert_eq!((t.truncated, t.skipped_bytes), (Some(true), Some(5)));
        let t = r.tail(None, 100, 6);
        assert_eq!(t.lines, ["cccc"]);
        let t = r.tail(Some(1_000), 100, 10_000);
        assert_eq!(t.reset, Some(true));
        assert_eq!(t.lines.len(), 3);
    }

    #[test]
    fn the_ring_is_bounded() {
        let r = ring();
        for i in 0..(MAX_LINES + 10) {
            r.append(format!("line {i}\n").as_bytes());
        }
        let t = r.tail(Some(0), MAX_LINES + 100, usize::MAX);
        assert_eq!(t.lines.len(), MAX_LINES);
        assert_eq!(t.lines[0], "line 10");
        assert_eq!(t.truncated, Some(true));
        r.append(&vec![b'x'; MAX_LINE_BYTES * 2]);
        r.append(b"\n");
        let t = r.tail(None, 1, usize::MAX);
        assert_eq!(t.lines[0].len(), MAX_LINE_BYTES);
    }
}
