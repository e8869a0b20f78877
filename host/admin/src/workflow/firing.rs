//! A workflow's schedule as pure decisions: when a saved schedule fires
//! first, and what a fire found due does — run on time (within the
//! misfire threshold), or past it skip to the next (DO_NOTHING) or run
//! once now as a misfire (FIRE_ONCE_NOW).

use chrono::{DateTime, TimeZone, Utc};
use cronbox_api::MisfirePolicy;
use cronbox_protocol::TriggerKind;

use crate::schedule::Schedule;

/// How late a fire may be found and still run as planned.
pub const MISFIRE_THRESHOLD_MS: i64 = 5_000;

fn at(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// The first fire of a schedule saved at `now_ms` (none for a one-shot
/// already past, or NONE).
pub fn first_fire(schedule: &Schedule, now_ms: i64) -> Option<i64> {
    schedule
        .first_fire(at(now_ms))
        .map(|fire| fire.timestamp_millis())
        .filter(|fire| *fire >= now_ms)
}

/// What the fire planned at `planned_ms`, found at `now_ms`, does: the
/// kind of run it starts (if any) and the schedule's next fire.
pub fn due_fire(
    schedule: &Schedule,
    misfire: MisfirePolicy,
    planned_ms: i64,
    now_ms: i64,
) -> (Option<TriggerKind>, Option<i64>) {
    if now_ms - planned_ms <= MISFIRE_THRESHOLD_MS {
        let next = schedule
            .next_after(at(planned_ms))
            .map(|fire| fire.timestamp_millis());
        return (Some(TriggerKind::Schedule), next);
    }
    let next = match schedule {
        Schedule::OneShot(_) => None,
        _ => first_fire(schedule, now_ms),
    };
    match misfire {
        MisfirePolicy::DoNothing => (None, next),
        MisfirePolicy::FireOnceNow => (Some(TriggerKind::Misfire), next),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::ScheduleType;

    const NOON: i64 = 1_795_867_200_000; // 2026-11-28T12:00:00Z

    #[test]
    fn a_fire_on_time_runs_and_one_found_late_follows_the_misfire_policy() {
        let every_minute = Schedule::parse(ScheduleType::Cron, "0 * * * * ?", "UTC").unwrap();
        assert_eq!(
            first_fire(&every_minute, NOON + 30_000),
            Some(NOON + 60_000)
        );
        // On time (or within 5 s): runs, the next planned from it.
        assert_eq!(
            due_fire(&every_minute, MisfirePolicy::DoNothing, NOON, NOON + 4_000),
            (Some(TriggerKind::Schedule), Some(NOON + 60_000))
        );
        // Found 4 min late: skipped, or run once now; planned from now.
        assert_eq!(
            due_fire(
                &every_minute,
                MisfirePolicy::DoNothing,
                NOON,
                NOON + 240_500
            ),
            (None, Some(NOON + 300_000))
        );
        assert_eq!(
            due_fire(
                &every_minute,
                MisfirePolicy::FireOnceNow,
                NOON,
                NOON + 240_500
            ),
            (Some(TriggerKind::Misfire), Some(NOON + 300_000))
        );
        // A one-shot fires once; one already past when saved never does.
        let once = Schedule::parse(ScheduleType::OneShot, "2026-11-28T12:00:00Z", "UTC").unwrap();
        assert_eq!(first_fire(&once, NOON - 1), Some(NOON));
        assert_eq!(first_fire(&once, NOON + 1), None);
        assert_eq!(
            due_fire(&once, MisfirePolicy::DoNothing, NOON, NOON),
            (Some(TriggerKind::Schedule), None)
        );
    }

    #[test]
    fn a_zoned_cron_fires_at_the_zones_local_time() {
        let nine_in_tokyo =
            Schedule::parse(ScheduleType::Cron, "0 0 9 * * ?", "Asia/Tokyo").unwrap();
        // 12:00 UTC is 21:00 in Tokyo: the next 09:00 there is 00:00 UTC.
        assert_eq!(
            first_fire(&nine_in_tokyo, NOON),
            Some(NOON + 12 * 3_600_000)
        );
    }
}
