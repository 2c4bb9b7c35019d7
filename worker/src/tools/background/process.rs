//! The `process` tool: follow-up of background sessions (`list`, `poll`, `log`, `write`,
//! `submit`, `send-keys`, `paste`, `kill`, `clear`, `remove`), with OpenClaw's texts.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::{Registry, Session};
use crate::tools::{ToolOutcome, MAX_RESULT_CHARS};

/// Longest a `poll` waits for output (OpenClaw's 30 s).
const MAX_POLL_WAIT: Duration = Duration::from_secs(30);
/// Most output bytes one `poll` returns (the rest comes with the next).
const POLL_BYTES: usize = MAX_RESULT_CHARS - 1_000;

/// `5s`, `858ms`, `3m12s`.
fn runtime(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms}ms"),
        1_000..=59_999 => format!("{}s", ms / 1000),
        _ => format!("{}m{}s", ms / 60_000, ms / 1000 % 60),
    }
}

fn ran_for(s: &Session) -> u64 {
    let end = s.end().map_or_else(crate::now_ms, |e| e.ended_ms);
    end.saturating_sub(s.started_ms)
}

/// How a session's end reads after its output.
fn ending(s: &Session) -> String {
    match s.end() {
        None => "Process still running.".into(),
        Some(e) => match e.reason.as_str() {
            "exit" => format!("Process exited with code {}.", e.code.unwrap_or(0)),
            "manual-cancel" => "Process stopped by request (signal SIGTERM).".into(),
            "timeout" => "Process reached its lifetime and was stopped (signal SIGTERM).".into(),
            "worker-restart" => {
                "Process was stopped when the agent's worker restarted; its output is gone.".into()
            }
            _ => format!(
                "Process exited with signal {}.",
                e.signal.as_deref().unwrap_or("unknown")
            ),
        },
    }
}

fn not_found(id: &str) -> ToolOutcome {
    ToolOutcome::err(format!("No session found for {id}"))
}

/// Runs one `process` call.
pub async fn process(registry: &Arc<Registry>, args: &Value) -> ToolOutcome {
    let action = args.get("action").and_then(Value::as_str).unwrap_or("");
    if action == "list" {
        return list(registry);
    }
    let Some(id) = args.get("sessionId").and_then(Value::as_str) else {
        return ToolOutcome::err(format!("sessionId is required for {action}"));
    };
    let Some(s) = registry.get(id) else {
        return not_found(id);
    };
    match action {
        "poll" => poll(&s, args).await,
        "log" => log(&s, args),
        "write" | "submit" | "paste" | "send-keys" => write(&s, action, args).await,
        "kill" => {
            if s.end().is_some() {
                return ToolOutcome::err(format!("No active session found for {id}"));
            }
            if !s.stop().await {
                return ToolOutcome::err(format!(
                    "Termination requested for session {id}, but it has not ended yet."
                ));
            }
            ToolOutcome::ok(format!("Termination requested for session {id}."))
        }
        "clear" => {
            if s.end().is_none() {
                return ToolOutcome::err(format!(
                    "Session {id} is still running; kill it first or use remove."
                ));
            }
            registry.forget(id);
            ToolOutcome::ok(format!("Cleared session {id}."))
        }
        "remove" => {
            // A session is forgotten only once its end is recorded: it still counts until
            // then.
            if !s.stop().await {
                return ToolOutcome::err(format!(
                    "Session {id} could not be stopped yet; it is kept (try kill, then remove)."
                ));
            }
            registry.forget(id);
            ToolOutcome::ok(format!("Removed session {id}."))
        }
        other => ToolOutcome::err(format!("Unknown action {other:?}")),
    }
}

/// `poll`: what came since the last poll (waiting up to `timeout` ms for some), then how
/// the session stands.
async fn poll(s: &Session, args: &Value) -> ToolOutcome {
    let wait = args
        .get("timeout")
        .and_then(Value::as_u64)
        .map_or(Duration::ZERO, |ms| {
            Duration::from_millis(ms).min(MAX_POLL_WAIT)
        });
    s.wait_for_news(wait).await;
    let (new, lost) = s.take_new(POLL_BYTES);
    let mut text = String::new();
    if lost > 0 {
        text.push_str(&format!("[{lost} bytes of output were not kept]\n"));
    }
    let new = new.trim_end();
    text.push_str(if new.is_empty() && lost == 0 {
        "(no new output)"
    } else {
        new
    });
    text.push_str("\n\n");
    text.push_str(&ending(s));
    ToolOutcome::ok(text)
}

/// `log`: the kept output, by lines (`offset`, `limit`).
fn log(s: &Session, args: &Value) -> ToolOutcome {
    let (log, cut) = s.log();
    let offset = arg_usize(args, "offset").unwrap_or(0);
    let lines: Vec<&str> = log.trim_end().lines().skip(offset).collect();
    let limit = arg_usize(args, "limit").unwrap_or(lines.len());
    let mut text = String::new();
    if cut && offset == 0 {
        text.push_str("[older output was not kept]\n");
    }
    text.push_str(&lines[..limit.min(lines.len())].join("\n"));
    ToolOutcome::ok(text)
}

/// `write`, `submit`, `paste`, `send-keys`: bytes to the command's stdin.
async fn write(s: &Session, action: &str, args: &Value) -> ToolOutcome {
    let id = &s.id;
    if s.end().is_some() {
        return ToolOutcome::err(format!("No active session found for {id}"));
    }
    let bytes = match input(action, args) {
        Ok(b) if b.len() > super::MAX_WRITE => {
            return ToolOutcome::err(format!(
                "At most {} bytes go to a session in one call ({} given)",
                super::MAX_WRITE,
                b.len()
            ))
        }
        Ok(b) => b,
        Err(e) => return ToolOutcome::err(e),
    };
    let eof = args.get("eof").and_then(Value::as_bool).unwrap_or(false);
    match s.write(&bytes, eof).await {
        Ok(()) => ToolOutcome::ok(format!(
            "Wrote {} bytes to session {id}{}.",
            bytes.len(),
            if eof { " and closed its input" } else { "" }
        )),
        Err(e) => ToolOutcome::err(e),
    }
}

fn arg_usize(args: &Value, key: &str) -> Option<usize> {
    args.get(key)
        .and_then(Value::as_u64)
        .map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

fn list(registry: &Registry) -> ToolOutcome {
    let all = registry.list();
    if all.is_empty() {
        return ToolOutcome::ok("No running or recent sessions.");
    }
    let lines: Vec<String> = all
        .iter()
        .map(|s| {
            format!(
                "{} {:<10}{} :: {}",
                s.id,
                s.status(),
                runtime(ran_for(s)),
                s.name
            )
        })
        .collect();
    ToolOutcome::ok(lines.join("\n"))
}

/// The bytes a `write`, `submit`, `paste` or `send-keys` call sends.
fn input(action: &str, args: &Value) -> Result<Vec<u8>, String> {
    let text = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
    Ok(match action {
        "write" => text("data").as_bytes().to_vec(),
        "submit" => format!("{}\n", text("data")).into_bytes(),
        "paste" => {
            let t = if text("text").is_empty() {
                text("data")
            } else {
                text("text")
            };
            if args
                .get("bracketed")
                .and_then(Value::as_bool)
                .unwrap_or(false)
            {
                format!("\x1b[200~{t}\x1b[201~").into_bytes()
            } else {
                t.as_bytes().to_vec()
            }
        }
        _ => keys(args)?,
    })
}

/// `send-keys`: named keys, then hex bytes, then literal text.
fn keys(args: &Value) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for k in args
        .get("keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = k.as_str().unwrap_or("");
        let bytes: &[u8] = match name.to_ascii_lowercase().as_str() {
            "enter" | "return" => b"\n",
            "tab" => b"\t",
            "escape" | "esc" => b"\x1b",
            "space" => b" ",
            "backspace" | "bspace" => b"\x7f",
            "up" => b"\x1b[A",
            "down" => b"\x1b[B",
            "right" => b"\x1b[C",
            "left" => b"\x1b[D",
            c if c.len() == 3 && c.starts_with("c-") && c.as_bytes()[2].is_ascii_lowercase() => {
                out.push(c.as_bytes()[2] - b'a' + 1);
                continue;
            }
            _ => return Err(format!("Unknown key {name:?}")),
        };
        out.extend_from_slice(bytes);
    }
    for h in args
        .get("hex")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let h = h.as_str().unwrap_or("");
        let b = u8::from_str_radix(h.trim_start_matches("0x"), 16)
            .map_err(|_| format!("Invalid hex byte {h:?}"))?;
        out.push(b);
    }
    if let Some(l) = args.get("literal").and_then(Value::as_str) {
        out.extend_from_slice(l.as_bytes());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn inputs_and_runtimes_read_as_openclaw_writes_them() {
        assert_eq!(runtime(858), "858ms");
        assert_eq!(runtime(5_400), "5s");
        assert_eq!(runtime(192_000), "3m12s");
        assert_eq!(input("submit", &json!({"data": "y"})).unwrap(), b"y\n");
        assert_eq!(
            input("paste", &json!({"text": "a", "bracketed": true})).unwrap(),
            b"\x1b[200~a\x1b[201~"
        );
        assert_eq!(
            input(
                "send-keys",
                &json!({"keys": ["C-c", "Enter"], "hex": ["1b"], "literal": "q"})
            )
            .unwrap(),
            b"\x03\n\x1bq"
        );
        assert!(input("send-keys", &json!({"keys": ["Hyper"]})).is_err());
    }
}
