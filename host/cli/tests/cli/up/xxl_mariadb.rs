//! xxl-job 3.5's tables (and a copy in 3.4's schema) in a real MariaDB,
//! exported in every form a user brings (`exports`), imported with
//! `cronbox import xxl-job`: every job's fields arrive as the database
//! holds them (`rows`: its parameter byte for byte, every name as it is or
//! made unique with a note saying why); applied twice, the second import
//! changes nothing; a job the admin refuses is named and the others made.

mod exports;
mod rows;
mod server;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use super::session::{cli, json};
use super::*;
use server::Mariadb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_mysqldump_in_every_option_imports_every_param_byte_for_byte() {
    let _turn = TESTS.turn();
    let mariadb = Mariadb::start();
    mariadb.sql(rows::SCHEMA, false);
    let source = rows::fill(&mariadb);
    assert_eq!(source.len(), rows::JOBS);

    let data = tempfile::tempdir().unwrap();
    let (mut stack, _, at) = up(data.path(), None);
    let base = format!("http://{}", at.admin);
    let token = std::fs::read_to_string(data.path().join("api-token")).unwrap();
    let token = token.trim();
    let dumps = tempfile::tempdir().unwrap();
    let import = |files: &[&Path], flags: &[&str]| {
        let mut args = vec!["import", "xxl-job"];
        args.extend(files.iter().map(|file| file.to_str().unwrap()));
        args.extend(["--zone", "UTC"]);
        args.extend(flags);
        json(&base, token, &args)
    };
    // Every export gives the same plan: every field as the database holds
    // it, each name kept or made unique with a note.
    for export in exports::every_export(&mariadb, dumps.path()) {
        let files: Vec<&Path> = export.files.iter().map(PathBuf::as_path).collect();
        let plan = import(&files, &export.flags);
        rows::check_plan(&source, &export.label, &plan, export.batch, export.protocol);
    }

    // Applied, then applied again: the jobs in cronbox hold the params as
    // the database does, and the second import changes nothing.
    let dump = dumps.path().join("dump-0.sql");
    let applied = import(&[&dump], &["--apply"]);
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
    let again = import(&[&dump], &["--apply"]);
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
    let dump = exports::dump(&mariadb, &[], &dumps.path().join("dump-more.sql"));
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
