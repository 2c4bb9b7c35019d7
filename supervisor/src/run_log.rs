//! The per-run event buffer behind `agent.events` (resume after a disconnect): every
//! `agent` and `chat` event of a run, as published, kept so a client that lost its
//! connection can get what it missed. Bounded: a run keeps its newest [`RUN_BYTES`] of
//! events (older ones go first, and a replay from before them says `truncated`); a run's
//! events stay [`KEEP_AFTER_END`] after its terminal; all runs together hold at most
//! [`TOTAL_BYTES`] (runs that ended first go first).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the log needs to know of an event: its place in the hub's order and its size.
pub trait Logged {
    fn hub_seq(&self) -> u64;
    fn bytes(&self) -> usize;
}

/// Event bytes kept per run.
pub const RUN_BYTES: usize = 1 << 20;
/// How long a finished run's events are kept.
pub const KEEP_AFTER_END: Duration = Duration::from_secs(300);
/// Event bytes kept for all runs.
pub const TOTAL_BYTES: usize = 16 << 20;

/// Which run an event belongs to, and whether it ends the run.
#[derive(Debug, Clone)]
pub struct RunTag {
    pub run_id: Arc<str>,
    pub seq: u64,
    pub terminal: bool,
}

struct RunEvents<E> {
    events: VecDeque<(u64, Arc<E>)>,
    bytes: usize,
    /// The highest `seq` no longer kept (0: none was dropped).
    dropped_upto: u64,
    ended: Option<Instant>,
}

impl<E> Default for RunEvents<E> {
    fn default() -> Self {
        Self {
            events: VecDeque::new(),
            bytes: 0,
            dropped_upto: 0,
            ended: None,
        }
    }
}

/// What a replay found.
pub struct Replay<E> {
    pub events: Vec<Arc<E>>,
    pub truncated: bool,
    pub first_seq: Option<u64>,
    pub ended: bool,
    /// The buffer knows the run (it published something).
    pub known: bool,
}

pub struct RunLog<E> {
    runs: HashMap<Arc<str>, RunEvents<E>>,
    /// Runs in the order they ended (for expiry and for the total cap).
    ended: VecDeque<(Instant, Arc<str>)>,
    bytes: usize,
    /// The table gave back most of its room since [`RunLog::take_shrank`] last asked.
    shrank: bool,
}

impl<E> Default for RunLog<E> {
    fn default() -> Self {
        Self {
            runs: HashMap::new(),
            ended: VecDeque::new(),
            bytes: 0,
            shrank: false,
        }
    }
}

impl<E: Logged> RunLog<E> {
    pub fn record(&mut self, tag: &RunTag, ev: &Arc<E>, now: Instant) {
        let size = ev.bytes() + 64;
        let run = self.runs.entry(tag.run_id.clone()).or_default();
        run.events.push_back((tag.seq, ev.clone()));
        run.bytes += size;
        self.bytes += size;
        while run.bytes > RUN_BYTES && run.events.len() > 1 {
            if let Some((seq, old)) = run.events.pop_front() {
                let n = old.bytes() + 64;
                run.bytes -= n;
                self.bytes -= n;
                run.dropped_upto = run.dropped_upto.max(seq);
            }
        }
        if tag.terminal && run.ended.is_none() {
            run.ended = Some(now);
            self.ended.push_back((now, tag.run_id.clone()));
        }
        self.expire(now);
    }

    /// Drops runs that ended more than [`KEEP_AFTER_END`] ago, then, past [`TOTAL_BYTES`],
    /// the runs that ended first (and, if none has ended, the events of the largest running
    /// one, which remembers what it lost). Called on every record and on the control actor's
    /// tick, so an idle gateway lets go of them too (issue 24: a run's log was ~3.6 KB kept
    /// for good once nothing more was published).
    pub fn expire(&mut self, now: Instant) {
        while let Some((at, _)) = self.ended.front() {
            let old = now.duration_since(*at) > KEEP_AFTER_END;
            if !old && self.bytes <= TOTAL_BYTES {
                break;
            }
            if let Some((_, id)) = self.ended.pop_front() {
                self.forget(&id);
            }
        }
        if self.bytes > TOTAL_BYTES {
            if let Some(run) = self.runs.values_mut().max_by_key(|r| r.bytes) {
                if let Some((last, _)) = run.events.back() {
                    run.dropped_upto = run.dropped_upto.max(*last);
                }
                run.events.clear();
                self.bytes -= run.bytes;
                run.bytes = 0;
            }
        }
    }

    fn forget(&mut self, run_id: &str) {
        if let Some(r) = self.runs.remove(run_id) {
            self.bytes -= r.bytes;
        }
        // A burst of runs leaves a table sized for it; give the room back once it is mostly
        // empty.
        if self.runs.capacity() > 4 * self.runs.len() + 64 {
            self.runs.shrink_to_fit();
            self.ended.shrink_to_fit();
            self.shrank = true;
        }
    }

    /// Whether the log gave back most of its room since the last call (a burst of runs
    /// expired): the heap is worth trimming.
    pub fn take_shrank(&mut self) -> bool {
        std::mem::take(&mut self.shrank)
    }

    /// The run's events after `after_seq` published no later than `upto` (`hub_seq`).
    pub fn replay(&self, run_id: &str, after_seq: u64, upto: u64) -> Replay<E> {
        let Some(run) = self.runs.get(run_id) else {
            return Replay {
                events: Vec::new(),
                truncated: false,
                first_seq: None,
                ended: false,
                known: false,
            };
        };
        let first_seq = run.events.front().map(|(s, _)| *s);
        let events = run
            .events
            .iter()
            .filter(|(seq, ev)| *seq > after_seq && ev.hub_seq() <= upto)
            .map(|(_, ev)| ev.clone())
            .collect();
        Replay {
            events,
            // Something after `after_seq` is gone when the buffer dropped past it.
            truncated: run.dropped_upto > after_seq,
            first_seq,
            ended: run.ended.is_some(),
            known: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An event of `bytes` bytes at `hub_seq`.
    struct Ev {
        hub_seq: u64,
        bytes: usize,
    }

    impl Logged for Ev {
        fn hub_seq(&self) -> u64 {
            self.hub_seq
        }
        fn bytes(&self) -> usize {
            self.bytes
        }
    }

    fn ev(hub_seq: u64, bytes: usize) -> Arc<Ev> {
        Arc::new(Ev { hub_seq, bytes })
    }

    fn tag(seq: u64, terminal: bool) -> RunTag {
        RunTag {
            run_id: Arc::from("r"),
            seq,
            terminal,
        }
    }

    #[test]
    fn a_replay_gives_what_follows_the_seq_up_to_the_connections_start() {
        let now = Instant::now();
        let mut log = RunLog::default();
        for s in 1..=5 {
            log.record(&tag(s, s == 5), &ev(10 + s, 10), now);
        }
        let r = log.replay("r", 2, 14);
        let got: Vec<u64> = r.events.iter().map(|e| e.hub_seq).collect();
        assert_eq!(got, [13, 14], "seq 3 and 4; 5 came live");
        assert!(!r.truncated && r.ended && r.known);
        assert!(!log.replay("other", 0, 99).known);
    }

    #[test]
    fn a_run_keeps_its_newest_mebibyte_and_says_when_a_replay_starts_before_it() {
        let now = Instant::now();
        let mut log = RunLog::default();
        for s in 1..=5 {
            log.record(&tag(s, false), &ev(s, RUN_BYTES / 3), now);
        }
        let r = log.replay("r", 0, 99);
        assert!(r.truncated, "seq 1 is gone");
        assert_eq!(r.first_seq, Some(4));
        assert!(
            !log.replay("r", 3, 99).truncated,
            "nothing after 3 is missing"
        );
    }

    /// Past the total, a running run loses its events but not the fact: a replay from
    /// before them says `truncated`.
    #[test]
    fn an_evicted_running_run_still_says_truncated() {
        let now = Instant::now();
        let mut log = RunLog::default();
        let runs = TOTAL_BYTES / (RUN_BYTES - 1024) + 1;
        for i in 0..runs {
            let t = RunTag {
                run_id: Arc::from(format!("r{i}")),
                seq: 1,
                terminal: false,
            };
            log.record(&t, &ev(i as u64 + 1, RUN_BYTES - 1024), now);
        }
        assert!(log.bytes <= TOTAL_BYTES);
        let lost = (0..runs)
            .map(|i| log.replay(&format!("r{i}"), 0, u64::MAX))
            .filter(|r| r.known && r.events.is_empty())
            .collect::<Vec<_>>();
        assert_eq!(lost.len(), 1);
        assert!(lost[0].truncated);
    }

    #[test]
    fn finished_runs_expire_after_five_minutes() {
        let now = Instant::now();
        let mut log = RunLog::default();
        log.record(&tag(1, true), &ev(1, 10), now);
        assert!(log.replay("r", 0, 9).known);
        let later = RunTag {
            run_id: Arc::from("s"),
            seq: 1,
            terminal: false,
        };
        log.record(
            &later,
            &ev(2, 10),
            now + KEEP_AFTER_END + Duration::from_secs(1),
        );
        assert!(!log.replay("r", 0, 9).known);
        assert!(log.replay("s", 0, 9).known, "a running one stays");
    }

    /// An idle gateway lets go too: expiry on the control actor's tick, with nothing more
    /// recorded, and a table a burst grew is given back (issue 24 item 2).
    #[test]
    fn an_idle_log_expires_on_the_tick_and_shrinks() {
        let now = Instant::now();
        let mut log = RunLog::default();
        for i in 0..1000 {
            let t = RunTag {
                run_id: Arc::from(format!("r{i}").as_str()),
                seq: 1,
                terminal: true,
            };
            log.record(&t, &ev(i, 100), now);
        }
        assert!(log.replay("r7", 0, u64::MAX).known);
        log.expire(now + KEEP_AFTER_END);
        assert!(log.replay("r7", 0, u64::MAX).known, "kept its five minutes");
        log.expire(now + KEEP_AFTER_END + Duration::from_secs(1));
        assert!(!log.replay("r7", 0, u64::MAX).known);
        assert_eq!(log.bytes, 0);
        assert!(log.runs.capacity() < 128, "{}", log.runs.capacity());
    }
}
