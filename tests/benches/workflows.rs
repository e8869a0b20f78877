//! The workflow engine's cost per node: an admin (embedded SQLite) and an
//! executor in this process on loopback run W chains of K `hello` runs
//! twice — as child jobs (job 1's child is job 2, ...: K plain runs, each
//! started by its parent's success) and as a workflow of K nodes, each
//! node's input rendered from its parent's output — each chain started
//! by one API request. It prints, for each, the runs, the wall time and
//! the CPU time the whole process used per run; the difference is what
//! the engine adds to a run (the target: at most 2 ms). Then one workflow
//! run fans a node out over 1,000 elements (50 at a time) and checks that
//! each element ran exactly once.
//!
//!     cargo bench -p cronbox-tests --bench workflows [-- CHAINS LENGTH]
#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::time::{Duration, Instant};

use cronbox_admin::{AdminConfig, Database, SchedulerConfig};
use cronbox_api::{JobId, WorkflowSpec};
use cronbox_example_jobs as jobs;
use cronbox_executor::ExecutorConfig;
use cronbox_tests::{AdminClient, process_cpu_ms};
use serde_json::json;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const API: &str = "bench-api";
const EXEC: &str = "bench-exec";

/// Runs of the database that ended.
async fn ended_runs(database: &sqlx::AnyPool) -> i64 {
    sqlx::query_scalar("SELECT COUNT(*) FROM run WHERE status NOT IN ('pending', 'dispatched')")
        .fetch_one(database)
        .await
        .unwrap()
}

/// Waits until `total` runs ended (a count query per poll: a negligible
/// cost); the wall time and the process's CPU time since `started`.
async fn until_ended(
    database: &sqlx::AnyPool,
    total: i64,
    started: (Instant, i64),
) -> (Duration, i64) {
    cronbox_tests::until_within(Duration::from_secs(600), "the runs end", || async {
        (ended_runs(database).await >= total).then_some(())
    })
    .await;
    (started.0.elapsed(), process_cpu_ms() - started.1)
}

fn report(what: &str, runs: i64, (wall, cpu_ms): (Duration, i64)) -> f64 {
    let per_run_us = cpu_ms as f64 * 1000.0 / runs as f64;
    println!(
        "| {what:<22} | {runs:>6} | {:>7.1} s | {:>8} ms | {per_run_us:>7.0} µs |",
        wall.as_secs_f64(),
        cpu_ms
    );
    per_run_us
}

async fn bench(chains: usize, length: usize) {
    let data = tempfile::tempdir().unwrap();
    let admin = cronbox_admin::start(AdminConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        database: Database::Sqlite(data.path().join("admin")),
        migrations: Default::default(),
        api_token: API.into(),
        executor_token: EXEC.into(),
        scheduler: SchedulerConfig {
            quota_defaults: cronbox_admin::quotas::QuotaDefaults::default()
                .with(&serde_json::from_value(json!({ "running_runs": 1_000_000 })).unwrap()),
            ..SchedulerConfig::default()
        },
        max_request_bytes: 64 << 20,
        tls: None,
        metrics_export: None,
    })
    .await
    .unwrap();
    let base = format!("http://{}", admin.local_addr());
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![base.clone()],
        EXEC.into(),
        data.path().join("executor"),
    );
    config.beat_interval = Duration::from_millis(300);
    let executor = cronbox_executor::start(config).await.unwrap();
    let api = AdminClient::new(base, API);
    cronbox_tests::until("the executor registers", || async {
        let executors = api.api.executors().await.ok()?;
        executors.iter().any(|e| e.alive).then_some(())
    })
    .await;
    let database = sqlx::AnyPool::connect(&format!(
        "sqlite://{}",
        data.path().join("admin/cronbox.db").display()
    ))
    .await
    .unwrap();

    // Child jobs: step-K ... step-1, each the child of the one before.
    let digest = api
        .api
        .upload(jobs::bytes("hello"), Some("hello"), &[])
        .await
        .unwrap()
        .digest;
    let mut next: Option<JobId> = None;
    for index in (1..=length).rev() {
        let spec = json!({ "name": format!("step-{index}"), "module_digest": digest,
                           "param": "x", "children": next.into_iter().collect::<Vec<_>>() });
        next = Some(
            api.api
                .create_job(&serde_json::from_value(spec).unwrap())
                .await
                .unwrap()
                .id,
        );
    }
    let first = next.unwrap();
    let spec = json!({ "name": "node", "module_digest": digest });
    api.api
        .create_job(&serde_json::from_value(spec).unwrap())
        .await
        .unwrap();
    let nodes: Vec<_> = (1..=length)
        .map(|index| {
            let param = if index == 1 {
                "x".to_owned()
            } else {
                format!("{{{{ nodes.n{}.output }}}}", index - 1)
            };
            json!({ "name": format!("n{index}"), "job": "node", "param": param })
        })
        .collect();
    let edges: Vec<_> = (2..=length)
        .map(|index| json!({ "from": format!("n{}", index - 1), "to": format!("n{index}") }))
        .collect();
    let workflow: WorkflowSpec =
        serde_json::from_value(json!({ "nodes": nodes, "edges": edges })).unwrap();
    api.api.put_workflow("chain", &workflow).await.unwrap();
    // Warm up: one chain each way (compiles the component, fills caches).
    api.trigger(first, json!({})).await;
    api.api.start_workflow_run("chain", None).await.unwrap();
    until_ended(
        &database,
        2 * length as i64,
        (Instant::now(), process_cpu_ms()),
    )
    .await;

    let total = (chains * length) as i64;
    println!("| chains of {length} as | runs | wall | CPU | CPU per run |");
    println!("|---|---|---|---|---|");
    let already = ended_runs(&database).await;
    let started = (Instant::now(), process_cpu_ms());
    for _ in 0..chains {
        api.trigger(first, json!({})).await;
    }
    let children = report(
        "child jobs",
        total,
        until_ended(&database, already + total, started).await,
    );
    let already = ended_runs(&database).await;
    let started = (Instant::now(), process_cpu_ms());
    for _ in 0..chains {
        api.api.start_workflow_run("chain", None).await.unwrap();
    }
    let nodes = report(
        "workflow nodes",
        total,
        until_ended(&database, already + total, started).await,
    );
    let fanned = fan_out(&api, &database, &digest).await;
    hostile_template(&api).await;
    println!(
        "\nthe workflow engine adds {:.0} µs of CPU per run of a chain's node, \
         {:.0} µs per run of a fanned-out node's element",
        nodes - children,
        fanned - children
    );
    drop(database);
    executor.shutdown().await;
    admin.shutdown().await;
}

/// Elements of the fan-out measured.
const FAN_OUT: usize = 1_000;

/// One workflow run whose only node fans out over [`FAN_OUT`] elements,
/// 50 at a time: its CPU per element's run, once every element ran
/// exactly once (checked).
async fn fan_out(api: &AdminClient, database: &sqlx::AnyPool, digest: &cronbox_api::Digest) -> f64 {
    let spec = json!({ "name": "each", "module_digest": digest });
    let job = api
        .api
        .create_job(&serde_json::from_value(spec).unwrap())
        .await
        .unwrap()
        .id;
    let workflow: WorkflowSpec = serde_json::from_value(json!({
        "nodes": [{ "name": "each", "job": "each", "for_each": "input.items",
                    "param": "{{ index }}", "concurrency": 50 }]
    }))
    .unwrap();
    api.api.put_workflow("fan", &workflow).await.unwrap();
    let items: Vec<String> = (0..FAN_OUT).map(|i| format!("e{i}")).collect();
    let input = json!({ "items": items }).to_string();
    let already = ended_runs(database).await;
    let started = (Instant::now(), process_cpu_ms());
    let run = api
        .api
        .start_workflow_run("fan", Some(&input))
        .await
        .unwrap();
    let measured = until_ended(database, already + FAN_OUT as i64, started).await;
    let run = cronbox_tests::until("the fan-out's run ends", || async {
        let run = api.api.workflow_run(run.id).await.unwrap();
        (run.status != cronbox_api::WorkflowRunStatus::Running).then_some(run)
    })
    .await;
    let per_run = report(&format!("fan-out of {FAN_OUT}"), FAN_OUT as i64, measured);
    assert_eq!(run.status, cronbox_api::WorkflowRunStatus::Succeeded);
    let counts = run.nodes[0].items.unwrap();
    assert_eq!(
        (counts.total, counts.succeeded),
        (FAN_OUT as i64, FAN_OUT as i64)
    );
    let (runs, inputs): (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), COUNT(DISTINCT param) FROM run WHERE job_id = $1")
            .bind(job.0)
            .fetch_one(database)
            .await
            .unwrap();
    assert_eq!((runs, inputs), (FAN_OUT as i64, FAN_OUT as i64));
    println!(
        "\nfan-out of {FAN_OUT}: {runs} runs, {inputs} distinct inputs: every element ran exactly once"
    );
    per_run
}

/// A developer's template at its bound against a large output: a node
/// fanned out over 1,000 elements whose param is
/// [`WorkflowSpec::MAX_TEMPLATE_HOLES`] holes reading a field of a ~60 KB
/// output (each hole parsed that output again before, and cloned what it
/// read). Its elements' inputs pass 1 MiB after a few hundred, so the node
/// fails without a run: the process's CPU until then (the first node's run
/// and the rendering) bounds what rendering cost.
async fn hostile_template(api: &AdminClient) {
    api.api
        .upload(jobs::bytes("extract"), Some("extract"), &[])
        .await
        .unwrap();
    for name in ["big", "wide"] {
        let spec = json!({ "name": name, "module": "extract", "param": "2000" });
        api.api
            .create_job(&serde_json::from_value(spec).unwrap())
            .await
            .unwrap();
    }
    let holes = "{{ nodes.big.output.count }}".repeat(WorkflowSpec::MAX_TEMPLATE_HOLES);
    let workflow: WorkflowSpec = serde_json::from_value(json!({
        "nodes": [
            { "name": "big", "job": "big" },
            { "name": "each", "job": "wide", "for_each": "input.items", "param": holes }
        ],
        "edges": [{ "from": "big", "to": "each" }]
    }))
    .unwrap();
    api.api.put_workflow("holes", &workflow).await.unwrap();
    // Another tenant's job firing every second meanwhile: how late its
    // runs start around the attack.
    let other = api.api.create_tenant("bystander").await.unwrap();
    let bystander = api.with_token(&other.token);
    let ticker = bystander
        .job(
            "ticker",
            jobs::bytes("hello"),
            json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?" }),
        )
        .await;
    bystander.api.start_job(ticker).await.unwrap();
    cronbox_tests::until("the ticker runs", || async {
        (bystander.runs(ticker).await.len() >= 2).then_some(())
    })
    .await;
    let items: Vec<u32> = (0..1000).collect();
    let input = json!({ "items": items }).to_string();
    // Measured from the start: the first node's one run is a few
    // milliseconds of it.
    let started = (Instant::now(), process_cpu_ms());
    let run = api
        .api
        .start_workflow_run("holes", Some(&input))
        .await
        .unwrap();
    let ended = cronbox_tests::until("the fanned-out node fails", || async {
        let run = api.api.workflow_run(run.id).await.ok()?;
        (run.status != cronbox_api::WorkflowRunStatus::Running).then_some(run)
    })
    .await;
    let (wall, cpu_ms) = (started.0.elapsed(), process_cpu_ms() - started.1);
    // Three more of the ticker's runs after the attack, then its lateness
    // over all of them.
    let seen = bystander.runs(ticker).await.len();
    cronbox_tests::until("the ticker runs on", || async {
        (bystander.runs(ticker).await.len() >= seen + 3).then_some(())
    })
    .await;
    let mut late: Vec<i64> = bystander
        .runs(ticker)
        .await
        .iter()
        .filter_map(|run| Some(run.started_at_ms? - run.scheduled_at_ms))
        .collect();
    late.sort_unstable();
    let output = ended.nodes[0].output.as_deref().unwrap_or_default().len();
    println!(
        "\n{} holes over a {output}-byte output, fanned out over 1,000 elements: \
         the node ended in {:.0} ms, the process used {cpu_ms} ms of CPU ({})",
        WorkflowSpec::MAX_TEMPLATE_HOLES,
        wall.as_secs_f64() * 1000.0,
        ended.nodes[1].message.as_deref().unwrap_or_default()
    );
    println!(
        "another tenant's every-second job meanwhile: {} runs, started late by {} ms at most",
        late.len(),
        late.last().copied().unwrap_or_default()
    );
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|arg| arg.parse().ok())
        .collect();
    let (chains, length) = match args[..] {
        [chains, length] => (chains, length),
        _ => (200, 5),
    };
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(bench(chains, length));
}
