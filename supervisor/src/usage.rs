//! `usage.cost` and `sessions.usage` from the gateway db's rollups (`gatewaydb::usage`): the
//! asked days read as OpenClaw reads them, each model's price applied, the rows folded into
//! OpenClaw's shapes. Pure: the rpc handlers fetch the rows and call these.
//!
//! Days are UTC days. OpenClaw can also count days in the gateway's or a given time zone
//! (`mode`); loopgate accepts and checks those params and still counts UTC days, because its
//! rollups are kept per UTC day.

use std::collections::BTreeMap;

use ipc::gateway::{
    AgentUsage, DailyLatency, DailyMessageCounts, DailyModelUsage, DailyTokens, DailyUsage,
    DayActivity, Latency, MessageCounts, ModelUsage, SessionUsageDetail, SessionUsageEntry,
    ToolUsage, UsageAggregates, UsageRange, UsageTotals,
};

use crate::config::Prices;
use crate::gatewaydb::usage::{Counts, DayRow, SessionUsage, DAY_MS};

/// The most days a range may span (OpenClaw's `MAX_USAGE_DAYS`).
const MAX_DAYS: i64 = 36_600;
/// Ranges up to this many days list every day, zeros included; longer ones only the days
/// with usage (as OpenClaw's answers do).
const FILLED_DAYS: i64 = 366;

/// The creator every loopgate session has: loopgate records none.
pub const UNKNOWN_CREATOR: &str = "[\"unknown\"]";

/// The days asked for, both ends included, counted from 1970-01-01 (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Days {
    pub first: i64,
    pub last: i64,
}

impl Days {
    /// Whether every day of the range is listed (zeros included).
    pub fn filled(&self) -> bool {
        self.last - self.first < FILLED_DAYS
    }

    pub fn count(&self) -> u64 {
        (self.last - self.first + 1).max(0) as u64
    }
}

/// What a usage request says of its days.
#[derive(Debug, Clone, Default)]
pub struct DateParams<'a> {
    pub start_date: Option<&'a str>,
    pub end_date: Option<&'a str>,
    pub days: Option<f64>,
    pub range: Option<UsageRange>,
    pub mode: Option<&'a str>,
    pub utc_offset: Option<&'a str>,
    pub time_zone: Option<&'a str>,
}

/// Today's day number.
pub fn today(now_ms: u64) -> i64 {
    (now_ms / DAY_MS) as i64
}

pub use crate::calendar::{date, parse_date};

/// Whether `text` is a UTC offset OpenClaw takes (`UTC+5`, `UTC-03:30`, -12:00 to +14:00).
fn utc_offset_ok(text: &str) -> bool {
    let Some(rest) = text.trim().strip_prefix("UTC") else {
        return false;
    };
    let (sign, rest) = match rest.as_bytes().first() {
        Some(b'+') => (1, &rest[1..]),
        Some(b'-') => (-1, &rest[1..]),
        _ => return false,
    };
    let (h, m) = rest.split_once(':').unwrap_or((rest, "00"));
    let digits = |s: &str, n: std::ops::RangeInclusive<usize>| {
        n.contains(&s.len()) && s.bytes().all(|c| c.is_ascii_digit())
    };
    if !digits(h, 1..=2) || !digits(m, 2..=2) {
        return false;
    }
    let (h, m) = (
        h.parse::<i64>().unwrap_or(99),
        m.parse::<i64>().unwrap_or(99),
    );
    let minutes = sign * (h * 60 + m);
    m < 60 && (-720..=840).contains(&minutes)
}

/// A date param that says something (an empty one is absent, as OpenClaw reads it).
fn given(d: Option<&str>) -> Option<&str> {
    d.filter(|d| !d.trim().is_empty())
}

/// Why a usage request's days are refused, in OpenClaw's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DaysError {
    #[error("invalid timeZone: expected a valid IANA time zone")]
    TimeZone,
    #[error("invalid utcOffset: expected UTC-12:00 through UTC+14:00")]
    UtcOffset,
    #[error("invalid {0}: expected a valid YYYY-MM-DD calendar date")]
    NotADate(&'static str),
    #[error("startDate must not be after endDate")]
    Reversed,
    #[error("startDate and endDate must be provided together")]
    OneEnd,
}

/// The days a request asks for: explicit dates (both or neither), else `range`, else
/// `days` (default 30), ending today.
pub fn resolve_days(p: &DateParams<'_>, today: i64) -> Result<Days, DaysError> {
    if p.mode == Some("specific") {
        let offset = p.utc_offset.filter(|o| !o.trim().is_empty());
        match p.time_zone {
            Some(tz) if tz.trim().is_empty() && !offset.is_some_and(utc_offset_ok) => {
                return Err(DaysError::TimeZone)
            }
            Some(_) => {}
            None if offset.is_some_and(|o| !utc_offset_ok(o)) => return Err(DaysError::UtcOffset),
            None => {}
        }
    }
    let (start, end) = (given(p.start_date), given(p.end_date));
    for (name, d) in [("startDate", start), ("endDate", end)] {
        if d.is_some_and(|d| parse_date(d.trim()).is_none()) {
            return Err(DaysError::NotADate(name));
        }
    }
    match (
        start.and_then(|d| parse_date(d.trim())),
        end.and_then(|d| parse_date(d.trim())),
    ) {
        (Some(first), Some(last)) if first > last => Err(DaysError::Reversed),
        (Some(first), Some(last)) => Ok(Days { first, last }),
        (Some(_), None) | (None, Some(_)) => Err(DaysError::OneEnd),
        (None, None) => {
            let days = match p.range {
                Some(UsageRange::All) => {
                    return Ok(Days {
                        first: 0,
                        last: today,
                    })
                }
                Some(UsageRange::Week) => 7,
                Some(UsageRange::Month) => 30,
                Some(UsageRange::Quarter) => 90,
                Some(UsageRange::Year) => 365,
                None => p
                    .days
                    .filter(|d| d.is_finite())
                    .map_or(30, |d| (d.floor() as i64).min(MAX_DAYS)),
            };
            Ok(Days {
                first: today - (days.max(1) - 1),
                last: today,
            })
        }
    }
}

/// Tokens and their cost at `price`.
pub fn priced(c: &Counts, provider: &str, model: &str, prices: &Prices) -> UsageTotals {
    let price = prices
        .get(&(provider.to_owned(), model.to_owned()))
        .copied()
        .unwrap_or_default();
    let per = ipc::footer::per_million;
    let input = ipc::footer::fresh_input(c.input, c.cache_read, c.cache_write);
    let (input_cost, output_cost) = (per(input, price.input), per(c.output, price.output));
    let cache_read_cost = per(c.cache_read, price.cache_read);
    let cache_write_cost = per(c.cache_write, price.cache_write);
    UsageTotals {
        input,
        output: c.output,
        cache_read: c.cache_read,
        cache_write: c.cache_write,
        // What the runs reported (input, output and cache tokens, as each provider counts them).
        total_tokens: c.total,
        total_cost: input_cost + output_cost + cache_read_cost + cache_write_cost,
        input_cost,
        output_cost,
        cache_read_cost,
        cache_write_cost,
        // A run that never named its model (it failed before any model call) has no price.
        missing_cost_entries: if model.is_empty() && c.total > 0 {
            c.runs
        } else {
            0
        },
    }
}

/// The messages some runs recorded.
fn messages(c: &Counts) -> MessageCounts {
    MessageCounts {
        total: 2 * c.runs + c.tool_calls,
        user: c.runs,
        assistant: c.runs,
        tool_calls: c.tool_calls,
        tool_results: c.tool_calls,
        errors: c.errors,
    }
}

fn latency(c: &Counts) -> Latency {
    Latency {
        count: c.runs,
        avg_ms: if c.runs == 0 {
            0.0
        } else {
            c.duration_ms as f64 / c.runs as f64
        },
        min_ms: c.min_ms,
        max_ms: c.max_ms,
        p95_ms: c.max_ms,
    }
}

fn tools(c: &Counts) -> ToolUsage {
    ToolUsage {
        total_calls: c.tool_calls,
        unique_tools: 0,
        tools: Vec::new(),
    }
}

/// One day's (or range's) folded rows: totals, counts, per model.
#[derive(Default)]
struct Fold {
    totals: UsageTotals,
    counts: Counts,
    models: BTreeMap<(String, String), (Counts, UsageTotals)>,
}

impl Fold {
    fn add(&mut self, provider: &str, model: &str, c: &Counts, prices: &Prices) {
        let t = priced(c, provider, model, prices);
        self.totals.add(&t);
        self.counts.add(c);
        let m = self
            .models
            .entry((provider.to_owned(), model.to_owned()))
            .or_default();
        m.0.add(c);
        m.1.add(&t);
    }

    fn model_usage(&self) -> Vec<ModelUsage> {
        let mut v: Vec<ModelUsage> = self
            .models
            .iter()
            .map(|((provider, model), (c, t))| ModelUsage {
                provider: provider.clone(),
                model: Some(model.clone()),
                count: c.runs,
                totals: *t,
            })
            .collect();
        v.sort_by(|a, b| b.totals.total_cost.total_cmp(&a.totals.total_cost));
        v
    }

    fn provider_usage(&self) -> Vec<ModelUsage> {
        let mut by: BTreeMap<&str, (u64, UsageTotals)> = BTreeMap::new();
        for ((provider, _), (c, t)) in &self.models {
            let e = by.entry(provider).or_default();
            e.0 += c.runs;
            e.1.add(t);
        }
        by.into_iter()
            .map(|(provider, (count, totals))| ModelUsage {
                provider: provider.to_owned(),
                model: None,
                count,
                totals,
            })
            .collect()
    }
}

/// Each day with rows and its fold; with `fill`, also every other day of that range.
fn by_day<'a>(
    fill: Option<Days>,
    rows: impl Iterator<Item = (i64, &'a str, &'a str, &'a Counts)>,
    prices: &Prices,
) -> BTreeMap<i64, Fold> {
    let mut out: BTreeMap<i64, Fold> = BTreeMap::new();
    for d in fill.into_iter().flat_map(|days| days.first..=days.last) {
        out.insert(d, Fold::default());
    }
    for (day, provider, model, c) in rows {
        out.entry(day).or_default().add(provider, model, c, prices);
    }
    out
}

/// One entry per day of `per_day`, oldest first, made from its date and fold.
fn each_day<T>(per_day: &BTreeMap<i64, Fold>, entry: impl Fn(String, &Fold) -> T) -> Vec<T> {
    per_day.iter().map(|(d, f)| entry(date(*d), f)).collect()
}

fn daily_latency(per_day: &BTreeMap<i64, Fold>) -> Vec<DailyLatency> {
    each_day(per_day, |date, f| DailyLatency {
        date,
        latency: latency(&f.counts),
    })
}

/// `usage.cost`'s daily rows and totals.
pub fn cost(days: Days, rows: &[DayRow], prices: &Prices) -> (Vec<DailyUsage>, UsageTotals) {
    let folds = by_day(
        days.filled().then_some(days),
        rows.iter()
            .map(|r| (r.day, r.provider.as_str(), r.model.as_str(), &r.counts)),
        prices,
    );
    let mut totals = UsageTotals::default();
    let daily = folds
        .into_iter()
        .map(|(day, f)| {
            totals.add(&f.totals);
            DailyUsage {
                date: date(day),
                totals: f.totals,
            }
        })
        .collect();
    (daily, totals)
}

/// One session's detail in `sessions.usage`.
pub fn session_entry(s: &SessionUsage, prices: &Prices) -> SessionUsageEntry {
    let mut all = Fold::default();
    let mut daily_models = Vec::new();
    for r in &s.days {
        all.add(&r.provider, &r.model, &r.counts, prices);
        let t = priced(&r.counts, &r.provider, &r.model, prices);
        daily_models.push(DailyModelUsage {
            date: date(r.day),
            provider: r.provider.clone(),
            model: r.model.clone(),
            tokens: t.total_tokens,
            cost: t.total_cost,
            count: r.counts.runs,
        });
    }
    let per_day = by_day(
        None,
        s.days
            .iter()
            .map(|r| (r.day, r.provider.as_str(), r.model.as_str(), &r.counts)),
        prices,
    );
    let first = s.days.iter().map(|r| r.first_at).min().unwrap_or(0);
    let last = s.days.iter().map(|r| r.last_at).max().unwrap_or(0);
    // The model the session used last.
    let latest = s.days.iter().max_by_key(|r| r.last_at);
    SessionUsageEntry {
        key: s.session_key.clone(),
        session_id: s.session_id.clone(),
        scope: "instance".into(),
        updated_at: s.updated_at,
        agent_id: s.agent_id.clone(),
        creator_key: UNKNOWN_CREATOR.into(),
        chat_type: "direct".into(),
        model_provider: latest.map(|r| r.provider.clone()),
        model: latest.map(|r| r.model.clone()),
        usage: SessionUsageDetail {
            totals: all.totals,
            session_id: s.session_id.clone(),
            first_activity: first,
            last_activity: last,
            duration_ms: last.saturating_sub(first),
            message_counts: messages(&all.counts),
            tool_usage: tools(&all.counts),
            model_usage: all.model_usage(),
            latency: latency(&all.counts),
            activity_dates: per_day.keys().map(|d| date(*d)).collect(),
            daily_breakdown: each_day(&per_day, |date, f| DailyTokens {
                date,
                tokens: f.totals.total_tokens,
                cost: f.totals.total_cost,
            }),
            daily_message_counts: each_day(&per_day, |date, f| DailyMessageCounts {
                date,
                counts: messages(&f.counts),
            }),
            daily_latency: daily_latency(&per_day),
            daily_model_usage: daily_models,
        },
        has_context_weight: false,
    }
}

/// `sessions.usage`'s sums over every session of the scope, from the agents' day rows.
pub fn aggregates(
    rows: &[DayRow],
    session_count: u64,
    prices: &Prices,
) -> (UsageTotals, UsageAggregates) {
    let mut all = Fold::default();
    let mut agents: BTreeMap<&str, UsageTotals> = BTreeMap::new();
    // One entry per day and model, whichever agents used it.
    let mut by_model_day: BTreeMap<(i64, &str, &str), (UsageTotals, u64)> = BTreeMap::new();
    for r in rows {
        all.add(&r.provider, &r.model, &r.counts, prices);
        let t = priced(&r.counts, &r.provider, &r.model, prices);
        agents.entry(&r.agent_id).or_default().add(&t);
        let e = by_model_day
            .entry((r.day, &r.provider, &r.model))
            .or_default();
        e.0.add(&t);
        e.1 += r.counts.runs;
    }
    let model_daily: Vec<DailyModelUsage> = by_model_day
        .into_iter()
        .map(|((day, provider, model), (t, count))| DailyModelUsage {
            date: date(day),
            provider: provider.to_owned(),
            model: model.to_owned(),
            tokens: t.total_tokens,
            cost: t.total_cost,
            count,
        })
        .collect();
    let per_day = by_day(
        None,
        rows.iter()
            .map(|r| (r.day, r.provider.as_str(), r.model.as_str(), &r.counts)),
        prices,
    );
    let mut by_agent: Vec<AgentUsage> = agents
        .into_iter()
        .map(|(agent_id, totals)| AgentUsage {
            agent_id: agent_id.to_owned(),
            totals,
        })
        .collect();
    by_agent.sort_by(|a, b| b.totals.total_cost.total_cmp(&a.totals.total_cost));
    let aggregates = UsageAggregates {
        session_count,
        messages: messages(&all.counts),
        tools: tools(&all.counts),
        by_model: all.model_usage(),
        by_provider: all.provider_usage(),
        by_agent,
        by_channel: Vec::new(),
        by_creator: Vec::new(),
        cost_daily: each_day(&per_day, |date, f| DailyUsage {
            date,
            totals: f.totals,
        }),
        latency: (all.counts.runs > 0).then(|| latency(&all.counts)),
        daily_latency: daily_latency(&per_day),
        model_daily,
        daily: each_day(&per_day, |date, f| {
            let m = messages(&f.counts);
            DayActivity {
                date,
                tokens: f.totals.total_tokens,
                cost: f.totals.total_cost,
                messages: m.total,
                tool_calls: m.tool_calls,
                errors: m.errors,
            }
        }),
    };
    (all.totals, aggregates)
}

#[cfg(test)]
mod tests;
