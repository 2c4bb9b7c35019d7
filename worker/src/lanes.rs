//! Session lanes and their queue policy (R-B2, R-B3). Runs of one session key execute one
//! at a time; what a message does when its session is busy is its run's [`QueuePolicy`]:
//! steered into the running turn, queued as a followup, collected with the other waiting
//! messages into one turn after a quiet window, or run next after interrupting the turn.
//! A full queue drops by policy: the oldest or the newest message ends as an error, or the
//! oldest is folded into a summary line the next turn carries.
//!
//! No I/O here: the worker carries out the [`Effect`]s and starts the turns [`Lane::next`]
//! hands out.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use ipc::control::SubmitRun;
use ipc::queue::{QueueDrop, QueueMode, QueuePolicy};
use tokio::sync::mpsc;

use crate::agent::core::{SteerMsg, Steered};

/// Messages steered into one turn and not yet read by it.
const STEER_QUEUE: usize = 32;
/// Messages folded into one summary line at most; beyond it the oldest ends as an error.
const MAX_SUMMARIZED: usize = 200;
/// Characters of a dropped message kept for its summary line.
const SUMMARY_CHARS: usize = 160;

/// What an arriving message waits with when its run names no policy (an older supervisor).
const UNBOUNDED_FOLLOWUP: QueuePolicy = QueuePolicy {
    mode: QueueMode::Followup,
    debounce_ms: 0,
    cap: u32::MAX,
    drop: QueueDrop::Old,
};

/// Something the worker must do for a lane.
#[derive(Debug, PartialEq)]
pub enum Effect {
    /// `run_id` ended without running, as an error.
    Dropped { run_id: String, error: String },
    /// Abort the running turn: a message in `interrupt` mode replaces it.
    Interrupt { run_id: String },
}

/// A turn to start: its run (the message possibly combined from several) and the runs it
/// carries, which end with its outcome.
pub struct Start {
    pub run: SubmitRun,
    pub steer: mpsc::Receiver<SteerMsg>,
    /// Runs whose messages `run`'s message carries (collected, summarized).
    pub carried: Vec<String>,
}

/// Where a run to cancel was.
#[derive(Debug, PartialEq)]
pub enum Found {
    /// Waiting, or carried by the running turn: taken out; it ends aborted (the turn goes on
    /// for the others' messages).
    Removed,
    NotHere,
}

struct Waiting {
    run: SubmitRun,
    collect: bool,
    /// Arrived in `interrupt` mode: runs before the other waiting messages.
    interrupt: bool,
    arrived: Instant,
    /// Arrival order in the lane (waiting messages keep it, R-B3).
    seq: u64,
}

struct Running {
    run_id: String,
    steer: mpsc::Sender<SteerMsg>,
    /// Runs steered into the turn, with their arrival (whether it took them is known when
    /// it ends).
    steered: Vec<(SubmitRun, Instant, u64)>,
    /// Runs collected into it or folded into its summary line.
    carried: Vec<String>,
}

/// One session's runs.
#[derive(Default)]
pub struct Lane {
    queue: VecDeque<Waiting>,
    running: Option<Running>,
    /// Messages dropped by `summarize` (their text cut to a preview), for the next turn.
    summarized: Vec<SubmitRun>,
    /// The next arrival's number.
    next_seq: u64,
}

/// A turn that carries other runs' messages (collected, summarized) is traced only if every
/// one of their senders may see its trace: the outcome is theirs too (OpenClaw clears it for
/// mixed senders).
fn untrace_mixed(run: &mut SubmitRun, carried: &[SubmitRun]) {
    if carried.iter().any(|r| r.trace != run.trace) {
        run.trace = None;
    }
}

impl Lane {
    /// Messages waiting for a turn.
    pub fn waiting(&self) -> usize {
        self.queue.len() + self.summarized.len()
    }

    /// The running turn's run id.
    pub fn running(&self) -> Option<&str> {
        self.running.as_ref().map(|r| r.run_id.as_str())
    }

    /// When the oldest waiting message arrived.
    pub fn waiting_since(&self) -> Option<Instant> {
        self.queue.iter().map(|w| w.arrived).min()
    }

    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    pub fn is_idle(&self) -> bool {
        self.running.is_none() && self.queue.is_empty() && self.summarized.is_empty()
    }

    /// True while a run is running or waiting.
    pub fn busy(&self) -> bool {
        !self.is_idle()
    }

    /// A message arrives (R-B3).
    pub fn arrive(&mut self, run: SubmitRun, now: Instant) -> Vec<Effect> {
        let policy = run.queue.unwrap_or(UNBOUNDED_FOLLOWUP);
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.is_idle() {
            self.queue.push_back(Waiting {
                run,
                collect: false,
                interrupt: false,
                arrived: now,
                seq,
            });
            return Vec::new();
        }
        let mut effects = Vec::new();
        let run = match policy.mode {
            QueueMode::Steer => match self.steer(run, now, seq) {
                None => return effects,
                // The turn cannot take it (it is not running, or its queue is full): it
                // runs after.
                Some(run) => run,
            },
            QueueMode::Interrupt | QueueMode::Followup | QueueMode::Collect => run,
        };
        let cap = policy.cap.max(1) as usize;
        if self.queue.len() >= cap {
            let why = |which: &str| {
                format!(
                    "dropped: the session's queue was full ({cap} messages waiting; drop policy \"{which}\")"
                )
            };
            match policy.drop {
                QueueDrop::New => {
                    effects.push(Effect::Dropped {
                        run_id: run.run_id,
                        error: why("new"),
                    });
                    return effects;
                }
                QueueDrop::Old => {
                    if let Some(old) = self.pop_oldest() {
                        effects.push(Effect::Dropped {
                            run_id: old.run.run_id,
                            error: why("old"),
                        });
                    }
                }
                QueueDrop::Summarize => {
                    if let Some(mut old) = self.pop_oldest() {
                        if self.summarized.len() >= MAX_SUMMARIZED {
                            let first = self.summarized.remove(0);
                            effects.push(Effect::Dropped {
                                run_id: first.run_id,
                                error: why("summarize"),
                            });
                        }
                        old.run.message = preview(&old.run.message);
                        self.summarized.push(old.run);
                    }
                }
            }
        }
        let interrupt = policy.mode == QueueMode::Interrupt;
        let waiting = Waiting {
            collect: policy.mode == QueueMode::Collect,
            interrupt,
            run,
            arrived: now,
            seq,
        };
        if interrupt {
            // Only a message that is kept interrupts the turn.
            if let Some(r) = &self.running {
                effects.push(Effect::Interrupt {
                    run_id: r.run_id.clone(),
                });
            }
        }
        self.insert(waiting);
        effects
    }

    /// Puts a waiting message in its place: interrupting messages first, in arrival order,
    /// then the others in arrival order.
    fn insert(&mut self, w: Waiting) {
        let lead = self.queue.iter().take_while(|q| q.interrupt).count();
        let at = if w.interrupt {
            lead
        } else {
            self.queue
                .iter()
                .skip(lead)
                .position(|q| q.seq > w.seq)
                .map_or(self.queue.len(), |i| lead + i)
        };
        self.queue.insert(at, w);
    }

    /// The waiting message that arrived first.
    fn pop_oldest(&mut self) -> Option<Waiting> {
        let (i, _) = self.queue.iter().enumerate().min_by_key(|(_, w)| w.seq)?;
        self.queue.remove(i)
    }

    /// Hands `run`'s message to the running turn; gives it back if there is none to take it.
    fn steer(&mut self, mut run: SubmitRun, now: Instant, seq: u64) -> Option<SubmitRun> {
        let Some(r) = self.running.as_mut() else {
            return Some(run);
        };
        // A turn takes a bounded number of messages; the rest wait (and meet the cap).
        let cap = run.queue.map_or(usize::MAX, |q| q.cap.max(1) as usize);
        if r.steered.len() >= cap {
            return Some(run);
        }
        let s = Steered {
            run_id: run.run_id.clone(),
            text: run.message.clone(),
            attachments: std::mem::take(&mut run.attachments),
            traced: run.trace == Some(ipc::footer::TraceLevel::Raw),
        };
        match r.steer.try_send(SteerMsg::Add(s)) {
            Ok(()) => {
                r.steered.push((run, now, seq));
                None
            }
            Err(e) => {
                // Not taken: the message waits with its attachments.
                if let SteerMsg::Add(s) = e.into_inner() {
                    run.attachments = s.attachments;
                }
                Some(run)
            }
        }
    }

    /// The next turn to start, if the lane is free and its front is ready; `Err(at)`: a
    /// collected batch waits for its quiet window until `at`.
    pub fn next(&mut self, now: Instant) -> Result<Option<Start>, Instant> {
        if self.running.is_some() {
            return Ok(None);
        }
        let mut carried = Vec::new();
        let Some(front) = self.queue.front() else {
            // Only summarized messages are left (their followers were cancelled): the summary
            // runs as a turn of its own.
            if self.summarized.is_empty() {
                return Ok(None);
            }
            let all = std::mem::take(&mut self.summarized);
            let cap = all[0].queue.map_or(0, |q| q.cap);
            let line = summary_line(&all, cap);
            let mut all = all.into_iter();
            let Some(mut first) = all.next() else {
                return Ok(None);
            };
            first.message = line.trim_end().to_owned();
            let all: Vec<SubmitRun> = all.collect();
            untrace_mixed(&mut first, &all);
            carried.extend(all.into_iter().map(|r| r.run_id));
            return Ok(Some(self.begin(first, carried)));
        };
        let mut run = if front.collect {
            let batch = self.queue.iter().take_while(|w| w.collect);
            let (mut newest, mut quiet) = (front.arrived, Duration::ZERO);
            for w in batch {
                newest = newest.max(w.arrived);
                let debounce = w.run.queue.map_or(0, |q| q.debounce_ms);
                quiet = quiet.max(Duration::from_millis(debounce));
            }
            if now < newest + quiet {
                return Err(newest + quiet);
            }
            let mut batch = Vec::new();
            while self.queue.front().is_some_and(|w| w.collect) {
                if let Some(w) = self.queue.pop_front() {
                    batch.push(w.run);
                }
            }
            let mut batch = batch.into_iter();
            let Some(mut first) = batch.next() else {
                return Ok(None);
            };
            let mut rest: Vec<SubmitRun> = batch.collect();
            untrace_mixed(&mut first, &rest);
            if !rest.is_empty() {
                let mut texts = vec![first.message.as_str()];
                texts.extend(rest.iter().map(|r| r.message.as_str()));
                let message = collected(&texts);
                first.message = message;
                // The collected turn's message carries every message's attachments.
                for r in &mut rest {
                    first.attachments.append(&mut r.attachments);
                }
                carried.extend(rest.into_iter().map(|r| r.run_id));
            }
            first
        } else {
            match self.queue.pop_front() {
                Some(w) => w.run,
                None => return Ok(None),
            }
        };
        if !self.summarized.is_empty() {
            let dropped = std::mem::take(&mut self.summarized);
            let cap = run.queue.map_or(0, |q| q.cap);
            run.message = format!("{}{}", summary_line(&dropped, cap), run.message);
            untrace_mixed(&mut run, &dropped);
            carried.extend(dropped.into_iter().map(|r| r.run_id));
        }
        Ok(Some(self.begin(run, carried)))
    }

    fn begin(&mut self, run: SubmitRun, carried: Vec<String>) -> Start {
        let (tx, rx) = mpsc::channel(STEER_QUEUE);
        self.running = Some(Running {
            run_id: run.run_id.clone(),
            steer: tx,
            steered: Vec::new(),
            carried: carried.clone(),
        });
        Start {
            run,
            steer: rx,
            carried,
        }
    }

    /// The running turn ended; `taken`: the steered runs it took. Returns the runs that end
    /// with its outcome. Steered messages it did not take wait at the front, in order.
    pub fn finished(&mut self, taken: &[String]) -> Vec<String> {
        let Some(r) = self.running.take() else {
            return Vec::new();
        };
        let mut carried = Vec::new();
        for (run, arrived, seq) in r.steered {
            if taken.contains(&run.run_id) {
                carried.push(run.run_id);
            } else {
                // Back in its arrival place: after interrupting messages, before those that
                // came after it.
                self.insert(Waiting {
                    run,
                    collect: false,
                    interrupt: false,
                    arrived,
                    seq,
                });
            }
        }
        carried.extend(r.carried);
        carried
    }

    /// Finds a run to cancel; a waiting one is removed.
    pub fn cancel(&mut self, run_id: &str) -> Found {
        if let Some(pos) = self.queue.iter().position(|w| w.run.run_id == run_id) {
            self.queue.remove(pos);
            return Found::Removed;
        }
        if let Some(pos) = self.summarized.iter().position(|r| r.run_id == run_id) {
            self.summarized.remove(pos);
            return Found::Removed;
        }
        let Some(r) = self.running.as_mut() else {
            return Found::NotHere;
        };
        // Part of the running turn: only this message leaves it (the turn goes on for the
        // others). A steered one the turn has not recorded yet is taken back from it.
        if let Some(pos) = r.steered.iter().position(|(s, _, _)| s.run_id == run_id) {
            r.steered.remove(pos);
            let _ = r.steer.try_send(SteerMsg::Drop(run_id.to_owned()));
            return Found::Removed;
        }
        if let Some(pos) = r.carried.iter().position(|c| c == run_id) {
            r.carried.remove(pos);
            return Found::Removed;
        }
        Found::NotHere
    }

    /// Empties the lane's waiting messages (abort everything): their run ids.
    pub fn take_waiting(&mut self) -> Vec<String> {
        let mut ids: Vec<String> = self.queue.drain(..).map(|w| w.run.run_id).collect();
        ids.extend(self.summarized.drain(..).map(|r| r.run_id));
        ids
    }
}

/// The one message a collected batch runs as.
fn collected(texts: &[&str]) -> String {
    let mut out = String::from("[Queued messages while the agent was busy]");
    for (i, t) in texts.iter().enumerate() {
        out.push_str(&format!("\n\n---\nQueued #{}\n{t}", i + 1));
    }
    out
}

/// The line the next turn carries for messages a full queue dropped (`summarize`).
fn summary_line(dropped: &[SubmitRun], cap: u32) -> String {
    let n = dropped.len();
    let mut out = format!(
        "[{n} earlier message{} dropped because the session's queue was full (cap {cap}); what they said:]\n",
        if n == 1 { " was" } else { "s were" }
    );
    for r in dropped {
        out.push_str(&format!("- {}\n", r.message));
    }
    out.push('\n');
    out
}

fn preview(text: &str) -> String {
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(SUMMARY_CHARS) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    }
}

#[cfg(test)]
mod tests;
