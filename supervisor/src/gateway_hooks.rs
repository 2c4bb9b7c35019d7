//! `gateway_start` / `gateway_stop` plugin hooks (R-H2). They are about the gateway, not an
//! agent, so the supervisor runs them itself, in the state directory, with the same command
//! protocol as the workers' hooks ([`hookcmd::run`]). Both are observers: answers are
//! ignored, failures are logged and skipped. `gateway_start` runs in the background once the
//! gateway is ready; `gateway_stop` runs when stopping begins (alongside the drain) and the
//! gateway waits for it (each hook is bounded by its timeout, 5 s by default) before exiting.

use std::path::Path;

use ipc::control::{HookEvent, HookSpec};
use serde_json::{json, Value};

/// Runs the `event` hooks of `hooks`, highest priority first, one at a time.
pub async fn observe(hooks: &[HookSpec], event: HookEvent, state_dir: &Path, fields: Value) {
    let mut list: Vec<&HookSpec> = hooks.iter().filter(|h| h.event == event).collect();
    let event = event.as_str();
    if list.is_empty() {
        return;
    }
    list.sort_by_key(|h| std::cmp::Reverse(h.priority));
    let mut input = json!({"event": event});
    if let (Some(obj), Value::Object(extra)) = (input.as_object_mut(), fields) {
        obj.extend(extra);
    }
    for h in list {
        if let Err(e) = hookcmd::run(&h.command, h.timeout_ms, state_dir, &input).await {
            tracing::warn!(hook = %h.command[0], event, error = %e, "Gateway hook failed; ignored (observer).");
        }
    }
}
