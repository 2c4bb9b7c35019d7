//! Plugin hooks as external commands (R-H2). A hook gets the event as one JSON object on
//! stdin and may answer one JSON object on stdout (empty stdout: no opinion).
//!
//! Handlers of an event run one at a time, highest `priority` first. Failure policy:
//! - guards fail closed: `before_tool_call` treats a hook that fails, times out or answers
//!   garbage as a block (the tool does not run; the model sees why);
//! - everything else fails open: `after_tool_call`, `agent_end` (observers),
//!   `tool_result_persist` (transform: the result stays as it was) and `before_prompt_build`
//!   (no context added) log the failure and go on.
//!
//! Decision rules: `{"block": true}` is terminal and stops lower-priority handlers;
//! `{"block": false}` is a no-op that never clears an earlier block.

use std::path::PathBuf;

use ipc::control::HookSpec;
use serde_json::{json, Value};

use crate::frontmatter;
use crate::tools::{ToolCall, ToolOutcome};

/// Timeout of an internal (`HOOK.md`) hook.
const INTERNAL_HOOK_TIMEOUT_MS: u64 = 10_000;

/// An internal hook: `<hooks dir>/<name>/HOOK.md` (frontmatter `events`) with an
/// executable `handler` (or `handler.sh`) next to it (R-H1). The hooks dir is the operator's
/// (`<state>/agents/<id>/hooks`), never inside a workspace: nothing the model can write is
/// ever run as a hook.
#[derive(Debug, Clone, PartialEq)]
pub struct InternalHook {
    pub name: String,
    pub events: Vec<String>,
    pub handler: PathBuf,
}

/// The `events:` of a HOOK.md's frontmatter: a flow list (`["a", "b"]`), a block list
/// (`- a`) or one bare value; every `events:` key counts.
fn hook_events(text: &str) -> Vec<String> {
    frontmatter::fields(text)
        .iter()
        .filter(|f| f.key == "events")
        .flat_map(|f| f.list())
        .collect()
}

/// The internal hooks in `dir` that listen for `event`, in name order.
pub fn internal_hooks(dir: Option<&std::path::Path>, event: &str) -> Vec<InternalHook> {
    let Some(Ok(entries)) = dir.map(std::fs::read_dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(text) = std::fs::read_to_string(dir.join("HOOK.md")) else {
            continue;
        };
        let events = hook_events(&text);
        if !events.iter().any(|e| e == event) {
            continue;
        }
        let Some(handler) = ["handler", "handler.sh"]
            .iter()
            .map(|n| dir.join(n))
            .find(|p| p.is_file())
        else {
            tracing::warn!(hook = %dir.display(), "HOOK.md without an executable handler; skipped.");
            continue;
        };
        out.push(InternalHook {
            name: entry.file_name().to_string_lossy().into_owned(),
            events,
            handler,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Runs the internal hooks for `event`; returns their answers (failures are logged and
/// skipped: internal hooks are observers or optional transforms).
pub async fn run_internal(ctx: &HookCtx, event: &str, fields: Value) -> Vec<Value> {
    let dir = ctx.hooks_dir.clone();
    let ev = event.to_owned();
    let hooks = tokio::task::spawn_blocking(move || internal_hooks(dir.as_deref(), &ev))
        .await
        .unwrap_or_default();
    run_discovered(ctx, hooks, event, fields).await
}

/// Like [`run_internal`] for hooks already found with [`internal_hooks`].
pub async fn run_discovered(
    ctx: &HookCtx,
    hooks: Vec<InternalHook>,
    event: &str,
    fields: Value,
) -> Vec<Value> {
    if hooks.is_empty() {
        return Vec::new();
    }
    let input = ctx.event(event, fields);
    let mut answers = Vec::new();
    for h in hooks {
        let command = [h.handler.to_string_lossy().into_owned()];
        match hookcmd::run(&command, INTERNAL_HOOK_TIMEOUT_MS, &ctx.workspace, &input).await {
            Ok(Some(v)) => answers.push(v),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(hook = %h.name, event, error = %e, "Internal hook failed; ignored.")
            }
        }
    }
    answers
}

/// Who a hook event is about.
#[derive(Debug, Clone)]
pub struct HookCtx {
    pub agent_id: String,
    pub session_key: String,
    pub run_id: String,
    pub workspace: PathBuf,
    /// Where the operator's internal hooks live (`AgentSpec::hooks_dir`).
    pub hooks_dir: Option<PathBuf>,
}

impl HookCtx {
    fn event(&self, name: &str, fields: Value) -> Value {
        let mut v = json!({
            "event": name,
            "agentId": self.agent_id,
            "sessionKey": self.session_key,
            "runId": self.run_id,
        });
        if let (Some(obj), Value::Object(extra)) = (v.as_object_mut(), fields) {
            obj.extend(extra);
        }
        v
    }
}

/// The configured hooks, ready to run.
#[derive(Debug, Default)]
pub struct Hooks {
    /// Sorted by priority, highest first (stable for equal priorities).
    list: Vec<HookSpec>,
}

/// A provider and/or model picked by `before_model_resolve` hooks.
#[derive(Debug, Default, PartialEq)]
pub struct ModelOverride {
    pub provider: Option<String>,
    pub model: Option<String>,
}

/// Extra system prompt text from `before_prompt_build`.
#[derive(Debug, Default, PartialEq)]
pub struct PromptContext {
    pub prepend: Vec<String>,
    pub append: Vec<String>,
}

impl Hooks {
    pub fn new(mut list: Vec<HookSpec>) -> Self {
        list.sort_by_key(|h| std::cmp::Reverse(h.priority));
        Self { list }
    }

    fn for_event<'a>(&'a self, event: &'a str) -> impl Iterator<Item = &'a HookSpec> + 'a {
        self.list.iter().filter(move |h| h.event.as_str() == event)
    }

    pub fn has(&self, event: &str) -> bool {
        self.for_event(event).next().is_some()
    }

    /// `Ok(call)` (possibly with arguments rewritten by `{"params": {...}}`) or `Err(reason)`
    /// when a hook blocked it or a guard failed.
    pub async fn before_tool_call(
        &self,
        ctx: &HookCtx,
        call: &ToolCall,
    ) -> Result<ToolCall, String> {
        let mut call = call.clone();
        for h in self.for_event("before_tool_call") {
            let input = ctx.event(
                "before_tool_call",
                json!({"toolName": call.name, "toolCallId": call.id, "params": args_value(&call.arguments)}),
            );
            match run(h, &ctx.workspace, &input).await {
                Ok(Some(answer)) => {
                    if answer.get("block") == Some(&Value::Bool(true)) {
                        let reason = answer
                            .get("blockReason")
                            .and_then(Value::as_str)
                            .unwrap_or("no reason given");
                        return Err(format!("blocked by a before_tool_call hook: {reason}"));
                    }
                    if let Some(params) = answer.get("params").filter(|p| p.is_object()) {
                        call.arguments = params.to_string();
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(hook = %h.command[0], error = %e, "before_tool_call hook failed; blocking the tool call (guards fail closed).");
                    return Err(format!(
                        "blocked: the before_tool_call hook {} failed ({e})",
                        h.command[0]
                    ));
                }
            }
        }
        Ok(call)
    }

    /// Runs `message_sending` guards over an outgoing reply: `None` when a hook cancelled it
    /// (`{"cancel": true}`, terminal) or a guard failed (fail closed); otherwise the text,
    /// possibly rewritten by `{"content": "..."}`. `{"cancel": false}` changes nothing.
    pub async fn message_sending(&self, ctx: &HookCtx, text: &str) -> Option<String> {
        let mut content = text.to_owned();
        for h in self.for_event("message_sending") {
            let input = ctx.event("message_sending", json!({"content": content}));
            match run(h, &ctx.workspace, &input).await {
                Ok(Some(answer)) => {
                    if answer.get("cancel") == Some(&Value::Bool(true)) {
                        tracing::info!(hook = %h.command[0], "message_sending hook cancelled the reply.");
                        return None;
                    }
                    if let Some(c) = answer.get("content").and_then(Value::as_str) {
                        content = c.to_owned();
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(hook = %h.command[0], error = %e, "message_sending hook failed; the reply is not sent (guards fail closed).");
                    return None;
                }
            }
        }
        Some(content)
    }

    /// Lets `tool_result_persist` hooks rewrite the result (`{"result": "text"}`) before it
    /// is recorded and sent back to the model.
    pub async fn tool_result_persist(
        &self,
        ctx: &HookCtx,
        call: &ToolCall,
        mut outcome: ToolOutcome,
    ) -> ToolOutcome {
        for h in self.for_event("tool_result_persist") {
            let input = ctx.event(
                "tool_result_persist",
                json!({"toolName": call.name, "toolCallId": call.id,
                       "result": outcome.content, "isError": outcome.is_error}),
            );
            match run(h, &ctx.workspace, &input).await {
                Ok(Some(answer)) => {
                    if let Some(text) = answer.get("result").and_then(Value::as_str) {
                        outcome.content = crate::tools::cap(text.to_owned());
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(hook = %h.command[0], error = %e, "tool_result_persist hook failed; keeping the result as it was.");
                }
            }
        }
        outcome
    }

    /// Observers: run in order, failures logged.
    pub async fn observe(&self, ctx: &HookCtx, event: &str, fields: Value) {
        let input = ctx.event(event, fields);
        for h in self.for_event(event) {
            if let Err(e) = run(h, &ctx.workspace, &input).await {
                tracing::warn!(hook = %h.command[0], event, error = %e, "Hook failed; ignored (observer).");
            }
        }
    }

    /// Context to add to the system prompt (`prependSystemContext` / `appendSystemContext`)
    /// from `before_agent_start` (OpenClaw's older hook for the same purpose) and then
    /// `before_prompt_build` hooks.
    pub async fn before_prompt_build(&self, ctx: &HookCtx, prompt: &str) -> PromptContext {
        let mut out = PromptContext::default();
        for event in ["before_agent_start", "before_prompt_build"] {
            if !self.has(event) {
                continue;
            }
            self.prompt_context(ctx, event, prompt, &mut out).await;
        }
        out
    }

    /// `before_model_resolve` (modify): `{"providerOverride"?, "modelOverride"?}`. Higher
    /// priority wins: a value set by an earlier hook is kept. Fails open (a failing hook
    /// changes nothing).
    pub async fn before_model_resolve(&self, ctx: &HookCtx, prompt: &str) -> ModelOverride {
        let mut out = ModelOverride::default();
        let input = ctx.event("before_model_resolve", json!({"prompt": prompt}));
        for h in self.for_event("before_model_resolve") {
            match run(h, &ctx.workspace, &input).await {
                Ok(Some(answer)) => {
                    let text = |k: &str| answer_text(&answer, k);
                    if out.provider.is_none() {
                        out.provider = text("providerOverride");
                    }
                    if out.model.is_none() {
                        out.model = text("modelOverride");
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(hook = %h.command[0], error = %e, "before_model_resolve hook failed; model unchanged.");
                }
            }
        }
        out
    }

    /// `before_agent_reply` (claim): the first hook answering `{"handled": true}` answers
    /// for the model with `reply` (no `reply`: the run stays silent); later hooks do not
    /// run. `None`: nobody claimed the turn. Fails open (a failing hook claims nothing).
    pub async fn before_agent_reply(&self, ctx: &HookCtx, prompt: &str) -> Option<Option<String>> {
        let input = ctx.event("before_agent_reply", json!({"prompt": prompt}));
        for h in self.for_event("before_agent_reply") {
            match run(h, &ctx.workspace, &input).await {
                Ok(Some(answer)) if answer.get("handled") == Some(&Value::Bool(true)) => {
                    let reply = answer
                        .get("reply")
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    return Some(reply);
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(hook = %h.command[0], error = %e, "before_agent_reply hook failed; skipped.");
                }
            }
        }
        None
    }

    async fn prompt_context(
        &self,
        ctx: &HookCtx,
        event: &str,
        prompt: &str,
        out: &mut PromptContext,
    ) {
        let input = ctx.event(event, json!({"prompt": prompt}));
        for h in self.for_event(event) {
            match run(h, &ctx.workspace, &input).await {
                Ok(Some(answer)) => {
                    let text = |k: &str| answer_text(&answer, k);
                    out.prepend.extend(text("prependSystemContext"));
                    out.append.extend(text("appendSystemContext"));
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(hook = %h.command[0], event, error = %e, "Prompt hook failed; no context added.");
                }
            }
        }
    }
}

/// A non-blank string field of a hook's answer, trimmed.
fn answer_text(answer: &Value, key: &str) -> Option<String> {
    answer
        .get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

fn args_value(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

/// Runs one hook (see [`hookcmd::run`]).
async fn run(h: &HookSpec, cwd: &std::path::Path, input: &Value) -> Result<Option<Value>, String> {
    hookcmd::run(&h.command, h.timeout_ms, cwd, input).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(priority: i32, script: &str) -> HookSpec {
        HookSpec {
            event: ipc::control::HookEvent::BeforeToolCall,
            command: vec!["sh".into(), "-c".into(), script.into()],
            priority,
            timeout_ms: 5_000,
        }
    }

    fn ctx() -> HookCtx {
        HookCtx {
            agent_id: "main".into(),
            session_key: "agent:main:main".into(),
            run_id: "r".into(),
            workspace: std::env::temp_dir(),
            hooks_dir: None,
        }
    }

    fn call() -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: "exec".into(),
            arguments: r#"{"command":"ls"}"#.into(),
        }
    }

    /// R-H2: a block is terminal (lower-priority hooks do not run) and `{block:false}` never
    /// clears it; a failing guard blocks.
    #[tokio::test]
    async fn block_rules_r_h2() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let hooks = Hooks::new(vec![
            hook(0, &format!("touch {}", marker.display())),
            hook(
                5,
                r#"echo '{"block": true, "blockReason": "no shell today"}'"#,
            ),
            hook(9, r#"echo '{"block": false}'"#),
        ]);
        let err = hooks.before_tool_call(&ctx(), &call()).await.unwrap_err();
        assert!(err.contains("no shell today"), "{err}");
        assert!(!marker.exists(), "a lower-priority hook ran after a block");

        let hooks = Hooks::new(vec![
            hook(0, r#"echo '{"block": false}'"#),
            hook(1, "exit 3"),
        ]);
        let err = hooks.before_tool_call(&ctx(), &call()).await.unwrap_err();
        assert!(err.contains("failed"), "{err}");

        let hooks = Hooks::new(vec![HookSpec {
            timeout_ms: 100,
            ..hook(0, "sleep 5")
        }]);
        let err = hooks.before_tool_call(&ctx(), &call()).await.unwrap_err();
        assert!(err.contains("timed out"), "{err}");

        let hooks = Hooks::new(vec![hook(
            0,
            r#"cat >/dev/null; echo '{"params": {"command": "pwd"}}'"#,
        )]);
        let c = hooks.before_tool_call(&ctx(), &call()).await.unwrap();
        assert_eq!(c.arguments, r#"{"command":"pwd"}"#);
    }

    /// R-H2: `{cancel:true}` is terminal; `{cancel:false}` never clears it; content rewrites
    /// chain; a failing guard cancels.
    #[tokio::test]
    async fn message_sending_cancel_rules_r_h2() {
        let sending = |priority: i32, script: &str| HookSpec {
            event: ipc::control::HookEvent::MessageSending,
            ..hook(priority, script)
        };
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let hooks = Hooks::new(vec![
            sending(0, &format!("touch {}", marker.display())),
            sending(5, r#"echo '{"cancel": true}'"#),
            sending(9, r#"echo '{"cancel": false}'"#),
        ]);
        assert_eq!(hooks.message_sending(&ctx(), "hi").await, None);
        assert!(!marker.exists());
        let hooks = Hooks::new(vec![
            sending(1, "sed 's/hi/hello/'"),
            sending(0, "sed 's/hello/hello there/'"),
        ]);
        assert_eq!(
            hooks.message_sending(&ctx(), "hi").await.as_deref(),
            Some("hello there")
        );
        let hooks = Hooks::new(vec![sending(0, "exit 1")]);
        assert_eq!(hooks.message_sending(&ctx(), "hi").await, None);
    }

    #[test]
    fn hook_md_events() {
        assert_eq!(
            hook_events("---\nname: x\nevents: [\"command:new\", 'agent:bootstrap']\n---\n"),
            ["command:new", "agent:bootstrap"]
        );
        assert_eq!(
            hook_events("---\nevents:\n  - command:reset\n  - command:stop\nname: y\n---\n"),
            ["command:reset", "command:stop"]
        );
        assert!(hook_events("no frontmatter").is_empty());
        // Keys are read as in SKILL.md (the one frontmatter reader): space before the colon.
        assert_eq!(hook_events("---\nevents : a\n---\n"), ["a"]);
    }

    #[tokio::test]
    async fn hooks_get_the_event_on_stdin_and_transforms_fail_open() {
        let persist = |script: &str| HookSpec {
            event: ipc::control::HookEvent::ToolResultPersist,
            ..hook(0, script)
        };
        let hooks = Hooks::new(vec![persist(
            // Echoes the event back with the result edited: an object with `result`.
            "sed 's/secret/[redacted]/'",
        )]);
        let out = hooks
            .tool_result_persist(
                &ctx(),
                &call(),
                ToolOutcome {
                    delivered: None,
                    content: "the secret".into(),
                    is_error: false,
                },
            )
            .await;
        assert_eq!(out.content, "the [redacted]");
        let hooks = Hooks::new(vec![persist("echo not-json")]);
        let out = hooks
            .tool_result_persist(
                &ctx(),
                &call(),
                ToolOutcome {
                    delivered: None,
                    content: "kept".into(),
                    is_error: false,
                },
            )
            .await;
        assert_eq!(out.content, "kept");
    }
}
