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

/// A write that leaves less than this share of the file's bytes is refused as destructive.
const KEEP_AT_LEAST: f64 = 0.5;
/// Files smaller than this are never too small to shrink.
const GUARD_FROM_BYTES: usize = 512;

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
    text.parse::<DocumentMut>()
        .map_err(|e| EditError::Toml(e.to_string().trim_end().to_owned()))
}

/// The document's text and its parse (JSON), every secret shown as [`REDACTED`].
pub fn redacted(doc: &DocumentMut) -> (String, Json) {
    let mut doc = doc.clone();
    visit_strings(doc.as_table_mut(), &mut Vec::new(), &mut |path, s| {
        is_secret(path, s).then(|| REDACTED.to_owned())
    });
    let text = doc.to_string();
    (text.clone(), parse_json(&text))
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

/// `config.patch`'s `raw`: a JSON5 object.
pub fn parse_patch(raw: &str) -> Result<Map<String, Json>, EditError> {
    match json5::from_str::<Json>(raw) {
        Ok(Json::Object(m)) => Ok(m),
        Ok(_) => Err(EditError::NotAnObject),
        Err(e) => Err(EditError::Json5(e.to_string())),
    }
}

/// Applies a merge patch to the document: objects merge into tables, `null` deletes, any
/// other value (arrays included) replaces.
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
                Some(Item::Table(t)) => merge_table(t, inner, path)?,
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
                // A value written over another keeps its place's layout and comment.
                if let (Some(Item::Value(old)), Item::Value(v)) = (table.get(key), &mut new) {
                    *v.decor_mut() = old.decor().clone();
                }
                table.insert(key, new);
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

/// Puts back the secrets sent as [`REDACTED`]: each takes the value `old` has at the same
/// place.
pub fn restore_secrets(doc: &mut DocumentMut, old: &DocumentMut) -> Result<(), EditError> {
    let mut missing = None;
    visit_strings(doc.as_table_mut(), &mut Vec::new(), &mut |path, s| {
        if s != REDACTED {
            return None;
        }
        let kept = string_at(old.as_table(), path);
        if kept.is_none() && missing.is_none() {
            missing = Some(path.join("."));
        }
        kept
    });
    match missing {
        Some(path) => Err(EditError::NothingToRestore(path)),
        None => Ok(()),
    }
}

fn string_at(table: &Table, path: &[String]) -> Option<String> {
    let (last, parents) = path.split_last()?;
    let mut t: &dyn toml_edit::TableLike = table;
    for p in parents {
        t = t.get(p)?.as_table_like()?;
    }
    t.get(last)?.as_str().map(str::to_owned)
}

/// Calls `f` with the path and text of every string value in tables (not in arrays); a
/// `Some` it gives replaces the value, keeping its decoration.
fn visit_strings(
    table: &mut dyn toml_edit::TableLike,
    path: &mut Vec<String>,
    f: &mut dyn FnMut(&[String], &str) -> Option<String>,
) {
    let keys: Vec<String> = table.iter().map(|(k, _)| k.to_owned()).collect();
    for key in keys {
        path.push(key.clone());
        if let Some(item) = table.get_mut(&key) {
            match item {
                Item::Value(Value::String(s)) => {
                    if let Some(new) = f(path, s.value()) {
                        let decor = s.decor().clone();
                        let mut v = toml_edit::Formatted::new(new);
                        *v.decor_mut() = decor;
                        *s = v;
                    }
                }
                Item::Value(Value::Array(a)) => {
                    for v in a.iter_mut() {
                        if let Value::String(s) = v {
                            if let Some(new) = f(path, s.value()) {
                                let decor = s.decor().clone();
                                let mut n = toml_edit::Formatted::new(new);
                                *n.decor_mut() = decor;
                                *s = n;
                            }
                        }
                    }
                }
                Item::Table(t) => visit_strings(t, path, f),
                Item::Value(Value::InlineTable(t)) => visit_strings(t, path, f),
                Item::ArrayOfTables(ts) => {
                    for t in ts.iter_mut() {
                        visit_strings(t, path, f);
                    }
                }
                _ => {}
            }
        }
        path.pop();
    }
}

/// Whether the string at `path` is a secret: the gateway token, or a URL with a password.
fn is_secret(path: &[String], s: &str) -> bool {
    let at = |want: &[&str]| path.len() == want.len() && path.iter().zip(want).all(|(a, b)| a == b);
    if at(&["gateway", "auth", "token"]) {
        return true;
    }
    // `scheme://user:password@host`: the userinfo is a credential.
    s.split_once("://")
        .and_then(|(_, rest)| rest.split(['/', '?', '#']).next())
        .is_some_and(|authority| {
            authority.contains('@') && authority.contains(':') && {
                let user = authority.split('@').next().unwrap_or("");
                user.contains(':')
            }
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

/// Why a write that would leave too little of the file is refused, if it would.
pub fn destructive(old: &str, new: &str) -> Option<String> {
    let kept = new.len() as f64 / old.len().max(1) as f64;
    (old.len() >= GUARD_FROM_BYTES && kept < KEEP_AT_LEAST)
        .then(|| format!("size-drop:{}->{}", old.len(), new.len()))
}

#[cfg(test)]
mod tests;
