//! Bucket reads and creates that are never stale. The client's `get` may be answered by a
//! replica that has not caught up (direct get), and its `create` reads that way when the
//! key is taken, so under a race it could report an error, or a key as absent, that the
//! stream's leader knows better. Every decision here reads from the leader.

use async_nats::jetstream::kv::{self, UpdateErrorKind};
use async_nats::jetstream::stream::LastRawMessageErrorKind;
use bytes::Bytes;

use crate::error::{retrying, wrong_last_sequence, ClusterError, REQUEST_TIMEOUT};

/// A key's latest entry, as the stream's leader has it.
pub(crate) struct Current {
    pub value: Bytes,
    pub revision: u64,
    /// A value (not a delete or purge marker).
    pub live: bool,
}

/// How a create went.
pub(crate) enum Created {
    New(u64),
    Taken(Current),
}

/// The latest entry of `key`, read from the leader.
pub(crate) async fn current(store: &kv::Store, key: &str) -> Result<Option<Current>, ClusterError> {
    retrying(REQUEST_TIMEOUT, || read_current(store, key)).await
}

/// A conditional write refused because the key's revision was not the expected one.
pub(crate) fn taken(e: &kv::UpdateError) -> bool {
    e.kind() == UpdateErrorKind::WrongLastRevision || wrong_last_sequence(e)
}

pub(crate) async fn read_current(
    store: &kv::Store,
    key: &str,
) -> Result<Option<Current>, ClusterError> {
    let subject = format!("{}{key}", store.prefix);
    match store.stream.get_last_raw_message_by_subject(&subject).await {
        Ok(m) => {
            let op = m.headers.get("KV-Operation").map(|v| v.as_str().to_owned());
            Ok(Some(Current {
                value: m.payload,
                revision: m.sequence,
                live: !matches!(op.as_deref(), Some("DEL" | "PURGE")),
            }))
        }
        Err(e) if e.kind() == LastRawMessageErrorKind::NoMessageFound => Ok(None),
        Err(e) => Err(ClusterError::engine(e)),
    }
}

/// Stores `value` at `key` unless a live value is there (then that value is returned).
pub(crate) async fn create(
    store: &kv::Store,
    key: &str,
    value: Bytes,
) -> Result<Created, ClusterError> {
    // Expected revision 0: the key has no entry at all.
    let mut after = 0;
    for _ in 0..RACES {
        let written = retrying(REQUEST_TIMEOUT, || async {
            match store.update(key, value.clone(), after).await {
                Ok(rev) => Ok(Some(rev)),
                Err(e) if taken(&e) => Ok(None),
                Err(e) => Err(ClusterError::engine(e)),
            }
        })
        .await?;
        if let Some(rev) = written {
            return Ok(Created::New(rev));
        }
        match current(store, key).await? {
            Some(c) if c.live => return Ok(Created::Taken(c)),
            // A delete or purge marker: create over it.
            Some(c) => after = c.revision,
            // Expired since: from nothing again.
            None => after = 0,
        }
    }
    Err(ClusterError::Engine(format!(
        "{key}: {RACES} creates in a row raced other writers"
    )))
}

/// How many times a create starts again when the key changed under it.
const RACES: usize = 16;
