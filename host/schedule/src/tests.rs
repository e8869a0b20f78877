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

/// Quartz's day constructs, each against a hand-checked calendar (2026:
/// Feb 15 and Mar 15 are Sundays, Aug 1 a Saturday, Nov 1 a Sunday, May 31
/// a Sunday, Jan 31 2027 a Sunday; 2028 is a leap year).
#[test]
fn quartz_last_weekday_and_nth_constructs_fire_as_xxl_job_reads_them() {
    let cron = |conf: &str, from: &str, count: usize| {
        fires(ScheduleType::Cron, conf, "UTC", from, count)
            .into_iter()
            .map(|fire| fire[..10].to_owned())
            .collect::<Vec<_>>()
    };
    // L, L-n: the last day, n days before it; across a leap February.
    assert_eq!(
        cron("0 0 0 L * ?", "2026-01-15T00:00:00Z", 3),
        ["2026-01-31", "2026-02-28", "2026-03-31"]
    );
    assert_eq!(
        cron("0 0 0 L * ?", "2028-01-31T00:00:00Z", 2),
        ["2028-02-29", "2028-03-31"]
    );
    assert_eq!(
        cron("0 0 0 L-2 * ?", "2026-01-15T00:00:00Z", 3),
        ["2026-01-29", "2026-02-26", "2026-03-29"]
    );
    // nW: a Sunday moves to Monday, a Saturday the 1st to Monday the 3rd
    // (never into the month before); a day the month lacks is skipped.
    assert_eq!(
        cron("0 0 0 15W * ?", "2026-01-01T00:00:00Z", 3),
        ["2026-01-15", "2026-02-16", "2026-03-16"]
    );
    assert_eq!(
        cron("0 0 0 1W * ?", "2026-07-05T00:00:00Z", 4),
        ["2026-08-03", "2026-09-01", "2026-10-01", "2026-11-02"]
    );
    assert_eq!(
        cron("0 0 0 31W * ?", "2026-04-01T00:00:00Z", 2),
        ["2026-05-29", "2026-07-31"]
    );
    // LW: the last weekday.
    assert_eq!(
        cron("0 0 0 LW * ?", "2026-05-01T00:00:00Z", 1),
        ["2026-05-29"]
    );
    assert_eq!(
        cron("0 0 0 LW * ?", "2027-01-01T00:00:00Z", 1),
        ["2027-01-29"]
    );
    // n#k and nL in day-of-week (6 = Friday), by number or name.
    let third_friday = ["2026-01-16", "2026-02-20", "2026-03-20"];
    assert_eq!(
        cron("0 0 0 ? * 6#3", "2026-01-01T00:00:00Z", 3),
        third_friday
    );
    assert_eq!(
        cron("0 0 0 ? * fri#3", "2026-01-01T00:00:00Z", 3),
        third_friday
    );
    assert_eq!(
        cron("0 0 0 ? * 6L", "2026-01-01T00:00:00Z", 3),
        ["2026-01-30", "2026-02-27", "2026-03-27"]
    );
    // The same in the 5-field Unix form (5 = Friday there).
    assert_eq!(cron("0 0 * * 5#3", "2026-01-01T00:00:00Z", 3), third_friday);
    assert_eq!(
        cron("0 0 * * 5L", "2026-01-01T00:00:00Z", 1),
        ["2026-01-30"]
    );
    assert_eq!(cron("0 0 L * *", "2026-02-01T00:00:00Z", 1), ["2026-02-28"]);
    // Years: only those named; then no fire at all.
    assert_eq!(
        cron("0 0 0 1 1 ? 2027-2028", "2026-06-01T00:00:00Z", 5),
        ["2027-01-01", "2028-01-01"]
    );
    // Shorthands.
    assert_eq!(cron("@monthly", "2026-01-15T00:00:00Z", 1), ["2026-02-01"]);
    assert_eq!(cron("@weekly", "2026-01-01T00:00:00Z", 1), ["2026-01-04"]);
}

/// Every refusal names the field, the token and what the field allows.
#[test]
fn a_bad_cron_field_is_named_with_its_token_and_what_it_allows() {
    let error = |conf: &str| {
        Schedule::parse(ScheduleType::Cron, conf, "UTC")
            .unwrap_err()
            .to_string()
    };
    let cases = [
        (
            "0 0 0 15X * ?",
            "day-of-month field: \"15X\"",
            "nW (weekday nearest day n)",
        ),
        (
            "0 0 0 ? * 6#9",
            "day-of-week field: \"6#9\"",
            "needs 1-5 after #",
        ),
        ("0 61 * * * ?", "minute field: \"61\"", "outside 0-59"),
        ("0 0 25 * * ?", "hour field: \"25\"", "outside 0-23"),
        ("0 0 0 L 13 ?", "month field: \"13\"", "JAN-DEC"),
        ("0 0 0 ? * FUN", "day-of-week field: \"FUN\"", "SUN-SAT"),
        (
            "0 0 0 L-40 * ?",
            "day-of-month field: \"L-40\"",
            "0-30 days",
        ),
        ("0 0 0 1 1 ? 1800", "year field: \"1800\"", "1970-2199"),
        (
            "0 0 0 5-1 * ?",
            "day-of-month field: \"5-1\"",
            "runs backwards",
        ),
        ("0 */0 * * * ?", "minute field: \"*/0\"", "positive"),
        (
            "? 0 0 * * ?",
            "second field: \"?\"",
            "only for day-of-month or day-of-week",
        ),
        (
            "0 0 0 15 * 6",
            "day-of-month \"15\" and day-of-week \"6\"",
            "with ? in the other",
        ),
        ("@fortnightly", "unknown shorthand", "@daily"),
    ];
    for (conf, names, allows) in cases {
        let message = error(conf);
        assert!(
            message.contains(names) && message.contains(allows),
            "{conf}: {message}"
        );
    }
}

fn rules(written: cronbox_api::ScheduleRules, zone: &str, seed: i64) -> Rules {
    Rules::parse(&written, zone.parse().unwrap(), seed).unwrap()
}

fn ruled(conf: &str, zone: &str, rules: &Rules, from: &str, count: usize) -> Vec<String> {
    let schedule = Schedule::parse(ScheduleType::Cron, conf, zone).unwrap();
    rules
        .preview(&schedule, at(from), count)
        .into_iter()
        .map(|fire| fire.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .collect()
}

/// A window bounds the fires; a calendar skips its dates in the job's
/// zone (a holiday), also for a job firing every second.
#[test]
fn a_window_and_excluded_dates_bound_and_skip_fires() {
    let window = rules(
        cronbox_api::ScheduleRules {
            starts_at_ms: Some(at("2026-03-10T00:00:00Z").timestamp_millis()),
            ends_at_ms: Some(at("2026-03-12T23:00:00Z").timestamp_millis()),
            ..Default::default()
        },
        "UTC",
        1,
    );
    assert_eq!(
        ruled("0 0 12 * * ?", "UTC", &window, "2026-03-01T00:00:00Z", 10),
        [
            "2026-03-10T12:00:00.000Z",
            "2026-03-11T12:00:00.000Z",
            "2026-03-12T12:00:00.000Z"
        ],
        "none before the start, none after the end"
    );
    let fixed = Schedule::parse(ScheduleType::FixRate, "1h", "UTC").unwrap();
    assert_eq!(
        window.first_fire(&fixed, at("2026-03-01T00:00:00Z")),
        Some(at("2026-03-10T00:00:00Z")),
        "a fixed rate starts at the window's start"
    );
    let holidays = rules(
        cronbox_api::ScheduleRules {
            exclude_dates: vec!["2026-12-26".into(), "2026-12-25".into()],
            ..Default::default()
        },
        "Europe/Berlin",
        1,
    );
    assert_eq!(
        ruled(
            "0 0 9 * * ?",
            "Europe/Berlin",
            &holidays,
            "2026-12-24T00:00:00Z",
            3
        ),
        [
            "2026-12-24T08:00:00.000Z",
            "2026-12-27T08:00:00.000Z",
            "2026-12-28T08:00:00.000Z"
        ]
    );
    // Every second: the first fire after the holidays is local midnight
    // (23:00 UTC the evening before, in Berlin's winter).
    assert_eq!(
        ruled(
            "* * * * * ?",
            "Europe/Berlin",
            &holidays,
            "2026-12-24T22:59:58Z",
            3
        ),
        [
            "2026-12-24T22:59:59.000Z",
            "2026-12-26T23:00:00.000Z",
            "2026-12-26T23:00:01.000Z"
        ]
    );
    let refused = |written: cronbox_api::ScheduleRules| {
        Rules::parse(&written, chrono_tz::Tz::UTC, 0)
            .unwrap_err()
            .message
    };
    assert!(
        refused(cronbox_api::ScheduleRules {
            exclude_dates: vec!["25/12/2026".into()],
            ..Default::default()
        })
        .contains("\"25/12/2026\" is not a date")
    );
    assert!(
        refused(cronbox_api::ScheduleRules {
            starts_at_ms: Some(10),
            ends_at_ms: Some(5),
            ..Default::default()
        })
        .contains("not after starts_at_ms")
    );
    assert!(
        refused(cronbox_api::ScheduleRules {
            jitter_ms: MAX_JITTER_MS + 1,
            ..Default::default()
        })
        .contains("jitter_ms")
    );
}

/// Jitter stays inside its window, is the same for a job and an instant
/// every time, and differs between jobs.
#[test]
fn jitter_spreads_fires_inside_its_window_and_is_stable_per_job() {
    let jittered = |seed: i64| {
        rules(
            cronbox_api::ScheduleRules {
                jitter_ms: 30_000,
                ..Default::default()
            },
            "UTC",
            seed,
        )
    };
    let minute = Schedule::parse(ScheduleType::Cron, "0 * * * * ?", "UTC").unwrap();
    let from = at("2026-01-01T00:00:00Z");
    let plain = Rules::default().preview(&minute, from, 50);
    let mut offsets_by_job = Vec::new();
    for job in 1..=20 {
        let fires = jittered(job).preview(&minute, from, 50);
        assert_eq!(fires, jittered(job).preview(&minute, from, 50), "stable");
        let offsets: Vec<i64> = fires
            .iter()
            .zip(&plain)
            .map(|(fire, planned)| (*fire - *planned).num_milliseconds())
            .collect();
        assert!(
            offsets.iter().all(|ms| (0..=30_000).contains(ms)),
            "{offsets:?}"
        );
        offsets_by_job.push(offsets);
    }
    let first_offsets: std::collections::BTreeSet<i64> =
        offsets_by_job.iter().map(|offsets| offsets[0]).collect();
    assert!(
        first_offsets.len() >= 15,
        "20 jobs spread over the window: {first_offsets:?}"
    );
    let spread: std::collections::BTreeSet<i64> = offsets_by_job[0].iter().copied().collect();
    assert!(spread.len() >= 40, "one job's fires differ too: {spread:?}");
}
