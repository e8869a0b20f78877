//! The admin's user API through HTTP, with an admin and an executor in this
//! process on loopback and real example jobs: job deletion, run listing
//! with filters and pages, job state read and edit, daily reports and run
//! retention, tenants' quotas at save time and at run time.
#![allow(clippy::unwrap_used)] // in tests a failed unwrap is a failed test

// The tests wait on fires, runs and processes, not the CPU: eight at a
// time keep two cores about two-thirds busy.
cronbox_tests::tests_at_a_time!(8);

use std::path::Path;
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
    stack_in(
        tempfile::tempdir().unwrap(),
        scheduler,
        max_module_bytes,
        configure,
    )
    .await
}

/// A stack started again on the data directory an earlier one left.
async fn restarted(data: tempfile::TempDir) -> Stack {
    stack_in(data, SchedulerConfig::default(), 16 << 20, |_| {}).await
}

async fn stack_in(
    data: tempfile::TempDir,
    scheduler: SchedulerConfig,
    max_module_bytes: usize,
    configure: impl FnOnce(&mut ExecutorConfig),
) -> Stack {
    let admin = cronbox_admin::start(AdminConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        database: Database::Sqlite(data.path().join("admin")),
        migrations: Default::default(),
        api_token: API.into(),
        executor_token: EXEC.into(),
        scheduler,
        max_request_bytes: max_module_bytes,
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
    // One compiled-module cache for every test's executor, kept under the
    // target directory as `cronbox up`'s tests keep theirs in the user's:
    // each test compiling the same example modules afresh was a quarter
    // of this binary's CPU. Entries are signed, keyed by digest and engine.
    let shared = Path::new(env!("CARGO_TARGET_TMPDIR")).join("admin-api-compiled");
    config.runtime.cache_dir = Some(shared.join("artifacts"));
    config.runtime.cache_key_file = Some(shared.join("artifact-cache.key"));
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
        http: cronbox_tls::client(),
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
        // The admin's shutdown closed its store: the data directory's lock
        // is free for the next admin at once.
        let lock = self._data.path().join("admin").join("admin.lock");
        if lock.exists() {
            let file = std::fs::File::options().write(true).open(&lock).unwrap();
            file.try_lock()
                .expect("the admin let go of its data directory when its shutdown returned");
        }
        self._data
    }
}

/// Creates tenant `name` as the operator; returns its first token.
/// A stand-in executor on loopback: it takes every run it is sent and
/// keeps the commands. Its address.
async fn stand_in_executor(
    sent: std::sync::Arc<std::sync::Mutex<Vec<cronbox_protocol::RunCommand>>>,
) -> String {
    let app = axum::Router::new()
        .route(
            "/api/v1/beat",
            axum::routing::post(|| async { axum::Json(json!({ "ok": true, "address": "" })) }),
        )
        .route(
            "/api/v1/run-batch",
            axum::routing::post(
                move |axum::Json(batch): axum::Json<cronbox_protocol::RunBatch>| {
                    let sent = sent.clone();
                    async move {
                        let answers = batch
                            .commands
                            .iter()
                            .map(|command| {
                                cronbox_protocol::RunAnswer::Answered(
                                    cronbox_protocol::RunResponse {
                                        run_id: command.trigger.run_id,
                                        accepted: true,
                                        refused: None,
                                    },
                                )
                            })
                            .collect();
                        sent.lock().unwrap().extend(batch.commands);
                        axum::Json(cronbox_protocol::RunBatchResponse { answers })
                    }
                },
            ),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    address
}

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

#[path = "admin_api/alarms.rs"]
mod alarms;
#[path = "admin_api/audit.rs"]
mod audit;
#[path = "admin_api/definitions.rs"]
mod definitions;
#[path = "admin_api/enrolled.rs"]
mod enrolled;
#[path = "admin_api/events.rs"]
mod events;
#[path = "admin_api/firing.rs"]
mod firing;
#[path = "admin_api/legacy.rs"]
mod legacy;
#[path = "admin_api/metrics.rs"]
mod metrics;
#[path = "admin_api/quotas.rs"]
mod quotas;
#[path = "admin_api/requests.rs"]
mod requests;
#[path = "admin_api/runs.rs"]
mod runs;
#[path = "admin_api/schedules.rs"]
mod schedules;
#[path = "admin_api/tenancy.rs"]
mod tenancy;
#[path = "admin_api/version_skew.rs"]
mod version_skew;
#[path = "admin_api/workflow_control.rs"]
mod workflow_control;
#[path = "admin_api/workflow_runs.rs"]
mod workflow_runs;
#[path = "admin_api/workflows.rs"]
mod workflows;
