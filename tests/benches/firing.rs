//! End-to-end firing throughput and lateness: admins and one executor in
//! this process, on loopback, N jobs with a seconds cron (`* * * * * ?`)
//! running the trivial `hello` job.
//!
//!     cargo bench -p cronbox-tests --bench firing [-- JOBS SECONDS]...
//!     cargo bench -p cronbox-tests --bench firing -- pg ADMINS JOBS SECONDS
//!     cargo bench -p cronbox-tests --bench firing -- spread JOBS SECONDS...
//!     cargo bench -p cronbox-tests --bench firing -- legacy spread JOBS SECONDS...
//!     cargo bench -p cronbox-tests --bench firing -- tls spread JOBS SECONDS...
//!     OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 cargo bench ... -- spread JOBS SECONDS
//!
//! The first form uses one admin on embedded SQLite; `pg` uses a real
//! PostgreSQL (started for the run) and ADMINS admins sharing it, its run
//! table with the 35 day partitions a month of retention keeps.
//!
//! Every job fires on the second, so a round is a burst of JOBS runs due
//! on the same millisecond each second (the worst case: the last of them
//! waits for all the others). With `spread` (before `pg` or the numbers),
//! each job has a jitter of up to 999 ms (`schedule_rules.jitter_ms`), so
//! the same runs/s arrive spread over each second: a steady load.
//!
//! For each (jobs, seconds) round it prints runs/s, start lateness
//! (scheduled → execution start, from the run table) p50/p99/max, and the
//! lost (a second with no run) and duplicate (a second with two) counts,
//! and the CPU time the whole process (admins, executor and this bench's
//! own requests) used over the window per run it was due to fire: a
//! steadier figure than lateness for comparing two builds.
#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cronbox_admin::clock::{Clock as _, SystemClock};
use cronbox_admin::store::RunFilter;
use cronbox_admin::{AdminConfig, Database, SchedulerConfig, Store};
use cronbox_example_jobs as jobs;
use cronbox_executor::ExecutorConfig;
use cronbox_tests::{AdminClient, PostgresServer, process_cpu_ms};
use serde_json::{Value, json};

/// The allocator the `cronbox` binary uses.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const API: &str = "bench-api";
const EXEC: &str = "bench-exec";
/// Seconds from the last job's start to the round's first measured one.
const WARM_UP_SECONDS: i64 = 30;
/// Day partitions of the run table made before a PostgreSQL round.
const PARTITION_DAYS: i64 = 35;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Where the admins keep their data.
enum Backend {
    Sqlite,
    /// A fresh database on this server, shared by this many admins.
    Postgres(usize),
}

/// What each round is run with besides plain HTTP (`legacy`: also a round
/// of the same jobs on a stand-in xxl-job executor; `tls`: also a round
/// with every hop on TLS, from a private CA made for it).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Variant {
    Plain,
    Legacy,
    Tls,
}

/// How the fires of a round fall within each second.
#[derive(Clone, Copy)]
enum Arrival {
    /// Every job on the second.
    Burst,
    /// Each fire jittered by up to 999 ms.
    Spread,
}

/// A stand-in xxl-job executor (3.x line) of group `group`: every run it is
/// sent is accepted and reported as succeeded, started when it arrived, in
/// a callback every 20 ms. Registered once (a round is shorter than the
/// admin's 90 s dead-after).
async fn stand_in_xxl_executor(admin_url: &str, group: &str, token: &'static str) {
    use axum::routing::post;
    let (arrived, mut arrivals) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let router = axum::Router::new().route(
        "/run",
        post(move |axum::Json(trigger): axum::Json<Value>| {
            let arrived = arrived.clone();
            async move {
                let _ = arrived.send(json!({
                    "logId": trigger["logId"], "logDateTim": now_ms(),
                    "handleCode": 200, "handleMsg": "ok"
                }));
                axum::Json(json!({ "code": 200, "msg": null }))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}/", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    let http = cronbox_tls::client();
    let callback = format!("{admin_url}/xxl-job-admin/api/callback");
    let reporter = http.clone();
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(Duration::from_millis(20));
        loop {
            ticks.tick().await;
            let mut batch = Vec::new();
            while let Ok(item) = arrivals.try_recv() {
                batch.push(item);
            }
            let reported = reporter
                .post(&callback)
                .header("XXL-JOB-ACCESS-TOKEN", token)
                .json(&batch)
                .send();
            if !batch.is_empty() && reported.await.is_err() {
                return; // the round is over: its admin stopped
            }
        }
    });
    let registered: Value = http
        .post(format!("{admin_url}/xxl-job-admin/api/registry"))
        .header("XXL-JOB-ACCESS-TOKEN", token)
        .json(&json!({ "registryGroup": "EXECUTOR", "registryKey": group,
                       "registryValue": address }))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(registered["code"], 200, "{registered}");
}

async fn round(
    job_count: usize,
    seconds: i64,
    backend: &Backend,
    arrival: Arrival,
    variant: Variant,
) {
    let legacy = variant == Variant::Legacy;
    let data = tempfile::tempdir().unwrap();
    // With TLS: a CA and a certificate for 127.0.0.1, the admins' and the
    // executor's, and every client trusting that CA.
    let (tls, ca_file) = if variant == Variant::Tls {
        let ca = cronbox_tls::certs::new_ca("bench CA").unwrap();
        let ca_file = data.path().join("ca.pem");
        std::fs::write(&ca_file, &ca.cert).unwrap();
        let identity = cronbox_tls::ServerIdentity {
            cert: data.path().join("server.pem"),
            key: data.path().join("server-key.pem"),
        };
        cronbox_tls::certs::issue(&ca, &["127.0.0.1".to_owned()])
            .unwrap()
            .write(&identity.cert, &identity.key)
            .unwrap();
        (Some(identity), Some(ca_file))
    } else {
        (None, None)
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let postgres = matches!(backend, Backend::Postgres(_)).then(PostgresServer::start);
    let (databases, store_url) = match (backend, &postgres) {
        (Backend::Postgres(admins), Some(server)) => {
            let url = server.create_database("bench");
            // As many day partitions as a month of retention keeps, so
            // that updates by run id meet the partitions they meet in use.
            let store = Store::connect(&url).await.unwrap();
            let partitions = store
                .maintain_run_partitions(now_ms(), PARTITION_DAYS, i64::MIN)
                .await
                .unwrap();
            assert!(partitions.created.len() as i64 >= PARTITION_DAYS - 1);
            drop(store);
            (vec![Database::Url(url.clone()); *admins], url)
        }
        _ => (
            vec![Database::Sqlite(data.path().join("admin"))],
            format!(
                "sqlite://{}",
                data.path().join("admin").join("cronbox.db").display()
            ),
        ),
    };
    let mut admins = Vec::new();
    for database in databases {
        admins.push(
            cronbox_admin::start(AdminConfig {
                bind: "127.0.0.1:0".parse().unwrap(),
                database,
                migrations: Default::default(),
                api_token: API.into(),
                executor_token: EXEC.into(),
                scheduler: SchedulerConfig {
                    // One tenant holds every job: as an operator would for
                    // a tenant this busy, its jobs and runs in progress
                    // (dispatched ahead, held, running, result on its way:
                    // ~10,000 at 6,000 runs/s) are not capped.
                    quota_defaults: cronbox_admin::quotas::QuotaDefaults::default().with(
                        &serde_json::from_value(
                            json!({ "jobs": 1_000_000, "running_runs": 1_000_000 }),
                        )
                        .unwrap(),
                    ),
                    ca_file: ca_file.clone(),
                    ..SchedulerConfig::default()
                },
                max_request_bytes: 64 << 20,
                tls: tls.clone(),
                metrics_export: None,
            })
            .await
            .unwrap(),
        );
    }
    let admin_urls: Vec<String> = admins
        .iter()
        .map(|admin| format!("{scheme}://{}", admin.local_addr()))
        .collect();
    let admin_url = admin_urls[0].clone();
    let mut executor_config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        admin_urls.clone(),
        EXEC.into(),
        data.path().join("executor"),
    );
    executor_config.beat_interval = Duration::from_secs(1);
    executor_config.tls = tls;
    executor_config.ca_file = ca_file.clone();
    // One instance slot per job, up to the 10,064 whose reservations fit
    // the address space (at 12,000 the pooling allocator's mmap fails).
    executor_config.runtime.max_instances = (job_count.min(10_000) as u32 + 64).max(64);
    let executor = cronbox_executor::start(executor_config).await.unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let http = cronbox_tls::client_builder(ca_file.as_deref())
        .unwrap()
        .build()
        .unwrap();
    let digest: Value = http
        .post(format!("{admin_url}/api/v1/modules"))
        .bearer_auth(API)
        .body(jobs::bytes("hello"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let digest = digest["digest"].as_str().unwrap().to_owned();
    const LEGACY_TOKEN: &str = "bench-legacy-token";
    if legacy {
        let group: Value = http
            .put(format!("{admin_url}/api/v1/groups/bench-legacy"))
            .bearer_auth(API)
            .json(&json!({ "address_type": "AUTO",
                "legacy": { "protocol": "xxl-job-3.4", "access_token": LEGACY_TOKEN } }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(group["legacy"], "xxl-job-3.4", "{group}");
        stand_in_xxl_executor(&admin_url, "bench-legacy", LEGACY_TOKEN).await;
    }
    let mut ids = Vec::with_capacity(job_count);
    for i in 0..job_count {
        let mut job = json!({ "name": format!("bench-{i}"), "module_digest": digest,
                              "schedule_type": "CRON", "schedule_conf": "* * * * * ?" });
        if legacy {
            job = json!({ "name": format!("bench-{i}"), "group": "bench-legacy",
                          "executor_handler": "bench", "schedule_type": "CRON",
                          "schedule_conf": "* * * * * ?" });
        }
        if let Arrival::Spread = arrival {
            job["schedule_rules"] = json!({ "jitter_ms": 999 });
        }
        let job: Value = http
            .post(format!("{admin_url}/api/v1/jobs"))
            .bearer_auth(API)
            .json(&job)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        ids.push(job["id"].as_i64().unwrap());
    }
    // Started by 16 clients at once (one at a time, a busy admin took
    // minutes to start thousands).
    let mut starting = tokio::task::JoinSet::new();
    for (client, chunk) in ids.chunks(ids.len().div_ceil(16).max(1)).enumerate() {
        let (http, chunk, admin_url) = (
            http.clone(),
            chunk.to_vec(),
            admin_urls[client % admin_urls.len()].clone(),
        );
        starting.spawn(async move {
            for id in chunk {
                http.post(format!("{admin_url}/api/v1/jobs/{id}/start"))
                    .bearer_auth(API)
                    .send()
                    .await
                    .unwrap();
            }
        });
    }
    starting.join_all().await;
    // Measure whole seconds, after a warm-up: the first runs compile
    // nothing but create each job's instance, and the first pre-reads
    // write every job's fires at once.
    let begin = (now_ms() / 1000 + WARM_UP_SECONDS) * 1000;
    let end = begin + seconds * 1000;
    // The window is over once a fire planned after its last second (and
    // jittered up to 999 ms past it) has run; then every run of it must
    // have ended. The jobs go on firing until the admin stops.
    // The process's CPU time over the window: what a run costs, admin and
    // executor together, a steadier figure than lateness between rounds.
    let cpu_over_window = tokio::spawn(async move {
        let clock = SystemClock::default();
        clock.sleep_until(begin).await;
        let first = process_cpu_ms();
        clock.sleep_until(end).await;
        process_cpu_ms() - first
    });
    let api = AdminClient::through(admin_url.clone(), API, http.clone());
    let window = Duration::from_millis((end - now_ms()).max(0) as u64);
    api.until_a_run_succeeded_from(
        cronbox_api::JobId(ids[0]),
        end + 1_000,
        window + Duration::from_secs(120),
    )
    .await;
    api.until_ended_before(end + 1_000).await;

    let store = Store::connect(&store_url).await.unwrap();
    let runs = store
        .list_runs(&RunFilter {
            from_ms: Some(begin),
            // A jittered fire runs up to 999 ms after its second.
            to_ms: Some(end + 1000),
            limit: i64::MAX / 2,
            ..RunFilter::default()
        })
        .await
        .unwrap();
    let mut per_second: HashMap<(i64, i64), usize> = HashMap::new();
    let mut lateness = Vec::new();
    let mut unfinished = 0;
    // Counted by the second each fire was planned for (jitter < 1 s).
    let planned = |run: &cronbox_admin::store::RunRow| run.scheduled_at_ms / 1000 * 1000;
    for run in runs
        .iter()
        .filter(|run| run.kind.as_str() == "schedule" && planned(run) < end)
    {
        *per_second.entry((run.job_id.0, planned(run))).or_default() += 1;
        match run.started_at_ms {
            Some(started) if run.status.as_str() == "success" => {
                lateness.push(started - run.scheduled_at_ms)
            }
            _ => unfinished += 1,
        }
    }
    if std::env::var_os("CRONBOX_BENCH_DEBUG").is_some() {
        // Per planned second of the window: the latest write, dispatch and
        // start past the fire's time (negative: ahead of it).
        let mut worst: std::collections::BTreeMap<i64, (i64, i64, i64)> = Default::default();
        for run in runs.iter().filter(|run| planned(run) < end) {
            let entry = worst.entry((planned(run) - begin) / 1000).or_insert((
                i64::MIN,
                i64::MIN,
                i64::MIN,
            ));
            entry.0 = entry.0.max(run.created_at_ms - run.scheduled_at_ms);
            if let Some(sent) = run.dispatched_at_ms {
                entry.1 = entry.1.max(sent - run.scheduled_at_ms);
            }
            if let Some(started) = run.started_at_ms {
                entry.2 = entry.2.max(started - run.scheduled_at_ms);
            }
        }
        eprintln!("debug: second → (latest write, dispatch, start) past the fire: {worst:?}");
        let all: Vec<_> = store
            .runs_of_job(cronbox_admin::store::JobId(ids[0]))
            .await
            .unwrap();
        eprintln!(
            "debug: job {} has {} runs; window {begin}..{end}; scheduled {:?}",
            ids[0],
            all.len(),
            all.iter()
                .map(|r| (r.scheduled_at_ms - begin, r.status))
                .collect::<Vec<_>>()
        );
        let jobs_now = store.jobs().await.unwrap();
        eprintln!(
            "debug: {} jobs, {} enabled",
            jobs_now.len(),
            jobs_now.iter().filter(|j| j.enabled).count()
        );
    }
    let expected = job_count as i64 * seconds;
    let fired = per_second.len() as i64;
    let duplicates: usize = per_second.values().map(|n| n - 1).sum();
    lateness.sort();
    let pct = |p: f64| {
        lateness
            .get(((lateness.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(-1)
    };
    let store_name = match backend {
        Backend::Sqlite => "SQLite, 1 admin".to_owned(),
        Backend::Postgres(admins) => format!("PostgreSQL, {admins} admin(s)"),
    } + match arrival {
        Arrival::Burst => "",
        Arrival::Spread => ", spread",
    } + match variant {
        Variant::Plain => "",
        Variant::Legacy => ", legacy",
        Variant::Tls => ", TLS",
    };
    let cpu_ms = cpu_over_window.await.unwrap();
    println!(
        "| {store_name:<22} | {job_count:>5} | {seconds:>3} s | {:>8.0} | {:>5} ms | {:>5} ms | {:>6} ms | {:>5} | {duplicates:>4} | {unfinished:>4} | {:>6.0} µs |",
        lateness.len() as f64 / seconds as f64,
        pct(0.50),
        pct(0.99),
        lateness.last().copied().unwrap_or(-1),
        expected - fired,
        cpu_ms as f64 * 1000.0 / expected.max(1) as f64,
    );
    executor.shutdown().await;
    for admin in admins {
        admin.shutdown().await;
    }
    drop(postgres);
}

fn main() {
    // Logs as the cronbox binary writes them (CRONBOX_LOG, warnings by
    // default); with OTEL_EXPORTER_OTLP_ENDPOINT set, every run's spans
    // exported as `cronbox up` exports them (the traced rounds).
    let traces = cronbox_telemetry::OtelSettings {
        endpoint: std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT").ok(),
        service_name: "cronbox-bench".to_owned(),
        ..cronbox_telemetry::OtelSettings::default()
    };
    let telemetry = cronbox_telemetry::init(cronbox_telemetry::LogFormat::Text, &traces);
    let mut words: Vec<String> = std::env::args().skip(1).collect();
    let mut variant = Variant::Plain;
    for (word, named) in [("legacy", Variant::Legacy), ("tls", Variant::Tls)] {
        if let Some(at) = words.iter().position(|given| given == word) {
            words.remove(at);
            variant = named;
        }
    }
    let arrival = match words.iter().position(|word| word == "spread") {
        Some(at) => {
            words.remove(at);
            Arrival::Spread
        }
        None => Arrival::Burst,
    };
    let postgres_admins: Option<usize> = match words.iter().position(|word| word == "pg") {
        Some(at) => words.get(at + 1).and_then(|n| n.parse().ok()),
        None => None,
    };
    let numbers: Vec<i64> = words
        .iter()
        .skip_while(|word| postgres_admins.is_some() && *word != "pg")
        .skip(if postgres_admins.is_some() { 2 } else { 0 })
        .filter_map(|word| word.parse().ok())
        .collect();
    let rounds: Vec<(usize, i64)> = if numbers.len() >= 2 {
        numbers
            .chunks(2)
            .map(|pair| (pair[0] as usize, pair[1]))
            .collect()
    } else {
        vec![(1000, 60), (2000, 30)]
    };
    let backend = match postgres_admins {
        Some(admins) => Backend::Postgres(admins),
        None => Backend::Sqlite,
    };
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    threads.block_on(async {
        println!("Seconds-cron firing, admins + one executor in one process, trivial job\n");
        println!(
            "| store                  | jobs  | for   | runs/s   | late p50 | p99      | max       | lost  | dup  | not ok | CPU/run |"
        );
        println!(
            "|------------------------|-------|-------|----------|----------|----------|-----------|-------|------|--------|---------|"
        );
        for (jobs, seconds) in rounds {
            round(jobs, seconds, &backend, arrival, Variant::Plain).await;
            if variant != Variant::Plain {
                round(jobs, seconds, &backend, arrival, variant).await;
            }
        }
    });
    telemetry.finish();
}
