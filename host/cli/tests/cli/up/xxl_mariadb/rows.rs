//! The jobs the test's xxl-job holds, each a trap for an import that
//! trims, unescapes, reads NULL loosely or drops a field: xxl-job 3.5's
//! schema, the rows written into it and read back, and the checks of a
//! plan against them.

use std::collections::HashMap;

use super::super::*;
use super::server::Mariadb;

/// xxl-job 3.5's two tables, as its `tables_xxl_job.sql` makes them.
pub(super) const SCHEMA: &str =
    "CREATE DATABASE xxl_job DEFAULT CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
USE xxl_job;
CREATE TABLE xxl_job_group (
  id int NOT NULL AUTO_INCREMENT,
  app_name varchar(64) NOT NULL,
  name varchar(64) NOT NULL,
  address_type tinyint NOT NULL DEFAULT 0,
  address_list text,
  access_token varchar(255) DEFAULT NULL,
  update_time datetime DEFAULT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE xxl_job_info (
  id int NOT NULL AUTO_INCREMENT,
  job_group int NOT NULL,
  name varchar(255) NOT NULL,
  add_time datetime DEFAULT NULL,
  update_time datetime DEFAULT NULL,
  author varchar(64) DEFAULT NULL,
  alarm_email varchar(255) DEFAULT NULL,
  schedule_type varchar(50) NOT NULL DEFAULT 'NONE',
  schedule_conf varchar(128) DEFAULT NULL,
  misfire_strategy varchar(50) NOT NULL DEFAULT 'DO_NOTHING',
  executor_route_strategy varchar(50) DEFAULT NULL,
  executor_handler varchar(255) DEFAULT NULL,
  executor_param text DEFAULT NULL,
  executor_block_strategy varchar(50) DEFAULT NULL,
  executor_timeout int NOT NULL DEFAULT 0,
  executor_fail_retry_count int NOT NULL DEFAULT 0,
  glue_type varchar(50) NOT NULL,
  glue_source mediumtext,
  glue_remark varchar(128) DEFAULT NULL,
  glue_updatetime datetime DEFAULT NULL,
  child_jobid varchar(255) DEFAULT NULL,
  trigger_status tinyint NOT NULL DEFAULT 0,
  trigger_last_time bigint NOT NULL DEFAULT 0,
  trigger_next_time bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
INSERT INTO xxl_job_group (id, app_name, name, address_type, access_token, update_time)
  VALUES (1, 'orders', '订单', 0, 'orders-token', now());
";

/// Parameters a handler may be given, each a trap for an import that
/// trims, unescapes or reads NULL loosely.
fn params() -> Vec<Option<String>> {
    let mut params: Vec<Option<String>> = [
        " leading",
        "trailing ",
        "\ttabbed\t",
        "two\nlines\n",
        "crlf\r\n",
        "quote ' and \" and \\ backslash",
        "\\n not a newline",
        "NULL",
        "\\N",
        "null",
        "",
        "   ",
        "a,b),(c",
        "{\"json\": [1, 2, \"x\"]}",
        "订单 ✓ émoji 🎉",
        "ctrl-z \u{1a} and bell \u{7}",
    ]
    .into_iter()
    .map(|param| Some(param.to_owned()))
    .collect();
    params.push(None);
    params.push(Some("long ".repeat(400)));
    params
}

/// Names, each a trap for an import that trims or cuts them into one.
fn names() -> Vec<String> {
    let long = "日报".repeat(40) + &"x".repeat(20);
    vec![
        "plain".to_owned(),
        "trailing space ".to_owned(),
        " leading space".to_owned(),
        format!("{long} one"),
        format!("{long} two"),
        "twice".to_owned(),
        "twice".to_owned(),
        "   ".to_owned(),
    ]
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02X}")).collect()
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).unwrap())
        .collect()
}

/// How many jobs the test's xxl-job holds.
pub(super) const JOBS: usize = 200;

/// xxl-job's ten route strategies, its three block strategies, its two
/// misfire strategies and its schedule types, given out in turn.
const ROUTES: [&str; 10] = [
    "FIRST",
    "LAST",
    "ROUND",
    "RANDOM",
    "CONSISTENT_HASH",
    "LEAST_FREQUENTLY_USED",
    "LEAST_RECENTLY_USED",
    "FAILOVER",
    "BUSYOVER",
    "SHARDING_BROADCAST",
];
const BLOCKS: [&str; 3] = ["SERIAL_EXECUTION", "DISCARD_LATER", "COVER_EARLY"];
const MISFIRES: [&str; 2] = ["DO_NOTHING", "FIRE_ONCE_NOW"];
const SCHEDULES: [(&str, &str); 3] = [("CRON", "0 0 2 * * ?"), ("FIX_RATE", "3600"), ("NONE", "")];

/// A row of `xxl_job_info` as the database holds it (text read as hex:
/// nothing between the server and the test rewrites it).
pub(super) struct SourceJob {
    name: String,
    pub(super) param: Option<String>,
    /// The other columns a cronbox job keeps, as text.
    columns: HashMap<&'static str, String>,
}

/// The columns compared beside name and param.
pub(super) const KEPT: [&str; 10] = [
    "schedule_type",
    "schedule_conf",
    "misfire_strategy",
    "executor_route_strategy",
    "executor_block_strategy",
    "executor_timeout",
    "executor_fail_retry_count",
    "executor_handler",
    "trigger_status",
    "child_jobid",
];

/// The jobs as the database holds them, by xxl-job id.
fn source_rows(mariadb: &Mariadb) -> HashMap<i64, SourceJob> {
    let kept: Vec<String> = KEPT
        .iter()
        .map(|column| format!("IFNULL({column}, '')"))
        .collect();
    mariadb
        .sql(
            &format!(
                "SELECT id, HEX(name), HEX(executor_param), executor_param IS NULL, {} \
                 FROM xxl_job.xxl_job_info",
                kept.join(", ")
            ),
            false,
        )
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split('\t').collect();
            let name = String::from_utf8(unhex(fields[1])).unwrap();
            let param = (fields[3] == "0").then(|| String::from_utf8(unhex(fields[2])).unwrap());
            let columns = KEPT
                .iter()
                .zip(&fields[4..])
                .map(|(column, value)| (*column, (*value).to_owned()))
                .collect();
            let job = SourceJob {
                name,
                param,
                columns,
            };
            (fields[0].parse().unwrap(), job)
        })
        .collect()
}

/// Every field of planned job `job` (`--json`'s) against its row: the
/// definition as the mapping documents it (a timeout of 0 or past 24 h is
/// 24 h), started as it ran, its children.
fn check_fields(export: &str, id: i64, job: &Value, source: &SourceJob) {
    let spec = &job["spec"];
    let column = |name: &str| source.columns[name].as_str();
    let schedule_type = match column("schedule_type") {
        "" => "NONE",
        kind => kind,
    };
    let timeout: i64 = column("executor_timeout").parse().unwrap();
    let timeout_ms = match timeout * 1000 {
        ms if ms <= 0 || ms > 86_400_000 => 86_400_000,
        ms => ms,
    };
    let children: Vec<i64> = column("child_jobid")
        .split(',')
        .filter_map(|id| id.trim().parse().ok())
        .collect();
    let fields = [
        (
            "schedule_type",
            spec["schedule_type"].clone(),
            json!(schedule_type),
        ),
        (
            "schedule_conf",
            spec["schedule_conf"].clone(),
            json!(column("schedule_conf")),
        ),
        (
            "misfire",
            spec["misfire"].clone(),
            json!(column("misfire_strategy")),
        ),
        (
            "route",
            spec["route"].clone(),
            json!(column("executor_route_strategy")),
        ),
        (
            "block",
            spec["block_strategy"].clone(),
            json!(column("executor_block_strategy")),
        ),
        ("timeout", spec["timeout_ms"].clone(), json!(timeout_ms)),
        (
            "retries",
            spec["retry_count"].clone(),
            json!(column("executor_fail_retry_count").parse::<i64>().unwrap()),
        ),
        (
            "handler",
            spec["executor_handler"].clone(),
            json!(column("executor_handler")),
        ),
        ("xxl_job_id", spec["xxl_job_id"].clone(), json!(id)),
        (
            "start",
            job["start"].clone(),
            json!(column("trigger_status") == "1" && schedule_type != "NONE"),
        ),
        ("children", job["children"].clone(), json!(children)),
    ];
    for (field, planned, expected) in fields {
        assert_eq!(planned, expected, "{export}: job {id}'s {field}");
    }
}

/// Writes the test's [`JOBS`] jobs into `mariadb`'s `xxl_job_info` (each
/// route, block and misfire strategy and schedule type in turn, the
/// [`params`] and [`names`] traps, children in chains) and reads them back
/// as the database holds them.
pub(super) fn fill(mariadb: &Mariadb) -> HashMap<i64, SourceJob> {
    let names = names();
    let params = params();
    let mut inserts = String::from("USE xxl_job;\n");
    for at in 0..JOBS {
        let name = names.get(at).cloned().unwrap_or(format!("job {at}"));
        let param = match &params[at % params.len()] {
            Some(param) => format!("CONVERT(UNHEX('{}') USING utf8mb4)", hex(param.as_bytes())),
            None => "NULL".to_owned(),
        };
        let (schedule_type, schedule_conf) = SCHEDULES[at % SCHEDULES.len()];
        // A child now and then: the next job (a chain, no cycle).
        let children = if at % 7 == 0 && at + 2 <= JOBS {
            format!("'{}'", at + 2)
        } else {
            "NULL".to_owned()
        };
        inserts.push_str(&format!(
            "INSERT INTO xxl_job_info (id, job_group, name, schedule_type, schedule_conf, \
             misfire_strategy, executor_route_strategy, executor_handler, executor_param, \
             executor_block_strategy, executor_timeout, executor_fail_retry_count, glue_type, \
             child_jobid, trigger_status, add_time) VALUES ({id}, 1, \
             CONVERT(UNHEX('{name}') USING utf8mb4), '{schedule_type}', '{schedule_conf}', \
             '{misfire}', '{route}', 'handler{handler}', {param}, '{block}', {timeout}, \
             {retries}, 'BEAN', {children}, {started}, now());\n",
            id = at + 1,
            name = hex(name.as_bytes()),
            misfire = MISFIRES[at % MISFIRES.len()],
            route = ROUTES[at % ROUTES.len()],
            handler = at % 5,
            block = BLOCKS[at % BLOCKS.len()],
            timeout = [0, 30, 100_000, 86_400][at % 4],
            retries = at % 4,
            started = at % 2,
        ));
    }
    mariadb.sql(&inserts, false);
    source_rows(mariadb)
}

/// A plan (`--json`'s) of every job in `source`: the protocol it chose,
/// each job created with every field as its row holds it (`batch`: read
/// from `mariadb -B`, which writes NULL and the text NULL alike), each
/// name kept or made unique with a note.
pub(super) fn check_plan(
    source: &HashMap<i64, SourceJob>,
    export: &str,
    plan: &Value,
    batch: bool,
    protocol: &str,
) {
    assert_eq!(
        plan["protocol"], protocol,
        "{export}: {}",
        plan["protocol_from"]
    );
    let jobs = plan["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), source.len(), "{export}: {plan}");
    let mut seen = std::collections::HashSet::new();
    for job in jobs {
        let id = job["xxl_id"].as_i64().unwrap();
        let row = &source[&id];
        let (name, param) = (&row.name, &row.param);
        assert_eq!(job["action"]["action"], "create", "{export}: {job}");
        check_fields(export, id, job, row);
        let expected = match param.as_deref() {
            Some("NULL") if batch => "",
            param => param.unwrap_or_default(),
        };
        assert_eq!(
            job["spec"]["param"].as_str().unwrap(),
            expected,
            "{export}: the param of job {id}"
        );
        let kept = job["name"].as_str().unwrap();
        assert!(seen.insert(kept.to_owned()), "two jobs named {kept:?}");
        let notes = job["notes"].to_string();
        if kept != name {
            assert!(
                kept.ends_with(&format!(" #{id}")) && notes.contains("named"),
                "{export}: job {id} named {kept:?} from {name:?}: {notes}"
            );
        } else {
            assert!(!notes.contains("named"), "{notes}");
        }
    }
}
