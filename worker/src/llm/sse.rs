//! Server-sent events and newline-delimited lines from a provider's byte stream, in linear
//! time and bounded memory.
//!
//! A general-purpose SSE parser rescans its buffer from the start on every chunk, so a long
//! line costs the square of its length in CPU before any cap is reached. [`Lines`] remembers
//! how far it has scanned, refuses a line longer than its cap while it is still arriving, and
//! hands out complete lines only. [`Event`]s follow the SSE rules that matter for model APIs:
//! `event:` names, one or more `data:` lines joined by `\n`, `:` comments, a blank line
//! dispatches; a pending event at the end of the body is dispatched rather than lost.

use futures_util::{Stream, StreamExt};

/// Splits bytes into lines (`\n`, `\r\n` or `\r`), each at most `max` bytes.
pub struct Lines {
    buf: Vec<u8>,
    /// Where the current line starts in `buf`.
    start: usize,
    /// Bytes of `buf` before this are known to hold no line break after `start`.
    scanned: usize,
    /// The last line ended with `\r`: a `\n` first in the next bytes belongs to it.
    after_cr: bool,
    max: usize,
}

pub(crate) const LONG_LINE: &str = "the provider sent a line longer than";
pub(crate) const NOT_UTF8: &str = "the provider's stream is not UTF-8";

impl Lines {
    pub fn new(max: usize) -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            after_cr: false,
            max,
        }
    }

    /// Adds bytes (dropping the lines already handed out: once per chunk, so linear).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.scanned -= self.start;
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete line, without its break; `Ok(None)` until one is complete.
    pub fn next_line(&mut self) -> Result<Option<String>, String> {
        if self.after_cr && self.start < self.buf.len() {
            if self.buf[self.start] == b'\n' {
                self.start += 1;
                self.scanned = self.scanned.max(self.start);
            }
            self.after_cr = false;
        }
        let found = self.buf[self.scanned..]
            .iter()
            .position(|&c| c == b'\n' || c == b'\r')
            .map(|i| i + self.scanned);
        let Some(end) = found else {
            self.scanned = self.buf.len();
            if self.buf.len() - self.start > self.max {
                return Err(format!("{LONG_LINE} {} bytes", self.max));
            }
            return Ok(None);
        };
        if end - self.start > self.max {
            return Err(format!("{LONG_LINE} {} bytes", self.max));
        }
        let line = std::str::from_utf8(&self.buf[self.start..end])
            .map(str::to_owned)
            .map_err(|_| NOT_UTF8.to_owned())?;
        self.after_cr = self.buf[end] == b'\r';
        self.start = end + 1;
        self.scanned = self.start;
        Ok(Some(line))
    }

    /// What is left once the body has ended (a last line without a break), if anything.
    pub fn finish(&mut self) -> Result<Option<String>, String> {
        if self.after_cr && self.buf.get(self.start) == Some(&b'\n') {
            self.start += 1;
        }
        let rest = &self.buf[self.start..];
        if rest.is_empty() {
            return Ok(None);
        }
        let line = std::str::from_utf8(rest)
            .map(str::to_owned)
            .map_err(|_| NOT_UTF8.to_owned())?;
        self.start = self.buf.len();
        self.scanned = self.start;
        Ok(Some(line))
    }
}

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Event {
    /// The `event:` name (empty when none was given: the default `message`).
    pub event: String,
    pub data: String,
}

/// Collects fields into events.
#[derive(Default)]
struct Decoder {
    event: String,
    data: String,
    has_data: bool,
    /// Past the first line (a byte-order mark before it is dropped).
    started: bool,
    /// Largest event `data` (many `data:` lines join into one event).
    max: usize,
}

impl Decoder {
    fn line(&mut self, line: &str) -> Result<Option<Event>, String> {
        let ev = self.field(line);
        if self.data.len() > self.max {
            return Err(format!(
                "the provider sent an event larger than {} bytes",
                self.max
            ));
        }
        Ok(ev)
    }

    fn field(&mut self, line: &str) -> Option<Event> {
        let line = match std::mem::replace(&mut self.started, true) {
            false => line.strip_prefix('\u{feff}').unwrap_or(line),
            true => line,
        };
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = value.to_owned(),
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            // `id`, `retry` and unknown fields mean nothing to a model stream.
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<Event> {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(Event {
            event,
            data: std::mem::take(&mut self.data),
        })
    }
}

/// The events of an SSE body, ending with an error at the first line or event (its `data:`
/// lines joined) over `max_line` bytes, or at a transport error.
pub fn events<S, B>(bytes: S, max_line: usize) -> impl Stream<Item = Result<Event, String>> + Unpin
where
    S: Stream<Item = Result<B, String>> + Unpin,
    B: AsRef<[u8]>,
{
    let mut decoder = Decoder {
        max: max_line,
        ..Decoder::default()
    };
    let mut failed = false;
    lines(bytes, max_line).filter_map(move |line| {
        let out = match line {
            // Nothing follows an error.
            _ if failed => None,
            Ok(Some(l)) => decoder.line(&l).transpose(),
            Ok(None) => decoder.dispatch().map(Ok),
            Err(e) => Some(Err(e)),
        };
        failed |= matches!(out, Some(Err(_)));
        std::future::ready(out)
    })
}

/// The lines of a body; `Ok(None)` once, after the last, when the body ends.
pub fn lines<S, B>(
    bytes: S,
    max_line: usize,
) -> impl Stream<Item = Result<Option<String>, String>> + Unpin
where
    S: Stream<Item = Result<B, String>> + Unpin,
    B: AsRef<[u8]>,
{
    enum Phase {
        Reading,
        /// The last line was handed out; the end marker follows.
        Ending,
        Done,
    }
    struct State<S> {
        bytes: S,
        lines: Lines,
        phase: Phase,
    }
    let state = State {
        bytes,
        lines: Lines::new(max_line),
        phase: Phase::Reading,
    };
    Box::pin(futures_util::stream::unfold(state, |mut st| async move {
        match st.phase {
            Phase::Done => return None,
            Phase::Ending => {
                st.phase = Phase::Done;
                return Some((Ok(None), st));
            }
            Phase::Reading => {}
        }
        loop {
            match st.lines.next_line() {
                Ok(Some(line)) => return Some((Ok(Some(line)), st)),
                Ok(None) => {}
                Err(e) => {
                    st.phase = Phase::Done;
                    return Some((Err(e), st));
                }
            }
            match st.bytes.next().await {
                Some(Ok(chunk)) => st.lines.push(chunk.as_ref()),
                Some(Err(e)) => {
                    st.phase = Phase::Done;
                    return Some((Err(e), st));
                }
                None => {
                    return match st.lines.finish() {
                        Ok(Some(last)) => {
                            st.phase = Phase::Ending;
                            Some((Ok(Some(last)), st))
                        }
                        Ok(None) => {
                            st.phase = Phase::Done;
                            Some((Ok(None), st))
                        }
                        Err(e) => {
                            st.phase = Phase::Done;
                            Some((Err(e), st))
                        }
                    };
                }
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(parts: &[&str]) -> impl Stream<Item = Result<Vec<u8>, String>> + Unpin {
        let parts: Vec<Result<Vec<u8>, String>> =
            parts.iter().map(|p| Ok(p.as_bytes().to_vec())).collect();
        futures_util::stream::iter(parts)
    }

    async fn all_events(parts: &[&str], max: usize) -> Vec<Result<Event, String>> {
        events(body(parts), max).collect().await
    }

    fn ev(event: &str, data: &str) -> Result<Event, String> {
        Ok(Event {
            event: event.into(),
            data: data.into(),
        })
    }

    #[tokio::test]
    async fn events_split_anywhere_and_every_line_break_kind() {
        let want = vec![ev("", "one"), ev("delta", "two\nlines"), ev("", "[DONE]")];
        let text =
            "data: one\r\n\r\n: comment\nevent: delta\ndata: two\rdata:lines\r\rdata: [DONE]\n\n";
        assert_eq!(all_events(&[text], 64).await, want);
        // Every split point, including between `\r` and `\n`.
        for i in 0..text.len() {
            let (a, b) = text.split_at(i);
            assert_eq!(all_events(&[a, b], 64).await, want, "split at {i}");
        }
    }

    #[tokio::test]
    async fn a_pending_event_at_the_end_is_not_lost() {
        assert_eq!(all_events(&["data: x\n"], 64).await, vec![ev("", "x")]);
        assert_eq!(all_events(&["data: y"], 64).await, vec![ev("", "y")]);
        assert_eq!(all_events(&["event: e\n\n"], 64).await, vec![]);
        assert_eq!(
            all_events(&["\u{feff}data: z\n\n"], 64).await,
            vec![ev("", "z")]
        );
    }

    #[tokio::test]
    async fn a_long_line_is_refused_while_it_arrives() {
        let out = all_events(&["data: ", "xxxxxxxx", "xxxxxxxx", "never read"], 16).await;
        assert_eq!(out.len(), 1);
        assert!(out[0].as_ref().unwrap_err().contains("longer than 16"));
        let out = all_events(&["data: 0123456789abcdef\n\n"], 16).await;
        assert!(out[0].as_ref().unwrap_err().contains("longer than 16"));
    }

    /// Many short `data:` lines cannot build one event past the cap.
    #[tokio::test]
    async fn an_event_of_many_lines_is_bounded_too() {
        let parts = ["data: 0123456789\n"; 4];
        let out = all_events(&parts, 32).await;
        assert_eq!(out.len(), 1, "{out:?}");
        assert!(out[0]
            .as_ref()
            .unwrap_err()
            .contains("event larger than 32"));
    }

    #[tokio::test]
    async fn bad_utf8_and_transport_errors_end_the_stream() {
        let parts: Vec<Result<Vec<u8>, String>> = vec![Ok(b"data: \xff\n\n".to_vec())];
        let out: Vec<_> = events(futures_util::stream::iter(parts), 64)
            .collect()
            .await;
        assert!(out[0].as_ref().unwrap_err().contains("UTF-8"));
        let parts: Vec<Result<Vec<u8>, String>> =
            vec![Ok(b"data: a\n\n".to_vec()), Err("reset".into())];
        let out: Vec<_> = events(futures_util::stream::iter(parts), 64)
            .collect()
            .await;
        assert_eq!(out, vec![ev("", "a"), Err("reset".into())]);
    }

    /// Linear time: a line of many chunks is scanned once.
    #[test]
    fn scanning_resumes_where_it_stopped() {
        let mut lines = Lines::new(usize::MAX);
        for _ in 0..10_000 {
            lines.push(&[b'x'; 1000]);
            assert_eq!(lines.next_line(), Ok(None));
        }
        assert_eq!(lines.scanned, 10_000_000);
        lines.push(b"\n");
        assert_eq!(
            lines.next_line().unwrap().map(|l| l.len()),
            Some(10_000_000)
        );
    }
}
