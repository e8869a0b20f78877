//! cronbox's cron against an independent implementation: cronsim (from
//! PyPI, installed once into `target/tools/`), over the 5-field forms both
//! read — lists, ranges, steps, names, `L`, `LW`, `n#k`, `nL` — from
//! starting points across month ends, a leap February and year ends, in
//! UTC (cronsim's daylight-saving rule is not cronbox's; the DST rule and
//! the Quartz-only forms have hand-checked tables in the unit tests).
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::process::Command;

use chrono::{DateTime, NaiveDateTime, Utc};
use cronbox_schedule::{Schedule, ScheduleType};
use serde_json::{Value, json};

const CRONSIM: &str = "cronsim==2.8";
/// Fires compared per expression and start.
const FIRES: usize = 8;

const EXPRESSIONS: &[&str] = &[
    "0 0 L * *",
    "30 12 LW * *",
    "59 23 L 2 *",
    "0 0 * * 5#3",
    "0 0 * * 1#1",
    "0 6 * * 0#5",
    "0 0 * * 5L",
    "45 18 * * 0L",
    "15 9 * * MON-FRI",
    "*/7 3-5 1,15 * *",
    "0 12 29 2 *",
    "0 0 31 * *",
    "5 4 * * SUN",
    "0 0 1 */3 *",
    "0 8-18/2 * * 1-5",
    "10,20 */6 * JAN,JUL *",
    "0 0 * * 6,0",
];

const STARTS: &[&str] = &[
    "2026-01-15T00:00:00",
    "2026-12-31T23:59:00",
    "2027-12-30T23:59:00",
    "2028-02-27T12:00:00",
    "2028-02-29T00:00:00",
    "2026-10-31T00:00:00",
];

/// What cronsim answers: for each expression, for each start, the next
/// [`FIRES`] fires as naive ISO times.
fn cronsim() -> Value {
    let venv = cronbox_tests::python_tool(CRONSIM);
    let script = r#"
import json, sys
from datetime import datetime
from cronsim import CronSim
cases = json.loads(sys.argv[1])
out = {}
for expression in cases["expressions"]:
    out[expression] = {}
    for start in cases["starts"]:
        fires = CronSim(expression, datetime.fromisoformat(start))
        out[expression][start] = [next(fires).isoformat() for _ in range(cases["fires"])]
print(json.dumps(out))
"#;
    let cases = json!({ "expressions": EXPRESSIONS, "starts": STARTS, "fires": FIRES });
    let output = cronbox_tests::run_ok(
        Command::new(venv.join("bin").join("python"))
            .args(["-c", script])
            .arg(cases.to_string()),
        "cronsim",
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn ours(expression: &str, start: &str) -> Vec<String> {
    let schedule = Schedule::parse(ScheduleType::Cron, expression, "UTC").unwrap();
    let start: NaiveDateTime = start.parse().unwrap();
    let mut at: DateTime<Utc> = start.and_utc();
    (0..FIRES)
        .map(|_| {
            at = schedule.next_after(at).unwrap();
            at.naive_utc().format("%Y-%m-%dT%H:%M:%S").to_string()
        })
        .collect()
}

#[test]
fn unix_forms_fire_as_cronsim_says() {
    let theirs = cronsim();
    let mut compared = 0;
    for expression in EXPRESSIONS {
        for start in STARTS {
            let expected: Vec<String> =
                serde_json::from_value(theirs[expression][start].clone()).unwrap();
            assert_eq!(
                ours(expression, start),
                expected,
                "{expression:?} after {start}"
            );
            compared += expected.len();
        }
    }
    assert_eq!(compared, EXPRESSIONS.len() * STARTS.len() * FIRES);
}
