//! Calendar days: a day number (days since 1970-01-01, UTC) and its `YYYY-MM-DD` date, both
//! ways (Howard Hinnant's civil-date algorithms), and a moment as ISO 8601 UTC. Pure.

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` of milliseconds since the epoch (UTC).
pub fn iso_millis(ms: u64) -> String {
    let secs = ms / 1000;
    let day = i64::try_from(secs / 86_400).unwrap_or(i64::MAX / 2);
    let s = secs % 86_400;
    format!(
        "{}T{:02}:{:02}:{:02}.{:03}Z",
        date(day),
        s / 3600,
        s % 3600 / 60,
        s % 60,
        ms % 1000
    )
}

/// `YYYY-MM-DD` of a day number (proleptic Gregorian, UTC).
pub fn date(day: i64) -> String {
    // Howard Hinnant's days-to-civil.
    let z = day + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The day number of a `YYYY-MM-DD` calendar date; `None` if it is not one.
pub fn parse_date(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return None;
    }
    let num = |s: &str| {
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse::<i64>().ok())?
    };
    let (y, m, d) = (num(&text[..4])?, num(&text[5..7])?, num(&text[8..])?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    };
    if !(1..=days_in).contains(&d) {
        return None;
    }
    // Howard Hinnant's days-from-civil.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moments_and_days_both_ways() {
        assert_eq!(iso_millis(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_millis(1_796_613_896_363), "2026-12-07T03:24:56.363Z");
        assert_eq!(
            parse_date("2026-12-07").map(date).as_deref(),
            Some("2026-12-07")
        );
        assert_eq!(parse_date("2026-02-29"), None);
    }
}
