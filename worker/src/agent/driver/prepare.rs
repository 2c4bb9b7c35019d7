//! The run's model request, built before its first call: the model (the request's, or a
//! hook's pick), the workspace's bootstrap files and skills (which `agent:bootstrap` hooks
//! may edit), the history and the hooks' additions to the system prompt; or the reply a
//! `before_agent_reply` hook claims the turn with.

use std::sync::Arc;

use ipc::control::SubmitRun;
use serde_json::json;

use crate::agent::core::Prepared;
use crate::agent::prompt;
use crate::hooks::{self, HookCtx};
use crate::llm::ModelChoice;
use crate::Ctx;

/// The provider and model of this run when they are not the agent's: the ones the request
/// asked for (checked by the supervisor), then whatever a `before_model_resolve` hook picks.
async fn resolve_model(
    ctx: &Arc<Ctx>,
    run: &SubmitRun,
    hook_ctx: &HookCtx,
) -> Result<Option<ModelChoice>, String> {
    let own = &ctx.spec.model;
    let (mut provider, mut model) = match &run.model {
        Some(m) => (m.provider.clone(), m.model.clone()),
        None => (own.provider.clone(), own.model.clone()),
    };
    if ctx.hooks.has("before_model_resolve") {
        let picked = ctx.hooks.before_model_resolve(hook_ctx, &run.message).await;
        match (picked.provider, picked.model) {
            (Some(p), Some(m)) => (provider, model) = (p, m),
            (None, Some(m)) => model = m,
            (Some(p), None) if p == provider => {}
            (Some(p), None) => {
                return Err(format!(
                    "a before_model_resolve hook picked provider {p:?} without a model (answer modelOverride too)"
                ))
            }
            (None, None) => {}
        }
    }
    if provider == own.provider && model == own.model {
        return Ok(None);
    }
    let context_window = if provider == own.provider {
        own.context_window
    } else {
        match ctx.spec.providers.iter().find(|p| p.provider == provider) {
            Some(p) => p.context_window,
            None => {
                return Err(format!(
                    "provider {provider:?} (picked by a before_model_resolve hook) is not configured under [models.providers]"
                ))
            }
        }
    };
    Ok(Some(ModelChoice {
        provider,
        model,
        context_window,
    }))
}

/// Builds the model request: workspace (created on first use), bootstrap files, history;
/// or the reply a `before_agent_reply` hook claimed the turn with. With it, the variables
/// the offered skills' settings give the turn's commands (R-B6).
pub(super) async fn prepare(
    ctx: &Arc<Ctx>,
    run: &SubmitRun,
    hook_ctx: &HookCtx,
) -> Result<(Prepared, Vec<(String, String)>), String> {
    let choice = resolve_model(ctx, run, hook_ctx).await?;
    let workspace = std::path::Path::new(&ctx.spec.workspace);
    let caps = prompt::Caps {
        per_file: ctx.spec.bootstrap_max_chars as usize,
        total: ctx.spec.bootstrap_total_max_chars as usize,
    };
    // All of the workspace's file work in one blocking hop: bootstrap files, the skills
    // snapshot and the `agent:bootstrap` hooks.
    let (mut files, skills, boot_hooks) = {
        let (ctx, ws) = (ctx.clone(), workspace.to_owned());
        let hooks_dir = hook_ctx.hooks_dir.clone();
        tokio::task::spawn_blocking(move || {
            prompt::read_workspace(&ws, caps).map(|files| {
                let skills = ctx.skills.offered(&ws);
                let boot = hooks::internal_hooks(hooks_dir.as_deref(), "agent:bootstrap");
                (files, skills, boot)
            })
        })
        .await
        .map_err(|e| format!("reading the workspace failed: {e}"))??
    };
    // Internal `agent:bootstrap` hooks may edit the list of bootstrap files (R-H1).
    let listed = || {
        let files: Vec<serde_json::Value> = files
            .iter()
            .map(|f| json!({"name": f.name, "content": f.content}))
            .collect();
        json!({"bootstrapFiles": files})
    };
    let fields = if boot_hooks.is_empty() {
        serde_json::Value::Null
    } else {
        listed()
    };
    for answer in hooks::run_discovered(hook_ctx, boot_hooks, "agent:bootstrap", fields).await {
        if let Some(list) = answer.get("bootstrapFiles").and_then(|l| l.as_array()) {
            let edited = list
                .iter()
                .filter_map(|f| {
                    let name = f.get("name")?.as_str()?.to_owned();
                    let content = f.get("content")?.as_str()?.to_owned();
                    Some((name, content))
                })
                .collect();
            files = prompt::recap(edited, caps);
        }
    }
    let history = ctx
        .reader
        .history(run.session_key.clone(), prompt::HISTORY_LIMIT)
        .await
        .map_err(|e| format!("cannot read the session history: {e}"))?;
    let added = ctx.hooks.before_prompt_build(hook_ctx, &run.message).await;
    let extra: Vec<String> = added
        .prepend
        .into_iter()
        .chain(run.extra_system_prompt.clone())
        .chain(added.append)
        .chain(ctx.background.context())
        .collect();
    let extra = extra.join("\n\n");
    let system = prompt::system_prompt(
        ctx.spec.base_prompt.as_deref(),
        &files,
        &skills.prompt,
        (!extra.is_empty()).then_some(extra.as_str()),
    );
    if ctx.hooks.has("before_agent_reply") {
        if let Some(reply) = ctx.hooks.before_agent_reply(hook_ctx, &run.message).await {
            return Ok((Prepared::Claimed(reply), skills.env));
        }
    }
    let mut req = prompt::request(
        system,
        &history,
        crate::tools::offered(ctx.spec.tools_allow.as_deref()),
    );
    req.choice = choice;
    // A level from a newer supervisor this build does not know: the provider's default, as
    // with none.
    req.thinking = run
        .thinking
        .filter(|t| *t != ipc::thinking::Thinking::Unknown);
    Ok((Prepared::Call(req), skills.env))
}
