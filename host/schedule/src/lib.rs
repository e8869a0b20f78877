//! When a job fires: cron (Quartz/xxl-job 6–7 fields with seconds, or Unix
//! 5 fields) in an IANA time zone, fixed rate, fixed delay, one-shot, or
//! none (manual and API triggers only).
//!
//! # The daylight-saving rule
//!
//! Cron fields describe wall-clock times in the job's zone. When the clock
//! jumps:
//! - **a local time that does not exist** (spring forward: 02:30 on the day
//!   the clock goes 02:00 → 03:00) fires at the same distance past the jump,
//!   i.e. read with the offset in force before it (02:30 → 03:30 new time);
//!   if that instant is already taken by an earlier fire, it is not fired
//!   twice;
//! - **a local time that happens twice** (fall back: 01:30 on the day the
//!   clock goes 02:00 → 01:00) fires once, at its first occurrence.
//!
//! So a daily job fires exactly once every day, and fires are always
//! strictly increasing instants. Jobs that should tick at a steady real-time
//! pace (every few seconds or minutes) are best given the zone UTC or a
//! FIX_RATE schedule: in a zone with DST, a wildcard-hour cron has no fires
//! during the repeated hour's second pass.

mod quartz;
mod rules;

pub use rules::{InvalidRules, MAX_EXCLUDED_DATES, MAX_JITTER_MS, Rules, date_texts, parse_dates};

use std::time::Duration;

use chrono::{DateTime, LocalResult, NaiveDateTime, Offset, TimeZone, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

pub use cronbox_api::ScheduleType;
use quartz::QuartzCron;

/// Which cron syntax an expression is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CronDialect {
    /// Quartz / xxl-job: `sec min hour day-of-month month day-of-week [year]`,
    /// day-of-week 1–7 = Sunday–Saturday.
    Quartz,
    /// Unix: `min hour day-of-month month day-of-week`, day-of-week 0–7
    /// (0 and 7 = Sunday); fires at second 0.
    Unix,
}

/// Why a schedule was refused. Every message names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("unknown schedule type {0:?}: use CRON, FIX_RATE, FIX_DELAY, ONE_SHOT or NONE")]
    UnknownType(String),
    #[error(
        "unknown time zone {0:?}: use an IANA name such as UTC, Europe/Berlin or America/New_York"
    )]
    UnknownTimeZone(String),
    #[error(
        "cron expression {expression:?} has {fields} fields: use 5 (Unix: min hour dom month dow) \
         or 6–7 (Quartz: sec min hour dom month dow [year])"
    )]
    CronFieldCount { expression: String, fields: usize },
    #[error("invalid cron expression {expression:?}: {reason}")]
    InvalidCron { expression: String, reason: String },
    #[error("cron expression {0:?} never fires")]
    NeverFires(String),
    #[error("invalid interval {text:?}: {reason}")]
    InvalidInterval { text: String, reason: String },
    #[error("invalid instant {text:?}: expected RFC 3339, e.g. 2026-12-01T09:00:00Z ({reason})")]
    InvalidInstant { text: String, reason: String },
}

/// Shortest FIX_RATE / FIX_DELAY interval.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Longest FIX_RATE / FIX_DELAY interval.
pub const MAX_INTERVAL: Duration = Duration::from_secs(366 * 24 * 3600);

/// A validated schedule.
#[derive(Debug, Clone)]
pub enum Schedule {
    Cron {
        cron: Box<QuartzCron>,
        zone: Tz,
        dialect: CronDialect,
    },
    FixRate(Duration),
    FixDelay(Duration),
    OneShot(DateTime<Utc>),
    None,
}

/// Upper bound on cron candidates examined for one next fire (a guard
/// against expressions that only match non-existent local times).
const MAX_CANDIDATES: usize = 100_000;

impl Schedule {
    /// Parses a schedule: its type, its configuration and the job's zone.
    pub fn parse(kind: ScheduleType, conf: &str, zone: &str) -> Result<Self, ScheduleError> {
        let zone: Tz = zone
            .parse()
            .map_err(|_| ScheduleError::UnknownTimeZone(zone.to_owned()))?;
        let conf = conf.trim();
        match kind {
            ScheduleType::Cron => {
                let (cron, dialect) = parse_cron(conf)?;
                let schedule = Schedule::Cron {
                    cron: Box::new(cron),
                    zone,
                    dialect,
                };
                if schedule.next_after(Utc::now()).is_none() {
                    return Err(ScheduleError::NeverFires(conf.to_owned()));
                }
                Ok(schedule)
            }
            ScheduleType::FixRate => Ok(Schedule::FixRate(parse_interval(conf)?)),
            ScheduleType::FixDelay => Ok(Schedule::FixDelay(parse_interval(conf)?)),
            ScheduleType::OneShot => DateTime::parse_from_rfc3339(conf)
                .map(|at| Schedule::OneShot(at.with_timezone(&Utc)))
                .map_err(|error| ScheduleError::InvalidInstant {
                    text: conf.to_owned(),
                    reason: error.to_string(),
                }),
            ScheduleType::None => Ok(Schedule::None),
        }
    }

    /// The first fire of a job started at `now`.
    pub fn first_fire(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron { .. } => self.next_after(now),
            Schedule::FixRate(every) | Schedule::FixDelay(every) => Some(now + *every),
            Schedule::OneShot(at) => Some(*at),
            Schedule::None => None,
        }
    }

    /// The fire after one planned for `planned` (FIX_DELAY waits for the
    /// run to complete: see [`after_completion`](Self::after_completion)).
    pub fn next_after(&self, planned: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::Cron { cron, zone, .. } => next_cron(cron, *zone, planned),
            Schedule::FixRate(every) => Some(planned + *every),
            Schedule::FixDelay(_) | Schedule::OneShot(_) | Schedule::None => None,
        }
    }

    /// For FIX_DELAY: the next fire once a run completed at `completed`.
    pub fn after_completion(&self, completed: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match self {
            Schedule::FixDelay(delay) => Some(completed + *delay),
            _ => None,
        }
    }

    /// The next `count` fires after `now` (FIX_DELAY assumes runs that take
    /// no time).
    pub fn preview(&self, now: DateTime<Utc>, count: usize) -> Vec<DateTime<Utc>> {
        let mut fires = Vec::with_capacity(count);
        let mut next = self.first_fire(now);
        while let Some(at) = next {
            if fires.len() == count {
                break;
            }
            fires.push(at);
            next = match self {
                Schedule::FixDelay(delay) => Some(at + *delay),
                _ => self.next_after(at),
            };
        }
        fires
    }
}

fn parse_interval(text: &str) -> Result<Duration, ScheduleError> {
    let invalid = |reason: String| ScheduleError::InvalidInterval {
        text: text.to_owned(),
        reason,
    };
    // xxl-job stores whole seconds; also accept "90s", "5m", "1h30m".
    let interval = match text.parse::<i64>() {
        Ok(seconds) if seconds < 0 => return Err(invalid("it is negative".to_owned())),
        Ok(seconds) => Duration::from_secs(seconds as u64),
        Err(_) => parse_duration(text).map_err(invalid)?,
    };
    if interval < MIN_INTERVAL {
        return Err(invalid(format!(
            "shorter than the minimum of {} s",
            MIN_INTERVAL.as_secs()
        )));
    }
    if interval > MAX_INTERVAL {
        return Err(invalid("longer than the maximum of 366 days".to_owned()));
    }
    Ok(interval)
}

/// `1h30m`, `90s`, `500ms`, `2d`: a sum of number+unit parts.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err("it is empty".to_owned());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return Err("expected a number of seconds or a duration like 30s, 5m, 1h".to_owned());
        }
        let number: u64 = rest[..digits]
            .parse()
            .map_err(|_| "number too large".to_owned())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = match &rest[..unit_len] {
            "ms" => Duration::from_millis(1),
            "s" => Duration::from_secs(1),
            "m" => Duration::from_secs(60),
            "h" => Duration::from_secs(3600),
            "d" => Duration::from_secs(86_400),
            other => return Err(format!("unknown unit {other:?} (use ms, s, m, h, d)")),
        };
        rest = &rest[unit_len..];
        total += unit
            .checked_mul(u32::try_from(number).map_err(|_| "number too large".to_owned())?)
            .ok_or_else(|| "too long".to_owned())?;
    }
    Ok(total)
}

/// The Quartz expression a `@` shorthand stands for.
fn shorthand(name: &str) -> Option<&'static str> {
    Some(match name {
        "@yearly" | "@annually" => "0 0 0 1 1 ?",
        "@monthly" => "0 0 0 1 * ?",
        "@weekly" => "0 0 0 ? * 1",
        "@daily" | "@midnight" => "0 0 0 * * ?",
        "@hourly" => "0 0 * * * ?",
        _ => return None,
    })
}

fn parse_cron(expression: &str) -> Result<(QuartzCron, CronDialect), ScheduleError> {
    let invalid = |reason: String| ScheduleError::InvalidCron {
        expression: expression.to_owned(),
        reason,
    };
    let fields: Vec<&str> = expression.split_whitespace().collect();
    let (quartz, dialect) = match fields.len() {
        1 if expression.starts_with('@') => (
            shorthand(expression)
                .ok_or_else(|| {
                    invalid(
                        "unknown shorthand: use @yearly, @monthly, @weekly, @daily or @hourly"
                            .to_owned(),
                    )
                })?
                .to_owned(),
            CronDialect::Quartz,
        ),
        5 => {
            let (dom, dow) = (fields[2], fields[4]);
            if dom != "*" && dom != "?" && dow != "*" && dow != "?" {
                return Err(invalid(
                    "both day-of-month and day-of-week are restricted; Unix cron would fire on \
                     either, which cronbox does not guess: restrict only one"
                        .to_owned(),
                ));
            }
            let dow = unix_day_of_week(dow).map_err(invalid)?;
            (
                format!(
                    "0 {} {} {} {} {}",
                    fields[0], fields[1], fields[2], fields[3], dow
                ),
                CronDialect::Unix,
            )
        }
        6 | 7 => (expression.to_owned(), CronDialect::Quartz),
        count => {
            return Err(ScheduleError::CronFieldCount {
                expression: expression.to_owned(),
                fields: count,
            });
        }
    };
    let fields: Vec<&str> = quartz.split_whitespace().collect();
    let schedule = QuartzCron::parse(&fields).map_err(invalid)?;
    Ok((schedule, dialect))
}

/// Unix day-of-week numbers (0–7, 0 and 7 Sunday) to Quartz (1–7, 1 Sunday).
fn unix_day_of_week(field: &str) -> Result<String, String> {
    let convert = |number: &str| -> Result<u32, String> {
        match number.parse::<u32>() {
            Ok(day @ 0..=7) => Ok(day % 7 + 1),
            _ => Err(format!("day-of-week {number:?} is not 0–7 or a name")),
        }
    };
    // `5L` (the last Friday) and `5#3` (the third): the day converted, the
    // rest as Quartz writes it.
    if let Some((day, nth)) = field.split_once('#') {
        return Ok(format!("{}#{nth}", convert(day)?));
    }
    if let Some(day) = field.strip_suffix(['L', 'l'])
        && !day.is_empty()
        && day.chars().all(|c| c.is_ascii_digit())
    {
        return Ok(format!("{}L", convert(day)?));
    }
    let mut parts = Vec::new();
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (part, None),
        };
        let converted =
            if range == "*" || range == "?" || range.chars().any(|c| c.is_ascii_alphabetic()) {
                range.to_owned()
            } else if let Some((from, to)) = range.split_once('-') {
                let (from, to) = (convert(from)?, convert(to)?);
                if to < from {
                    // 5-7 (Fri..Sun) becomes 6-7,1 (Fri..Sat, Sun).
                    if step.is_some() {
                        return Err(format!(
                            "day-of-week range {range:?} with a step wraps past Sunday"
                        ));
                    }
                    parts.push(format!("{from}-7"));
                    format!("1-{to}")
                } else {
                    format!("{from}-{to}")
                }
            } else {
                convert(range)?.to_string()
            };
        parts.push(match step {
            Some(step) => format!("{converted}/{step}"),
            None => converted,
        });
    }
    Ok(parts.join(","))
}

/// The first cron fire strictly after `after`, by the DST rule above.
fn next_cron(cron: &QuartzCron, zone: Tz, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
    // Walk the expression over naive local wall-clock times (using UTC as a
    // zone without transitions). A local time L fires at L minus some offset
    // the zone uses near `after`, so every L that fires after `after` lies
    // beyond `after` read with the smallest such offset; starting there
    // keeps a fire shifted out of a DST gap, and costs one candidate when no
    // change is near.
    let smallest_offset = [-1, 0, 1]
        .into_iter()
        .filter_map(|days| after.checked_add_signed(chrono::Duration::days(days)))
        .map(|near| zone.offset_from_utc_datetime(&near.naive_utc()).fix())
        .min_by_key(|offset| offset.local_minus_utc())?;
    let start = after.naive_utc() + smallest_offset;
    cron.after(start)
        .take(MAX_CANDIDATES)
        .map(|candidate| local_instant(zone, candidate))
        .find(|instant| *instant > after)
}

/// The instant of a local wall-clock time, by the DST rule.
fn local_instant(zone: Tz, local: NaiveDateTime) -> DateTime<Utc> {
    match zone.from_local_datetime(&local) {
        LocalResult::Single(at) => at.with_timezone(&Utc),
        LocalResult::Ambiguous(first, _) => first.with_timezone(&Utc),
        LocalResult::None => {
            // In a gap: read it with the offset in force before the jump.
            let before = zone
                .offset_from_utc_datetime(&(local - chrono::Duration::hours(12)))
                .fix();
            Utc.from_utc_datetime(&(local - before))
        }
    }
}

#[cfg(test)]
mod tests;
