//! An admin with many jobs stored: `cronbox admin` and `cronbox executor`
//! as processes on loopback, STORED jobs created through the batch
//! endpoint (most with a daily cron spread over the day, 1,000 with a
//! seconds cron), then measured:
//!
//! - creation: jobs/s through `POST /api/v1/jobs/batch` (1,000 a request);
//! - start-up: from spawning the admin to its "listening" line, on the
//!   empty database and again on the full one;
//! - the admin's resident memory (VmRSS, its own process), after creation
//!   and at the end of the firing window;
//! - firing: start lateness p50/p99/max of the per-second jobs' runs over
//!   SECONDS, lost and duplicate fires;
//! - the API: a page of 50 jobs after a random id, and searches by part of
//!   a name (one matching many jobs, one matching a single job), p50/p99.
//!
//!     cargo bench -p cronbox --bench scale -- [pg] [--seconds S] STORED...
//!
//! Each STORED is a round of its own, on a new database; the smallest is
//! the baseline the others are read against (default: 10000 1000000).
#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::HashMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cronbox_admin::Store;
use cronbox_admin::store::RunFilter;
use cronbox_tests::{AdminClient, PostgresServer};
use serde_json::{Value, json};
use support::{Process, cronbox_listening};

const API: &str = "bench-api";
const EXEC: &str = "bench-exec";
/// Jobs firing every second.
const EVERY_SECOND: usize = 1000;
const BATCH: usize = 1000;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Resident memory of a process, in MiB.
fn rss_mib(process: &Process) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{}/status", process.0.id())).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|number| number.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted
        .get(((sorted.len() as f64 - 1.0) * p).round() as usize)
        .copied()
        .unwrap_or(f64::NAN)
}

/// `cronbox admin` on `bind` over `data` (or `database_url`); the
/// process, its URL and how long it took to say it listens.
fn spawn_admin(
    bind: &str,
    data: &std::path::Path,
    database_url: Option<&str>,
) -> (Process, String, Duration) {
    let mut args = vec![
        "admin".to_owned(),
        "--bind".into(),
        bind.into(),
        "--token".into(),
        API.into(),
        "--executor-token".into(),
        EXEC.into(),
        "--quota-default".into(),
        "jobs=10000000".into(),
        "--data-dir".into(),
        data.display().to_string(),
    ];
    if let Some(url) = database_url {
        args.extend(["--database-url".to_owned(), url.to_owned()]);
    }
    let started = Instant::now();
    let (process, url) = cronbox_listening(&args, "listening on ");
    (process, url, started.elapsed())
}

/// p50 and p99 in ms of `count` GETs of the paths `path` makes.
async fn timed_gets(
    http: &reqwest::Client,
    base: &str,
    count: usize,
    mut path: impl FnMut(usize) -> String,
) -> (f64, f64) {
    let mut took = Vec::with_capacity(count);
    for i in 0..count {
        let begin = Instant::now();
        let response = http
            .get(format!("{base}{}", path(i)))
            .bearer_auth(API)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{}", response.status());
        response.bytes().await.unwrap();
        took.push(begin.elapsed().as_secs_f64() * 1000.0);
    }
    took.sort_by(f64::total_cmp);
    (percentile(&took, 0.5), percentile(&took, 0.99))
}

struct Figures {
    stored: usize,
    create_per_s: f64,
    start_empty: Duration,
    start_full: Duration,
    rss_created: f64,
    rss_firing: f64,
    late: (i64, i64, i64),
    lost: i64,
    duplicates: usize,
    page: (f64, f64),
    search_many: (f64, f64),
    search_one: (f64, f64),
}

async fn round(stored: usize, seconds: i64, postgres: Option<&PostgresServer>) -> Figures {
    let dir = tempfile::tempdir().unwrap();
    let admin_data = dir.path().join("admin");
    let url = postgres.map(|server| server.create_database(&format!("scale{stored}")));
    let store_url = url
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", admin_data.join("cronbox.db").display()));
    let (admin, base, start_empty) = spawn_admin("127.0.0.1:0", &admin_data, url.as_deref());
    let (_executor, _) = cronbox_listening(
        &[
            "executor",
            "--bind",
            "127.0.0.1:0",
            "--admin",
            &base,
            "--token",
            EXEC,
            "--beat-interval",
            "1s",
            "--max-instances",
            "1100",
            "--data-dir",
            dir.path().join("executor").to_str().unwrap(),
        ],
        "advertised as ",
    );
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

    // Daily jobs spread over the day's seconds, then the per-second ones.
    let daily = stored - EVERY_SECOND;
    let spec = |i: usize| {
        if i < daily {
            let second = i % 86_400;
            json!({
                "name": format!("daily-{i:07}"), "module": "hello",
                "schedule_type": "CRON",
                "schedule_conf": format!("{} {} {} * * ?", second % 60, second / 60 % 60, second / 3600),
            })
        } else {
            json!({
                "name": format!("often-{i:07}"), "module": "hello",
                "schedule_type": "CRON", "schedule_conf": "* * * * * ?",
            })
        }
    };
    let begin = Instant::now();
    for first in (0..stored).step_by(BATCH) {
        let jobs: Vec<Value> = (first..(first + BATCH).min(stored)).map(spec).collect();
        let response = http
            .post(format!("{base}/api/v1/jobs/batch"))
            .bearer_auth(API)
            .json(&json!({ "jobs": jobs, "start": true }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201, "{}", response.text().await.unwrap());
    }
    let create_per_s = stored as f64 / begin.elapsed().as_secs_f64();
    let rss_created = rss_mib(&admin);

    // Start again on the full database, where the executor looks for it.
    drop(admin);
    let bind = base.trim_start_matches("http://").to_owned();
    let (admin, base, start_full) = spawn_admin(&bind, &admin_data, url.as_deref());

    // Whole seconds after a warm-up (the executor re-registers, each job
    // gets its instance).
    let window_begin = (now_ms() / 1000 + 6) * 1000;
    let window_end = window_begin + seconds * 1000;
    // The window itself is wall-clock time: firing is what is measured.
    tokio::time::sleep(Duration::from_millis((window_end - now_ms()).max(0) as u64)).await;
    let rss_firing = rss_mib(&admin);

    let page = {
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        timed_gets(&http, &base, 200, |_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            format!("/api/v1/jobs?limit=50&after={}", seed % stored as u64)
        })
        .await
    };
    // "daily-00012" is in 1,000 names; each whole name is in one.
    let search_many = timed_gets(&http, &base, 50, |i| {
        format!("/api/v1/jobs?limit=50&search=daily-{:05}", 10 + i)
    })
    .await;
    let search_one = timed_gets(&http, &base, 20, |i| {
        format!(
            "/api/v1/jobs?limit=50&search=daily-{:07}",
            (i * 48_611) % daily
        )
    })
    .await;

    // Every run of the window, read from the database once all ended.
    AdminClient::new(base.clone(), API)
        .until_ended_before(window_end)
        .await;
    let store = Store::connect(&store_url).await.unwrap();
    let runs = store
        .list_runs(&RunFilter {
            from_ms: Some(window_begin),
            to_ms: Some(window_end),
            limit: i64::MAX / 2,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    let mut per_second: HashMap<(i64, i64), usize> = HashMap::new();
    let mut lateness = Vec::new();
    for run in &runs {
        if run.kind.as_str() != "schedule" {
            continue;
        }
        *per_second
            .entry((run.job_id.0, run.scheduled_at_ms))
            .or_default() += 1;
        if let Some(started) = run.started_at_ms {
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
    // Fires expected: each per-second job every second, and each daily job
    // whose second of the day falls in the window.
    let day_second = |ms: i64| (ms / 1000).rem_euclid(86_400) as usize;
    let daily_due = (window_begin / 1000..window_end / 1000)
        .map(|second| {
            let at = day_second(second * 1000);
            (0..daily).skip(at).step_by(86_400).count()
        })
        .sum::<usize>();
    let expected = EVERY_SECOND as i64 * seconds + daily_due as i64;
    let duplicates: usize = per_second.values().map(|n| n - 1).sum();
    drop(admin);
    Figures {
        stored,
        create_per_s,
        start_empty,
        start_full,
        rss_created,
        rss_firing,
        late: (
            pick(0.5),
            pick(0.99),
            lateness.last().copied().unwrap_or(-1),
        ),
        lost: expected - per_second.len() as i64,
        duplicates,
        page,
        search_many,
        search_one,
    }
}

fn main() {
    let words: Vec<String> = std::env::args().skip(1).collect();
    let use_postgres = words.iter().any(|word| word == "pg");
    let mut seconds = 20;
    let mut sizes: Vec<usize> = Vec::new();
    let mut rest = words.iter();
    while let Some(word) = rest.next() {
        if word == "--seconds" {
            seconds = rest.next().and_then(|n| n.parse().ok()).unwrap_or(seconds);
        } else if let Ok(size) = word.parse() {
            sizes.push(size);
        }
    }
    if sizes.is_empty() {
        sizes = vec![10_000, 1_000_000];
    }
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let postgres = use_postgres.then(PostgresServer::start);
    let store = if use_postgres { "PostgreSQL" } else { "SQLite" };
    let figures: Vec<Figures> = threads.block_on(async {
        let mut all = Vec::new();
        for stored in sizes {
            all.push(round(stored, seconds, postgres.as_ref()).await);
        }
        all
    });
    println!(
        "\n{store}: jobs stored, {EVERY_SECOND} of them firing every second, over {seconds} s\n"
    );
    println!(
        "| stored    | create/s | start empty | start full | RSS created | RSS firing | late p50 | p99 | max | lost | dup |"
    );
    println!(
        "|-----------|----------|-------------|------------|-------------|------------|----------|-----|-----|------|-----|"
    );
    for f in &figures {
        println!(
            "| {:>9} | {:>8.0} | {:>8.0} ms | {:>7.0} ms | {:>7.1} MiB | {:>6.1} MiB | {:>5} ms | {:>3} ms | {:>3} ms | {:>4} | {:>3} |",
            f.stored,
            f.create_per_s,
            f.start_empty.as_secs_f64() * 1000.0,
            f.start_full.as_secs_f64() * 1000.0,
            f.rss_created,
            f.rss_firing,
            f.late.0,
            f.late.1,
            f.late.2,
            f.lost,
            f.duplicates,
        );
    }
    println!(
        "\n| stored    | page of 50 p50 / p99 | search, many match p50 / p99 | search, one matches p50 / p99 |"
    );
    println!(
        "|-----------|----------------------|------------------------------|-------------------------------|"
    );
    for f in &figures {
        println!(
            "| {:>9} | {:>7.1} / {:>7.1} ms | {:>9.1} / {:>9.1} ms | {:>10.1} / {:>9.1} ms |",
            f.stored,
            f.page.0,
            f.page.1,
            f.search_many.0,
            f.search_many.1,
            f.search_one.0,
            f.search_one.1,
        );
    }
}
