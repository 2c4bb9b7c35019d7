//! How a run's live text reaches clients (R-D2). Pure: the link's relay asks, with the time.
//!
//! Every `agent` `assistant` and `thinking` event and every chat `delta` carries the text so
//! far, so the cost of a stream is the sum of its texts, not of its deltas.
//! - The chat projection is paced as OpenClaw paces it ([`LIVE_TEXT_PACE`]): a delta after a
//!   pause goes at once, later ones are merged and go at most every 75 ms.
//! - The `agent` stream carries each delta as it comes (OpenClaw does not pace it), until one
//!   run's events of that stream have carried [`AGENT_FREE_BYTES`] of text; past that it is
//!   paced like the chat projection, so a model that streams a long reply in tiny pieces
//!   (model output is hostile input) costs its length times the time it takes, never its
//!   square.
//!
//! What is held goes out before any other event of the run (the relay flushes it first), so a
//! run's events stay in `seq` order, and when it is due ([`Pace::due`]). A delta of one stream
//! never forces another stream's held text out: while the run's reasoning is held, its reply
//! text is held too, and the other way round, so a model that interleaves them cannot undo
//! the pacing; all of a run's held text then goes together, in `seq` order.

use std::time::{Duration, Instant};

/// OpenClaw's `LIVE_TEXT_PACING_MS`.
pub const LIVE_TEXT_PACE: Duration = Duration::from_millis(75);

/// Text one run's `agent` events of a stream may carry before that stream is paced: an 8 KB
/// reply in 4-byte tokens (about 8 MB of events) goes delta by delta whole.
pub const AGENT_FREE_BYTES: usize = 8 << 20;

/// Deltas merged and not yet sent: their text, and the `seq` and `ts` of the last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub delta: String,
    pub seq: u64,
    pub ts: u64,
}

/// One live text stream of one run.
#[derive(Debug, Default)]
pub struct Pace {
    /// Event text that goes unpaced.
    free: usize,
    /// Event text sent so far.
    spent: usize,
    held: Option<Held>,
    last: Option<Instant>,
}

impl Pace {
    /// The chat projection's: always paced.
    pub fn chat() -> Self {
        Self::default()
    }

    /// An `agent` stream's: unpaced for its first [`AGENT_FREE_BYTES`].
    pub fn agent() -> Self {
        Self {
            free: AGENT_FREE_BYTES,
            ..Self::default()
        }
    }

    /// `delta` (numbered `seq`, at `ts`) joins the stream; `size` is the text an event sent
    /// now would carry; `wait`: another stream of the run holds text, so this one waits
    /// with it. What goes now (with what was held before it), or nothing: it is held.
    pub fn push(
        &mut self,
        delta: &str,
        seq: u64,
        ts: u64,
        size: usize,
        now: Instant,
        wait: bool,
    ) -> Option<Held> {
        match &mut self.held {
            Some(h) => {
                h.delta.push_str(delta);
                h.seq = seq;
                h.ts = ts;
            }
            None => {
                self.held = Some(Held {
                    delta: delta.to_owned(),
                    seq,
                    ts,
                })
            }
        }
        let paused = self.last.is_none_or(|t| now >= t + LIVE_TEXT_PACE);
        let free = self.spent.saturating_add(size) <= self.free;
        if !wait && (paused || free) {
            self.take(size, now)
        } else {
            None
        }
    }

    /// Whether text is held.
    pub fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// When what is held is due (`None`: nothing is held, or it waits for another stream,
    /// which is due itself).
    pub fn due(&self) -> Option<Instant> {
        // Only what came within the pace after a send is held, so `last` is set.
        self.held
            .as_ref()
            .and(self.last)
            .map(|t| t + LIVE_TEXT_PACE)
    }

    /// What is held, sent now (an event carrying `size` of text).
    pub fn take(&mut self, size: usize, now: Instant) -> Option<Held> {
        let held = self.held.take()?;
        self.spent = self.spent.saturating_add(size);
        self.last = Some(now);
        Some(held)
    }
}

/// A run's live text streams: the `agent` stream's assistant text, the chat projection of
/// it, and the `agent` stream's reasoning (`thinking`).
#[derive(Debug)]
pub struct RunPace {
    pub assistant: Pace,
    pub chat: Pace,
    pub thinking: Pace,
}

impl Default for RunPace {
    fn default() -> Self {
        Self {
            assistant: Pace::agent(),
            chat: Pace::chat(),
            thinking: Pace::agent(),
        }
    }
}

impl RunPace {
    /// Whether a delta of the reply waits (the reasoning holds text).
    pub fn text_waits(&self) -> bool {
        self.thinking.holds()
    }

    /// Whether a delta of the reasoning waits (the reply holds text).
    pub fn thinking_waits(&self) -> bool {
        self.assistant.holds() || self.chat.holds()
    }

    /// When the first of what the run holds is due.
    pub fn due(&self) -> Option<Instant> {
        [&self.assistant, &self.chat, &self.thinking]
            .into_iter()
            .filter_map(Pace::due)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The chat projection: the first delta at once, the next ones merged until 75 ms after
    /// it, then one event with them all and the last one's seq; after a pause, at once again.
    #[test]
    fn chat_deltas_merge_for_75_ms_r_d2() {
        let t0 = Instant::now();
        let mut p = Pace::chat();
        let first = p.push("a", 1, 10, 1, t0, false);
        assert_eq!(first.map(|h| h.delta), Some("a".into()));
        assert_eq!(p.push("b", 2, 11, 2, t0 + ms(10), false), None);
        assert_eq!(p.push("c", 3, 12, 3, t0 + ms(20), false), None);
        assert_eq!(p.due(), Some(t0 + LIVE_TEXT_PACE));
        let merged = p.push("d", 4, 13, 4, t0 + ms(75), false);
        assert_eq!(
            merged,
            Some(Held {
                delta: "bcd".into(),
                seq: 4,
                ts: 13
            })
        );
        assert_eq!(p.due(), None);
        assert_eq!(p.push("e", 5, 14, 5, t0 + ms(100), false), None);
        assert_eq!(p.take(5, t0 + ms(150)).map(|h| h.seq), Some(5));
        assert!(
            p.push("f", 6, 15, 6, t0 + ms(400), false).is_some(),
            "after a pause"
        );
    }

    /// The agent stream: every delta at once while the run's events carried less than
    /// [`AGENT_FREE_BYTES`]; then paced as the chat projection, so a long reply in tiny
    /// pieces costs time times length, not length squared.
    #[test]
    fn the_agent_stream_is_unpaced_until_it_gets_expensive_r_d2() {
        let t0 = Instant::now();
        let mut p = Pace::agent();
        let mut sent = 0;
        let mut text = 0;
        let mut n = 0;
        // Deltas 1 µs apart, the text growing by 64 bytes each.
        while sent + text + 64 <= AGENT_FREE_BYTES {
            n += 1;
            text += 64;
            let got = p.push("x", n, n, text, t0 + Duration::from_micros(n), false);
            assert!(got.is_some(), "delta {n} held while cheap");
            sent += text;
        }
        n += 1;
        text += 64;
        let at = t0 + Duration::from_micros(n);
        assert_eq!(
            p.push("y", n, n, text, at, false),
            None,
            "paced once expensive"
        );
        assert!(p.due().is_some_and(|d| d > at));
        n += 1;
        text += 64;
        let later = at + LIVE_TEXT_PACE;
        let merged = p.push("z", n, n, text, later, false).map(|h| h.delta);
        assert_eq!(merged, Some("yz".into()));
    }
}
