//! `cronbox import xxl-job` of a large installation: a mysqldump of N jobs
//! (default 10,000) over 10 executors, generated, imported into `cronbox
//! up` with `--apply`, then imported again (which must create nothing).
//! Prints both times and the jobs per second.
//!
//!     cargo bench -p cronbox --bench xxl_import -- [JOBS]
#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

#[path = "../tests/support/mod.rs"]
mod support;

use std::fmt::Write as _;
use std::process::Command;
use std::time::Instant;

const GROUPS: usize = 10;

/// A dump as `mysqldump` writes it (inserts without column names, in the
/// order of the table's CREATE TABLE), `jobs` BEAN jobs over `GROUPS`
/// executors, a fifth of them started, every tenth a GLUE job.
fn dump(jobs: usize) -> String {
    let mut sql = String::from(
        "CREATE TABLE `xxl_job_group` (\n  `id` int NOT NULL,\n  `app_name` varchar(64) NOT NULL,\n  \
         `title` varchar(12) NOT NULL,\n  `address_type` tinyint NOT NULL,\n  `address_list` text,\n  \
         PRIMARY KEY (`id`)\n) ENGINE=InnoDB;\nINSERT INTO `xxl_job_group` VALUES ",
    );
    let groups: Vec<String> = (1..=GROUPS)
        .map(|id| format!("({id},'app-{id}','app {id}',0,NULL)"))
        .collect();
    sql.push_str(&groups.join(","));
    sql.push_str(
        ";\nCREATE TABLE `xxl_job_info` (\n  `id` int NOT NULL,\n  `job_group` int NOT NULL,\n  \
         `job_desc` varchar(255) NOT NULL,\n  `schedule_type` varchar(50) NOT NULL,\n  \
         `schedule_conf` varchar(128) DEFAULT NULL,\n  `executor_handler` varchar(255),\n  \
         `executor_param` varchar(512),\n  `executor_timeout` int NOT NULL,\n  \
         `glue_type` varchar(50) NOT NULL,\n  `trigger_status` tinyint NOT NULL,\n  \
         PRIMARY KEY (`id`)\n) ENGINE=InnoDB;\n",
    );
    for chunk in (1..=jobs).collect::<Vec<_>>().chunks(500) {
        sql.push_str("INSERT INTO `xxl_job_info` VALUES ");
        let rows: Vec<String> = chunk
            .iter()
            .map(|id| {
                let glue = if id % 10 == 0 { "GLUE_SHELL" } else { "BEAN" };
                format!(
                    "({id},{},'job {id}','CRON','{} {} {} * * ?','handler{}','p{id}',60,'{glue}',{})",
                    id % GROUPS + 1,
                    id % 60,
                    id / 60 % 60,
                    id / 3600 % 24,
                    id % 7,
                    u8::from(id % 5 == 0)
                )
            })
            .collect();
        let mut line = rows.join(",");
        let _ = writeln!(line, ";");
        sql.push_str(&line);
    }
    sql
}

fn import(base: &str, token: &str, file: &std::path::Path) -> (f64, String) {
    let started = Instant::now();
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["import", "xxl-job"])
        .arg(file)
        .args(["--access-token", "bench-legacy-token", "--apply"])
        .env("CRONBOX_ADMIN", base)
        .env("CRONBOX_API_TOKEN", token)
        .output()
        .unwrap();
    let seconds = started.elapsed().as_secs_f64();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let printed = String::from_utf8_lossy(&output.stdout);
    (
        seconds,
        printed.lines().last().unwrap_or_default().to_owned(),
    )
}

fn main() {
    let jobs: usize = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse().ok())
        .unwrap_or(10_000);
    let data = tempfile::tempdir().unwrap();
    let (mut stack, _, at) = support::up(data.path(), None);
    let base = format!("http://{}", at.admin);
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let file = data.path().join("xxl_job.sql");
    std::fs::write(&file, dump(jobs)).unwrap();
    let bean = jobs - jobs / 10;
    let (first, said) = import(&base, token.trim(), &file);
    assert!(
        said.starts_with(&format!("{bean} jobs are in cronbox")) && said.contains("10 groups made"),
        "{said}"
    );
    let (again, said) = import(&base, token.trim(), &file);
    assert!(said.contains("0 groups made"), "{said}");
    println!(
        "import of {jobs} xxl-job jobs ({bean} BEAN, {} GLUE refused) over {GROUPS} executors: \
         {first:.1} s ({:.0} jobs/s); again: {again:.1} s, nothing created",
        jobs - bean,
        bean as f64 / first
    );
    stack.kill();
}
