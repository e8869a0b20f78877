//! The admin's user API through HTTP, with an admin and an executor in this
//! process on loopback and real example jobs: job deletion, run listing
//! with filters and pages, job state read and edit, daily reports and run
//! retention.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::time::{Duration, Instant};

use cronbox_admin::{AdminConfig, Database, SchedulerConfig};
use cronbox_example_jobs as jobs;
use cronbox_executor::ExecutorConfig;
use serde_json::{Value, json};

const API: &str = "api-token";
const EXEC: &str = "exec-token";
const WAIT: Duration = Duration::from_secs(20);

struct Stack {
    admin: cronbox_admin::RunningAdmin,
    executor: cronbox_executor::RunningExecutor,
    http: reqwest::Client,
    base: String,
    _data: tempfile::TempDir,
}

async fn stack(scheduler: SchedulerConfig) -> Stack {
    let data = tempfile::tempdir().unwrap();
    let admin = cronbox_admin::start(AdminConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        database: Database::Sqlite(data.path().join("admin")),
        api_token: API.into(),
        executor_token: EXEC.into(),
        scheduler,
        max_request_bytes: 16 << 20,
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
    tokio::time::sleep(Duration::from_millis(500)).await;
    Stack {
        admin,
        executor,
        http: reqwest::Client::new(),
        base,
        _data: data,
    }
}

impl Stack {
    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(API);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, None).await
    }

    async fn job(&self, name: &str, module: &str, extra: Value) -> i64 {
        let digest = self
            .http
            .post(format!("{}/api/v1/modules", self.base))
            .bearer_auth(API)
            .body(jobs::bytes(module))
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()["digest"]
            .as_str()
            .unwrap()
            .to_owned();
        let mut spec = json!({ "name": name, "module_digest": digest });
        for (key, value) in extra.as_object().unwrap() {
            spec[key] = value.clone();
        }
        let (status, job) = self
            .call(reqwest::Method::POST, "/api/v1/jobs", Some(spec))
            .await;
        assert_eq!(status, 201, "{job}");
        job["id"].as_i64().unwrap()
    }

    async fn run_to_end(&self, job: i64, param: &str) -> Value {
        let (status, answer) = self
            .call(
                reqwest::Method::POST,
                &format!("/api/v1/jobs/{job}/trigger"),
                Some(json!({ "param": param })),
            )
            .await;
        assert_eq!(status, 202, "{answer}");
        let id = answer["run_id"].as_i64().unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            let (_, run) = self.get(&format!("/api/v1/runs/{id}")).await;
            if run["status"] == "success" || run["status"] == "failed" {
                return run;
            }
            assert!(Instant::now() < deadline, "run {id} never ended: {run}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn shutdown(self) {
        self.executor.shutdown().await;
        self.admin.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_are_listed_by_filter_and_page() {
    let stack = stack(SchedulerConfig::default()).await;
    let hello = stack.job("hello", "hello", json!({})).await;
    let burner = stack.job("burner", "fuel-burner", json!({})).await;
    for i in 0..5 {
        stack.run_to_end(hello, &format!("n{i}")).await;
    }
    let failed = stack.run_to_end(burner, "not-a-number").await;
    assert_eq!(failed["status"], "failed");

    let (status, page) = stack
        .get(&format!("/api/v1/runs?job={hello}&limit=2"))
        .await;
    assert_eq!(status, 200, "{page}");
    let ids = |page: &Value| -> Vec<i64> {
        page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|run| run["id"].as_i64().unwrap())
            .collect()
    };
    let mut seen = ids(&page);
    assert_eq!(seen.len(), 2);
    assert!(seen[0] > seen[1], "newest first");
    let mut cursor = page["next_before"].as_i64();
    while let Some(before) = cursor {
        let (_, page) = stack
            .get(&format!("/api/v1/runs?job={hello}&limit=2&before={before}"))
            .await;
        seen.extend(ids(&page));
        cursor = page["next_before"].as_i64();
    }
    assert_eq!(seen.len(), 5, "every hello run once across pages: {seen:?}");

    let (_, failures) = stack.get("/api/v1/runs?status=failed").await;
    assert_eq!(ids(&failures), [failed["id"].as_i64().unwrap()]);
    let scheduled = failed["scheduled_at_ms"].as_i64().unwrap();
    let (_, window) = stack
        .get(&format!(
            "/api/v1/runs?from_ms={scheduled}&to_ms={}",
            scheduled + 1
        ))
        .await;
    assert_eq!(ids(&window), [failed["id"].as_i64().unwrap()]);

    for (query, field) in [
        ("status=exploded", "status"),
        ("limit=0", "limit"),
        ("limit=5000", "limit"),
        ("job=seven", "job"),
        ("colour=red", "colour"),
    ] {
        let (status, error) = stack.get(&format!("/api/v1/runs?{query}")).await;
        assert_eq!(status, 400, "{query}: {error}");
        assert_eq!(error["field"], field, "{query}: {error}");
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_is_deleted_unless_it_is_a_child() {
    let stack = stack(SchedulerConfig::default()).await;
    let child = stack.job("child", "hello", json!({})).await;
    let parent = stack
        .job("parent", "hello", json!({ "children": [child] }))
        .await;
    let run = stack.run_to_end(child, "once").await;

    let (status, error) = stack
        .call(
            reqwest::Method::DELETE,
            &format!("/api/v1/jobs/{child}"),
            None,
        )
        .await;
    assert_eq!(status, 409, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("parent"),
        "{error}"
    );
    let (status, _) = stack.get(&format!("/api/v1/jobs/{child}")).await;
    assert_eq!(status, 200, "still there");

    for id in [parent, child] {
        let (status, body) = stack
            .call(reqwest::Method::DELETE, &format!("/api/v1/jobs/{id}"), None)
            .await;
        assert_eq!(status, 200, "{body}");
        let (status, _) = stack.get(&format!("/api/v1/jobs/{id}")).await;
        assert_eq!(status, 404);
    }
    let (status, _) = stack
        .call(
            reqwest::Method::DELETE,
            &format!("/api/v1/jobs/{child}"),
            None,
        )
        .await;
    assert_eq!(status, 404, "deleting twice");
    let (status, kept) = stack
        .get(&format!("/api/v1/runs/{}", run["id"].as_i64().unwrap()))
        .await;
    assert_eq!((status, &kept["message"]), (200, &json!("hello, once")));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_edits_the_state_the_next_run_sees() {
    let stack = stack(SchedulerConfig::default()).await;
    let counter = stack.job("counter", "counter", json!({})).await;
    let first = stack.run_to_end(counter, "").await;
    assert!(first["message"].as_str().unwrap().starts_with("count=1 "));
    let (status, state) = stack.get(&format!("/api/v1/jobs/{counter}/state")).await;
    assert_eq!(status, 200);
    assert_eq!(state["state"], json!({ "count": "1" }));

    let (status, edited) = stack
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/jobs/{counter}/state"),
            Some(json!({ "state": { "count": "41" } })),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    let next = stack.run_to_end(counter, "").await;
    assert!(
        next["message"].as_str().unwrap().starts_with("count=42 "),
        "{next}"
    );

    let long_key = "k".repeat(300);
    for bad in [
        json!({ "state": { "": "x" } }),
        json!({ "state": { long_key: "x" } }),
        json!({ "state": { "count": 7 } }),
        json!({ "values": {} }),
    ] {
        let (status, error) = stack
            .call(
                reqwest::Method::PUT,
                &format!("/api/v1/jobs/{counter}/state"),
                Some(bad.clone()),
            )
            .await;
        assert!(status == 400 || status == 422, "{bad}: {status} {error}");
    }
    let (_, state) = stack.get(&format!("/api/v1/jobs/{counter}/state")).await;
    assert_eq!(state["state"], json!({ "count": "42" }), "nothing stored");
    let (status, _) = stack.get("/api/v1/jobs/999/state").await;
    assert_eq!(status, 404);
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daily_reports_count_each_day() {
    let stack = stack(SchedulerConfig {
        housekeeping_interval: Duration::from_millis(200),
        ..SchedulerConfig::default()
    })
    .await;
    let hello = stack.job("hello", "hello", json!({})).await;
    let burner = stack.job("burner", "fuel-burner", json!({})).await;
    for _ in 0..3 {
        stack.run_to_end(hello, "x").await;
    }
    stack.run_to_end(burner, "nope").await;
    let deadline = Instant::now() + WAIT;
    let report = loop {
        let (status, report) = stack.get("/api/v1/reports").await;
        assert_eq!(status, 200, "{report}");
        if report["totals"]["success"] == 3 && report["totals"]["failed"] == 1 {
            break report;
        }
        assert!(Instant::now() < deadline, "report never counted: {report}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let today = report["days"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(
        (today["success"].as_i64(), today["failed"].as_i64()),
        (Some(3), Some(1))
    );
    let (status, error) = stack.get("/api/v1/reports?from=yesterday").await;
    assert_eq!((status, error["field"].as_str()), (400, Some("from")));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ended_runs_past_retention_are_deleted_and_stay_counted() {
    let stack = stack(SchedulerConfig {
        run_retention: Duration::from_secs(1),
        housekeeping_interval: Duration::from_millis(200),
        ..SchedulerConfig::default()
    })
    .await;
    let hello = stack.job("hello", "hello", json!({})).await;
    let run = stack.run_to_end(hello, "old").await;
    let id = run["id"].as_i64().unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, _) = stack.get(&format!("/api/v1/runs/{id}")).await;
        if status == 404 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a run past retention was never deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, report) = stack.get("/api/v1/reports").await;
    assert_eq!(report["totals"]["success"], 1, "{report}");
    stack.shutdown().await;
}
