//! Editing `loopgate.toml` over the Gateway (`config.get`, `config.patch`, `config.apply`):
//! the pure parts, no I/O. The file is edited as a TOML document (`toml_edit`), so the
//! operator's comments, order and layout outside the keys a write changes stay as written.
//!
//! Secrets (the gateway token, a password in a URL) never leave the gateway: `config.get`
//! shows them as OpenClaw's placeholder, and a write that sends the placeholder back keeps
//! the value the file has.

use serde_json::{Map, Value as Json};
use toml_edit::{Array, ArrayOfTables, DocumentMut, InlineTable, Item, Table, Value};

/// What a secret is shown as (OpenClaw's placeholder, which its clients send back).
pub const REDACTED: &str = "__OPENCLAW_REDACTED__";

/// A whole-file write that keeps less than this share of the file's settings is refused.
const KEEP_AT_LEAST: f64 = 0.5;
/// Files with fewer settings than this are never guarded.
const GUARD_FROM_KEYS: usize = 6;

/// Why an edit cannot be made (nothing is written).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    /// The patch is not JSON5 (OpenClaw's text: `SyntaxError: JSON5: ...`).
    #[error("SyntaxError: JSON5: {0}")]
    Json5(String),
    #[error("config.patch raw must be an object")]
    NotAnObject,
    /// The file, or `config.apply`'s text, is not TOML.
    #[error("invalid config: {0}")]
    Toml(String),
    /// A value TOML cannot hold where the patch puts it.
    #[error("invalid config: {path}: {why}")]
    Value { path: String, why: String },
    /// The placeholder was sent where the file has no secret to keep.
    #[error("invalid config: {0}: {REDACTED} stands for a value the config does not have")]
    NothingToRestore(String),
    /// The placeholder was sent in a list whose length changed, where the file has
    /// different secrets: which one it stands for cannot be told.
    #[error("invalid config: {0}: {REDACTED} cannot be told apart here (the list changed and holds different secrets): send the value in full")]
    AmbiguousSecret(String),
}

/// The content hash of the file's bytes (`config.get`'s `hash`): equal bytes, equal hash,
/// within one gateway process. Keyed (HMAC-SHA-256 under a key made at start, as OpenClaw's
/// `hmac-sha256:v1:`), because the file holds the gateway token: a plain hash of text a
/// reader sees but for the token would let the reader test guesses of the token offline.
pub fn content_hash(bytes: &[u8]) -> String {
    static KEY: std::sync::OnceLock<[u8; 32]> = std::sync::OnceLock::new();
    let key = KEY.get_or_init(crate::secrets::random_key);
    format!(
        "hmac-sha256:{}",
        crate::secrets::hex(&crate::secrets::hmac_sha256(key, bytes))
    )
}

/// The file's text parsed as a document.
pub fn document(text: &str) -> Result<DocumentMut, EditError> {
    text.parse::<DocumentMut>().map_err(|e| {
        EditError::Toml(crate::config_lines::without_source(
            e.to_string().trim_end(),
        ))
    })
}

/// The document as JSON (secrets as they are).
pub fn as_json(doc: &DocumentMut) -> Json {
    parse_json(&doc.to_string())
}

fn parse_json(text: &str) -> Json {
    toml::from_str::<toml::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_value(v).ok())
        .unwrap_or_else(|| Json::Object(Map::new()))
}

/// `config.patch`'s `raw`: a JSON5 object. `NaN` and the infinities are refused (JSON has
/// no place for them: read as JSON they would become `null`, which deletes).
pub fn parse_patch(raw: &str) -> Result<Map<String, Json>, EditError> {
    match json5::from_str::<Finite>(raw) {
        Ok(Finite(Json::Object(m))) => Ok(m),
        Ok(_) => Err(EditError::NotAnObject),
        Err(e) => Err(EditError::Json5(e.to_string())),
    }
}

/// A JSON value whose numbers are all finite.
struct Finite(Json);

impl<'de> serde::Deserialize<'de> for Finite {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FiniteVisitor).map(Finite)
    }
}

struct FiniteVisitor;

impl<'de> serde::de::Visitor<'de> for FiniteVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON5 value with finite numbers")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(Json::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::from(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Json, E> {
        serde_json::Number::from_f64(v)
            .map(Json::Number)
            .ok_or_else(|| E::custom(format!("{v} is not a number a config can hold")))
    }
    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::from(v))
    }
    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }
    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_none<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }
    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Json, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut out = Vec::new();
        while let Some(Finite(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Json::Array(out))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut out = Map::new();
        while let Some((k, Finite(v))) = map.next_entry::<String, Finite>()? {
            out.insert(k, v);
        }
        Ok(Json::Object(out))
    }
}

/// Applies a merge patch to the document: objects merge into tables, `null` deletes, any
/// other value (arrays included) replaces.
/// The merge patch that turns `old` (a parse) into `whole`: `whole`'s values where they
/// differ (a number equal to the file's, `3` for `3.0`, is no change: the file keeps how
/// it wrote it), and `null` for every key `old` has and `whole` lacks.
pub fn replacing(old: &Json, whole: Map<String, Json>) -> Map<String, Json> {
    let empty = Map::new();
    let old = old.as_object().unwrap_or(&empty);
    let mut patch: Map<String, Json> = old
        .keys()
        .filter(|k| !whole.contains_key(*k))
        .map(|k| (k.clone(), Json::Null))
        .collect();
    for (k, v) in whole {
        let value = match (old.get(&k), v) {
            (Some(o @ Json::Object(_)), Json::Object(w)) => {
                let inner = replacing(o, w);
                // Nothing changed below: the table is left as it is written.
                if inner.is_empty() {
                    continue;
                }
                Json::Object(inner)
            }
            (Some(o), v) if same(o, &v) => continue,
            (_, v) => v,
        };
        patch.insert(k, value);
    }
    patch
}

/// Equal values: numbers by value (`3` is the file's `3.0`), the redacted placeholder as
/// the secret it stands for, arrays and tables element by element.
fn same(file: &Json, form: &Json) -> bool {
    match (file, form) {
        (_, Json::String(s)) if s == REDACTED => file.is_string(),
        (Json::Number(x), Json::Number(y)) => x.as_f64() == y.as_f64(),
        (Json::Array(x), Json::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b))
        }
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, a)| y.get(k).is_some_and(|b| same(a, b)))
        }
        _ => file == form,
    }
}

/// `agents.list.<id>`: a table that is an agent.
fn is_agent(path: &[String]) -> bool {
    path.len() == 3 && path[0] == "agents" && path[1] == "list"
}

pub fn merge(doc: &mut DocumentMut, patch: &Map<String, Json>) -> Result<(), EditError> {
    merge_table(doc.as_table_mut(), patch, &mut Vec::new())
}

fn merge_table(
    table: &mut Table,
    patch: &Map<String, Json>,
    path: &mut Vec<String>,
) -> Result<(), EditError> {
    for (key, value) in patch {
        path.push(key.clone());
        match value {
            Json::Null => {
                table.remove(key);
            }
            Json::Object(inner) => match table.get_mut(key) {
                Some(Item::Table(t)) => {
                    let had = !t.is_empty();
                    merge_table(t, inner, path)?;
                    if had && t.is_empty() {
                        if is_agent(path) {
                            // An agent is its key: an emptied one keeps its header.
                            t.set_implicit(false);
                        } else if inner.values().all(Json::is_null) {
                            // A table whose last keys the patch removed goes with them (no
                            // empty header left behind); a parent emptied that way stays.
                            table.remove(key);
                        }
                    }
                }
                Some(Item::Value(Value::InlineTable(t))) => {
                    let mut as_table = t.clone().into_table();
                    merge_table(&mut as_table, inner, path)?;
                    *t = as_table.into_inline_table();
                }
                _ => {
                    let mut t = Table::new();
                    t.set_implicit(true);
                    merge_table(&mut t, inner, path)?;
                    table.insert(key, Item::Table(t));
                }
            },
            other => {
                let mut new = item(other, path)?;
                // A value written over another keeps its place's layout and comment, and
                // its key keeps the comment lines above it (replaced in place).
                if let (Some(Item::Value(old)), Item::Value(v)) = (table.get(key), &mut new) {
                    *v.decor_mut() = old.decor().clone();
                }
                match table.get_mut(key) {
                    Some(slot) => *slot = new,
                    None => {
                        table.insert(key, new);
                    }
                }
            }
        }
        path.pop();
    }
    Ok(())
}

/// A JSON value as a TOML item: an array of objects becomes an array of tables.
fn item(v: &Json, path: &[String]) -> Result<Item, EditError> {
    if let Json::Array(items) = v {
        if !items.is_empty() && items.iter().all(Json::is_object) {
            let mut tables = ArrayOfTables::new();
            for (i, o) in items.iter().enumerate() {
                let Json::Object(o) = o else { continue };
                let mut t = Table::new();
                let mut at = path.to_vec();
                at.push(i.to_string());
                merge_table(&mut t, o, &mut at)?;
                tables.push(t);
            }
            return Ok(Item::ArrayOfTables(tables));
        }
    }
    Ok(Item::Value(value(v, path)?))
}

fn value(v: &Json, path: &[String]) -> Result<Value, EditError> {
    let bad = |why: &str| EditError::Value {
        path: path.join("."),
        why: why.to_owned(),
    };
    Ok(match v {
        Json::Bool(b) => Value::from(*b),
        Json::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => Value::from(i),
            (None, Some(f)) => Value::from(f),
            _ => return Err(bad("a number TOML cannot hold")),
        },
        Json::String(s) => Value::from(s.as_str()),
        Json::Array(items) => {
            let mut a = Array::new();
            for (i, x) in items.iter().enumerate() {
                let mut at = path.to_vec();
                at.push(i.to_string());
                a.push(value(x, &at)?);
            }
            Value::Array(a)
        }
        Json::Object(o) => {
            let mut t = InlineTable::new();
            for (k, x) in o {
                if x.is_null() {
                    continue;
                }
                let mut at = path.to_vec();
                at.push(k.clone());
                t.insert(k, value(x, &at)?);
            }
            Value::InlineTable(t)
        }
        Json::Null => return Err(bad("null has no place in an array")),
    })
}

/// The dotted paths whose values differ between two parses (a table that appears or goes
/// is one path; arrays compare whole).
pub fn changed_paths(old: &Json, new: &Json) -> Vec<String> {
    let mut out = Vec::new();
    diff(old, new, &mut String::new(), &mut out);
    out
}

fn diff(old: &Json, new: &Json, at: &mut String, out: &mut Vec<String>) {
    match (old, new) {
        (Json::Object(a), Json::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let len = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(k);
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff(x, y, at, out),
                    _ => out.push(at.clone()),
                }
                at.truncate(len);
            }
        }
        (a, b) if a != b => out.push(at.clone()),
        _ => {}
    }
}

/// Why a whole-file write (`config.apply`) that would drop most of the file's settings is
/// refused, if it would: it keeps fewer than half of the keys of a file with at least
/// [`GUARD_FROM_KEYS`]. Counted in settings, not bytes, so padding cannot hide a truncation;
/// removing keys on purpose is `config.patch`'s (`null`), which this does not guard.
pub fn destructive(old: &Json, new: &Json) -> Option<String> {
    let (before, after) = (leaves(old), leaves(new));
    (before >= GUARD_FROM_KEYS && (after as f64) < before as f64 * KEEP_AT_LEAST)
        .then(|| format!("settings-drop:{before}->{after}"))
}

/// The settings (leaf values) of a parse.
fn leaves(v: &Json) -> usize {
    match v {
        Json::Object(m) => m.values().map(leaves).sum(),
        _ => 1,
    }
}

mod dialect;
mod redact;
pub use dialect::{from_openclaw, to_openclaw};
pub use redact::{redacted, restore_lines, restore_secrets};

#[cfg(test)]
mod tests;
