//! [`AdminClient`]: the admin's user API as the tests drive it, over HTTP
//! with a token, answers as JSON; and [`until`], which polls what a test
//! waits for (an event's effect read back from the admin) within a bound.

use std::future::Future;
use std::time::{Duration, Instant};

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
}

impl AdminClient {
    pub fn new(base: impl Into<String>, token: impl Into<String>) -> Self {
        AdminClient {
            base: base.into(),
            token: token.into(),
            http: reqwest::Client::new(),
        }
    }

    /// The same admin as another token.
    pub fn with_token(&self, token: impl Into<String>) -> Self {
        AdminClient {
            token: token.into(),
            ..self.clone()
        }
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
    /// the fields of `extra`; its id.
    pub async fn job(&self, name: &str, bytes: Vec<u8>, extra: Value) -> i64 {
        let (status, uploaded) = self.upload("", bytes).await;
        assert_eq!(status, 201, "{uploaded}");
        let mut spec = json!({ "name": name, "module_digest": uploaded["digest"] });
        for (key, value) in extra.as_object().expect("extra is an object") {
            spec[key] = value.clone();
        }
        let (status, job) = self.call(Method::POST, "/api/v1/jobs", Some(spec)).await;
        assert_eq!(status, 201, "{job}");
        job["id"].as_i64().expect("a job id")
    }

    /// Triggers `job` with `body`; the run id.
    pub async fn trigger(&self, job: i64, body: Value) -> i64 {
        let (status, answer) = self
            .call(
                Method::POST,
                &format!("/api/v1/jobs/{job}/trigger"),
                Some(body),
            )
            .await;
        assert_eq!(status, 202, "{answer}");
        answer["run_id"].as_i64().expect("a run id")
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

    pub async fn run(&self, id: i64) -> Value {
        self.get(&format!("/api/v1/runs/{id}")).await.1
    }

    /// Every run of `job`.
    pub async fn runs(&self, job: i64) -> Vec<Value> {
        let (status, runs) = self.get(&format!("/api/v1/jobs/{job}/runs")).await;
        assert_eq!(status, 200, "{runs}");
        runs.as_array().expect("a list of runs").clone()
    }

    /// The run once it has ended.
    pub async fn ended(&self, id: i64) -> Value {
        until(&format!("run {id} ends"), || async {
            let run = self.run(id).await;
            ended(&run).then_some(run)
        })
        .await
    }
}

/// Whether a run (as the API shows it) has ended.
pub fn ended(run: &Value) -> bool {
    matches!(
        run["status"].as_str(),
        Some("success" | "failed" | "cancelled")
    )
}

/// Polls `check` until it gives a value; panics naming `what` after
/// [`WAIT`]. Each poll reads the state the test waits for, so the wait
/// ends as soon as the event happened.
pub async fn until<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
