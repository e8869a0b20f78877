//! The schedule tests: cron in both dialects, zones and the DST rule,
//! intervals, one-shots.

use super::*;

fn at(text: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(text)
        .unwrap()
        .with_timezone(&Utc)
}

fn fires(kind: ScheduleType, conf: &str, zone: &str, from: &str, count: usize) -> Vec<String> {
    Schedule::parse(kind, conf, zone)
        .unwrap()
        .preview(at(from), count)
        .into_iter()
        .map(|fire| fire.to_rfc3339_opts(chrono::SecondsFormat::Secs, true))
        .collect()
}

#[test]
fn quartz_with_seconds_fires_every_second() {
    assert_eq!(
        fires(
            ScheduleType::Cron,
            "* * * * * ?",
            "UTC",
            "2026-01-01T00:00:00Z",
            3
        ),
        [
            "2026-01-01T00:00:01Z",
            "2026-01-01T00:00:02Z",
            "2026-01-01T00:00:03Z"
        ]
    );
    assert_eq!(
        fires(
            ScheduleType::Cron,
            "*/15 30 9 * * MON-FRI 2026",
            "UTC",
            "2026-01-02T09:30:20Z",
            3
        ),
        [
            "2026-01-02T09:30:30Z",
            "2026-01-02T09:30:45Z",
            "2026-01-05T09:30:00Z"
        ]
    );
}

#[test]
fn quartz_and_unix_days_of_week_agree() {
    // 2026-01-04 is a Sunday.
    let quartz = fires(
        ScheduleType::Cron,
        "0 0 12 ? * 1",
        "UTC",
        "2026-01-01T00:00:00Z",
        1,
    );
    let unix_zero = fires(
        ScheduleType::Cron,
        "0 12 * * 0",
        "UTC",
        "2026-01-01T00:00:00Z",
        1,
    );
    let unix_seven = fires(
        ScheduleType::Cron,
        "0 12 * * 7",
        "UTC",
        "2026-01-01T00:00:00Z",
        1,
    );
    let named = fires(
        ScheduleType::Cron,
        "0 12 * * SUN",
        "UTC",
        "2026-01-01T00:00:00Z",
        1,
    );
    assert_eq!(quartz, ["2026-01-04T12:00:00Z"]);
    assert_eq!(unix_zero, quartz);
    assert_eq!(unix_seven, quartz);
    assert_eq!(named, quartz);
    // Friday to Sunday, across the week's end.
    assert_eq!(
        fires(
            ScheduleType::Cron,
            "0 0 * * 5-7",
            "UTC",
            "2026-01-01T00:00:00Z",
            3
        ),
        [
            "2026-01-02T00:00:00Z",
            "2026-01-03T00:00:00Z",
            "2026-01-04T00:00:00Z"
        ]
    );
}

#[test]
fn fixed_rate_fixed_delay_and_one_shot() {
    assert_eq!(
        fires(
            ScheduleType::FixRate,
            "90",
            "UTC",
            "2026-01-01T00:00:00Z",
            2
        ),
        ["2026-01-01T00:01:30Z", "2026-01-01T00:03:00Z"]
    );
    assert_eq!(
        fires(
            ScheduleType::FixRate,
            "1h30m",
            "UTC",
            "2026-01-01T00:00:00Z",
            1
        ),
        ["2026-01-01T01:30:00Z"]
    );
    let delay = Schedule::parse(ScheduleType::FixDelay, "10s", "UTC").unwrap();
    assert_eq!(
        delay.next_after(at("2026-01-01T00:00:00Z")),
        None,
        "waits for completion"
    );
    assert_eq!(
        delay.after_completion(at("2026-01-01T00:00:07Z")),
        Some(at("2026-01-01T00:00:17Z"))
    );
    assert_eq!(
        fires(
            ScheduleType::OneShot,
            "2026-06-01T08:00:00+02:00",
            "UTC",
            "2026-01-01T00:00:00Z",
            5
        ),
        ["2026-06-01T06:00:00Z"]
    );
    assert!(fires(ScheduleType::None, "", "UTC", "2026-01-01T00:00:00Z", 5).is_empty());
}

/// (zone, expression, from, expected fires in UTC). The DST changes:
/// America/New_York 2026-03-08 02:00 EST → 03:00 EDT and 2026-11-01
/// 02:00 EDT → 01:00 EST; Europe/Berlin 2026-03-29 02:00 CET → 03:00
/// CEST and 2026-10-25 03:00 CEST → 02:00 CET.
const DST_TABLE: &[(&str, &str, &str, &[&str])] = &[
    // Daily at 02:30: the skipped local time fires at 03:30 EDT (07:30Z).
    (
        "America/New_York",
        "0 30 2 * * ?",
        "2026-03-07T00:00:00Z",
        &[
            "2026-03-07T07:30:00Z",
            "2026-03-08T07:30:00Z",
            "2026-03-09T06:30:00Z",
        ],
    ),
    // Daily at 01:30 on fall-back day: once, at the first (EDT) 01:30.
    (
        "America/New_York",
        "0 30 1 * * ?",
        "2026-10-31T00:00:00Z",
        &[
            "2026-10-31T05:30:00Z",
            "2026-11-01T05:30:00Z",
            "2026-11-02T06:30:00Z",
        ],
    ),
    // Hourly at :00 across spring forward: 01:00 EST, then 03:00 EDT
    // (02:00 shifted to 03:00 coincides and fires once).
    (
        "America/New_York",
        "0 0 * * * ?",
        "2026-03-08T05:30:00Z",
        &[
            "2026-03-08T06:00:00Z",
            "2026-03-08T07:00:00Z",
            "2026-03-08T08:00:00Z",
        ],
    ),
    // Hourly across fall back: 01:00 EDT once, then 02:00 EST.
    (
        "America/New_York",
        "0 0 * * * ?",
        "2026-11-01T04:30:00Z",
        &[
            "2026-11-01T05:00:00Z",
            "2026-11-01T07:00:00Z",
            "2026-11-01T08:00:00Z",
        ],
    ),
    // Berlin, daily 02:15 (Unix form): skipped → 03:15 CEST (01:15Z).
    (
        "Europe/Berlin",
        "15 2 * * *",
        "2026-03-28T00:00:00Z",
        &[
            "2026-03-28T01:15:00Z",
            "2026-03-29T01:15:00Z",
            "2026-03-30T00:15:00Z",
        ],
    ),
    // Berlin, daily 02:15 on fall-back day: once, at 02:15 CEST (00:15Z).
    (
        "Europe/Berlin",
        "15 2 * * *",
        "2026-10-24T00:00:00Z",
        &[
            "2026-10-24T00:15:00Z",
            "2026-10-25T00:15:00Z",
            "2026-10-26T01:15:00Z",
        ],
    ),
];

#[test]
fn dst_changes_follow_the_written_rule_in_two_zones() {
    for (zone, expression, from, expected) in DST_TABLE {
        assert_eq!(
            fires(ScheduleType::Cron, expression, zone, from, expected.len()),
            *expected,
            "{zone} {expression} from {from}"
        );
    }
}

#[test]
fn bad_schedules_name_the_problem() {
    let error =
        |kind, conf: &str, zone: &str| Schedule::parse(kind, conf, zone).unwrap_err().to_string();
    assert!(error(ScheduleType::Cron, "* * *", "UTC").contains("has 3 fields"));
    assert!(
        error(ScheduleType::Cron, "0 61 * * * ?", "UTC").starts_with("invalid cron expression")
    );
    assert!(
        error(ScheduleType::Cron, "0 0 * * *", "Mars/Olympus")
            .contains("unknown time zone \"Mars/Olympus\"")
    );
    assert!(
        error(ScheduleType::Cron, "0 0 1 * 1", "UTC").contains("both day-of-month and day-of-week")
    );
    assert!(error(ScheduleType::Cron, "0 0 0 30 2 ? *", "UTC").contains("never fires"));
    assert!(error(ScheduleType::FixRate, "-5", "UTC").contains("negative"));
    assert!(error(ScheduleType::FixRate, "0", "UTC").contains("minimum"));
    assert!(error(ScheduleType::FixDelay, "400d", "UTC").contains("maximum"));
    assert!(error(ScheduleType::FixRate, "soon", "UTC").contains("invalid interval"));
    assert!(error(ScheduleType::OneShot, "tomorrow", "UTC").contains("RFC 3339"));
    assert!(
        "WEEKLY"
            .parse::<ScheduleType>()
            .unwrap_err()
            .to_string()
            .contains("unknown schedule type")
    );
}
