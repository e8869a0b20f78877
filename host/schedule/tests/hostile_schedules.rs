//! Hostile schedules, seeded and bounded: expressions assembled from the
//! tokens cron syntax is made of (and some it is not), random intervals,
//! instants and time zones. Parsing ends in a schedule or a typed error —
//! never a panic — and a schedule that parses previews its next fires
//! without hanging, from instants spread over leap years and DST changes.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use chrono::{DateTime, Utc};
use cronbox_schedule::{Schedule, ScheduleType};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

const SEED: u64 = 0x5eed_cb0c;

const TOKENS: &[&str] = &[
    "*",
    "?",
    "0",
    "1",
    "7",
    "12",
    "23",
    "31",
    "59",
    "60",
    "99999999999999",
    "-1",
    "1-5",
    "5-1",
    "*/7",
    "*/0",
    "0/15",
    "1,3,5",
    ",",
    "-",
    "/",
    "L",
    "W",
    "15W",
    "LW",
    "L-3",
    "5L",
    "6#3",
    "6#9",
    "MON-FRI",
    "SUN",
    "JAN",
    "FEB-DEC",
    "2024",
    "2099",
    "1970-2100",
    "#",
    "é",
    "",
];

/// Plausible tokens of each Quartz field (seconds, minutes, hours, day of
/// month, month, day of week, year).
const FIELDS: [&[&str]; 7] = [
    &["*", "0", "*/7", "0/15", "1,3,5", "1-5", "59"],
    &["*", "0", "*/7", "30", "0-29"],
    &["*", "0", "23", "*/6", "9-17", "2"],
    &["*", "?", "1", "15", "29", "31", "L", "15W", "LW", "L-3"],
    &["*", "1", "2", "12", "JAN", "FEB-DEC", "*/3"],
    &["*", "?", "MON-FRI", "SUN", "5L", "6#3", "0", "7", "1-7"],
    &["*", "2024", "2099", "1970-2100", "2028"],
];

const ZONES: &[&str] = &[
    "UTC",
    "Europe/Berlin",
    "America/New_York",
    "Australia/Lord_Howe",
    "Asia/Kathmandu",
    "Mars/Olympus",
    "",
    "+05:00",
];

fn instant(rng: &mut StdRng) -> DateTime<Utc> {
    // 1970 to 2100: leap years, DST changes and far futures included.
    DateTime::from_timestamp(rng.random_range(0..4_102_444_800_i64), 0).unwrap()
}

#[test]
fn random_cron_expressions_parse_or_are_refused_and_never_hang() {
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut parsed = 0;
    for _ in 0..3_000 {
        // Mostly well-formed field counts and tokens, sometimes junk.
        let fields = if rng.random_bool(0.9) {
            rng.random_range(5..=7)
        } else {
            rng.random_range(1..=9)
        };
        // A 5-field expression is Unix: it starts at the minutes.
        let first = usize::from(fields == 5);
        let expression: Vec<&str> = (0..fields)
            .map(|field| {
                let plausible = FIELDS.get(first + field).filter(|_| rng.random_bool(0.9));
                *plausible.unwrap_or(&TOKENS).choose(&mut rng).unwrap()
            })
            .collect();
        let expression = expression.join(" ");
        let zone = *ZONES.choose(&mut rng).unwrap();
        match Schedule::parse(ScheduleType::Cron, &expression, zone) {
            Ok(schedule) => {
                parsed += 1;
                let now = instant(&mut rng);
                let fires = schedule.preview(now, 5);
                assert!(fires.iter().all(|fire| *fire > now), "{expression:?}");
                assert!(
                    fires.windows(2).all(|pair| pair[0] < pair[1]),
                    "{expression:?}"
                );
            }
            Err(error) => assert!(!error.to_string().is_empty(), "{expression:?}"),
        }
    }
    assert!(
        parsed > 100,
        "only {parsed} expressions parsed: the test lost its teeth"
    );
}

#[test]
fn random_intervals_and_instants_parse_or_are_refused() {
    let mut rng = StdRng::seed_from_u64(SEED);
    let pieces = [
        "0",
        "1",
        "59",
        "3600",
        "-5",
        "1.5",
        "90s",
        "5m",
        "1h",
        "400d",
        "1e9",
        "soon",
        "",
        "18446744073709551616",
        "2026-11-23T00:00:00Z",
        "2026-02-30T00:00:00Z",
        "2026-03-29T02:30:00+01:00",
        "9999-12-31T23:59:59Z",
        "T",
        ":",
    ];
    for _ in 0..3_000 {
        let conf: String = (0..rng.random_range(1..=3))
            .map(|_| *pieces.choose(&mut rng).unwrap())
            .collect();
        for kind in [
            ScheduleType::FixRate,
            ScheduleType::FixDelay,
            ScheduleType::OneShot,
        ] {
            let zone = *ZONES.choose(&mut rng).unwrap();
            if let Ok(schedule) = Schedule::parse(kind, &conf, zone) {
                let now = instant(&mut rng);
                let fires = schedule.preview(now, 3);
                assert!(fires.windows(2).all(|pair| pair[0] < pair[1]), "{conf:?}");
            }
        }
    }
}
