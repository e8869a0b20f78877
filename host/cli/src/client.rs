//! A small client of the admin's user API (`/api/v1/...`), shared by
//! `cronbox up` and the management commands: bearer token, JSON in and out,
//! and the admin's error body (`code`, `message`, `field`) turned into a
//! readable error.

use anyhow::{Context as _, bail};
use serde_json::Value;

/// The admin API at `base` (e.g. `http://127.0.0.1:8080`).
#[derive(Debug, Clone)]
pub struct ApiClient {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl ApiClient {
    pub fn new(base: &str, token: &str) -> ApiClient {
        ApiClient {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            http: reqwest::Client::new(),
        }
    }

    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.http.get(self.url(path))).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send(self.http.post(self.url(path)).json(body)).await
    }

    pub async fn put(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.send(self.http.put(self.url(path)).json(body)).await
    }

    pub async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.send(self.http.delete(self.url(path))).await
    }

    /// Pushes a component as the next version of module `name`, with
    /// `labels`; returns the admin's answer (digest, version, jobs moved).
    pub async fn upload_named(
        &self,
        name: &str,
        labels: &[String],
        bytes: Vec<u8>,
    ) -> anyhow::Result<Value> {
        let mut query = vec![("name", name.to_owned())];
        if !labels.is_empty() {
            query.push(("labels", labels.join(",")));
        }
        self.send(
            self.http
                .post(self.url("/api/v1/modules"))
                .query(&query)
                .header("content-type", "application/wasm")
                .body(bytes),
        )
        .await
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> anyhow::Result<Value> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .with_context(|| format!("cannot reach the admin at {}", self.base))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .with_context(|| format!("the admin at {} broke off its answer", self.base))?;
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        if !status.is_success() {
            let message = body["message"].as_str().unwrap_or("(no message)");
            match body["field"].as_str() {
                Some(field) => bail!("the admin refused ({status}): {message} [field {field}]"),
                None => bail!("the admin refused ({status}): {message}"),
            }
        }
        Ok(body)
    }
}
