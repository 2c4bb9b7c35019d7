//! `[[hooks.<event>]]`: plugin hooks for every agent, as written ([`RawHook`]) and checked
//! into `ipc::control::HookSpec`s (the `gateway_*` ones the supervisor runs itself).

use serde::Deserialize;

use super::invalid::Invalid;

/// One `[[hooks.<event>]]` entry.
#[derive(Debug, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawHook {
    /// Program and arguments (no shell).
    pub command: Vec<String>,
    /// Higher runs first (default 0).
    pub priority: Option<i32>,
    pub timeout_seconds: Option<f64>,
}

/// Default hook timeout.
const DEFAULT_HOOK_TIMEOUT_SECONDS: f64 = 10.0;
/// Default timeout of a `gateway_stop` hook: shutdown must not wait long.
const GATEWAY_STOP_HOOK_TIMEOUT_SECONDS: f64 = 5.0;

/// Validates `[[hooks.<event>]]` entries: known events, a program, a sane timeout.
pub(super) fn resolve_hooks(
    raw: &std::collections::BTreeMap<String, Vec<RawHook>>,
) -> Result<Vec<ipc::control::HookSpec>, Invalid> {
    let mut out = Vec::new();
    for (event, entries) in raw {
        let Some(hook_event) = ipc::control::HookEvent::parse(event) else {
            return Err(Invalid::new(
                format!("hooks.{event}"),
                format!(
                    "unknown or unsupported hook event (supported: {})",
                    ipc::control::HookEvent::ALL.map(|e| e.as_str()).join(", ")
                ),
            ));
        };
        for (i, h) in entries.iter().enumerate() {
            let key = format!("hooks.{event}[{i}]");
            let Some(program) = h.command.first().filter(|p| !p.trim().is_empty()) else {
                return Err(Invalid::new(
                    format!("{key}.command"),
                    "needs at least the program to run",
                ));
            };
            crate::confine::check_hook_program(&key, program)?;
            let default = if hook_event == ipc::control::HookEvent::GatewayStop {
                GATEWAY_STOP_HOOK_TIMEOUT_SECONDS
            } else {
                DEFAULT_HOOK_TIMEOUT_SECONDS
            };
            let secs = h.timeout_seconds.unwrap_or(default);
            if !(secs > 0.0 && secs <= 600.0) {
                return Err(Invalid::new(
                    format!("{key}.timeout_seconds"),
                    "must be more than 0 and at most 600",
                ));
            }
            out.push(ipc::control::HookSpec {
                event: hook_event,
                command: h.command.clone(),
                priority: h.priority.unwrap_or(0),
                timeout_ms: (secs * 1000.0) as u64,
            });
        }
    }
    Ok(out)
}
