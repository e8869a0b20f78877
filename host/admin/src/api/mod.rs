//! The admin's HTTP API (axum).
//!
//! Executor-facing (executor token): `registry`, `registry-remove`,
//! `callback`, module content by digest. User-facing (a bearer token, or a
//! session cookie whose changes carry its CSRF token; each caller has a
//! role): upload a module; create, update, delete, start, stop, pause,
//! trigger and backfill jobs; preview schedules; read and edit a job's
//! state; list runs by filter and page, read, kill and follow them; daily
//! reports and the dashboard; calendars; executor groups; users, sessions
//! and tokens. Errors are JSON [`ApiError`] bodies naming the field at
//! fault.
//!
//! One file per resource (`executors`, `modules`, `tenants`, `jobs`,
//! `runs`, `groups`, `secrets`, `users`); this one holds the route table,
//! authentication (`Caller`) and the error body (`Failure`).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, Extension, FromRequest, Path, Query, Request, State};
use axum::handler::Handler;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, on};
use axum::{Json, Router};
use cronbox_api::Role;
use cronbox_protocol::{ApiError, CallbackBatch, ErrorCode, Registration, admin_paths};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use subtle::ConstantTimeEq;

use crate::jobs::{JobSpec, schedule_of};
use crate::scheduler::Scheduler;
use crate::service::{self, ServiceError};
use crate::store::{JobId, JobRow, RunFilter, RunId, RunRow, RunStatus, StoreError};

pub mod bodies;
mod executors;

mod groups;
mod jobs;
mod modules;
mod runs;
mod secrets;
mod tenants;
mod users;

use executors::*;
use groups::*;
use jobs::*;
use modules::*;
use runs::*;

pub(crate) use jobs::MAX_NEXT_FIRES;
pub(crate) use runs::MAX_LOG_PAGE;
use secrets::*;
use tenants::*;
use users::*;

pub(crate) struct AdminState {
    pub(crate) scheduler: Arc<Scheduler>,
    /// The operator token.
    pub(crate) api_token: String,
    pub(crate) executor_token: String,
    /// Largest module accepted, bytes.
    pub(crate) max_module_bytes: usize,
    /// Versions kept per module name.
    pub(crate) keep_versions: usize,
    /// Failed logins, to slow password guessing.
    pub(crate) logins: service::users::LoginThrottle,
}

/// Routes declared together with their method, so that the table the
/// OpenAPI document is checked against is the router's own.
struct Routes {
    router: Router<Arc<AdminState>>,
    table: Vec<(&'static str, &'static str)>,
}

impl Routes {
    fn new() -> Routes {
        Routes {
            router: Router::new(),
            table: Vec::new(),
        }
    }

    fn add<H, T>(
        mut self,
        method: &'static str,
        filter: MethodFilter,
        path: &'static str,
        handler: H,
    ) -> Routes
    where
        H: Handler<T, Arc<AdminState>>,
        T: 'static,
    {
        self.table.push((method, path));
        self.router = self.router.route(path, on(filter, handler));
        self
    }

    fn get<H: Handler<T, Arc<AdminState>>, T: 'static>(self, path: &'static str, h: H) -> Routes {
        self.add("get", MethodFilter::GET, path, h)
    }

    fn post<H: Handler<T, Arc<AdminState>>, T: 'static>(self, path: &'static str, h: H) -> Routes {
        self.add("post", MethodFilter::POST, path, h)
    }

    fn put<H: Handler<T, Arc<AdminState>>, T: 'static>(self, path: &'static str, h: H) -> Routes {
        self.add("put", MethodFilter::PUT, path, h)
    }

    fn delete<H: Handler<T, Arc<AdminState>>, T: 'static>(
        self,
        path: &'static str,
        h: H,
    ) -> Routes {
        self.add("delete", MethodFilter::DELETE, path, h)
    }
}

/// Routes without a token.
fn open_routes() -> Routes {
    Routes::new()
        .get("/metrics", metrics)
        .get("/readyz", readyz)
        .get("/api/v1/openapi.json", openapi)
        .post("/api/v1/session", login)
}

/// Routes every authenticated caller may use, whatever its role, on
/// itself: its session, its tokens, its password.
fn self_routes() -> Routes {
    Routes::new()
        .get("/api/v1/session", session)
        .delete("/api/v1/session", logout)
        .get("/api/v1/tokens", list_tokens)
        .post("/api/v1/tokens", create_user_token)
        .delete("/api/v1/tokens/{id}", revoke_user_token)
        .put("/api/v1/users/{name}/password", set_password)
}

/// Routes for executors (executor token).
/// Largest body of a JSON request (job definitions, state edits, ...).
pub(crate) const JSON_BODY_BYTES: usize = 1 << 20;

/// Largest body of a batch of jobs (`POST /api/v1/jobs/batch`): room for
/// its most jobs with a few KiB each.
pub(crate) const JOB_BATCH_BODY_BYTES: usize = 16 << 20;

/// Largest callback body: a batch of results (an executor cuts each
/// result to 1.5 MiB and bounds its batches at 1 MiB).
pub(crate) const CALLBACK_BODY_BYTES: usize = 16 << 20;

fn executor_routes() -> Routes {
    Routes::new()
        .post(admin_paths::REGISTRY, registry)
        .post(admin_paths::REGISTRY_REMOVE, registry_remove)
        .post(
            admin_paths::CALLBACK,
            callback.layer(DefaultBodyLimit::max(CALLBACK_BODY_BYTES)),
        )
        .get("/api/v1/modules/{digest}/content", module_content)
}

/// Routes for users (a tenant token or the operator token); an upload may
/// be `max_module_bytes`, every other body [`JSON_BODY_BYTES`].
fn user_routes(max_module_bytes: usize) -> Routes {
    Routes::new()
        .post(
            "/api/v1/modules",
            // Room for a multipart envelope around the largest module.
            upload_module.layer(DefaultBodyLimit::max(max_module_bytes + (64 << 10))),
        )
        .get("/api/v1/modules", list_modules)
        .get("/api/v1/modules/{name}/versions", list_module_versions)
        .post("/api/v1/modules/{name}/rollback", rollback_module)
        .put("/api/v1/modules/{name}/labels/{label}", label_module)
        .post("/api/v1/tenants", create_tenant)
        .get("/api/v1/tenants", list_tenants)
        .post("/api/v1/tenants/{name}/tokens", create_token)
        .delete("/api/v1/tenants/{name}/tokens/{id}", revoke_token)
        .get("/api/v1/tenants/{name}/quotas", get_quotas)
        .put("/api/v1/tenants/{name}/quotas", put_quotas)
        .get("/api/v1/secrets", list_secrets)
        .put("/api/v1/secrets/{name}", put_secret)
        .delete("/api/v1/secrets/{name}", delete_secret)
        .get("/api/v1/users", list_users)
        .post("/api/v1/users", create_user)
        .delete("/api/v1/users/{name}", remove_user)
        .get("/api/v1/tenants/{name}/http-ceiling", get_http_ceiling)
        .put("/api/v1/tenants/{name}/http-ceiling", put_http_ceiling)
        .get("/api/v1/groups", list_groups)
        .get("/api/v1/executors", list_executors)
        .put("/api/v1/groups/{name}", put_group)
        .post("/api/v1/jobs", create_job)
        .post(
            "/api/v1/jobs/batch",
            create_jobs.layer(DefaultBodyLimit::max(JOB_BATCH_BODY_BYTES)),
        )
        .get("/api/v1/jobs", list_jobs)
        .get("/api/v1/jobs/{id}", get_job)
        .put("/api/v1/jobs/{id}", update_job)
        .delete("/api/v1/jobs/{id}", delete_job)
        .post("/api/v1/jobs/{id}/start", start_job)
        .post("/api/v1/jobs/{id}/stop", stop_job)
        .post("/api/v1/jobs/{id}/pause", pause_job)
        .post("/api/v1/jobs/{id}/backfill", backfill_job)
        .get("/api/v1/backfills", list_backfills)
        .get("/api/v1/calendars", list_calendars)
        .put("/api/v1/calendars/{name}", put_calendar)
        .delete("/api/v1/calendars/{name}", delete_calendar)
        .get("/api/v1/backfills/{id}", get_backfill)
        .delete("/api/v1/backfills/{id}", cancel_backfill)
        .post("/api/v1/jobs/{id}/trigger", trigger_job)
        .post("/api/v1/jobs/{id}/kill", kill_job)
        .get("/api/v1/jobs/{id}/next-fires", next_fires)
        .get("/api/v1/schedule-preview", schedule_preview)
        .get("/api/v1/jobs/{id}/runs", job_runs)
        .get("/api/v1/jobs/{id}/state", get_state)
        .put("/api/v1/jobs/{id}/state", put_state)
        .get("/api/v1/runs", list_runs)
        .get("/api/v1/runs/{id}", get_run)
        .post("/api/v1/runs/{id}/kill", kill_run)
        .get("/api/v1/runs/{id}/log", run_log)
        .get("/api/v1/reports", reports)
        .get("/api/v1/dashboard", dashboard)
}

/// Every route the admin serves, as (method, path): what the OpenAPI
/// document is checked against.
#[cfg(test)]
pub(crate) fn route_table() -> Vec<(&'static str, &'static str)> {
    [
        open_routes(),
        executor_routes(),
        self_routes(),
        user_routes(0),
    ]
    .into_iter()
    .flat_map(|routes| routes.table)
    .collect()
}

pub(crate) fn router(state: Arc<AdminState>, max_module_bytes: usize) -> Router {
    let executors = executor_routes()
        .router
        .layer(middleware::from_fn_with_state(state.clone(), executor_auth));
    let users = user_routes(max_module_bytes)
        .router
        .layer(middleware::from_fn_with_state(state.clone(), user_auth));
    let selves = self_routes()
        .router
        .layer(middleware::from_fn_with_state(state.clone(), self_auth));
    open_routes()
        .router
        .merge(crate::console::routes())
        .merge(executors)
        .merge(selves)
        .merge(users)
        .fallback(|| async {
            Failure::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, "no such route")
        })
        .layer(DefaultBodyLimit::max(JSON_BODY_BYTES))
        .layer(middleware::from_fn(refuse_nul_in_uri))
        .layer(middleware::from_fn(errors_as_json))
        .with_state(state)
}

/// Refuses a request whose path or query holds `%00`: decoded, a name in
/// the path (a secret's, a user's) or a query's text (a search) would hold
/// U+0000, which PostgreSQL's text refuses — a 422 saying where (a query's
/// `field` is the parameter), on either engine, instead of a 500 from the
/// database.
async fn refuse_nul_in_uri(request: Request, next: Next) -> Response {
    const NUL: &str = "%00";
    let uri = request.uri();
    let refusal = if uri.path().contains(NUL) {
        Some(Failure::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::InvalidRequest,
            "the path holds %00 (U+0000), which no name may hold",
        ))
    } else {
        uri.query()
            .and_then(|query| query.split('&').find(|pair| pair.contains(NUL)))
            .map(|pair| {
                let name = pair.split_once('=').map_or(pair, |(name, _)| name);
                Failure::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    ErrorCode::InvalidQuery,
                    format!("{name}: holds %00 (U+0000), which no text may hold"),
                )
                .field(name)
            })
    };
    match refusal {
        Some(failure) => failure.into_response(),
        None => next.run(request).await,
    }
}

pub(crate) struct Failure {
    status: StatusCode,
    body: ApiError,
}

impl Failure {
    fn new(status: StatusCode, code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            status,
            body: ApiError {
                code,
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

impl From<ServiceError> for Failure {
    fn from(error: ServiceError) -> Self {
        match error {
            ServiceError::InvalidJob { field, message } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidJob,
                message,
            )
            .field(field),
            refused @ ServiceError::InvalidJobInBatch { index, field, .. } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidJob,
                refused.to_string(),
            )
            .field(&format!("jobs[{index}].{field}")),
            in_use @ ServiceError::JobInUse { .. } => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::JobInUse,
                in_use.to_string(),
            ),
            ServiceError::InvalidGroup { field, message } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidGroup,
                message,
            )
            .field(field),
            ServiceError::InvalidModule { field, message } => {
                let failure = Failure::new(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    ErrorCode::InvalidModule,
                    message,
                );
                match field {
                    Some(field) => failure.field(field),
                    None => failure,
                }
            }
            unknown @ ServiceError::UnknownSecret(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownSecret,
                unknown.to_string(),
            ),
            in_use @ ServiceError::SecretInUse { .. } => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::SecretInUse,
                in_use.to_string(),
            ),
            disabled @ ServiceError::SecretsDisabled => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::SecretsDisabled,
                disabled.to_string(),
            ),
            ServiceError::InvalidUser { field, message } => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidUser,
                message,
            )
            .field(field),
            exists @ ServiceError::UserExists(_) => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::UserExists,
                exists.to_string(),
            )
            .field("name"),
            unknown @ ServiceError::UnknownUser(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownUser,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownModule(_) => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownModule,
                unknown.to_string(),
            ),
            unknown @ ServiceError::UnknownVersion { .. } => Failure::new(
                StatusCode::NOT_FOUND,
                ErrorCode::UnknownModule,
                unknown.to_string(),
            )
            .field("version"),
            ServiceError::ModuleTooLarge(message) => Failure::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::ModuleTooLarge,
                message,
            ),
            invalid @ ServiceError::InvalidTenant(_) => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidTenant,
                invalid.to_string(),
            )
            .field("name"),
            exists @ ServiceError::TenantExists(_) => Failure::new(
                StatusCode::CONFLICT,
                ErrorCode::TenantExists,
                exists.to_string(),
            ),
            ServiceError::InvalidState(message) => Failure::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                ErrorCode::InvalidState,
                message,
            )
            .field("state"),
            ServiceError::QuotaExceeded(exceeded) => Failure::new(
                StatusCode::FORBIDDEN,
                ErrorCode::QuotaExceeded,
                exceeded.to_string(),
            )
            .field(exceeded.quota.as_str()),
            ServiceError::Store(error) => error.into(),
        }
    }
}

impl From<StoreError> for Failure {
    fn from(error: StoreError) -> Self {
        tracing::error!(%error, "store error");
        // The detail (database text) stays in the admin's log.
        Failure::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::Internal,
            "internal error; the admin's log has the detail",
        )
    }
}

/// A JSON request body (`Content-Type: application/json`), read by
/// [`decode_json`]. No text in it may hold U+0000: what a caller sends is
/// stored, and PostgreSQL's text refuses that character (a 422 naming
/// where it is, on either engine, rather than a 500 from the database).
pub(crate) struct ApiJson<T>(T);

/// An executor's callback: read like [`ApiJson`], except that its text —
/// guests' messages and state, reported as they were — may hold U+0000
/// (the store writes messages with U+FFFD in its place and ends a run
/// whose state changes hold it `state_unstorable`).
pub(crate) struct CallbackJson<T>(T);

impl<S: Send + Sync, T: DeserializeOwned + Serialize> FromRequest<S> for ApiJson<T> {
    type Rejection = Failure;

    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        let value: Value = json_body(request, state).await?;
        refuse_text_with_nul(&value)?;
        decode_json(value).map(ApiJson)
    }
}

impl<S: Send + Sync, T: DeserializeOwned + Serialize> FromRequest<S> for CallbackJson<T> {
    type Rejection = Failure;

    async fn from_request(request: Request, state: &S) -> Result<Self, Failure> {
        let body: Box<RawValue> = json_body(request, state).await?;
        let text = body.get();
        // Executors write their callbacks as `T` is read: straight into
        // `T`, without a `Value` built and walked first (at 8,000 runs/s
        // that was ~5 % of the bench's samples). Only a body that does not
        // read so, or that may hold an integer past `i64` (19 digits or
        // more, which `T`'s `u64`s would take where the document refuses
        // it), goes through `decode_json`, which says what is wrong.
        if text.starts_with('{')
            && !has_long_number(text)
            && let Ok(decoded) = serde_json::from_str::<T>(text)
        {
            return Ok(CallbackJson(decoded));
        }
        let value = serde_json::from_str(text).map_err(|error| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                ErrorCode::MalformedJson,
                error.to_string(),
            )
        })?;
        decode_json(value).map(CallbackJson)
    }
}

/// Whether the JSON `text` holds a number of 19 digits in a row or more:
/// where an integer past `i64::MAX` (19 digits) may be. Digits inside
/// strings do not count: no field of a callback reads a number from a
/// string, and a receipt's or a digest's 64 hex digits hold 19 decimal
/// ones in a row about one time in 420 — with both in every result,
/// counting them sent one callback of 50 results in five the long way.
fn has_long_number(text: &str) -> bool {
    const LONGEST_SHORT_RUN: usize = 18;
    let mut run = 0;
    let mut in_string = false;
    let mut escaped = false;
    text.bytes().any(|byte| {
        if in_string {
            match byte {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            return false;
        }
        in_string = byte == b'"';
        run = if byte.is_ascii_digit() { run + 1 } else { 0 };
        run > LONGEST_SHORT_RUN
    })
}

#[cfg(test)]
mod tests {
    use super::has_long_number;

    #[test]
    fn long_numbers_are_found_outside_strings_only() {
        let nineteen = "1234567890123456789";
        assert!(has_long_number(&format!(r#"{{"run_id":{nineteen}}}"#)));
        assert!(has_long_number(&format!(r#"{{"a":[1,-{nineteen}]}}"#)));
        assert!(!has_long_number(r#"{"run_id":123456789012345678}"#));
        assert!(!has_long_number(&format!(r#"{{"receipt":"{nineteen}"}}"#)));
        // An escaped quote does not end a string; an escaped backslash
        // before a quote does.
        assert!(!has_long_number(&format!(r#"{{"a":"\"{nineteen}"}}"#)));
        assert!(has_long_number(&format!(r#"{{"a":"\\","b":{nineteen}}}"#)));
        assert!(!has_long_number(&format!(r#"{{"{nineteen}":1}}"#)));
    }
}

/// A request's body read as `B` (a `Value`, or the text of any JSON value),
/// refused with the reason it cannot be read.
async fn json_body<S: Send + Sync, B: DeserializeOwned>(
    request: Request,
    state: &S,
) -> Result<B, Failure> {
    Json::<B>::from_request(request, state)
        .await
        .map(|Json(value)| value)
        .map_err(|rejection| {
            let status = rejection.status();
            let code = match rejection {
                JsonRejection::JsonSyntaxError(_) => ErrorCode::MalformedJson,
                JsonRejection::MissingJsonContentType(_) => ErrorCode::UnsupportedMediaType,
                _ if status == StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
                _ => ErrorCode::BadRequest,
            };
            Failure::new(status, code, rejection.body_text())
        })
}

/// A request body as `T`. Every request body is one JSON object; every
/// integer in it that `T` reads is a signed 64-bit one (as the document
/// says), and may be written with a zero fraction (`5.0`), as JSON
/// Schema's `integer` allows. A body of the wrong shape is a 400
/// `invalid_request` whose `field` is the path to the part that is wrong.
fn decode_json<T: DeserializeOwned + Serialize>(mut value: Value) -> Result<T, Failure> {
    let shape_error = |path: &str, message: String| {
        let failure = Failure::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidRequest, message);
        if path.is_empty() || path == "." {
            failure
        } else {
            failure.field(path)
        }
    };
    if !value.is_object() {
        return Err(shape_error("", "the body must be a JSON object".to_owned()));
    }
    integral_floats_as_integers(&mut value);
    // Only a body holding such an integer somewhere is checked again.
    let has_wide_integer = integer_past_i64(&value, &mut String::new()).is_some();
    let decoded: T = serde_path_to_error::deserialize(value).map_err(|error| {
        let path = error.path().to_string();
        shape_error(&path, format!("{path}: {}", error.inner()))
    })?;
    // What was read, written back: the fields `T` ignores are gone.
    let mut path = String::new();
    if let Some(number) = has_wide_integer
        .then(|| serde_json::to_value(&decoded).ok())
        .flatten()
        .and_then(|read| integer_past_i64(&read, &mut path))
    {
        return Err(shape_error(
            &path,
            format!("{path}: {number} is past the largest integer {}", i64::MAX),
        ));
    }
    Ok(decoded)
}

/// Rewrites every number with a zero fraction that fits an `i64` (`5.0`)
/// as that integer.
fn integral_floats_as_integers(value: &mut Value) {
    match value {
        Value::Number(number) => {
            if let Some(float) = number.as_f64().filter(|_| number.is_f64())
                && float.fract() == 0.0
                && float >= i64::MIN as f64
                && float < i64::MAX as f64
            {
                *value = Value::from(float as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(integral_floats_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(integral_floats_as_integers),
        _ => {}
    }
}

/// The first integer past `i64::MAX`, with `path` left at it
/// (`results[0].run_id`).
fn integer_past_i64(value: &Value, path: &mut String) -> Option<serde_json::Number> {
    first_in_json(value, path, &|value| match value {
        Value::Number(number) if number.is_u64() && number.as_i64().is_none() => {
            Some(number.clone())
        }
        _ => None,
    })
}

/// A 422 naming where the body's first text holding U+0000 is.
fn refuse_text_with_nul(body: &Value) -> Result<(), Failure> {
    let mut path = String::new();
    let Some(what) = text_with_nul(body, &mut path) else {
        return Ok(());
    };
    let place = if path.is_empty() { "the body" } else { &path };
    let failure = Failure::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::InvalidRequest,
        format!("{place}: {what} holds U+0000 (NUL), which no text may hold"),
    );
    Err(if path.is_empty() {
        failure
    } else {
        failure.field(&path)
    })
}

/// Where the first text holding U+0000 is: `path` is left at the value
/// (`config.key`), or at the object whose key holds it; the answer says
/// which ("the value" or "a key").
fn text_with_nul(value: &Value, path: &mut String) -> Option<&'static str> {
    first_in_json(value, path, &|value| match value {
        Value::String(text) if text.contains('\0') => Some("the value"),
        Value::Object(fields) if fields.keys().any(|key| key.contains('\0')) => Some("a key"),
        _ => None,
    })
}

/// The first value (depth first, the value itself before what it holds)
/// that `found` answers for, with `path` left at it.
fn first_in_json<T>(
    value: &Value,
    path: &mut String,
    found: &dyn Fn(&Value) -> Option<T>,
) -> Option<T> {
    if let Some(answer) = found(value) {
        return Some(answer);
    }
    // Each step appends to `path`; a step that finds nothing takes its
    // part off again.
    let length = path.len();
    let within = |path: &mut String, item: &Value| {
        let answer = first_in_json(item, path, found);
        if answer.is_none() {
            path.truncate(length);
        }
        answer
    };
    match value {
        Value::Array(items) => items.iter().enumerate().find_map(|(index, item)| {
            path.push_str(&format!("[{index}]"));
            within(path, item)
        }),
        Value::Object(fields) => fields.iter().find_map(|(name, field)| {
            if length > 0 {
                path.push('.');
            }
            path.push_str(name);
            within(path, field)
        }),
        _ => None,
    }
}

/// A JSON body that may be left out (then `T::default()`), read like
/// [`ApiJson`] otherwise.
fn optional_json<T: DeserializeOwned + Serialize + Default>(body: &[u8]) -> Result<T, Failure> {
    if body.is_empty() {
        return Ok(T::default());
    }
    let value = serde_json::from_slice(body).map_err(|error| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            ErrorCode::MalformedJson,
            error.to_string(),
        )
    })?;
    refuse_text_with_nul(&value)?;
    decode_json(value)
}

/// The query parameters of a listing: only the `known` names, numbers
/// parsed, a page size within bounds; every refusal names the parameter.
pub(crate) struct ListQuery {
    params: std::collections::HashMap<String, String>,
}

impl ListQuery {
    /// Refuses any parameter not in `known`.
    fn new(
        params: std::collections::HashMap<String, String>,
        known: &[&str],
    ) -> Result<ListQuery, Failure> {
        if let Some(unknown) = params.keys().find(|key| !known.contains(&key.as_str())) {
            return Err(ListQuery::invalid(
                unknown,
                format!("unknown parameter {unknown:?}: use {}", known.join(", ")),
            ));
        }
        Ok(ListQuery { params })
    }

    fn invalid(field: &str, message: String) -> Failure {
        Failure::new(StatusCode::BAD_REQUEST, ErrorCode::InvalidQuery, message).field(field)
    }

    fn text(&self, field: &str) -> Option<String> {
        self.params.get(field).cloned()
    }

    fn number<T: std::str::FromStr>(&self, field: &str) -> Result<Option<T>, Failure> {
        self.params
            .get(field)
            .map(|text| {
                text.parse::<T>().map_err(|_| {
                    ListQuery::invalid(field, format!("{field} must be an integer, got {text:?}"))
                })
            })
            .transpose()
    }

    /// `limit`, `default` when absent, refused outside 1..=`max`.
    fn limit(&self, default: i64, max: i64) -> Result<i64, Failure> {
        self.bounded("limit", default, 1, max)
    }

    /// The integer `field`, `default` when absent, refused outside
    /// `min..=max` (the bounds the OpenAPI document states).
    fn bounded(&self, field: &str, default: i64, min: i64, max: i64) -> Result<i64, Failure> {
        let value = self.number::<i64>(field)?.unwrap_or(default);
        if !(min..=max).contains(&value) {
            return Err(ListQuery::invalid(
                field,
                format!("{field} must be between {min} and {max}, got {value}"),
            ));
        }
        Ok(value)
    }
}

/// Answers every error as JSON, as the document says: axum's own
/// rejections (a path segment or query string that does not parse, a
/// method the route does not serve) are plain text, and become an
/// [`ApiError`] carrying that text. Other headers (`Allow`) are kept.
async fn errors_as_json(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/json"));
    if is_json || !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let code = match status {
        StatusCode::NOT_FOUND => ErrorCode::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => ErrorCode::UnsupportedMediaType,
        StatusCode::UNAUTHORIZED => ErrorCode::Unauthorized,
        status if status.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::BadRequest,
    };
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 16 << 10)
        .await
        .map(|bytes| String::from_utf8_lossy(&bytes).trim().to_owned())
        .unwrap_or_default();
    let message = if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        text
    };
    let (json_parts, json_body) = Failure::new(status, code, message)
        .into_response()
        .into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.extend(json_parts.headers);
    Response::from_parts(parts, json_body)
}

/// The bearer token of a request.
fn bearer(request: &Request) -> Result<&str, Failure> {
    bearer_in(request.headers())
}

/// The bearer token of a request's headers.
fn bearer_in(headers: &axum::http::HeaderMap) -> Result<&str, Failure> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .ok_or_else(|| {
            Failure::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthorized,
                "missing token: send `Authorization: Bearer <token>`",
            )
        })
}

fn wrong_token() -> Failure {
    Failure::new(
        StatusCode::UNAUTHORIZED,
        ErrorCode::Unauthorized,
        "wrong token",
    )
}

fn same_token(presented: &str, expected: &str) -> bool {
    bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

async fn executor_auth(
    State(state): State<Arc<AdminState>>,
    request: Request,
    next: Next,
) -> Response {
    match bearer(&request) {
        Ok(token) if same_token(token, &state.executor_token) => next.run(request).await,
        Ok(_) => wrong_token().into_response(),
        Err(failure) => failure.into_response(),
    }
}

/// The operator's own tenant (objects it creates belong to it).
pub(crate) const DEFAULT_TENANT: &str = "default";

/// Who is calling the user API: a user (through its session or one of
/// its tokens), a tenant's token, or the operator token.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The tenant whose objects it sees and creates (`default` for the
    /// operator).
    tenant: String,
    /// What it may do; [`Role::Operator`] sees every tenant's objects.
    role: Role,
    /// The user behind the request, if any.
    user: Option<String>,
    /// The CSRF token of the session the request came with, if it came
    /// with one.
    csrf: Option<String>,
}

impl Caller {
    fn operator(&self) -> bool {
        self.role == Role::Operator
    }

    /// Who made a change, as recorded with it: the user's name, else
    /// which kind of token.
    fn who(&self) -> String {
        match &self.user {
            Some(user) => user.clone(),
            None if self.operator() => "operator token".to_owned(),
            None => "tenant token".to_owned(),
        }
    }

    /// Whether the caller may see an object of `tenant`. Objects it may not
    /// see are answered 404, as if they did not exist.
    fn sees(&self, tenant: &str) -> bool {
        self.operator() || self.tenant == tenant
    }

    /// The tenant to restrict listings to (`None` for the operator).
    fn only_tenant(&self) -> Option<String> {
        (!self.operator()).then(|| self.tenant.clone())
    }

    /// [`Caller::require_operator`] for one field of a request.
    fn require_operator_for(&self, field: &str, what: &str) -> Result<(), Failure> {
        self.require_operator(what)
            .map_err(|failure| failure.field(field))
    }

    fn require_operator(&self, what: &str) -> Result<(), Failure> {
        self.require(Role::Operator, what)
    }

    /// Refuses (403) a caller whose role does not include `role`.
    fn require(&self, role: Role, what: &str) -> Result<(), Failure> {
        if self.role.includes(role) {
            Ok(())
        } else {
            Err(Failure::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                format!(
                    "{what} needs the {role} role; this caller is a {}",
                    self.role
                ),
            ))
        }
    }

    /// The calling user's name, refusing (403) a token no user made.
    fn require_user(&self, what: &str) -> Result<&str, Failure> {
        self.user.as_deref().ok_or_else(|| {
            Failure::new(
                StatusCode::FORBIDDEN,
                ErrorCode::Forbidden,
                format!("{what} needs a user: log in, or use a token a user made"),
            )
        })
    }
}

/// The session cookie's name.
pub(crate) const SESSION_COOKIE: &str = "cronbox_session";
/// The header a session's state-changing request carries its CSRF token in.
pub(crate) const CSRF_HEADER: &str = "x-csrf-token";

/// The value of cookie `name` of a request.
pub(crate) fn cookie<'r>(request: &'r axum::http::HeaderMap, name: &str) -> Option<&'r str> {
    request
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Authenticates a user request: a bearer token (the operator's, or a
/// stored one with its role), else the session cookie — whose
/// state-changing requests must carry the session's CSRF token. A viewer
/// may only read.
async fn user_auth(
    State(state): State<Arc<AdminState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let caller = match caller_of(&state, request.headers(), reads(&request)).await {
        Ok(caller) => caller,
        Err(failure) => return failure.into_response(),
    };
    if !reads(&request)
        && let Err(failure) = caller.require(Role::Developer, "a change")
    {
        return failure.into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

/// [`user_auth`] for what a caller does to itself: any role.
async fn self_auth(
    State(state): State<Arc<AdminState>>,
    mut request: Request,
    next: Next,
) -> Response {
    match caller_of(&state, request.headers(), reads(&request)).await {
        Ok(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        Err(failure) => failure.into_response(),
    }
}

/// Whether a request only reads.
fn reads(request: &Request) -> bool {
    matches!(
        *request.method(),
        axum::http::Method::GET | axum::http::Method::HEAD
    )
}

/// Who sent a request with these headers (see [`user_auth`]); `reads`:
/// whether the request only reads.
async fn caller_of(
    state: &AdminState,
    headers: &axum::http::HeaderMap,
    reads: bool,
) -> Result<Caller, Failure> {
    let store = state.scheduler.store();
    if headers.contains_key(header::AUTHORIZATION) {
        let token = bearer_in(headers)?;
        if same_token(token, &state.api_token) {
            return Ok(Caller {
                tenant: DEFAULT_TENANT.to_owned(),
                role: Role::Operator,
                user: None,
                csrf: None,
            });
        }
        let principal = store
            .token_principal(&service::tenants::token_hash(token))
            .await?
            .ok_or_else(wrong_token)?;
        return Ok(Caller {
            tenant: principal.tenant,
            role: principal.role,
            user: principal.user,
            csrf: None,
        });
    }
    let Some(cookie) = cookie(headers, SESSION_COOKIE) else {
        return Err(bearer_in(headers).err().unwrap_or_else(wrong_token));
    };
    let (user, csrf) = store
        .session(
            &service::tenants::token_hash(cookie),
            state.scheduler.now_ms(),
        )
        .await?
        .ok_or_else(|| {
            Failure::new(
                StatusCode::UNAUTHORIZED,
                ErrorCode::Unauthorized,
                "the session has ended: log in again",
            )
        })?;
    let presented = headers
        .get(CSRF_HEADER)
        .and_then(|value| value.to_str().ok())
        .unwrap_or("");
    if !reads && !same_token(presented, &csrf) {
        return Err(Failure::new(
            StatusCode::FORBIDDEN,
            ErrorCode::Forbidden,
            "a change made with a session needs its CSRF token in the X-CSRF-Token header",
        ));
    }
    Ok(Caller {
        tenant: user.tenant,
        role: user.role,
        user: Some(user.name),
        csrf: Some(csrf),
    })
}

/// Prometheus text format; no token (like the executor's). The quota
/// gauges are read from the database on each scrape.
async fn metrics(State(state): State<Arc<AdminState>>) -> impl IntoResponse {
    if let Err(error) = refresh_quota_metrics(&state).await {
        tracing::warn!(%error, "quota metrics not refreshed");
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.scheduler.metrics().encode(),
    )
}

async fn refresh_quota_metrics(state: &AdminState) -> Result<(), crate::store::StoreError> {
    let store = state.scheduler.store();
    let mut tenants: Vec<String> = store
        .tenants()
        .await?
        .into_iter()
        .map(|(name, _)| name)
        .collect();
    tenants.push(DEFAULT_TENANT.to_owned());
    let quotas = state
        .scheduler
        .quotas()
        .all(store, &tenants, state.scheduler.now_ms())
        .await?;
    state.scheduler.metrics().set_quotas(&quotas);
    Ok(())
}

/// Readiness, for orchestrators and tests instead of fixed waits: 200 once
/// the API serves and the database answers, 503 while it does not; no
/// token.
async fn readyz(State(state): State<Arc<AdminState>>) -> Response {
    match state.scheduler.store().ping().await {
        Ok(()) => Json(bodies::Ready {
            ready: true,
            instance: state.scheduler.store().instance().to_owned(),
        })
        .into_response(),
        Err(error) => Failure::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::NotReady,
            format!("the database does not answer: {error}"),
        )
        .into_response(),
    }
}

/// The OpenAPI 3.0 document of this API; no token.
async fn openapi() -> impl IntoResponse {
    Json(crate::openapi::document())
}
