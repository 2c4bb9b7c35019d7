//! loopgate supervisor: `loopgate serve` and the `loopgate` CLI. Every module, by concern
//! (`docs/ARCHITECTURE.md` is the map):
//!
//! - Process: [`serve`] (the phases of `loopgate serve`), [`lock`] (the state-dir lock),
//!   [`paths`] (its layout), [`ownership`] (the start's ownership checks), [`secrets`] (the
//!   gateway token file), [`systemd`] (sd_notify), [`sys`] (the only `unsafe`),
//!   [`sys_info`] (RSS from `/proc`), [`log_ring`] (recent log lines for `logs.tail`).
//! - Config: [`config`] (raw and validated, one file per section), [`config_check`]
//!   (`loopgate config check`), [`config_diff`] (what a reload changes), [`config_edit`]
//!   (`config.patch` / `config.apply` / `config.set` on the TOML text), [`config_schema`] (`config.schema`,
//!   generated from the config's types), `config_lines`
//!   (where a key is), [`confine`] (what keeps model-writable places away from what runs).
//! - Clients: [`listen_unix`], [`listen_ws`] (transports), [`door`] (limits before
//!   authentication), [`handshake`] (`connect`), [`auth`] (tokens, devices, scopes),
//!   [`device_conns`] (live device connections), [`connection`] (a connection's loop, its
//!   outbound queue and parse budgets), [`rpc`] (the methods), [`catalog`] (answers about
//!   models and config), [`usage`] (`usage.cost` / `sessions.usage` from the rollups,
//!   with [`calendar`]), [`workspace_files`] and [`agent_templates`] (an agent's bootstrap
//!   files), [`control_ui`] (serving an installed Control UI),
//!   [`gateway`] (the state requests share, as parts: [`presence`],
//!   [`session_settings`], ...).
//! - Runs: [`control`] (the control actor: runs, waiters, the worker set), [`worker_link`]
//!   (a worker's process and link), [`link_order`] (a session's runs never overlap on the
//!   wire), [`events`] and [`run_log`] (the event hub and its replay buffer), [`projection`]
//!   and [`outcome`] (what clients are told of runs), [`live_text`] (the pace of live text), [`run_end`] (what a run's end is
//!   decided from: what clients saw, an end the gateway decides), [`gatewaydb`] (the gateway database),
//!   [`gateway_hooks`] (`gateway_start` / `gateway_stop`), [`metrics`] (`/metrics`).
//! - Cluster mode: [`backend`] (the seam the requests see), [`clustered`] (the rest).
//! - The CLI: [`client`] (a Gateway protocol client over the unix socket; `ipc` only).
//!
//! Architecture Invariant: the supervisor never runs model or tool code; nothing here links
//! the `worker` crate. The only commands it starts besides workers are the operator's
//! `gateway_start` / `gateway_stop` hooks: out of process, time-bounded, results ignored.
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![deny(unsafe_code)]

pub mod agent_templates;
pub mod auth;
pub mod backend;
pub use ipc::calendar;
pub mod catalog;
pub mod client;
pub mod clustered;
pub mod config;
pub mod config_check;
pub mod config_diff;
pub mod config_edit;
mod config_lines;
pub mod config_schema;
pub mod confine;
pub mod connection;
pub mod control;
pub mod control_ui;
pub mod cron;
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
pub mod live_text;
pub mod lock;
pub mod log_ring;
pub mod metrics;
pub mod outcome;
pub mod ownership;
pub mod paths;
pub mod presence;
pub mod projection;
pub mod rpc;
pub mod run_end;
pub mod run_log;
pub mod secrets;
pub mod serve;
pub mod session_settings;
mod sys;
pub mod sys_info;
pub mod systemd;
pub mod usage;
pub mod worker_link;
pub mod workspace_files;
