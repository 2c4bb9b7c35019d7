//! `usage.cost` and `sessions.usage`: the gateway db's usage rollups, read for the asked days
//! and scope and folded by [`crate::usage`]. Scopes and refusals as OpenClaw 2026.9.6's
//! (`openclaw-observed/operator-surface-2026.9.6.md` section 10).

use ipc::gateway::{
    CreatorOption, DaysParam, ErrorShape, SessionsUsageParams, SessionsUsageResult,
    UsageCacheStatus, UsageCostParams, UsageCostResult,
};

use super::Answer;
use crate::config::Config;
use crate::events::now_ms;
use crate::gatewaydb::usage::{DayRow, SessionsUsageQuery, UsageQuery};
use crate::gatewaydb::{DbError, GatewayDb};
use crate::usage::{self, DateParams};

/// The most sessions `sessions.usage` lists (the Control UI asks for 1000).
const MAX_SESSIONS: u32 = 1000;
/// Sessions listed when the request names no `limit` (OpenClaw's default).
const DEFAULT_SESSIONS: u32 = 50;
/// The most session-days `sessions.usage` lists (each is a few hundred bytes of the answer:
/// this keeps it well under the 25 MiB frame limit; `sessionCount` and the sums cover all).
const MAX_SESSION_DAYS: usize = 20_000;
/// The agent a request that names none is about.
const DEFAULT_AGENT: &str = "main";

fn db_error(e: DbError) -> ErrorShape {
    ErrorShape::unavailable(format!("cannot read usage: {e}"), Some(500))
}

/// `agentScope: "all"` with an `agentId`: OpenClaw's refusal.
fn scope_conflict(message: &str) -> ErrorShape {
    ErrorShape::invalid(message)
}

/// `usage.cost`: daily rows and totals of one agent (default `main`) or of all.
pub(super) async fn usage_cost(
    db: &GatewayDb,
    config: &Config,
    p: UsageCostParams,
) -> Answer<UsageCostResult> {
    let now = now_ms();
    let days = usage::resolve_days(
        &DateParams {
            start_date: p.start_date.as_deref(),
            end_date: p.end_date.as_deref(),
            days: p.days.as_ref().and_then(|d| match d {
                DaysParam::Number(n) => Some(*n),
                DaysParam::Text(t) => t.trim().parse().ok(),
            }),
            range: None,
            mode: p.mode.as_deref(),
            utc_offset: p.utc_offset.as_deref(),
            time_zone: p.time_zone.as_deref(),
        },
        usage::today(now),
    )
    .map_err(|e| ErrorShape::invalid(e.to_string()))?;
    let agent_id = p.agent_id.filter(|a| !a.trim().is_empty());
    let all = p.agent_scope.as_deref() == Some("all");
    if all && agent_id.is_some() {
        return Err(scope_conflict(
            "agentScope=all cannot be combined with agentId",
        ));
    }
    let agent = if all {
        None
    } else {
        Some(agent_id.unwrap_or_else(|| DEFAULT_AGENT.to_owned()))
    };
    let rows = db
        .usage_days(UsageQuery {
            first_day: days.first,
            last_day: days.last,
            agent_id: agent,
        })
        .await
        .map_err(db_error)?;
    let (daily, totals) = usage::cost(days, &rows, &config.prices);
    Ok(UsageCostResult {
        updated_at: now,
        days: daily.len() as u64,
        daily,
        totals,
        cache_status: UsageCacheStatus::fresh(now),
    })
}

/// The agent a `sessions.usage` key belongs to: `agent:<id>:<rest>`, else OpenClaw's refusal.
fn key_agent(key: &str) -> Answer<String> {
    key.strip_prefix("agent:")
        .and_then(|rest| rest.split_once(':'))
        .filter(|(agent, tail)| !agent.is_empty() && !tail.is_empty())
        .map(|(agent, _)| agent.to_owned())
        .ok_or_else(|| ErrorShape::invalid(format!("Invalid session reference: {key}")))
}

/// `sessions.usage`: the sessions of one agent (default `main`), of all, or one session by
/// key, with their usage in the asked days, and the sums over the whole scope.
pub(super) async fn sessions_usage(
    db: &GatewayDb,
    config: &Config,
    p: SessionsUsageParams,
) -> Answer<SessionsUsageResult> {
    let now = now_ms();
    let mode = p.mode.map(|m| match m {
        ipc::gateway::DateMode::Utc => "utc",
        ipc::gateway::DateMode::Gateway => "gateway",
        ipc::gateway::DateMode::Specific => "specific",
    });
    let days = usage::resolve_days(
        &DateParams {
            start_date: p.start_date.as_deref(),
            end_date: p.end_date.as_deref(),
            days: None,
            range: p.range,
            mode,
            utc_offset: p.utc_offset.as_deref(),
            time_zone: p.time_zone.as_deref(),
        },
        usage::today(now),
    )
    .map_err(|e| ErrorShape::invalid(e.to_string()))?;
    let all = p.agent_scope.is_some();
    if all && (p.agent_id.is_some() || p.key.is_some()) {
        return Err(scope_conflict(
            "agentScope=all cannot be combined with key or agentId",
        ));
    }
    let key = p.key.filter(|k| !k.trim().is_empty());
    let agent = match &key {
        Some(k) => Some(key_agent(k)?),
        None if all => None,
        None => Some(p.agent_id.unwrap_or_else(|| DEFAULT_AGENT.to_owned())),
    };
    let range = UsageQuery {
        first_day: days.first,
        last_day: days.last,
        agent_id: agent,
    };
    // Only the unknown creator exists: a filter for any other matches nothing.
    let other_creator = p
        .creator_key
        .as_deref()
        .is_some_and(|c| c != usage::UNKNOWN_CREATOR);
    let found = if other_creator {
        Default::default()
    } else {
        db.usage_sessions(SessionsUsageQuery {
            range: range.clone(),
            key: key.clone(),
            limit: p.limit.unwrap_or(DEFAULT_SESSIONS).clamp(1, MAX_SESSIONS),
            max_day_rows: MAX_SESSION_DAYS,
        })
        .await
        .map_err(db_error)?
    };
    // The sums: one session's own rows, else the scope's day rows (every session, not only
    // the listed ones).
    let rows: Vec<DayRow> = if key.is_some() || other_creator {
        found
            .sessions
            .iter()
            .flat_map(|s| {
                s.days.iter().map(|d| DayRow {
                    day: d.day,
                    agent_id: s.agent_id.clone(),
                    provider: d.provider.clone(),
                    model: d.model.clone(),
                    counts: d.counts,
                })
            })
            .collect()
    } else {
        db.usage_days(range).await.map_err(db_error)?
    };
    let (totals, aggregates) = usage::aggregates(&rows, found.count, &config.prices);
    Ok(SessionsUsageResult {
        updated_at: now,
        start_date: usage::date(days.first),
        end_date: usage::date(days.last),
        sessions: found
            .sessions
            .iter()
            .map(|s| usage::session_entry(s, &config.prices))
            .collect(),
        totals,
        aggregates,
        creator_options: vec![CreatorOption {
            key: usage::UNKNOWN_CREATOR.into(),
        }],
        cache_status: UsageCacheStatus::fresh(now),
    })
}
