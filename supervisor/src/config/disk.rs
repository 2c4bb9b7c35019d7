//! The disk budget (issue 23 item 3): `[disk]` (the free-space floor and the gateway
//! database's reserve, the same for every agent) and `agents.*.disk` (an agent's workspace
//! and transcript caps), in MiB as written, resolved into `ipc::disk::DiskPolicy`.

use serde::Deserialize;

use ipc::disk::{DiskPolicy, MIB};

use super::invalid::Invalid;

/// Default size of the gateway database's reserve file (16 MiB).
pub const DEFAULT_RESERVE_MB: u64 = 16;
/// Largest value any `_mb` setting takes (1 PiB): past it a typo, not a budget.
const MAX_MB: u64 = 1 << 30;

/// `[disk]`.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawDisk {
    /// Free space a file tool leaves on its filesystem (default 256; 0 = none).
    pub min_free_mb: Option<u64>,
    /// Space held back for the gateway database, released when it is full (default 16;
    /// 0 = none).
    pub reserve_mb: Option<u64>,
}

/// `agents.defaults.disk` / `agents.list.<id>.disk`.
#[derive(Debug, Default, Clone, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RawAgentDisk {
    /// Most a workspace may hold after a `write` or `edit` (default 1024; 0 = no cap).
    pub workspace_max_mb: Option<u64>,
    /// Past this size of the agent's database new runs end `error` (default 1024; 0 = no
    /// cap).
    pub transcript_max_mb: Option<u64>,
}

fn mb(value: Option<u64>, key: &str, default_bytes: u64) -> Result<u64, Invalid> {
    match value {
        None => Ok(default_bytes),
        Some(v) if v <= MAX_MB => Ok(v * MIB),
        Some(_) => Err(Invalid::new(key, format!("at most {MAX_MB} (MiB)"))),
    }
}

/// `[disk] reserve_mb` in bytes.
pub(super) fn resolve_reserve(raw: &RawDisk) -> Result<u64, Invalid> {
    mb(raw.reserve_mb, "disk.reserve_mb", DEFAULT_RESERVE_MB * MIB)
}

/// One agent's budget: its own `disk` over the defaults', over the built-in defaults.
pub(super) fn resolve_agent_disk(
    own: Option<&RawAgentDisk>,
    defaults: Option<&RawAgentDisk>,
    global: &RawDisk,
    key: &str,
) -> Result<DiskPolicy, Invalid> {
    let def = DiskPolicy::default();
    let pick = |f: fn(&RawAgentDisk) -> Option<u64>| own.and_then(f).or(defaults.and_then(f));
    Ok(DiskPolicy {
        workspace_max_bytes: mb(
            pick(|d| d.workspace_max_mb),
            &format!("{key}.disk.workspace_max_mb"),
            def.workspace_max_bytes,
        )?,
        transcript_max_bytes: mb(
            pick(|d| d.transcript_max_mb),
            &format!("{key}.disk.transcript_max_mb"),
            def.transcript_max_bytes,
        )?,
        min_free_bytes: mb(global.min_free_mb, "disk.min_free_mb", def.min_free_bytes)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_agent_inherits_then_overrides_and_a_typo_is_named() {
        let global = RawDisk {
            min_free_mb: Some(0),
            reserve_mb: None,
        };
        let defaults = RawAgentDisk {
            workspace_max_mb: Some(10),
            transcript_max_mb: None,
        };
        let own = RawAgentDisk {
            workspace_max_mb: None,
            transcript_max_mb: Some(0),
        };
        let d = resolve_agent_disk(Some(&own), Some(&defaults), &global, "agents.list.a").unwrap();
        assert_eq!(d.workspace_max_bytes, 10 * MIB);
        assert_eq!(d.transcript_max_bytes, 0);
        assert_eq!(d.min_free_bytes, 0);
        assert_eq!(
            resolve_agent_disk(None, None, &RawDisk::default(), "agents.defaults").unwrap(),
            DiskPolicy::default()
        );
        let typo = RawAgentDisk {
            workspace_max_mb: Some(u64::MAX),
            transcript_max_mb: None,
        };
        let err = resolve_agent_disk(Some(&typo), None, &global, "agents.list.a").unwrap_err();
        assert_eq!(err.key, "agents.list.a.disk.workspace_max_mb", "{err}");
        assert_eq!(resolve_reserve(&RawDisk::default()).unwrap(), 16 * MIB);
    }
}
