//! The contract end to end: a trigger as it travels on the wire reaches a
//! job built with the guest SDK, and the result travels back in the
//! protocol's shape.

use cronbox_example_jobs as jobs;
use cronbox_protocol::{Outcome, Trigger};
use cronbox_runtime::{InstanceMode, JobWorker, RunHandle, RunRequest, Runtime, RuntimeConfig};

#[tokio::test]
async fn a_wire_trigger_reaches_the_guest_and_the_outcome_travels_back() {
    let wire = serde_json::json!({
        "job_id": 7,
        "run_id": 4242,
        "param": "",
        "shard_index": 1,
        "shard_total": 3,
        "kind": "schedule",
        "scheduled_at_ms": 1_790_000_000_000i64,
        "attempt": 0
    });
    let trigger: Trigger = serde_json::from_value(wire).expect("the wire shape of a trigger");

    let runtime = Runtime::new(RuntimeConfig::default()).unwrap();
    let module = runtime.load(jobs::bytes("sharded")).await.unwrap();
    let mut worker = JobWorker::new(&runtime, module, InstanceMode::Warm);
    let report = worker
        .run(RunRequest::new(trigger), &RunHandle::new())
        .await;

    let encoded = serde_json::to_value(&report.outcome).unwrap();
    assert_eq!(
        encoded,
        serde_json::json!({"outcome": "success", "message": "shard 1/3"})
    );
    let decoded: Outcome = serde_json::from_value(encoded).unwrap();
    assert_eq!(decoded.code(), 200);
    let log = serde_json::to_value(&report.log).unwrap();
    assert_eq!(log[0]["source"], "guest");
    assert_eq!(log[0]["level"], "info");
    assert_eq!(log[0]["text"], "handling shard 1 of 3");
}

#[test]
fn the_hello_job_is_at_most_ten_lines() {
    let source = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../example-jobs/hello/src/lib.rs"),
    )
    .unwrap();
    let lines = source
        .lines()
        .filter(|line| !line.trim().is_empty())
        .count();
    assert!(lines <= 10, "hello is {lines} lines");
}
