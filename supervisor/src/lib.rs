//! loopgate supervisor: `loopgate serve` and the `loopgate` CLI.
//!
//! Layout (see `docs/ARCHITECTURE.md` for the full codemap):
//! - [`serve`]: process entry for `loopgate serve`: lock, config, listeners, signals.
//! - [`config`], [`paths`], [`lock`]: configuration, state-dir layout, the state-dir lock.
//! - [`gateway`], [`listen_unix`], [`listen_ws`], [`auth`], [`rpc`]: Gateway protocol v4
//!   connections (unix socket, WebSocket), authentication and methods.
//! - [`control`]: the control actor (runs, waiters, worker set).
//! - [`worker_link`]: spawning and talking to one `loopgate-worker`.
//! - [`gatewaydb`]: the gateway database (run records for replay), one writer thread.
//! - [`events`], [`outcome`]: the event hub and the wire projections of run outcomes.
//! - [`gateway_hooks`]: the `gateway_start` / `gateway_stop` hook commands.
//! - [`client`]: the CLI, a Gateway protocol client over the unix socket (depends on `ipc`
//!   only).
//!
//! Architecture Invariant: the supervisor never runs model or tool code; nothing here links
//! the `worker` crate. The only commands it starts besides workers are the operator's
//! `gateway_start` / `gateway_stop` hooks: out of process, time-bounded, results ignored.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![deny(unsafe_code)]

pub mod auth;
pub mod catalog;
pub mod client;
pub mod clustered;
pub mod config;
pub mod config_check;
pub mod config_diff;
mod config_lines;
pub mod confine;
pub mod connection;
pub mod control;
pub mod control_ui;
pub mod device_conns;
pub mod door;
pub mod events;
pub mod gateway;
pub mod gateway_hooks;
pub mod gatewaydb;
pub mod handshake;
pub mod link_order;
pub mod listen_unix;
pub mod listen_ws;
pub mod lock;
pub mod log_ring;
pub mod metrics;
pub mod outcome;
pub mod ownership;
pub mod paths;
pub mod projection;
pub mod rpc;
pub mod run_log;
pub mod secrets;
pub mod serve;
mod sys;
pub mod sys_info;
pub mod systemd;
pub mod worker_link;
