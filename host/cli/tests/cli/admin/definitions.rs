//! Definitions refused or bounded: the operator's maxima, bad input, a second admin, child cycles.

use super::*;

/// The operator sets how much a job may ask for: past the maxima a job is
/// refused (see the bad-input test); raised, the same job is accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_sets_the_maxima_of_a_jobs_limits() {
    let _turn = TESTS.turn();
    let cluster = Cluster::start_with(&[
        "--max-job-timeout",
        "2days",
        "--max-job-concurrency",
        "100",
        "--max-job-memory",
        "2GiB",
    ])
    .await;
    let digest = cluster.upload("hello").await;
    let (status, body) = cluster
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "long", "module_digest": digest,
                         "timeout_ms": 25 * 3_600_000, "max_concurrency": 100,
                         "memory_bytes": 2_i64 << 30 })),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = cluster
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "longer", "module_digest": digest,
                         "timeout_ms": 3 * 86_400_000 })),
        )
        .await;
    assert_eq!(
        (status, &body["field"]),
        (422, &json!("timeout_ms")),
        "{body}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_with_the_field_named_and_nothing_stored() {
    let _turn = TESTS.turn();
    let cluster = Cluster::start().await;
    let hello = cluster.upload("hello").await;
    let cases = [
        (
            json!({ "schedule_type": "CRON", "schedule_conf": "61 * * * * ?" }),
            "schedule_conf",
            "invalid cron expression",
        ),
        (
            json!({ "schedule_type": "CRON", "schedule_conf": "* * *" }),
            "schedule_conf",
            "has 3 fields",
        ),
        (
            json!({ "schedule_type": "CRON", "schedule_conf": "0 * * * *", "time_zone": "Moon/Base" }),
            "time_zone",
            "unknown time zone",
        ),
        (
            json!({ "route": "SOMEWHERE" }),
            "route",
            "unknown route strategy",
        ),
        (
            json!({ "block_strategy": "PANIC" }),
            "block_strategy",
            "unknown block strategy",
        ),
        (
            json!({ "misfire": "FIRE_ALL" }),
            "misfire",
            "unknown misfire strategy",
        ),
        (
            json!({ "schedule_type": "FIX_RATE", "schedule_conf": "-10" }),
            "schedule_conf",
            "negative",
        ),
        (
            json!({ "schedule_type": "FIX_DELAY", "schedule_conf": "9999d" }),
            "schedule_conf",
            "maximum",
        ),
        (
            json!({ "schedule_type": "WEEKLY" }),
            "schedule_type",
            "unknown schedule type",
        ),
        (json!({ "timeout_ms": 0 }), "timeout_ms", "between"),
        (
            json!({ "module_digest": "0".repeat(64) }),
            "module_digest",
            "no module",
        ),
        (json!({ "children": [999] }), "children", "does not exist"),
        (
            json!({ "children": (1000..1033).collect::<Vec<i64>>() }),
            "children",
            "at most 32",
        ),
        (
            json!({ "schedule_type": "CRON", "schedule_conf": "*".repeat(300) }),
            "schedule_conf",
            "at most 256",
        ),
        (
            json!({ "alarm_url": format!("https://example.com/{}", "a".repeat(3000)) }),
            "alarm_url",
            "at most 2048",
        ),
        (json!({ "group": "g".repeat(200) }), "group", "1 to 128"),
        (
            json!({ "memory_bytes": 2_i64 << 30 }),
            "memory_bytes",
            "this admin's maximum",
        ),
        (
            json!({ "timeout_ms": 25 * 3_600_000 }),
            "timeout_ms",
            "between 1 and 86400000 ms",
        ),
        (
            json!({ "max_concurrency": 65 }),
            "max_concurrency",
            "between 1 and 64",
        ),
    ];
    for (overrides, field, message) in cases {
        let mut spec = json!({ "name": "bad", "module_digest": hello });
        for (key, value) in overrides.as_object().unwrap() {
            spec[key] = value.clone();
        }
        let (status, body) = cluster
            .call(reqwest::Method::POST, "/api/v1/jobs", Some(spec))
            .await;
        assert_eq!(status, 422, "{body}");
        assert_eq!(body["field"], field, "{body}");
        assert!(
            body["message"].as_str().unwrap().contains(message),
            "{body}"
        );
    }
    let (_, unknown_field) = cluster
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "x", "module_digest": hello, "colour": 1 })),
        )
        .await;
    assert!(
        unknown_field["message"]
            .as_str()
            .unwrap()
            .contains("colour"),
        "{unknown_field}"
    );
    let (_, jobs) = cluster
        .call(reqwest::Method::GET, "/api/v1/jobs", None)
        .await;
    assert_eq!(jobs, json!([]), "nothing was stored");

    let response = cluster
        .http
        .get(cluster.url("/api/v1/jobs"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = cluster
        .http
        .get(cluster.url("/api/v1/jobs"))
        .bearer_auth("wrong")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let response = cluster
        .http
        .post(cluster.url("/api/v1/modules"))
        .bearer_auth(API_TOKEN)
        .body(b"\0asm\x01\0\0\0".to_vec())
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 422);
    assert!(
        response
            .text()
            .await
            .unwrap()
            .contains("core WebAssembly module")
    );
}

#[test]
fn a_second_admin_on_the_same_data_dir_is_refused() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    // Listening: it holds the data directory.
    let _first = spawn_admin(None, data.path());
    let second = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args([
            "admin",
            "--bind",
            "127.0.0.1:0",
            "--token",
            "a",
            "--executor-token",
            "b",
        ])
        .arg("--data-dir")
        .arg(data.path())
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert!(
        stderr.contains("another cronbox admin is using the data directory"),
        "{stderr}"
    );
}

#[test]
fn a_dispatch_lease_shorter_than_a_send_is_refused() {
    let _turn = TESTS.turn();
    let data = tempfile::tempdir().unwrap();
    let admin = Command::new(env!("CARGO_BIN_EXE_cronbox"))
        .args(["admin", "--bind", "127.0.0.1:0", "--token", "a"])
        .args(["--executor-token", "b", "--dispatch-lease", "3500ms"])
        .arg("--data-dir")
        .arg(data.path())
        .output()
        .unwrap();
    assert!(!admin.status.success());
    let stderr = String::from_utf8_lossy(&admin.stderr);
    assert!(
        stderr.contains("the dispatch lease (3.5s) must be at least the dispatch timeout (3s)"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_saved_child_cycle_is_refused() {
    let _turn = TESTS.turn();
    let cluster = Cluster::start().await;
    let hello = cluster.upload("hello").await;
    let a = cluster
        .create(json!({ "name": "a", "module_digest": hello }))
        .await;
    let b = cluster
        .create(json!({ "name": "b", "module_digest": hello, "children": [a] }))
        .await;
    let c = cluster
        .create(json!({ "name": "c", "module_digest": hello, "children": [b] }))
        .await;
    // a → c would close a → c → b → a.
    let (status, body) = cluster
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/jobs/{a}"),
            Some(json!({ "name": "a", "module_digest": hello, "children": [c] })),
        )
        .await;
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["field"], "children");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains(&format!("{a} → {c} → {b} → {a}")),
        "{body}"
    );
    let (_, stored) = cluster
        .call(reqwest::Method::GET, &format!("/api/v1/jobs/{a}"), None)
        .await;
    assert_eq!(stored["children"], json!([]), "nothing was changed");
    // A job that is its own child is a cycle too.
    let (status, _) = cluster
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/jobs/{c}"),
            Some(json!({ "name": "c", "module_digest": hello, "children": [c] })),
        )
        .await;
    assert_eq!(status, 422);
    // A chain without a cycle is saved.
    let (status, saved) = cluster
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/jobs/{a}"),
            Some(json!({ "name": "a2", "module_digest": hello, "param": "renamed" })),
        )
        .await;
    assert_eq!(status, 200, "{saved}");
    assert_eq!(saved["name"], "a2");
    // The chain c → b → a runs on success.
    cluster.trigger(c, json!({})).await;
    let runs = cluster.wait_runs(a, 1).await;
    assert_eq!(runs[0].kind, TriggerKind::Parent);
    assert_eq!(runs[0].message.as_deref(), Some("hello, renamed"));
}
