//! The admin's database as an operation: `cronbox admin migrate` (and
//! `--check`, `--no-migrate`, a newer schema refused), `cronbox admin
//! backup` and `restore` on SQLite, and `pg_dump`/`pg_restore` as
//! docs/deploying.md gives them on PostgreSQL.

use super::*;

use sqlx::Row;

/// `cronbox admin ARGS`: its exit code, stdout and stderr.
fn admin_command(args: &[&str]) -> (i32, String, String) {
    let output = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .arg("admin")
        .args(args)
        .env_remove("CRONBOX_API_TOKEN")
        .env_remove("CRONBOX_TOKEN")
        .output()
        .expect("cronbox runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn execute(url: &str, sql: &str) {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_owned()))
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;
}

fn sqlite_url(data_dir: &Path) -> String {
    format!("sqlite://{}", data_dir.join("cronbox.db").display())
}

/// A migration this build does not have, as an admin of a later release
/// would have left it, and the schema version admins must have to serve
/// the database.
const LATER_MIGRATION: &str = "INSERT INTO _sqlx_migrations \
    (version, description, success, checksum, execution_time) \
    VALUES (9000, 'a later release', TRUE, X'00', 1)";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_applies_once_check_reports_and_a_schema_too_new_is_refused_naming_both() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().join("admin");
    let dir_arg = dir.to_str().unwrap();
    let (code, out, _) = admin_command(&["migrate", "--check", "--data-dir", dir_arg]);
    assert_eq!(
        code, 1,
        "an empty database has every migration pending: {out}"
    );
    assert!(
        out.contains("schema version 0") && out.contains("pending: 1 init"),
        "{out}"
    );
    // An admin told not to migrate refuses, saying what to run.
    let (code, _, err) = admin_command(&[
        "--token",
        API_TOKEN,
        "--executor-token",
        EXEC_TOKEN,
        "--no-migrate",
        "--data-dir",
        dir_arg,
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("schema is at version 0") && err.contains("run `cronbox admin migrate` first"),
        "{err}"
    );
    let (code, out, err) = admin_command(&["migrate", "--data-dir", dir_arg]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("no migration pending"), "{out}");
    let known = out
        .split("schema version ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .unwrap()
        .to_owned();
    let (code, out, _) = admin_command(&["migrate", "--check", "--data-dir", dir_arg]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("schema version {known} ")), "{out}");
    // Migrated, it serves without migrating.
    let (admin, _) = spawn_admin_with(None, &dir, &["--no-migrate"]);
    drop(admin);

    // A later release's expand migration: this admin still serves it.
    execute(&sqlite_url(&dir), LATER_MIGRATION).await;
    let (admin, _) = spawn_admin_with(None, &dir, &[]);
    drop(admin);
    // Its contract migration: this admin is too old and says so.
    execute(
        &sqlite_url(&dir),
        "UPDATE schema_compatibility SET oldest_reader = 9000",
    )
    .await;
    for args in [
        vec!["--token", API_TOKEN, "--executor-token", EXEC_TOKEN],
        vec!["migrate"],
    ] {
        let mut args = args;
        args.extend(["--data-dir", dir_arg]);
        let (code, _, err) = admin_command(&args);
        assert_eq!(code, 2, "{err}");
        assert!(
            err.contains("the database's schema is at version 9000")
                && err.contains("admins from schema version 9000 on")
                && err.contains(&format!("knows schema versions up to {known}")),
            "{err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_admins_migrating_one_postgresql_database_at_once_both_succeed_and_apply_it_once() {
    let _turn = TESTS.turn();
    let database = cronbox_tests::PostgresServer::fresh_database();
    let url = database.url();
    let migrations: Vec<_> = (0..2)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_cronbox"))
                .args(["admin", "migrate", "--database-url", &url])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for migration in migrations {
        let output = migration.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&url).await.unwrap();
    let row = sqlx::query("SELECT COUNT(*), COUNT(DISTINCT version) FROM _sqlx_migrations")
        .fetch_one(&pool)
        .await
        .unwrap();
    let (rows, versions): (i64, i64) = (row.try_get(0).unwrap(), row.try_get(1).unwrap());
    assert_eq!(rows, versions);
    assert!(versions >= 29, "{versions}");
    pool.close().await;
    let (code, out, _) = admin_command(&["migrate", "--check", "--database-url", &url]);
    assert_eq!(code, 0, "{out}");
}

/// What a restore must bring back, as the operator's API shows it.
async fn objects(cluster: &Cluster, jobs: &[JobId]) -> Vec<Value> {
    let mut seen = Vec::new();
    for path in [
        "/api/v1/jobs".to_owned(),
        "/api/v1/modules".to_owned(),
        "/api/v1/modules/greeter/versions".to_owned(),
        "/api/v1/users".to_owned(),
        "/api/v1/secrets".to_owned(),
        "/api/v1/workflows".to_owned(),
    ]
    .into_iter()
    .chain(jobs.iter().map(|job| format!("/api/v1/jobs/{job}/state")))
    {
        let (status, mut body) = cluster.call(reqwest::Method::GET, &path, None).await;
        assert_eq!(status, 200, "{path}: {body}");
        // A job's last run and next fire move on as it fires; the rest
        // must not.
        for job in body.as_array_mut().into_iter().flatten() {
            if let Some(job) = job.as_object_mut() {
                job.remove("last_run");
                job.remove("next_fire_at_ms");
            }
        }
        seen.push(json!({ path: body }));
    }
    seen
}

/// The runs the copy at `url` had ended: id, status and end time.
async fn ended_runs(url: &str) -> Vec<(i64, String, i64)> {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.unwrap();
    let rows = sqlx::query(
        "SELECT id, status, finished_at_ms FROM run \
         WHERE status IN ('success', 'failed') ORDER BY id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    pool.close().await;
    rows.iter()
        .map(|row| {
            (
                row.try_get(0).unwrap(),
                row.try_get(1).unwrap(),
                row.try_get(2).unwrap(),
            )
        })
        .collect()
}

/// Two every-second jobs (one per misfire policy), a job state, a user, a
/// secret and a workflow; once each job has run on schedule twice. Their
/// misfire threshold (8 s) lies inside the restore's outage (20 s by the
/// restored admin's clock, less the 5 s its copy may have claimed ahead)
/// and past a stall of a loaded machine after it: with 2 s, a restored
/// admin that fell 2 s behind once more rightly fired FIRE_ONCE_NOW's
/// misfire a second time.
async fn fill(cluster: &Cluster) -> Vec<JobId> {
    let hello = cluster.upload("hello").await;
    for version in ["hello", "panicker"] {
        let (status, body) = cluster
            .api
            .upload("?name=greeter", jobs::bytes(version))
            .await;
        assert_eq!(status, 201, "{body}");
    }
    let mut jobs = Vec::new();
    for misfire in ["DO_NOTHING", "FIRE_ONCE_NOW"] {
        let job = cluster
            .create(
                json!({ "name": misfire, "module_digest": hello, "schedule_type": "CRON",
                            "schedule_conf": "* * * * * ?", "misfire": misfire,
                            "misfire_threshold_ms": 8000 }),
            )
            .await;
        let state = cronbox_api::StateEdit {
            state: [("cursor".to_owned(), format!("{misfire}-42"))].into(),
        };
        cluster.api.api.put_state(job, &state).await.unwrap();
        let (status, body) = cluster
            .call(
                reqwest::Method::POST,
                &format!("/api/v1/jobs/{job}/start"),
                None,
            )
            .await;
        assert_eq!(status, 200, "{body}");
        jobs.push(job);
    }
    cluster.api.add_user("ops", "default", "developer").await;
    for (path, body) in [
        ("/api/v1/secrets/DB_PASSWORD", json!({ "value": "s3cret" })),
        (
            "/api/v1/workflows/nightly",
            json!({ "nodes": [{ "name": "first", "job": "DO_NOTHING" }] }),
        ),
    ] {
        let (status, answer) = cluster.call(reqwest::Method::PUT, path, Some(body)).await;
        assert!(status == 200 || status == 201, "{path}: {answer}");
    }
    for job in &jobs {
        cluster.wait_runs(*job, 2).await;
    }
    jobs
}

/// After a restore from a copy whose ended runs were `copied` and an
/// outage longer than the misfire threshold: every object is back, no
/// ended run ran again, and each job's missed fires followed its policy.
async fn check_restored(
    cluster: &Cluster,
    jobs: &[JobId],
    before: &[Value],
    copied: &[(i64, String, i64)],
    back_at: i64,
) {
    assert_eq!(objects(cluster, jobs).await, before);
    assert!(!copied.is_empty());
    for job in jobs {
        until("each job fires again after the restore", || async {
            let runs = cluster.runs(*job).await;
            runs.iter()
                .any(|r| {
                    r.kind == TriggerKind::Schedule
                        && r.status == RunStatus::Success
                        && r.scheduled_at_ms > back_at
                })
                .then_some(())
        })
        .await;
    }
    let mut runs: Vec<Run> = Vec::new();
    for job in jobs {
        runs.extend(cluster.runs(*job).await);
    }
    for (id, status, finished) in copied {
        let run = runs
            .iter()
            .find(|run| run.id.0 == *id)
            .unwrap_or_else(|| panic!("run {id} of the copy is gone"));
        assert_eq!(
            (run.status.as_str().to_owned(), run.finished_at_ms),
            (status.clone(), Some(*finished)),
            "run {id} ended in the copy and must not run again"
        );
    }
    let mut fires: Vec<(JobId, i64)> = runs
        .iter()
        .filter(|r| matches!(r.kind, TriggerKind::Schedule | TriggerKind::Misfire))
        .map(|r| (r.job_id, r.scheduled_at_ms))
        .collect();
    let count = fires.len();
    fires.sort();
    fires.dedup();
    assert_eq!(fires.len(), count, "a fire ran twice");
    let misfires = |job: JobId| {
        runs.iter()
            .filter(|r| r.job_id == job && r.kind == TriggerKind::Misfire)
            .count()
    };
    assert_eq!(misfires(jobs[0]), 0, "DO_NOTHING fires nothing it missed");
    assert_eq!(
        misfires(jobs[1]),
        1,
        "FIRE_ONCE_NOW fires once for all it missed"
    );
}

fn write_secrets_key(dir: &Path) -> String {
    let key = dir.join("secrets.key");
    std::fs::write(&key, "5f".repeat(32)).unwrap();
    key.to_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sqlite_backup_taken_while_the_admin_fires_restores_everything_and_reruns_nothing() {
    let _turn = TESTS.turn();
    let keys = tempfile::tempdir().unwrap();
    let key = write_secrets_key(keys.path());
    let mut cluster = Cluster::start_with(&["--secrets-key-file", &key]).await;
    let jobs = fill(&cluster).await;
    let before = objects(&cluster, &jobs).await;
    let live = cluster.data.path().join("admin");
    let copy = keys.path().join("backup.db");
    let copy_arg = copy.to_str().unwrap();
    let live_arg = live.to_str().unwrap();
    let (code, out, err) = admin_command(&["backup", copy_arg, "--data-dir", live_arg]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains("2 jobs") && out.contains("secrets key"),
        "{out}"
    );
    // A backup never overwrites.
    let (code, _, err) = admin_command(&["backup", copy_arg, "--data-dir", live_arg]);
    assert!(code == 2 && err.contains("exists already"), "{err}");
    let copied = ended_runs(&format!("sqlite://{copy_arg}")).await;
    // The live database moves on past the copy, then the admin is lost.
    let newest = copied.last().unwrap().0;
    until("a run ends after the copy", || async {
        cluster
            .runs(jobs[0])
            .await
            .iter()
            .any(|r| r.id.0 > newest && r.status == RunStatus::Success)
            .then_some(())
    })
    .await;
    drop(cluster.admin.take());
    let (code, _, err) = admin_command(&["restore", copy_arg, "--data-dir", live_arg]);
    assert!(
        code == 2 && err.contains("holds a database already"),
        "{err}"
    );
    let (code, out, err) =
        admin_command(&["restore", copy_arg, "--data-dir", live_arg, "--replace"]);
    assert_eq!(code, 0, "{out}{err}");
    // Back 20 s later by its clock: longer than pre-read and threshold.
    let back_at = now_ms() + 20_000;
    cluster
        .restart_admin(&["--secrets-key-file", &key, "--clock-offset", "20s"])
        .await;
    check_restored(&cluster, &jobs, &before, &copied, back_at).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgresql_dump_taken_while_the_admin_fires_restores_everything_and_reruns_nothing() {
    let _turn = TESTS.turn();
    let keys = tempfile::tempdir().unwrap();
    let key = write_secrets_key(keys.path());
    let source = cronbox_tests::PostgresServer::fresh_database().url();
    let mut cluster =
        Cluster::start_with(&["--secrets-key-file", &key, "--database-url", &source]).await;
    let jobs = fill(&cluster).await;
    let before = objects(&cluster, &jobs).await;
    // docs/deploying.md's steps: a dump in the custom format while the
    // admin fires, restored into an empty database.
    let dump = keys.path().join("cronbox.dump");
    let status = Command::new(cronbox_tests::postgres_program("pg_dump"))
        .args(["--format=custom", "--file", dump.to_str().unwrap(), &source])
        .status()
        .unwrap();
    assert!(status.success());
    let target = cronbox_tests::PostgresServer::fresh_database().url();
    let status = Command::new(cronbox_tests::postgres_program("pg_restore"))
        .args(["--no-owner", "--dbname", &target, dump.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let copied = ended_runs(&target).await;
    drop(cluster.admin.take());
    let back_at = now_ms() + 20_000;
    let (admin, _) = spawn_admin_with(
        Some(cluster.admin_addr),
        &cluster.data.path().join("admin"),
        &[
            "--secrets-key-file",
            &key,
            "--clock-offset",
            "20s",
            "--database-url",
            &target,
        ],
    );
    cluster.admin = Some(admin);
    cluster.wait_until_up().await;
    check_restored(&cluster, &jobs, &before, &copied, back_at).await;
}
