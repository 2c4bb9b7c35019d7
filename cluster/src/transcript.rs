//! The writer fence across hosts (G2, R-C1), checked by the engine: every session has its
//! own subject in the transcript stream, and a publish can name the sequence the subject's
//! last record must have (`Nats-Expected-Last-Subject-Sequence`), or be refused.
//!
//! - A **claim** reads the session's last record, refuses if it was written under a later
//!   placement epoch (a newer owner has been here: this gateway's epoch is stale), and is
//!   published expecting that record to still be last.
//! - Each **commit** expects the claim's (or its previous commit's) record to be last: any
//!   other record in between (a later claim, a fence) makes it fail, so a superseded run can
//!   never commit.
//! - A **fence** is written by the gateway that closes the run of a lost owner, before it
//!   records the run's outcome: the lost owner, if it comes back, can commit nothing more.

use async_nats::jetstream::context::PublishErrorKind;
use async_nats::jetstream::message::PublishMessage;
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use bytes::Bytes;

use crate::engine::{retrying, wrong_last_sequence, ClusterError, Engine, REQUEST_TIMEOUT};
use crate::lease::Lease;
use crate::names::{tx_subject, TX_STREAM};
use crate::records::TxRecord;
use crate::runs::decode;

/// A run's writer claim on a session: where its next commit must follow.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub run_id: String,
    pub session_key: String,
    pub epoch: u64,
    subject: String,
    /// The sequence of this run's last record on the subject.
    seq: u64,
}

/// Why a claim or commit was refused.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// A newer owner wrote to this session: this gateway's epoch is over.
    StaleEpoch { newer: u64 },
    /// Another record came after the claim: the run was superseded or fenced.
    Fenced,
}

/// How many times a claim re-reads the session when another record raced it.
const CLAIM_ATTEMPTS: usize = 8;

impl Engine {
    /// Takes the writer claim on `session_key` of the lease's agent for `run_id`.
    pub async fn claim(
        &self,
        lease: &Lease,
        session_key: &str,
        run_id: &str,
    ) -> Result<Result<Claim, Refused>, ClusterError> {
        let subject = tx_subject(&lease.agent, session_key);
        for _ in 0..CLAIM_ATTEMPTS {
            let last = self.last_record(&subject).await?;
            if let Some((_, rec)) = &last {
                if rec.epoch() > lease.epoch {
                    return Ok(Err(Refused::StaleEpoch { newer: rec.epoch() }));
                }
            }
            let record = TxRecord::Claim {
                run_id: run_id.to_owned(),
                session_key: session_key.to_owned(),
                node: self.node.clone(),
                epoch: lease.epoch,
            };
            let after = last.as_ref().map_or(0, |(seq, _)| *seq);
            match self.publish_after(&subject, &record, after).await? {
                Some(seq) => {
                    return Ok(Ok(Claim {
                        run_id: run_id.to_owned(),
                        session_key: session_key.to_owned(),
                        epoch: lease.epoch,
                        subject,
                        seq,
                    }))
                }
                // Another record landed between the read and the claim: read again.
                None => continue,
            }
        }
        Err(ClusterError::Engine(format!(
            "session {session_key:?}: {CLAIM_ATTEMPTS} claims in a row raced another writer"
        )))
    }

    /// Appends `entries` (the run's transcript records, as JSON) under `claim`; refused if
    /// anything was written to the session since the claim's last record.
    pub async fn commit(
        &self,
        claim: &mut Claim,
        entries: serde_json::Value,
    ) -> Result<Result<(), Refused>, ClusterError> {
        let record = TxRecord::Commit {
            run_id: claim.run_id.clone(),
            session_key: claim.session_key.clone(),
            epoch: claim.epoch,
            entries,
        };
        match self
            .publish_after(&claim.subject, &record, claim.seq)
            .await?
        {
            Some(seq) => {
                claim.seq = seq;
                Ok(Ok(()))
            }
            None => Ok(Err(Refused::Fenced)),
        }
    }

    /// Voids any claim on `session_key` (the run `run_id` of a lost owner is being closed
    /// by this gateway, which owns the agent now under `lease`).
    pub async fn fence(
        &self,
        lease: &Lease,
        session_key: &str,
        run_id: &str,
        reason: &str,
    ) -> Result<(), ClusterError> {
        let record = TxRecord::Fence {
            run_id: run_id.to_owned(),
            session_key: session_key.to_owned(),
            node: self.node.clone(),
            epoch: lease.epoch,
            reason: reason.to_owned(),
        };
        let payload = Bytes::from(serde_json::to_vec(&record).map_err(ClusterError::engine)?);
        let subject = tx_subject(&lease.agent, session_key);
        let id = format!("fence.{}.{}", crate::names::digest(run_id), lease.epoch);
        self.publish_once(&subject, payload, &id).await
    }

    /// The records of one session of `agent`, oldest first (the checker's and a rebuilding
    /// owner's read).
    pub async fn session_log(
        &self,
        agent: &str,
        session_key: &str,
    ) -> Result<Vec<(u64, TxRecord)>, ClusterError> {
        use futures_util::StreamExt;
        let subject = tx_subject(agent, session_key);
        let stream = self
            .js
            .get_stream(TX_STREAM)
            .await
            .map_err(ClusterError::engine)?;
        let consumer = stream
            .create_consumer(async_nats::jetstream::consumer::pull::OrderedConfig {
                filter_subject: subject.clone(),
                ..Default::default()
            })
            .await
            .map_err(ClusterError::engine)?;
        let pending = consumer.cached_info().num_pending;
        let mut out = Vec::new();
        if pending == 0 {
            return Ok(out);
        }
        let mut messages = consumer.messages().await.map_err(ClusterError::engine)?;
        while let Some(m) = messages.next().await {
            let m = m.map_err(ClusterError::engine)?;
            let info = m.info().map_err(ClusterError::engine)?;
            let (seq, left) = (info.stream_sequence, info.pending);
            out.push((seq, decode(&subject, &m.payload)?));
            if left == 0 {
                break;
            }
        }
        Ok(out)
    }

    async fn last_record(&self, subject: &str) -> Result<Option<(u64, TxRecord)>, ClusterError> {
        retrying(REQUEST_TIMEOUT, || self.read_last(subject)).await
    }

    async fn read_last(&self, subject: &str) -> Result<Option<(u64, TxRecord)>, ClusterError> {
        let stream = self
            .js
            .get_stream(TX_STREAM)
            .await
            .map_err(ClusterError::engine)?;
        match stream.get_last_raw_message_by_subject(subject).await {
            Ok(m) => Ok(Some((m.sequence, decode(subject, &m.payload)?))),
            Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
            Err(e) => Err(ClusterError::engine(e)),
        }
    }

    /// Publishes `record` on `subject` if the subject's last record is `after` (0: none):
    /// the new record's sequence, or `None` when another record is last.
    async fn publish_after(
        &self,
        subject: &str,
        record: &TxRecord,
        after: u64,
    ) -> Result<Option<u64>, ClusterError> {
        let payload = serde_json::to_vec(record).map_err(ClusterError::engine)?;
        // The same record after the same one is the same publish: a retry after a lost
        // answer is stored once.
        let id = format!(
            "{}.{subject}.{after}",
            crate::names::digest(record.run_id())
        );
        let publish = PublishMessage::build()
            .payload(Bytes::from(payload))
            .message_id(id)
            .expected_last_subject_sequence(after);
        retrying(REQUEST_TIMEOUT, || async {
            let ack = self
                .js
                .send_publish(subject.to_owned(), publish.clone())
                .await
                .map_err(ClusterError::engine)?
                .await;
            match ack {
                Ok(ack) => Ok(Some(ack.sequence)),
                Err(e)
                    if e.kind() == PublishErrorKind::WrongLastSequence
                        || wrong_last_sequence(&e) =>
                {
                    Ok(None)
                }
                Err(e) => Err(ClusterError::engine(e)),
            }
        })
        .await
    }
}
