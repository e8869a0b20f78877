//! A typed client of the admin's user API: one method per route, requests
//! and answers as this crate's types, and refusals as [`ClientError`] with
//! the admin's [`ApiError`] (its code, message and field) intact.

use cronbox_protocol::{ApiError, ErrorCode, LogResponse};
use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::*;

mod audit;
mod enrolled;
mod tenants;
mod workflows;

pub use audit::AuditQuery;

/// Why a request did not give the answer asked for.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the admin at {base}: {source}")]
    Unreachable {
        base: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("the admin refused ({status}): {}{}", .error.message, field_note(.error))]
    Refused { status: u16, error: ApiError },
    #[error("the admin answered {status} with a body that is not {expected}: {reason}")]
    UnexpectedAnswer {
        status: u16,
        expected: &'static str,
        reason: String,
    },
}

/// The error of a non-2xx answer, from its body.
pub(crate) fn refusal(status: u16, bytes: &[u8]) -> ClientError {
    match serde_json::from_slice::<ApiError>(bytes) {
        Ok(error) => ClientError::Refused { status, error },
        Err(reason) => ClientError::UnexpectedAnswer {
            status,
            expected: "an error body",
            reason: format!("{reason}: {}", String::from_utf8_lossy(bytes)),
        },
    }
}

fn field_note(error: &ApiError) -> String {
    error
        .field
        .as_deref()
        .map_or_else(String::new, |field| format!(" [field {field}]"))
}

impl ClientError {
    /// The admin's error code, when it refused.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            ClientError::Refused { error, .. } => Some(error.code),
            _ => None,
        }
    }

    /// The HTTP status, when the admin answered.
    pub fn status(&self) -> Option<u16> {
        match self {
            ClientError::Refused { status, .. } | ClientError::UnexpectedAnswer { status, .. } => {
                Some(*status)
            }
            ClientError::Unreachable { .. } => None,
        }
    }
}

/// Which jobs `GET /api/v1/jobs` lists (every field narrows).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct JobQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The last id of the previous page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<JobId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// Which runs `GET /api/v1/runs` lists, newest first (every field
/// narrows).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RunQuery {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job: Option<JobId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<RunStatus>,
    /// Scheduled at or after (ms since the epoch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from_ms: Option<i64>,
    /// Scheduled before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<i64>,
    /// The `next_before` of the previous page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<RunId>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<u32>,
}

/// The admin's user API at `base` (e.g. `http://127.0.0.1:8080`), as the
/// holder of `token`.
#[derive(Debug, Clone)]
pub struct Client {
    base: String,
    token: String,
    http: reqwest::Client,
}

impl Client {
    /// A client trusting the system's roots (for an `https://` base).
    pub fn new(base: &str, token: &str) -> Client {
        Client::with_http(base, token, cronbox_tls::client())
    }

    /// A client sending through `http` (for one trusting a private CA:
    /// `cronbox_tls::client_builder`).
    pub fn with_http(base: &str, token: &str, http: reqwest::Client) -> Client {
        Client {
            base: base.trim_end_matches('/').to_owned(),
            token: token.to_owned(),
            http,
        }
    }

    /// The same admin as the holder of another token.
    pub fn with_token(&self, token: &str) -> Client {
        Client {
            token: token.to_owned(),
            ..self.clone()
        }
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    // Readiness and the operator's resources.

    pub async fn ready(&self) -> Result<Ready, ClientError> {
        self.call(Method::GET, "/readyz", None::<&()>).await
    }

    pub async fn executors(&self) -> Result<Vec<Executor>, ClientError> {
        self.call(Method::GET, "/api/v1/executors", None::<&()>)
            .await
    }

    pub async fn groups(&self) -> Result<Vec<Group>, ClientError> {
        self.call(Method::GET, "/api/v1/groups", None::<&()>).await
    }

    pub async fn put_group(&self, name: &str, spec: &GroupSpec) -> Result<Group, ClientError> {
        self.call(Method::PUT, &format!("/api/v1/groups/{name}"), Some(spec))
            .await
    }

    /// Sets the tenants that may put jobs in group `name` (the operator).
    pub async fn grant_group(&self, name: &str, tenants: &[String]) -> Result<Group, ClientError> {
        let body = GroupTenants {
            tenants: tenants.to_vec(),
        };
        self.call(
            Method::PUT,
            &format!("/api/v1/groups/{name}/tenants"),
            Some(&body),
        )
        .await
    }

    // Modules.

    /// Uploads a component: stored by digest, and with `name` the next
    /// version of that module (with `labels`).
    pub async fn upload(
        &self,
        bytes: Vec<u8>,
        name: Option<&str>,
        labels: &[String],
    ) -> Result<Uploaded, ClientError> {
        self.upload_noted(bytes, name, labels, "").await
    }

    /// [`Client::upload`] with a note on the new version (empty: none).
    pub async fn upload_noted(
        &self,
        bytes: Vec<u8>,
        name: Option<&str>,
        labels: &[String],
        note: &str,
    ) -> Result<Uploaded, ClientError> {
        let mut query = Vec::new();
        if !note.is_empty() {
            query.push(("note", note.to_owned()));
        }
        if let Some(name) = name {
            query.push(("name", name.to_owned()));
        }
        if !labels.is_empty() {
            query.push(("labels", labels.join(",")));
        }
        let request = self
            .request(Method::POST, "/api/v1/modules")
            .query(&query)
            .header("content-type", "application/wasm")
            .body(bytes);
        self.send(request).await
    }

    /// The latest version of each module the token sees.
    pub async fn modules(&self) -> Result<Vec<TenantModule>, ClientError> {
        self.call(Method::GET, "/api/v1/modules", None::<&()>).await
    }

    /// Every kept version of a module, newest first.
    pub async fn module_versions(&self, name: &str) -> Result<Vec<ModuleVersion>, ClientError> {
        let path = format!("/api/v1/modules/{name}/versions");
        self.call(Method::GET, &path, None::<&()>).await
    }

    pub async fn rollback(&self, name: &str, version: i64) -> Result<RolledBack, ClientError> {
        let path = format!("/api/v1/modules/{name}/rollback");
        self.call(Method::POST, &path, Some(&VersionChoice { version }))
            .await
    }

    /// Puts `label` on one version; the module's versions after.
    pub async fn label(
        &self,
        name: &str,
        label: &str,
        version: i64,
    ) -> Result<Vec<ModuleVersion>, ClientError> {
        let path = format!("/api/v1/modules/{name}/labels/{label}");
        self.call(Method::PUT, &path, Some(&VersionChoice { version }))
            .await
    }

    // Jobs.

    pub async fn create_job(&self, spec: &JobSpec) -> Result<Job, ClientError> {
        self.call(Method::POST, "/api/v1/jobs", Some(spec)).await
    }

    /// Creates up to [`JobBatch::MAX`] jobs in one request, all or none.
    pub async fn create_jobs(&self, batch: &JobBatch) -> Result<JobsCreated, ClientError> {
        self.call(Method::POST, "/api/v1/jobs/batch", Some(batch))
            .await
    }

    /// A page of jobs, each with its last run that was due.
    pub async fn jobs(&self, query: &JobQuery) -> Result<Vec<JobListed>, ClientError> {
        let request = self.request(Method::GET, "/api/v1/jobs").query(query);
        self.send(request).await
    }

    pub async fn job(&self, id: JobId) -> Result<Job, ClientError> {
        self.call(Method::GET, &format!("/api/v1/jobs/{id}"), None::<&()>)
            .await
    }

    pub async fn update_job(&self, id: JobId, spec: &JobSpec) -> Result<Job, ClientError> {
        self.call(Method::PUT, &format!("/api/v1/jobs/{id}"), Some(spec))
            .await
    }

    pub async fn delete_job(&self, id: JobId) -> Result<Deleted, ClientError> {
        self.call(Method::DELETE, &format!("/api/v1/jobs/{id}"), None::<&()>)
            .await
    }

    pub async fn start_job(&self, id: JobId) -> Result<Job, ClientError> {
        self.job_action(id, "start").await
    }

    pub async fn stop_job(&self, id: JobId) -> Result<Job, ClientError> {
        self.job_action(id, "stop").await
    }

    /// Pauses a job with a note, until `until_ms` or until started.
    pub async fn pause_job(&self, id: JobId, request: &PauseRequest) -> Result<Job, ClientError> {
        self.call(
            Method::POST,
            &format!("/api/v1/jobs/{id}/pause"),
            Some(request),
        )
        .await
    }

    /// Starts a backfill of a job over a past range.
    pub async fn backfill(
        &self,
        id: JobId,
        request: &BackfillRequest,
    ) -> Result<Backfill, ClientError> {
        self.call(
            Method::POST,
            &format!("/api/v1/jobs/{id}/backfill"),
            Some(request),
        )
        .await
    }

    /// Cancels a backfill.
    pub async fn cancel_backfill(&self, id: i64) -> Result<Backfill, ClientError> {
        self.call(
            Method::DELETE,
            &format!("/api/v1/backfills/{id}"),
            None::<&()>,
        )
        .await
    }

    pub async fn kill_job(&self, id: JobId) -> Result<JobKilled, ClientError> {
        self.job_action(id, "kill").await
    }

    pub async fn trigger(
        &self,
        id: JobId,
        request: &TriggerRequest,
    ) -> Result<Triggered, ClientError> {
        let path = format!("/api/v1/jobs/{id}/trigger");
        self.call(Method::POST, &path, Some(request)).await
    }

    /// The job's next `count` fire instants (RFC 3339, UTC).
    pub async fn next_fires(&self, id: JobId, count: usize) -> Result<Vec<String>, ClientError> {
        let path = format!("/api/v1/jobs/{id}/next-fires?count={count}");
        self.call(Method::GET, &path, None::<&()>).await
    }

    /// Whether the admin would send a job's alarms to webhook `url` (a
    /// refusal is an error naming `alarm_url`).
    pub async fn alarm_check(&self, url: &str) -> Result<AlarmCheck, ClientError> {
        let request = self
            .request(Method::GET, "/api/v1/alarm-check")
            .query(&[("url", url)]);
        self.send(request).await
    }

    /// A page of the job's runs, oldest first, after the run `after`.
    pub async fn job_runs(
        &self,
        id: JobId,
        after: Option<RunId>,
        limit: u32,
    ) -> Result<Vec<Run>, ClientError> {
        let mut query = vec![("limit", limit.to_string())];
        if let Some(after) = after {
            query.push(("after", after.to_string()));
        }
        let request = self
            .request(Method::GET, &format!("/api/v1/jobs/{id}/runs"))
            .query(&query);
        self.send(request).await
    }

    pub async fn state(&self, id: JobId) -> Result<JobStateBody, ClientError> {
        let path = format!("/api/v1/jobs/{id}/state");
        self.call(Method::GET, &path, None::<&()>).await
    }

    pub async fn put_state(
        &self,
        id: JobId,
        edit: &StateEdit,
    ) -> Result<JobStateBody, ClientError> {
        let path = format!("/api/v1/jobs/{id}/state");
        self.call(Method::PUT, &path, Some(edit)).await
    }

    // Runs.

    pub async fn runs(&self, query: &RunQuery) -> Result<RunPage, ClientError> {
        let request = self.request(Method::GET, "/api/v1/runs").query(query);
        self.send(request).await
    }

    pub async fn run(&self, id: RunId) -> Result<Run, ClientError> {
        self.call(Method::GET, &format!("/api/v1/runs/{id}"), None::<&()>)
            .await
    }

    pub async fn kill_run(&self, id: RunId) -> Result<RunKilled, ClientError> {
        let path = format!("/api/v1/runs/{id}/kill");
        self.call(Method::POST, &path, None::<&()>).await
    }

    /// The run's log lines from line `offset` on.
    pub async fn log(&self, id: RunId, offset: usize) -> Result<LogResponse, ClientError> {
        let path = format!("/api/v1/runs/{id}/log?offset={offset}");
        self.call(Method::GET, &path, None::<&()>).await
    }

    /// Daily run counts for the days `from..=to` (`YYYY-MM-DD`; defaults:
    /// the last seven days).
    pub async fn reports(
        &self,
        from: Option<&str>,
        to: Option<&str>,
    ) -> Result<Report, ClientError> {
        let query: Vec<(&str, &str)> = [("from", from), ("to", to)]
            .into_iter()
            .filter_map(|(key, value)| value.map(|value| (key, value)))
            .collect();
        let request = self.request(Method::GET, "/api/v1/reports").query(&query);
        self.send(request).await
    }

    async fn job_action<T: DeserializeOwned>(
        &self,
        id: JobId,
        action: &str,
    ) -> Result<T, ClientError> {
        let path = format!("/api/v1/jobs/{id}/{action}");
        self.call(Method::POST, &path, None::<&()>).await
    }

    pub(crate) fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
    }

    async fn call<B: Serialize + ?Sized, T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&B>,
    ) -> Result<T, ClientError> {
        let mut request = self.request(method, path);
        if let Some(body) = body {
            request = request.json(body);
        }
        self.send(request).await
    }

    pub(crate) async fn send<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> Result<T, ClientError> {
        let unreachable = |source| ClientError::Unreachable {
            base: self.base.clone(),
            source,
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status().as_u16();
        let bytes = response.bytes().await.map_err(unreachable)?;
        if !(200..300).contains(&status) {
            return Err(refusal(status, &bytes));
        }
        serde_json::from_slice(&bytes).map_err(|reason| ClientError::UnexpectedAnswer {
            status,
            expected: std::any::type_name::<T>(),
            reason: reason.to_string(),
        })
    }
}
