//! `usage.cost` and `sessions.usage`: token usage and its cost, as OpenClaw 2026.9.6 answers
//! them (`openclaw-observed/operator-surface-2026.9.6.md` section 10).

use serde::{Deserialize, Serialize};

/// A number of days, as a number or a numeric string (OpenClaw takes both).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DaysParam {
    Number(f64),
    Text(String),
}

/// How `startDate`/`endDate` are read. loopgate counts UTC days whichever is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DateMode {
    Utc,
    Gateway,
    Specific,
}

/// The only explicit agent scope: every agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AgentScope {
    All,
}

/// `usage.cost` params. Open: unknown params are ignored, as OpenClaw's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageCostParams {
    #[serde(default)]
    pub days: Option<DaysParam>,
    #[serde(default)]
    pub start_date: Option<String>,
    #[serde(default)]
    pub end_date: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    /// `"all"` for every agent; anything else is the default agent, as OpenClaw reads it.
    #[serde(default)]
    pub agent_scope: Option<String>,
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default)]
    pub time_zone: Option<String>,
    #[serde(default)]
    pub utc_offset: Option<String>,
}

/// `sessions.usage` range presets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum UsageRange {
    #[serde(rename = "7d")]
    Week,
    #[serde(rename = "30d")]
    Month,
    #[serde(rename = "90d")]
    Quarter,
    #[serde(rename = "1y")]
    Year,
    #[serde(rename = "all")]
    All,
}

/// `sessions.usage` grouping; loopgate has one instance per session key, so both are the
/// same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UsageGrouping {
    Instance,
    Family,
}

/// `sessions.usage` params. Closed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SessionsUsageParams {
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub agent_scope: Option<AgentScope>,
    #[serde(default)]
    pub creator_key: Option<String>,
    #[serde(default)]
    pub start_date: Option<String>,
    #[serde(default)]
    pub end_date: Option<String>,
    #[serde(default)]
    pub mode: Option<DateMode>,
    #[serde(default)]
    pub range: Option<UsageRange>,
    #[serde(default)]
    pub group_by: Option<UsageGrouping>,
    #[serde(default)]
    pub include_historical: Option<bool>,
    #[serde(default)]
    pub utc_offset: Option<String>,
    #[serde(default)]
    pub time_zone: Option<String>,
    #[serde(default)]
    pub limit: Option<u32>,
    #[serde(default)]
    pub include_context_weight: Option<bool>,
}

/// Tokens and their cost (dollars), summed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageTotals {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub total_tokens: u64,
    pub total_cost: f64,
    pub input_cost: f64,
    pub output_cost: f64,
    pub cache_read_cost: f64,
    pub cache_write_cost: f64,
    /// Runs whose cost is unknown (they name no model).
    pub missing_cost_entries: u64,
}

impl UsageTotals {
    pub fn add(&mut self, o: &UsageTotals) {
        self.input += o.input;
        self.output += o.output;
        self.cache_read += o.cache_read;
        self.cache_write += o.cache_write;
        self.total_tokens += o.total_tokens;
        self.total_cost += o.total_cost;
        self.input_cost += o.input_cost;
        self.output_cost += o.output_cost;
        self.cache_read_cost += o.cache_read_cost;
        self.cache_write_cost += o.cache_write_cost;
        self.missing_cost_entries += o.missing_cost_entries;
    }
}

/// One day's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DailyUsage {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    #[serde(flatten)]
    pub totals: UsageTotals,
}

/// How fresh the answer is. loopgate's rollups are written with each run's outcome, so
/// always `fresh`, with no files behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageCacheStatus {
    pub status: String,
    pub cached_files: u64,
    pub pending_files: u64,
    pub stale_files: u64,
    pub refreshed_at: u64,
}

impl UsageCacheStatus {
    pub fn fresh(at: u64) -> UsageCacheStatus {
        UsageCacheStatus {
            status: "fresh".into(),
            cached_files: 0,
            pending_files: 0,
            stale_files: 0,
            refreshed_at: at,
        }
    }
}

/// The answer to `usage.cost`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageCostResult {
    pub updated_at: u64,
    pub days: u64,
    pub daily: Vec<DailyUsage>,
    pub totals: UsageTotals,
    pub cache_status: UsageCacheStatus,
}

/// Messages a session's runs recorded: each run a user message and an assistant message
/// (a failed one records its error as the assistant's), and each tool call its call and its
/// result.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageCounts {
    pub total: u64,
    pub user: u64,
    pub assistant: u64,
    pub tool_calls: u64,
    pub tool_results: u64,
    pub errors: u64,
}

impl MessageCounts {
    pub fn add(&mut self, o: &MessageCounts) {
        self.total += o.total;
        self.user += o.user;
        self.assistant += o.assistant;
        self.tool_calls += o.tool_calls;
        self.tool_results += o.tool_results;
        self.errors += o.errors;
    }
}

/// Tool calls. loopgate counts calls, not which tools: `tools` is empty.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolUsage {
    pub total_calls: u64,
    pub unique_tools: u64,
    pub tools: Vec<super::Never>,
}

/// Usage of one model (or, in `byProvider`, one provider).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelUsage {
    pub provider: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub count: u64,
    pub totals: UsageTotals,
}

/// How long runs took, milliseconds. `p95Ms` is the longest run (an upper bound: the
/// rollups keep no distribution).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Latency {
    pub count: u64,
    pub avg_ms: f64,
    pub min_ms: u64,
    pub max_ms: u64,
    pub p95_ms: u64,
}

/// One day's tokens and cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DailyTokens {
    pub date: String,
    pub tokens: u64,
    pub cost: f64,
}

/// One day's messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DailyMessageCounts {
    pub date: String,
    #[serde(flatten)]
    pub counts: MessageCounts,
}

/// One day's latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DailyLatency {
    pub date: String,
    #[serde(flatten)]
    pub latency: Latency,
}

/// One day's usage of one model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DailyModelUsage {
    pub date: String,
    pub provider: String,
    pub model: String,
    pub tokens: u64,
    pub cost: f64,
    pub count: u64,
}

/// One session's usage in the asked range.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionUsageDetail {
    #[serde(flatten)]
    pub totals: UsageTotals,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub first_activity: u64,
    pub last_activity: u64,
    pub duration_ms: u64,
    pub message_counts: MessageCounts,
    pub tool_usage: ToolUsage,
    pub model_usage: Vec<ModelUsage>,
    pub latency: Latency,
    pub activity_dates: Vec<String>,
    pub daily_breakdown: Vec<DailyTokens>,
    pub daily_message_counts: Vec<DailyMessageCounts>,
    pub daily_latency: Vec<DailyLatency>,
    pub daily_model_usage: Vec<DailyModelUsage>,
}

/// A session of `sessions.usage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionUsageEntry {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Always `instance`: one transcript per session key.
    pub scope: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<u64>,
    pub agent_id: String,
    pub creator_key: String,
    pub chat_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub usage: SessionUsageDetail,
    pub has_context_weight: bool,
}

/// One agent's totals.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentUsage {
    pub agent_id: String,
    pub totals: UsageTotals,
}

/// One day's activity over every session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DayActivity {
    pub date: String,
    pub tokens: u64,
    pub cost: f64,
    pub messages: u64,
    pub tool_calls: u64,
    pub errors: u64,
}

/// `sessions.usage`'s sums over every session of the scope (not only the listed ones).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UsageAggregates {
    pub session_count: u64,
    pub messages: MessageCounts,
    pub tools: ToolUsage,
    pub by_model: Vec<ModelUsage>,
    pub by_provider: Vec<ModelUsage>,
    pub by_agent: Vec<AgentUsage>,
    /// loopgate has no channels.
    pub by_channel: Vec<super::Never>,
    /// loopgate records no session creators.
    pub by_creator: Vec<super::Never>,
    pub cost_daily: Vec<DailyUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency: Option<Latency>,
    pub daily_latency: Vec<DailyLatency>,
    pub model_daily: Vec<DailyModelUsage>,
    pub daily: Vec<DayActivity>,
}

/// A creator to filter by; loopgate knows only the unknown one.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreatorOption {
    pub key: String,
}

/// The answer to `sessions.usage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionsUsageResult {
    pub updated_at: u64,
    pub start_date: String,
    pub end_date: String,
    pub sessions: Vec<SessionUsageEntry>,
    pub totals: UsageTotals,
    pub aggregates: UsageAggregates,
    pub creator_options: Vec<CreatorOption>,
    pub cache_status: UsageCacheStatus,
}
