//! `ipc`: every message that crosses a loopgate process boundary, defined once.
//!
//! Layout:
//! - [`version`]: protocol version constants and the negotiation rule.
//! - [`frame`]: length-prefixed framing plus the typed MessagePack codec used between the
//!   supervisor and its workers.
//! - [`control`]: the supervisor <-> worker message tables (`ControlToWorker` /
//!   `WorkerToControl`) and the frozen version handshake (`Hello` / `HelloReply`).
//! - [`gateway`]: OpenClaw Gateway protocol v4 JSON frames spoken to clients (CLI, WebSocket
//!   clients) over the supervisor's listeners.
//! - [`blocks`]: block streaming settings (R-D5).
//! - [`approval`]: exec approval requests and decisions across the control link.
//! - [`diagnostics`]: stuck-session policy, lane reports and recoveries (R-I1..R-I3).
//! - [`disk`]: an agent's disk budget (workspace, transcript store, free-space floor).
//! - [`text`]: what would hide or fake text shown to a person (control, bidi).
//! - [`queue`]: queue modes and the per-run queue policy (R-B3).
//! - [`worker_env`]: the environment a worker is started with and keeps.
//! - [`error`]: typed errors for framing and decoding, and the typed wire error `RpcError`.
//! - [`session_ops`]: session operations over the control link and their typed replies.
//! - [`tools`]: the one table of built-in tools (name, schema, policy class, verbose label).
//! - [`thinking`]: thinking, reasoning and verbose levels as the wire and the worker read them.
//! - [`footer`]: what a reply carries after its text (the usage footer, the trace level) and
//!   the human formats of token counts and dollars.
//! - [`metrics`]: a worker's cumulative counts for `/metrics`.
//!
//! This crate holds no business logic: no I/O beyond the codec, no policy.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![forbid(unsafe_code)]

pub mod approval;
pub mod blocks;
pub mod calendar;
pub mod control;
pub mod diagnostics;
pub mod disk;
pub mod error;
pub mod footer;
pub mod frame;
pub mod gateway;
pub mod metrics;
pub mod queue;
pub mod session_ops;
pub mod text;
pub mod thinking;
pub mod tools;
pub mod version;
pub mod web;
pub mod worker_env;

pub use error::{Error, ErrorCode, RpcError};
