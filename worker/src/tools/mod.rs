//! Built-in tools: definitions (JSON Schema), argument validation with recovery (R-E1),
//! workspace confinement, the exec policy, and execution with capped results (R-E2).

mod apply_patch;
pub mod background;
pub mod budget;
pub mod exec;
mod fs;
pub mod memory;
mod patch;
mod patch_write;
mod spawn;
mod validate;
mod web_fetch;

pub use web_fetch::isolate as web_fetch_isolate;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ipc::control::ExecPolicy;
use ipc::tools::ToolId;
use serde_json::value::RawValue;
use serde_json::Value;

pub use exec::{environment as exec_environment, plan as exec_plan, with_skill_env, Invocation};
pub use validate::validate_args;

/// Largest tool result kept for the model and for events, in characters (R-E2).
pub const MAX_RESULT_CHARS: usize = 16_000;
/// Default `exec` timeout.
pub const DEFAULT_EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// A tool the model may call.
#[derive(Debug, Clone)]
pub struct ToolDef {
    pub name: &'static str,
    pub description: &'static str,
    pub parameters: Value,
    /// `parameters` as JSON text, written once: every model request offers the tools.
    pub schema: Box<RawValue>,
}

impl PartialEq for ToolDef {
    /// `schema` is written from `parameters`.
    fn eq(&self, other: &ToolDef) -> bool {
        (self.name, self.description, &self.parameters)
            == (other.name, other.description, &other.parameters)
    }
}

impl ToolDef {
    fn new(name: &'static str, description: &'static str, parameters: Value) -> ToolDef {
        let schema = serde_json::value::to_raw_value(&parameters)
            .unwrap_or_else(|_| RawValue::NULL.to_owned());
        ToolDef {
            name,
            description,
            parameters,
            schema,
        }
    }
}

/// A tool call requested by the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// JSON text as the model produced it (may be malformed).
    pub arguments: String,
}

/// What a tool returned.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub content: String,
    pub is_error: bool,
    /// The `message` tool: the text delivered, as the `message_sending` hooks left it
    /// (`None`: the call's own text, or another tool).
    pub delivered: Option<String>,
}

impl ToolOutcome {
    fn ok(content: impl Into<String>) -> Self {
        Self {
            content: cap(content.into()),
            is_error: false,
            delivered: None,
        }
    }

    fn err(content: impl Into<String>) -> Self {
        Self {
            content: cap(content.into()),
            is_error: true,
            delivered: None,
        }
    }
}

/// Caps text to [`MAX_RESULT_CHARS`] and strips inline base64 image payloads (R-E2).
pub fn cap(text: String) -> String {
    let text = strip_images(text);
    match text.char_indices().nth(MAX_RESULT_CHARS) {
        Some((idx, _)) => format!(
            "{}\n[... truncated: result exceeds {MAX_RESULT_CHARS} characters]",
            &text[..idx]
        ),
        None => text,
    }
}

fn strip_images(text: String) -> String {
    if !text.contains("data:image/") {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text.as_str();
    while let Some(pos) = rest.find("data:image/") {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        // The payload is base64: anything else ends it (a `\\` of JSON escaping, a `<` of
        // a marker), so no text after it is taken with it.
        let end = tail
            .char_indices()
            .skip("data:image/".len())
            .find(|&(_, c)| {
                !(c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | ';' | ',' | '-' | '.'))
            })
            .map_or(tail.len(), |(i, _)| i);
        out.push_str("[image omitted]");
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// The tool that sends a message to the conversation the run came from.
pub use ipc::tools::MESSAGE_TOOL;

/// The text of a `message` call's arguments.
pub fn message_text(arguments: &str) -> Option<String> {
    let v: Value = serde_json::from_str(arguments).ok()?;
    let t = v.get("text")?.as_str()?.trim();
    (!t.is_empty()).then(|| t.to_owned())
}

/// Where tools act.
#[derive(Clone)]
pub struct ToolCtx {
    pub workspace: PathBuf,
    pub exec: ExecPolicy,
    /// Tools this agent may use (`None`: all).
    pub allow: Option<Vec<String>>,
    /// Partial output of a running tool (`exec`), best effort.
    pub progress: Option<tokio::sync::mpsc::Sender<String>>,
    /// The program that runs `exec` commands under `execpolicy::reaper` (the worker binary).
    pub reaper: PathBuf,
    /// The whole environment of an `exec` command ([`exec_environment`]).
    pub exec_env: Arc<Vec<(String, String)>>,
    /// `ask`: the command an operator approved for this call.
    pub approved: Option<String>,
    /// The agent's disk budget, shared by every run of the worker.
    pub disk: Arc<budget::DiskBudget>,
    /// What `web_fetch` may reach.
    pub web: Arc<ipc::web::WebFetchPolicy>,
    /// The agent's memory index, shared by every run of the worker.
    pub memory: Arc<memory::MemoryIndex>,
    /// The worker's background `exec` sessions.
    pub background: Arc<background::Registry>,
    /// The chat session the run belongs to (a background session's owner).
    pub session_key: String,
}

/// The environment's names only: a skill's key may be among its values (R-B6).
impl std::fmt::Debug for ToolCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCtx")
            .field("workspace", &self.workspace)
            .field("exec", &self.exec)
            .field("allow", &self.allow)
            .field("reaper", &self.reaper)
            .field(
                "exec_env",
                &self.exec_env.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("approved", &self.approved)
            .finish_non_exhaustive()
    }
}

pub use ipc::tools::allowed;

/// The tools offered to an agent's model.
pub fn offered(allow: Option<&[String]>) -> Vec<&'static ToolDef> {
    catalog()
        .iter()
        .map(|(d, _)| d)
        .filter(|d| allowed(allow, d.name))
        .collect()
}

/// A built-in tool and its argument validator, compiled on the tool's first call: the
/// validators of all six tools were half a megabyte in every worker, most of which never
/// runs a tool.
type Entry = (ToolDef, std::sync::OnceLock<Option<jsonschema::Validator>>);

/// The built-in tools: built once per process (every turn offers them).
fn catalog() -> &'static [Entry] {
    static CATALOG: std::sync::OnceLock<Vec<Entry>> = std::sync::OnceLock::new();
    CATALOG.get_or_init(|| {
        build_definitions()
            .into_iter()
            .map(|d| (d, std::sync::OnceLock::new()))
            .collect()
    })
}

/// The built-in tools.
pub fn definitions() -> Vec<&'static ToolDef> {
    catalog().iter().map(|(d, _)| d).collect()
}

fn build_definitions() -> Vec<ToolDef> {
    ipc::tools::TOOLS
        .iter()
        .map(|t| {
            // The table's schemas are JSON (its own test parses each).
            let parameters = serde_json::from_str(t.schema).unwrap_or(Value::Null);
            ToolDef::new(t.name, t.description, parameters)
        })
        .collect()
}

/// Validates and runs one call. Never panics on model input: every failure is an error
/// result the model sees.
pub async fn execute(ctx: &ToolCtx, call: &ToolCall) -> ToolOutcome {
    let entry = catalog().iter().find(|(d, _)| d.name == call.name);
    if !allowed(ctx.allow.as_deref(), &call.name) && entry.is_some() {
        return ToolOutcome::err(format!(
            "tool {:?} is not enabled for this agent (tools.allow)",
            call.name
        ));
    }
    let Some((def, compiled)) = entry else {
        return ToolOutcome::err(format!(
            "unknown tool {:?}; available: {}",
            call.name,
            ipc::tools::TOOL_NAMES.join(", ")
        ));
    };
    let validator = compiled.get_or_init(|| jsonschema::validator_for(&def.parameters).ok());
    let checked = match validator {
        Some(v) => validate::validate_with(&def.parameters, v, &call.arguments),
        None => validate_args(&def.parameters, &call.arguments),
    };
    let args = match checked {
        Ok(v) => v,
        Err(e) => return ToolOutcome::err(format!("invalid arguments for {}: {e}", call.name)),
    };
    let Some(tool) = ipc::tools::find(&call.name) else {
        return ToolOutcome::err(format!("tool {:?} is not implemented", call.name));
    };
    match tool.id {
        ToolId::Read => fs::read(&ctx.workspace, &args).await,
        ToolId::Write => fs::write(&ctx.workspace, ctx.disk.clone(), &args).await,
        ToolId::Edit => fs::edit(&ctx.workspace, ctx.disk.clone(), &args).await,
        ToolId::ApplyPatch => {
            apply_patch::apply_patch(&ctx.workspace, ctx.disk.clone(), &args).await
        }
        ToolId::Ls => fs::ls(&ctx.workspace, &args).await,
        ToolId::Exec => exec::exec(ctx, &args).await,
        ToolId::Process => background::process::process(&ctx.background, &args).await,
        ToolId::WebFetch => web_fetch::web_fetch(&ctx.web, &args).await,
        ToolId::MemorySearch => memory::memory_search(&ctx.memory, &ctx.workspace, &args).await,
        ToolId::MemoryGet => memory::memory_get(&ctx.workspace, &args).await,
        // Delivery is the turn's business (it streams the text and records the receipt).
        ToolId::Message => ToolOutcome::ok("Message sent."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_match_the_shared_list() {
        let names: Vec<_> = definitions().iter().map(|d| d.name).collect();
        assert_eq!(names, ipc::control::TOOL_NAMES);
        let allow = vec!["read".to_owned()];
        assert_eq!(offered(Some(&allow)).len(), 1);
        assert!(offered(Some(&[])).is_empty());
        assert_eq!(offered(None).len(), names.len());
    }

    #[test]
    fn results_are_capped_and_images_stripped_r_e2() {
        let long = "x".repeat(MAX_RESULT_CHARS + 10);
        assert!(cap(long).ends_with("characters]"));
        assert_eq!(
            cap("see data:image/png;base64,AAAA end".into()),
            "see [image omitted] end"
        );
        assert_eq!(
            cap("x data:image/\\n<<<END".into()),
            "x [image omitted]\\n<<<END"
        );
    }
}
