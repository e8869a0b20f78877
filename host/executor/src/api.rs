//! The executor's HTTP API (axum): `beat`, `idle-beat`, `run`,
//! `run-batch` (several runs in one request, each answered as `run` would),
//! `kill`, `log`, `prepare` (compile a module ahead of its runs),
//! `/metrics`, and the probes `/livez` and `/readyz`. Every route but
//! those three needs the admins' bearer token
//! (the shared token, or an enrolled executor's admin proof), compared
//! in constant time; errors are JSON [`ApiError`] bodies.

use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, FromRequest, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use cronbox_protocol::{
    BeatResponse, ErrorCode, Failure, IdleBeatRequest, KillCommand, KillResponse, LogQuery,
    PrepareCommand, RunAnswer, RunBatch, RunBatchResponse, RunCommand, executor_paths,
};
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;

use crate::jobs::{Jobs, SubmitError};
use crate::metrics::Metrics;

pub(crate) struct ApiState {
    pub(crate) jobs: Jobs,
    pub(crate) metrics: Arc<Metrics>,
    /// What admins present: the shared token, or the proof an enrolled
    /// executor's token derives.
    pub(crate) admin_bearer: String,
    pub(crate) address: String,
    pub(crate) max_log_page: usize,
}

pub(crate) fn router(state: Arc<ApiState>, max_request_bytes: usize) -> Router {
    let authenticated = Router::new()
        .route(executor_paths::BEAT, post(beat))
        .route(executor_paths::IDLE_BEAT, post(idle_beat))
        .route(executor_paths::RUN, post(run))
        .route(executor_paths::RUN_BATCH, post(run_batch))
        .route(executor_paths::KILL, post(kill))
        .route(executor_paths::LOG, post(log))
        .route(executor_paths::PREPARE, post(prepare))
        .layer(middleware::from_fn_with_state(state.clone(), authenticate));
    Router::new()
        .merge(authenticated)
        .route(executor_paths::METRICS, get(metrics))
        .route(executor_paths::LIVEZ, get(livez))
        .route(executor_paths::HEALTHZ, get(livez))
        .route(executor_paths::READYZ, get(readyz))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(max_request_bytes))
        .with_state(state)
}

/// Liveness: 200 while the process serves (no token).
async fn livez() -> &'static str {
    "ok"
}

/// Readiness: 200 while runs are taken, 503 once a shutdown has begun (its
/// runs drain; an orchestrator sends no new traffic), no token.
async fn readyz(State(state): State<Arc<ApiState>>) -> Response {
    if state.jobs.is_closing() {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting down: draining runs",
        )
            .into_response();
    }
    "ready".into_response()
}

/// `Json<T>` whose rejections are [`Failure`]s naming what is wrong.
pub(crate) struct ApiJson<T>(T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = Failure;

    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        match Json::<T>::from_request(request, state).await {
            Ok(Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(Failure::from_json_rejection(rejection)),
        }
    }
}

async fn authenticate(
    State(state): State<Arc<ApiState>>,
    request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    match presented {
        None => Failure::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            "missing token: send `Authorization: Bearer <token>`",
        )
        .into_response(),
        Some(token) if bool::from(token.as_bytes().ct_eq(state.admin_bearer.as_bytes())) => {
            next.run(request).await
        }
        Some(_) => Failure::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            "wrong token",
        )
        .into_response(),
    }
}

async fn beat(State(state): State<Arc<ApiState>>) -> Json<BeatResponse> {
    Json(BeatResponse {
        ok: true,
        address: state.address.clone(),
    })
}

async fn idle_beat(
    State(state): State<Arc<ApiState>>,
    ApiJson(request): ApiJson<IdleBeatRequest>,
) -> impl IntoResponse {
    Json(state.jobs.idle_beat(request.job_id))
}

async fn run(
    State(state): State<Arc<ApiState>>,
    ApiJson(command): ApiJson<RunCommand>,
) -> Result<impl IntoResponse, Failure> {
    Ok(Json(submit(&state, command)?))
}

/// Each command submitted as `run` submits one, in order; a batch over
/// [`RunBatch::MAX`] is refused whole.
async fn run_batch(
    State(state): State<Arc<ApiState>>,
    ApiJson(batch): ApiJson<RunBatch>,
) -> Result<impl IntoResponse, Failure> {
    if batch.commands.len() > RunBatch::MAX {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidRequest,
            format!(
                "{} commands in one batch; at most {}",
                batch.commands.len(),
                RunBatch::MAX
            ),
        )
        .field("commands"));
    }
    state.metrics.run_batches.inc();
    let answers = batch
        .commands
        .into_iter()
        .map(|command| match submit(&state, command) {
            Ok(response) => RunAnswer::Answered(response),
            Err(failure) => {
                let (status, error) = failure.into_parts();
                RunAnswer::Failed {
                    status: status.as_u16(),
                    error,
                }
            }
        })
        .collect();
    Ok(Json(RunBatchResponse { answers }))
}

/// Queues or starts a run, or says why not as `run` answers it.
fn submit(state: &ApiState, command: RunCommand) -> Result<cronbox_protocol::RunResponse, Failure> {
    state.jobs.submit(command).map_err(|error| match error {
        error @ SubmitError::Duplicate(_) => Failure::new(
            StatusCode::CONFLICT,
            ErrorCode::DuplicateRun,
            error.to_string(),
        ),
        error @ SubmitError::Closing => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::ShuttingDown,
            error.to_string(),
        ),
        SubmitError::Invalid { field, message } => {
            Failure::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message).field(field)
        }
    })
}

async fn kill(
    State(state): State<Arc<ApiState>>,
    ApiJson(command): ApiJson<KillCommand>,
) -> impl IntoResponse {
    Json(KillResponse {
        killed: state.jobs.kill(command),
    })
}

async fn prepare(
    State(state): State<Arc<ApiState>>,
    ApiJson(command): ApiJson<PrepareCommand>,
) -> impl IntoResponse {
    Json(state.jobs.prepare(&command).await)
}

async fn log(
    State(state): State<Arc<ApiState>>,
    ApiJson(query): ApiJson<LogQuery>,
) -> Result<impl IntoResponse, Failure> {
    state
        .jobs
        .log(query, state.max_log_page)
        .map(Json)
        .ok_or_else(|| {
            Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownRun,
                format!("run {} is not known to this executor", query.run_id),
            )
        })
}

async fn metrics(State(state): State<Arc<ApiState>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        current_metrics(&state),
    )
}

/// The metrics as text, the gauges read from the runtime first (for a
/// scrape, and for an export by OTLP).
pub(crate) fn current_metrics(state: &ApiState) -> String {
    let runtime = state.jobs.runtime();
    let metrics = &state.metrics;
    let scrape = metrics
        .scrape
        .lock()
        .unwrap_or_else(|poison| poison.into_inner());
    metrics.pool_free.set(runtime.free_instance_slots() as i64);
    metrics.idle_instances.set(runtime.idle_instances() as i64);
    metrics
        .memory_budget_free
        .set(i64::try_from(runtime.free_memory_budget_bytes()).unwrap_or(i64::MAX));
    let evicted = runtime.instances_evicted();
    metrics
        .instances_evicted
        .inc_by(evicted.saturating_sub(metrics.instances_evicted.get()));
    metrics.read_resident_memory();
    metrics.copy_http(&runtime.http_stats());
    metrics
        .spool_results
        .set(i64::try_from(state.jobs.spooled_results()).unwrap_or(i64::MAX));
    drop(scrape);
    state.metrics.encode()
}

async fn not_found() -> Failure {
    Failure::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, "no such route")
}
