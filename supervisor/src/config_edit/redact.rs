//! Secrets in the config file, kept from readers: what counts as one, how `config.get`
//! shows the file with each as [`REDACTED`], and how a write that sends the placeholder back
//! keeps the file's value.
//!
//! A secret is the gateway token, a skill's variable (`skills.entries.<name>.env`), a URL
//! that carries credentials (a user or password before
//! its host, or a key-like query parameter), wherever it is: a value, an array element, an
//! inline table in an array, an array of tables. A comment that mentions a secret-like word
//! or holds such a URL is shown redacted too (an old token is often left in a comment).
//! Places are addressed by path, array elements by their index, so a placeholder is only
//! ever restored from the same place: a secret cannot be moved where it would be shown. In
//! a list whose length changed (an element added or removed in a form) an index no longer
//! names the same element: a placeholder there is restored only when the list's elements
//! hold one secret at that place, else the write is refused (it never keeps a secret the
//! operator meant to remove, say a compromised server's URL).

use toml_edit::{Decor, DocumentMut, Item, RawString, Table, TableLike, Value};

use super::{parse_json, EditError, REDACTED};

/// The document's text and its parse (JSON), every secret shown as [`REDACTED`].
pub fn redacted(doc: &DocumentMut) -> (String, serde_json::Value) {
    let mut doc = doc.clone();
    let root = doc.as_table_mut();
    redact_decor(root.decor_mut());
    let mut secret = |path: &[String], s: &str| is_secret(path, s).then(|| REDACTED.to_owned());
    visit_table(
        root,
        &mut Vec::new(),
        &mut Visit {
            value: &mut secret,
            comments: true,
        },
    );
    redact_trailing(&mut doc);
    let text = doc.to_string();
    (text.clone(), parse_json(&text))
}

/// Puts back the secrets sent as [`REDACTED`]: each takes the value `old` has at the same
/// place (in a list that changed length, the one secret its elements hold there).
pub fn restore_secrets(doc: &mut DocumentMut, old: &DocumentMut) -> Result<(), EditError> {
    // Where the placeholders are, then what each stands for, before anything changes.
    let mut places = Vec::new();
    let mut probe = doc.clone();
    visit_table(
        probe.as_table_mut(),
        &mut Vec::new(),
        &mut Visit {
            value: &mut |path: &[String], s: &str| {
                if s == REDACTED {
                    places.push(path.to_vec());
                }
                None
            },
            comments: false,
        },
    );
    let mut kept = std::collections::HashMap::new();
    for path in places {
        let value = restored(&path, doc.as_item(), old.as_item())?;
        kept.insert(path, value);
    }
    let mut restore = |path: &[String], s: &str| {
        if s != REDACTED {
            return None;
        }
        kept.get(path).cloned()
    };
    visit_table(
        doc.as_table_mut(),
        &mut Vec::new(),
        &mut Visit {
            value: &mut restore,
            comments: false,
        },
    );
    Ok(())
}

/// What the placeholder at `path` of the new document stands for in the old one.
fn restored(path: &[String], new: &Item, old: &Item) -> Result<String, EditError> {
    // The outermost list on the way whose length changed: its indexes name other elements.
    for (i, step) in path.iter().enumerate() {
        if step.parse::<usize>().is_err() {
            continue;
        }
        let list = &path[..i];
        let (Some(before), Some(after)) = (len_at(old, list), len_at(new, list)) else {
            continue;
        };
        if before == after {
            continue;
        }
        let mut found: Vec<String> = (0..before)
            .filter_map(|j| {
                let mut at = path.to_vec();
                at[i] = j.to_string();
                string_at(old, &at)
            })
            .collect();
        found.sort_unstable();
        found.dedup();
        return match found.len() {
            0 => Err(EditError::NothingToRestore(path.join("."))),
            1 => Ok(found.remove(0)),
            _ => Err(EditError::AmbiguousSecret(path.join("."))),
        };
    }
    string_at(old, path).ok_or_else(|| EditError::NothingToRestore(path.join(".")))
}

/// The length of the list (array or array of tables) at `path` under `item`.
fn len_at(item: &Item, path: &[String]) -> Option<usize> {
    let mut at = Step::Item(item);
    for p in path {
        at = step(at, p)?;
    }
    match at {
        Step::Item(Item::ArrayOfTables(a)) => Some(a.len()),
        Step::Item(Item::Value(Value::Array(a))) | Step::Value(Value::Array(a)) => Some(a.len()),
        _ => None,
    }
}

/// One step down from `at` by a table key or a list index.
fn step<'a>(at: Step<'a>, p: &str) -> Option<Step<'a>> {
    Some(match at {
        Step::Item(Item::Table(t)) => Step::Item(t.get(p)?),
        Step::Item(Item::ArrayOfTables(a)) => Step::Table(a.get(p.parse().ok()?)?),
        Step::Item(Item::Value(v)) | Step::Value(v) => Step::Value(child_value(v, p)?),
        Step::Table(t) => Step::Item(t.get(p)?),
        Step::Item(Item::None) => return None,
    })
}

/// The string at `path` (table keys and array indexes) under `item`.
fn string_at(item: &Item, path: &[String]) -> Option<String> {
    let mut at = Step::Item(item);
    for p in path {
        at = step(at, p)?;
    }
    match at {
        Step::Item(Item::Value(Value::String(s))) | Step::Value(Value::String(s)) => {
            Some(s.value().clone())
        }
        _ => None,
    }
}

enum Step<'a> {
    Item(&'a Item),
    Table(&'a Table),
    Value(&'a Value),
}

fn child_value<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::InlineTable(t) => t.get(key),
        Value::Array(a) => a.get(key.parse().ok()?),
        _ => None,
    }
}

/// What a walk over the document does: `value` may replace each string; with `comments`,
/// every comment that may hold a secret is shown as the placeholder (reading, never
/// writing: a write keeps the comments the client sent).
struct Visit<'f> {
    value: &'f mut dyn FnMut(&[String], &str) -> Option<String>,
    comments: bool,
}

impl Visit<'_> {
    fn decor(&self, decor: &mut Decor) {
        if self.comments {
            redact_decor(decor);
        }
    }
}

/// Calls `f` with the path and text of every string in a table, an array, an inline table
/// or an array of tables; a `Some` it gives replaces the string, keeping its layout.
/// Comments around the keys are redacted on the way.
fn visit_table(table: &mut dyn TableLike, path: &mut Vec<String>, f: &mut Visit<'_>) {
    let keys: Vec<String> = table.iter().map(|(k, _)| k.to_owned()).collect();
    for key in keys {
        if let Some(mut k) = table.key_mut(&key) {
            f.decor(k.leaf_decor_mut());
            f.decor(k.dotted_decor_mut());
        }
        path.push(key.clone());
        if let Some(item) = table.get_mut(&key) {
            visit_item(item, path, f);
        }
        path.pop();
    }
}

fn visit_item(item: &mut Item, path: &mut Vec<String>, f: &mut Visit<'_>) {
    match item {
        Item::Value(v) => visit_value(v, path, f),
        Item::Table(t) => {
            f.decor(t.decor_mut());
            visit_table(t, path, f);
        }
        Item::ArrayOfTables(ts) => {
            for (i, t) in ts.iter_mut().enumerate() {
                f.decor(t.decor_mut());
                path.push(i.to_string());
                visit_table(t, path, f);
                path.pop();
            }
        }
        Item::None => {}
    }
}

fn visit_value(v: &mut Value, path: &mut Vec<String>, f: &mut Visit<'_>) {
    f.decor(v.decor_mut());
    match v {
        Value::String(s) => {
            if let Some(new) = (f.value)(path, s.value()) {
                let decor = s.decor().clone();
                let mut n = toml_edit::Formatted::new(new);
                *n.decor_mut() = decor;
                *s = n;
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter_mut().enumerate() {
                path.push(i.to_string());
                visit_value(x, path, f);
                path.pop();
            }
        }
        Value::InlineTable(t) => visit_table(t, path, f),
        _ => {}
    }
}

/// A comment that may hold a secret, shown as the placeholder instead.
fn redact_decor(decor: &mut Decor) {
    let fix = |raw: Option<&RawString>| -> Option<String> {
        let text = raw?.as_str()?;
        text.contains('#').then_some(())?;
        let redacted: Vec<String> = text
            .split_inclusive('\n')
            .map(|line| match line.find('#') {
                Some(at) if secret_words(&line[at..]) => {
                    let end = if line.ends_with('\n') { "\n" } else { "" };
                    format!("{}# {REDACTED}{end}", &line[..at])
                }
                _ => line.to_owned(),
            })
            .collect();
        let joined = redacted.concat();
        (joined != text).then_some(joined)
    };
    if let Some(p) = fix(decor.prefix()) {
        decor.set_prefix(p);
    }
    if let Some(s) = fix(decor.suffix()) {
        decor.set_suffix(s);
    }
}

/// The comments after the last item of the document.
fn redact_trailing(doc: &mut DocumentMut) {
    let text = doc.trailing().as_str().map(str::to_owned);
    if let Some(text) = text {
        let mut d = Decor::new(text, "");
        redact_decor(&mut d);
        if let Some(p) = d.prefix().and_then(RawString::as_str) {
            doc.set_trailing(p.to_owned());
        }
    }
}

/// Whether comment text may hold a secret.
fn secret_words(comment: &str) -> bool {
    let lower = comment.to_ascii_lowercase();
    [
        "token",
        "secret",
        "password",
        "passwd",
        "api_key",
        "apikey",
        "api-key",
        "credential",
    ]
    .iter()
    .any(|w| lower.contains(w))
        || url_with_credentials(comment)
}

/// Whether the string at `path` is a secret: the gateway token, or a URL with credentials.
pub(super) fn is_secret(path: &[String], s: &str) -> bool {
    let at = |want: &[&str]| path.len() == want.len() && path.iter().zip(want).all(|(a, b)| a == b);
    // A skill's variables are often its tokens (`[skills.entries.<name>] env`), and a key
    // pasted into `api_key_env` by mistake is one.
    let skill = path.len() >= 4 && path[0] == "skills" && path[1] == "entries";
    let skill_env = skill && ((path.len() == 5 && path[3] == "env") || path[3] == "api_key_env");
    at(&["gateway", "auth", "token"]) || skill_env || url_with_credentials(s)
}

/// `scheme://user[:password]@host...`, or a URL whose query has a key-like parameter.
fn url_with_credentials(s: &str) -> bool {
    let Some((_, rest)) = s.split_once("://") else {
        return false;
    };
    // Anything before an `@` that comes before the host's end counts as credentials, a
    // `/` in an unescaped password included (the first whitespace ends the URL).
    let url = rest.split(char::is_whitespace).next().unwrap_or("");
    let host_end = url.find(['?', '#']).unwrap_or(url.len());
    if url[..host_end].find('@').is_some_and(|at| at > 0) {
        return true;
    }
    let query = url
        .split_once('?')
        .map_or("", |(_, q)| q)
        .to_ascii_lowercase();
    query.split('&').any(|pair| {
        let name = pair.split('=').next().unwrap_or("");
        [
            "key",
            "api_key",
            "apikey",
            "token",
            "access_token",
            "password",
            "secret",
            "sig",
        ]
        .contains(&name)
    })
}

/// The text a client sent back (`sent`), with every line it left as `config.get` showed it
/// (`view`, the file `original` redacted) put back as the file has it: a redacted comment
/// the client did not touch keeps the operator's words, not the placeholder. Lines are
/// paired by a longest-common-subsequence match after the common head and tail; past a
/// thousand changed lines either side, only head and tail are paired (the secret values
/// are restored by place in any case, [`restore_secrets`]).
pub fn restore_lines(sent: &str, view: &str, original: &str) -> String {
    let (v, o): (Vec<&str>, Vec<&str>) = (view.lines().collect(), original.lines().collect());
    if v.len() != o.len() || view == original {
        return sent.to_owned();
    }
    let s: Vec<&str> = sent.lines().collect();
    let mut out: Vec<&str> = s.clone();
    let head = s.iter().zip(&v).take_while(|(a, b)| a == b).count();
    let tail = s[head..]
        .iter()
        .rev()
        .zip(v[head..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let mut pairs: Vec<(usize, usize)> = (0..head).map(|i| (i, i)).collect();
    pairs.extend((0..tail).map(|k| (s.len() - 1 - k, v.len() - 1 - k)));
    let (sm, vm) = (&s[head..s.len() - tail], &v[head..v.len() - tail]);
    if sm.len() <= 1000 && vm.len() <= 1000 {
        pairs.extend(
            common(sm, vm)
                .into_iter()
                .map(|(i, j)| (head + i, head + j)),
        );
    }
    for (i, j) in pairs {
        if v[j] != o[j] {
            out[i] = o[j];
        }
    }
    let mut text = out.join("\n");
    if sent.ends_with('\n') {
        text.push('\n');
    }
    text
}

/// The index pairs of a longest common subsequence of `a` and `b`.
fn common(a: &[&str], b: &[&str]) -> Vec<(usize, usize)> {
    let (n, m) = (a.len(), b.len());
    let mut len = vec![0u16; (n + 1) * (m + 1)];
    let at = |i: usize, j: usize| i * (m + 1) + j;
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            len[at(i, j)] = if a[i] == b[j] {
                len[at(i + 1, j + 1)] + 1
            } else {
                len[at(i + 1, j)].max(len[at(i, j + 1)])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < n && j < m {
        if a[i] == b[j] {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if len[at(i + 1, j)] >= len[at(i, j + 1)] {
            i += 1;
        } else {
            j += 1;
        }
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_with_credentials_are_secrets() {
        for s in [
            "http://user:pw@127.0.0.1:9/v1",
            "https://ghp_TOKENONLY@host/v1",
            "https://user:pa/ssWORD@host/v1",
            "https://host/v1?key=abc",
            "nats://u:pw@n1:4222",
        ] {
            assert!(url_with_credentials(s), "{s}");
        }
        for s in [
            "https://api.example.com/v1",
            "http://127.0.0.1:9/v1?stream=1",
            "plain",
        ] {
            assert!(!url_with_credentials(s), "{s}");
        }
    }
}
