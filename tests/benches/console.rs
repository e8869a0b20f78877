//! What the console's main pages cost the admin with a large history:
//! 10,000 jobs and 100,000 runs (90 % successes, spread over the last
//! 24 hours) stored in embedded SQLite, then the requests each page makes
//! timed on loopback.
//!
//!     cargo bench -p cronbox-tests --bench console [-- JOBS RUNS]
//!
//! Prints, for each request, p50/p99 over 200 calls and the bytes of one
//! answer; and the bytes of the console's own files.
#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cronbox_admin::store::{JobId, JobRow, NewRun, RunEnd};
use cronbox_admin::{AdminConfig, Database, SchedulerConfig, Store};

const API: &str = "bench-api";
const CALLS: usize = 200;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn job(i: usize) -> JobRow {
    JobRow {
        id: JobId(0),
        tenant: "default".into(),
        group_name: "default".into(),
        name: format!("job-{i}"),
        module_digest: "a".repeat(64).parse().unwrap(),
        schedule_type: cronbox_admin::schedule::ScheduleType::Cron,
        schedule_conf: "0 0 3 * * ?".into(),
        time_zone: "UTC".into(),
        misfire: cronbox_admin::model::MisfirePolicy::DoNothing,
        misfire_threshold_ms: 5000,
        route: cronbox_admin::routing::RouteStrategy::First,
        block_strategy: cronbox_protocol::BlockStrategy::SerialExecution,
        max_concurrency: 1,
        timeout_ms: 60_000,
        fuel: None,
        memory_bytes: 64 << 20,
        retry_count: 0,
        retry_interval_ms: 0,
        children: Vec::new(),
        param: String::new(),
        enabled: false,
        next_fire_at_ms: None,
        module_name: None,
        module_version: None,
        alarm_url: String::new(),
        fresh_instance: false,
        config: Default::default(),
        http_allow: Vec::new(),
        http_limits: Default::default(),
        secrets: Vec::new(),
        schedule_rules: Default::default(),
        pause: None,
        executor_handler: None,
        xxl_job_id: None,
    }
}

/// Stores `jobs` jobs and `runs` ended runs written over the last day.
async fn seed(store: &Store, jobs: usize, runs: usize) {
    let now = now_ms();
    let mut ids = Vec::with_capacity(jobs);
    for i in 0..jobs {
        ids.push(store.insert_job(&job(i), now).await.unwrap());
    }
    let mut ends = Vec::new();
    for i in 0..runs {
        let at = now - 86_400_000 + (i as i64 * 86_400_000 / runs as i64);
        let run = NewRun {
            job_id: ids[i % ids.len()],
            kind: cronbox_protocol::TriggerKind::Schedule,
            scheduled_at_ms: at,
            shard_index: 0,
            shard_total: 1,
            attempt: 0,
            param: String::new(),
            module_digest: "a".repeat(64).parse().unwrap(),
        };
        let id = store.insert_run(&run, at).await.unwrap();
        let success = i % 10 != 0;
        ends.push(RunEnd {
            run_id: id,
            success,
            outcome: if success {
                cronbox_admin::model::RunOutcome::Success
            } else {
                cronbox_admin::model::RunOutcome::Failed
            },
            code: if success { 200 } else { 500 },
            message: "done".into(),
            log: String::new(),
            executor: Some("127.0.0.1:9999".into()),
            started_at_ms: Some(at + (i as i64 % 40)),
            finished_at_ms: at + 50,
            ..RunEnd::default()
        });
        if ends.len() == 1000 {
            store.finish_runs(&ends).await.unwrap();
            ends.clear();
        }
    }
    store.finish_runs(&ends).await.unwrap();
}

/// Each query the dashboard makes, timed on its own.
async fn dashboard_parts(store: &Store) {
    let now = now_ms();
    let day_ago = now - 86_400_000;
    let mut timings: Vec<(&str, Duration)> = Vec::new();
    let start = Instant::now();
    store
        .run_counts_by_bucket(None, day_ago, now, 3_600_000)
        .await
        .unwrap();
    timings.push(("runs by hour", start.elapsed()));
    let start = Instant::now();
    store
        .recent_start_lateness(None, day_ago, 1_000)
        .await
        .unwrap();
    timings.push(("start lateness", start.elapsed()));
    let start = Instant::now();
    store.runs_in_progress(None, now).await.unwrap();
    timings.push(("runs in progress", start.elapsed()));
    let start = Instant::now();
    store
        .most_failing_jobs(None, now - 7 * 86_400_000, 5)
        .await
        .unwrap();
    timings.push(("jobs failing most", start.elapsed()));
    let start = Instant::now();
    store
        .daily_report_totals(None, "2000-01-01", "2100-01-01")
        .await
        .unwrap();
    timings.push(("daily reports", start.elapsed()));
    for (label, took) in timings {
        println!(
            "  dashboard part: {label:<20} {:>8.2} ms",
            took.as_secs_f64() * 1000.0
        );
    }
}

fn percentile(sorted: &[Duration], p: usize) -> f64 {
    sorted[(sorted.len() - 1) * p / 100].as_secs_f64() * 1000.0
}

async fn measure(http: &reqwest::Client, base: &str, label: &str, path: &str) {
    let mut times = Vec::with_capacity(CALLS);
    let mut bytes = 0;
    for _ in 0..CALLS {
        let start = Instant::now();
        let response = http
            .get(format!("{base}{path}"))
            .bearer_auth(API)
            .send()
            .await
            .unwrap();
        assert!(
            response.status().is_success(),
            "{path}: {}",
            response.status()
        );
        bytes = response.bytes().await.unwrap().len();
        times.push(start.elapsed());
    }
    times.sort();
    println!(
        "{label:<28} p50 {:>7.2} ms  p99 {:>7.2} ms  {bytes:>7} B",
        percentile(&times, 50),
        percentile(&times, 99)
    );
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let (jobs, runs) = match args.as_slice() {
        [jobs, runs, ..] => (*jobs, *runs),
        _ => (10_000, 100_000),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let data = tempfile::tempdir().unwrap();
        let dir = data.path().join("admin");
        let started = Instant::now();
        {
            let store = Store::open_sqlite(&dir).await.unwrap();
            seed(&store, jobs, runs).await;
            dashboard_parts(&store).await;
        }
        println!(
            "seeded {jobs} jobs and {runs} runs in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let admin = cronbox_admin::start(AdminConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            database: Database::Sqlite(dir),
            migrations: Default::default(),
            api_token: API.into(),
            executor_token: "bench-exec".into(),
            scheduler: SchedulerConfig::default(),
            max_request_bytes: 1 << 20,
            tls: None,
            metrics_export: None,
        })
        .await
        .unwrap();
        let base = format!("http://{}", admin.local_addr());
        let http = cronbox_tls::client();
        let later = format!("/api/v1/jobs?limit=50&after={}", jobs * 9 / 10);
        for (label, path) in [
            ("dashboard", "/api/v1/dashboard"),
            ("jobs, first page", "/api/v1/jobs?limit=50"),
            ("jobs, a later page", later.as_str()),
            ("jobs, search", "/api/v1/jobs?limit=50&search=job-99"),
            ("runs, first page", "/api/v1/runs?limit=50"),
            ("runs of one job", "/api/v1/runs?limit=20&job=7"),
            ("console page", "/"),
            ("console script", "/console/app.js"),
        ] {
            measure(&http, &base, label, path).await;
        }
        admin.shutdown().await;
    });
}
