//! Every export of the test's two tables a user may bring: `mysqldump` in
//! the options users pass, `mariadb -B`, `SELECT * ... INTO OUTFILE` with
//! and without escapes, JSON (`JSON_ARRAYAGG`), and a dump of a copy in
//! xxl-job 3.4's schema; each with the import flags it needs and the
//! protocol its columns tell.

use std::path::{Path, PathBuf};

use super::rows::KEPT;
use super::server::Mariadb;

/// One export, as the import is to be given it.
pub(super) struct Export {
    pub(super) label: String,
    pub(super) files: Vec<PathBuf>,
    pub(super) flags: Vec<&'static str>,
    /// From `mariadb -B`, which writes NULL and the text NULL alike.
    pub(super) batch: bool,
    pub(super) protocol: &'static str,
}

impl Export {
    fn of_35(label: String, files: Vec<PathBuf>) -> Export {
        Export {
            label,
            files,
            flags: Vec::new(),
            batch: false,
            protocol: "xxl-job-3.5",
        }
    }
}

/// The `mysqldump` options every dump is taken with in turn.
const DUMP_OPTIONS: [&[&str]; 10] = [
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

/// `mysqldump` of database `xxl_job` with `options`, written to `path`.
pub(super) fn dump(mariadb: &Mariadb, options: &[&str], path: &Path) -> PathBuf {
    mariadb.dump("xxl_job", options, path);
    path.to_owned()
}

/// Every export of database `xxl_job`, written under `dir`.
pub(super) fn every_export(mariadb: &Mariadb, dir: &Path) -> Vec<Export> {
    let mut exports: Vec<Export> = DUMP_OPTIONS
        .iter()
        .enumerate()
        .map(|(at, options)| {
            let path = dump(mariadb, options, &dir.join(format!("dump-{at}.sql")));
            Export::of_35(format!("mysqldump {options:?}"), vec![path])
        })
        .collect();
    let tsv = ["xxl_job_group", "xxl_job_info"].map(|table| {
        let file = dir.join(format!("{table}.tsv"));
        std::fs::write(
            &file,
            mariadb.sql(&format!("SELECT * FROM xxl_job.{table}"), true),
        )
        .unwrap();
        file
    });
    exports.push(Export {
        batch: true,
        ..Export::of_35("mariadb -B".to_owned(), tsv.to_vec())
    });
    exports.extend(outfiles(mariadb, dir));
    exports.push(Export::of_35("JSON".to_owned(), json_arrays(mariadb, dir)));
    exports.push(schema_34(mariadb, dir));
    exports
}

/// The tables as `SELECT * ... INTO OUTFILE` writes them, without a
/// header: MySQL's defaults (tabs, backslash escapes), a CSV in quotes, and
/// one without escapes (`--escaped-by ''`).
fn outfiles(mariadb: &Mariadb, dir: &Path) -> Vec<Export> {
    let quoted = "FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"'";
    let forms: [(&str, String, &[&'static str]); 3] = [
        ("txt", String::new(), &[]),
        ("csv", quoted.to_owned(), &[]),
        (
            "csv",
            format!("{quoted} ESCAPED BY ''"),
            &["--escaped-by", ""],
        ),
    ];
    forms
        .into_iter()
        .enumerate()
        .map(|(at, (extension, fields, flags))| {
            let folder = dir.join(format!("outfile-{at}"));
            std::fs::create_dir(&folder).unwrap();
            let files = ["xxl_job_group", "xxl_job_info"].map(|table| {
                let file = folder.join(format!("{table}.{extension}"));
                mariadb.sql(
                    &format!(
                        "SELECT * FROM xxl_job.{table} INTO OUTFILE '{}' {fields}",
                        file.display()
                    ),
                    false,
                );
                file
            });
            Export {
                flags: flags.to_vec(),
                ..Export::of_35(format!("INTO OUTFILE {fields}"), files.to_vec())
            }
        })
        .collect()
}

/// Each table as a JSON array of objects, as MariaDB's `JSON_ARRAYAGG`
/// writes it.
fn json_arrays(mariadb: &Mariadb, dir: &Path) -> Vec<PathBuf> {
    let folder = dir.join("json");
    std::fs::create_dir(&folder).unwrap();
    let group_columns = vec![
        "id",
        "app_name",
        "name",
        "address_type",
        "address_list",
        "access_token",
    ];
    let job_columns = ["id", "job_group", "name", "executor_param", "glue_type"]
        .into_iter()
        .chain(KEPT)
        .collect();
    [
        ("xxl_job_group", group_columns),
        ("xxl_job_info", job_columns),
    ]
    .into_iter()
    .map(|(table, columns)| {
        let file = folder.join(format!("{table}.json"));
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
    })
    .collect()
}

/// The same rows in xxl-job 3.4's schema (`job_desc`, `title`, no group
/// token), dumped: told apart by their columns, the token given.
fn schema_34(mariadb: &Mariadb, dir: &Path) -> Export {
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
    let old = dir.join("dump-3.4.sql");
    mariadb.dump("xxl_job34", &[], &old);
    Export {
        label: "mysqldump of 3.4's schema".to_owned(),
        files: vec![old],
        flags: vec!["--access-token", "shared-token"],
        batch: false,
        protocol: "xxl-job-3.4",
    }
}
