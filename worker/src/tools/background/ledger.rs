//! The agent's ledger of running background sessions (`exec-sessions.json` beside its
//! database), rewritten whenever one starts or ends. A worker that starts and finds
//! sessions in it knows a previous worker ended with them running: it stops whatever of
//! theirs is left and reports them as stopped, so none is orphaned unseen.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// One running session as the ledger keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Entry {
    pub id: String,
    pub pid: u32,
    pub command: String,
    pub cwd: String,
    pub started_ms: u64,
    pub owner: String,
}

/// Most sessions read back (the ledger is the worker's own file, but bounded anyway).
const MAX_ENTRIES: usize = 256;

/// The sessions a previous worker left running, each one's reaper stopped if it is still
/// there (a reaper outlives its worker only when it was itself stopped).
pub fn recover(path: &Path) -> Vec<Entry> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let mut entries: Vec<Entry> = match serde_json::from_str(&text) {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "The background session ledger is unreadable; it is started afresh.");
            return Vec::new();
        }
    };
    entries.truncate(MAX_ENTRIES);
    for e in &entries {
        if is_reaper(e.pid) {
            hookcmd::GroupKill(Some(e.pid)).kill();
        }
    }
    entries
}

/// Whether `pid` is a live `exec` reaper (not some process that reused the number).
fn is_reaper(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        c.split(|b| *b == 0)
            .any(|arg| arg == execpolicy::reaper::FLAG.as_bytes())
    })
}

/// Writes `entries` in place of the ledger (a temp file renamed over it).
pub fn save(path: &Path, entries: &[Entry]) {
    let write = || -> std::io::Result<()> {
        if entries.is_empty() {
            return match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            };
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec(entries).unwrap_or_default())?;
        std::fs::rename(&tmp, path)
    };
    if let Err(e) = write() {
        tracing::warn!(path = %path.display(), error = %e, "Cannot write the background session ledger.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ledger_round_trips_and_an_empty_one_is_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("exec-sessions.json");
        let e = Entry {
            id: "nova-cloud".into(),
            pid: u32::MAX,
            command: "sleep 9".into(),
            cwd: "/w".into(),
            started_ms: 1,
            owner: "agent:main:main".into(),
        };
        save(&path, std::slice::from_ref(&e));
        assert_eq!(recover(&path), vec![e]);
        save(&path, &[]);
        assert!(!path.exists());
        std::fs::write(&path, "not json").unwrap();
        assert!(recover(&path).is_empty());
    }
}
