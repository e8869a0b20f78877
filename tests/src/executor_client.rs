//! An executor's HTTP API as the tests drive it: the executor token on
//! every request, answers decoded, failures shown with the body.

use cronbox_protocol::{RunCommand, RunResponse, executor_paths};
use serde::Serialize;

/// A client of one executor at `base` (`http://host:port`).
#[derive(Debug, Clone)]
pub struct ExecutorClient {
    pub base: String,
    token: String,
    http: reqwest::Client,
}

impl ExecutorClient {
    pub fn new(base: impl Into<String>, token: impl Into<String>) -> Self {
        ExecutorClient {
            base: base.into(),
            token: token.into(),
            http: cronbox_tls::client(),
        }
    }

    /// `body` as JSON to `path`, with the token.
    pub async fn post(&self, path: &str, body: &impl Serialize) -> reqwest::Response {
        self.http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .expect("the executor answers")
    }

    /// Sends `command`; panics unless the executor answered 2xx.
    pub async fn run(&self, command: &RunCommand) -> RunResponse {
        let response = self.post(executor_paths::RUN, command).await;
        let status = response.status();
        let text = response.text().await.expect("the answer is readable");
        assert!(status.is_success(), "{status}: {text}");
        serde_json::from_str(&text).expect("a run response")
    }

    /// The `/metrics` text.
    pub async fn metrics(&self) -> String {
        self.http
            .get(format!("{}{}", self.base, executor_paths::METRICS))
            .send()
            .await
            .expect("the executor answers")
            .text()
            .await
            .expect("the metrics are readable")
    }

    /// The value of the unlabelled metric `name`.
    pub async fn metric(&self, name: &str) -> u64 {
        let text = self.metrics().await;
        text.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .parse()
            .unwrap_or_else(|_| panic!("{name} is not a number in {text}"))
    }
}
