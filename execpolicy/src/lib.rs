//! The `exec` tool's policy, shared by the supervisor (config checks, `allow-always`
//! approvals) and the worker (the tool itself): which commands may run and how everything
//! they start is contained.
//!
//! - [`argv`]: allowlists (`tools.exec.security = "allowlist"`): shell-free word splitting,
//!   argv patterns whose words are typed (literal or wildcard) by the operator's quoting.
//! - [`safe`]: the safe list, the only programs `allow-always` is offered for, looked for
//!   through wrappers (`env`, `nice`, `timeout`, ...).
//! - [`reaper`]: the subreaper every `exec` command runs under
//!   (`loopgate-worker --exec-reaper`), so nothing it starts outlives it.
//!
//! Hook commands are not here: they are the operator's own programs (`hookcmd`).
#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used))]
#![deny(unsafe_code)]

pub mod argv;
pub mod reaper;
pub mod safe;
