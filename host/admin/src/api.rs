//! The admin's HTTP API (axum).
//!
//! Executor-facing (executor token): `registry`, `registry-remove`,
//! `callback`, module content by digest. User-facing (API token): upload a
//! module; create, update, delete, start, stop and trigger jobs; preview
//! fires; read and edit a job's state; list runs by filter and page, read,
//! kill and follow them; daily reports; executor groups.
//! Errors are JSON [`ApiError`] bodies naming the field at fault.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use cronbox_protocol::{ApiError, CallbackBatch, Registration, admin_paths};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::jobs::{JobSpec, child_cycle, schedule_of};
use crate::scheduler::{Scheduler, now_ms};
use crate::store::{RunFilter, StoreError, status};

pub(crate) struct AdminState {
    pub(crate) scheduler: Arc<Scheduler>,
    pub(crate) api_token: String,
    pub(crate) executor_token: String,
}

pub(crate) fn router(state: Arc<AdminState>, max_module_bytes: usize) -> Router {
    let executors = Router::new()
        .route(admin_paths::REGISTRY, post(registry))
        .route(admin_paths::REGISTRY_REMOVE, post(registry_remove))
        .route(admin_paths::CALLBACK, post(callback))
        .route("/api/v1/modules/{digest}/content", get(module_content))
        .layer(middleware::from_fn_with_state(state.clone(), executor_auth));
    let users = Router::new()
        .route("/api/v1/modules", post(upload_module))
        .route("/api/v1/groups", get(list_groups))
        .route("/api/v1/groups/{name}", axum::routing::put(put_group))
        .route("/api/v1/jobs", post(create_job).get(list_jobs))
        .route(
            "/api/v1/jobs/{id}",
            get(get_job).put(update_job).delete(delete_job),
        )
        .route("/api/v1/jobs/{id}/state", get(get_state).put(put_state))
        .route("/api/v1/runs", get(list_runs))
        .route("/api/v1/reports", get(reports))
        .route("/api/v1/jobs/{id}/start", post(start_job))
        .route("/api/v1/jobs/{id}/stop", post(stop_job))
        .route("/api/v1/jobs/{id}/trigger", post(trigger_job))
        .route("/api/v1/jobs/{id}/next-fires", get(next_fires))
        .route("/api/v1/jobs/{id}/runs", get(job_runs))
        .route("/api/v1/runs/{id}", get(get_run))
        .route("/api/v1/runs/{id}/kill", post(kill_run))
        .route("/api/v1/runs/{id}/log", get(run_log))
        .layer(middleware::from_fn_with_state(state.clone(), user_auth));
    Router::new()
        .merge(executors)
        .merge(users)
        .fallback(|| async { Failure::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        .layer(DefaultBodyLimit::max(max_module_bytes))
        .with_state(state)
}

pub(crate) struct Failure {
    status: StatusCode,
    body: ApiError,
}

impl Failure {
    fn new(status: StatusCode, code: &str, message: impl Into<String>) -> Self {
        Failure {
            status,
            body: ApiError {
                code: code.to_owned(),
                message: message.into(),
                field: None,
            },
        }
    }

    fn field(mut self, field: &str) -> Self {
        self.body.field = Some(field.to_owned());
        self
    }
}

impl IntoResponse for Failure {
    fn into_response(self) -> Response {
        (self.status, Json(self.body)).into_response()
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        tracing::error!(%error, "store error");
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            error.to_string(),
        )
    }
}

pub(crate) struct ApiJson<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = Failure;

    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => {
                let code = match rejection {
                    JsonRejection::JsonSyntaxError(_) => "malformed_json",
                    JsonRejection::JsonDataError(_) => "invalid_request",
                    JsonRejection::MissingJsonContentType(_) => "unsupported_media_type",
                    _ => "bad_request",
                };
                Err(Failure::new(
                    rejection.status(),
                    code,
                    rejection.body_text(),
                ))
            }
        }
    }
}

fn check_token(request: &Request, expected: &str) -> Result<(), Failure> {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match presented {
        None => Err(Failure::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing token: send `Authorization: Bearer <token>`",
        )),
        Some(token) if bool::from(token.as_bytes().ct_eq(expected.as_bytes())) => Ok(()),
        Some(_) => Err(Failure::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong token",
        )),
    }
}

async fn executor_auth(
    State(state): State<Arc<AdminState>>,
    request: Request,
    next: Next,
) -> Response {
    match check_token(&request, &state.executor_token) {
        Ok(()) => next.run(request).await,
        Err(failure) => failure.into_response(),
    }
}

async fn user_auth(State(state): State<Arc<AdminState>>, request: Request, next: Next) -> Response {
    match check_token(&request, &state.api_token) {
        Ok(()) => next.run(request).await,
        Err(failure) => failure.into_response(),
    }
}

async fn registry(
    State(state): State<Arc<AdminState>>,
    ApiJson(registration): ApiJson<Registration>,
) -> Result<StatusCode, Failure> {
    state
        .scheduler
        .store()
        .registry_beat(&registration.group, &registration.address, now_ms())
        .await?;
    Ok(StatusCode::OK)
}

async fn registry_remove(
    State(state): State<Arc<AdminState>>,
    ApiJson(registration): ApiJson<Registration>,
) -> Result<StatusCode, Failure> {
    state
        .scheduler
        .store()
        .registry_remove(&registration.group, &registration.address)
        .await?;
    Ok(StatusCode::OK)
}

async fn callback(
    State(state): State<Arc<AdminState>>,
    ApiJson(batch): ApiJson<CallbackBatch>,
) -> Result<StatusCode, Failure> {
    state.scheduler.accept_results(batch.results).await?;
    Ok(StatusCode::OK)
}

async fn module_content(
    State(state): State<Arc<AdminState>>,
    Path(digest): Path<String>,
) -> Result<Vec<u8>, Failure> {
    state
        .scheduler
        .store()
        .module(&digest)
        .await?
        .ok_or_else(|| {
            Failure::new(
                StatusCode::NOT_FOUND,
                "unknown_module",
                format!("no module {digest}"),
            )
        })
}

async fn upload_module(
    State(state): State<Arc<AdminState>>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    if body.is_empty() {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_module",
            "the module is empty (0 bytes)",
        ));
    }
    if body.len() < 8 || &body[..4] != b"\0asm" {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_module",
            "not a WebAssembly binary: it does not start with the \\0asm magic",
        ));
    }
    if body[4..8] == [1, 0, 0, 0] {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_module",
            "this is a core WebAssembly module, not a component: build the job for wasm32-wasip2",
        ));
    }
    let digest = hex::encode(Sha256::digest(&body));
    state
        .scheduler
        .store()
        .put_module(&digest, &body, now_ms())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({ "digest": digest, "size": body.len() })),
    ))
}

async fn create_job(
    State(state): State<Arc<AdminState>>,
    ApiJson(spec): ApiJson<JobSpec>,
) -> Result<impl IntoResponse, Failure> {
    let (row, _) = spec.validate("default").map_err(|invalid| {
        Failure::new(StatusCode::BAD_REQUEST, "invalid_job", invalid.message).field(invalid.field)
    })?;
    let store = state.scheduler.store();
    if store.module(&row.module_digest).await?.is_none() {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_job",
            format!("no module {} was uploaded", row.module_digest),
        )
        .field("module_digest"));
    }
    for child in spec.children.iter() {
        if store.job(*child).await?.is_none() {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_job",
                format!("child job {child} does not exist"),
            )
            .field("children"));
        }
    }
    let id = store.insert_job(&row, now_ms()).await?;
    let job = store.job(id).await?;
    Ok((StatusCode::CREATED, Json(job)))
}

/// Replaces a job's definition. Children must exist and must not form a
/// cycle; a running job's next fire is recomputed from now.
async fn update_job(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
    ApiJson(spec): ApiJson<JobSpec>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    let current = store.job(id).await?.ok_or_else(|| unknown_job(id))?;
    let (row, schedule) = spec.validate(&current.tenant).map_err(|invalid| {
        Failure::new(StatusCode::BAD_REQUEST, "invalid_job", invalid.message).field(invalid.field)
    })?;
    if store.module(&row.module_digest).await?.is_none() {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_job",
            format!("no module {} was uploaded", row.module_digest),
        )
        .field("module_digest"));
    }
    let all = store.jobs().await?;
    for child in &spec.children {
        if !all.iter().any(|job| job.id == *child) {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_job",
                format!("child job {child} does not exist"),
            )
            .field("children"));
        }
    }
    if let Some(cycle) = child_cycle(id, &spec.children, &all) {
        let path: Vec<String> = cycle.iter().map(i64::to_string).collect();
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_job",
            format!("child jobs would form a cycle: {}", path.join(" → ")),
        )
        .field("children"));
    }
    let next = if current.enabled {
        schedule
            .first_fire(chrono::Utc::now())
            .map(|at| at.timestamp_millis())
    } else {
        None
    };
    store.update_job(id, &row, next, now_ms()).await?;
    state.scheduler.wake();
    Ok(Json(store.job(id).await?))
}

async fn list_jobs(State(state): State<Arc<AdminState>>) -> Result<impl IntoResponse, Failure> {
    Ok(Json(state.scheduler.store().jobs().await?))
}

async fn get_job(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let job = state.scheduler.store().job(id).await?;
    job.map(Json).ok_or_else(|| unknown_job(id))
}

fn unknown_job(id: i64) -> Failure {
    Failure::new(StatusCode::NOT_FOUND, "unknown_job", format!("no job {id}"))
}

async fn start_job(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    let job = store.job(id).await?.ok_or_else(|| unknown_job(id))?;
    let schedule = schedule_of(&job)
        .map_err(|error| Failure::new(StatusCode::BAD_REQUEST, "invalid_job", error.to_string()))?;
    let now = chrono::Utc::now();
    let Some(first) = schedule.first_fire(now) else {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "cannot_start",
            "a job with schedule NONE (or a one-shot in the past) cannot be started; trigger it instead",
        ));
    };
    store
        .set_enabled(id, true, Some(first.timestamp_millis()), now_ms())
        .await?;
    // Its first fire may come before the next pre-read pass.
    state.scheduler.wake();
    Ok(Json(store.job(id).await?))
}

async fn stop_job(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    if !store.set_enabled(id, false, None, now_ms()).await? {
        return Err(unknown_job(id));
    }
    Ok(Json(store.job(id).await?))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerRequest {
    #[serde(default)]
    param: Option<String>,
    /// Executor addresses for this run only (route strategy applied).
    #[serde(default)]
    addresses: Option<Vec<String>>,
}

async fn trigger_job(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    let request: TriggerRequest = if body.is_empty() {
        TriggerRequest::default()
    } else {
        serde_json::from_slice(&body).map_err(|error| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                error.to_string(),
            )
        })?
    };
    if request
        .param
        .as_ref()
        .is_some_and(|param| param.len() > crate::jobs::MAX_PARAM_BYTES)
    {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            "param is too long",
        )
        .field("param"));
    }
    if state.scheduler.store().job(id).await?.is_none() {
        return Err(unknown_job(id));
    }
    let run_id = state
        .scheduler
        .trigger(id, "manual", request.param, request.addresses)
        .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({ "run_id": run_id })),
    ))
}

#[derive(Debug, Deserialize)]
struct CountQuery {
    #[serde(default = "five")]
    count: usize,
}

fn five() -> usize {
    5
}

async fn next_fires(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
    Query(query): Query<CountQuery>,
) -> Result<impl IntoResponse, Failure> {
    let job = state
        .scheduler
        .store()
        .job(id)
        .await?
        .ok_or_else(|| unknown_job(id))?;
    let schedule = schedule_of(&job)
        .map_err(|error| Failure::new(StatusCode::BAD_REQUEST, "invalid_job", error.to_string()))?;
    let fires: Vec<String> = schedule
        .preview(chrono::Utc::now(), query.count.min(100))
        .into_iter()
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .collect();
    Ok(Json(fires))
}

async fn job_runs(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    Ok(Json(state.scheduler.store().runs_of_job(id).await?))
}

async fn get_run(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    state
        .scheduler
        .store()
        .run(id)
        .await?
        .map(Json)
        .ok_or_else(|| Failure::new(StatusCode::NOT_FOUND, "unknown_run", format!("no run {id}")))
}

async fn known_run(state: &AdminState, id: i64) -> Result<crate::store::RunRow, Failure> {
    state
        .scheduler
        .store()
        .run(id)
        .await?
        .ok_or_else(|| Failure::new(StatusCode::NOT_FOUND, "unknown_run", format!("no run {id}")))
}

async fn kill_run(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let run = known_run(&state, id).await?;
    if run.status != crate::store::status::DISPATCHED {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            "not_running",
            format!("run {id} is {}, not running", run.status),
        ));
    }
    let killed =
        state.scheduler.kill(&run).await.map_err(|error| {
            Failure::new(StatusCode::BAD_GATEWAY, "executor_unreachable", error)
        })?;
    Ok(Json(serde_json::json!({ "run_id": id, "killed": killed })))
}

#[derive(Debug, Deserialize)]
struct LogParams {
    #[serde(default)]
    offset: usize,
    #[serde(default = "thousand")]
    limit: usize,
}

fn thousand() -> usize {
    1000
}

/// A run's log by line offset: forwarded to its executor while it runs,
/// read from the store once it ended.
async fn run_log(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
    Query(params): Query<LogParams>,
) -> Result<impl IntoResponse, Failure> {
    let run = known_run(&state, id).await?;
    let limit = params.limit.min(5000);
    if run.status == crate::store::status::DISPATCHED {
        let page = state
            .scheduler
            .live_log(&run, params.offset, limit)
            .await
            .map_err(|error| {
                Failure::new(StatusCode::BAD_GATEWAY, "executor_unreachable", error)
            })?;
        return Ok(Json(page));
    }
    let stored = state
        .scheduler
        .store()
        .run_log(id)
        .await?
        .unwrap_or_default();
    let lines: Vec<cronbox_protocol::LogLine> = serde_json::from_str(&stored).unwrap_or_default();
    let start = params.offset.min(lines.len());
    let end = start.saturating_add(limit).min(lines.len());
    let finished = run.status != crate::store::status::PENDING;
    Ok(Json(cronbox_protocol::LogResponse {
        run_id: id as u64,
        lines: lines[start..end].to_vec(),
        next_offset: end,
        finished: finished && end == lines.len(),
    }))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct GroupSpec {
    /// `AUTO` (executors that register) or `MANUAL` (the listed addresses).
    address_type: String,
    #[serde(default)]
    addresses: Vec<String>,
}

async fn put_group(
    State(state): State<Arc<AdminState>>,
    Path(name): Path<String>,
    ApiJson(spec): ApiJson<GroupSpec>,
) -> Result<impl IntoResponse, Failure> {
    let kind = spec.address_type.to_ascii_uppercase();
    if kind != "AUTO" && kind != "MANUAL" {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_group",
            format!(
                "unknown address_type {:?}: use AUTO or MANUAL",
                spec.address_type
            ),
        )
        .field("address_type"));
    }
    if kind == "MANUAL" && spec.addresses.is_empty() {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_group",
            "a MANUAL group needs addresses",
        )
        .field("addresses"));
    }
    if let Some(bad) = spec.addresses.iter().find(|address| {
        !(address.starts_with("http://") || address.starts_with("https://"))
            || address.contains(',')
    }) {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_group",
            format!("address {bad:?} is not an http(s) URL"),
        )
        .field("addresses"));
    }
    state
        .scheduler
        .store()
        .put_group(&name, &kind, &spec.addresses)
        .await?;
    Ok(Json(
        serde_json::json!({ "name": name, "address_type": kind, "addresses": spec.addresses }),
    ))
}

async fn list_groups(State(state): State<Arc<AdminState>>) -> Result<impl IntoResponse, Failure> {
    let groups: Vec<serde_json::Value> = state
        .scheduler
        .store()
        .groups()
        .await?
        .into_iter()
        .map(|(name, kind, addresses)| serde_json::json!({ "name": name, "address_type": kind, "addresses": addresses }))
        .collect();
    Ok(Json(groups))
}

/// Deletes a job (its runs stay as history). Refused while another job
/// names it as a child.
async fn delete_job(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    store.job(id).await?.ok_or_else(|| unknown_job(id))?;
    let parents: Vec<String> = store
        .jobs()
        .await?
        .iter()
        .filter(|job| crate::jobs::children_of(job).contains(&id))
        .map(|job| format!("{} ({})", job.id, job.name))
        .collect();
    if !parents.is_empty() {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            "job_in_use",
            format!(
                "job {id} is a child of {}; remove it from their children first",
                parents.join(", ")
            ),
        ));
    }
    store.delete_job(id).await?;
    Ok(Json(serde_json::json!({ "deleted": id })))
}

/// Most runs in one page of `GET /api/v1/runs`.
const MAX_RUNS_PAGE: i64 = 1000;

/// Runs, newest first, filtered by `job`, `status`, `from_ms`, `to_ms`
/// (scheduled time), paged with `limit` and the `before` cursor that each
/// page returns as `next_before`.
async fn list_runs(
    State(state): State<Arc<AdminState>>,
    Query(params): Query<std::collections::HashMap<String, String>>,
) -> Result<impl IntoResponse, Failure> {
    let invalid = |field: &str, message: String| {
        Failure::new(StatusCode::BAD_REQUEST, "invalid_query", message).field(field)
    };
    let number = |field: &str| -> Result<Option<i64>, Failure> {
        params
            .get(field)
            .map(|text| {
                text.parse::<i64>().map_err(|_| {
                    invalid(field, format!("{field} must be an integer, got {text:?}"))
                })
            })
            .transpose()
    };
    if let Some(unknown) = params.keys().find(|key| {
        !["job", "status", "from_ms", "to_ms", "before", "limit"].contains(&key.as_str())
    }) {
        return Err(invalid(
            unknown,
            format!(
                "unknown parameter {unknown:?}: use job, status, from_ms, to_ms, before, limit"
            ),
        ));
    }
    let statuses = [
        status::PENDING,
        status::DISPATCHED,
        status::SUCCESS,
        status::FAILED,
    ];
    let run_status = params.get("status").cloned();
    if let Some(wanted) = &run_status
        && !statuses.contains(&wanted.as_str())
    {
        return Err(invalid(
            "status",
            format!(
                "unknown status {wanted:?}: use one of {}",
                statuses.join(", ")
            ),
        ));
    }
    let limit = number("limit")?.unwrap_or(100);
    if !(1..=MAX_RUNS_PAGE).contains(&limit) {
        return Err(invalid(
            "limit",
            format!("limit must be between 1 and {MAX_RUNS_PAGE}, got {limit}"),
        ));
    }
    let filter = RunFilter {
        job_id: number("job")?,
        status: run_status,
        from_ms: number("from_ms")?,
        to_ms: number("to_ms")?,
        before_id: number("before")?,
        limit,
    };
    let runs = state.scheduler.store().list_runs(&filter).await?;
    let next_before = (runs.len() as i64 == limit)
        .then(|| runs.last().map(|run| run.id))
        .flatten();
    Ok(Json(
        serde_json::json!({ "runs": runs, "next_before": next_before }),
    ))
}

/// Keys, values and entries an operator may write into a job's state.
const STATE_MAX_KEY_BYTES: usize = 256;
const STATE_MAX_VALUE_BYTES: usize = 64 * 1024;
const STATE_MAX_ENTRIES: usize = 1024;

async fn get_state(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    store.job(id).await?.ok_or_else(|| unknown_job(id))?;
    let values = store.job_state(id).await?;
    Ok(Json(serde_json::json!({ "job_id": id, "state": values })))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StateEdit {
    state: std::collections::HashMap<String, String>,
}

/// Replaces a job's durable state: what its next run will see.
async fn put_state(
    State(state): State<Arc<AdminState>>,
    Path(id): Path<i64>,
    ApiJson(edit): ApiJson<StateEdit>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    store.job(id).await?.ok_or_else(|| unknown_job(id))?;
    let invalid = |message: String| {
        Failure::new(StatusCode::BAD_REQUEST, "invalid_state", message).field("state")
    };
    if edit.state.len() > STATE_MAX_ENTRIES {
        return Err(invalid(format!(
            "{} entries; at most {STATE_MAX_ENTRIES}",
            edit.state.len()
        )));
    }
    for (key, value) in &edit.state {
        if key.is_empty() || key.len() > STATE_MAX_KEY_BYTES {
            return Err(invalid(format!(
                "key {key:?} must be 1 to {STATE_MAX_KEY_BYTES} bytes"
            )));
        }
        if value.len() > STATE_MAX_VALUE_BYTES {
            return Err(invalid(format!(
                "the value of {key:?} is {} bytes; at most {STATE_MAX_VALUE_BYTES}",
                value.len()
            )));
        }
    }
    store.replace_job_state(id, &edit.state).await?;
    Ok(Json(
        serde_json::json!({ "job_id": id, "state": edit.state }),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportQuery {
    /// First day, `YYYY-MM-DD` (default: six days before `to`).
    from: Option<String>,
    /// Last day, `YYYY-MM-DD` (default: today, UTC).
    to: Option<String>,
}

/// Run counts per day (refreshed by housekeeping every minute) and their
/// totals.
async fn reports(
    State(state): State<Arc<AdminState>>,
    query: Result<Query<ReportQuery>, axum::extract::rejection::QueryRejection>,
) -> Result<impl IntoResponse, Failure> {
    let Query(query) = query.map_err(|rejection| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            rejection.body_text(),
        )
    })?;
    let day = |field: &str, text: &str| {
        chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d").map_err(|_| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_query",
                format!("{field} must be a day as YYYY-MM-DD, got {text:?}"),
            )
            .field(field)
        })
    };
    let to = match &query.to {
        Some(text) => day("to", text)?,
        None => chrono::Utc::now().date_naive(),
    };
    let from = match &query.from {
        Some(text) => day("from", text)?,
        None => to - chrono::Duration::days(6),
    };
    let days = state
        .scheduler
        .store()
        .daily_reports(
            "default",
            &from.format("%Y-%m-%d").to_string(),
            &to.format("%Y-%m-%d").to_string(),
        )
        .await?;
    let total = |count: fn(&crate::store::DailyReport) -> i64| days.iter().map(count).sum::<i64>();
    let totals = serde_json::json!({
        "success": total(|day| day.success),
        "failed": total(|day| day.failed),
        "running": total(|day| day.running),
    });
    Ok(Json(serde_json::json!({ "days": days, "totals": totals })))
}
