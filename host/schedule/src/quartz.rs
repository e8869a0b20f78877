//! Quartz cron expressions, as xxl-job reads them (`CronExpression`):
//! `second minute hour day-of-month month day-of-week [year]`, with names
//! (`JAN`–`DEC`, `SUN`–`SAT`, day-of-week 1–7 = Sunday–Saturday), lists,
//! ranges, steps, `?`, and the day constructs the `cron` crate lacks:
//!
//! - day-of-month `L` (the last day), `L-n` (n days before it), `nW` (the
//!   weekday nearest day n, never leaving the month), `LW` (the last
//!   weekday);
//! - day-of-week `nL` (the last such weekday of the month) and `n#k` (the
//!   k-th such weekday).
//!
//! An expression is evaluated over naive wall-clock times; the caller maps
//! them to instants in the job's zone (see the DST rule in `schedule`).
//! Every refusal names the field, the token and what that field allows.
//!
//! Where Quartz refuses an expression with both day fields restricted,
//! cronbox does too; `*` in both (which Quartz refuses) is taken as every
//! day, as the `cron` crate cronbox used before did.

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, NaiveTime, Timelike};

/// The first and last year an expression can name (Quartz's range).
const FIRST_YEAR: i32 = 1970;
const LAST_YEAR: i32 = 2199;

/// A parsed Quartz expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuartzCron {
    seconds: u64,
    minutes: u64,
    hours: u64,
    day_of_month: DayOfMonth,
    /// Bits 1–12.
    months: u64,
    day_of_week: DayOfWeek,
    /// Years allowed, as offsets from [`FIRST_YEAR`]; `None`: every year.
    years: Option<Vec<bool>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfMonth {
    Every,
    /// Bits 1–31.
    Days(u64),
    /// `L` (0) or `L-n`.
    Last(u32),
    /// `nW`.
    NearestWeekday(u32),
    /// `LW`.
    LastWeekday,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum DayOfWeek {
    Every,
    /// Bits 1–7, 1 = Sunday.
    Days(u64),
    /// `nL`: the last weekday `n` (1 = Sunday) of the month.
    Last(u32),
    /// `n#k`: the k-th weekday `n` of the month.
    Nth(u32, u32),
}

/// One field's rules: its name, its range and the names it accepts.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    /// What the field allows, for a refusal.
    allows: &'static str,
}

const SECOND: Field = Field {
    name: "second",
    min: 0,
    max: 59,
    names: &[],
    allows: "0-59, *, lists (a,b), ranges (a-b) and steps (*/n, a/n, a-b/n)",
};
const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
    allows: "0-59, *, lists (a,b), ranges (a-b) and steps (*/n, a/n, a-b/n)",
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
    allows: "0-23, *, lists (a,b), ranges (a-b) and steps (*/n, a/n, a-b/n)",
};
const DAY_OF_MONTH: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
    names: &[],
    allows: "1-31, *, ?, lists, ranges, steps, L (last day), L-n (n days before it), nW \
             (weekday nearest day n) or LW (last weekday)",
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &[
        "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
    ],
    allows: "1-12 or JAN-DEC, *, lists, ranges and steps",
};
const DAY_OF_WEEK: Field = Field {
    name: "day-of-week",
    min: 1,
    max: 7,
    names: &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"],
    allows: "1-7 (1 = Sunday) or SUN-SAT, *, ?, lists, ranges, steps, nL (last weekday n of \
             the month) or n#k (k-th weekday n)",
};
const YEAR: Field = Field {
    name: "year",
    min: FIRST_YEAR as u32,
    max: LAST_YEAR as u32,
    names: &[],
    allows: "1970-2199, *, lists, ranges and steps",
};

impl Field {
    fn refuse(&self, token: &str, why: &str) -> String {
        format!(
            "{} field: {token:?} {why}; it allows {}",
            self.name, self.allows
        )
    }

    /// A number or a name of this field.
    fn value(&self, token: &str, whole: &str) -> Result<u32, String> {
        let value = match token.parse::<u32>() {
            Ok(number) => number,
            Err(_) => self
                .names
                .iter()
                .position(|name| name.eq_ignore_ascii_case(token))
                .map(|index| self.min + index as u32)
                .ok_or_else(|| self.refuse(whole, "is not understood"))?,
        };
        if (self.min..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(self.refuse(whole, &format!("is outside {}-{}", self.min, self.max)))
        }
    }

    /// The values of a plain field: `*`, lists, ranges, steps.
    fn values(&self, text: &str) -> Result<Vec<u32>, String> {
        let mut values = Vec::new();
        for part in text.split(',') {
            if part.is_empty() {
                return Err(self.refuse(text, "has an empty list item"));
            }
            let (range, step) = match part.split_once('/') {
                Some((range, step)) => {
                    let step: u32 =
                        step.parse().ok().filter(|step| *step > 0).ok_or_else(|| {
                            self.refuse(part, "has a step that is not a positive number")
                        })?;
                    (range, Some(step))
                }
                None => (part, None),
            };
            let (from, to) = if range == "*" {
                (self.min, self.max)
            } else if let Some((from, to)) = range.split_once('-') {
                let (from, to) = (self.value(from, part)?, self.value(to, part)?);
                if to < from {
                    return Err(self.refuse(part, "is a range that runs backwards"));
                }
                (from, to)
            } else {
                let from = self.value(range, part)?;
                // `a/n` runs from a to the field's end.
                (from, if step.is_some() { self.max } else { from })
            };
            values.extend((from..=to).step_by(step.unwrap_or(1) as usize));
        }
        Ok(values)
    }

    fn bits(&self, text: &str) -> Result<u64, String> {
        Ok(self
            .values(text)?
            .into_iter()
            .fold(0, |bits, value| bits | 1 << value))
    }
}

fn parse_day_of_month(text: &str) -> Result<DayOfMonth, String> {
    let field = &DAY_OF_MONTH;
    let upper = text.to_ascii_uppercase();
    if text == "*" || text == "?" {
        return Ok(DayOfMonth::Every);
    }
    if upper == "L" {
        return Ok(DayOfMonth::Last(0));
    }
    if upper == "LW" {
        return Ok(DayOfMonth::LastWeekday);
    }
    if let Some(offset) = upper.strip_prefix("L-") {
        return match offset.parse::<u32>() {
            Ok(offset @ 0..=30) => Ok(DayOfMonth::Last(offset)),
            _ => Err(field.refuse(text, "needs 0-30 days after L-")),
        };
    }
    if let Some(day) = upper.strip_suffix('W') {
        return match day.parse::<u32>() {
            Ok(day @ 1..=31) => Ok(DayOfMonth::NearestWeekday(day)),
            _ => Err(field.refuse(text, "needs a day 1-31 before W")),
        };
    }
    if upper.contains('L') || upper.contains('W') {
        return Err(field.refuse(
            text,
            "combines L or W with other days, which Quartz does not",
        ));
    }
    Ok(DayOfMonth::Days(field.bits(text)?))
}

fn parse_day_of_week(text: &str) -> Result<DayOfWeek, String> {
    let field = &DAY_OF_WEEK;
    if text == "*" || text == "?" {
        return Ok(DayOfWeek::Every);
    }
    let upper = text.to_ascii_uppercase();
    if upper == "L" {
        // Quartz reads a lone L in day-of-week as 7, Saturday.
        return Ok(DayOfWeek::Days(1 << 7));
    }
    if let Some((day, nth)) = text.split_once('#') {
        let day = field.value(day, text)?;
        return match nth.parse::<u32>() {
            Ok(nth @ 1..=5) => Ok(DayOfWeek::Nth(day, nth)),
            _ => Err(field.refuse(text, "needs 1-5 after #")),
        };
    }
    if let Some(day) = upper.strip_suffix('L') {
        return Ok(DayOfWeek::Last(field.value(day, text)?));
    }
    Ok(DayOfWeek::Days(field.bits(text)?))
}

/// The weekday nearest `day` of the month, within the month: a Saturday
/// moves to the Friday before, a Sunday to the Monday after, unless that
/// leaves the month (then the other way, as Quartz does). `None` when the
/// month has no such day.
fn nearest_weekday(year: i32, month: u32, day: u32) -> Option<u32> {
    let last = last_day(year, month);
    if day > last {
        return None;
    }
    let weekday = NaiveDate::from_ymd_opt(year, month, day)?
        .weekday()
        .number_from_sunday();
    Some(match weekday {
        7 if day == 1 => 3, // Saturday the 1st: Monday the 3rd.
        7 => day - 1,
        1 if day == last => day - 2, // Sunday the last: Friday before.
        1 => day + 1,
        _ => day,
    })
}

fn last_day(year: i32, month: u32) -> u32 {
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    NaiveDate::from_ymd_opt(next_year, next_month, 1)
        .and_then(|first| first.pred_opt())
        .map_or(28, |last| last.day())
}

impl QuartzCron {
    /// Parses the six or seven fields of a Quartz expression.
    pub fn parse(fields: &[&str]) -> Result<QuartzCron, String> {
        let (second, minute, hour, dom, month, dow) = match fields {
            [s, m, h, dom, month, dow] | [s, m, h, dom, month, dow, _] => {
                (*s, *m, *h, *dom, *month, *dow)
            }
            _ => return Err(format!("{} fields; Quartz has 6 or 7", fields.len())),
        };
        for (field, text) in [
            (&SECOND, second),
            (&MINUTE, minute),
            (&HOUR, hour),
            (&MONTH, month),
        ] {
            if text == "?" {
                return Err(field.refuse(text, "is only for day-of-month or day-of-week"));
            }
        }
        let day_of_month = parse_day_of_month(dom)?;
        let day_of_week = parse_day_of_week(dow)?;
        if day_of_month != DayOfMonth::Every && day_of_week != DayOfWeek::Every {
            return Err(format!(
                "day-of-month {dom:?} and day-of-week {dow:?} are both restricted; Quartz allows \
                 one, with ? in the other"
            ));
        }
        let years = match fields.get(6) {
            None => None,
            Some(text) if *text == "*" => None,
            Some(text) => {
                let mut allowed = vec![false; (LAST_YEAR - FIRST_YEAR + 1) as usize];
                for year in YEAR.values(text)? {
                    allowed[(year - FIRST_YEAR as u32) as usize] = true;
                }
                Some(allowed)
            }
        };
        Ok(QuartzCron {
            seconds: SECOND.bits(second)?,
            minutes: MINUTE.bits(minute)?,
            hours: HOUR.bits(hour)?,
            day_of_month,
            months: MONTH.bits(month)?,
            day_of_week,
            years,
        })
    }

    fn year_allowed(&self, year: i32) -> bool {
        (FIRST_YEAR..=LAST_YEAR).contains(&year)
            && self
                .years
                .as_ref()
                .is_none_or(|years| years[(year - FIRST_YEAR) as usize])
    }

    fn day_matches(&self, date: NaiveDate) -> bool {
        let (year, month, day) = (date.year(), date.month(), date.day());
        let day_of_month = match &self.day_of_month {
            DayOfMonth::Every => true,
            DayOfMonth::Days(days) => days & (1 << day) != 0,
            DayOfMonth::Last(offset) => last_day(year, month).checked_sub(*offset) == Some(day),
            DayOfMonth::NearestWeekday(wanted) => {
                nearest_weekday(year, month, *wanted) == Some(day)
            }
            DayOfMonth::LastWeekday => {
                nearest_weekday(year, month, last_day(year, month)) == Some(day)
            }
        };
        let weekday = date.weekday().number_from_sunday();
        let day_of_week = match &self.day_of_week {
            DayOfWeek::Every => true,
            DayOfWeek::Days(days) => days & (1 << weekday) != 0,
            DayOfWeek::Last(wanted) => weekday == *wanted && day + 7 > last_day(year, month),
            DayOfWeek::Nth(wanted, nth) => weekday == *wanted && (day - 1) / 7 + 1 == *nth,
        };
        day_of_month && day_of_week
    }

    /// The first time of day at or after `from` the time fields allow.
    fn first_time_from(&self, from: NaiveTime) -> Option<NaiveTime> {
        let first_bit = |bits: u64, from: u32| (from..64).find(|bit| bits & (1 << bit) != 0);
        let mut hour = first_bit(self.hours, from.hour())?;
        loop {
            let same_hour = hour == from.hour();
            let mut minute = first_bit(self.minutes, if same_hour { from.minute() } else { 0 });
            while let Some(m) = minute {
                let same_minute = same_hour && m == from.minute();
                if let Some(s) =
                    first_bit(self.seconds, if same_minute { from.second() } else { 0 })
                {
                    return NaiveTime::from_hms_opt(hour, m, s);
                }
                minute = first_bit(self.minutes, m + 1);
            }
            hour = first_bit(self.hours, hour + 1)?;
        }
    }

    /// The first time the expression names strictly after `after`.
    pub fn next_after(&self, after: NaiveDateTime) -> Option<NaiveDateTime> {
        let start = after.with_nanosecond(0)? + Duration::seconds(1);
        let mut date = start.date();
        let mut from = start.time();
        loop {
            if date.year() > LAST_YEAR {
                return None;
            }
            if !self.year_allowed(date.year()) {
                date = NaiveDate::from_ymd_opt(date.year() + 1, 1, 1)?;
                from = NaiveTime::MIN;
                continue;
            }
            if self.months & (1 << date.month()) == 0 {
                date = if date.month() == 12 {
                    NaiveDate::from_ymd_opt(date.year() + 1, 1, 1)?
                } else {
                    NaiveDate::from_ymd_opt(date.year(), date.month() + 1, 1)?
                };
                from = NaiveTime::MIN;
                continue;
            }
            if self.day_matches(date)
                && let Some(time) = self.first_time_from(from)
            {
                return Some(date.and_time(time));
            }
            date = date.succ_opt()?;
            from = NaiveTime::MIN;
        }
    }

    /// Every time the expression names after `after`, in order.
    pub fn after(&self, after: NaiveDateTime) -> impl Iterator<Item = NaiveDateTime> + '_ {
        std::iter::successors(self.next_after(after), |last| self.next_after(*last))
    }
}
