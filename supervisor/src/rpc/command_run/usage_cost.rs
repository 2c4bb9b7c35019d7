//! `/usage cost`: what the session, today and the last 30 days cost, in OpenClaw's words
//! (its `💸 Usage cost` summary), from the gateway db's usage rollups. The other `/usage`
//! modes switch the session's usage footer (`settings.rs`).

use std::sync::Arc;

use ipc::footer::{tokens, usd};
use ipc::gateway::UsageTotals;

use super::super::{Gateway, Route};
use super::Said;
use crate::events::now_ms;
use crate::gatewaydb::usage::{SessionsUsageQuery, UsageQuery};
use crate::usage;

/// `/usage`'s argument asks for the cost summary (as OpenClaw reads it: it begins `cost`).
pub(super) fn is_cost(arg: &str) -> bool {
    arg.trim().to_ascii_lowercase().starts_with("cost")
}

fn partial(t: &UsageTotals) -> &'static str {
    if t.missing_cost_entries > 0 {
        " (partial)"
    } else {
        ""
    }
}

/// The summary: the session's totals (`None`: it has no usage), today's, the last 30 days'.
pub(super) fn text(
    session: Option<&UsageTotals>,
    today: &UsageTotals,
    last30: &UsageTotals,
) -> String {
    let session_line = match session {
        None => "Session n/a".to_owned(),
        Some(s) => {
            let count = if s.total_tokens > 0 {
                format!(" · {} tokens", tokens(s.total_tokens))
            } else {
                String::new()
            };
            format!("Session {}{}{count}", usd(s.total_cost), partial(s))
        }
    };
    format!(
        "💸 Usage cost\n{session_line}\nToday {}{}\nLast 30d {}{}",
        usd(today.total_cost),
        partial(today),
        usd(last30.total_cost),
        partial(last30)
    )
}

/// `/usage cost` for the session `route` names.
pub(super) async fn usage_cost(gw: &Arc<Gateway>, route: &Route) -> Said {
    let config = gw.config();
    let today = usage::today(now_ms());
    let session = gw
        .db
        .usage_sessions(SessionsUsageQuery {
            range: UsageQuery {
                first_day: 0,
                last_day: today,
                agent_id: None,
            },
            key: Some(route.session_key.clone()),
            limit: 1,
            max_day_rows: usize::MAX,
        })
        .await;
    let days = usage::Days {
        first: today - 29,
        last: today,
    };
    let month = gw
        .db
        .usage_days(UsageQuery {
            first_day: days.first,
            last_day: days.last,
            agent_id: Some(route.agent_id.clone()),
        })
        .await;
    let (session, month) = match (session, month) {
        (Ok(s), Ok(m)) => (s, m),
        (Err(e), _) | (_, Err(e)) => {
            return Said::plain(format!("⚠️ Usage is unavailable: {e}"));
        }
    };
    let session = session
        .sessions
        .first()
        .map(|s| usage::session_entry(s, &config.prices).usage.totals);
    let (daily, last30) = usage::cost(days, &month, &config.prices);
    let today = daily.last().map(|d| d.totals).unwrap_or_default();
    Said::plain(text(session.as_ref(), &today, &last30))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// OpenClaw's formats (its `formatUsd`, `formatTokenCount`, the summary's lines).
    #[test]
    fn the_summary_reads_as_openclaws() {
        for (n, shown) in [
            (950, "950"),
            (1234, "1.2k"),
            (12_345, "12k"),
            (999_999, "1.0m"),
            (1_500_000, "1.5m"),
        ] {
            assert_eq!(tokens(n), shown, "{n}");
        }
        assert_eq!(
            (usd(0.5), usd(0.0018), usd(0.0)),
            ("$0.50".into(), "$0.0018".into(), "$0.0000".into())
        );
        let t = |tokens: u64, cost: f64| UsageTotals {
            total_tokens: tokens,
            total_cost: cost,
            ..UsageTotals::default()
        };
        assert_eq!(
            text(Some(&t(1234, 0.0042)), &t(0, 0.0), &t(5000, 0.02)),
            "💸 Usage cost\nSession $0.0042 · 1.2k tokens\nToday $0.0000\nLast 30d $0.02"
        );
        assert!(text(None, &t(0, 0.0), &t(0, 0.0)).contains("\nSession n/a\n"));
    }
}
