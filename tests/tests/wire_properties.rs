//! The wire and API types against hostile JSON, seeded and bounded: each
//! type's sample is mutated (fields dropped, replaced by JSON of any
//! shape, unknown fields added) thousands of times. Decoding ends in a
//! value or a serde error, never a panic; and whatever decodes survives a
//! round trip unchanged, so that what one side sends is what the other
//! reads.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::fmt::Debug;

use cronbox_api::{Job, JobSpec, Run, StateEdit, TriggerRequest};
use cronbox_protocol::{CallbackBatch, KillCommand, Registration, RunCommand, Trigger};
use rand::rngs::StdRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const SEED: u64 = 0x5eed_cb0c;
const CASES: usize = 2_000;

/// JSON of any shape, a few levels deep.
fn any_json(rng: &mut StdRng, depth: u32) -> Value {
    match rng.random_range(0..if depth == 0 { 6 } else { 8 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.random()),
        2 => json!(rng.random::<i64>()),
        3 => json!(rng.random::<f64>() * 1e6),
        4 => json!(
            [
                "", "x", "success", "schedule", "CRON", "é\u{0}", "-1", "NaN"
            ]
            .choose(rng)
            .unwrap()
        ),
        5 => json!(u64::MAX),
        6 => Value::Array(
            (0..rng.random_range(0..4))
                .map(|_| any_json(rng, depth - 1))
                .collect(),
        ),
        _ => {
            let keys = ["a", "run_id", "outcome", "level", "source", "kind", "state"];
            Value::Object(
                (0..rng.random_range(0..4))
                    .map(|_| {
                        (
                            keys.choose(rng).unwrap().to_string(),
                            any_json(rng, depth - 1),
                        )
                    })
                    .collect(),
            )
        }
    }
}

/// `value` with one field somewhere dropped, replaced or added.
fn mutate(value: &mut Value, rng: &mut StdRng) {
    match value {
        Value::Object(fields) if !fields.is_empty() && rng.random_bool(0.7) => {
            let keys: Vec<String> = fields.keys().cloned().collect();
            let key = keys.choose(rng).unwrap().clone();
            match rng.random_range(0..4) {
                0 => {
                    fields.remove(&key);
                }
                1 => {
                    fields.insert(key, any_json(rng, 2));
                }
                2 => {
                    fields.insert(format!("unknown_{}", rng.random::<u8>()), any_json(rng, 1));
                }
                _ => mutate(fields.get_mut(&key).unwrap(), rng),
            }
        }
        Value::Array(items) if !items.is_empty() && rng.random_bool(0.7) => {
            let at = rng.random_range(0..items.len());
            mutate(&mut items[at], rng);
        }
        other => *other = any_json(rng, 2),
    }
}

/// Mutations of `sample` decode or fail cleanly, and what decodes round
/// trips; how many decoded.
fn hostile<T: Serialize + DeserializeOwned + PartialEq + Debug>(sample: Value) -> usize {
    let decoded: T = serde_json::from_value(sample.clone()).expect("the sample decodes");
    let again: T = serde_json::from_value(serde_json::to_value(&decoded).unwrap()).unwrap();
    assert_eq!(again, decoded);
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut accepted = 0;
    for _ in 0..CASES {
        let mut value = sample.clone();
        for _ in 0..rng.random_range(1..=3) {
            mutate(&mut value, &mut rng);
        }
        if let Ok(decoded) = serde_json::from_value::<T>(value.clone()) {
            accepted += 1;
            let sent = serde_json::to_value(&decoded).unwrap();
            let read: T = serde_json::from_value(sent.clone())
                .unwrap_or_else(|error| panic!("{value} decoded but {sent} does not: {error}"));
            assert_eq!(read, decoded, "round trip of {value}");
        }
    }
    accepted
}

#[test]
fn executor_protocol_types_survive_hostile_json() {
    let command = RunCommand {
        trigger: Trigger::manual("p", 5),
        module_digest: "ab".repeat(32).parse().unwrap(),
        block_strategy: Default::default(),
        max_concurrency: 2,
        limits: Default::default(),
        state: [("k".to_owned(), "v".to_owned())].into(),
        state_revisions: [("k".to_owned(), 3)].into(),
        receipt: "r".into(),
        fresh_instance: true,
        start_in_ms: 7,
        tenant: "acme".into(),
        tenant_max_instances: Some(3),
        config: [("greeting".to_owned(), "hi".to_owned())].into(),
        http_allow: vec!["https://*.example.com".to_owned()],
        http_limits: cronbox_protocol::HttpLimits {
            max_requests: 3,
            ..Default::default()
        },
        secrets: cronbox_protocol::Secrets([("TOKEN".to_owned(), "s3cret".to_owned())].into()),
        traceparent: Some("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".to_owned()),
        metrics_job: Some("7 nightly".to_owned()),
    };
    assert!(
        !format!("{command:?}").contains("s3cret"),
        "a command's Debug never shows a secret's value"
    );
    let accepted = hostile::<RunCommand>(serde_json::to_value(&command).unwrap());
    assert!(accepted > 0, "no mutation decoded: the test lost its teeth");
    let batch = json!({ "results": [{
        "run_id": 1, "job_id": 2, "outcome": "failed", "message": "no", "code": 500,
        "started_at_ms": 1, "duration_ms": 2, "fuel_consumed": 3, "peak_memory_bytes": 4,
        "module_digest": "ab", "log": [{ "at_ms": 1, "source": "guest", "level": "info",
        "text": "hi" }], "log_truncated": false, "state_changes": { "k": null },
        "state_base": { "k": 2 }, "executor": "http://e", "receipt": "r",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" }] });
    hostile::<CallbackBatch>(batch);
    hostile::<Registration>(json!({ "group": "g", "address": "http://e" }));
    hostile::<KillCommand>(serde_json::to_value(KillCommand::Job { job_id: 4 }).unwrap());
}

#[test]
fn user_api_types_survive_hostile_json() {
    let spec = JobSpec::new("nightly", "greeter@2").with_cron("0 0 3 * * ?");
    hostile::<JobSpec>(serde_json::to_value(&spec).unwrap());
    hostile::<TriggerRequest>(json!({ "param": "x", "addresses": ["http://e"], "kind": "manual" }));
    hostile::<StateEdit>(json!({ "state": { "a": "1" } }));
    let job = json!({
        "id": 3, "tenant": "acme", "group_name": "default", "name": "n",
        "module_digest": "cd".repeat(32), "schedule_type": "CRON", "schedule_conf": "* * * * * ?",
        "time_zone": "UTC", "misfire": "DO_NOTHING", "misfire_threshold_ms": 5000,
        "route": "FIRST", "block_strategy": "SERIAL_EXECUTION", "max_concurrency": 1,
        "timeout_ms": 1000, "fuel": null, "memory_bytes": 1048576, "retry_count": 0,
        "retry_interval_ms": 0, "children": [4, 5], "param": "", "enabled": true,
        "next_fire_at_ms": 12, "module_name": null, "module_version": null, "alarm_url": "",
        "fresh_instance": false
    });
    hostile::<Job>(job);
    let run = json!({
        "id": 9, "tenant": "acme", "job_id": 3, "kind": "retry", "scheduled_at_ms": 1,
        "shard_index": 0, "shard_total": 1, "attempt": 1, "param": "", "status": "failed",
        "executor": "http://e", "module_digest": "cd".repeat(32), "outcome": "timeout",
        "code": 502, "message": "slow", "created_at_ms": 1, "dispatched_at_ms": 2,
        "started_at_ms": 3, "finished_at_ms": 4, "alarm_status": "sent", "alarm_message": null
    });
    hostile::<Run>(run);
}
