//! The agent's disk budget as the file tools and run start apply it (issue 23 item 3): a
//! write may not take the workspace past its cap, nor leave less than the free-space floor
//! on the filesystem it lands on; shrinking a file is always allowed, so the model can make
//! room. The workspace's size is measured by a walk and then kept by each write's delta; it
//! is measured again when older than [`REMEASURE`], so what `exec` wrote is counted too.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ipc::disk::{human, DiskPolicy};

/// How long a measured workspace size is trusted (plus the writes counted since).
const REMEASURE: Duration = Duration::from_secs(30);
/// Most directory entries one measurement visits; a workspace with more counts as full
/// (its size cannot be known cheaply, so nothing more is written by the file tools).
const MAX_ENTRIES: usize = 200_000;

/// One worker's budget (its agent's workspace), shared by every run.
#[derive(Debug)]
pub struct DiskBudget {
    policy: DiskPolicy,
    workspace: PathBuf,
    measured: Mutex<Option<(u64, Instant)>>,
}

/// Room a write took before it happened; given back if it fails.
#[must_use]
pub struct Taken<'a> {
    budget: &'a DiskBudget,
    delta: i128,
}

impl Taken<'_> {
    /// The write failed: the workspace did not change.
    pub fn give_back(self) {
        self.budget.adjust(-self.delta);
    }
}

impl DiskBudget {
    pub fn new(policy: DiskPolicy, workspace: impl Into<PathBuf>) -> Self {
        DiskBudget {
            policy,
            workspace: workspace.into(),
            measured: Mutex::new(None),
        }
    }

    /// Takes room for replacing a file of `old` bytes by `new` bytes at `path` (`shown`
    /// is the path the model wrote), or says why not: the text is the tool's error result.
    pub fn take(&self, path: &Path, shown: &str, old: u64, new: u64) -> Result<Taken<'_>, String> {
        let delta = i128::from(new) - i128::from(old);
        if delta <= 0 {
            self.adjust(delta);
            return Ok(Taken {
                budget: self,
                delta,
            });
        }
        let growth = delta.unsigned_abs() as u64;
        if self.policy.min_free_bytes > 0 {
            let at = path.parent().unwrap_or(&self.workspace);
            if let Some(free) = free_bytes(at) {
                if free < growth.saturating_add(self.policy.min_free_bytes) {
                    return Err(format!(
                        "cannot write {shown} ({}): the disk holding the workspace has {} free and the gateway keeps {} free (disk.min_free_mb); delete files or ask the operator for room",
                        human(new),
                        human(free),
                        human(self.policy.min_free_bytes)
                    ));
                }
            }
        }
        let mut measured = self.lock();
        let size = match *measured {
            Some((size, at)) if at.elapsed() < REMEASURE => size,
            _ => {
                let size = workspace_bytes(&self.workspace);
                *measured = Some((size, Instant::now()));
                size
            }
        };
        let max = self.policy.workspace_max_bytes;
        let after = size.saturating_add(growth);
        if max > 0 && after > max {
            return Err(format!(
                "cannot write {shown} ({}): the workspace would hold {}, over this agent's {} budget (disk.workspace_max_mb); delete or shorten files first",
                human(new),
                human(after),
                human(max)
            ));
        }
        if let Some((size, _)) = measured.as_mut() {
            *size = after;
        }
        Ok(Taken {
            budget: self,
            delta,
        })
    }

    /// Whether the disk holding the workspace has room for `bytes` more (several files
    /// written as one, staged before any is replaced) above the free-space floor; the text
    /// is the tool's error result.
    pub fn has_room(&self, bytes: u64, what: &str) -> Result<(), String> {
        if self.policy.min_free_bytes == 0 || bytes == 0 {
            return Ok(());
        }
        let Some(free) = free_bytes(&self.workspace) else {
            return Ok(());
        };
        if free < bytes.saturating_add(self.policy.min_free_bytes) {
            return Err(format!(
                "cannot write {what} ({}): the disk holding the workspace has {} free and the gateway keeps {} free (disk.min_free_mb); delete files or ask the operator for room",
                human(bytes),
                human(free),
                human(self.policy.min_free_bytes)
            ));
        }
        Ok(())
    }

    /// Why a new run may not start: the agent's transcript store (`db_bytes`, the database
    /// and its WAL) is over its cap. The free-space floor does not stop runs: it is the room
    /// the other agents' transcripts and the gateway database keep using once the file
    /// tools refuse.
    pub fn run_refusal(&self, db_bytes: u64) -> Option<String> {
        let max = self.policy.transcript_max_bytes;
        (max > 0 && db_bytes > max).then(|| {
            format!(
                "the agent's transcript store holds {}, over its {} cap (disk.transcript_max_mb): delete or reset sessions, or raise the cap",
                human(db_bytes),
                human(max)
            )
        })
    }

    fn adjust(&self, delta: i128) {
        if let Some((size, _)) = self.lock().as_mut() {
            *size = (i128::from(*size) + delta).clamp(0, i128::from(u64::MAX)) as u64;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<(u64, Instant)>> {
        // A panic elsewhere with the lock held leaves a size that is still a fair estimate.
        self.measured.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Bytes available to this unprivileged process on the filesystem holding `path`.
pub fn free_bytes(path: &Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(path).ok()?;
    Some((st.blocks_available() as u64).saturating_mul(st.fragment_size() as u64))
}

/// The bytes of the regular files under `root`, symlinks not followed; `u64::MAX` past
/// [`MAX_ENTRIES`].
pub fn workspace_bytes(root: &Path) -> u64 {
    let mut total = 0u64;
    let mut seen = 0usize;
    let mut dirs = vec![root.to_owned()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            seen += 1;
            if seen > MAX_ENTRIES {
                return u64::MAX;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                dirs.push(entry.path());
            } else if meta.is_file() {
                total = total.saturating_add(meta.len());
            }
        }
    }
    total
}

/// Longest string a transcript keeps of one tool-call argument.
pub const ARG_KEEP_BYTES: usize = 8 * 1024;

/// A tool call's arguments as the transcript keeps them: every string value longer than
/// [`ARG_KEEP_BYTES`] is cut there and marked with its full length, so a `write` of 8 MiB
/// is stored once (in the file), not twice (issue 23 item 3).
pub fn bound_strings(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::String(s) if s.len() > ARG_KEEP_BYTES => *s = cut(s),
        serde_json::Value::Array(items) => items.iter_mut().for_each(bound_strings),
        serde_json::Value::Object(map) => map.values_mut().for_each(bound_strings),
        _ => {}
    }
}

fn cut(s: &str) -> String {
    let mut end = ARG_KEEP_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[... loopgate kept {} of {} in the transcript]",
        &s[..end],
        human(end as u64),
        human(s.len() as u64)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ipc::disk::MIB;

    fn budget(dir: &Path, max: u64, floor: u64) -> DiskBudget {
        DiskBudget::new(
            DiskPolicy {
                workspace_max_bytes: max,
                transcript_max_bytes: 0,
                min_free_bytes: floor,
            },
            dir,
        )
    }

    #[test]
    fn the_workspace_cap_counts_what_is_there_and_what_is_written() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/old"), vec![0u8; 600]).unwrap();
        let b = budget(dir.path(), 1000, 0);
        let p = dir.path().join("f");
        let _ = b.take(&p, "f", 0, 300).unwrap();
        let err = b.take(&p, "f", 300, 500).err().unwrap();
        assert!(err.contains("disk.workspace_max_mb"), "{err}");
        // Shrinking always works, and gives the room back.
        let _ = b
            .take(&dir.path().join("sub/old"), "sub/old", 600, 0)
            .unwrap();
        let _ = b.take(&p, "f", 300, 900).unwrap();
        // A failed write gives its room back.
        b.take(&p, "f", 900, 1000).unwrap().give_back();
        let _ = b.take(&p, "g", 0, 100).unwrap();
        // Off: no cap.
        let _ = budget(dir.path(), 0, 0)
            .take(&p, "f", 0, u64::MAX / 2)
            .unwrap();
    }

    #[test]
    fn the_free_space_floor_refuses_growth_but_not_shrinking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let b = budget(dir.path(), 0, u64::MAX / 4);
        let err = b.take(&p, "f", 0, 1).err().unwrap();
        assert!(err.contains("disk.min_free_mb"), "{err}");
        let _ = b.take(&p, "f", 10, 1).unwrap();
        assert!(free_bytes(dir.path()).is_some_and(|f| f > 0));
    }

    /// Several files written as one (`apply_patch`) are held to the floor together: each
    /// fits alone, all of them do not.
    #[test]
    fn files_written_as_one_are_held_to_the_floor_together() {
        let dir = tempfile::tempdir().unwrap();
        let free = free_bytes(dir.path()).unwrap();
        let b = budget(dir.path(), 0, free / 2);
        assert!(b.has_room(free / 8, "one").is_ok());
        let err = b.has_room(free, "the patch's files").unwrap_err();
        assert!(err.contains("disk.min_free_mb"), "{err}");
        assert!(budget(dir.path(), 0, 0).has_room(u64::MAX, "off").is_ok());
    }

    #[test]
    fn a_run_is_refused_past_the_transcript_cap() {
        let dir = tempfile::tempdir().unwrap();
        let b = DiskBudget::new(
            DiskPolicy {
                workspace_max_bytes: 0,
                transcript_max_bytes: MIB,
                min_free_bytes: u64::MAX / 4,
            },
            dir.path(),
        );
        assert_eq!(b.run_refusal(MIB), None, "the floor does not stop runs");
        let why = b.run_refusal(MIB + 1).unwrap();
        assert!(why.contains("disk.transcript_max_mb"), "{why}");
    }

    #[test]
    fn long_tool_arguments_are_kept_bounded_in_the_transcript() {
        let mut small = serde_json::json!({"path": "a", "content": "short"});
        let before = small.clone();
        bound_strings(&mut small);
        assert_eq!(small, before);
        let mut big = serde_json::json!({"path": "a", "content": "é".repeat(MIB as usize),
            "edits": [{"newText": "x".repeat(3 * ARG_KEEP_BYTES)}]});
        bound_strings(&mut big);
        assert!(
            big.to_string().len() < 3 * ARG_KEEP_BYTES,
            "{}",
            big.to_string().len()
        );
        assert_eq!(big["path"], "a");
        let content = big["content"].as_str().unwrap();
        assert!(
            content.ends_with("of 2.0 MiB in the transcript]"),
            "{content}"
        );
        assert!(big["edits"][0]["newText"]
            .as_str()
            .unwrap()
            .ends_with("in the transcript]"));
    }
}
