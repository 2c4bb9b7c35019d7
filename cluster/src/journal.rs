//! An agent's journal: the log its database is a cache of, and the writer fence across hosts
//! (G2, R-C1), checked by the engine.
//!
//! Each agent has one subject in the journal stream. Its owner's worker records every
//! transaction of its database there before committing it (the rows the transaction wrote,
//! as `dbwriter::journal` logs them), each publish naming the sequence the subject's last record must have
//! (`Nats-Expected-Last-Subject-Sequence`): a writer that missed a record is refused.
//!
//! - A **takeover** record is written by a gateway that takes the agent's lease, after the
//!   last record it has read and before it runs or closes anything: from then on the previous
//!   owner (a paused process that comes back, a partitioned host) can append nothing, because
//!   its next publish names a record that is no longer last.
//! - A **changes** record too large for one message goes as parts, each after the previous
//!   one; a reader takes a record only when all of its parts are there, in a row.
//! - A new owner rebuilds its database by replaying the records after the last one it
//!   applied ([`Engine::journal_read`]).

use async_nats::jetstream::consumer::pull::OrderedConfig;
use async_nats::jetstream::consumer::{Consumer, DeliverPolicy};
use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use async_nats::HeaderMap;
use bytes::Bytes;

use crate::engine::{retrying, wrong_last_sequence, ClusterError, Engine, REQUEST_TIMEOUT};
use crate::lease::Lease;
use crate::names::{journal_subject, TX_STREAM};

/// Header: what a record is (`changes` or `takeover`).
pub const KIND: &str = "Lg-Kind";
/// Header: the gateway that wrote it.
pub const NODE: &str = "Lg-Node";
/// Header: the placement epoch it was written under.
pub const EPOCH: &str = "Lg-Epoch";
/// Header: `i/n`, the part of a record that did not fit one message.
pub const PART: &str = "Lg-Part";

/// Room left in a message for its headers.
const HEADER_ROOM: usize = 4096;

/// What a journal record says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A transaction of the agent's database.
    Changes,
    /// A gateway took the agent over here.
    Takeover,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Changes => "changes",
            Kind::Takeover => "takeover",
        }
    }
}

/// One whole record of an agent's journal.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    /// The stream sequence of its last part.
    pub seq: u64,
    pub kind: Kind,
    pub node: String,
    pub epoch: u64,
    /// The changeset (empty for a takeover).
    pub changes: Vec<u8>,
}

/// The records after some point, and where the subject ends now.
#[derive(Debug, Default)]
pub struct Replay {
    pub records: Vec<Record>,
    /// The subject's last sequence (a record's, a takeover's, or a stray part's): the next
    /// append names it.
    pub last: u64,
}

/// A journal's last message: its sequence and the epoch it was written under (both 0 for
/// an empty journal).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Last {
    pub seq: u64,
    pub epoch: u64,
}

/// The journal refused a write: another record came after the one the writer named (a
/// newer owner took the agent over, or this writer missed a record).
#[derive(Debug, PartialEq, Eq)]
pub struct Refused;

impl Engine {
    /// Appends a transaction's `changes` to the agent's journal after the record `after`
    /// (0: the first). The sequence of the stored record, or `Refused`.
    pub async fn journal_append(
        &self,
        lease: &Lease,
        after: u64,
        changes: &[u8],
    ) -> Result<Result<u64, Refused>, ClusterError> {
        let room = self.max_payload().saturating_sub(HEADER_ROOM).max(1024);
        let parts: Vec<&[u8]> = if changes.is_empty() {
            vec![changes]
        } else {
            changes.chunks(room).collect()
        };
        let n = parts.len();
        let mut prev = after;
        for (i, part) in parts.into_iter().enumerate() {
            let mut headers = self.headers(lease, Kind::Changes);
            if n > 1 {
                headers.insert(PART, format!("{}/{n}", i + 1).as_str());
            }
            match self
                .journal_publish(lease, headers, Bytes::copy_from_slice(part), prev)
                .await?
            {
                Ok(seq) => prev = seq,
                Err(r) => return Ok(Err(r)),
            }
        }
        Ok(Ok(prev))
    }

    /// Writes the takeover record of `lease` after the subject's last record: from then on
    /// nothing written before it can be followed by its writer. Returns its sequence.
    ///
    /// Refused when the journal's last record was written under a newer epoch than the
    /// lease's: a newer owner took the agent over already, and a takeover after its records
    /// would let this stale owner write again.
    pub async fn journal_takeover(
        &self,
        lease: &Lease,
    ) -> Result<Result<u64, Refused>, ClusterError> {
        for _ in 0..16 {
            let last = self.journal_last(&lease.agent).await?;
            if last.epoch > lease.epoch {
                return Ok(Err(Refused));
            }
            let headers = self.headers(lease, Kind::Takeover);
            match self
                .journal_publish(lease, headers, Bytes::new(), last.seq)
                .await?
            {
                Ok(seq) => return Ok(Ok(seq)),
                // The previous owner wrote in between: after its record, then.
                Err(_) => continue,
            }
        }
        Err(ClusterError::Engine(format!(
            "agent {}: 16 takeovers in a row raced another writer",
            lease.agent
        )))
    }

    /// The whole records of `agent`'s journal after sequence `after`, oldest first, and the
    /// subject's last sequence, as the stream's leader has it. The records come through a
    /// consumer, which a replica may serve before it caught up (seen after a quorum loss:
    /// a worker synced without its own owner's takeover record, then every write of it was
    /// refused); so the leader's last sequence is read too, and the read done again until
    /// it reaches it. Every record is after `after` and handed back once, whatever the
    /// consumer delivers again.
    pub async fn journal_read(&self, agent: &str, after: u64) -> Result<Replay, ClusterError> {
        let deadline = tokio::time::Instant::now() + REQUEST_TIMEOUT;
        loop {
            let replay = self.journal_read_once(agent, after).await?;
            let last = self.journal_last(agent).await?;
            if last.seq <= replay.last {
                return Ok(replay);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ClusterError::Engine(format!(
                    "agent {agent}'s journal: its readers stop at record {} while its leader has {}",
                    replay.last, last.seq
                )));
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    async fn journal_read_once(&self, agent: &str, after: u64) -> Result<Replay, ClusterError> {
        let consumer = self.journal_consumer(agent, after).await?;
        if consumer.cached_info().num_pending == 0 {
            return Ok(Replay {
                records: Vec::new(),
                last: after,
            });
        }
        self.journal_replay(agent, after, consumer).await
    }

    /// A consumer of `agent`'s journal from the message after `after`.
    async fn journal_consumer(
        &self,
        agent: &str,
        after: u64,
    ) -> Result<Consumer<OrderedConfig>, ClusterError> {
        let stream = self
            .js
            .get_stream(TX_STREAM)
            .await
            .map_err(ClusterError::engine)?;
        stream
            .create_consumer(OrderedConfig {
                filter_subject: journal_subject(agent),
                deliver_policy: DeliverPolicy::ByStartSequence {
                    start_sequence: after + 1,
                },
                ..Default::default()
            })
            .await
            .map_err(ClusterError::engine)
    }

    /// The whole records `consumer` delivers after `after`, until it has none pending.
    async fn journal_replay(
        &self,
        agent: &str,
        after: u64,
        consumer: Consumer<OrderedConfig>,
    ) -> Result<Replay, ClusterError> {
        use futures_util::StreamExt;
        let mut replay = Replay {
            records: Vec::new(),
            last: after,
        };
        let mut parts = Parts::default();
        let mut messages = consumer.messages().await.map_err(ClusterError::engine)?;
        loop {
            // A consumer whose server went away can stall without ending: never wait on it
            // longer than on any engine request.
            let next = tokio::time::timeout(REQUEST_TIMEOUT, messages.next())
                .await
                .map_err(|_| {
                    ClusterError::Engine(format!(
                        "agent {agent}'s journal: no record after {} within {} s",
                        replay.last,
                        REQUEST_TIMEOUT.as_secs()
                    ))
                })?;
            let Some(m) = next else { break };
            let m = m.map_err(ClusterError::engine)?;
            let info = m.info().map_err(ClusterError::engine)?;
            let (seq, left) = (info.stream_sequence, info.pending);
            // The client makes a lost consumer again by itself (no responder for a pull,
            // the consumer deleted, heartbeats missed), after the last message it delivered;
            // lost before the first, the new one starts at the subject's first message, not
            // at this read's point. What comes again is not handed back a second time.
            if seq > replay.last {
                replay.last = seq;
                if let Some(record) = parts.take(seq, m.headers.as_ref(), &m.payload)? {
                    replay.records.push(record);
                }
            }
            if left == 0 {
                break;
            }
        }
        Ok(replay)
    }

    /// The sequence of the last record of `agent`'s journal (0: none).
    pub async fn journal_last(&self, agent: &str) -> Result<Last, ClusterError> {
        let subject = journal_subject(agent);
        retrying(REQUEST_TIMEOUT, || async {
            let stream = self
                .js
                .get_stream(TX_STREAM)
                .await
                .map_err(ClusterError::engine)?;
            match stream.get_last_raw_message_by_subject(&subject).await {
                Ok(m) => {
                    let epoch = m
                        .headers
                        .get(EPOCH)
                        .and_then(|e| e.as_str().parse::<u64>().ok())
                        .ok_or_else(|| {
                            ClusterError::Engine(format!(
                                "journal record {} on {TX_STREAM}: no Lg-Epoch (written by another program?)",
                                m.sequence
                            ))
                        })?;
                    Ok(Last {
                        seq: m.sequence,
                        epoch,
                    })
                }
                Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => {
                    Ok(Last { seq: 0, epoch: 0 })
                }
                Err(e) => Err(ClusterError::engine(e)),
            }
        })
        .await
    }

    fn headers(&self, lease: &Lease, kind: Kind) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(KIND, kind.as_str());
        h.insert(NODE, self.node.as_str());
        h.insert(EPOCH, lease.epoch.to_string().as_str());
        h
    }

    /// Publishes one message on the agent's subject if the subject's last record is `after`.
    async fn journal_publish(
        &self,
        lease: &Lease,
        headers: HeaderMap,
        payload: Bytes,
        after: u64,
    ) -> Result<Result<u64, Refused>, ClusterError> {
        let subject = journal_subject(&lease.agent);
        // One writer (this node under this epoch) after one record is one publish: a retry
        // after a lost answer is stored once. The payload's digest keeps a different record
        // after the same one (a writer that failed and goes on) from passing as the retry.
        let id = format!(
            "j.{}.{}.{}.{after}.{}",
            lease.agent,
            self.node,
            lease.epoch,
            &digest_bytes(&payload)[..16]
        );
        let mut publish = PublishMessage::build()
            .payload(payload)
            .message_id(id)
            .expected_last_subject_sequence(after);
        for (name, values) in headers.iter() {
            for v in values {
                publish = publish.header(name.clone(), v.clone());
            }
        }
        retrying(REQUEST_TIMEOUT, || async {
            let ack = self
                .js
                .send_publish(subject.clone(), publish.clone())
                .await
                .map_err(ClusterError::engine)?
                .await;
            match ack {
                Ok(ack) => Ok(Ok(ack.sequence)),
                Err(e)
                    if e.kind() == PublishErrorKind::WrongLastSequence
                        || wrong_last_sequence(&e) =>
                {
                    Ok(Err(Refused))
                }
                Err(e) => Err(ClusterError::engine(e)),
            }
        })
        .await
    }
}

/// The records of one journal written after a takeover by a newer epoch than their own:
/// commits of a fenced owner, which the engine must never have taken (the checkers' rule).
pub fn fenced(records: &[Record]) -> Vec<&Record> {
    let mut newest = 0;
    let mut out = Vec::new();
    for r in records {
        if r.epoch < newest {
            out.push(r);
        }
        if r.kind == Kind::Takeover {
            newest = newest.max(r.epoch);
        }
    }
    out
}

fn digest_bytes(b: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(b)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Parts of a record being put together while reading.
#[derive(Default)]
struct Parts {
    /// The parts so far of a record split over messages: (parts expected, bytes).
    open: Option<(usize, usize, Vec<u8>)>,
}

impl Parts {
    /// Takes one message; a record once it is whole.
    fn take(
        &mut self,
        seq: u64,
        headers: Option<&HeaderMap>,
        payload: &[u8],
    ) -> Result<Option<Record>, ClusterError> {
        let get = |name: &str| headers.and_then(|h| h.get(name)).map(|v| v.as_str());
        let bad = |what: &str| {
            ClusterError::Engine(format!(
                "journal record {seq} on {TX_STREAM}: {what} (written by another program?)"
            ))
        };
        let kind = match get(KIND) {
            Some("changes") => Kind::Changes,
            Some("takeover") => Kind::Takeover,
            _ => return Err(bad("no known Lg-Kind")),
        };
        let node = get(NODE).ok_or_else(|| bad("no Lg-Node"))?.to_owned();
        let epoch = get(EPOCH)
            .and_then(|e| e.parse::<u64>().ok())
            .ok_or_else(|| bad("no Lg-Epoch"))?;
        let part = get(PART).map(|p| {
            p.split_once('/')
                .and_then(|(i, n)| Some((i.parse::<usize>().ok()?, n.parse::<usize>().ok()?)))
        });
        let changes = match part {
            None => {
                // Parts of an unfinished record followed by another record: that record
                // was refused part-way and never counts.
                self.open = None;
                payload.to_vec()
            }
            Some(None) => return Err(bad("a bad Lg-Part")),
            Some(Some((1, n))) => {
                self.open = Some((n, 1, payload.to_vec()));
                return Ok(None);
            }
            Some(Some((i, n))) => match self.open.take() {
                Some((want, got, mut bytes)) if want == n && got + 1 == i => {
                    bytes.extend_from_slice(payload);
                    if i < n {
                        self.open = Some((n, i, bytes));
                        return Ok(None);
                    }
                    bytes
                }
                _ => return Ok(None),
            },
        };
        Ok(Some(Record {
            seq,
            kind,
            node,
            epoch,
            changes,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(kind: &str, part: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(KIND, kind);
        h.insert(NODE, "h1");
        h.insert(EPOCH, "3");
        if let Some(p) = part {
            h.insert(PART, p);
        }
        h
    }

    /// A read from a point never hands back a record at or before it, even when the client
    /// library starts its consumer again before the first message (the consumer gone, no
    /// responder yet for its first pull: seen under load), which it then does from the
    /// subject's first message instead of the read's point.
    #[tokio::test]
    async fn a_read_restarted_before_its_first_message_still_starts_after_its_point() {
        let dir = tempfile::tempdir().unwrap();
        let nats = crate::local::LocalCluster::start(3, dir.path()).unwrap();
        let settings = crate::Settings {
            nats: nats.urls(),
            node: "h1".into(),
            lease_ttl: std::time::Duration::from_secs(2),
            replicas: 3,
            workspace_max_bytes: 1 << 20,
            auth: Default::default(),
        };
        let e = Engine::connect(&settings, &|_| None).await.unwrap();
        let lease = match e.acquire("main").await.unwrap() {
            crate::Acquired::Held(l) => l,
            other => panic!("{other:?}"),
        };
        let t = e.journal_takeover(&lease).await.unwrap().unwrap();
        let s1 = e.journal_append(&lease, t, b"one").await.unwrap().unwrap();
        let big: Vec<u8> = (0..e.max_payload() * 2).map(|i| i as u8).collect();
        let s2 = e.journal_append(&lease, s1, &big).await.unwrap().unwrap();

        // The consumer is gone before the reader's first pull: the client makes another.
        let consumer = e.journal_consumer("main", s1).await.unwrap();
        let name = consumer.cached_info().name.clone();
        e.js.delete_consumer_from_stream(&name, TX_STREAM)
            .await
            .unwrap();
        let replay = e.journal_replay("main", s1, consumer).await.unwrap();
        let seen: Vec<(u64, usize)> = replay
            .records
            .iter()
            .map(|r| (r.seq, r.changes.len()))
            .collect();
        assert_eq!(seen, [(s2, big.len())], "records after {s1} only");
        assert_eq!(replay.last, s2);
        assert_eq!(replay.records[0].changes, big);
    }

    /// A record is fenced when a takeover of a newer epoch comes before it.
    #[test]
    fn a_record_after_a_newer_takeover_is_fenced() {
        let r = |seq, kind, epoch| Record {
            seq,
            kind,
            node: "h".into(),
            epoch,
            changes: Vec::new(),
        };
        let ok = [
            r(1, Kind::Takeover, 1),
            r(2, Kind::Changes, 1),
            r(3, Kind::Takeover, 4),
            r(4, Kind::Changes, 4),
        ];
        assert!(fenced(&ok).is_empty());
        let bad = [r(1, Kind::Takeover, 4), r(2, Kind::Changes, 1)];
        assert_eq!(fenced(&bad).iter().map(|r| r.seq).collect::<Vec<_>>(), [2]);
    }

    /// A record split in parts counts once whole; parts cut off by another record never do.
    #[test]
    fn parts_make_a_record_only_when_all_are_there_in_a_row() {
        let mut p = Parts::default();
        assert_eq!(
            p.take(1, Some(&headers("changes", Some("1/2"))), b"ab")
                .unwrap(),
            None
        );
        let whole = p
            .take(2, Some(&headers("changes", Some("2/2"))), b"cd")
            .unwrap()
            .unwrap();
        assert_eq!((whole.seq, whole.changes.as_slice()), (2, &b"abcd"[..]));
        assert_eq!(whole.epoch, 3);
        // A refused record's first part, then a takeover, then a stray second part.
        assert!(p
            .take(3, Some(&headers("changes", Some("1/2"))), b"x")
            .unwrap()
            .is_none());
        let t = p.take(4, Some(&headers("takeover", None)), b"").unwrap();
        assert_eq!(t.map(|r| r.kind), Some(Kind::Takeover));
        assert!(p
            .take(5, Some(&headers("changes", Some("2/2"))), b"y")
            .unwrap()
            .is_none());
        assert!(p.take(6, None, b"").is_err());
    }
}
