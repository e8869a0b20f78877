//! The admin's user API through HTTP, with an admin and an executor in this
//! process on loopback and real example jobs: job deletion, run listing
//! with filters and pages, job state read and edit, daily reports and run
//! retention, tenants' quotas at save time and at run time.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

use std::time::{Duration, Instant};

use cronbox_admin::clock::{Clock, ManualClock};
use cronbox_admin::{AdminConfig, Database, SchedulerConfig};
use cronbox_api::{ErrorCode, JobBatch, JobId, JobSpec, Run, RunId, RunStatus, TriggerKind};
use cronbox_example_jobs as jobs;
use cronbox_executor::ExecutorConfig;
use cronbox_tests::{AdminClient, PostgresServer, WebhookReceiver, until};
use serde_json::{Value, json};

const API: &str = "api-token";
const EXEC: &str = "exec-token";
const WAIT: Duration = Duration::from_secs(20);

struct Stack {
    admin: cronbox_admin::RunningAdmin,
    executor: cronbox_executor::RunningExecutor,
    /// The API as the operator sees it.
    api: AdminClient,
    http: reqwest::Client,
    base: String,
    _data: tempfile::TempDir,
}

/// The first whole minute from now, ms since the epoch.
fn next_whole_minute() -> i64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    now - now % 60_000 + 60_000
}

/// A stack whose admin reads a manual clock standing at `start_ms`.
async fn stack_on_manual_clock(start_ms: i64) -> (Stack, std::sync::Arc<ManualClock>) {
    let clock = ManualClock::new(start_ms);
    let stack = stack(SchedulerConfig {
        clock: clock.clone(),
        ..SchedulerConfig::default()
    })
    .await;
    (stack, clock)
}

async fn stack(scheduler: SchedulerConfig) -> Stack {
    stack_with(scheduler, 16 << 20).await
}

async fn stack_with(scheduler: SchedulerConfig, max_module_bytes: usize) -> Stack {
    stack_configured(scheduler, max_module_bytes, |_| {}).await
}

/// A stack whose executor's settings `configure` changes.
async fn stack_configured(
    scheduler: SchedulerConfig,
    max_module_bytes: usize,
    configure: impl FnOnce(&mut ExecutorConfig),
) -> Stack {
    let data = tempfile::tempdir().unwrap();
    let admin = cronbox_admin::start(AdminConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        database: Database::Sqlite(data.path().join("admin")),
        api_token: API.into(),
        executor_token: EXEC.into(),
        scheduler,
        max_request_bytes: max_module_bytes,
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
    configure(&mut config);
    let executor = cronbox_executor::start(config).await.unwrap();
    ready(admin, executor, base, data).await
}

/// The stack once the admin at `base` counts the executor alive (read
/// from `GET /api/v1/executors`, not waited for).
async fn ready(
    admin: cronbox_admin::RunningAdmin,
    executor: cronbox_executor::RunningExecutor,
    base: String,
    data: tempfile::TempDir,
) -> Stack {
    let api = AdminClient::new(base.clone(), API);
    let address = executor.address().to_owned();
    until("the executor registers", || async {
        let executors = api.api.executors().await.unwrap();
        executors
            .iter()
            .any(|e| e.address == address && e.alive)
            .then_some(())
    })
    .await;
    Stack {
        admin,
        executor,
        api,
        http: reqwest::Client::new(),
        base,
        _data: data,
    }
}

impl Stack {
    /// A connection pool of its own to the admin's SQLite file.
    async fn admin_database(&self) -> sqlx::AnyPool {
        sqlx::AnyPool::connect(&format!(
            "sqlite://{}",
            self._data.path().join("admin/cronbox.db").display()
        ))
        .await
        .unwrap()
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(API, method, path, body).await
    }

    async fn call_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        self.api.with_token(token).call(method, path, body).await
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// Uploads raw bytes as `token`, to `query` (e.g. `?name=x`).
    async fn upload_as(&self, token: &str, query: &str, bytes: Vec<u8>) -> (u16, Value) {
        self.api.with_token(token).upload(query, bytes).await
    }

    async fn job(&self, name: &str, module: &str, extra: Value) -> JobId {
        self.job_as(API, name, module, extra).await
    }

    /// A job running `hello` on the minute (`0 * * * * ?`), started.
    async fn started_minutely_hello(&self) -> JobId {
        self.started_hello("minutely", "0 * * * * ?").await
    }

    /// A job `name` running `hello` on the seconds cron `cron`, started.
    async fn started_hello(&self, name: &str, cron: &str) -> JobId {
        let job = self
            .job(
                name,
                "hello",
                json!({ "schedule_type": "CRON", "schedule_conf": cron }),
            )
            .await;
        self.api.api.start_job(job).await.unwrap();
        job
    }

    async fn job_as(&self, token: &str, name: &str, module: &str, extra: Value) -> JobId {
        let api = self.api.with_token(token);
        api.job(name, jobs::bytes(module), extra).await
    }

    /// Creates a job from its definition as JSON, as `token`.
    async fn create_as(&self, token: &str, spec: Value) -> JobId {
        let spec: JobSpec = serde_json::from_value(spec).unwrap();
        let api = self.api.api.with_token(token);
        api.create_job(&spec).await.unwrap().id
    }

    async fn run_to_end(&self, job: JobId, param: &str) -> Run {
        self.run_to_end_as(API, job, param).await
    }

    async fn run_to_end_as(&self, token: &str, job: JobId, param: &str) -> Run {
        let api = self.api.with_token(token);
        let run = api.trigger(job, json!({ "param": param })).await;
        api.ended(run).await
    }

    async fn shutdown(self) {
        self.shutdown_keeping_data().await;
    }

    /// Stops both; the data directory lives on while its handle does.
    async fn shutdown_keeping_data(self) -> tempfile::TempDir {
        self.executor.shutdown().await;
        self.admin.shutdown().await;
        self._data
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
    assert_eq!(failed.status, RunStatus::Failed);

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

    // A job's runs, oldest first, a page at a time.
    let (_, first) = stack
        .get(&format!("/api/v1/jobs/{hello}/runs?limit=3"))
        .await;
    let first: Vec<i64> = first
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_i64().unwrap())
        .collect();
    assert_eq!(first.len(), 3);
    assert!(
        first.windows(2).all(|w| w[0] < w[1]),
        "oldest first: {first:?}"
    );
    let (_, rest) = stack
        .get(&format!("/api/v1/jobs/{hello}/runs?after={}", first[2]))
        .await;
    assert_eq!(
        rest.as_array().unwrap().len(),
        2,
        "the two after the cursor: {rest}"
    );
    let (status, error) = stack
        .get(&format!("/api/v1/jobs/{hello}/runs?limit=1001"))
        .await;
    assert_eq!((status, &error["field"]), (400, &json!("limit")), "{error}");

    let (_, failures) = stack.get("/api/v1/runs?status=failed").await;
    assert_eq!(ids(&failures), [failed.id.0]);
    let scheduled = failed.scheduled_at_ms;
    let (_, window) = stack
        .get(&format!(
            "/api/v1/runs?from_ms={scheduled}&to_ms={}",
            scheduled + 1
        ))
        .await;
    assert_eq!(ids(&window), [failed.id.0]);

    // Past 50,000 newer runs, a page filtered by status reads those and
    // stops: an empty page whose cursor leads on to the failure.
    let pool = stack.admin_database().await;
    sqlx::query(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 50000) \
         INSERT INTO run (tenant, job_id, kind, scheduled_at_ms, param, status, module_digest, \
         module_sha, created_at_ms) SELECT tenant, job_id, kind, scheduled_at_ms, param, status, \
         module_digest, module_sha, created_at_ms FROM n, (SELECT * FROM run WHERE job_id = $1 LIMIT 1)",
    )
    .bind(hello.0)
    .execute(&pool)
    .await
    .unwrap();
    let (_, page) = stack.get("/api/v1/runs?status=failed").await;
    assert_eq!(ids(&page), [] as [i64; 0], "{page}");
    let before = page["next_before"]
        .as_i64()
        .expect("a cursor past what was read");
    let (_, page) = stack
        .get(&format!("/api/v1/runs?status=failed&before={before}"))
        .await;
    assert_eq!(ids(&page), [failed.id.0]);
    assert_eq!(page["next_before"], Value::Null, "{page}");

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
    let (status, kept) = stack.get(&format!("/api/v1/runs/{}", run.id.0)).await;
    assert_eq!((status, &kept["message"]), (200, &json!("hello, once")));
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_edits_the_state_the_next_run_sees() {
    let stack = stack(SchedulerConfig::default()).await;
    let counter = stack.job("counter", "counter", json!({})).await;
    let first = stack.run_to_end(counter, "").await;
    assert!(first.message.as_deref().unwrap().starts_with("count=1 "));
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
        next.message.as_deref().unwrap().starts_with("count=42 "),
        "{next:?}"
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
    // Successes kept a second, failures a day.
    let stack = stack(SchedulerConfig {
        success_retention: Some(Duration::from_secs(1)),
        run_retention: Duration::from_secs(24 * 3600),
        housekeeping_interval: Duration::from_millis(200),
        ..SchedulerConfig::default()
    })
    .await;
    let hello = stack.job("hello", "hello", json!({})).await;
    let burner = stack.job("burner", "fuel-burner", json!({})).await;
    let failed = stack.run_to_end(burner, "nope").await.id.0;
    let succeeded = stack.run_to_end(hello, "old").await.id.0;
    let deadline = Instant::now() + WAIT;
    loop {
        let (status, _) = stack.get(&format!("/api/v1/runs/{succeeded}")).await;
        if status == 404 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a run past retention was never deleted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (status, run) = stack.get(&format!("/api/v1/runs/{failed}")).await;
    assert_eq!((status, &run["status"]), (200, &json!("failed")), "{run}");
    // A run of the same day ending after the deletion counts on top.
    stack.run_to_end(hello, "new").await;
    let report = until("both successes counted", || async {
        let (_, report) = stack.get("/api/v1/reports").await;
        (report["totals"]["success"] == 2).then_some(report)
    })
    .await;
    assert_eq!(report["totals"]["failed"], 1, "{report}");
    stack.shutdown().await;
}

/// Creates tenant `name` as the operator; returns its first token.
async fn tenant(stack: &Stack, name: &str) -> String {
    let (status, created) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/tenants",
            Some(json!({ "name": name })),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    created["token"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tenant_sees_nothing_of_another_tenant() {
    let stack = stack(SchedulerConfig::default()).await;
    let a = tenant(&stack, "team-a").await;
    let b = tenant(&stack, "team-b").await;
    let (status, error) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/tenants",
            Some(json!({ "name": "team-a" })),
        )
        .await;
    assert_eq!(status, 409, "{error}");

    // A's world: a named module, a job, a finished run, some state.
    let (status, pushed) = stack
        .upload_as(&a, "?name=counter", jobs::bytes("counter"))
        .await;
    assert_eq!(status, 201, "{pushed}");
    let job = stack
        .create_as(&a, json!({ "name": "a-counter", "module": "counter" }))
        .await;
    let run = stack.run_to_end_as(&a, job, "").await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(run.tenant, "team-a");
    let run = run.id.0;
    let digest = pushed["digest"].as_str().unwrap();

    // B cannot tell any of it exists.
    use reqwest::Method as M;
    for (method, path, body) in [
        (M::GET, format!("/api/v1/jobs/{job}"), None),
        (
            M::PUT,
            format!("/api/v1/jobs/{job}"),
            Some(json!({ "name": "x", "module": "counter" })),
        ),
        (M::DELETE, format!("/api/v1/jobs/{job}"), None),
        (M::POST, format!("/api/v1/jobs/{job}/start"), None),
        (M::POST, format!("/api/v1/jobs/{job}/stop"), None),
        (
            M::POST,
            format!("/api/v1/jobs/{job}/trigger"),
            Some(json!({})),
        ),
        (M::GET, format!("/api/v1/jobs/{job}/next-fires"), None),
        (M::GET, format!("/api/v1/jobs/{job}/runs"), None),
        (M::GET, format!("/api/v1/jobs/{job}/state"), None),
        (M::GET, format!("/api/v1/runs/{run}"), None),
        (M::POST, format!("/api/v1/runs/{run}/kill"), None),
        (M::GET, format!("/api/v1/runs/{run}/log"), None),
        (M::GET, "/api/v1/modules/counter/versions".to_owned(), None),
        (
            M::POST,
            "/api/v1/modules/counter/rollback".to_owned(),
            Some(json!({ "version": 1 })),
        ),
        (
            M::PUT,
            "/api/v1/modules/counter/labels/x".to_owned(),
            Some(json!({ "version": 1 })),
        ),
    ] {
        let (status, answer) = stack.call_as(&b, method.clone(), &path, body).await;
        assert_eq!(status, 404, "{method} {path} as B: {answer}");
    }
    let (_, jobs) = stack.call_as(&b, M::GET, "/api/v1/jobs", None).await;
    assert_eq!(jobs, json!([]));
    let (_, runs) = stack.call_as(&b, M::GET, "/api/v1/runs", None).await;
    assert_eq!(runs["runs"], json!([]));
    let (_, modules) = stack.call_as(&b, M::GET, "/api/v1/modules", None).await;
    assert_eq!(modules, json!([]));
    // Knowing A's digest does not let B use A's module.
    let (status, error) = stack
        .call_as(
            &b,
            M::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "stolen", "module_digest": digest })),
        )
        .await;
    assert_eq!(
        (status, error["field"].as_str()),
        (422, Some("module_digest")),
        "{error}"
    );
    // B's own objects stay B's.
    let b_job = stack.job_as(&b, "b-hello", "hello", json!({})).await;
    let (status, _) = stack
        .call_as(&a, M::GET, &format!("/api/v1/jobs/{b_job}"), None)
        .await;
    assert_eq!(status, 404);

    // Operator-only routes refuse tenant tokens; the operator sees all.
    for (method, path, body) in [
        (M::GET, "/api/v1/tenants".to_owned(), None),
        (
            M::POST,
            "/api/v1/tenants".to_owned(),
            Some(json!({ "name": "c" })),
        ),
        (M::POST, "/api/v1/tenants/team-b/tokens".to_owned(), None),
        (
            M::PUT,
            "/api/v1/groups/default".to_owned(),
            Some(json!({ "address_type": "AUTO" })),
        ),
    ] {
        let (status, answer) = stack.call_as(&a, method.clone(), &path, body).await;
        assert_eq!(status, 403, "{method} {path} as A: {answer}");
    }
    // A tenant's token acts as the tenant's admin: it edits its own job's
    // state (a developer may), never another tenant's.
    let (status, answer) = stack
        .call_as(
            &a,
            M::PUT,
            &format!("/api/v1/jobs/{job}/state"),
            Some(json!({ "state": { "k": "v" } })),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let (status, _) = stack
        .call_as(
            &a,
            M::PUT,
            &format!("/api/v1/jobs/{b_job}/state"),
            Some(json!({ "state": {} })),
        )
        .await;
    assert_eq!(status, 404);
    let (_, everything) = stack.call(M::GET, "/api/v1/jobs", None).await;
    assert_eq!(everything.as_array().unwrap().len(), 2);

    // Missing, wrong and revoked tokens.
    let (status, _) = stack.call_as("", M::GET, "/api/v1/jobs", None).await;
    assert_eq!(status, 401);
    let (status, _) = stack
        .call_as("cbx_guess", M::GET, "/api/v1/jobs", None)
        .await;
    assert_eq!(status, 401);
    let (status, second) = stack
        .call(
            M::POST,
            "/api/v1/tenants/team-a/tokens",
            Some(json!({ "label": "ci" })),
        )
        .await;
    assert_eq!(status, 201, "{second}");
    let second_token = second["token"].as_str().unwrap();
    let (status, _) = stack
        .call_as(second_token, M::GET, "/api/v1/jobs", None)
        .await;
    assert_eq!(status, 200);
    let (status, _) = stack
        .call(
            M::DELETE,
            &format!("/api/v1/tenants/team-a/tokens/{}", second["token_id"]),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let (status, _) = stack
        .call_as(second_token, M::GET, "/api/v1/jobs", None)
        .await;
    assert_eq!(status, 401, "a revoked token is refused");
    let (_, tenants) = stack.call(M::GET, "/api/v1/tenants", None).await;
    let names: Vec<&str> = tenants
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "team-a", "team-b"]);
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_uploads_are_refused_by_name_and_nothing_is_stored() {
    let stack = stack_with(SchedulerConfig::default(), 1 << 20).await;
    let mut oversized = jobs::bytes("hello");
    oversized.resize(1 << 20 | 1, 0);
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "random bytes",
            b"definitely not wasm".to_vec(),
            422,
            "\\0asm magic",
        ),
        ("an empty body", Vec::new(), 422, "empty"),
        (
            "a core module",
            b"\0asm\x01\0\0\0".to_vec(),
            422,
            "core WebAssembly module",
        ),
        (
            "another world",
            jobs::bytes("wrong-world"),
            422,
            "world cronbox:job/job",
        ),
        (
            "a forbidden import",
            jobs::bytes("foreign-import"),
            422,
            "acme:vault/keys",
        ),
        (
            "a cut component",
            jobs::bytes("hello")[..2000].to_vec(),
            422,
            "not a valid component",
        ),
        ("over the size limit", oversized, 413, "limit"),
    ];
    for (what, bytes, status, message) in cases {
        let (got, error) = stack.upload_as(API, "?name=bad", bytes).await;
        assert_eq!(got, status, "{what}: {error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap_or_default()
                .contains(message),
            "{what}: {error}"
        );
    }
    let (status, error) = stack
        .upload_as(API, "?name=no%20spaces", jobs::bytes("hello"))
        .await;
    assert_eq!(
        (status, error["field"].as_str()),
        (422, Some("name")),
        "{error}"
    );
    let (_, modules) = stack.get("/api/v1/modules").await;
    assert_eq!(modules, json!([]), "nothing stored");
    // The filesystem and sockets link but grant nothing: the upload is
    // stored and its answer names those imports; a plain job's has none.
    let (status, uploaded) = stack
        .upload_as(API, "?name=snooper", jobs::bytes("fs-snooper"))
        .await;
    assert_eq!(status, 201, "{uploaded}");
    let denied = uploaded["denied_imports"].as_array().expect("listed");
    assert!(
        denied
            .iter()
            .any(|import| import.as_str().unwrap().starts_with("wasi:filesystem/")),
        "{uploaded}"
    );
    let (_, uploaded) = stack
        .upload_as(API, "?name=hello", jobs::bytes("hello"))
        .await;
    assert!(uploaded.get("denied_imports").is_none(), "{uploaded}");
    let (status, _) = stack.get("/api/v1/modules/bad/versions").await;
    assert_eq!(status, 404);
    stack.shutdown().await;
}

/// JSON bodies are limited to 1 MiB; an upload to the module size the
/// admin allows (8 MiB here), so a 3 MiB upload reaches the component check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_bodies_are_small_and_uploads_as_large_as_allowed() {
    let stack = stack_with(SchedulerConfig::default(), 8 << 20).await;
    let mut padded = jobs::bytes("hello");
    padded.resize(3 << 20, 0);
    let (status, error) = stack.upload_as(API, "?name=padded", padded).await;
    assert_eq!(status, 422, "checked, not refused for its size: {error}");
    // The admin stops reading a body once it is past the limit, answers
    // and closes the connection: a client still writing the rest saw a
    // broken pipe before the answer. So the request announces 2 MiB and
    // sends only a little more than the limit before reading the answer.
    let (status, error) = refused_past_the_limit(&stack, "/api/v1/jobs", 2 << 20).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (413, Some("payload_too_large")),
        "{error}"
    );
    stack.shutdown().await;
}

/// The status and JSON answer to a POST of `path` announcing a JSON body
/// of `length` bytes, of which only 1 MiB and 4 KiB (blanks) are sent.
async fn refused_past_the_limit(stack: &Stack, path: &str, length: usize) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = stack.api.base.trim_start_matches("http://");
    let mut connection = tokio::net::TcpStream::connect(address).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {address}\r\nAuthorization: Bearer {API}\r\n\
         Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    );
    connection.write_all(head.as_bytes()).await.unwrap();
    connection
        .write_all(&vec![b' '; (1 << 20) + 4096])
        .await
        .unwrap();
    let mut answer = Vec::new();
    let mut buffer = [0; 4096];
    // Until the head and the body its length names are in.
    let (status, body) = loop {
        let read = connection.read(&mut buffer).await.unwrap();
        answer.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&answer).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let named = head
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    if !name.eq_ignore_ascii_case("content-length") {
                        return None;
                    }
                    value.trim().parse::<usize>().ok()
                })
                .expect("the answer names its length");
            if body.len() >= named || read == 0 {
                let status = head.split(' ').nth(1).and_then(|code| code.parse().ok());
                break (status.expect("a status line"), body.to_owned());
            }
        }
        assert!(read > 0, "the connection closed before an answer: {text}");
    };
    (
        status,
        serde_json::from_str(&body).unwrap_or(Value::String(body)),
    )
}

/// A job's configuration is stored with it, answered with it, sent with
/// each run and read by the guest; past its bounds it is refused naming
/// `config`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_jobs_configuration_reaches_its_runs() {
    let stack = stack(SchedulerConfig::default()).await;
    let job = stack
        .job_as(
            API,
            "greeter",
            "config-echo",
            json!({ "config": { "greeting": "hi" } }),
        )
        .await;
    let (_, stored) = stack.get(&format!("/api/v1/jobs/{job}")).await;
    assert_eq!(stored["config"], json!({ "greeting": "hi" }), "{stored}");
    let run = stack.run_to_end(job, "greeting").await;
    assert_eq!(run.message.as_deref(), Some("hi"), "{run:?}");
    // This admin has no secrets key: secrets cannot be set.
    let (status, refused) = stack
        .call(
            reqwest::Method::PUT,
            "/api/v1/secrets/TOKEN",
            Some(json!({ "value": "x" })),
        )
        .await;
    assert_eq!(
        (status, &refused["code"]),
        (409, &json!("secrets_disabled"))
    );

    let many: serde_json::Map<String, Value> = (0..65)
        .map(|key| (format!("k{key}"), Value::from("v")))
        .collect();
    for config in [
        json!({ "": "empty key" }),
        json!({ "big": "v".repeat(5000) }),
        Value::Object(many),
    ] {
        let (status, refused) = stack
            .call(
                reqwest::Method::PUT,
                &format!("/api/v1/jobs/{job}"),
                Some(json!({ "name": "greeter", "module": "config-echo", "config": config })),
            )
            .await;
        assert_eq!(
            (status, &refused["field"]),
            (422, &json!("config")),
            "{refused}"
        );
    }
    stack.shutdown().await;
}

/// A job's HTTP grants must lie within its tenant's ceiling, which only
/// the operator sets; a granted run reaches the origin and its log says
/// so; a ceiling lowered later takes the grant away from the next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_grants_lie_within_the_tenants_ceiling_and_reach_the_runs() {
    use reqwest::Method as M;
    let origin = cronbox_tests::TestOrigin::start().await;
    let stack = stack_configured(SchedulerConfig::default(), 16 << 20, |config| {
        config.runtime.http_nets = "127.0.0.1/32".parse().unwrap();
    })
    .await;
    let granted = json!({ "http_allow": [origin.origin()] });
    let (status, _) = stack
        .upload_as(API, "?name=http-probe", jobs::bytes("http-probe"))
        .await;
    assert_eq!(status, 201);
    let definition = |extra: &Value| {
        let mut job = json!({ "name": "prober", "module": "http-probe" });
        job.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        job
    };
    let (status, refused) = stack
        .call(M::POST, "/api/v1/jobs", Some(definition(&granted)))
        .await;
    assert_eq!((status, &refused["field"]), (422, &json!("http_allow")));
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "{} is outside the HTTP ceiling of tenant \"default\", which allows none",
            origin.origin()
        )),
        "{message}"
    );

    // Only the operator sets a ceiling; a tenant may read its own.
    let acme = tenant(&stack, "acme").await;
    let ceiling = json!({ "origins": [origin.origin()] });
    let path = "/api/v1/tenants/acme/http-ceiling";
    let (status, _) = stack
        .call_as(&acme, M::PUT, path, Some(ceiling.clone()))
        .await;
    assert_eq!(status, 403);
    let (status, bad) = stack
        .call(
            M::PUT,
            path,
            Some(json!({ "origins": ["ftp://files.example.com"] })),
        )
        .await;
    assert_eq!((status, &bad["field"]), (422, &json!("origins")), "{bad}");
    let (status, set) = stack.call(M::PUT, path, Some(ceiling.clone())).await;
    assert_eq!((status, &set), (200, &ceiling));
    let (status, seen) = stack.call_as(&acme, M::GET, path, None).await;
    assert_eq!((status, &seen), (200, &ceiling));

    // Within the ceiling, a job is saved (grants in canonical form) and
    // its runs reach the origin.
    let (status, _) = stack
        .upload_as(&acme, "?name=http-probe", jobs::bytes("http-probe"))
        .await;
    assert_eq!(status, 201);
    let spelled = origin.origin().replace("http://", "HTTP://") + "/";
    let limited = json!({ "http_allow": [spelled], "http_limits": { "max_requests": 1 } });
    let job = stack.create_as(&acme, definition(&limited)).await;
    let (_, stored) = stack
        .call_as(&acme, M::GET, &format!("/api/v1/jobs/{job}"), None)
        .await;
    assert_eq!(stored["http_allow"], json!([origin.origin()]), "{stored}");
    assert_eq!(stored["http_limits"]["max_requests"], 1, "{stored}");
    let twice = format!(
        "GET {}\nGET {}",
        origin.url("/bytes/10"),
        origin.url("/bytes/10")
    );
    let run = stack.run_to_end_as(&acme, job, &twice).await;
    let message = run.message.clone().unwrap_or_default();
    assert!(
        message.starts_with("200 10 | error: the request was denied"),
        "{run:?}"
    );
    let (_, log) = stack
        .call_as(&acme, M::GET, &format!("/api/v1/runs/{}/log", run.id), None)
        .await;
    let text: Vec<&str> = log["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|line| line["text"].as_str())
        .collect();
    let port = origin.port();
    assert!(
        text.iter().any(|line| line.starts_with(&format!(
            "http GET http://127.0.0.1:{port} 200, 0 B sent, 10 B received"
        ))),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|line| line.ends_with("denied: the run's limit of 1 requests is reached")),
        "{text:?}"
    );
    for (limits, field) in [
        (json!({ "max_requests": 0 }), "http_limits"),
        (json!({ "max_concurrent": 65 }), "http_limits"),
    ] {
        let (status, refused) = stack
            .call_as(
                &acme,
                M::PUT,
                &format!("/api/v1/jobs/{job}"),
                Some(definition(&json!({ "http_limits": limits }))),
            )
            .await;
        assert_eq!(
            (status, &refused["field"]),
            (422, &json!(field)),
            "{refused}"
        );
    }

    // The operator lowers the ceiling: the saved job keeps its grant, but
    // the next run is sent none.
    let (status, _) = stack
        .call(M::PUT, path, Some(json!({ "origins": [] })))
        .await;
    assert_eq!(status, 200);
    let run = stack
        .run_to_end_as(&acme, job, &format!("GET {}", origin.url("/bytes/10")))
        .await;
    assert!(
        run.message
            .clone()
            .unwrap_or_default()
            .starts_with("error: the request was denied"),
        "{run:?}"
    );
    assert_eq!(origin.requests().len(), 1, "only the first run reached it");
    let metrics = reqwest::get(format!("{}/metrics", stack.executor.address()))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for expected in [
        "cronbox_executor_http_requests_total 1\n",
        "cronbox_executor_http_denied_total 2\n",
        "cronbox_executor_http_received_bytes_total 10\n",
    ] {
        assert!(metrics.contains(expected), "{expected} in {metrics}");
    }
    stack.shutdown().await;
}

/// A secret is sealed at rest, write-only through the API, sent only with
/// the runs of its own tenant's jobs that reference it, masked in their
/// log and result, never on the executor's disk; a rotation reaches the
/// next run; deleting one a job references needs force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_reach_only_their_tenants_runs_and_are_never_shown() {
    use reqwest::Method as M;
    let origin = cronbox_tests::TestOrigin::start().await;
    let scheduler = SchedulerConfig {
        secrets: Some(std::sync::Arc::new(cronbox_admin::secrets::SecretBox::new(
            &[42; 32],
        ))),
        ..SchedulerConfig::default()
    };
    let stack = stack_configured(scheduler, 16 << 20, |config| {
        config.runtime.http_nets = "127.0.0.1/32".parse().unwrap();
    })
    .await;
    const ACME: &str = "acme-secret-value-1";
    const ACME_ROTATED: &str = "acme-secret-value-2";
    const BETA: &str = "beta-secret-value-1";
    let mut jobs_of = Vec::new();
    for (name, value) in [("acme", ACME), ("beta", BETA)] {
        let token = tenant(&stack, name).await;
        let (status, set) = stack
            .call(
                M::PUT,
                &format!("/api/v1/tenants/{name}/http-ceiling"),
                Some(json!({ "origins": [origin.origin()] })),
            )
            .await;
        assert_eq!(status, 200, "{set}");
        let (status, secret) = stack
            .call_as(
                &token,
                M::PUT,
                "/api/v1/secrets/NOTIFY_TOKEN",
                Some(json!({ "value": value })),
            )
            .await;
        assert_eq!(status, 200, "{secret}");
        assert_eq!(secret["name"], "NOTIFY_TOKEN");
        assert!(!secret.to_string().contains(value), "{secret}");
        for module in ["notify", "config-echo"] {
            let (status, _) = stack
                .upload_as(&token, &format!("?name={module}"), jobs::bytes(module))
                .await;
            assert_eq!(status, 201);
        }
        let notify = stack
            .create_as(
                &token,
                json!({
                    "name": "notify", "module": "notify", "secrets": ["NOTIFY_TOKEN"],
                    "config": { "url": origin.url("/echo") },
                    "http_allow": [origin.origin()],
                }),
            )
            .await;
        let echo = stack
            .create_as(
                &token,
                json!({ "name": "echo", "module": "config-echo", "secrets": ["NOTIFY_TOKEN"] }),
            )
            .await;
        jobs_of.push((token, notify, echo));
    }
    let (acme, acme_notify, acme_echo) = &jobs_of[0];
    let (beta, beta_notify, _) = &jobs_of[1];

    // Each tenant's job sends its own tenant's value.
    for (token, job) in [(acme, acme_notify), (beta, beta_notify)] {
        let run = stack.run_to_end_as(token, *job, "deployed").await;
        assert_eq!(run.message.as_deref(), Some("notified (200)"), "{run:?}");
    }
    let authorizations: Vec<String> = origin
        .requests()
        .iter()
        .map(|request| request.headers["authorization"].clone())
        .collect();
    assert_eq!(
        authorizations,
        [format!("Bearer {ACME}"), format!("Bearer {BETA}")]
    );

    // Printed by the job, it is masked in the log and the result.
    let run = stack.run_to_end_as(acme, *acme_echo, "NOTIFY_TOKEN").await;
    assert_eq!(run.message.as_deref(), Some("********"), "{run:?}");
    let (_, log) = stack
        .call_as(acme, M::GET, &format!("/api/v1/runs/{}/log", run.id), None)
        .await;
    assert!(log.to_string().contains("NOTIFY_TOKEN = ********"), "{log}");
    let mut answers = vec![log];
    for path in [
        format!("/api/v1/runs/{}", run.id),
        format!("/api/v1/jobs/{acme_echo}"),
        "/api/v1/secrets".to_owned(),
        format!("/api/v1/jobs/{acme_echo}/runs"),
    ] {
        let (status, answer) = stack.call_as(acme, M::GET, &path, None).await;
        assert_eq!(status, 200, "{path}: {answer}");
        answers.push(answer);
    }
    assert_eq!(answers[2]["secrets"], json!(["NOTIFY_TOKEN"]));
    let listed = &answers[3][0];
    assert_eq!(
        (&listed["name"], &listed["used_by"]),
        (&json!("NOTIFY_TOKEN"), &json!([acme_notify, acme_echo]))
    );
    for answer in &answers {
        for value in [ACME, BETA] {
            assert!(!answer.to_string().contains(value), "{answer}");
        }
    }

    // A name the tenant does not have is refused; a rotation reaches the
    // next run.
    let (status, refused) = stack
        .call_as(
            beta,
            M::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "x", "module": "config-echo", "secrets": ["ACME_ONLY"] })),
        )
        .await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("secrets")),
        "{refused}"
    );
    let (status, _) = stack
        .call_as(
            acme,
            M::PUT,
            "/api/v1/secrets/NOTIFY_TOKEN",
            Some(json!({ "value": ACME_ROTATED })),
        )
        .await;
    assert_eq!(status, 200);
    let run = stack.run_to_end_as(acme, *acme_notify, "rotated").await;
    assert_eq!(run.message.as_deref(), Some("notified (200)"), "{run:?}");
    assert_eq!(
        origin.requests()[2].headers["authorization"],
        format!("Bearer {ACME_ROTATED}")
    );

    // Deleting a referenced secret needs force.
    let (status, refused) = stack
        .call_as(acme, M::DELETE, "/api/v1/secrets/NOTIFY_TOKEN", None)
        .await;
    assert_eq!(
        (status, &refused["code"]),
        (409, &json!("secret_in_use")),
        "{refused}"
    );
    let (status, deleted) = stack
        .call_as(
            acme,
            M::DELETE,
            "/api/v1/secrets/NOTIFY_TOKEN?force=true",
            None,
        )
        .await;
    assert_eq!(status, 200, "{deleted}");
    assert_eq!(
        deleted["still_referenced_by"],
        json!([acme_notify, acme_echo])
    );

    // Nothing on disk holds a value: the admin's database (a stolen copy
    // reveals nothing without the key) and the executor's spool and cache.
    let data = stack.shutdown_keeping_data().await;
    let mut files = vec![data.path().to_owned()];
    let mut seen = 0;
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(
                std::fs::read_dir(&path)
                    .unwrap()
                    .map(|entry| entry.unwrap().path()),
            );
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        seen += 1;
        for value in [ACME, ACME_ROTATED, BETA] {
            assert!(
                !bytes
                    .windows(value.len())
                    .any(|window| window == value.as_bytes()),
                "{value} in {}",
                path.display()
            );
        }
    }
    assert!(seen > 3, "the data directory held the database and spool");
}

/// Every refusal is JSON with the part named, as the OpenAPI document
/// says: a path or query that does not parse, a method the route lacks, a
/// body that is not an object, an integer past 64 bits; an integer written
/// `5.0` is read as 5, and what the body type ignores is not checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_json_naming_the_part_and_integers_are_json_schemas() {
    use reqwest::Method as M;
    let stack = stack(SchedulerConfig::default()).await;
    let refusals = [
        (
            M::GET,
            "/api/v1/jobs/not-a-number",
            None,
            400,
            "bad_request",
        ),
        (
            M::GET,
            "/api/v1/runs/1/log?limit=x",
            None,
            400,
            "invalid_query",
        ),
        (
            M::GET,
            "/api/v1/jobs/1/next-fires?count=101",
            None,
            400,
            "invalid_query",
        ),
        (M::PATCH, "/api/v1/jobs", None, 405, "method_not_allowed"),
        (
            M::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!([null, null])),
            400,
            "invalid_request",
        ),
        (
            M::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!({ "jobs": 9_223_372_036_854_775_808_u64 })),
            400,
            "invalid_request",
        ),
    ];
    for (method, path, body, status, code) in refusals {
        let (got, error) = stack.call(method.clone(), path, body).await;
        assert_eq!(
            (got, error["code"].as_str()),
            (status, Some(code)),
            "{method} {path}: {error}"
        );
    }
    let (_, past) = stack
        .call(
            M::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!({ "jobs": 9_223_372_036_854_775_808_u64 })),
        )
        .await;
    assert_eq!(past["field"], "jobs", "{past}");

    let (status, quotas) = stack
        .call(
            M::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!({ "jobs": 5.0 })),
        )
        .await;
    assert_eq!(status, 200, "{quotas}");
    let jobs = quotas["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|quota| quota["quota"] == "jobs")
        .unwrap();
    assert_eq!((&jobs["limit"], &jobs["own"]), (&json!(5), &json!(true)));
    // An executor's result may carry fields this admin does not know.
    let (status, answer) = stack
        .api
        .with_token(EXEC)
        .call(
            M::POST,
            "/api/v1/registry",
            Some(json!({ "group": "default", "address": "http://127.0.0.1:9",
                         "later": [9_223_372_036_854_775_808_u64] })),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    stack.shutdown().await;
}

/// No text a caller sends may hold U+0000 (PostgreSQL's text refuses it):
/// in a body or a query it is a 422 naming where it is, in a path a 422
/// too, and nothing is stored; an executor's callback, which reports
/// guests' text as it was, is still accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_holding_nul_is_refused_naming_where_and_nothing_is_stored() {
    use reqwest::Method as M;
    let stack = stack(SchedulerConfig::default()).await;
    let counter = stack.job("counter", "counter", json!({})).await;
    let digest = stack.get(&format!("/api/v1/jobs/{counter}")).await.1["module_digest"].clone();
    let job = |extra: Value| {
        let mut spec = json!({ "name": "nul", "module_digest": digest });
        for (key, value) in extra.as_object().unwrap() {
            spec[key] = value.clone();
        }
        Some(spec)
    };
    let refusals = [
        (
            M::POST,
            "/api/v1/jobs".to_owned(),
            job(json!({ "param": "a\u{0}b" })),
            "param",
        ),
        (
            M::POST,
            "/api/v1/jobs".to_owned(),
            job(json!({ "name": "\u{0}" })),
            "name",
        ),
        (
            M::POST,
            "/api/v1/jobs".to_owned(),
            job(json!({ "config": { "key": "x", "k\u{0}": "v" } })),
            "config",
        ),
        (
            M::PUT,
            format!("/api/v1/jobs/{counter}"),
            job(json!({ "config": { "key": "\u{0}" } })),
            "config.key",
        ),
        (
            M::POST,
            "/api/v1/jobs/batch".to_owned(),
            Some(json!({ "jobs": [job(json!({})), job(json!({ "group": "g\u{0}" }))] })),
            "jobs[1].group",
        ),
        (
            M::PUT,
            format!("/api/v1/jobs/{counter}/state"),
            Some(json!({ "state": { "count": "4\u{0}" } })),
            "state.count",
        ),
        (
            M::POST,
            format!("/api/v1/jobs/{counter}/trigger"),
            Some(json!({ "param": "\u{0}" })),
            "param",
        ),
    ];
    for (method, path, body, field) in refusals {
        let (status, error) = stack.call(method.clone(), &path, body).await;
        assert_eq!(
            (status, error["code"].as_str(), error["field"].as_str()),
            (422, Some("invalid_request"), Some(field)),
            "{method} {path}: {error}"
        );
        assert!(
            error["message"].as_str().unwrap().contains("U+0000"),
            "{error}"
        );
    }
    for (method, path, code, field) in [
        (
            M::GET,
            "/api/v1/jobs?limit=5&search=a%00",
            "invalid_query",
            Some("search"),
        ),
        (M::DELETE, "/api/v1/secrets/a%00b", "invalid_request", None),
    ] {
        let (status, error) = stack.call(method, path, None).await;
        assert_eq!(
            (status, error["code"].as_str(), error["field"].as_str()),
            (422, Some(code), field),
            "{path}: {error}"
        );
        assert!(
            error["message"].as_str().unwrap().contains("%00"),
            "{error}"
        );
    }
    let jobs = stack.api.api.jobs(&Default::default()).await.unwrap();
    assert_eq!(jobs.len(), 1, "nothing stored: {jobs:?}");
    assert_eq!(jobs[0].config, Default::default(), "nothing stored");
    let (_, state) = stack.get(&format!("/api/v1/jobs/{counter}/state")).await;
    assert_eq!(state["state"], json!({}), "nothing stored");
    let runs = stack.api.api.job_runs(counter, None, 10).await.unwrap();
    assert!(runs.is_empty(), "nothing triggered: {runs:?}");

    let (status, answer) = stack
        .api
        .with_token(EXEC)
        .call(
            M::POST,
            "/api/v1/callback",
            Some(json!({ "results": [{
                "run_id": 987_654, "job_id": counter, "outcome": "failed",
                "message": "guest text \u{0}", "code": 500, "started_at_ms": 1,
                "duration_ms": 1, "module_digest": digest, "executor": "http://127.0.0.1:9",
            }] })),
        )
        .await;
    assert_eq!(
        status, 200,
        "a callback reports guests' text as it was: {answer}"
    );
    stack.shutdown().await;
}

/// An executor's callback is read straight into its type when it can be,
/// and otherwise as every other body is: the same answers either way. An
/// integer past `i64` (where the type has `u64`s) is refused naming where
/// it is, an integral float is read as its integer, and a body that is not
/// one object is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn callbacks_are_read_as_the_document_says_whichever_way() {
    use reqwest::Method as M;
    let stack = stack(SchedulerConfig::default()).await;
    let counter = stack.job("counter", "counter", json!({})).await;
    let digest = stack.get(&format!("/api/v1/jobs/{counter}")).await.1["module_digest"].clone();
    let result = |run_id: Value, duration_ms: Value| {
        json!({
            "run_id": run_id, "job_id": counter, "outcome": "failed",
            "message": "m", "code": 500, "started_at_ms": 1,
            "duration_ms": duration_ms, "module_digest": digest,
            "executor": "http://127.0.0.1:9",
        })
    };
    let callback = |body: Value| {
        let stack = &stack;
        async move {
            stack
                .api
                .with_token(EXEC)
                .call(M::POST, "/api/v1/callback", Some(body))
                .await
        }
    };
    let answers = [
        (
            json!({ "results": [result(json!(987_654), json!(1))] }),
            200,
            None,
            None,
        ),
        (
            json!({ "results": [result(json!(987_655), json!(5.0))] }),
            200,
            None,
            None,
        ),
        (
            json!({ "results": [result(json!(u64::MAX), json!(1))] }),
            400,
            Some("invalid_request"),
            Some("results[0].run_id"),
        ),
        (
            json!({ "results": [result(json!(987_656), json!(-1))] }),
            400,
            Some("invalid_request"),
            Some("results[0].duration_ms"),
        ),
        (
            json!([[result(json!(987_657), json!(1))]]),
            400,
            Some("invalid_request"),
            None,
        ),
    ];
    for (body, status, code, field) in answers {
        let (got, answer) = callback(body.clone()).await;
        assert_eq!(
            (got, answer["code"].as_str(), answer["field"].as_str()),
            (status, code, field),
            "{body}: {answer}"
        );
    }
    let cut_short = stack
        .api
        .http
        .post(format!("{}/api/v1/callback", stack.api.base))
        .bearer_auth(EXEC)
        .header("content-type", "application/json")
        .body(r#"{"results": ["#)
        .send()
        .await
        .unwrap();
    assert_eq!(cut_short.status(), 400);
    let answer: Value = cut_short.json().await.unwrap();
    assert_eq!(answer["code"], "malformed_json", "{answer}");
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_pin_new_version_and_rollback_with_runs_naming_what_ran() {
    let stack = stack(SchedulerConfig::default()).await;
    // v1 through multipart, with a label.
    let form = reqwest::multipart::Form::new()
        .part(
            "module",
            reqwest::multipart::Part::bytes(jobs::bytes("hello")).file_name("hello.wasm"),
        )
        .text("name", "greeter")
        .text("labels", "stable");
    let v1: Value = stack
        .http
        .post(format!("{}/api/v1/modules", stack.base))
        .bearer_auth(API)
        .multipart(form)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (v1["name"].as_str(), v1["version"].as_i64()),
        (Some("greeter"), Some(1)),
        "{v1}"
    );
    let follower = stack
        .create_as(API, json!({ "name": "follows", "module": "greeter" }))
        .await;
    let pinned = stack
        .create_as(API, json!({ "name": "pinned", "module": "greeter@1" }))
        .await;
    let ran = |run: &Run| {
        (
            run.message.clone().unwrap_or_default(),
            json!(run.module_digest),
        )
    };
    let first = stack.run_to_end(follower, "v1").await;
    assert_eq!(ran(&first), ("hello, v1".to_owned(), v1["digest"].clone()));

    // v2: another program under the same name; the follower moves, the
    // pinned job stays.
    let (status, v2) = stack
        .upload_as(API, "?name=greeter&labels=beta", jobs::bytes("counter"))
        .await;
    assert_eq!(status, 201, "{v2}");
    assert_eq!(
        (v2["version"].as_i64(), v2["jobs_moved"].as_i64()),
        (Some(2), Some(1))
    );
    let second = stack.run_to_end(follower, "").await;
    assert!(
        second.message.as_deref().unwrap().starts_with("count=1"),
        "{second:?}"
    );
    assert_eq!(json!(second.module_digest), v2["digest"]);
    let still = stack.run_to_end(pinned, "pinned").await;
    assert_eq!(
        ran(&still),
        ("hello, pinned".to_owned(), v1["digest"].clone())
    );

    // The same content again is not a new version.
    let (_, again) = stack
        .upload_as(API, "?name=greeter", jobs::bytes("counter"))
        .await;
    assert_eq!(again["version"].as_i64(), Some(2));

    // Rollback to v1: a new version 3 with v1's content.
    let (status, rolled) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/modules/greeter/rollback",
            Some(json!({ "version": 1 })),
        )
        .await;
    assert_eq!(status, 201, "{rolled}");
    assert_eq!(rolled["version"]["version"], 3);
    assert_eq!(rolled["version"]["digest"], v1["digest"]);
    let third = stack.run_to_end(follower, "back").await;
    assert_eq!(
        ran(&third),
        ("hello, back".to_owned(), v1["digest"].clone())
    );
    let (status, error) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/modules/greeter/rollback",
            Some(json!({ "version": 9 })),
        )
        .await;
    assert_eq!(
        (status, error["field"].as_str()),
        (404, Some("version")),
        "{error}"
    );

    // Labels move between versions; the list shows history newest first.
    let (status, versions) = stack
        .call(
            reqwest::Method::PUT,
            "/api/v1/modules/greeter/labels/beta",
            Some(json!({ "version": 3 })),
        )
        .await;
    assert_eq!(status, 200, "{versions}");
    let summary: Vec<(i64, Vec<String>, String)> = versions
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_i64().unwrap(),
                serde_json::from_value(v["labels"].clone()).unwrap(),
                v["note"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            (
                3,
                vec!["beta".to_owned()],
                "rollback to version 1".to_owned()
            ),
            (2, vec![], String::new()),
            (1, vec!["stable".to_owned()], String::new()),
        ]
    );
    let (_, modules) = stack.get("/api/v1/modules").await;
    assert_eq!(modules[0]["version"], 3);

    // A job naming a version that does not exist is refused.
    let (status, error) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs",
            Some(json!({ "name": "x", "module": "greeter@7" })),
        )
        .await;
    assert_eq!(
        (status, error["field"].as_str()),
        (422, Some("module")),
        "{error}"
    );
    stack.shutdown().await;
}

/// Waits until `count` alarms arrived (then a little longer, to catch
/// repeats) and returns them.
async fn alarms(receiver: &WebhookReceiver, count: usize) -> Vec<Value> {
    let deadline = Instant::now() + WAIT;
    while receiver.bodies().len() < count {
        assert!(
            Instant::now() < deadline,
            "{} of {count} alarms arrived: {:?}",
            receiver.bodies().len(),
            receiver.bodies()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    receiver.bodies()
}

async fn alarm_status(stack: &Stack, run: i64) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let (_, run) = stack.get(&format!("/api/v1/runs/{run}")).await;
        if run["alarm_status"] != "due" && run["alarm_status"] != "sending" {
            return run;
        }
        assert!(Instant::now() < deadline, "alarm never settled: {run}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An admin whose alarms may reach this machine's loopback, where the
/// tests' webhook receivers listen.
fn loopback_alarms() -> SchedulerConfig {
    SchedulerConfig {
        alarm_nets: "127.0.0.1/32".parse().unwrap(),
        ..SchedulerConfig::default()
    }
}

/// By default an alarm webhook may only point at the public internet: an
/// address written out that is not (loopback, the cloud metadata address,
/// their IPv6-mapped forms) is refused when the job is saved, naming the
/// field; a name that resolves to one is never called, and the alarm fails
/// with a message that does not say what is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_webhook_on_a_private_address_is_never_called() {
    let stack = stack(SchedulerConfig::default()).await;
    let receiver = WebhookReceiver::start(200).await;
    let (status, uploaded) = stack.upload_as(API, "", jobs::bytes("fuel-burner")).await;
    assert_eq!(status, 201, "{uploaded}");
    for url in [
        receiver.url(),
        receiver.url().replace("127.0.0.1", "[::ffff:127.0.0.1]"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://[fd00:ec2::254]/".to_owned(),
    ] {
        let spec = json!({ "name": "refused", "module_digest": uploaded["digest"],
                           "alarm_url": url });
        let (status, refused) = stack
            .call(reqwest::Method::POST, "/api/v1/jobs", Some(spec))
            .await;
        assert_eq!(
            (status, &refused["field"]),
            (422, &json!("alarm_url")),
            "{url}"
        );
        assert!(
            refused["message"].as_str().unwrap().contains("not allowed"),
            "{refused}"
        );
    }

    let named = receiver.url().replace("127.0.0.1", "localhost");
    let job = stack
        .job("by-name", "fuel-burner", json!({ "alarm_url": named }))
        .await;
    let failed = stack.run_to_end(job, "not-a-number").await;
    let settled = alarm_status(&stack, failed.id.0).await;
    assert_eq!(settled["alarm_status"], "failed", "{settled}");
    assert!(
        settled["alarm_message"]
            .as_str()
            .unwrap()
            .contains("not one the admin may call"),
        "{settled}"
    );
    assert!(receiver.bodies().is_empty(), "nothing reached loopback");
    stack.shutdown().await;
}

/// A webhook that redirects is not followed: the alarm fails, and nothing
/// reaches where the redirect pointed (a tenant cannot steer the admin).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_webhook_redirect_is_not_followed() {
    let stack = stack(loopback_alarms()).await;
    let target = WebhookReceiver::start(200).await;
    let redirector = WebhookReceiver::redirecting_to(&target.url()).await;
    let job = stack
        .job(
            "redirected",
            "fuel-burner",
            json!({ "alarm_url": redirector.url() }),
        )
        .await;
    let failed = stack.run_to_end(job, "not-a-number").await;
    let settled = alarm_status(&stack, failed.id.0).await;
    assert_eq!(settled["alarm_status"], "failed", "{settled}");
    assert_eq!(
        redirector.bodies().len(),
        3,
        "three attempts, each redirected"
    );
    assert!(
        target.bodies().is_empty(),
        "the redirect was never followed"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_run_alarms_its_webhook_once_and_records_how_it_went() {
    let stack = stack(loopback_alarms()).await;
    let receiver = WebhookReceiver::start(200).await;
    let refusing = WebhookReceiver::start(500).await;
    let watched = stack
        .job(
            "watched",
            "fuel-burner",
            json!({ "alarm_url": receiver.url() }),
        )
        .await;
    let unwatched = stack.job("unwatched", "fuel-burner", json!({})).await;
    let broken = stack
        .job(
            "broken-hook",
            "fuel-burner",
            json!({ "alarm_url": refusing.url() }),
        )
        .await;

    let ok = stack.run_to_end(watched, "10").await;
    assert_eq!(ok.status, RunStatus::Success, "{ok:?}");
    let failed = stack.run_to_end(watched, "not-a-number").await;
    let failed_id = failed.id.0;
    let received = alarms(&receiver, 1).await;
    assert_eq!(
        received.len(),
        1,
        "one alarm, for the failed run only: {received:?}"
    );
    let alarm = &received[0];
    assert_eq!(alarm["event"], "run_failed");
    assert_eq!(alarm["job"], json!({ "id": watched, "name": "watched" }));
    assert_eq!(alarm["run"]["id"], failed_id);
    assert_eq!(alarm["run"]["outcome"], "failed");
    assert_eq!(alarm["tenant"], "default");
    assert_eq!(
        alarm_status(&stack, failed_id).await["alarm_status"],
        "sent"
    );
    assert_eq!(alarm_status(&stack, ok.id.0).await["alarm_status"], "none");

    let quiet = stack.run_to_end(unwatched, "x").await;
    let quiet = alarm_status(&stack, quiet.id.0).await;
    assert_eq!(quiet["alarm_status"], "not_configured");

    let refused = stack.run_to_end(broken, "x").await;
    let refused = alarm_status(&stack, refused.id.0).await;
    assert_eq!(refused["alarm_status"], "failed", "{refused}");
    // The webhook's answer is the operator's to see (the admin's log),
    // not the tenant's: it would make webhooks a probe of the network.
    let message = refused["alarm_message"].as_str().unwrap();
    assert!(
        message.starts_with("not delivered after 3 attempts"),
        "{refused}"
    );
    assert!(!message.contains("500"), "{refused}");
    assert_eq!(refusing.bodies().len(), 3, "three attempts");

    let metrics = stack.api.metrics().await;
    for line in [
        "cronbox_admin_alarms_sent_total 1",
        "cronbox_admin_alarm_failures_total 1",
        "cronbox_admin_runs_total{outcome=\"success\"} 1",
        "cronbox_admin_runs_total{outcome=\"failed\"} 3",
    ] {
        assert!(metrics.contains(line), "{line} missing from:\n{metrics}");
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_admins_on_one_database_send_each_alarm_once() {
    let postgres = PostgresServer::start();
    let url = postgres.create_database("alarms");
    let receiver = WebhookReceiver::start(200).await;
    let data = tempfile::tempdir().unwrap();
    let mut admins = Vec::new();
    for _ in 0..2 {
        admins.push(
            cronbox_admin::start(AdminConfig {
                bind: "127.0.0.1:0".parse().unwrap(),
                database: Database::Url(url.clone()),
                api_token: API.into(),
                executor_token: EXEC.into(),
                scheduler: loopback_alarms(),
                max_request_bytes: 16 << 20,
            })
            .await
            .unwrap(),
        );
    }
    let bases: Vec<String> = admins
        .iter()
        .map(|admin| format!("http://{}", admin.local_addr()))
        .collect();
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        bases.clone(),
        EXEC.into(),
        data.path().join("executor"),
    );
    config.beat_interval = Duration::from_millis(300);
    let executor = cronbox_executor::start(config).await.unwrap();
    let stack = ready(admins.remove(0), executor, bases[0].clone(), data).await;
    let job = stack
        .job(
            "watched",
            "fuel-burner",
            json!({ "alarm_url": receiver.url() }),
        )
        .await;
    let mut failed = Vec::new();
    for _ in 0..6 {
        failed.push(stack.run_to_end(job, "nope").await.id.0);
    }
    let received = alarms(&receiver, failed.len()).await;
    let mut alarmed: Vec<i64> = received
        .iter()
        .map(|alarm| alarm["run"]["id"].as_i64().unwrap())
        .collect();
    alarmed.sort();
    assert_eq!(alarmed, failed, "each failed run alarmed exactly once");
    let other = admins.remove(0);
    other.shutdown().await;
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openapi_document_is_served_without_a_token() {
    let stack = stack(SchedulerConfig::default()).await;
    let response = stack
        .http
        .get(format!("{}/api/v1/openapi.json", stack.base))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let document: Value = response.json().await.unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    assert!(document["paths"]["/api/v1/jobs/{id}"]["delete"].is_object());
    stack.shutdown().await;
}

/// The admin on a clock the test moves: a ten-minute retry backoff, an
/// hour of FIX_DELAY and an hour of downtime for a per-minute cron are
/// played out in milliseconds of real time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backoff_fixed_delay_and_misfires_follow_the_admins_clock() {
    // On a whole minute, so that the cron fires below are easy to name.
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let api = &stack.api;

    // A failed run is retried after ten minutes of the admin's time.
    let panicker = stack
        .job(
            "retried",
            "panicker",
            json!({ "retry_count": 1, "retry_interval_ms": 600_000 }),
        )
        .await;
    let first = api.trigger(panicker, json!({})).await;
    assert_eq!(api.ended(first).await.status, RunStatus::Failed);
    let retry = until("the retry is written", || async {
        api.runs(panicker)
            .await
            .into_iter()
            .find(|run| run.kind == TriggerKind::Retry)
    })
    .await;
    assert_eq!(retry.scheduled_at_ms, start + 600_000);
    clock.advance(Duration::from_secs(599));
    let retry_id = retry.id;
    assert_eq!(
        api.run(retry_id).await.status,
        RunStatus::Pending,
        "not yet due"
    );
    clock.advance(Duration::from_secs(1));
    let retried = api.ended(retry_id).await;
    assert_eq!((retried.status, retried.attempt), (RunStatus::Failed, 1));

    // FIX_DELAY of an hour: the next fire is an hour after the run ended.
    let delayed = stack
        .job(
            "hourly",
            "hello",
            json!({ "schedule_type": "FIX_DELAY", "schedule_conf": "1h" }),
        )
        .await;
    let (_, started) = api
        .call(
            reqwest::Method::POST,
            &format!("/api/v1/jobs/{delayed}/start"),
            None,
        )
        .await;
    let first_fire = started["next_fire_at_ms"].as_i64().unwrap();
    assert_eq!(first_fire, clock.now_ms() + 3_600_000);
    clock.set(first_fire);
    let run = until("the hourly job runs", || async {
        api.runs(delayed)
            .await
            .into_iter()
            .find(|r| r.status == RunStatus::Success)
    })
    .await;
    let finished = run.finished_at_ms.unwrap();
    let job = api.api.job(delayed).await.unwrap();
    assert_eq!(job.next_fire_at_ms, Some(finished + 3_600_000));

    // An hour of downtime for a per-minute cron: DO_NOTHING skips every
    // missed fire, FIRE_ONCE_NOW runs once, now.
    let mut crons = Vec::new();
    for misfire in ["DO_NOTHING", "FIRE_ONCE_NOW"] {
        let id = stack
            .job(
                misfire,
                "hello",
                json!({ "schedule_type": "CRON", "schedule_conf": "0 * * * * ?", "misfire": misfire }),
            )
            .await;
        crons.push(id);
    }
    // Both started while the admin's pre-read is not looking: their first
    // fires are set, then the clock jumps an hour past them.
    let resumed_at = clock.now_ms() + 3_600_000 + 30_000;
    for id in &crons {
        api.call(
            reqwest::Method::POST,
            &format!("/api/v1/jobs/{id}/start"),
            None,
        )
        .await;
    }
    clock.set(resumed_at);
    let fired_once = until("FIRE_ONCE_NOW fires once", || async {
        let runs = api.runs(crons[1]).await;
        (runs.len() == 1 && runs.iter().all(|run| !run.status.is_open())).then_some(runs)
    })
    .await;
    assert_eq!(fired_once[0].kind, TriggerKind::Misfire);
    assert_eq!(fired_once[0].scheduled_at_ms, resumed_at);
    for id in &crons {
        let (_, job) = api.get(&format!("/api/v1/jobs/{id}")).await;
        let next = job["next_fire_at_ms"].as_i64().unwrap();
        assert_eq!(
            next,
            resumed_at - resumed_at % 60_000 + 60_000,
            "on from now"
        );
    }
    assert!(
        api.runs(crons[0]).await.is_empty(),
        "DO_NOTHING skipped the missed hour"
    );
    stack.shutdown().await;
}

/// A fire the admin wrote is sent under the lease its write gave it: on
/// time, with no second write to take a lease (one write fewer per run at
/// rate); sent so late that little of that lease is left, its lease is
/// taken again first. Leases written are counted by a trigger on the
/// admin's own SQLite file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_sent_on_time_goes_under_its_write_lease_and_a_late_one_renews_it() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let api = &stack.api;
    let pool = stack.admin_database().await;
    for statement in [
        "CREATE TABLE lease_taken (run_id INTEGER NOT NULL)",
        "CREATE TRIGGER count_leases_taken AFTER UPDATE OF lease_until_ms ON run \
         WHEN NEW.lease_until_ms IS NOT NULL \
         BEGIN INSERT INTO lease_taken (run_id) VALUES (NEW.id); END",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    let leases_taken = |run: i64| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM lease_taken WHERE run_id = $1")
                .bind(run)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    let job = stack.started_minutely_hello().await;
    // Written by the pre-read two seconds ahead, pending until its instant.
    let clock = &clock;
    let written = |at: i64| async move {
        clock.set(at - 2_000);
        until("the fire is written", || async {
            api.runs(job)
                .await
                .into_iter()
                .find(|run| run.scheduled_at_ms == at)
        })
        .await
    };

    let on_time = start + 60_000;
    let run = written(on_time).await;
    clock.set(on_time);
    assert_eq!(api.ended(run.id).await.status, RunStatus::Success);
    assert_eq!(
        leases_taken(run.id.0).await,
        0,
        "sent under its write lease"
    );

    // Dispatched eight seconds after its instant: seven seconds of its
    // write lease (fifteen) are left, less than taking the lease gives.
    let late = start + 120_000;
    let run = written(late).await;
    clock.set(late + 8_000);
    assert_eq!(api.ended(run.id).await.status, RunStatus::Success);
    assert_eq!(
        leases_taken(run.id.0).await,
        1,
        "its lease taken again first"
    );
    stack.shutdown().await;
}

/// The pre-read reads only the columns it plans fires with, so a job whose
/// stored row is damaged in another (here its route, an unknown name) still
/// has its fire written: the dispatch, which reads the whole job, ends that
/// run naming the column and stops the job, instead of leaving the run to
/// be taken over and fail again for ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fire_of_a_job_whose_row_does_not_decode_ends_and_stops_the_job() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let api = &stack.api;
    let pool = stack.admin_database().await;
    let job = stack.started_minutely_hello().await;
    sqlx::query("UPDATE job SET route = 'SIDEWAYS' WHERE id = $1")
        .bind(job.0)
        .execute(&pool)
        .await
        .unwrap();
    let fire = start + 60_000;
    clock.set(fire);
    let run = until("the fire is written", || async {
        sqlx::query_scalar::<_, i64>(
            "SELECT id FROM run WHERE job_id = $1 AND scheduled_at_ms = $2",
        )
        .bind(job.0)
        .bind(fire)
        .fetch_optional(&pool)
        .await
        .unwrap()
    })
    .await;
    let ended = api.ended(RunId(run)).await;
    assert_eq!(ended.status, RunStatus::Failed);
    let message = ended.message.unwrap_or_default();
    assert!(
        message.contains("route") && message.contains("SIDEWAYS"),
        "{message}"
    );
    let (enabled, next_fire): (i64, Option<i64>) =
        sqlx::query_as("SELECT enabled, next_fire_at_ms FROM job WHERE id = $1")
            .bind(job.0)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((enabled, next_fire), (0, None), "the job is stopped");
    stack.shutdown().await;
}

/// A pre-read that keeps up claims a job for its fires one second past
/// its window as well: an every-second job is claimed (its row read, its
/// next fire moved) once for every two fires written. Moves are counted by
/// a trigger on the admin's SQLite file; the clock is advanced a second at
/// a time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_firing_every_second_is_claimed_once_for_two_fires() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let pool = stack.admin_database().await;
    for statement in [
        "CREATE TABLE next_fire_moved (job_id INTEGER NOT NULL)",
        "CREATE TRIGGER count_next_fire_moves AFTER UPDATE OF next_fire_at_ms ON job \
         WHEN NEW.next_fire_at_ms IS NOT OLD.next_fire_at_ms \
         BEGIN INSERT INTO next_fire_moved (job_id) VALUES (NEW.id); END",
    ] {
        sqlx::query(statement).execute(&pool).await.unwrap();
    }
    let job = stack.started_hello("every-second", "* * * * * ?").await;
    let count = |sql: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query_scalar::<_, i64>(sql)
                .bind(job.0)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    // The pre-read writes the fires of the five seconds ahead.
    let window_written = |now: i64| {
        let pool = pool.clone();
        async move {
            until("the window's last fire is written", || async {
                sqlx::query_scalar::<_, i64>(
                    "SELECT id FROM run WHERE job_id = $1 AND scheduled_at_ms = $2",
                )
                .bind(job.0)
                .bind(now + 5_000)
                .fetch_optional(&pool)
                .await
                .unwrap()
            })
            .await;
        }
    };
    window_written(start).await;
    let fires = "SELECT COUNT(*) FROM run WHERE job_id = $1";
    let moves = "SELECT COUNT(*) FROM next_fire_moved WHERE job_id = $1";
    let (fires_before, moves_before) = (count(fires).await, count(moves).await);
    for second in 1..=10 {
        let now = start + second * 1_000;
        clock.set(now);
        window_written(now).await;
    }
    let fires_written = count(fires).await - fires_before;
    let claims = count(moves).await - moves_before;
    assert!(fires_written >= 10, "{fires_written} fires in 10 s");
    assert!(
        claims * 10 <= fires_written * 6,
        "{claims} claims for {fires_written} fires"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_listed_by_filter_and_page() {
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api;
    let (status, _) = api
        .call(
            reqwest::Method::PUT,
            "/api/v1/groups/batch",
            Some(json!({ "address_type": "AUTO" })),
        )
        .await;
    assert_eq!(status, 200);
    let mut ids = Vec::new();
    for (name, group) in [
        ("a", "default"),
        ("b", "batch"),
        ("b", "default"),
        ("c", "batch"),
        ("d", "default"),
    ] {
        ids.push(
            stack
                .job(
                    name,
                    "hello",
                    json!({ "group": group, "schedule_type": "FIX_RATE", "schedule_conf": "3600" }),
                )
                .await,
        );
    }
    api.call(
        reqwest::Method::POST,
        &format!("/api/v1/jobs/{}/start", ids[4]),
        None,
    )
    .await;
    let page = |query: &'static str| async move {
        let (status, jobs) = api.get(&format!("/api/v1/jobs{query}")).await;
        assert_eq!(status, 200, "{query}: {jobs}");
        jobs.as_array()
            .unwrap()
            .iter()
            .map(|job| JobId(job["id"].as_i64().unwrap()))
            .collect::<Vec<JobId>>()
    };
    // Pages of two, each after the last id of the one before.
    let first = page("?limit=2").await;
    assert_eq!(first, ids[..2]);
    let (_, next) = api
        .get(&format!("/api/v1/jobs?limit=2&after={}", first[1]))
        .await;
    let next: Vec<JobId> = next
        .as_array()
        .unwrap()
        .iter()
        .map(|job| JobId(job["id"].as_i64().unwrap()))
        .collect();
    assert_eq!(next, ids[2..4]);
    assert_eq!(page("?name=b").await, [ids[1], ids[2]]);
    assert_eq!(page("?group=batch").await, [ids[1], ids[3]]);
    assert_eq!(page("?enabled=true").await, [ids[4]]);
    assert_eq!(page("?group=default&enabled=false").await, [ids[0], ids[2]]);
    // A part of the name in any letter case; a schedule type; a module.
    assert_eq!(page("?search=B").await, [ids[1], ids[2]]);
    assert_eq!(page("?search=%25").await, [], "% is taken literally");
    assert_eq!(page("?schedule_type=fix_rate").await, ids);
    assert_eq!(page("?schedule_type=CRON").await, []);
    api.api
        .upload(jobs::bytes("hello"), Some("greeter"), &[])
        .await
        .unwrap();
    let named = api
        .api
        .create_job(&JobSpec::new("named", "greeter"))
        .await
        .unwrap()
        .id;
    assert_eq!(page("?module=greeter").await, [named]);
    assert_eq!(page("?module=greeter&search=NAM").await, [named]);
    // Three characters or more go through the index of names' trigrams,
    // which follows renames and deletions.
    assert_eq!(page("?search=aME").await, [named]);
    assert_eq!(page("?search=a%22me").await, [], "a quote is a character");
    let mut renamed = api.api.job(named).await.unwrap();
    renamed.name = "other-x".into();
    api.api
        .update_job(named, &JobSpec::from(renamed))
        .await
        .unwrap();
    assert_eq!(page("?search=named").await, []);
    assert_eq!(page("?search=HER-").await, [named]);
    let (status, refused) = api.get("/api/v1/jobs?schedule_type=HOURLY").await;
    assert_eq!((status, &refused["field"]), (400, &json!("schedule_type")));
    let (status, refused) = api.get("/api/v1/jobs?colour=red").await;
    assert_eq!((status, &refused["field"]), (400, &json!("colour")));
    // The typed client carries the admin's refusal whole: status, code,
    // message.
    let missing = api.api.job(JobId(i64::MAX)).await.unwrap_err();
    assert_eq!(
        (missing.status(), missing.code()),
        (Some(404), Some(ErrorCode::UnknownJob)),
        "{missing}"
    );
    assert!(missing.to_string().contains("no job"), "{missing}");
    let (status, refused) = api.get("/api/v1/jobs?limit=5000").await;
    assert_eq!((status, &refused["field"]), (400, &json!("limit")));
    stack.shutdown().await;
}

/// Sets `tenant`'s own quotas (as the operator); the report answered.
async fn set_quotas(stack: &Stack, tenant: &str, quotas: Value) -> Value {
    let (status, report) = stack
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/tenants/{tenant}/quotas"),
            Some(quotas),
        )
        .await;
    assert_eq!(status, 200, "{report}");
    report
}

/// One quota's entry in a report.
fn quota<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["quotas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|entry| entry["quota"] == name)
        .unwrap_or_else(|| panic!("no quota {name} in {report}"))
}

/// A job's durable state, as the operator reads it.
async fn job_state(stack: &Stack, job: JobId) -> Value {
    stack.get(&format!("/api/v1/jobs/{job}/state")).await.1["state"].clone()
}

/// Asserts a 403 naming `quota`.
fn assert_quota_refusal(status: u16, answer: &Value, quota: &str) {
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["code"], "quota_exceeded", "{answer}");
    assert_eq!(answer["field"], quota, "{answer}");
    let message = answer["message"].as_str().unwrap();
    assert!(
        message.contains(quota) && message.contains("limit"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn saving_past_a_quota_is_refused_naming_it_and_usage_is_readable() {
    // The operator's default: a job may fire at most once a minute.
    let config = SchedulerConfig {
        quota_defaults: cronbox_admin::quotas::QuotaDefaults::default()
            .with(&serde_json::from_value(json!({ "min_interval_ms": 60_000 })).unwrap()),
        ..SchedulerConfig::default()
    };
    let stack = stack(config).await;
    let token = tenant(&stack, "team-q").await;
    use reqwest::Method as M;

    // The tenant reads its own quotas, not another's, and cannot set them.
    let path = "/api/v1/tenants/team-q/quotas";
    let (status, report) = stack.call_as(&token, M::GET, path, None).await;
    assert_eq!(status, 200, "{report}");
    assert_eq!(quota(&report, "min_interval_ms")["limit"], 60_000);
    assert_eq!(quota(&report, "min_interval_ms")["own"], false);
    assert_eq!(quota(&report, "jobs")["used"], 0);
    let (status, _) = stack
        .call_as(&token, M::GET, "/api/v1/tenants/default/quotas", None)
        .await;
    assert_eq!(status, 404);
    let (status, answer) = stack
        .call_as(&token, M::PUT, path, Some(json!({ "jobs": 100 })))
        .await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = stack.call(M::PUT, path, Some(json!({ "jobz": 1 }))).await;
    assert_eq!(status, 400, "an unknown quota is named: {answer}");
    assert!(
        answer["message"].as_str().unwrap().contains("jobz"),
        "{answer}"
    );

    // One job, one module name, room for hello's bytes and a little more.
    let hello = jobs::bytes("hello");
    let report = set_quotas(
        &stack,
        "team-q",
        json!({ "jobs": 1, "modules": 1, "module_bytes": hello.len() + 1000 }),
    )
    .await;
    assert_eq!(quota(&report, "jobs")["own"], true);
    assert_eq!(quota(&report, "jobs")["limit"], 1);
    let (status, pushed) = stack.upload_as(&token, "?name=hello", hello.clone()).await;
    assert_eq!(status, 201, "{pushed}");
    // A new version of a module it has: not a new module, not new bytes.
    let (status, pushed) = stack.upload_as(&token, "?name=hello", hello.clone()).await;
    assert_eq!(status, 201, "{pushed}");
    let (status, answer) = stack.upload_as(&token, "?name=other", hello.clone()).await;
    assert_quota_refusal(status, &answer, "modules");
    let (status, answer) = stack.upload_as(&token, "", jobs::bytes("counter")).await;
    assert_quota_refusal(status, &answer, "module_bytes");

    // Schedules firing more often than the shortest interval, at create
    // and at update (cron checked over its next fires: the 0 and 30 s
    // fires are 30 s apart).
    let create = |spec: Value| {
        let token = token.clone();
        let stack = &stack;
        async move {
            stack
                .call_as(&token, M::POST, "/api/v1/jobs", Some(spec))
                .await
        }
    };
    for schedule in [
        json!({ "schedule_type": "CRON", "schedule_conf": "0,30 * * * * ?" }),
        json!({ "schedule_type": "FIX_RATE", "schedule_conf": "10" }),
    ] {
        let mut spec = json!({ "name": "often", "module": "hello" });
        spec.as_object_mut()
            .unwrap()
            .extend(schedule.as_object().unwrap().clone());
        let (status, answer) = create(spec).await;
        assert_quota_refusal(status, &answer, "min_interval_ms");
    }
    let (status, job) = create(json!({
        "name": "minutely", "module": "hello",
        "schedule_type": "CRON", "schedule_conf": "0 * * * * ?",
    }))
    .await;
    assert_eq!(status, 201, "{job}");
    let id = job["id"].as_i64().unwrap();
    let (status, answer) = stack
        .call_as(
            &token,
            M::PUT,
            &format!("/api/v1/jobs/{id}"),
            Some(json!({
                "name": "minutely", "module": "hello",
                "schedule_type": "FIX_RATE", "schedule_conf": "1",
            })),
        )
        .await;
    assert_quota_refusal(status, &answer, "min_interval_ms");
    let (status, answer) = create(json!({ "name": "second", "module": "hello" })).await;
    assert_quota_refusal(status, &answer, "jobs");

    // Usage as the tenant reads it, and as metrics.
    let (_, report) = stack.call_as(&token, M::GET, path, None).await;
    assert_eq!(quota(&report, "jobs")["used"], 1);
    assert_eq!(quota(&report, "modules")["used"], 1);
    assert_eq!(quota(&report, "module_bytes")["used"], hello.len());
    assert_eq!(quota(&report, "executor_instances")["used"], Value::Null);
    let metrics = stack.api.metrics().await;
    for line in [
        "cronbox_admin_tenant_quota_used{tenant=\"team-q\",quota=\"jobs\"} 1".to_owned(),
        "cronbox_admin_tenant_quota_limit{tenant=\"team-q\",quota=\"jobs\"} 1".to_owned(),
        format!(
            "cronbox_admin_tenant_quota_used{{tenant=\"team-q\",quota=\"module_bytes\"}} {}",
            hello.len()
        ),
    ] {
        assert!(metrics.contains(&line), "{line} in {metrics}");
    }

    // Back to the defaults: a second job is accepted.
    set_quotas(&stack, "team-q", json!({})).await;
    let (status, job) = create(json!({ "name": "second", "module": "hello" })).await;
    assert_eq!(status, 201, "{job}");
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_past_a_run_time_quota_end_quota_exceeded() {
    let stack = stack(SchedulerConfig::default()).await;
    let token = tenant(&stack, "team-r").await;
    let counter = stack.job_as(&token, "counter", "counter", json!({})).await;
    let run = stack.run_to_end_as(&token, counter, "").await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    assert_eq!(job_state(&stack, counter).await, json!({ "count": "1" }));

    // State bytes: "count" and one digit are 6 bytes; the counter may go
    // on to 9 (the same size), and "10" would make 7: refused, with its
    // changes dropped.
    set_quotas(&stack, "team-r", json!({ "state_bytes": 6 })).await;
    for count in 2..=9 {
        let run = stack.run_to_end_as(&token, counter, "").await;
        assert_eq!(run.status, RunStatus::Success, "count {count}: {run:?}");
    }
    let run = stack.run_to_end_as(&token, counter, "").await;
    assert_eq!(run.status, RunStatus::Failed, "{run:?}");
    assert_eq!(
        run.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("quota_exceeded")
    );
    let message = run.message.unwrap();
    assert!(message.contains("state_bytes"), "{message}");
    assert_eq!(job_state(&stack, counter).await, json!({ "count": "9" }));

    // Runs in progress across the cluster: none allowed.
    set_quotas(&stack, "team-r", json!({ "running_runs": 0 })).await;
    let run = stack.run_to_end_as(&token, counter, "").await;
    assert_eq!(
        run.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("quota_exceeded"),
        "{run:?}"
    );
    assert!(run.executor.is_none(), "never sent: {run:?}");
    assert!(run.message.unwrap().contains("running_runs"));

    // Run time per day: a sleeper's 20 ms are past a limit of 1 ms.
    set_quotas(&stack, "team-r", json!({})).await;
    let sleeper = stack.job_as(&token, "sleeper", "sleeper", json!({})).await;
    let run = stack.run_to_end_as(&token, sleeper, "20").await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    set_quotas(&stack, "team-r", json!({ "run_ms_per_day": 1 })).await;
    let run = stack.run_to_end_as(&token, sleeper, "20").await;
    assert_eq!(
        run.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("quota_exceeded"),
        "{run:?}"
    );
    assert!(run.message.unwrap().contains("run_ms_per_day"));

    // Log bytes per day: a chatty run's log is cut at what is left, and
    // the next run is not dispatched.
    let chatty = stack.job_as(&token, "chatty", "chatty", json!({})).await;
    let (_, report) = stack.get("/api/v1/tenants/team-r/quotas").await;
    let logged = quota(&report, "log_bytes_per_day")["used"]
        .as_u64()
        .unwrap();
    assert!(logged > 0, "{report}");
    set_quotas(
        &stack,
        "team-r",
        json!({ "log_bytes_per_day": logged + 4000 }),
    )
    .await;
    let run = stack.run_to_end_as(&token, chatty, "1000").await;
    assert_eq!(run.status, RunStatus::Success, "{run:?}");
    let (_, log) = stack.get(&format!("/api/v1/runs/{}/log", run.id)).await;
    let lines = log["lines"].as_array().unwrap();
    assert!(lines.len() < 1000, "cut: {} lines", lines.len());
    let marker = lines.last().unwrap()["text"].as_str().unwrap();
    assert!(marker.contains("log_bytes_per_day"), "{marker}");
    let run = stack.run_to_end_as(&token, chatty, "1").await;
    assert_eq!(
        run.outcome.map(cronbox_api::RunOutcome::as_str),
        Some("quota_exceeded"),
        "{run:?}"
    );
    assert!(run.message.unwrap().contains("log_bytes_per_day"));

    let metrics = stack.api.metrics().await;
    assert!(
        metrics.contains("cronbox_admin_runs_total{outcome=\"quota_exceeded\"}"),
        "{metrics}"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_counts_runs_and_a_schedule_is_previewed_before_it_is_saved() {
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api;
    let hello = stack
        .job(
            "hello",
            "hello",
            json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?" }),
        )
        .await;
    let panicker = stack.job("panicker", "panicker", json!({})).await;
    let failed = api.trigger(panicker, json!({})).await;
    assert_eq!(api.ended(failed).await.status, RunStatus::Failed);
    let manual = api.trigger(hello, json!({ "param": "x" })).await;
    assert_eq!(api.ended(manual).await.status, RunStatus::Success);
    api.api.start_job(hello).await.unwrap();
    let scheduled = until("a scheduled run succeeds", || async {
        api.runs(hello)
            .await
            .into_iter()
            .find(|run| run.kind == TriggerKind::Schedule && run.status == RunStatus::Success)
    })
    .await;
    api.api.stop_job(hello).await.unwrap();

    let (status, dashboard) = api.get("/api/v1/dashboard").await;
    assert_eq!(status, 200, "{dashboard}");
    let hours = dashboard["hours"].as_array().unwrap();
    assert_eq!(hours.len(), 24);
    let sum = |key: &str| {
        hours
            .iter()
            .map(|hour| hour[key].as_i64().unwrap())
            .sum::<i64>()
    };
    assert_eq!(sum("failed"), 1, "{dashboard}");
    let successes = sum("success");
    assert!(successes >= 2, "{dashboard}");
    let rate = dashboard["success_rate"].as_f64().unwrap();
    assert!(
        (rate - successes as f64 / (successes + 1) as f64).abs() < 1e-9,
        "{dashboard}"
    );
    assert_eq!(dashboard["days"].as_array().unwrap().len(), 30);
    assert_eq!(
        dashboard["top_failing"],
        json!([{ "job_id": panicker, "name": "panicker", "failures": 1 }])
    );
    assert!(
        dashboard["lateness_sample"].as_i64().unwrap() >= 1,
        "{dashboard}"
    );
    let p50 = dashboard["lateness_p50_ms"].as_i64().unwrap();
    assert!(p50 >= 0 && p50 <= dashboard["lateness_p99_ms"].as_i64().unwrap());
    assert_eq!(dashboard["executors_online"], 1);
    // The runs filter by kind.
    let (_, page) = api
        .get(&format!("/api/v1/runs?job={hello}&kind=schedule"))
        .await;
    let kinds: Vec<&Value> = page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| &run["kind"])
        .collect();
    assert!(
        !kinds.is_empty() && kinds.iter().all(|kind| **kind == "schedule"),
        "{page}"
    );
    assert!(
        page["runs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|run| run["id"] == scheduled.id.0)
    );
    let (status, refused) = api.get("/api/v1/runs?kind=cosmic").await;
    assert_eq!((status, &refused["field"]), (400, &json!("kind")));

    // A schedule previewed in its zone before any job has it.
    let (status, preview) = api
        .get("/api/v1/schedule-preview?schedule_conf=0%2030%209%20*%20*%20%3F&time_zone=Asia/Tokyo&count=3")
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["time_zone"], "Asia/Tokyo");
    let local = preview["local"].as_array().unwrap();
    assert_eq!(local.len(), 3);
    assert!(
        local
            .iter()
            .all(|at| at.as_str().unwrap().ends_with("T09:30:00.000+09:00")),
        "{preview}"
    );
    assert!(
        preview["fires"][0]
            .as_str()
            .unwrap()
            .ends_with("T00:30:00.000Z"),
        "{preview}"
    );
    // A window and a holiday calendar, previewed and saved.
    let (status, preview) = api
        .get(
            "/api/v1/schedule-preview?schedule_conf=0%200%2012%20*%20*%20%3F&count=3\
             &starts_at_ms=1893456000000&exclude_dates=2030-01-02",
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(
        preview["fires"],
        json!([
            "2030-01-01T12:00:00.000Z",
            "2030-01-03T12:00:00.000Z",
            "2030-01-04T12:00:00.000Z"
        ])
    );
    let ruled = stack
        .job(
            "ruled",
            "hello",
            json!({ "schedule_type": "CRON", "schedule_conf": "0 0 12 * * ?",
                    "schedule_rules": { "starts_at_ms": 1893456000000_i64,
                                        "exclude_dates": ["2030-01-03", "2030-01-02"] } }),
        )
        .await;
    let (_, fires) = api
        .get(&format!("/api/v1/jobs/{ruled}/next-fires?count=2"))
        .await;
    assert_eq!(
        fires,
        json!(["2030-01-01T12:00:00.000Z", "2030-01-04T12:00:00.000Z"])
    );
    let (_, saved) = api.get(&format!("/api/v1/jobs/{ruled}")).await;
    assert_eq!(
        saved["schedule_rules"]["exclude_dates"],
        json!(["2030-01-02", "2030-01-03"]),
        "stored sorted"
    );
    let (status, refused) = api
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/jobs/{ruled}"),
            Some(
                json!({ "name": "ruled", "module_digest": saved["module_digest"],
                         "schedule_rules": { "exclude_dates": ["someday"] } }),
            ),
        )
        .await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("schedule_rules")),
        "{refused}"
    );
    // Quartz's last-day and n-th-weekday forms, as a migrating xxl-job user
    // writes them.
    let (status, preview) = api
        .get("/api/v1/schedule-preview?schedule_conf=0%200%200%20L%202%20%3F&count=1")
        .await;
    assert_eq!(status, 200, "{preview}");
    let last = preview["fires"][0].as_str().unwrap();
    assert!(
        last.ends_with("-02-28T00:00:00.000Z") || last.ends_with("-02-29T00:00:00.000Z"),
        "{last}"
    );
    let (status, refused) = api
        .get("/api/v1/schedule-preview?schedule_conf=0%200%200%2015X%20*%20%3F")
        .await;
    assert_eq!(status, 422);
    let message = refused["message"].as_str().unwrap();
    assert!(message.contains("day-of-month field: \"15X\""), "{message}");
    for (query, field) in [
        ("schedule_conf=61%20*%20*%20*%20*%20%3F", "schedule_conf"),
        (
            "schedule_conf=*%20*%20*%20*%20*&time_zone=Mars/Olympus",
            "time_zone",
        ),
        ("schedule_type=HOURLY", "schedule_type"),
        ("schedule_type=FIX_RATE&schedule_conf=0", "schedule_conf"),
    ] {
        let (status, refused) = api.get(&format!("/api/v1/schedule-preview?{query}")).await;
        assert_eq!(
            (status, &refused["field"]),
            (422, &json!(field)),
            "{query}: {refused}"
        );
    }
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_job_says_who_and_why_and_resumes_by_itself() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    let api = &stack.api;
    let job = stack.started_minutely_hello().await;
    let path = format!("/api/v1/jobs/{job}/pause");
    let pause = |body: Value| api.call(reqwest::Method::POST, &path, Some(body));

    // Refused: an end in the past, a note too long.
    let (status, refused) = pause(json!({ "until_ms": start - 1 })).await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("until_ms")),
        "{refused}"
    );
    let (status, refused) = pause(json!({ "note": "x".repeat(1025) })).await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("note")),
        "{refused}"
    );

    // Paused for three minutes: no fire until its first one after that.
    let resume_at = start + 180_000;
    let (status, paused) =
        pause(json!({ "note": "database migration", "until_ms": resume_at })).await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(
        paused["pause"],
        json!({ "by": "operator token", "note": "database migration",
                "paused_at_ms": start, "until_ms": resume_at })
    );
    assert_eq!(paused["next_fire_at_ms"], resume_at + 60_000);
    clock.advance(Duration::from_secs(241));
    let first = until("the job resumes by itself", || async {
        api.runs(job).await.into_iter().next()
    })
    .await;
    assert_eq!(
        first.scheduled_at_ms,
        resume_at + 60_000,
        "nothing fired during the pause"
    );

    // Paused with no end: stopped until started, which clears the pause.
    let (_, paused) = pause(json!({ "note": "on hold" })).await;
    assert_eq!(
        (&paused["enabled"], &paused["pause"]["note"]),
        (&json!(false), &json!("on hold"))
    );
    assert!(paused["next_fire_at_ms"].is_null());
    let (_, fires) = api.get(&format!("/api/v1/jobs/{job}/next-fires")).await;
    assert_eq!(
        fires,
        json!([]),
        "a job paused with no end shows no next fire"
    );
    let started = api.api.start_job(job).await.unwrap();
    assert!(started.enabled && started.pause.is_none(), "{started:?}");
    stack.shutdown().await;
}

/// Overlap decided by the admin across executors: a job firing every
/// second whose runs sleep a minute, routed ROUND over two executors (so
/// no executor's block strategy sees two of its runs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_policies_hold_across_two_executors() {
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api;
    let data = tempfile::tempdir().unwrap();
    let mut config = ExecutorConfig::new(
        "127.0.0.1:0".parse().unwrap(),
        vec![stack.base.clone()],
        EXEC.into(),
        data.path().join("second"),
    );
    config.beat_interval = Duration::from_millis(300);
    let second = cronbox_executor::start(config).await.unwrap();
    until("both executors are alive", || async {
        let executors = api.api.executors().await.unwrap();
        (executors.iter().filter(|e| e.alive).count() == 2).then_some(())
    })
    .await;
    let job = |policy: &'static str| {
        stack.job(
            policy,
            "sleeper",
            json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "route": "ROUND",
                    "param": "60000", "timeout_ms": 120_000,
                    "schedule_rules": { "overlap": policy } }),
        )
    };
    let (skip, cancel, allow) = (
        job("SKIP").await,
        job("CANCEL_OTHER").await,
        job("ALLOW").await,
    );
    // BUFFER_ONE with runs of 2.5 s: the fire after a run waits for it,
    // the ones after that are skipped.
    let buffer = stack
        .job(
            "BUFFER_ONE",
            "sleeper",
            json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "route": "ROUND",
                    "param": "2500", "timeout_ms": 60_000,
                    "schedule_rules": { "overlap": "BUFFER_ONE" } }),
        )
        .await;
    for id in [skip, cancel, allow, buffer] {
        api.api.start_job(id).await.unwrap();
    }
    let ended_with = |runs: &[Run], text: &str| {
        runs.iter()
            .filter(|run| run.message.as_deref().is_some_and(|m| m.contains(text)))
            .count()
    };
    // SKIP: one run goes on, the fires after it are recorded as skipped.
    let runs = until("SKIP skips fires", || async {
        let runs = api.runs(skip).await;
        (ended_with(&runs, "overlap SKIP") >= 2).then_some(runs)
    })
    .await;
    let skipped: Vec<&Run> = runs
        .iter()
        .filter(|run| {
            run.message
                .as_deref()
                .is_some_and(|m| m.contains("overlap SKIP"))
        })
        .collect();
    assert!(
        skipped.iter().all(|run| run.status == RunStatus::Cancelled),
        "{runs:?}"
    );
    assert_eq!(
        runs.iter()
            .filter(|run| run.status == RunStatus::Dispatched)
            .count(),
        1,
        "one run at a time: {runs:?}"
    );
    // CANCEL_OTHER: each fire kills the run before it.
    let runs = until("CANCEL_OTHER kills the runs before", || async {
        let runs = api.runs(cancel).await;
        (runs
            .iter()
            .filter(|run| run.outcome.map(cronbox_api::RunOutcome::as_str) == Some("killed"))
            .count()
            >= 2)
            .then_some(runs)
    })
    .await;
    assert!(
        runs.iter()
            .filter(|run| run.status == RunStatus::Dispatched)
            .count()
            <= 2,
        "at most the newest run and one being killed: {runs:?}"
    );
    // ALLOW: runs pile up on both executors.
    let runs = until("ALLOW runs on both executors at once", || async {
        let runs = api.runs(allow).await;
        let executors: std::collections::BTreeSet<String> = runs
            .iter()
            .filter(|run| run.status == RunStatus::Dispatched)
            .filter_map(|run| run.executor.clone())
            .collect();
        (executors.len() == 2).then_some(runs)
    })
    .await;
    assert_eq!(ended_with(&runs, "overlap"), 0, "{runs:?}");
    let runs = until(
        "BUFFER_ONE runs a held fire after the run before it",
        || async {
            let runs = api.runs(buffer).await;
            let succeeded = runs
                .iter()
                .filter(|run| run.status == RunStatus::Success)
                .count();
            (succeeded >= 2 && ended_with(&runs, "overlap BUFFER_ONE") >= 1).then_some(runs)
        },
    )
    .await;
    let mut done: Vec<&Run> = runs
        .iter()
        .filter(|run| run.status == RunStatus::Success)
        .collect();
    done.sort_by_key(|run| run.started_at_ms);
    assert!(
        done[1].started_at_ms.unwrap() >= done[0].finished_at_ms.unwrap()
            && done[1].dispatched_at_ms.unwrap() - done[1].scheduled_at_ms >= 1_000,
        "the second waited for the first to end: {done:?}"
    );
    for id in [skip, cancel, allow, buffer] {
        api.api.stop_job(id).await.unwrap();
        api.api.kill_job(id).await.unwrap();
    }
    second.shutdown().await;
    stack.shutdown().await;
}

/// A day of a per-minute job backfilled at 100 runs a second of the
/// admin's clock: every instant once, a second backfill over the same
/// range adds nothing, a cancel stops the writing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_runs_each_past_instant_once_at_its_rate() {
    let start = next_whole_minute() - 60_000;
    let (stack, clock) = stack_on_manual_clock(start + 1).await;
    let api = &stack.api;
    let job = stack
        .job(
            "minutely",
            "hello",
            json!({ "schedule_type": "CRON", "schedule_conf": "0 * * * * ?",
                    "block_strategy": "DISCARD_LATER" }),
        )
        .await;
    let path = format!("/api/v1/jobs/{job}/backfill");
    let backfill = |from: i64, to: i64, per_second: i64| {
        api.call(
            reqwest::Method::POST,
            &path,
            Some(json!({ "from_ms": from, "to_ms": to, "per_second": per_second })),
        )
    };
    let progress = |id: i64| async move {
        let (status, backfill) = api.get(&format!("/api/v1/backfills/{id}")).await;
        assert_eq!(status, 200, "{backfill}");
        backfill
    };
    let written_is = |id: i64, written: i64| {
        let what = format!("backfill {id} has written {written}");
        async move {
            until(&what, || async move {
                let backfill = progress(id).await;
                (backfill["written"] == written).then_some(backfill)
            })
            .await
        }
    };

    // Refused: a range in the future, a rate past the maximum.
    let (status, refused) = backfill(start - 60_000, start + 600_000, 10).await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("to_ms")),
        "{refused}"
    );
    let (status, refused) = backfill(start - 60_000, start, 5_000).await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("per_second")),
        "{refused}"
    );

    let day = 86_400_000;
    let (status, first) = backfill(start - day, start, 100).await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(
        (&first["planned"], &first["status"]),
        (&json!(1440), &json!("running"))
    );
    let id = first["id"].as_i64().unwrap();
    // A second's worth, and no more until the admin's clock moves on.
    written_is(id, 100).await;
    assert_eq!(progress(id).await["written"], 100, "the rate holds");
    for second in 2..=15 {
        clock.advance(Duration::from_secs(1));
        written_is(id, (second * 100).min(1440)).await;
    }
    assert_eq!(progress(id).await["status"], "done");
    let mut runs: Vec<Run> = Vec::new();
    loop {
        let after = runs.last().map(|run| run.id);
        let page = api.api.job_runs(job, after, 1000).await.unwrap();
        if page.is_empty() {
            break;
        }
        runs.extend(page);
    }
    runs.retain(|run| run.kind == TriggerKind::Backfill);
    let instants: std::collections::BTreeSet<i64> =
        runs.iter().map(|run| run.scheduled_at_ms).collect();
    assert_eq!(
        (runs.len(), instants.len()),
        (1440, 1440),
        "each instant once"
    );
    assert!(
        instants
            .iter()
            .all(|at| at % 60_000 == 0 && *at > start - day && *at <= start)
    );

    // The same range again: every instant was run, none is written twice.
    let (_, again) = backfill(start - day / 2, start, 1_000).await;
    let again = again["id"].as_i64().unwrap();
    until("the second backfill is done", || async {
        (progress(again).await["status"] == "done").then_some(())
    })
    .await;
    assert_eq!(progress(again).await["written"], 0);

    // A cancel stops the writing.
    let (_, older) = backfill(start - 3 * day, start - 2 * day, 10).await;
    let older = older["id"].as_i64().unwrap();
    written_is(older, 10).await;
    let (status, cancelled) = api
        .call(
            reqwest::Method::DELETE,
            &format!("/api/v1/backfills/{older}"),
            None,
        )
        .await;
    assert_eq!((status, &cancelled["status"]), (200, &json!("cancelled")));
    clock.advance(Duration::from_secs(5));
    let (_, listed) = api.get(&format!("/api/v1/backfills?job={job}")).await;
    assert_eq!(listed.as_array().unwrap().len(), 3);
    assert_eq!(
        progress(older).await["written"],
        10,
        "nothing after the cancel"
    );
    api.api.kill_job(job).await.unwrap();
    stack.shutdown().await;
}

/// A tenant's shared calendar: every job naming it skips its dates; a
/// change reaches them at once; a name the tenant lacks is refused; another
/// tenant neither sees nor uses it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_calendar_skips_its_dates_for_each_job_naming_it() {
    let owned = stack(SchedulerConfig::default()).await;
    let stack = &owned;
    let api = &stack.api;
    let put = |dates: Value| {
        api.call(
            reqwest::Method::PUT,
            "/api/v1/calendars/holidays",
            Some(json!({ "dates": dates })),
        )
    };
    let (status, calendar) = put(json!(["2030-01-03", "2030-01-02", "2030-01-02"])).await;
    assert_eq!(status, 200, "{calendar}");
    assert_eq!(calendar["dates"], json!(["2030-01-02", "2030-01-03"]));
    let rules = json!({ "starts_at_ms": 1893456000000_i64, "calendars": ["holidays"] });
    let noon = |name: &'static str| {
        let rules = rules.clone();
        async move {
            stack
                .job(
                    name,
                    "hello",
                    json!({ "schedule_type": "CRON", "schedule_conf": "0 0 12 * * ?",
                            "schedule_rules": rules }),
                )
                .await
        }
    };
    let (first, second) = (noon("first").await, noon("second").await);
    let fires = |job: JobId| async move {
        api.get(&format!("/api/v1/jobs/{job}/next-fires?count=2"))
            .await
            .1
    };
    for job in [first, second] {
        assert_eq!(
            fires(job).await,
            json!(["2030-01-01T12:00:00.000Z", "2030-01-04T12:00:00.000Z"])
        );
    }
    let (_, preview) = api
        .get(
            "/api/v1/schedule-preview?schedule_conf=0%200%2012%20*%20*%20%3F&count=2\
             &starts_at_ms=1893456000000&calendars=holidays",
        )
        .await;
    assert_eq!(
        preview["fires"],
        json!(["2030-01-01T12:00:00.000Z", "2030-01-04T12:00:00.000Z"])
    );
    // A change reaches every job naming the calendar.
    put(json!(["2030-01-01"])).await;
    assert_eq!(
        fires(second).await,
        json!(["2030-01-02T12:00:00.000Z", "2030-01-03T12:00:00.000Z"])
    );
    // A name the tenant has no calendar of is refused.
    let spec = json!({ "name": "third", "module_digest": "0".repeat(64),
                       "schedule_rules": { "calendars": ["vacations"] } });
    let (status, refused) = api
        .call(reqwest::Method::POST, "/api/v1/jobs", Some(spec))
        .await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("schedule_rules")),
        "{refused}"
    );
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("no calendar \"vacations\"")
    );
    // Another tenant neither sees nor uses it.
    let other = tenant(stack, "other").await;
    let (_, theirs) = stack
        .call_as(&other, reqwest::Method::GET, "/api/v1/calendars", None)
        .await;
    assert_eq!(theirs, json!([]));
    let (status, _) = stack
        .call_as(
            &other,
            reqwest::Method::DELETE,
            "/api/v1/calendars/holidays",
            None,
        )
        .await;
    assert_eq!(status, 404);
    let (status, deleted) = api
        .call(reqwest::Method::DELETE, "/api/v1/calendars/holidays", None)
        .await;
    assert_eq!((status, &deleted["name"]), (200, &json!("holidays")));
    assert_eq!(
        fires(first).await,
        json!(["2030-01-01T12:00:00.000Z", "2030-01-02T12:00:00.000Z"])
    );
    owned.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_are_created_in_batches_all_or_none() {
    let stack = stack(SchedulerConfig::default()).await;
    let api = &stack.api;
    api.api
        .upload(jobs::bytes("hello"), Some("greeter"), &[])
        .await
        .unwrap();
    let spec = |name: String, conf: &str| {
        json!({
            "name": name, "module": "greeter",
            "schedule_type": "CRON", "schedule_conf": conf,
        })
    };
    let count = |answer: &Value| answer.as_array().map_or(0, Vec::len);

    // One bad schedule refuses the whole batch, naming the job's place.
    let mut batch: Vec<Value> = (0..5)
        .map(|i| spec(format!("b{i}"), "0 0 3 * * ?"))
        .collect();
    batch[3] = spec("bad".into(), "0 0 25 * * ?");
    let (status, refused) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs/batch",
            Some(json!({ "jobs": batch })),
        )
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["field"], "jobs[3].schedule_conf", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .starts_with("job 3 of the batch"),
        "{refused}"
    );
    let (_, listed) = stack.get("/api/v1/jobs").await;
    assert_eq!(count(&listed), 0, "nothing of a refused batch is stored");

    // A whole batch, started: ids in the batch's order, each with a next
    // fire; a batch past the quota of jobs is refused whole.
    let batch: Vec<JobSpec> = (0..300)
        .map(|i| serde_json::from_value(spec(format!("job-{i:03}"), "0 0 3 * * ?")).unwrap())
        .collect();
    let created = api
        .api
        .create_jobs(&JobBatch {
            jobs: batch.clone(),
            start: true,
        })
        .await
        .unwrap();
    assert_eq!((created.ids.len(), created.started), (300, 300));
    let (_, listed) = stack.get("/api/v1/jobs?limit=1000").await;
    let listed = listed.as_array().unwrap();
    assert_eq!(listed.len(), 300);
    for (id, job) in created.ids.iter().zip(listed) {
        assert_eq!(job["id"], id.0);
        assert_eq!(job["enabled"], true, "{job}");
        assert!(job["next_fire_at_ms"].as_i64().is_some(), "{job}");
    }
    assert_eq!(listed[7]["name"], "job-007");
    let set = stack
        .call(
            reqwest::Method::PUT,
            "/api/v1/tenants/default/quotas",
            Some(json!({ "jobs": 400 })),
        )
        .await;
    assert_eq!(set.0, 200, "{}", set.1);
    let refused = api
        .api
        .create_jobs(&JobBatch {
            jobs: batch[..101].to_vec(),
            start: false,
        })
        .await
        .unwrap_err();
    assert_eq!(refused.status(), Some(403), "{refused}");
    assert!(refused.to_string().contains("this adds 101"), "{refused}");
    let fits = api
        .api
        .create_jobs(&JobBatch {
            jobs: batch[..100].to_vec(),
            start: false,
        })
        .await
        .unwrap();
    assert_eq!((fits.ids.len(), fits.started), (100, 0));

    // At most 1,000 a batch.
    let (status, refused) = stack
        .call(
            reqwest::Method::POST,
            "/api/v1/jobs/batch",
            Some(json!({ "jobs": vec![spec("x".into(), "0 0 3 * * ?"); 1001] })),
        )
        .await;
    assert_eq!(
        (status, &refused["field"]),
        (422, &json!("jobs")),
        "{refused}"
    );
    stack.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn jobs_in_batches_and_name_searches_on_postgres() {
    let postgres = PostgresServer::start();
    let admin = cronbox_admin::start(AdminConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        database: Database::Url(postgres.create_database("batches")),
        api_token: API.into(),
        executor_token: EXEC.into(),
        scheduler: SchedulerConfig::default(),
        max_request_bytes: 16 << 20,
    })
    .await
    .unwrap();
    let api = AdminClient::new(format!("http://{}", admin.local_addr()), API);
    api.api
        .upload(jobs::bytes("hello"), Some("greeter"), &[])
        .await
        .unwrap();
    let spec = |name: String| -> JobSpec {
        serde_json::from_value(json!({
            "name": name, "module": "greeter",
            "schedule_type": "CRON", "schedule_conf": "0 0 3 * * ?",
        }))
        .unwrap()
    };
    // A batch with one bad schedule stores nothing; a good one stores all,
    // in its order, started.
    let mut refused: Vec<JobSpec> = (0..3).map(|i| spec(format!("no-{i}"))).collect();
    refused[1].schedule_conf = "0 0 25 * * ?".into();
    let error = api
        .api
        .create_jobs(&JobBatch {
            jobs: refused,
            start: false,
        })
        .await
        .unwrap_err();
    assert_eq!(error.status(), Some(422), "{error}");
    let batch: Vec<JobSpec> = (0..500)
        .map(|i| spec(format!("nightly-{i:03}-{}", ["export", "cleanup"][i % 2])))
        .collect();
    let created = create_started(&api, batch).await;
    assert_eq!((created.ids.len(), created.started), (500, 500));
    let names = |path: String| {
        let api = &api;
        async move {
            let (status, jobs) = api.get(&path).await;
            assert_eq!(status, 200, "{path}: {jobs}");
            jobs.as_array()
                .unwrap()
                .iter()
                .map(|job| job["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    let all = names("/api/v1/jobs?limit=1000".into()).await;
    assert_eq!(all.len(), 500, "nothing of the refused batch");
    assert_eq!(all[7], "nightly-007-cleanup");
    // A search by part of a name, in any letter case, paged by id.
    let found = names("/api/v1/jobs?search=7-CLEAN&limit=1000".into()).await;
    assert_eq!(
        found,
        (0..500)
            .filter(|i| i % 2 == 1 && i % 10 == 7)
            .map(|i| format!("nightly-{i:03}-cleanup"))
            .collect::<Vec<_>>()
    );
    let first = names("/api/v1/jobs?search=export&limit=100".into()).await;
    assert_eq!(first.len(), 100);
    let after = created.ids[first.len() * 2 - 2].0;
    let next = names(format!(
        "/api/v1/jobs?search=export&limit=100&after={after}"
    ))
    .await;
    assert_eq!(next.first().map(String::as_str), Some("nightly-200-export"));
    assert_eq!(
        names("/api/v1/jobs?search=%25".into()).await,
        [] as [String; 0]
    );
    admin.shutdown().await;
}

/// Uploads `hello` as module `greeter` and starts `count` jobs of `group`
/// running it at second 0 of every minute, created in one batch.
async fn start_minutely_jobs(api: &AdminClient, count: usize, group: &str) {
    api.api
        .upload(jobs::bytes("hello"), Some("greeter"), &[])
        .await
        .unwrap();
    let batch: Vec<JobSpec> = (0..count)
        .map(|i| {
            serde_json::from_value(json!({
                "name": format!("minutely-{i}"), "module": "greeter", "group": group,
                "schedule_type": "CRON", "schedule_conf": "0 * * * * ?",
            }))
            .unwrap()
        })
        .collect();
    assert_eq!(create_started(api, batch).await.started, count);
}

/// Creates `jobs` in one batch, started.
async fn create_started(api: &AdminClient, jobs: Vec<JobSpec>) -> cronbox_api::JobsCreated {
    api.api
        .create_jobs(&JobBatch { jobs, start: true })
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fires_due_together_reach_their_executor_in_batches() {
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    start_minutely_jobs(&stack.api, 200, "default").await;
    clock.advance(Duration::from_secs(60));
    let succeeded = until("the 200 fires succeed", || async {
        let (_, page) = stack.get("/api/v1/runs?status=success&limit=1000").await;
        let runs = page["runs"].as_array().map_or(0, Vec::len);
        (runs == 200).then_some(runs)
    })
    .await;
    assert_eq!(succeeded, 200);
    let metrics = stack
        .http
        .get(format!("http://{}/metrics", stack.executor.local_addr()))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let batches: u64 = metrics
        .lines()
        .find_map(|line| line.strip_prefix("cronbox_executor_run_batches_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    assert!(
        (1..200).contains(&batches),
        "200 fires of one instant went in {batches} requests"
    );
    stack.shutdown().await;
}

/// The value of the admin metric `name` (a counter or gauge without labels).
async fn admin_metric(stack: &Stack, name: &str) -> i64 {
    let text = stack.api.metrics().await;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no metric {name} in:\n{text}"))
}

/// How many runs are scheduled at `at_ms`.
async fn runs_scheduled_at(stack: &Stack, at_ms: i64) -> usize {
    let (status, page) = stack
        .get(&format!(
            "/api/v1/runs?from_ms={at_ms}&to_ms={}&limit=1000",
            at_ms + 1
        ))
        .await;
    assert_eq!(status, 200, "{page}");
    page["runs"].as_array().map_or(0, Vec::len)
}

/// The pre-read writes fires nearest first across jobs: with more jobs
/// than one claim takes and five seconds of fires due at once, every job's
/// fire of a second is written (given its run id) before any fire of the
/// next second. Claiming each job's five seconds in turn wrote the last
/// jobs' first fires after their dispatch time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pre_read_writes_every_jobs_nearest_fire_first() {
    /// More than a claim takes on SQLite (1,000 jobs), in two batches.
    const JOBS: usize = 1_200;
    let start = next_whole_minute();
    let (stack, clock) = stack_on_manual_clock(start).await;
    stack
        .api
        .api
        .upload(jobs::bytes("hello"), Some("greeter"), &[])
        .await
        .unwrap();
    // Every second of the next minute: nothing is due until the clock
    // moves, so both batches are claimed together.
    let next_minute = (start / 60_000 + 1) % 60;
    let specs: Vec<JobSpec> = (0..JOBS)
        .map(|i| {
            serde_json::from_value(json!({
                "name": format!("next-minute-{i}"), "module": "greeter",
                "schedule_type": "CRON", "schedule_conf": format!("* {next_minute} * * * ?"),
                "time_zone": "UTC",
            }))
            .unwrap()
        })
        .collect();
    for batch in specs.chunks(600) {
        assert_eq!(
            create_started(&stack.api, batch.to_vec()).await.started,
            600
        );
    }
    // The fires due are those at start + 60 s ..= start + 64 s; none is
    // sent, as the clock stands before the first.
    let first = start + 60_000;
    clock.advance(Duration::from_secs(59));
    // (id, second of the window) of every run in it, newest first.
    let written = until("five seconds of every job's fires are written", || async {
        let mut query = cronbox_api::RunQuery {
            from_ms: Some(first),
            to_ms: Some(first + 5_000),
            limit: Some(1000),
            ..Default::default()
        };
        let mut runs: Vec<(i64, i64)> = Vec::new();
        loop {
            let page = stack.api.api.runs(&query).await.unwrap();
            runs.extend(
                page.runs
                    .iter()
                    .map(|run| (run.id.0, (run.scheduled_at_ms - first) / 1_000)),
            );
            match page.next_before {
                Some(before) => query.before = Some(before),
                None => break,
            }
        }
        (runs.len() == JOBS * 5).then_some(runs)
    })
    .await;
    assert!(written.windows(2).all(|pair| pair[0].0 > pair[1].0));
    for second in 0..5 {
        let count = written.iter().filter(|(_, at)| *at == second).count();
        assert_eq!(count, JOBS, "second {second}");
    }
    // Newest first, so the seconds never rise down the list: a later
    // second's fire written before an earlier second's would.
    let out_of_order = written
        .windows(2)
        .filter(|pair| pair[0].1 < pair[1].1)
        .count();
    assert_eq!(
        out_of_order, 0,
        "a later fire was written before a nearer one"
    );
}

/// An admin given fires faster than it can send them stops claiming new
/// ones once its dispatch backlog is full, instead of queueing them all in
/// memory; the fires it held back are claimed once the backlog drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_dispatch_backlog_holds_the_pre_read_until_it_drains() {
    // An "executor" that accepts connections and never answers: every
    // dispatch to it waits until its connection is closed.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent_address = format!("http://{}", silent.local_addr().unwrap());
    let holding = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let start = next_whole_minute();
    let clock = ManualClock::new(start);
    let stack = stack(SchedulerConfig {
        clock: clock.clone(),
        max_backlog: 50,
        dispatch_timeout: Duration::from_secs(60),
        ..SchedulerConfig::default()
    })
    .await;
    let registered = stack
        .http
        .post(format!("{}/api/v1/registry", stack.base))
        .bearer_auth(EXEC)
        .json(&json!({ "group": "silent", "address": silent_address }))
        .send()
        .await
        .unwrap();
    assert!(registered.status().is_success(), "{registered:?}");
    start_minutely_jobs(&stack.api, 100, "silent").await;

    // The first minute's 100 fires are claimed and wait on the silent
    // executor: twice the backlog allowed.
    let first = start + 60_000;
    clock.advance(Duration::from_secs(60));
    until("the first minute's fires wait in dispatch", || async {
        (admin_metric(&stack, "cronbox_admin_dispatch_backlog").await == 100).then_some(())
    })
    .await;
    assert_eq!(runs_scheduled_at(&stack, first).await, 100);
    // The second minute comes: its fires stay in their jobs.
    let second = start + 120_000;
    let held_before = admin_metric(&stack, "cronbox_admin_pre_reads_held_total").await;
    clock.advance(Duration::from_secs(60));
    until("a pre-read pass is held", || async {
        (admin_metric(&stack, "cronbox_admin_pre_reads_held_total").await > held_before)
            .then_some(())
    })
    .await;
    assert_eq!(
        runs_scheduled_at(&stack, second).await,
        0,
        "no fire is claimed while the backlog is full"
    );

    // The silent executor goes away: its dispatches fail, the backlog
    // drains, and the second minute's fires are claimed (on time by the
    // admin's clock, which has not moved).
    holding.abort();
    until("the second minute's fires are claimed", || async {
        (runs_scheduled_at(&stack, second).await == 100).then_some(())
    })
    .await;
    // The held fires were sent in their turn, not dropped: each of the
    // first minute's runs ended, failed by the executor's going.
    let failed = format!(
        "/api/v1/runs?status=failed&from_ms={first}&to_ms={}&limit=1000",
        first + 1
    );
    until("the first minute's runs end", || async {
        let (_, page) = stack.get(&failed).await;
        (page["runs"].as_array().map_or(0, Vec::len) == 100).then_some(())
    })
    .await;
    stack.shutdown().await;
}
