use super::*;
use crate::config::Price;

fn counts(runs: u64, input: u64, output: u64) -> Counts {
    Counts {
        runs,
        input,
        output,
        total: input + output,
        duration_ms: 10 * runs,
        min_ms: 10,
        max_ms: 10,
        ..Counts::default()
    }
}

#[test]
fn dates_round_trip_and_only_calendar_dates_parse() {
    for (text, day) in [
        ("1970-01-01", 0),
        ("2026-12-07", 20_794),
        ("2000-02-29", 11_016),
        ("1969-12-31", -1),
    ] {
        assert_eq!(parse_date(text), Some(day), "{text}");
        assert_eq!(date(day), text);
    }
    for bad in [
        "2026-02-29",
        "2026-13-01",
        "2026-1-01",
        "2026-12-00",
        "20261207",
        "2026-12-0x",
    ] {
        assert_eq!(parse_date(bad), None, "{bad}");
    }
}

/// The ranges and refusals OpenClaw answers (operator-surface-2026.9.6 section 10).
#[test]
fn days_resolve_as_openclaw_reads_them() {
    let today = 20_794;
    let days = |p: DateParams<'_>| resolve_days(&p, today);
    assert_eq!(
        days(DateParams::default()),
        Ok(Days {
            first: today - 29,
            last: today
        })
    );
    let n = |d: f64| {
        days(DateParams {
            days: Some(d),
            ..DateParams::default()
        })
    };
    assert_eq!(
        n(0.0),
        Ok(Days {
            first: today,
            last: today
        })
    );
    assert_eq!(
        n(7.9),
        Ok(Days {
            first: today - 6,
            last: today
        })
    );
    assert!(!n(400.0).unwrap().filled());
    assert!(n(366.0).unwrap().filled());
    let all = days(DateParams {
        range: Some(UsageRange::All),
        ..DateParams::default()
    });
    assert_eq!(
        all,
        Ok(Days {
            first: 0,
            last: today
        })
    );
    let between = |a, b| {
        days(DateParams {
            start_date: a,
            end_date: b,
            ..DateParams::default()
        })
    };
    assert_eq!(
        between(Some("2026-12-01"), Some("2026-12-07")),
        Ok(Days {
            first: today - 6,
            last: today
        })
    );
    assert_eq!(
        between(Some("2026-12-32"), Some("2026-12-07")),
        Err(DaysError::NotADate("startDate"))
    );
    assert_eq!(between(Some("2026-12-01"), None), Err(DaysError::OneEnd));
    assert_eq!(
        between(Some("2026-12-08"), Some("2026-12-07")),
        Err(DaysError::Reversed)
    );
    let offset = |o| {
        days(DateParams {
            mode: Some("specific"),
            utc_offset: Some(o),
            ..DateParams::default()
        })
    };
    assert!(offset("UTC+5:30").is_ok());
    assert!(offset("UTC-12").is_ok());
    assert_eq!(offset("UTC+15"), Err(DaysError::UtcOffset));
}

/// Model `p/m` at $3 / $15 / $0.30 / $3.75 per million input, output, cache-read and
/// cache-write tokens.
fn prices_of_m() -> Prices {
    let mut prices = Prices::new();
    prices.insert(
        ("p".into(), "m".into()),
        Price {
            input: 3.0,
            output: 15.0,
            cache_read: 0.3,
            cache_write: 3.75,
        },
    );
    prices
}

#[test]
fn cost_is_tokens_times_the_models_price_per_million() {
    let prices = prices_of_m();
    let t = priced(&counts(2, 1_000_000, 200_000), "p", "m", &prices);
    assert_eq!((t.input_cost, t.output_cost, t.total_cost), (3.0, 3.0, 6.0));
    assert_eq!(t.total_tokens, 1_200_000);
    // An unpriced model costs nothing and is not missing; a run that named no model is.
    let free = priced(&counts(1, 10, 1), "p", "other", &prices);
    assert_eq!((free.total_cost, free.missing_cost_entries), (0.0, 0));
    assert_eq!(
        priced(&counts(1, 10, 1), "", "", &prices).missing_cost_entries,
        1
    );
}

/// Found by the hostile review: a run's input counts its cached prompt tokens too (as the
/// providers report prompt tokens), and they were priced twice: as input and as cache.
/// Input is now what was neither read from nor written to the cache, as OpenClaw shows it.
#[test]
fn cached_prompt_tokens_are_priced_once() {
    let prices = prices_of_m();
    let mut c = counts(1, 1000, 10);
    c.cache_read = 900;
    let t = priced(&c, "p", "m", &prices);
    assert_eq!(t.input, 100);
    let want = (100.0 * 3.0 + 10.0 * 15.0 + 900.0 * 0.3) / 1e6;
    assert!(
        (t.total_cost - want).abs() < 1e-12,
        "{} != {want}",
        t.total_cost
    );
}

#[test]
fn daily_rows_fill_the_range_and_sum_to_the_totals() {
    let row = |day, agent: &str, input| DayRow {
        day,
        agent_id: agent.into(),
        provider: "p".into(),
        model: "m".into(),
        counts: counts(1, input, 1),
    };
    let rows = [row(10, "a", 5), row(12, "a", 7), row(12, "b", 11)];
    let (daily, totals) = cost(Days { first: 9, last: 12 }, &rows, &Prices::new());
    let dates: Vec<_> = daily.iter().map(|d| d.date.as_str()).collect();
    assert_eq!(
        dates,
        ["1970-01-10", "1970-01-11", "1970-01-12", "1970-01-13"]
    );
    assert_eq!(daily[3].totals.input, 18);
    assert_eq!(
        (totals.input, totals.output, totals.total_tokens),
        (23, 3, 26)
    );
    let (sum, agg) = aggregates(&rows, 2, &Prices::new());
    assert_eq!(sum, totals);
    assert_eq!(agg.messages.user, 3);
    assert_eq!(agg.by_agent.len(), 2);
    assert_eq!(agg.daily.len(), 2, "only days with usage");
}
