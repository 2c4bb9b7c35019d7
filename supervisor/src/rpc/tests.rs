//! Dispatch decisions: which methods a connection may call, and which handler serves each.

use super::*;

fn granted(scopes: &[&str]) -> Vec<String> {
    scopes.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn an_unknown_method_is_named_to_an_admin_and_a_missing_scope_to_others() {
    let e = callable("frobnicate.now", &granted(&["operator.admin"])).unwrap_err();
    assert_eq!(e.code, ipc::gateway::codes::INVALID_REQUEST);
    assert_eq!(e.message, "unknown method: frobnicate.now");

    let e = callable("frobnicate.now", &granted(&["operator.write"])).unwrap_err();
    assert_eq!(e.code, ipc::gateway::codes::FORBIDDEN);
    assert_eq!(e.message, "missing scope: operator.admin");
    assert_eq!(
        e.details,
        Some(
            json!({"code": "MISSING_SCOPE", "missingScope": "operator.admin",
                    "requiredScopes": ["operator.admin"]})
        )
    );
}

#[test]
fn a_known_method_needs_its_scope_and_write_covers_read() {
    assert_eq!(
        callable("chat.history", &granted(&["operator.read"])).unwrap(),
        Method::ChatHistory
    );
    assert_eq!(
        callable("chat.history", &granted(&["operator.write"])).unwrap(),
        Method::ChatHistory
    );
    let e = callable("chat.send", &granted(&["operator.read"])).unwrap_err();
    assert_eq!(e.code, ipc::gateway::codes::FORBIDDEN);
    assert_eq!(e.message, "missing scope: operator.write");
    let e = callable("device.token.rotate", &granted(&["operator.write"])).unwrap_err();
    assert_eq!(e.message, "missing scope: operator.pairing");
    assert!(callable("agent", &[]).is_err());
}

/// The methods admitted in their connection's order reach the handler that takes their
/// place in it (any other would drop it unused).
#[test]
fn ordered_methods_are_served_by_the_turn_group() {
    let ordered: Vec<Method> = Method::ALL
        .iter()
        .copied()
        .filter(|m| is_ordered(m.as_str()))
        .collect();
    assert_eq!(
        ordered,
        [Method::Agent, Method::ChatSend, Method::SessionsCreate]
    );
    for m in ordered {
        assert_eq!(group(m), Group::Turn, "{}", m.as_str());
    }
    assert_eq!(group(Method::SessionsCompact), Group::Session);
    assert_eq!(group(Method::DeviceTokenRevoke), Group::Approval);
    assert_eq!(group(Method::CommandsList), Group::Gateway);
    assert_eq!(group(Method::CronList), Group::Cron);
}

/// A config from TOML text, for the tests of this module's handlers.
pub(super) fn config(text: &str) -> crate::config::Config {
    let raw: crate::config::RawConfig = toml::from_str(text).unwrap();
    let (path, state) = (
        std::path::Path::new("/etc/lg.toml"),
        std::path::Path::new("/state"),
    );
    crate::config::Config::from_raw(raw, path, state, &crate::config::Overrides::default()).unwrap()
}

/// An agent `main` on `p/m`, a model that does not reason; the provider also has
/// `p/think`, which does.
pub(super) const ONE_PROVIDER: &str = "[agents.defaults]\nmodel = \"p/m\"\n\
     [models.providers.p]\napi = \"openai-completions\"\nbase_url = \"http://127.0.0.1:9\"\n\
     [models.providers.p.models.think]\nreasoning = true\n";

/// A session index row of `key` (agent `main`), created at 10 and updated at 50, with no
/// run, label or settings.
pub(super) fn index_row(key: &str) -> crate::gatewaydb::SessionRow {
    crate::gatewaydb::SessionRow {
        session_key: key.into(),
        agent_id: "main".into(),
        session_id: None,
        created_at: 10,
        updated_at: 50,
        last_run_id: None,
        last_status: None,
        last_error: None,
        input_tokens: 0,
        output_tokens: 0,
        total_tokens: 0,
        label: None,
        last_read_at: None,
        model_override: None,
        thinking_level: None,
        reasoning_level: None,
        queue_mode: None,
        verbose_level: None,
        response_usage: None,
        trace_level: None,
        last_run_started_at: None,
        last_run_ended_at: None,
    }
}
