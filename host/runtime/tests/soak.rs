//! Many runs on one warm instance: state stays right, memory stays flat.

use std::collections::HashMap;
use std::sync::Arc;

use cronbox_example_jobs as jobs;
use cronbox_runtime::{
    InstanceMode, JobWorker, Outcome, RunHandle, RunRequest, Runtime, RuntimeConfig, Trigger,
};

/// Resident set size of this process, in bytes (Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("Linux /proc");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|resident| resident.parse().ok())
        .expect("statm lists resident pages second");
    pages * 4096
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_counter_runs_on_one_warm_instance() {
    const RUNS: u64 = 10_000;
    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let module = runtime.load(jobs::bytes("counter")).await.unwrap();
    let mut worker = JobWorker::new(&runtime, module, InstanceMode::Warm);
    let mut state: HashMap<String, String> = HashMap::new();
    let mut rss_after_warmup = 0;
    for run in 1..=RUNS {
        let request = RunRequest {
            trigger: Trigger {
                run_id: run,
                ..Trigger::manual("", 0)
            },
            ..RunRequest::new(Trigger::manual("", 0))
        };
        let request = RunRequest {
            state: Arc::new(state.clone()),
            ..request
        };
        let report = worker.run(request, &RunHandle::new()).await;
        assert_eq!(
            report.outcome,
            Outcome::Success {
                message: format!("count={run} instance_runs={run}")
            }
        );
        assert_eq!(report.new_instance, run == 1);
        // Commit as the admin would: only a successful run's changes.
        for (key, value) in report.state_changes {
            match value {
                Some(value) => state.insert(key, value),
                None => state.remove(&key),
            };
        }
        if run == 1_000 {
            rss_after_warmup = rss_bytes();
        }
    }
    assert_eq!(state.get("count").map(String::as_str), Some("10000"));
    let growth = rss_bytes().saturating_sub(rss_after_warmup);
    assert!(
        growth < 8 << 20,
        "resident memory grew {} KiB over 9,000 runs",
        growth >> 10
    );
}
