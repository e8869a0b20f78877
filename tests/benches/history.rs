//! Run history at rate: what a run row costs on disk, and whether deleting
//! a day of history disturbs firing. One admin (embedded SQLite) and one
//! executor in this process on loopback, 1,000 jobs with a seconds cron
//! running `hello`.
//!
//!     cargo bench -p cronbox-tests --bench history -- [ROWS] [SECONDS]
//!
//! 1. Baseline: SECONDS of firing on an empty run table; the bytes the
//!    database grew by per run written (the row and its indexes).
//! 2. ROWS old successful runs (copies of a real one, spread over the day
//!    before the last hour) are inserted directly; the admin starts again
//!    with successes kept one hour, so retention deletes them all, in
//!    batches, while the same firing is measured again.
//!
//! Printed: runs/s, start lateness p50/p99/max, lost and duplicate fires of
//! both rounds, the history deleted during the second and its rate.
#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cronbox_admin::store::RunFilter;
use cronbox_admin::{AdminConfig, Database, RunningAdmin, SchedulerConfig, Store};
use cronbox_api::JobId;
use cronbox_executor::{ExecutorConfig, RunningExecutor};
use cronbox_tests::AdminClient;
use serde_json::{Value, json};

const API: &str = "bench-api";
const EXEC: &str = "bench-exec";
const JOBS: usize = 1000;
const DAY_MS: i64 = 86_400_000;
const HOUR_MS: i64 = 3_600_000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn url(data: &Path) -> String {
    format!(
        "sqlite://{}",
        data.join("admin").join("cronbox.db").display()
    )
}

async fn admin(data: &Path, bind: &str, success_retention: Option<Duration>) -> RunningAdmin {
    cronbox_admin::start(AdminConfig {
        bind: bind.parse().unwrap(),
        database: Database::Sqlite(data.join("admin")),
        migrations: Default::default(),
        api_token: API.into(),
        executor_token: EXEC.into(),
        scheduler: SchedulerConfig {
            max_dispatches: 512,
            success_retention,
            housekeeping_interval: Duration::from_secs(1),
            ..SchedulerConfig::default()
        },
        max_request_bytes: 64 << 20,
        tls: None,
        metrics_export: None,
    })
    .await
    .unwrap()
}

async fn executor(data: &Path, admin: &str) -> RunningExecutor {
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![admin.to_owned()],
        EXEC.into(),
        data.join("executor"),
    );
    config.beat_interval = Duration::from_secs(1);
    config.runtime.max_instances = JOBS as u32 + 64;
    cronbox_executor::start(config).await.unwrap()
}

/// Bytes the SQLite database uses (its pages in use).
async fn database_bytes(pool: &sqlx::AnyPool) -> i64 {
    let pages: i64 = sqlx::query_scalar("SELECT CAST(page_count AS BIGINT) FROM pragma_page_count")
        .fetch_one(pool)
        .await
        .unwrap();
    let free: i64 =
        sqlx::query_scalar("SELECT CAST(freelist_count AS BIGINT) FROM pragma_freelist_count")
            .fetch_one(pool)
            .await
            .unwrap();
    let size: i64 = sqlx::query_scalar("SELECT CAST(page_size AS BIGINT) FROM pragma_page_size")
        .fetch_one(pool)
        .await
        .unwrap();
    (pages - free) * size
}

struct Firing {
    runs_per_s: f64,
    late: (i64, i64, i64),
    lost: i64,
    duplicates: usize,
    written: usize,
}

/// Fires the started jobs for `seconds` whole seconds after a warm-up and
/// reads how it went from the run table, once every run of the window has
/// ended.
/// `job` is one of the firing jobs (whose runs say when the window is over).
async fn measure(data: &Path, api: &AdminClient, job: JobId, seconds: i64) -> Firing {
    let begin = (now_ms() / 1000 + 4) * 1000;
    let end = begin + seconds * 1000;
    // The window is over once a fire of its last second has run; then
    // every run of it must have ended.
    let window = Duration::from_millis((end - now_ms()).max(0) as u64);
    api.until_a_run_succeeded_from(job, end - 1_000, window + Duration::from_secs(120))
        .await;
    api.until_ended_before(end).await;
    let store = Store::connect(&url(data)).await.unwrap();
    let runs = store
        .list_runs(&RunFilter {
            from_ms: Some(begin),
            to_ms: Some(end),
            limit: i64::MAX / 2,
            // The window's runs are among those written since it began
            // (read at once, for not reading back through a day of history).
            examine: Some(JOBS as i64 * (seconds + 600)),
            ..RunFilter::default()
        })
        .await
        .unwrap();
    let mut per_second: HashMap<(i64, i64), usize> = HashMap::new();
    let mut lateness = Vec::new();
    for run in runs.iter().filter(|run| run.kind.as_str() == "schedule") {
        *per_second
            .entry((run.job_id.0, run.scheduled_at_ms))
            .or_default() += 1;
        if let (Some(started), "success") = (run.started_at_ms, run.status.as_str()) {
            lateness.push(started - run.scheduled_at_ms);
        }
    }
    lateness.sort();
    let pick = |p: f64| {
        lateness
            .get(((lateness.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(-1)
    };
    Firing {
        runs_per_s: lateness.len() as f64 / seconds as f64,
        late: (
            pick(0.5),
            pick(0.99),
            lateness.last().copied().unwrap_or(-1),
        ),
        lost: JOBS as i64 * seconds - per_second.len() as i64,
        duplicates: per_second.values().map(|n| n - 1).sum(),
        written: runs.len(),
    }
}

/// Inserts `rows` copies of a successful run, written over the day before
/// the last hour, one statement per million.
async fn insert_history(pool: &sqlx::AnyPool, rows: i64) {
    let oldest = now_ms() - HOUR_MS - DAY_MS;
    let step = (DAY_MS / rows.max(1)).max(1);
    let mut done = 0;
    while done < rows {
        let chunk = (rows - done).min(1_000_000);
        sqlx::query(
            "WITH RECURSIVE n(i) AS (SELECT $1 UNION ALL SELECT i + 1 FROM n WHERE i < $2) \
             INSERT INTO run (tenant, job_id, kind, scheduled_at_ms, shard_index, shard_total, \
             attempt, param, status, executor, module_digest, module_sha, outcome, code, message, \
             log, created_at_ms, dispatched_at_ms, started_at_ms, finished_at_ms, alarm_status, \
             fuel_consumed, peak_memory_bytes) \
             SELECT r.tenant, r.job_id, r.kind, $3 + n.i * $4, r.shard_index, r.shard_total, \
             r.attempt, r.param, r.status, r.executor, r.module_digest, r.module_sha, r.outcome, \
             r.code, \
             r.message, r.log, $3 + n.i * $4, $3 + n.i * $4, $3 + n.i * $4 + 1, \
             $3 + n.i * $4 + 2, r.alarm_status, r.fuel_consumed, r.peak_memory_bytes \
             FROM n, (SELECT * FROM run WHERE status = 'success' ORDER BY id LIMIT 1) AS r",
        )
        .bind(done)
        .bind(done + chunk - 1)
        .bind(oldest)
        .bind(step)
        .execute(pool)
        .await
        .unwrap();
        done += chunk;
    }
}

async fn start_jobs(admin: &str, ids: &[i64], verb: &str) {
    let http = cronbox_tls::client();
    for id in ids {
        http.post(format!("{admin}/api/v1/jobs/{id}/{verb}"))
            .bearer_auth(API)
            .send()
            .await
            .unwrap();
    }
}

fn row(name: &str, firing: &Firing) {
    println!(
        "| {name:<34} | {:>6.0} | {:>5} ms | {:>5} ms | {:>5} ms | {:>4} | {:>3} |",
        firing.runs_per_s,
        firing.late.0,
        firing.late.1,
        firing.late.2,
        firing.lost,
        firing.duplicates
    );
}

async fn bench(rows: i64, seconds: i64) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path();
    let first = admin(data, "127.0.0.1:0", None).await;
    let base = format!("http://{}", first.local_addr());
    let executor = executor(data, &base).await;
    let api = AdminClient::new(base.clone(), API);
    api.until_an_executor_is_alive().await;
    let http = cronbox_tls::client();
    let uploaded: Value = http
        .post(format!("{base}/api/v1/modules?name=hello"))
        .bearer_auth(API)
        .body(cronbox_example_jobs::bytes("hello"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(uploaded["digest"].is_string(), "{uploaded}");
    let jobs: Vec<Value> = (0..JOBS)
        .map(|i| {
            json!({ "name": format!("often-{i}"), "module": "hello",
                    "schedule_type": "CRON", "schedule_conf": "* * * * * ?" })
        })
        .collect();
    let created: Value = http
        .post(format!("{base}/api/v1/jobs/batch"))
        .bearer_auth(API)
        .json(&json!({ "jobs": jobs }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<i64> = created["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_i64().unwrap())
        .collect();

    // 1. Baseline on an empty run table, and the bytes of a run row.
    let pool = sqlx::AnyPool::connect(&url(data)).await.unwrap();
    let bytes_before = database_bytes(&pool).await;
    start_jobs(&base, &ids, "start").await;
    let baseline = measure(data, &api, JobId(ids[1]), seconds).await;
    start_jobs(&base, &ids, "stop").await;
    api.until_ended_before(i64::MAX).await;
    let all_runs: i64 = sqlx::query_scalar("SELECT CAST(COUNT(*) AS BIGINT) FROM run")
        .fetch_one(&pool)
        .await
        .unwrap();
    let per_row = (database_bytes(&pool).await - bytes_before) as f64 / all_runs as f64;
    let index_names: Vec<String> = sqlx::query_scalar(
        "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'run'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    first.shutdown().await;

    // 2. A day of history past its retention, deleted while firing.
    let inserting = Instant::now();
    insert_history(&pool, rows).await;
    let inserted_in = inserting.elapsed();
    eprintln!("{rows} rows inserted in {:.0} s", inserted_in.as_secs_f64());
    // Their ends counted into the daily reports, as the day's passes would
    // have done.
    Store::connect(&url(data))
        .await
        .unwrap()
        .update_daily_reports()
        .await
        .unwrap();
    let history_bytes = database_bytes(&pool).await;
    eprintln!(
        "their ends folded into the daily reports; {:.0} s since the insert began",
        inserting.elapsed().as_secs_f64()
    );
    let bind = base.trim_start_matches("http://").to_owned();
    let second = admin(data, &bind, Some(Duration::from_secs(3600))).await;
    let old_before = now_ms() - HOUR_MS;
    let count_old = || {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT CAST(COUNT(*) AS BIGINT) FROM run WHERE created_at_ms < $1",
            )
            .bind(old_before)
            .fetch_one(&pool)
            .await
            .unwrap()
        }
    };
    let deleting = Instant::now();
    start_jobs(&base, &ids, "start").await;
    let window_begin = Instant::now();
    let old_at_start = count_old().await;
    eprintln!(
        "second admin firing, {old_at_start} old runs left; {:.0} s since it started",
        deleting.elapsed().as_secs_f64()
    );
    let with_retention = measure(data, &api, JobId(ids[1]), seconds).await;
    let old_at_end = count_old().await;
    let window = window_begin.elapsed();
    start_jobs(&base, &ids, "stop").await;
    let reports: Value = http
        .get(format!("{base}/api/v1/reports"))
        .bearer_auth(API)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();

    println!("\nRun history: SQLite, {JOBS} jobs firing every second, {seconds} s a round\n");
    println!(
        "A run row costs {per_row:.0} bytes on disk with its {} indexes ({} runs written; {} \
         indexes: {}); {rows} rows of history inserted in {:.1} s, the database then {:.2} GiB.\n",
        index_names.len(),
        all_runs,
        index_names.len(),
        index_names.join(", "),
        inserted_in.as_secs_f64(),
        history_bytes as f64 / f64::from(1 << 30),
    );
    println!(
        "| round                              | runs/s | late p50 | p99      | max      | lost | dup |"
    );
    println!(
        "|------------------------------------|--------|----------|----------|----------|------|-----|"
    );
    row("empty run table", &baseline);
    row(&format!("{rows} old runs being deleted"), &with_retention);
    println!(
        "\nDuring the second round retention deleted {} old runs ({} were left at its start, {} at \
         its end; {:.0} runs/s over the {:.0} s window, {:.0} s after the admin started); the \
         daily reports still count {} successes. Runs written per round: {} and {}.",
        old_at_start - old_at_end,
        old_at_start,
        old_at_end,
        (old_at_start - old_at_end) as f64 / window.as_secs_f64(),
        window.as_secs_f64(),
        deleting.elapsed().as_secs_f64(),
        reports["totals"]["success"],
        baseline.written,
        with_retention.written,
    );
    executor.shutdown().await;
    second.shutdown().await;
}

fn main() {
    let numbers: Vec<i64> = std::env::args()
        .skip(1)
        .filter_map(|word| word.parse().ok())
        .collect();
    let rows = numbers.first().copied().unwrap_or(8_640_000);
    let seconds = numbers.get(1).copied().unwrap_or(30);
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    threads.block_on(bench(rows, seconds));
}
