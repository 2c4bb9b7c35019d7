//! `config.patch` and `config.apply`, carried out by the serve loop (one write or reload at
//! a time): the file is checked against the client's `baseHash`, edited as a TOML document
//! (`config_edit`), validated whole with the gateway's own overrides, written atomically
//! and then applied through the reload path, so the change is in effect when the answer is
//! sent. Every refusal leaves the file and its hash as they were; so does a reload that
//! fails after the write (the old bytes are put back).

use std::path::Path;
use std::sync::Arc;

use ipc::gateway::{
    ConfigChanged, ConfigIssue, ConfigIssues, ConfigSentinel, ConfigWriteResult, ErrorShape,
    SentinelPayload, SentinelStats,
};

use super::listener::WsListener;
use super::reload::{reload, ConfigSource};
use crate::config::{Config, ConfigError, RawConfig};
use crate::config_edit::{self as edit, EditError};
use crate::events::{now_ms, Deferred};
use crate::gateway::{ConfigWrite, Gateway};
use toml_edit::DocumentMut;

/// What is asked of the file.
struct Plan {
    kind: &'static str,
    mode: &'static str,
    note: Option<String>,
}

/// The file as it was before a write.
struct Before {
    bytes: Vec<u8>,
    text: String,
    hash: String,
    doc: DocumentMut,
}

/// Carries out one config write; the answer, or why nothing changed.
pub(super) async fn write(
    gw: &Arc<Gateway>,
    source: &ConfigSource,
    ws: &mut WsListener,
    w: ConfigWrite,
) -> Result<ConfigWriteResult, ErrorShape> {
    let path = source.path.clone();
    let bytes = match tokio::fs::read(&path).await {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(unavailable(format!("cannot read {}: {e}", path.display()))),
    };
    let text = String::from_utf8(bytes.clone())
        .map_err(|_| ErrorShape::invalid("invalid config: the file is not UTF-8"))?;
    let before = Before {
        hash: edit::content_hash(&bytes),
        doc: edit::document(&text).map_err(refused)?,
        bytes,
        text,
    };
    let (plan, new) = edited(&before, w)?;
    let new_text = new.to_string();
    let candidate = validate(&new_text, source)?;
    let changed = edit::changed_paths(&edit::as_json(&before.doc), &edit::as_json(&new));
    let (_, shown) = edit::redacted(&new);
    let patching = plan.mode == "config.patch";
    // A patch that changes no value changes nothing; a whole text changes what it changes
    // (its comments are the operator's too).
    if (patching && changed.is_empty()) || new_text == before.text {
        return Ok(ConfigWriteResult {
            ok: true,
            path: path.display().to_string(),
            hash: (!patching).then_some(before.hash),
            config: shown,
            changed_paths: patching.then(Vec::new),
            noop: patching.then_some(true),
            sentinel: None,
        });
    }
    if let Some(why) = (!patching)
        .then(|| edit::destructive(&edit::as_json(&before.doc), &edit::as_json(&new)))
        .flatten()
    {
        return Err(unavailable(format!(
            "Config write rejected: {} ({why}); nothing was written (remove settings with config.patch and null)",
            path.display()
        )));
    }
    // A new listener address is taken as the write is applied (the reload moves the
    // listener; one that cannot be bound refuses the write, the old bytes put back).
    let running = gw.config();
    // What the running gateway cannot take live: the disk reserve, cluster settings and
    // whether the scheduler runs (a listener change is applied live).
    let requires_restart = candidate.disk_reserve_bytes != running.disk_reserve_bytes
        || candidate.cluster != running.cluster
        || candidate.cron.enabled != running.cron.enabled
        || candidate.gateway.max_connections != running.gateway.max_connections;
    let new_hash = commit(gw, source, ws, &before, &new_text).await?;
    tracing::info!(
        mode = plan.mode,
        changed = changed.join(", ").as_str(),
        note = plan.note.as_deref().unwrap_or(""),
        requires_restart,
        "The config was written over the Gateway."
    );
    Ok(ConfigWriteResult {
        ok: true,
        path: path.display().to_string(),
        hash: Some(new_hash),
        config: shown,
        changed_paths: patching.then_some(changed),
        noop: None,
        sentinel: Some(ConfigSentinel {
            persisted: true,
            payload: SentinelPayload {
                kind: plan.kind.into(),
                status: "ok".into(),
                ts: now_ms(),
                message: plan.note,
                stats: SentinelStats {
                    mode: plan.mode.into(),
                    root: path.display().to_string(),
                    requires_restart,
                },
            },
        }),
    })
}

/// The document a write asks for, checked against the client's `baseHash`, secrets sent
/// back as the placeholder restored.
fn edited(before: &Before, w: ConfigWrite) -> Result<(Plan, DocumentMut), ErrorShape> {
    match w {
        ConfigWrite::Patch(p) => {
            let plan = Plan {
                kind: "config-patch",
                mode: "config.patch",
                note: p.note,
            };
            // A given hash is checked before anything is parsed; without one the patch is
            // merged first so the refusal can name what it would change.
            if let Some(base) = &p.base_hash {
                check_base(base, &before.hash)?;
            }
            let mut patch = edit::parse_patch(&p.raw).map_err(refused)?;
            edit::from_openclaw(&mut patch);
            let mut new = before.doc.clone();
            edit::merge(&mut new, &patch).map_err(refused)?;
            edit::restore_secrets(&mut new, &before.doc).map_err(refused)?;
            if p.base_hash.is_none() {
                let paths = edit::changed_paths(&edit::as_json(&before.doc), &edit::as_json(&new));
                return Err(ErrorShape::invalid(format!(
                    "config base hash required for {}; re-run config.get and retry with baseHash",
                    paths.join(", ")
                )));
            }
            Ok((plan, new))
        }
        ConfigWrite::Merge { patch, note } => {
            let plan = Plan {
                kind: "config-patch",
                mode: "config.patch",
                note: Some(note),
            };
            let mut new = before.doc.clone();
            edit::merge(&mut new, &patch).map_err(refused)?;
            Ok((plan, new))
        }
        ConfigWrite::Set(p) => {
            let plan = Plan {
                kind: "config-set",
                mode: "config.set",
                note: None,
            };
            required_base(p.base_hash.as_deref(), before)?;
            // The file's text (the raw view), or the whole config as one object (the form
            // view): that object replaces the file's values, the untouched ones keeping
            // their comments and place.
            let mut new = match whole_text(&p.raw, before) {
                Ok(doc) => doc,
                Err(toml) => match edit::parse_patch(&p.raw) {
                    Ok(mut whole) => {
                        edit::from_openclaw(&mut whole);
                        let patch = edit::replacing(&edit::as_json(&before.doc), whole);
                        let mut new = before.doc.clone();
                        edit::merge(&mut new, &patch).map_err(refused)?;
                        new
                    }
                    Err(_) => return Err(refused(toml)),
                },
            };
            edit::restore_secrets(&mut new, &before.doc).map_err(refused)?;
            Ok((plan, new))
        }
        ConfigWrite::Apply(p) => {
            let plan = Plan {
                kind: "config-apply",
                mode: "config.apply",
                note: p.note,
            };
            required_base(p.base_hash.as_deref(), before)?;
            let mut new = whole_text(&p.raw, before).map_err(refused)?;
            edit::restore_secrets(&mut new, &before.doc).map_err(refused)?;
            Ok((plan, new))
        }
    }
}

/// A whole-file write (`config.apply`, `config.set`) names the hash it was made from.
fn required_base(base: Option<&str>, before: &Before) -> Result<(), ErrorShape> {
    let Some(base) = base else {
        return Err(ErrorShape::invalid(
            "config base hash required; re-run config.get and retry",
        ));
    };
    check_base(base, &before.hash)
}

/// A whole file's TOML text as sent back, the lines left as `config.get` showed them taking
/// the file's text again (secret values come back by place afterwards).
fn whole_text(raw: &str, before: &Before) -> Result<DocumentMut, EditError> {
    let raw = edit::restore_lines(raw, &edit::redacted(&before.doc).0, &before.text);
    edit::document(&raw)
}

/// Writes the new text and applies it through the reload path (the old bytes go back if
/// the reload refuses it), then tells `config.changed`; the new hash.
async fn commit(
    gw: &Arc<Gateway>,
    source: &ConfigSource,
    ws: &mut WsListener,
    before: &Before,
    new_text: &str,
) -> Result<String, ErrorShape> {
    write_atomically(&source.path, new_text.as_bytes()).await?;
    let reloaded = reload(gw, source, ws).await;
    if !reloaded.ok {
        // Nothing of it may stay: the old bytes go back, the running config never changed.
        write_atomically(&source.path, &before.bytes).await?;
        return Err(ErrorShape::invalid(reloaded.error.unwrap_or_default()));
    }
    let hash = edit::content_hash(new_text.as_bytes());
    let changed = ConfigChanged {
        path: source.path.display().to_string(),
        hash: hash.clone(),
        ts: now_ms(),
    };
    gw.hub.publish_deferred(
        &Deferred::event(ipc::gateway::events::CONFIG_CHANGED, &changed)
            .for_scope(ipc::gateway::Scope::Read),
    );
    Ok(hash)
}

fn check_base(base: &str, hash: &str) -> Result<(), ErrorShape> {
    if base == hash {
        return Ok(());
    }
    Err(ErrorShape::invalid(
        "config changed since last load; re-run config.get and retry",
    ))
}

/// The new text as the gateway would load it (its overrides, every section checked).
fn validate(text: &str, source: &ConfigSource) -> Result<Config, ErrorShape> {
    let raw = toml::from_str::<RawConfig>(text).map_err(|e| {
        let message = e.message().to_owned();
        let path = e
            .span()
            .and_then(|s| key_at(text, s.start))
            .unwrap_or_default();
        issue(path, message)
    })?;
    let config = Config::from_raw(raw, &source.path, &source.state_dir, &source.overrides)
        .map_err(|e| {
            let key = e.key().unwrap_or_default().to_owned();
            issue(key, problem_of(&e))
        })?;
    // The places it names are checked as a load checks them (only the operator may write
    // what the gateway will run or read).
    let trusted = crate::ownership::agent_paths(&config.agents);
    crate::ownership::check_inside(&source.state_dir, &trusted, crate::ownership::euid())
        .map_err(|e| issue(String::new(), format!("refused: {e}")))?;
    Ok(config)
}

fn problem_of(e: &ConfigError) -> String {
    match &e.problem {
        crate::config::ConfigProblem::Invalid(i) => i.problem.clone(),
        other => other.to_string(),
    }
}

/// The dotted key written on the line that holds byte `at` (for a parser's refusal): the
/// table header above it and the line's own key.
fn key_at(text: &str, at: usize) -> Option<String> {
    let before = text.get(..at)?;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let line = text.get(line_start..)?.lines().next().unwrap_or("");
    let header = text.get(..line_start)?.lines().rev().find_map(|l| {
        let t = l.trim();
        t.starts_with('[')
            .then(|| t.trim_matches(|c| c == '[' || c == ']').trim().to_owned())
    });
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().to_owned())
        .filter(|k| !k.is_empty() && !k.starts_with('['));
    match (header, key) {
        (Some(h), Some(k)) => Some(format!("{h}.{k}")),
        (h, k) => h.or(k),
    }
}

/// `invalid config: <path>: <message>`, with the issue in `details`.
fn issue(path: String, message: String) -> ErrorShape {
    let text = if path.is_empty() {
        format!("invalid config: {message}")
    } else {
        format!("invalid config: {path}: {message}")
    };
    let details = ConfigIssues {
        issues: vec![ConfigIssue { path, message }],
    };
    let shape = ErrorShape::invalid(text);
    match serde_json::to_value(&details) {
        Ok(v) => shape.with_details(v),
        Err(_) => shape,
    }
}

fn refused(e: EditError) -> ErrorShape {
    ErrorShape::invalid(e.to_string())
}

fn unavailable(message: String) -> ErrorShape {
    ErrorShape::unavailable(message, None)
}

/// Writes `bytes` over `path` at once or not at all: a file beside it, synced, renamed over
/// it. The old file's mode, owner and group are kept (a new file is the operator's only);
/// a symlinked config file is written where the link points, and stays a link.
async fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), ErrorShape> {
    let (path, bytes) = (path.to_owned(), bytes.to_vec());
    let done = tokio::task::spawn_blocking(move || replace_file(&path, &bytes)).await;
    match done {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(unavailable(format!("cannot write the config: {e}"))),
        Err(e) => Err(unavailable(format!("cannot write the config: {e}"))),
    }
}

fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    let old = std::fs::metadata(&path).ok();
    let mode = old
        .as_ref()
        .map_or(0o600, |m| m.permissions().mode() & 0o7777);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "loopgate.toml".into());
    // A name of its own: a file left by a crash never blocks the next write.
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let written = (|| {
        if let Some(m) = &old {
            // As the operator's file had it (the process umask does not apply here); a
            // group the gateway's user may not give stays the user's own.
            let _ = std::os::unix::fs::fchown(&f, Some(m.uid()), Some(m.gid()));
        }
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    if let Some(dir) = path.parent() {
        std::fs::File::open(dir).and_then(|d| d.sync_all())?;
    }
    Ok(())
}
