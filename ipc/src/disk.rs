//! The disk budget an agent's worker enforces (issue 23 item 3): how much its file tools may
//! keep in its workspace, how large its transcript store may grow, and the free space left
//! on a filesystem under which tools and new runs refuse. Since: protocol v2 (additive).

use serde::{Deserialize, Serialize};

/// 1 MiB, the unit of the `[disk]` settings.
pub const MIB: u64 = 1024 * 1024;
/// Default cap on a workspace's bytes when a file tool writes (1 GiB).
pub const DEFAULT_WORKSPACE_MAX_BYTES: u64 = 1024 * MIB;
/// Default cap on an agent's transcript store (`agent.sqlite` and its WAL, 1 GiB).
pub const DEFAULT_TRANSCRIPT_MAX_BYTES: u64 = 1024 * MIB;
/// Default free-space floor (256 MiB): the room kept for the gateway database and the
/// other agents when one agent writes until it is refused.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 256 * MIB;

/// One agent's disk budget as its worker applies it. `0` turns a cap off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskPolicy {
    /// Most bytes the workspace may hold after a `write` or `edit`.
    pub workspace_max_bytes: u64,
    /// Past this size of the agent's database (and WAL), new runs end `error`.
    pub transcript_max_bytes: u64,
    /// A file tool refuses to grow a file when that would leave less free space than this
    /// on the filesystem it writes to (runs go on: the floor is their room).
    pub min_free_bytes: u64,
}

impl Default for DiskPolicy {
    fn default() -> Self {
        DiskPolicy {
            workspace_max_bytes: DEFAULT_WORKSPACE_MAX_BYTES,
            transcript_max_bytes: DEFAULT_TRANSCRIPT_MAX_BYTES,
            min_free_bytes: DEFAULT_MIN_FREE_BYTES,
        }
    }
}

/// `bytes` for a person: `1.5 MiB`, `12 KiB`, `800 B`.
pub fn human(bytes: u64) -> String {
    const KIB: u64 = 1024;
    match bytes {
        b if b >= MIB * 1024 => format!("{:.1} GiB", b as f64 / (MIB * 1024) as f64),
        b if b >= MIB => format!("{:.1} MiB", b as f64 / MIB as f64),
        b if b >= KIB => format!("{} KiB", b / KIB),
        b => format!("{b} B"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(human(800), "800 B");
        assert_eq!(human(12 * 1024), "12 KiB");
        assert_eq!(human(3 * MIB / 2), "1.5 MiB");
        assert_eq!(human(DEFAULT_WORKSPACE_MAX_BYTES), "1.0 GiB");
    }
}
