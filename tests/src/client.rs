//! [`AdminClient`]: the admin's user API as the tests drive it: the typed
//! `cronbox-api` client ([`AdminClient::api`]) for what a user does, and
//! raw requests with their status and JSON for what a test checks about
//! HTTP itself (malformed bodies, error codes, limits); and [`until`],
//! which polls what a test waits for (an event's effect read back from the
//! admin) within a bound.

use std::future::Future;
use std::time::{Duration, Instant};

use cronbox_api::{Client, JobId, JobSpec, Run, RunId, RunQuery, RunStatus, TriggerRequest};
use reqwest::Method;
use serde_json::{Value, json};

/// How long a test waits for anything it polls.
pub const WAIT: Duration = Duration::from_secs(30);

/// The admin's user API at `base` as one token sees it.
#[derive(Debug, Clone)]
pub struct AdminClient {
    /// `http://host:port` of the admin.
    pub base: String,
    /// The token requests carry.
    pub token: String,
    pub http: reqwest::Client,
    /// The same admin and token through the typed client.
    pub api: Client,
}

/// The password the tests give user `name`.
pub fn test_password(name: &str) -> String {
    format!("{name}-password-1")
}

impl AdminClient {
    /// Adds user `name` of `tenant` with `role` and its [`test_password`]
    /// (this client being an operator's or the tenant's admin's).
    pub async fn add_user(&self, name: &str, tenant: &str, role: &str) {
        let (status, body) = self
            .call(
                Method::POST,
                "/api/v1/users",
                Some(json!({ "name": name, "tenant": tenant, "role": role,
                             "password": test_password(name) })),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }

    pub fn new(base: impl Into<String>, token: impl Into<String>) -> Self {
        AdminClient::through(base, token, cronbox_tls::client())
    }

    /// A client of `base` sending through `http` (one trusting a private
    /// CA, for an admin serving TLS).
    pub fn through(
        base: impl Into<String>,
        token: impl Into<String>,
        http: reqwest::Client,
    ) -> Self {
        let (base, token) = (base.into(), token.into());
        AdminClient {
            api: Client::with_http(&base, &token, http.clone()),
            base,
            token,
            http,
        }
    }

    /// The same admin as another token.
    pub fn with_token(&self, token: impl Into<String>) -> Self {
        AdminClient::new(self.base.clone(), token)
    }

    /// A request with an optional JSON body: the status and the answer (a
    /// JSON value, or the text as a string when it is not JSON).
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the admin answers");
        let status = response.status().as_u16();
        let text = response.text().await.expect("the answer is readable");
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path, None).await
    }

    /// Uploads component bytes to `/api/v1/modules{query}`.
    pub async fn upload(&self, query: &str, bytes: Vec<u8>) -> (u16, Value) {
        let response = self
            .http
            .post(format!("{}/api/v1/modules{query}", self.base))
            .bearer_auth(&self.token)
            .body(bytes)
            .send()
            .await
            .expect("the admin answers");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// Uploads `bytes` and creates a job named `name` running them, with
    /// the fields of `extra` (a [`JobSpec`]'s, as JSON); its id.
    pub async fn job(&self, name: &str, bytes: Vec<u8>, extra: Value) -> JobId {
        let uploaded = self.api.upload(bytes, None, &[]).await.expect("uploaded");
        let mut spec = json!({ "name": name, "module_digest": uploaded.digest });
        for (key, value) in extra.as_object().expect("extra is an object") {
            spec[key] = value.clone();
        }
        let spec: JobSpec = serde_json::from_value(spec).expect("a job definition");
        self.api.create_job(&spec).await.expect("job created").id
    }

    /// Triggers `job` with `request` (a [`TriggerRequest`]'s fields, as
    /// JSON); the run id.
    pub async fn trigger(&self, job: JobId, request: Value) -> RunId {
        let request: TriggerRequest = serde_json::from_value(request).expect("a trigger request");
        self.api
            .trigger(job, &request)
            .await
            .expect("triggered")
            .run_id
    }

    /// The admin's Prometheus metrics (no token needed).
    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}/metrics", self.base))
            .send()
            .await
            .expect("the admin answers")
            .text()
            .await
            .expect("the metrics are text")
    }

    pub async fn run(&self, id: RunId) -> Run {
        self.api.run(id).await.expect("the run")
    }

    /// Every run of `job`, oldest first.
    pub async fn runs(&self, job: JobId) -> Vec<Run> {
        self.api
            .job_runs(job, None, 1000)
            .await
            .expect("the job's runs")
    }

    /// Once no run scheduled before `before_ms` is still open (pending or
    /// dispatched): every result of that window has come back.
    pub async fn until_ended_before(&self, before_ms: i64) {
        until_within(
            Duration::from_secs(120),
            "the window's runs end",
            || async {
                for status in [RunStatus::Pending, RunStatus::Dispatched] {
                    let mut query = RunQuery {
                        status: Some(status),
                        to_ms: Some(before_ms),
                        limit: Some(1),
                        ..RunQuery::default()
                    };
                    // A page reads a bounded number of runs: none found
                    // there is not none at all while it has a cursor.
                    loop {
                        let page = self.api.runs(&query).await.ok()?;
                        if !page.runs.is_empty() {
                            return None;
                        }
                        match page.next_before {
                            Some(before) => query.before = Some(before),
                            None => break,
                        }
                    }
                }
                Some(())
            },
        )
        .await
    }

    /// Once a run of `job` scheduled at or after `from_ms` has succeeded:
    /// fires are running at least that far (waited for up to `within`).
    /// One job's runs, read through its index: cheap enough to ask every
    /// 50 ms while the admin is under the load being measured.
    pub async fn until_a_run_succeeded_from(&self, job: JobId, from_ms: i64, within: Duration) {
        until_within(within, "a run of the window's end succeeds", || async {
            let query = RunQuery {
                job: Some(job),
                status: Some(RunStatus::Success),
                from_ms: Some(from_ms),
                limit: Some(1),
                ..RunQuery::default()
            };
            (!self.api.runs(&query).await.ok()?.runs.is_empty()).then_some(())
        })
        .await
    }

    /// Once the admin counts an executor alive.
    pub async fn until_an_executor_is_alive(&self) {
        until("an executor registers", || async {
            let executors = self.api.executors().await.ok()?;
            executors.iter().any(|e| e.alive).then_some(())
        })
        .await
    }

    /// The run once it has ended.
    pub async fn ended(&self, id: RunId) -> Run {
        until_seen(WAIT, &format!("run {id} ends"), || async {
            let run = self.run(id).await;
            if run.status.is_open() {
                Err(run_summary(&run))
            } else {
                Ok(run)
            }
        })
        .await
    }
}

/// Polls `check` until it gives a value; panics naming `what` after
/// [`WAIT`]. Each poll reads the state the test waits for, so the wait
/// ends as soon as the event happened.
pub async fn until<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    until_within(WAIT, what, check).await
}

/// [`until`] with a deadline of its own, for events behind a slow step
/// (a large module's compilation).
pub async fn until_within<T, F, Fut>(wait: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    until_seen(wait, what, || {
        let polled = check();
        async move { polled.await.ok_or_else(String::new) }
    })
    .await
}

/// Polls `check` until it is `Ok`; after `wait`, panics naming `what` and
/// what the last poll saw instead (its `Err`, when not empty): a wait that
/// times out says where things stood, such as a run's status.
pub async fn until_seen<T, F, Fut>(wait: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = Instant::now() + wait;
    loop {
        let seen = match check().await {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            if seen.is_empty() {
                panic!("timed out waiting until {what}");
            }
            panic!("timed out waiting until {what}; last seen: {seen}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A run in a line: where it stands and how far it got, for a wait that
/// timed out on it.
pub fn run_summary(run: &Run) -> String {
    let at = |ms: Option<i64>| {
        ms.map_or_else(|| "-".to_owned(), |ms| (ms - run.created_at_ms).to_string())
    };
    format!(
        "run {} of job {} ({}, attempt {}): {:?} on {}, dispatched/started/finished at +{}/+{}/+{} ms, {:?} {}",
        run.id,
        run.job_id,
        run.kind,
        run.attempt,
        run.status,
        run.executor.as_deref().unwrap_or("no executor"),
        at(run.dispatched_at_ms),
        at(run.started_at_ms),
        at(run.finished_at_ms),
        run.outcome,
        run.message.as_deref().unwrap_or_default(),
    )
}
