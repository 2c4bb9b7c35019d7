//! What the worker's own unit tests share: an agent spec and a `Ctx` over a temp database,
//! with no model reachable (runs fail at once, as a configuration fault).

use std::sync::Arc;

use ipc::control::AgentSpec;
use serde_json::json;

use crate::outbox::{Outbox, Receiver};
use crate::store::{Reader, Writer};
use crate::Ctx;

/// Agent `main` in `dir`, with diagnostics on at 1 s.
pub fn spec(dir: &std::path::Path) -> AgentSpec {
    serde_json::from_value(json!({
        "agent_id": "main",
        "db_path": dir.join("agent.sqlite").display().to_string(),
        "workspace": dir.join("ws").display().to_string(),
        "model": {
            "provider": "p", "api": "openai-completions", "base_url": "http://127.0.0.1:9",
            "model": "m", "request_timeout_ms": 1000, "idle_timeout_ms": 1000
        },
        "max_concurrent": 4,
        "bootstrap_max_chars": 100,
        "bootstrap_total_max_chars": 100,
        "max_queued": 16,
        "diagnostics": {"enabled": true, "warn_ms": 1000, "abort_min_ms": 3000}
    }))
    .unwrap()
}

/// A `Ctx` for `spec` whose frames go to the returned outbox receiver; `reader` or one
/// over the database.
pub fn ctx(spec: AgentSpec, reader: Option<Reader>) -> (Arc<Ctx>, Receiver) {
    let db = std::path::Path::new(&spec.db_path);
    let (writer, _) = Writer::open(db, 0).unwrap();
    let reader = reader.unwrap_or_else(|| Reader::open(db).unwrap());
    let (out, rx): (Outbox, Receiver) = crate::outbox::new(64);
    let ctx = Arc::new(Ctx {
        hooks: crate::hooks::Hooks::new(Vec::new()),
        skills: Default::default(),
        llm: Err(crate::llm::LlmError::Config("no model in this test".into())),
        other_llms: Default::default(),
        exec_env: Arc::new(Vec::new()),
        disk: Arc::new(crate::tools::budget::DiskBudget::new(
            spec.disk,
            &spec.workspace,
        )),
        memory: Arc::new(crate::tools::memory::MemoryIndex::new(
            std::path::Path::new(&spec.db_path).with_file_name("memory.sqlite"),
        )),
        web: Arc::new(spec.web_fetch.clone()),
        background: Arc::new(crate::tools::background::Registry::new(
            std::path::Path::new(&spec.db_path).with_file_name("exec-sessions.json"),
        )),
        keys: Default::default(),
        out,
        allowed_since: Default::default(),
        model_requests: Default::default(),
        spec,
        writer,
        reader,
    });
    (ctx, rx)
}
