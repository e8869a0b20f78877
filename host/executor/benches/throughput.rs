//! Runs per second through the executor's HTTP API for a trivial job, and
//! dispatch-to-start latency. Prints a table; figures go into BENCHMARKS.md.
//!
//!     cargo bench -p cronbox-executor --bench throughput
//!
//! One executor and a stand-in admin in this process, on loopback. Senders
//! post `run` commands for `hello` spread over many jobs (SERIAL_EXECUTION
//! per job); the admin side collects the callbacks. Throughput is runs
//! called back per second from the first send to the last callback;
//! dispatch-to-start is the run's recorded start minus the moment its `run`
//! request was sent (both wall clock, ms).
#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cronbox_example_jobs as jobs;
use cronbox_executor::ExecutorConfig;
use cronbox_protocol::{RunCommand, Trigger, executor_paths};
use cronbox_tests::StandInAdmin;

const TOKEN: &str = "bench";

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

async fn round(runs: u64, jobs_count: u64, senders: u64) {
    let admin = StandInAdmin::start(TOKEN).await;
    let digest = admin.add_module(jobs::bytes("hello"));
    let data = tempfile::tempdir().unwrap();
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![admin.url()],
        TOKEN.to_owned(),
        data.path().to_path_buf(),
    );
    config.runtime.max_instances = (jobs_count as u32).max(64);
    let executor = cronbox_executor::start(config).await.unwrap();
    let url = format!("http://{}{}", executor.local_addr(), executor_paths::RUN);
    let http = cronbox_tls::client();

    // Warm up: load the module and one instance per job.
    for job in 0..jobs_count {
        let command = command(job, 1_000_000 + job, &digest, 0);
        http.post(&url)
            .bearer_auth(TOKEN)
            .json(&command)
            .send()
            .await
            .unwrap();
    }
    admin
        .wait_for_results(jobs_count as usize, Duration::from_secs(60))
        .await;
    let warm = admin.results().len();

    let sent_at: Arc<Vec<AtomicU64>> = Arc::new((0..runs).map(|_| AtomicU64::new(0)).collect());
    let next = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..senders {
        let (http, url, digest, next, sent_at) = (
            http.clone(),
            url.clone(),
            digest.clone(),
            next.clone(),
            sent_at.clone(),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let run = next.fetch_add(1, Ordering::Relaxed);
                if run >= runs {
                    return;
                }
                let at = now_ms();
                sent_at[run as usize].store(at as u64, Ordering::Relaxed);
                let command = command(run % jobs_count, run, &digest, at);
                let response = http
                    .post(&url)
                    .bearer_auth(TOKEN)
                    .json(&command)
                    .send()
                    .await
                    .unwrap();
                assert!(response.status().is_success());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let results = admin
        .wait_for_results(warm + runs as usize, Duration::from_secs(300))
        .await;
    let elapsed = started.elapsed();
    let mut lateness: Vec<i64> = results
        .iter()
        .filter(|r| r.run_id < runs)
        .map(|r| r.started_at_ms - sent_at[r.run_id as usize].load(Ordering::Relaxed) as i64)
        .collect();
    let failures = results.iter().filter(|r| !r.outcome.is_success()).count();
    lateness.sort();
    let pct = |p: f64| lateness[((lateness.len() as f64 - 1.0) * p).round() as usize];
    println!(
        "| {runs:>6} | {jobs_count:>4} | {senders:>7} | {:>8.0} | {:>4} ms | {:>4} ms | {:>4} ms | {failures} |",
        runs as f64 / elapsed.as_secs_f64(),
        pct(0.50),
        pct(0.99),
        lateness.last().unwrap(),
    );
    executor.shutdown().await;
}

fn command(job: u64, run: u64, digest: &str, sent_ms: i64) -> RunCommand {
    let trigger = Trigger {
        job_id: job,
        run_id: run,
        ..Trigger::manual("bench", sent_ms)
    };
    RunCommand::new(trigger, digest_as_sent(digest))
}

fn main() {
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    threads.block_on(async {
        println!("Executor throughput over HTTP, trivial job (hello), one process, loopback\n");
        println!("| runs   | jobs | senders | runs/s   | start p50 | p99 | max | failed |");
        println!("|--------|------|---------|----------|-----------|-----|-----|--------|");
        round(5_000, 1, 8).await;
        round(20_000, 100, 16).await;
        round(20_000, 500, 32).await;
    });
}

/// `text` as an admin would send it in a run command, a digest or not
/// (the executor must refuse one that is not).
fn digest_as_sent(text: &str) -> cronbox_protocol::Digest {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).expect("any text")
}
