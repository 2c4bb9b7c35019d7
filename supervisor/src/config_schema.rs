//! `config.schema` and `config.schema.lookup`: the JSON Schema (draft-07) of the config
//! file's keys, generated from the config's own raw types (`schemars`: the field docs are the
//! descriptions, closed tables are `additionalProperties: false`, maps such as
//! `agents.list` and `models.providers` take any key), and how a change of each key applies.

use std::sync::OnceLock;

use ipc::gateway::{ConfigSchemaChild, ConfigSchemaLookupResult};
use serde_json::{Map, Value};

use crate::config::RawConfig;

/// The schema, generated once per process (every subschema inlined: no `$ref`).
pub fn schema() -> &'static Value {
    static SCHEMA: OnceLock<Value> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        let mut settings = schemars::gen::SchemaSettings::draft07();
        settings.inline_subschemas = true;
        let root = settings
            .into_generator()
            .into_root_schema_for::<RawConfig>();
        let mut v = serde_json::to_value(root).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("title".into(), Value::from("loopgate.toml"));
            o.remove("definitions");
        }
        v
    })
}

/// How a change of the key at `path` applies: `restart` for the listener (`gateway.port`,
/// `gateway.bind`) and cluster membership, read at start only; `hot` for the rest (a reload
/// applies it; an agent's changed settings restart its worker between runs).
pub fn reload_kind(path: &str) -> &'static str {
    // A listener change is applied live (the listener moves); the connection cap, the disk
    // reserve and the cluster settings wait for a restart.
    let restart = ["gateway.max_connections", "disk.reserve_mb", "cluster"];
    if restart
        .iter()
        .any(|p| path == *p || path.starts_with(&format!("{p}.")))
    {
        "restart"
    } else {
        "hot"
    }
}

/// The node at the dotted `path` (`*`, or any name, stands for a map's key), with its
/// children; `None` for a path the config does not have.
pub fn lookup(path: &str) -> Option<ConfigSchemaLookupResult> {
    let mut node = schema();
    if !path.is_empty() {
        for key in path.split('.') {
            node = child(node, key)?;
        }
    }
    let children = properties(node)
        .map(|props| {
            props
                .iter()
                .map(|(key, sub)| {
                    let path = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    ConfigSchemaChild {
                        key: key.clone(),
                        reload_kind: reload_kind(&path).into(),
                        path,
                        kind: type_of(sub),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    Some(ConfigSchemaLookupResult {
        path: path.to_owned(),
        schema: shallow(node),
        reload_kind: reload_kind(path).into(),
        hint: None,
        hint_path: None,
        children,
    })
}

/// The schema of `key` under `node`: a property, a map's values, or an array's items.
fn child<'a>(node: &'a Value, key: &str) -> Option<&'a Value> {
    let node = unwrapped(node);
    if let Some(sub) = properties(node).and_then(|p| p.get(key)) {
        return Some(sub);
    }
    if let Some(values) = node.get("additionalProperties").filter(|v| v.is_object()) {
        return Some(values);
    }
    node.get("items").filter(|_| key.parse::<usize>().is_ok())
}

/// An optional value's schema is `anyOf [T, null]` or `[T]`: `T`.
fn unwrapped(node: &Value) -> &Value {
    node.get("anyOf")
        .and_then(Value::as_array)
        .and_then(|all| {
            all.iter()
                .find(|s| s.get("type") != Some(&Value::from("null")))
        })
        .filter(|s| s.get("properties").is_some())
        .unwrap_or(node)
}

fn properties(node: &Value) -> Option<&Map<String, Value>> {
    unwrapped(node).get("properties").and_then(Value::as_object)
}

fn type_of(node: &Value) -> Option<Value> {
    unwrapped(node).get("type").cloned()
}

/// `node` with each property reduced to its type and description.
fn shallow(node: &Value) -> Value {
    let mut out = unwrapped(node).clone();
    if let Some(props) = out.get_mut("properties").and_then(Value::as_object_mut) {
        for sub in props.values_mut() {
            let mut brief = Map::new();
            for k in ["type", "description", "enum"] {
                if let Some(v) = unwrapped(sub).get(k).or_else(|| sub.get(k)) {
                    brief.insert(k.into(), v.clone());
                }
            }
            *sub = Value::Object(brief);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The schema describes the keys a config file has: tables closed, maps open, the
    /// field docs as descriptions, the link's enums by their names.
    #[test]
    fn the_schema_describes_the_config_files_keys() {
        let s = schema();
        assert_eq!(s["$schema"], "http://json-schema.org/draft-07/schema#");
        assert!(!s.to_string().contains("$ref"), "inlined");
        let gateway = &s["properties"]["gateway"];
        assert_eq!(unwrapped(gateway)["additionalProperties"], false);
        let port = lookup("gateway.port").unwrap();
        assert_eq!(port.reload_kind, "hot", "the listener moves");
        assert_eq!(lookup("disk.reserve_mb").unwrap().reload_kind, "restart");
        assert_eq!(
            lookup("gateway.drain_timeout_seconds").unwrap().reload_kind,
            "hot"
        );
        let timeout = lookup("agents.list.ops.timeout_seconds").unwrap();
        assert!(
            timeout.schema.to_string().contains("integer"),
            "{:?}",
            timeout.schema
        );
        let exec = lookup("agents.defaults.tools.exec").unwrap();
        let security = exec.children.iter().find(|c| c.key == "security").unwrap();
        assert_eq!(security.path, "agents.defaults.tools.exec.security");
        assert!(
            exec.schema.to_string().contains("allowlist"),
            "{:?}",
            exec.schema
        );
        assert!(
            lookup("models.providers.anything.api").is_some(),
            "a map's key"
        );
        assert!(lookup("gateway.nonsense").is_none());
        let root = lookup("").unwrap();
        let keys: Vec<&str> = root.children.iter().map(|c| c.key.as_str()).collect();
        for k in [
            "gateway", "agents", "models", "workers", "messages", "cluster",
        ] {
            assert!(keys.contains(&k), "{keys:?}");
        }
        // Every key a real config writes is in the schema (the shipped example).
        let example = include_str!("../../deploy/loopgate.toml.example");
        let parsed: toml::Value = toml::from_str(example).unwrap();
        let mut missing = Vec::new();
        walk(&parsed, String::new(), &mut missing);
        assert!(missing.is_empty(), "{missing:?}");
    }

    fn walk(v: &toml::Value, path: String, missing: &mut Vec<String>) {
        if let toml::Value::Table(t) = v {
            for (k, sub) in t {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                if lookup(&p).is_none() {
                    missing.push(p.clone());
                }
                walk(sub, p, missing);
            }
        }
    }
}
