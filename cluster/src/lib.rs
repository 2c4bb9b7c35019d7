//! Cluster mode: N gateways on N hosts with the guarantees of one, on NATS JetStream.
//!
//! What each guarantee rests on (see `docs/ARCHITECTURE.md`, "Architecture Invariants"):
//! - an accepted run's idempotency key is claimed once cluster-wide, and a run ends exactly
//!   once, first writer wins ([`runs`]: bucket `create`);
//! - one gateway owns an agent at a time, through a lease whose epoch only grows, and a run
//!   is started at most once ([`lease`]);
//! - an agent's database is a cache of its journal, and a write is accepted only if nothing
//!   was written to the journal since the writer's last record: after a takeover, the
//!   previous owner can write nothing ([`journal`]);
//! - an agent's workspace files follow it: snapshotted at the end of each run, restored by
//!   a new owner, the current snapshot named by a head only the latest owner can replace
//!   ([`workspace`], [`archive`]).
//!
//! The rest: [`engine`] (connecting, the buckets and streams it makes), [`settings`]
//! (`[cluster]`), [`names`] (buckets, streams, subjects; client strings only as digests),
//! [`records`] (what the cluster stores, typed), [`dispatch`] (each agent's run queue),
//! [`events`] (run events and requests between gateways), `kv` (reads from the stream
//! leader), `error` (`ClusterError`, retries while a stream elects a leader).
//! [`local`] starts real NATS servers on loopback for tests and demos.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod archive;
pub mod dispatch;
pub mod engine;
mod error;
pub mod events;
pub mod journal;
mod kv;
pub mod lease;
pub mod local;
pub mod names;
pub mod records;
pub mod runs;
pub mod settings;
pub mod workspace;

pub use dispatch::{Delivery, RunQueue};
pub use engine::{ClusterError, Engine};
pub use journal::{Record as JournalRecord, Refused, Replay};
pub use lease::{Acquired, Lease, Start};
pub use records::{OutcomeRecord, RunRecord, StartRecord};
pub use runs::{Accepted, Ended, OutcomeFeed};
pub use settings::{RawSettings, Settings, SettingsError};
pub use workspace::{Claimed as WorkspaceClaimed, Head as WorkspaceHeadAt, Pinned, WorkspaceHead};
