//! When a job runs: its schedule checked (`at` an ISO 8601 time, `every` a period from an
//! anchor, `cron` a 5- or 6-field expression in a time zone) and its next occurrence after a
//! moment. Pure; time zones from the tz database (`jiff`, bundled so a host without one
//! still schedules). A cron expression's local times are kept across daylight saving
//! changes: a time that does not exist that day runs shifted by the gap (02:30 at 03:30),
//! a time that happens twice runs once (the first).

use ipc::gateway::CronSchedule;
use jiff::civil::DateTime;
use jiff::tz::TimeZone;
use jiff::Timestamp;

/// Shortest `every` period (OpenClaw's tool asks for no less either).
pub const MIN_EVERY_MS: u64 = 1_000;
/// Longest `every` period (ten years).
pub const MAX_EVERY_MS: u64 = 10 * 365 * 86_400_000;
/// The last moment a schedule may name (the end of the year 9999).
pub const MAX_TIME_MS: u64 = 253_402_300_799_999;
/// Most steps a search for the next cron occurrence takes (an expression such as
/// `0 0 30 2 *` never matches). A step is a month, day, hour, minute or second: the rarest
/// valid expression, a leap day across a century's skipped one (2096 to 2104), takes about
/// 3 000.
const SEARCH_STEPS: usize = 20_000;

/// A schedule as the scheduler uses it.
#[derive(Debug, Clone)]
pub enum Schedule {
    At(u64),
    Every { every_ms: u64, anchor_ms: u64 },
    Cron(Box<CronExpr>, TimeZone),
}

/// Why a schedule is refused; its text goes to the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("schedule.at must be an ISO 8601 time with an offset (2026-12-07T09:00:00Z): {0}")]
    At(String),
    #[error("schedule.at is in the past: {at} ({ago}). Current time: {now}")]
    Past {
        at: String,
        ago: String,
        now: String,
    },
    #[error("schedule.everyMs must be {MIN_EVERY_MS} to {MAX_EVERY_MS}")]
    Every,
    #[error("schedule.expr {expr:?}: {why}")]
    Expr { expr: String, why: String },
    #[error("schedule.tz {0:?} is not a known time zone (IANA name, e.g. Europe/Berlin)")]
    Tz(String),
    #[error("the schedule has no occurrence after now")]
    Never,
}

/// `ms` as OpenClaw writes a moment.
pub fn iso(ms: u64) -> String {
    ipc::calendar::iso_millis(ms)
}

fn ago(ms: u64) -> String {
    match ms / 1000 {
        s @ 0..=59 => format!("{s} seconds ago"),
        s @ 60..=7199 => format!("{} minutes ago", (s + 30) / 60),
        s => format!("{} hours ago", (s + 1800) / 3600),
    }
}

/// Checks `s` as a new job's (or a changed job's) schedule, at `now`; `anchor` is when an
/// `every` counts from (OpenClaw: the job's creation or the change).
pub fn parse(s: &CronSchedule, now: u64) -> Result<Schedule, ScheduleError> {
    match s {
        CronSchedule::At { at } => {
            let ts: Timestamp = at
                .parse()
                .map_err(|e: jiff::Error| ScheduleError::At(e.to_string()))?;
            let ms =
                u64::try_from(ts.as_millisecond()).map_err(|_| ScheduleError::At(at.clone()))?;
            if ms + 1000 < now {
                return Err(ScheduleError::Past {
                    at: iso(ms),
                    ago: ago(now - ms),
                    now: iso(now),
                });
            }
            Ok(Schedule::At(ms))
        }
        CronSchedule::Every {
            every_ms,
            anchor_ms,
        } => {
            if *every_ms < MIN_EVERY_MS || *every_ms > MAX_EVERY_MS {
                return Err(ScheduleError::Every);
            }
            if anchor_ms.is_some_and(|a| a > MAX_TIME_MS) {
                return Err(ScheduleError::At("anchorMs is past the year 9999".into()));
            }
            Ok(Schedule::Every {
                every_ms: *every_ms,
                anchor_ms: anchor_ms.unwrap_or(now),
            })
        }
        CronSchedule::Cron { expr, tz } => {
            let parsed = CronExpr::parse(expr).map_err(|why| ScheduleError::Expr {
                expr: expr.clone(),
                why,
            })?;
            let zone = match tz.as_deref() {
                None | Some("") => TimeZone::system(),
                Some(name) => {
                    TimeZone::get(name).map_err(|_| ScheduleError::Tz(name.to_owned()))?
                }
            };
            let s = Schedule::Cron(Box::new(parsed), zone);
            s.next_after(now).ok_or(ScheduleError::Never)?;
            Ok(s)
        }
    }
}

impl Schedule {
    /// The first occurrence of a new (or changed) schedule, at `now`.
    pub fn first(&self, now: u64) -> Option<u64> {
        match self {
            Schedule::At(ms) => Some(*ms),
            // The first `anchor + k·every` after now (k ≥ 1): a new job's first period, or
            // the next slot of one enabled again (never an occurrence already past).
            Schedule::Every {
                every_ms,
                anchor_ms,
            } => {
                let first = anchor_ms.saturating_add(*every_ms);
                if first > now {
                    return Some(first);
                }
                let k = (now - anchor_ms) / every_ms + 1;
                Some(anchor_ms.saturating_add(k.saturating_mul(*every_ms)))
            }
            Schedule::Cron(..) => self.next_after(now),
        }
    }

    /// The occurrence after a run that started at `started` for the occurrence `due`
    /// (`None`: none, a one-shot). `every` counts from the run's start, as OpenClaw's.
    pub fn after_run(&self, due: u64, started: u64) -> Option<u64> {
        match self {
            Schedule::At(_) => None,
            Schedule::Every { every_ms, .. } => Some(started.max(due).saturating_add(*every_ms)),
            Schedule::Cron(..) => self.next_after(started.max(due)),
        }
    }

    /// The first occurrence strictly after `after` (cron expressions only; the others
    /// answer as [`Schedule::first`]).
    pub fn next_after(&self, after: u64) -> Option<u64> {
        match self {
            Schedule::Cron(expr, tz) => expr.next_after(after, tz),
            other => other.first(after),
        }
    }

    pub fn is_one_shot(&self) -> bool {
        matches!(self, Schedule::At(_))
    }
}

/// A parsed cron expression: the allowed values of each field as bits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    seconds: u64,
    minutes: u64,
    hours: u32,
    days: u32,
    months: u16,
    weekdays: u8,
    /// Day of month and day of week both restricted: either matches (as cron has it).
    either_day: bool,
    has_seconds: bool,
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];
const DAYS: [&str; 8] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/// One field's allowed values in `lo..=hi` as bits; `names` (from `lo`) may stand for
/// numbers; `7` is Sunday in the weekday field.
fn field(text: &str, lo: u32, hi: u32, names: &[&str]) -> Result<(u64, bool), String> {
    let value = |v: &str| -> Result<u32, String> {
        if let Some(i) = names.iter().position(|n| n.eq_ignore_ascii_case(v)) {
            return Ok(lo + i as u32);
        }
        let n: u32 = v.parse().map_err(|_| format!("{v:?} is not a number"))?;
        if n < lo || n > hi {
            return Err(format!("{n} is out of range {lo}-{hi}"));
        }
        Ok(n)
    };
    let mut bits = 0u64;
    let star = text == "*" || text == "?";
    for part in text.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => {
                let s: u32 = s
                    .parse()
                    .map_err(|_| format!("step {s:?} is not a number"))?;
                if s == 0 || s > hi {
                    return Err(format!("a step of {s} in a field of {lo}-{hi}"));
                }
                (r, s)
            }
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" | "?" => (lo, hi),
            r => match r.split_once('-') {
                Some((a, b)) => (value(a)?, value(b)?),
                None if step > 1 => (value(r)?, hi),
                None => {
                    let v = value(r)?;
                    (v, v)
                }
            },
        };
        // `fri-sun`: Sunday at the end of a weekday range is its 7.
        let to = if names.len() == 8 && to == 0 && from > 0 {
            7
        } else {
            to
        };
        if from > to {
            return Err(format!("range {range:?} runs backwards"));
        }
        let mut v = from;
        while v <= to {
            bits |= 1 << v;
            v = v.saturating_add(step);
        }
    }
    Ok((bits, star))
}

impl CronExpr {
    /// `m h dom mon dow`, or `s m h dom mon dow`.
    pub fn parse(expr: &str) -> Result<CronExpr, String> {
        let f: Vec<&str> = expr.split_whitespace().collect();
        let (sec, rest) = match f.len() {
            5 => ("0", &f[..]),
            6 => (f[0], &f[1..]),
            n => {
                return Err(format!(
                    "{n} fields; a cron expression has 5 (or 6 with seconds)"
                ))
            }
        };
        let (seconds, _) = field(sec, 0, 59, &[])?;
        let (minutes, _) = field(rest[0], 0, 59, &[])?;
        let (hours, _) = field(rest[1], 0, 23, &[])?;
        let (days, dom_star) = field(rest[2], 1, 31, &[])?;
        let (months, _) = field(rest[3], 1, 12, &MONTHS)?;
        let (weekdays, dow_star) = field(rest[4], 0, 7, &DAYS)?;
        let narrow = |b: u64| u32::try_from(b).map_err(|_| "out of range".to_owned());
        Ok(CronExpr {
            seconds,
            minutes,
            hours: narrow(hours)?,
            days: narrow(days)?,
            months: u16::try_from(months).map_err(|_| "out of range".to_owned())?,
            // Sunday is 0 and 7: a range may end at 7 (`1-7`, `fri-sun`); 7 is then 0.
            weekdays: u8::try_from((weekdays & 0x7f) | ((weekdays >> 7) & 1))
                .map_err(|_| "out of range".to_owned())?,
            either_day: !dom_star && !dow_star,
            has_seconds: f.len() == 6,
        })
    }

    fn day_matches(&self, dt: DateTime) -> bool {
        let dom = self.days & (1 << dt.day()) != 0;
        let dow = self.weekdays & (1 << dt.weekday().to_sunday_zero_offset()) != 0;
        if self.either_day {
            dom || dow
        } else {
            dom && dow
        }
    }

    /// The first local time matching, as an instant strictly after `after` (ms).
    pub fn next_after(&self, after: u64, tz: &TimeZone) -> Option<u64> {
        let step_ms = if self.has_seconds { 1_000 } else { 60_000 };
        let start = (after / step_ms + 1) * step_ms;
        let ts = Timestamp::from_millisecond(i64::try_from(start).ok()?).ok()?;
        let mut dt = tz.to_datetime(ts);
        for _ in 0..SEARCH_STEPS {
            let at = |h: i8, m: i8, s: i8| {
                DateTime::new(dt.year(), dt.month(), dt.day(), h, m, s, 0).ok()
            };
            let next_day = || dt.date().tomorrow().ok().map(|d| d.at(0, 0, 0, 0));
            if self.months & (1 << dt.month()) == 0 {
                let first = dt.date().first_of_month();
                dt = first.last_of_month().tomorrow().ok()?.at(0, 0, 0, 0);
                continue;
            }
            if !self.day_matches(dt) {
                dt = next_day()?;
                continue;
            }
            if self.hours & (1 << dt.hour()) == 0 {
                dt = if dt.hour() == 23 {
                    next_day()?
                } else {
                    at(dt.hour() + 1, 0, 0)?
                };
                continue;
            }
            if self.minutes & (1 << dt.minute()) == 0 {
                dt = if dt.minute() == 59 {
                    if dt.hour() == 23 {
                        next_day()?
                    } else {
                        at(dt.hour() + 1, 0, 0)?
                    }
                } else {
                    at(dt.hour(), dt.minute() + 1, 0)?
                };
                continue;
            }
            if self.seconds & (1 << dt.second()) == 0 {
                dt = dt.checked_add(jiff::SignedDuration::from_secs(1)).ok()?;
                continue;
            }
            let when = tz.to_ambiguous_timestamp(dt).compatible().ok()?;
            let ms = u64::try_from(when.as_millisecond()).ok()?;
            if ms > after {
                return Some(ms);
            }
            dt = dt.checked_add(jiff::SignedDuration::from_secs(1)).ok()?;
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> u64 {
        u64::try_from(s.parse::<Timestamp>().unwrap().as_millisecond()).unwrap()
    }

    fn cron(expr: &str, tz: &str) -> Schedule {
        let s = CronSchedule::Cron {
            expr: expr.into(),
            tz: Some(tz.into()),
        };
        parse(&s, ms("2026-01-01T00:00:00Z")).unwrap()
    }

    #[test]
    fn at_every_and_their_refusals() {
        let now = ms("2026-12-07T03:26:30Z");
        let at = CronSchedule::At {
            at: "2026-12-07T03:26:40.437826Z".into(),
        };
        assert_eq!(
            parse(&at, now).unwrap().first(now),
            Some(ms("2026-12-07T03:26:40.437Z"))
        );
        let past = CronSchedule::At {
            at: "2026-12-07T03:24:30.437Z".into(),
        };
        assert_eq!(
            parse(&past, now).unwrap_err().to_string(),
            "schedule.at is in the past: 2026-12-07T03:24:30.437Z (2 minutes ago). Current time: 2026-12-07T03:26:30.000Z"
        );
        assert!(parse(
            &CronSchedule::At {
                at: "tomorrow".into()
            },
            now
        )
        .is_err());
        let every = parse(
            &CronSchedule::Every {
                every_ms: 7000,
                anchor_ms: None,
            },
            now,
        )
        .unwrap();
        assert_eq!(every.first(now), Some(now + 7000));
        assert_eq!(every.after_run(now + 7000, now + 9100), Some(now + 16_100));
        assert!(parse(
            &CronSchedule::Every {
                every_ms: 10,
                anchor_ms: None
            },
            now
        )
        .is_err());
        let every = |every_ms, anchor_ms| {
            parse(
                &CronSchedule::Every {
                    every_ms,
                    anchor_ms,
                },
                now,
            )
        };
        assert!(every(u64::MAX, None).is_err());
        // An old anchor (a job enabled again) gives the next slot after now, never a past one.
        assert_eq!(
            every(1000, Some(now - 10_500)).unwrap().first(now),
            Some(now + 500)
        );
    }

    #[test]
    fn cron_expressions_in_a_time_zone_across_daylight_saving() {
        let s = cron("0 9 * * 1-5", "Europe/Berlin");
        // Friday 2026-03-27 09:00 CET, then Monday 2026-03-30 09:00 CEST (after the change).
        assert_eq!(
            s.next_after(ms("2026-03-27T07:00:00Z")),
            Some(ms("2026-03-27T08:00:00Z"))
        );
        assert_eq!(
            s.next_after(ms("2026-03-27T08:00:00Z")),
            Some(ms("2026-03-30T07:00:00Z"))
        );
        // 02:30 does not exist on 2026-03-29 in Berlin: the first time after the gap.
        let gap = cron("30 2 * * *", "Europe/Berlin");
        assert_eq!(
            gap.next_after(ms("2026-03-28T12:00:00Z")),
            Some(ms("2026-03-29T01:30:00Z"))
        );
        let every15 = cron("*/15 * * * *", "UTC");
        assert_eq!(
            every15.next_after(ms("2026-05-01T10:07:59Z")),
            Some(ms("2026-05-01T10:15:00Z"))
        );
        let secs = cron("*/10 * * * * *", "UTC");
        assert_eq!(
            secs.next_after(ms("2026-05-01T10:00:00Z")),
            Some(ms("2026-05-01T10:00:10Z"))
        );
        // Day of month or day of week when both are given; names; Sunday as 7.
        let either = cron("0 0 13 * fri", "UTC");
        assert_eq!(
            either.next_after(ms("2026-02-01T00:00:00Z")),
            Some(ms("2026-02-06T00:00:00Z"))
        );
        // Ranges that end on Sunday as 7.
        for expr in ["0 0 * * 1-7", "0 0 * * 0-7", "0 0 * * *"] {
            assert_eq!(
                cron(expr, "UTC").next_after(ms("2026-05-09T12:00:00Z")),
                Some(ms("2026-05-10T00:00:00Z")),
                "{expr}"
            );
        }
        let weekend = cron("0 0 * * fri-sun", "UTC");
        assert_eq!(
            weekend.next_after(ms("2026-05-10T12:00:00Z")),
            Some(ms("2026-05-15T00:00:00Z"))
        );
        assert_eq!(
            weekend.next_after(ms("2026-05-09T12:00:00Z")),
            Some(ms("2026-05-10T00:00:00Z"))
        );
        // The rarest: a leap day, across 2100 (not one).
        let leap = cron("59 59 23 29 2 *", "UTC");
        assert_eq!(
            leap.next_after(ms("2096-03-01T00:00:00Z")),
            Some(ms("2104-02-29T23:59:59Z"))
        );
        let sunday = cron("0 12 * jan 7", "UTC");
        assert_eq!(
            sunday.next_after(ms("2026-05-01T00:00:00Z")),
            Some(ms("2027-01-03T12:00:00Z"))
        );
    }

    #[test]
    fn bad_expressions_and_zones_are_refused() {
        let now = ms("2026-01-01T00:00:00Z");
        for (expr, tz) in [
            ("0 0 */4294967295 * *", "UTC"),
            ("0 1/4294967295 * * *", "UTC"),
            ("* * *", "UTC"),
            ("61 * * * *", "UTC"),
            ("*/0 * * * *", "UTC"),
            ("5-1 * * * *", "UTC"),
            ("0 0 30 2 *", "UTC"),
            ("0 0 * * *", "Mars/Olympus"),
        ] {
            let s = CronSchedule::Cron {
                expr: expr.into(),
                tz: Some(tz.into()),
            };
            assert!(parse(&s, now).is_err(), "{expr} {tz}");
        }
    }
}
