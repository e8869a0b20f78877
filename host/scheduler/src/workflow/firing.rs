//! A workflow's schedule as pure decisions: its timetable (the schedule
//! within its rules' window and excluded dates), when a saved schedule
//! fires first, what a fire found due does — run on time (within the
//! misfire threshold), or past it skip to the next (DO_NOTHING) or run
//! once now as a misfire (FIRE_ONCE_NOW) — and what the overlap policy
//! makes of a fire while runs are in progress.

use chrono::{DateTime, TimeZone, Utc};
use cronbox_api::{MisfirePolicy, OverlapPolicy, WorkflowSchedule};
use cronbox_protocol::TriggerKind;

use crate::schedule::{Rules, Schedule, ScheduleError};

/// How late a fire may be found and still run as planned.
pub const MISFIRE_THRESHOLD_MS: i64 = 5_000;

fn at(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// A workflow's schedule checked: its fires within its rules.
#[derive(Debug, Clone)]
pub struct Timetable {
    schedule: Schedule,
    rules: Rules,
}

/// A workflow schedule refused: the field and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct InvalidSchedule {
    pub field: String,
    pub message: String,
}

impl Timetable {
    /// Checks `written`, refusing what a job's schedule refuses, naming
    /// the field; `seed` (the workflow's id) spreads its jitter. The
    /// shared calendars it names are the caller's to add
    /// ([`Timetable::map_rules`]).
    pub fn parse(written: &WorkflowSchedule, seed: i64) -> Result<Timetable, InvalidSchedule> {
        let invalid = |field: &str, message: String| InvalidSchedule {
            field: field.to_owned(),
            message,
        };
        let schedule = Schedule::parse(
            written.schedule_type,
            &written.schedule_conf,
            &written.time_zone,
        )
        .map_err(|error| {
            let field = match error {
                ScheduleError::UnknownTimeZone(_) => "schedule.time_zone",
                ScheduleError::UnknownType(_) => "schedule.schedule_type",
                _ => "schedule.schedule_conf",
            };
            invalid(field, error.to_string())
        })?;
        let rules = match &written.rules {
            None => Rules::default(),
            Some(rules) => {
                if rules.overlap != OverlapPolicy::Allow {
                    return Err(invalid(
                        "schedule.rules.overlap",
                        "a workflow's overlap is `schedule.overlap`".to_owned(),
                    ));
                }
                let zone = written.time_zone.parse().map_err(|_| {
                    invalid(
                        "schedule.time_zone",
                        format!("unknown time zone {:?}", written.time_zone),
                    )
                })?;
                Rules::parse(rules, zone, seed).map_err(|refused| {
                    invalid(
                        &refused.field.replace("schedule_rules", "schedule.rules"),
                        refused.message,
                    )
                })?
            }
        };
        Ok(Timetable { schedule, rules })
    }

    /// The first fire of a schedule saved at `now_ms` (none for a
    /// one-shot already past, or past the window's end).
    pub fn first_fire(&self, now_ms: i64) -> Option<i64> {
        self.rules
            .first_fire(&self.schedule, at(now_ms))
            .map(|fire| fire.timestamp_millis())
            .filter(|fire| *fire >= now_ms)
    }

    /// The timetable with its rules changed by `change` (a tenant's
    /// calendars added).
    pub fn map_rules(self, change: impl FnOnce(Rules) -> Rules) -> Timetable {
        Timetable {
            rules: change(self.rules),
            ..self
        }
    }

    /// How long after its planned instant `planned_ms` a fire starts its
    /// run: 0 to the rules' jitter, the same every time for this workflow
    /// and instant.
    pub fn jitter(&self, planned_ms: i64) -> i64 {
        self.rules.jitter(planned_ms)
    }

    /// Whether the next fire waits for the run a fire started to end
    /// (FIX_DELAY).
    pub fn waits_for_runs(&self) -> bool {
        matches!(self.schedule, Schedule::FixDelay(_))
    }

    /// For FIX_DELAY: the next fire once the run a fire started ended at
    /// `ended_ms`, within the rules.
    pub fn after_run(&self, ended_ms: i64) -> Option<i64> {
        self.rules
            .after_completion(&self.schedule, at(ended_ms))
            .map(|fire| fire.timestamp_millis())
    }

    /// The instants of the schedule in `(from_ms, to_ms]`, at most `max`
    /// (`Err` with how many there are past it; FIX_DELAY has none to run
    /// again: it follows its runs' ends).
    pub fn fires_between(&self, from_ms: i64, to_ms: i64, max: usize) -> Result<Vec<i64>, usize> {
        let mut fires = Vec::new();
        if self.waits_for_runs() {
            return Ok(fires);
        }
        let mut next = self
            .rules
            .first_fire(&self.schedule, at(from_ms))
            .filter(|fire| fire.timestamp_millis() > from_ms)
            .or_else(|| self.rules.next_after(&self.schedule, at(from_ms)));
        while let Some(fire) = next {
            let ms = fire.timestamp_millis();
            if ms > to_ms {
                break;
            }
            if fires.len() == max {
                return Err(max + 1);
            }
            if ms > from_ms {
                fires.push(ms);
            }
            next = self.rules.next_after(&self.schedule, fire);
        }
        Ok(fires)
    }

    /// What the fire planned at `planned_ms`, found at `now_ms`, does: the
    /// kind of run it starts (if any) and the schedule's next fire.
    pub fn due_fire(
        &self,
        misfire: MisfirePolicy,
        planned_ms: i64,
        now_ms: i64,
    ) -> (Option<TriggerKind>, Option<i64>) {
        // Jitter delays the fire: it is late past its jittered instant.
        if now_ms - planned_ms - self.jitter(planned_ms) <= MISFIRE_THRESHOLD_MS {
            let next = self
                .rules
                .next_after(&self.schedule, at(planned_ms))
                .map(|fire| fire.timestamp_millis());
            return (Some(TriggerKind::Schedule), next);
        }
        let next = match self.schedule {
            Schedule::OneShot(_) => None,
            _ => self.first_fire(now_ms),
        };
        match misfire {
            MisfirePolicy::DoNothing => (None, next),
            MisfirePolicy::FireOnceNow => (Some(TriggerKind::Misfire), next),
        }
    }
}

/// What a fire due to start a run does, given its workflow's runs in
/// progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Overlap {
    /// Start a run.
    Start,
    /// Start none.
    Skip,
    /// Wait for the runs in progress to end, then start one.
    Buffer,
    /// Cancel the runs in progress, then start one.
    CancelThenStart,
}

/// What `policy` makes of a fire while `running` runs are in progress
/// and a fire is already waiting (`buffered`) or not.
pub fn overlap(policy: OverlapPolicy, running: usize, buffered: bool) -> Overlap {
    match policy {
        _ if running == 0 => Overlap::Start,
        OverlapPolicy::Allow => Overlap::Start,
        OverlapPolicy::Skip => Overlap::Skip,
        OverlapPolicy::BufferOne if buffered => Overlap::Skip,
        OverlapPolicy::BufferOne => Overlap::Buffer,
        OverlapPolicy::CancelOther => Overlap::CancelThenStart,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::ScheduleType;

    fn timetable(kind: ScheduleType, conf: &str, zone: &str) -> Timetable {
        Timetable::of(&WorkflowSchedule {
            schedule_type: kind,
            schedule_conf: conf.to_owned(),
            time_zone: zone.to_owned(),
            misfire: MisfirePolicy::DoNothing,
            input: None,
            overlap: OverlapPolicy::Allow,
            rules: None,
        })
        .unwrap()
    }

    impl Timetable {
        fn of(written: &WorkflowSchedule) -> Result<Timetable, InvalidSchedule> {
            Timetable::parse(written, 7)
        }
    }

    const NOON: i64 = 1_795_867_200_000; // 2026-11-28T12:00:00Z

    #[test]
    fn a_fire_on_time_runs_and_one_found_late_follows_the_misfire_policy() {
        let every_minute = timetable(ScheduleType::Cron, "0 * * * * ?", "UTC");
        assert_eq!(every_minute.first_fire(NOON + 30_000), Some(NOON + 60_000));
        // On time (or within 5 s): runs, the next planned from it.
        assert_eq!(
            every_minute.due_fire(MisfirePolicy::DoNothing, NOON, NOON + 4_000),
            (Some(TriggerKind::Schedule), Some(NOON + 60_000))
        );
        // Found 4 min late: skipped, or run once now; planned from now.
        assert_eq!(
            every_minute.due_fire(MisfirePolicy::DoNothing, NOON, NOON + 240_500),
            (None, Some(NOON + 300_000))
        );
        assert_eq!(
            every_minute.due_fire(MisfirePolicy::FireOnceNow, NOON, NOON + 240_500),
            (Some(TriggerKind::Misfire), Some(NOON + 300_000))
        );
        // A one-shot fires once; one already past when saved never does.
        let once = timetable(ScheduleType::OneShot, "2026-11-28T12:00:00Z", "UTC");
        assert_eq!(once.first_fire(NOON - 1), Some(NOON));
        assert_eq!(once.first_fire(NOON + 1), None);
        assert_eq!(
            once.due_fire(MisfirePolicy::DoNothing, NOON, NOON),
            (Some(TriggerKind::Schedule), None)
        );
    }

    #[test]
    fn a_zoned_cron_fires_at_the_zones_local_time() {
        let nine_in_tokyo = timetable(ScheduleType::Cron, "0 0 9 * * ?", "Asia/Tokyo");
        // 12:00 UTC is 21:00 in Tokyo: the next 09:00 there is 00:00 UTC.
        assert_eq!(nine_in_tokyo.first_fire(NOON), Some(NOON + 12 * 3_600_000));
    }

    #[test]
    fn rules_window_exclude_and_jitter_a_workflows_fires_and_list_backfill_instants() {
        let mut written = WorkflowSchedule {
            schedule_type: ScheduleType::Cron,
            schedule_conf: "0 0 12 * * ?".to_owned(),
            time_zone: "UTC".to_owned(),
            misfire: MisfirePolicy::DoNothing,
            input: None,
            overlap: OverlapPolicy::Allow,
            rules: Some(cronbox_api::ScheduleRules {
                exclude_dates: vec!["2026-11-29".to_owned()],
                ends_at_ms: Some(NOON + 3 * 86_400_000),
                ..Default::default()
            }),
        };
        let table = Timetable::of(&written).unwrap();
        // 11-29 is excluded: after today's noon comes 11-30's.
        assert_eq!(
            table.due_fire(MisfirePolicy::DoNothing, NOON, NOON),
            (Some(TriggerKind::Schedule), Some(NOON + 2 * 86_400_000))
        );
        // The window ends on 12-01 at noon: that fire is the last.
        assert_eq!(
            table.due_fire(
                MisfirePolicy::DoNothing,
                NOON + 3 * 86_400_000,
                NOON + 3 * 86_400_000
            ),
            (Some(TriggerKind::Schedule), None)
        );
        written.rules.as_mut().unwrap().jitter_ms = 400_000;
        let refused = Timetable::of(&written).unwrap_err();
        assert!(refused.message.contains("jitter_ms 400000"), "{refused}");
        // Jitter: the same delay for the same instant, within the bound.
        written.rules.as_mut().unwrap().jitter_ms = 1_000;
        let jittered = Timetable::of(&written).unwrap();
        assert!((0..=1_000).contains(&jittered.jitter(NOON)));
        assert_eq!(jittered.jitter(NOON), jittered.jitter(NOON));
        written.rules.as_mut().unwrap().jitter_ms = 0;
        // Backfill: the instants in a range, bounded.
        assert_eq!(
            Timetable::of(&written).unwrap().fires_between(
                NOON - 86_400_000,
                NOON + 2 * 86_400_000,
                10
            ),
            Ok(vec![NOON, NOON + 2 * 86_400_000])
        );
        assert_eq!(
            Timetable::of(&written).unwrap().fires_between(
                NOON - 86_400_000,
                NOON + 2 * 86_400_000,
                1
            ),
            Err(2)
        );
        // FIX_DELAY: the next fire follows the run's end.
        written.rules = None;
        written.schedule_type = ScheduleType::FixDelay;
        written.schedule_conf = "30".to_owned();
        let delay = Timetable::of(&written).unwrap();
        assert!(delay.waits_for_runs());
        assert_eq!(
            delay.due_fire(MisfirePolicy::DoNothing, NOON, NOON),
            (Some(TriggerKind::Schedule), None)
        );
        assert_eq!(delay.after_run(NOON + 5_000), Some(NOON + 35_000));
    }

    #[test]
    fn the_overlap_policy_decides_a_fire_while_runs_are_in_progress() {
        use OverlapPolicy::*;
        assert_eq!(overlap(Skip, 0, false), Overlap::Start);
        assert_eq!(overlap(Allow, 2, false), Overlap::Start);
        assert_eq!(overlap(Skip, 1, false), Overlap::Skip);
        assert_eq!(overlap(BufferOne, 1, false), Overlap::Buffer);
        assert_eq!(overlap(BufferOne, 1, true), Overlap::Skip);
        assert_eq!(overlap(CancelOther, 1, false), Overlap::CancelThenStart);
    }
}
