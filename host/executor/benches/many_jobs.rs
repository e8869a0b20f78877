//! Many distinct jobs on one executor: resident memory, warm-hit rate and
//! start lateness, with warm instances capped by `--max-instances`, and
//! how a tenant's backlog weighs on another tenant's runs.
//!
//!     cargo bench -p cronbox-executor --bench many_jobs -- [JOBS] [SECONDS] [MAX_INSTANCES]
//!
//! One executor and a stand-in admin in this process, on loopback. Tenant
//! `steady` has JOBS jobs running `hello`: one in twenty ("hot") run
//! every second, the rest ("cold") every ten seconds, sent spread over
//! each second for SECONDS (so hot jobs' runs are a third of all: the warm
//! hits a cache that keeps them can reach). Rounds:
//!
//! 1. baseline: 100 jobs (all fit in the warm instances);
//! 2. JOBS jobs;
//! 3. JOBS jobs while tenant `flood` sends 2,000 runs of `sleeper` (one
//!    second each) at once, far more than the slots.
//!
//! Printed per round: runs, warm hits (runs that found their job's
//! instance warm; `instances_created` counts the others), `steady`'s start
//! lateness (sent → started) p50/p99/max, and the process's resident
//! memory at the end.
#![allow(clippy::unwrap_used)] // a benchmark: any failure should stop it loudly

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use cronbox_example_jobs as jobs;
use cronbox_executor::ExecutorConfig;
use cronbox_protocol::{RunCommand, Trigger, executor_paths};
use cronbox_tests::StandInAdmin;

const TOKEN: &str = "bench";
/// Runs of tenant `flood` in round 3 (ids above every `steady` run's).
const FLOOD: u64 = 2_000;
const FLOOD_FIRST_RUN: u64 = 1 << 40;

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Resident memory of this process, in MiB.
fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|kib| kib.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1024.0
}

/// A counter from the executor's `/metrics`.
async fn counter(http: &reqwest::Client, base: &str, name: &str) -> u64 {
    let text = http
        .get(format!("{base}{}", executor_paths::METRICS))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

fn command(tenant: &str, job: u64, run: u64, digest: &str, param: &str) -> RunCommand {
    let trigger = Trigger {
        job_id: job,
        run_id: run,
        ..Trigger::manual(param, now_ms())
    };
    RunCommand {
        tenant: tenant.to_owned(),
        ..RunCommand::new(trigger, digest_as_sent(digest))
    }
}

struct Round {
    jobs: u64,
    runs: usize,
    warm_hits: f64,
    late: (i64, i64, i64),
    rss: f64,
    flood: bool,
}

async fn round(job_count: u64, seconds: u64, max_instances: u32, flood: bool) -> Round {
    let admin = StandInAdmin::start(TOKEN).await;
    let hello = admin.add_module(jobs::bytes("hello"));
    let sleeper = admin.add_module(jobs::bytes("sleeper"));
    let data = tempfile::tempdir().unwrap();
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![admin.url()],
        TOKEN.to_owned(),
        data.path().to_path_buf(),
    );
    config.runtime.max_instances = max_instances;
    let executor = cronbox_executor::start(config).await.unwrap();
    let base = format!("http://{}", executor.local_addr());
    let url = format!("{base}{}", executor_paths::RUN);
    let http = cronbox_tls::client();

    // Which jobs run in each tenth of a second: hot jobs every second,
    // cold ones every ten.
    let hot = (job_count / 20).max(1);
    let mut plan: Vec<Vec<u64>> = vec![Vec::new(); 100];
    for job in 0..job_count {
        if job < hot {
            for second in 0..10 {
                plan[(second * 10 + job as usize % 10) % 100].push(job);
            }
        } else {
            plan[job as usize % 100].push(job);
        }
    }
    if flood {
        for run in 0..FLOOD {
            let command = command(
                "flood",
                1_000_000 + run,
                FLOOD_FIRST_RUN + run,
                &sleeper,
                "1000",
            );
            let response = http
                .post(&url)
                .bearer_auth(TOKEN)
                .json(&command)
                .send()
                .await
                .unwrap();
            assert!(response.status().is_success(), "{}", response.status());
        }
    }
    let created_before = counter(&http, &base, "cronbox_executor_instances_created_total").await;
    let mut sent_at = Vec::new();
    let started = Instant::now();
    let ticks = seconds * 10;
    for tick in 0..ticks {
        let due = started + Duration::from_millis(tick * 100);
        tokio::time::sleep_until(due.into()).await;
        let slice = &plan[(tick % 100) as usize];
        let mut sends = Vec::with_capacity(slice.len());
        for job in slice {
            let run = sent_at.len() as u64;
            sent_at.push(now_ms());
            let command = command("steady", *job, run, &hello, "x");
            let request = http.post(&url).bearer_auth(TOKEN).json(&command).send();
            sends.push(request);
        }
        for send in sends {
            assert!(send.await.unwrap().status().is_success());
        }
    }
    let runs = sent_at.len();
    let results = admin
        .wait_for_results(runs, Duration::from_secs(120 + seconds))
        .await;
    let rss = rss_mib();
    let created =
        counter(&http, &base, "cronbox_executor_instances_created_total").await - created_before;
    let mut lateness: Vec<i64> = results
        .iter()
        .filter(|result| result.run_id < FLOOD_FIRST_RUN)
        .map(|result| result.started_at_ms - sent_at[result.run_id as usize])
        .collect();
    lateness.sort();
    let pick = |p: f64| lateness[((lateness.len() as f64 - 1.0) * p).round() as usize];
    let flood_runs = if flood { FLOOD } else { 0 };
    executor.shutdown().await;
    Round {
        jobs: job_count,
        runs,
        // Flood runs made instances too: count steady's alone.
        warm_hits: 1.0 - (created.saturating_sub(flood_runs.min(created))) as f64 / runs as f64,
        late: (pick(0.5), pick(0.99), *lateness.last().unwrap()),
        rss,
        flood,
    }
}

fn main() {
    let numbers: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|word| word.parse().ok())
        .collect();
    let jobs = numbers.first().copied().unwrap_or(10_000);
    let seconds = numbers.get(1).copied().unwrap_or(20);
    let max_instances = numbers.get(2).copied().unwrap_or(1_000) as u32;
    let threads = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let rounds = threads.block_on(async {
        vec![
            round(100, seconds, max_instances, false).await,
            round(jobs, seconds, max_instances, false).await,
            round(jobs, seconds, max_instances, true).await,
        ]
    });
    println!(
        "\nMany jobs on one executor: hello, one job in twenty every second and the rest every \
         ten, {seconds} s, --max-instances {max_instances}\n"
    );
    println!(
        "| jobs   | flood of 2,000 sleepers | runs   | warm hits | start p50 | p99     | max     | RSS        |"
    );
    println!(
        "|--------|-------------------------|--------|-----------|-----------|---------|---------|------------|"
    );
    for r in rounds {
        println!(
            "| {:>6} | {:<23} | {:>6} | {:>8.1}% | {:>6} ms | {:>4} ms | {:>4} ms | {:>6.1} MiB |",
            r.jobs,
            if r.flood { "yes, other tenant" } else { "no" },
            r.runs,
            r.warm_hits * 100.0,
            r.late.0,
            r.late.1,
            r.late.2,
            r.rss,
        );
    }
}

/// `text` as an admin would send it in a run command, a digest or not
/// (the executor must refuse one that is not).
fn digest_as_sent(text: &str) -> cronbox_protocol::Digest {
    serde_json::from_value(serde_json::Value::String(text.to_owned())).expect("any text")
}
