//! What a job's schedule rules change about its fires, whatever their
//! type: a window (no fire before `starts_at_ms`, none after
//! `ends_at_ms`), a calendar of excluded dates (local dates in the job's
//! zone on which it does not fire, as a Quartz holiday calendar does), and
//! jitter (each fire's run is written up to `jitter_ms` after its planned
//! instant, by an amount fixed for the job and the instant, so that jobs
//! due at :00 spread out).

use std::collections::BTreeSet;

use chrono::{DateTime, Days, NaiveDate, TimeZone, Utc};
use chrono_tz::Tz;
use sha2::{Digest, Sha256};

use super::Schedule;

/// Longest jitter: a jittered run waits, written, for at most this long.
pub const MAX_JITTER_MS: i64 = 300_000;
/// Most excluded dates a job lists.
pub const MAX_EXCLUDED_DATES: usize = 1_000;

/// Dates written `YYYY-MM-DD` (a job's excluded dates, a calendar's), at
/// most [`MAX_EXCLUDED_DATES`]; the first that is not a date is named.
pub fn parse_dates(written: &[String]) -> Result<BTreeSet<NaiveDate>, String> {
    if written.len() > MAX_EXCLUDED_DATES {
        return Err(format!(
            "{} excluded dates; at most {MAX_EXCLUDED_DATES}",
            written.len()
        ));
    }
    written
        .iter()
        .map(|date| {
            NaiveDate::parse_from_str(date, "%Y-%m-%d")
                .map_err(|_| format!("excluded date {date:?} is not a date as YYYY-MM-DD"))
        })
        .collect()
}

/// Dates as written again: `YYYY-MM-DD`, sorted, no repeats.
pub fn date_texts(dates: &BTreeSet<NaiveDate>) -> Vec<String> {
    dates
        .iter()
        .map(|date| date.format("%Y-%m-%d").to_string())
        .collect()
}

/// A job's rules, checked (see `cronbox_api::ScheduleRules` for the
/// fields as written).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    pub starts_at_ms: Option<i64>,
    pub ends_at_ms: Option<i64>,
    pub excluded: BTreeSet<NaiveDate>,
    pub jitter_ms: i64,
    /// What makes one job's jitter differ from another's (its id).
    pub seed: i64,
    pub zone: Option<Tz>,
}

/// Why rules were refused: the field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidRules {
    pub field: &'static str,
    pub message: String,
}

impl Rules {
    /// Rules from their written form, for a job in `zone`.
    pub fn parse(
        written: &cronbox_api::ScheduleRules,
        zone: Tz,
        seed: i64,
    ) -> Result<Rules, InvalidRules> {
        let invalid = |message: String| InvalidRules {
            field: "schedule_rules",
            message,
        };
        for (field, value) in [
            ("schedule_rules.starts_at_ms", written.starts_at_ms),
            ("schedule_rules.ends_at_ms", written.ends_at_ms),
        ] {
            if let Some(ms) = value
                && DateTime::from_timestamp_millis(ms).is_none()
            {
                return Err(InvalidRules {
                    field,
                    message: format!(
                        "{field} {ms} is not an instant (milliseconds since 1970 within years \
                         -262143 to 262142)"
                    ),
                });
            }
        }
        if let (Some(starts), Some(ends)) = (written.starts_at_ms, written.ends_at_ms)
            && ends <= starts
        {
            return Err(invalid(format!(
                "ends_at_ms {ends} is not after starts_at_ms {starts}"
            )));
        }
        if !(0..=MAX_JITTER_MS).contains(&written.jitter_ms) {
            return Err(invalid(format!(
                "jitter_ms {} is outside 0-{MAX_JITTER_MS}",
                written.jitter_ms
            )));
        }
        let excluded = parse_dates(&written.exclude_dates).map_err(invalid)?;
        Ok(Rules {
            starts_at_ms: written.starts_at_ms,
            ends_at_ms: written.ends_at_ms,
            excluded,
            jitter_ms: written.jitter_ms,
            seed,
            zone: Some(zone),
        })
    }

    fn zone(&self) -> Tz {
        self.zone.unwrap_or(Tz::UTC)
    }

    fn local_date(&self, at: DateTime<Utc>) -> NaiveDate {
        at.with_timezone(&self.zone()).date_naive()
    }

    /// The first instant of the local day after `date`, minus a
    /// millisecond: a fire after it is on a later day.
    fn end_of(&self, date: NaiveDate) -> Option<DateTime<Utc>> {
        let next = date.checked_add_days(Days::new(1))?.and_hms_opt(0, 0, 0)?;
        let start = match self.zone().from_local_datetime(&next) {
            chrono::LocalResult::Single(at) | chrono::LocalResult::Ambiguous(at, _) => at,
            // Midnight in a gap: an hour later exists.
            chrono::LocalResult::None => self
                .zone()
                .from_local_datetime(&(next + chrono::Duration::hours(1)))
                .earliest()?,
        };
        Some(start.with_timezone(&Utc) - chrono::Duration::milliseconds(1))
    }

    /// The first fire at or after `candidate` the rules allow, taking the
    /// schedule's next fires past excluded dates.
    fn allow(
        &self,
        schedule: &Schedule,
        mut candidate: Option<DateTime<Utc>>,
    ) -> Option<DateTime<Utc>> {
        // Each step skips at least a whole excluded day.
        for _ in 0..=self.excluded.len() + 1 {
            let at = candidate?;
            if self
                .ends_at_ms
                .is_some_and(|ends| at.timestamp_millis() > ends)
            {
                return None;
            }
            let date = self.local_date(at);
            if !self.excluded.contains(&date) {
                return Some(at);
            }
            candidate = match schedule {
                Schedule::Cron { .. } | Schedule::FixRate(_) => {
                    schedule.next_after(self.end_of(date)?)
                }
                // A one-shot or a fixed delay on an excluded day does not
                // fire then; the delay's chain ends (as if stopped).
                _ => None,
            };
        }
        None
    }

    /// The first fire of a job started at `now`, within the rules.
    pub fn first_fire(&self, schedule: &Schedule, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let starts = self.starts_at_ms.and_then(DateTime::from_timestamp_millis);
        let first = match (starts, schedule) {
            (Some(starts), Schedule::Cron { .. }) if starts > now => {
                schedule.next_after(starts - chrono::Duration::milliseconds(1))
            }
            (Some(starts), Schedule::FixRate(_) | Schedule::FixDelay(_)) if starts > now => {
                Some(starts)
            }
            (Some(starts), Schedule::OneShot(at)) if *at < starts => None,
            _ => schedule.first_fire(now),
        };
        self.allow(schedule, first)
    }

    /// The fire after one planned for `planned`, within the rules.
    pub fn next_after(&self, schedule: &Schedule, planned: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.allow(schedule, schedule.next_after(planned))
    }

    /// For FIX_DELAY: the next fire once a run completed, within the rules.
    pub fn after_completion(
        &self,
        schedule: &Schedule,
        completed: DateTime<Utc>,
    ) -> Option<DateTime<Utc>> {
        self.allow(schedule, schedule.after_completion(completed))
    }

    /// How long after its planned instant `planned_ms` the fire's run is
    /// written for: 0 to `jitter_ms`, the same every time for this job and
    /// instant.
    pub fn jitter(&self, planned_ms: i64) -> i64 {
        if self.jitter_ms == 0 {
            return 0;
        }
        let hash = Sha256::new()
            .chain_update(self.seed.to_le_bytes())
            .chain_update(planned_ms.to_le_bytes())
            .finalize();
        let mut first = [0; 8];
        first.copy_from_slice(&hash[..8]);
        (u64::from_le_bytes(first) % (self.jitter_ms as u64 + 1)) as i64
    }

    /// The next `count` fires after `now`, as their runs are written
    /// (jittered).
    pub fn preview(
        &self,
        schedule: &Schedule,
        now: DateTime<Utc>,
        count: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut fires = Vec::with_capacity(count);
        let mut next = self.first_fire(schedule, now);
        while let Some(at) = next {
            if fires.len() == count {
                break;
            }
            fires.push(at + chrono::Duration::milliseconds(self.jitter(at.timestamp_millis())));
            next = match schedule {
                Schedule::FixDelay(_) => self.allow(schedule, schedule.after_completion(at)),
                _ => self.next_after(schedule, at),
            };
        }
        fires
    }
}
