//! `loopgate config get|set|patch`: the running gateway's config file over the same methods
//! the Control UI uses (`config.get`, `config.patch`): secrets shown redacted, every write
//! checked against the hash just read, validated and applied by the gateway at once.

use std::io::Read;
use std::path::Path;
use std::process::ExitCode;

use ipc::gateway::{ConfigGetResult, ConfigPatchParams, ConfigWriteResult, Method, NoParams};
use serde_json::{Map, Value};

use super::{emit, fail, Client};

/// `loopgate config get`: the file's text (secrets redacted), or the whole answer as JSON.
pub async fn config_get(socket: &Path, json: bool) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    if json {
        return match client
            .call(Method::ConfigGet, Value::Object(Map::new()))
            .await
        {
            Ok(v) => {
                emit(&format!(
                    "{}\n",
                    serde_json::to_string_pretty(&v).unwrap_or_default()
                ));
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        };
    }
    let r: ConfigGetResult = match client.ask(Method::ConfigGet, &NoParams {}).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    match r.raw {
        Some(raw) => {
            emit(&raw);
            ExitCode::SUCCESS
        }
        None => fail(format!("{} does not exist (all defaults)", r.path)),
    }
}

/// `loopgate config set KEY VALUE`: one key, `VALUE` read as JSON5 (a number, `true`, a
/// quoted string, an array, an object, `null` to remove the key), else as a plain string.
pub async fn config_set(socket: &Path, key: &str, value: &str) -> ExitCode {
    let value = json5::from_str::<Value>(value).unwrap_or_else(|_| Value::from(value));
    let Some(patch) = nested(key, value) else {
        return fail(format!("{key:?} is not a dotted key (a.b.c)"));
    };
    patch_with(socket, patch.to_string()).await
}

/// `loopgate config patch PATCH`: a JSON5 merge patch (`-`: read from stdin).
pub async fn config_patch(socket: &Path, patch: &str) -> ExitCode {
    let patch = if patch == "-" {
        let mut text = String::new();
        if let Err(e) = std::io::stdin().read_to_string(&mut text) {
            return fail(format!("cannot read the patch from stdin: {e}"));
        }
        text
    } else {
        patch.to_owned()
    };
    patch_with(socket, patch).await
}

/// `{a: {b: {c: value}}}` for `a.b.c`.
fn nested(key: &str, value: Value) -> Option<Value> {
    let parts: Vec<&str> = key.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    Some(parts.iter().rev().fold(value, |inner, part| {
        let mut m = Map::new();
        m.insert((*part).to_owned(), inner);
        Value::Object(m)
    }))
}

async fn patch_with(socket: &Path, raw: String) -> ExitCode {
    let mut client = match Client::connect(socket).await {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let current: ConfigGetResult = match client.ask(Method::ConfigGet, &NoParams {}).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let params = ConfigPatchParams {
        raw,
        base_hash: current.hash,
        note: Some("loopgate config".into()),
        ..Default::default()
    };
    let r: ConfigWriteResult = match client.ask(Method::ConfigPatch, &params).await {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    let changed = r.changed_paths.unwrap_or_default();
    let mut out = if r.noop == Some(true) {
        "Config unchanged: nothing to write.\n".to_owned()
    } else {
        format!("Config written and applied ({}):\n", r.path)
    };
    for c in &changed {
        out.push_str(&format!("  {c}\n"));
    }
    if r.sentinel.is_some_and(|s| s.payload.stats.requires_restart) {
        out.push_str("The gateway restarts itself to apply this (it drains its runs first).\n");
    }
    emit(&out);
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dotted_key_nests_its_value() {
        assert_eq!(
            nested("agents.defaults.timeout_seconds", Value::from(900)),
            Some(serde_json::json!({"agents": {"defaults": {"timeout_seconds": 900}}}))
        );
        assert_eq!(nested("a..b", Value::Null), None);
        assert_eq!(nested("", Value::Null), None);
    }
}
