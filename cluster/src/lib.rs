//! Cluster mode: N gateways on N hosts with the guarantees of one, on NATS JetStream.
//!
//! What each guarantee rests on (see `docs/ARCHITECTURE.md`, "Cluster mode"):
//! - an accepted run's idempotency key is claimed once cluster-wide, and a run ends exactly
//!   once, first writer wins ([`runs`]: bucket `create`);
//! - one gateway owns an agent at a time, through a lease whose epoch only grows, and a run
//!   is started at most once ([`lease`]);
//! - a transcript commit is accepted only if nothing was written to its session since its
//!   run's claim, checked by the engine ([`transcript`]).
//!
//! [`local`] starts real NATS servers on loopback for tests and demos.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]

pub mod dispatch;
pub mod engine;
pub mod events;
mod kv;
pub mod lease;
pub mod local;
pub mod names;
pub mod records;
pub mod runs;
pub mod settings;
pub mod transcript;

pub use dispatch::{Delivery, RunQueue};
pub use engine::{ClusterError, Engine};
pub use lease::{Acquired, Lease, Start};
pub use records::{OutcomeRecord, RunRecord, StartRecord, TxRecord};
pub use runs::{Accepted, Ended, OutcomeFeed};
pub use settings::{RawSettings, Settings};
pub use transcript::{Claim, Refused};
