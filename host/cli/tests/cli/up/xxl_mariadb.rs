//! xxl-job 3.5's tables (and a copy in 3.4's schema) in a real MariaDB
//! (Debian's, started on a socket of its own, no network), exported by
//! MariaDB's own `mysqldump` in the options users pass, by `mariadb -B` and
//! by `SELECT ... INTO OUTFILE` (with and without escapes) and as JSON,
//! imported with `cronbox import xxl-job`: every job's parameter arrives
//! byte for byte as the database holds it, every name as it is or made
//! unique with a note saying why.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use super::session::{cli, json};
use super::*;

/// A MariaDB server of the test's own, on a Unix socket only.
struct Mariadb {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    server: Child,
}

impl Drop for Mariadb {
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
    }
}

impl Mariadb {
    fn start() -> Mariadb {
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        let socket = dir.path().join("mysqld.sock");
        let installed = Command::new("mariadb-install-db")
            .args(["--no-defaults", "--user=root", "--skip-test-db"])
            .arg(format!("--datadir={}", data.display()))
            .arg("--auth-root-authentication-method=normal")
            .output()
            .expect("mariadb-install-db (Debian's mariadb-server; .ci/run installs it)");
        assert!(
            installed.status.success(),
            "{}",
            String::from_utf8_lossy(&installed.stderr)
        );
        let server = Command::new("mariadbd")
            .args(["--no-defaults", "--user=root", "--skip-networking"])
            .arg(format!("--datadir={}", data.display()))
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--pid-file={}", dir.path().join("pid").display()))
            .arg(format!(
                "--log-error={}",
                dir.path().join("error.log").display()
            ))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mariadbd");
        let mariadb = Mariadb {
            _dir: dir,
            socket,
            server,
        };
        // Ready once it answers on its socket: the client waits for it
        // (`--wait` retries the connection), up to a minute.
        let ready = Command::new("mariadb-admin")
            .arg("--no-defaults")
            .arg(format!("--socket={}", mariadb.socket.display()))
            .args(["-uroot", "--wait=60", "--connect-timeout=1", "ping"])
            .output()
            .is_ok_and(|output| output.status.success());
        assert!(ready, "mariadbd did not answer on its socket");
        mariadb
    }

    /// Runs `sql` with the `mariadb` client; its output (`--batch`:
    /// tab-separated, a header line of column names when `header`).
    fn sql(&self, sql: &str, header: bool) -> String {
        let mut client = Command::new("mariadb")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .args(["-uroot", "--batch", "--default-character-set=utf8mb4"])
            .args((!header).then_some("--skip-column-names"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        client
            .stdin
            .take()
            .unwrap()
            .write_all(sql.as_bytes())
            .unwrap();
        let output = client.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout).unwrap()
    }

    /// `mysqldump OPTIONS DATABASE xxl_job_group xxl_job_info`, written
    /// to `path`.
    fn dump(&self, database: &str, options: &[&str], path: &Path) {
        let output = Command::new("mysqldump")
            .arg("--no-defaults")
            .arg(format!("--socket={}", self.socket.display()))
            .arg("-uroot")
            .args(options)
            .args([database, "xxl_job_group", "xxl_job_info"])
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "mysqldump {options:?}: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        std::fs::write(path, output.stdout).unwrap();
    }
}

/// xxl-job 3.5's two tables, as its `tables_xxl_job.sql` makes them.
const SCHEMA: &str =
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
const JOBS: usize = 200;

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
struct SourceJob {
    name: String,
    param: Option<String>,
    /// The other columns a cronbox job keeps, as text.
    columns: HashMap<&'static str, String>,
}

/// The columns compared beside name and param.
const KEPT: [&str; 10] = [
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_mysqldump_in_every_option_imports_every_param_byte_for_byte() {
    let _turn = TESTS.turn();
    let mariadb = Mariadb::start();
    mariadb.sql(SCHEMA, false);
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
    let source = source_rows(&mariadb);
    assert_eq!(source.len(), JOBS);

    let data = tempfile::tempdir().unwrap();
    let (mut stack, _, at) = up(data.path(), None);
    let base = format!("http://{}", at.admin);
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let token = token.trim();
    let dumps = tempfile::tempdir().unwrap();
    let import = |files: &[&Path], apply: bool| {
        let mut args = vec!["import", "xxl-job"];
        args.extend(files.iter().map(|file| file.to_str().unwrap()));
        args.extend(["--zone", "UTC"]);
        if apply {
            args.push("--apply");
        }
        json(&base, token, &args)
    };
    // A plan of every job, each param as the database holds it (`batch`:
    // read from `mariadb -B`, which writes NULL and the text NULL alike),
    // each name kept or made unique with a note.
    let check_as = |export: &str, plan: &Value, batch: bool, protocol: &str| {
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
    };

    let check = |export: &str, plan: &Value, batch: bool| {
        check_as(export, plan, batch, "xxl-job-3.5");
    };

    // Every dump option gives the same plan, each param as the database
    // holds it, each name kept or made unique with a note.
    let options: [&[&str]; 10] = [
        &[],
        &["--extended-insert=FALSE"],
        &["--complete-insert"],
        &["--hex-blob"],
        &["--compact"],
        &["--insert-ignore"],
        &["--replace"],
        &["--skip-extended-insert", "--complete-insert", "--compact"],
        &["--skip-opt"],
        &["--no-create-info", "--complete-insert"],
    ];
    for (at, option) in options.iter().enumerate() {
        let path = dumps.path().join(format!("dump-{at}.sql"));
        mariadb.dump("xxl_job", option, &path);
        check(
            &format!("mysqldump {option:?}"),
            &import(&[&path], false),
            false,
        );
    }
    // And each table as `mariadb -B` prints it.
    let groups = dumps.path().join("xxl_job_group.tsv");
    let infos = dumps.path().join("xxl_job_info.tsv");
    std::fs::write(
        &groups,
        mariadb.sql("SELECT * FROM xxl_job.xxl_job_group", true),
    )
    .unwrap();
    std::fs::write(
        &infos,
        mariadb.sql("SELECT * FROM xxl_job.xxl_job_info", true),
    )
    .unwrap();
    check("mariadb -B", &import(&[&groups, &infos], false), true);

    // And as `SELECT * ... INTO OUTFILE` writes them, without a header:
    // MySQL's defaults (tabs, backslash escapes), a CSV in quotes, and one
    // without escapes (`--escaped-by ''`).
    let outfiles: [(&str, &str, &[&str]); 3] = [
        ("txt", "", &[]),
        (
            "csv",
            "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"'",
            &[],
        ),
        (
            "csv",
            "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY ''",
            &["--escaped-by", ""],
        ),
    ];
    for (at, (extension, fields, flags)) in outfiles.into_iter().enumerate() {
        let dir = dumps.path().join(format!("outfile-{at}"));
        std::fs::create_dir(&dir).unwrap();
        let files = ["xxl_job_group", "xxl_job_info"].map(|table| {
            let file = dir.join(format!("{table}.{extension}"));
            mariadb.sql(
                &format!(
                    "SELECT * FROM xxl_job.{table} INTO OUTFILE '{}' {fields}",
                    file.display()
                ),
                false,
            );
            file
        });
        let mut args = vec!["import", "xxl-job"];
        args.extend(files.iter().map(|file| file.to_str().unwrap()));
        args.extend(flags);
        check(
            &format!("INTO OUTFILE {fields}"),
            &json(&base, token, &args),
            false,
        );
    }

    // And as JSON, an array of objects per table, as MariaDB's
    // JSON_ARRAYAGG writes it.
    let dir = dumps.path().join("json");
    std::fs::create_dir(&dir).unwrap();
    let tables: [(&str, Vec<&str>); 2] = [
        (
            "xxl_job_group",
            vec![
                "id",
                "app_name",
                "name",
                "address_type",
                "address_list",
                "access_token",
            ],
        ),
        (
            "xxl_job_info",
            ["id", "job_group", "name", "executor_param", "glue_type"]
                .into_iter()
                .chain(KEPT)
                .collect(),
        ),
    ];
    let files = tables.map(|(table, columns)| {
        let file = dir.join(format!("{table}.json"));
        let pairs: Vec<String> = columns
            .iter()
            .map(|column| format!("'{column}', {column}"))
            .collect();
        mariadb.sql(
            &format!(
                "SELECT JSON_ARRAYAGG(JSON_OBJECT({})) FROM xxl_job.{table} \
                 INTO OUTFILE '{}' FIELDS ESCAPED BY ''",
                pairs.join(", "),
                file.display()
            ),
            false,
        );
        file
    });
    check("JSON", &import(&[&files[0], &files[1]], false), false);

    // The same rows in xxl-job 3.4's schema (`job_desc`, `title`, no
    // group token): told apart by their columns, the token given.
    mariadb.sql(
        "CREATE DATABASE xxl_job34; \
         CREATE TABLE xxl_job34.xxl_job_group AS SELECT id, app_name, name AS title, \
           address_type, address_list, update_time FROM xxl_job.xxl_job_group; \
         CREATE TABLE xxl_job34.xxl_job_info AS SELECT id, job_group, name AS job_desc, \
           add_time, update_time, author, alarm_email, schedule_type, schedule_conf, \
           misfire_strategy, executor_route_strategy, executor_handler, executor_param, \
           executor_block_strategy, executor_timeout, executor_fail_retry_count, glue_type, \
           glue_source, glue_remark, glue_updatetime, child_jobid, trigger_status, \
           trigger_last_time, trigger_next_time FROM xxl_job.xxl_job_info;",
        false,
    );
    let old = dumps.path().join("dump-3.4.sql");
    mariadb.dump("xxl_job34", &[], &old);
    let plan = json(
        &base,
        token,
        &[
            "import",
            "xxl-job",
            old.to_str().unwrap(),
            "--zone",
            "UTC",
            "--access-token",
            "shared-token",
        ],
    );
    check_as("mysqldump of 3.4's schema", &plan, false, "xxl-job-3.4");

    // Applied, then applied again: the jobs in cronbox hold the params as
    // the database does, and the second import changes nothing.
    let dump = dumps.path().join("dump-0.sql");
    let applied = import(&[&dump], true);
    let api = AdminClient::new(&base, token);
    let cronbox: HashMap<String, String> = api
        .api
        .jobs(&JobQuery::default())
        .await
        .unwrap()
        .into_iter()
        .filter(|listed| listed.job.group_name == "orders")
        .map(|listed| (listed.job.name, listed.job.param))
        .collect();
    assert_eq!(cronbox.len(), source.len(), "{applied}");
    let orders = api.api.groups().await.unwrap();
    let orders = orders.iter().find(|group| group.name == "orders").unwrap();
    assert_eq!(orders.legacy, Some(cronbox_api::LegacyProtocol::XxlJob35));
    for job in applied["jobs"].as_array().unwrap() {
        let id = job["xxl_id"].as_i64().unwrap();
        let param = &source[&id].param;
        let name = job["name"].as_str().unwrap();
        assert_eq!(
            cronbox[name],
            param.clone().unwrap_or_default(),
            "job {id} ({name:?})"
        );
    }
    let again = import(&[&dump], true);
    assert!(
        again["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|job| job["action"]["action"] == "exists"),
        "{again}"
    );

    // A job the admin refuses (its cron does not parse) among new ones:
    // it is named with the admin's reason, the others are made, and the
    // import exits 1.
    mariadb.sql(
        "INSERT INTO xxl_job.xxl_job_info (id, job_group, name, schedule_type, schedule_conf, \
         executor_handler, glue_type) VALUES \
         (1001, 1, 'new one', 'CRON', '0 0 3 * * ?', 'demoHandler', 'BEAN'), \
         (1002, 1, 'bad cron', 'CRON', 'every day at three', 'demoHandler', 'BEAN'), \
         (1003, 1, 'new two', 'CRON', '0 0 4 * * ?', 'demoHandler', 'BEAN');",
        false,
    );
    let dump = dumps.path().join("dump-more.sql");
    mariadb.dump("xxl_job", &[], &dump);
    let (code, table, said) = cli(
        &base,
        token,
        &[
            "import",
            "xxl-job",
            dump.to_str().unwrap(),
            "--zone",
            "UTC",
            "--apply",
        ],
    );
    assert_eq!(code, 1, "{table}{said}");
    assert!(said.contains("1 jobs were refused by the admin"), "{said}");
    let bad = table
        .lines()
        .find(|line| line.starts_with("1002 "))
        .unwrap();
    assert!(
        bad.contains("refused")
            && bad.contains("the admin refused it")
            && bad.contains("schedule_conf"),
        "{bad}"
    );
    let names: Vec<String> = api
        .api
        .jobs(&JobQuery::default())
        .await
        .unwrap()
        .into_iter()
        .map(|listed| listed.job.name)
        .collect();
    assert!(
        names.contains(&"new one".to_owned()) && names.contains(&"new two".to_owned()),
        "{names:?}"
    );
    terminate(&mut stack.0);
}
