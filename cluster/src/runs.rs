//! Runs across gateways: an idempotency key is claimed once cluster-wide (G3), and a run
//! ends exactly once, first writer wins (G1). Both are a bucket `create`: the engine stores
//! a key only if it is absent, so two gateways racing get one winner and the loser reads it.

use async_nats::jetstream::kv::{self, Operation};
use async_nats::jetstream::object_store;
use bytes::Bytes;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::value::RawValue;

use crate::engine::{ClusterError, Engine};
use crate::kv::{current, Created};
use crate::names::digest;
use crate::records::{OutcomeRecord, RunRecord};

/// How accepting a run went.
#[derive(Debug, PartialEq)]
pub enum Accepted {
    /// This gateway's record now holds the key.
    New,
    /// The key was taken by an earlier request that asked the same.
    Existing(RunRecord),
    /// The key was taken by a different request (what differs).
    Conflict(String),
}

/// How ending a run went.
#[derive(Debug)]
pub enum Ended {
    /// This terminal is the run's.
    First,
    /// Another terminal was first; it is the run's (this one is dropped).
    Already(OutcomeRecord),
}

impl Engine {
    /// Claims `rec.run_id` (the idempotency key) for `rec`, durably, before the run is
    /// acknowledged. A retry that finds its own record (its first attempt was stored but the
    /// answer lost) is `New` again.
    pub async fn accept(&self, rec: &RunRecord) -> Result<Accepted, ClusterError> {
        let key = digest(&rec.run_id);
        match create(&self.runs, &key, rec).await? {
            Created::New(_) => Ok(Accepted::New),
            Created::Taken(c) => {
                let existing: RunRecord = decode(&key, &c.value)?;
                Ok(if existing.same_request(rec) {
                    Accepted::New
                } else if existing.request_hash != rec.request_hash {
                    Accepted::Conflict("the message or its extra system prompt differs".into())
                } else if existing.agent_id != rec.agent_id
                    || existing.session_key != rec.session_key
                {
                    Accepted::Conflict(format!(
                        "it was for session {:?} of agent {:?}",
                        existing.session_key, existing.agent_id
                    ))
                } else {
                    Accepted::Existing(existing)
                })
            }
        }
    }

    /// The record `run_id` is bound to, if any gateway accepted it.
    pub async fn run(&self, run_id: &str) -> Result<Option<RunRecord>, ClusterError> {
        read(&self.runs, &digest(run_id)).await
    }

    /// Ends `run_id` with `terminal` unless it already ended; the run's terminal either way.
    pub async fn end(&self, run_id: &str, terminal: Box<RawValue>) -> Result<Ended, ClusterError> {
        let key = digest(run_id);
        let mut rec = OutcomeRecord {
            run_id: run_id.to_owned(),
            node: self.node.clone(),
            terminal,
            body: None,
        };
        // Too large for one message: the terminal goes to the object store first, under a
        // name of its own content and writer (a racing writer's body never replaces it), and
        // the record names it.
        let mut bytes = serde_json::to_vec(&rec).map_err(ClusterError::engine)?;
        if bytes.len() > self.max_payload().saturating_sub(BODY_ROOM) {
            let name = format!("{key}-{}-{}", self.node, digest(rec.terminal.get()));
            let text = rec.terminal.get();
            crate::engine::retrying(crate::engine::REQUEST_TIMEOUT, || async {
                let mut bytes = text.as_bytes();
                self.bodies
                    .put(name.as_str(), &mut bytes)
                    .await
                    .map(|_| ())
                    .map_err(ClusterError::engine)
            })
            .await?;
            rec.body = Some(name);
            rec.terminal = RawValue::NULL.to_owned();
            bytes = serde_json::to_vec(&rec).map_err(ClusterError::engine)?;
        }
        // The bytes measured are the bytes stored (one serialization per outcome).
        match crate::kv::create(&self.outcomes, &key, Bytes::from(bytes)).await? {
            Created::New(_) => Ok(Ended::First),
            Created::Taken(c) => {
                let first: OutcomeRecord = decode(&key, &c.value)?;
                // Our own write, stored before an answer that was lost.
                if first.node == rec.node
                    && first.terminal.get() == rec.terminal.get()
                    && first.body == rec.body
                {
                    Ok(Ended::First)
                } else {
                    Ok(Ended::Already(self.resolved(first).await?))
                }
            }
        }
    }

    /// The run's terminal, if it ended.
    pub async fn outcome(&self, run_id: &str) -> Result<Option<OutcomeRecord>, ClusterError> {
        match read(&self.outcomes, &digest(run_id)).await? {
            Some(rec) => self.resolved(rec).await.map(Some),
            None => Ok(None),
        }
    }

    /// `rec` with its terminal, read from its body when it has one.
    async fn resolved(&self, rec: OutcomeRecord) -> Result<OutcomeRecord, ClusterError> {
        resolve(&self.bodies, rec).await
    }

    /// Waits until the run ends (on any gateway) and returns its terminal.
    pub async fn wait_outcome(&self, run_id: &str) -> Result<OutcomeRecord, ClusterError> {
        let key = digest(run_id);
        // The watch delivers the current value first, so an outcome written before it
        // started is not missed.
        let mut watch = self
            .outcomes
            .watch_with_history(&key)
            .await
            .map_err(ClusterError::engine)?;
        while let Some(entry) = watch.next().await {
            let entry = entry.map_err(ClusterError::engine)?;
            if entry.operation == Operation::Put {
                return self.resolved(decode(&key, &entry.value)?).await;
            }
        }
        Err(ClusterError::Engine(format!(
            "the watch on the outcome of {run_id} ended"
        )))
    }
}

/// Every outcome recorded from now on, whichever run it ends (one watch per gateway,
/// instead of one per waiting run).
pub struct OutcomeFeed {
    watch: kv::Watch,
    bodies: object_store::ObjectStore,
}

impl OutcomeFeed {
    /// The next outcome recorded; `None` when the watch ended (the connection was lost).
    pub async fn next(&mut self) -> Option<Result<OutcomeRecord, ClusterError>> {
        loop {
            let entry = match self.watch.next().await? {
                Ok(e) => e,
                Err(e) => return Some(Err(ClusterError::engine(e))),
            };
            if entry.operation == Operation::Put {
                return Some(match decode(&entry.key, &entry.value) {
                    Ok(rec) => resolve(&self.bodies, rec).await,
                    Err(e) => Err(e),
                });
            }
        }
    }
}

impl Engine {
    /// Follows the outcomes recorded from now on.
    pub async fn outcome_feed(&self) -> Result<OutcomeFeed, ClusterError> {
        let watch = self
            .outcomes
            .watch_all()
            .await
            .map_err(ClusterError::engine)?;
        Ok(OutcomeFeed {
            watch,
            bodies: self.bodies.clone(),
        })
    }
}

/// What a message keeps for an outcome record besides its terminal (the record's other
/// fields, the subject, headers): past this the terminal goes as a body.
const BODY_ROOM: usize = 4096;

/// `rec` with its terminal read back from the object store when it names a body.
async fn resolve(
    bodies: &object_store::ObjectStore,
    mut rec: OutcomeRecord,
) -> Result<OutcomeRecord, ClusterError> {
    use tokio::io::AsyncReadExt;
    let Some(name) = rec.body.take() else {
        return Ok(rec);
    };
    let mut obj = crate::engine::retrying(crate::engine::REQUEST_TIMEOUT, || async {
        bodies
            .get(name.as_str())
            .await
            .map_err(ClusterError::engine)
    })
    .await?;
    let mut text = String::new();
    obj.read_to_string(&mut text)
        .await
        .map_err(|e| ClusterError::Engine(format!("reading the outcome body {name}: {e}")))?;
    rec.terminal = RawValue::from_string(text)
        .map_err(|e| ClusterError::Engine(format!("the outcome body {name} is not JSON: {e}")))?;
    Ok(rec)
}

/// Stores `value` (as JSON) at `key` unless a value is there.
async fn create<T: Serialize>(
    store: &kv::Store,
    key: &str,
    value: &T,
) -> Result<Created, ClusterError> {
    let bytes = serde_json::to_vec(value).map_err(ClusterError::engine)?;
    crate::kv::create(store, key, Bytes::from(bytes)).await
}

/// The value at `key`, read from the stream's leader.
pub(crate) async fn read<T: DeserializeOwned>(
    store: &kv::Store,
    key: &str,
) -> Result<Option<T>, ClusterError> {
    match current(store, key).await? {
        Some(c) if c.live => decode(key, &c.value).map(Some),
        _ => Ok(None),
    }
}

pub(crate) fn decode<T: DeserializeOwned>(key: &str, bytes: &[u8]) -> Result<T, ClusterError> {
    serde_json::from_slice(bytes).map_err(|e| ClusterError::Corrupt {
        key: key.to_owned(),
        why: e.to_string(),
    })
}
