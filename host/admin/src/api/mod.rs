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
//! `triggers`, `schedules`, `backfills`, `calendars`, `runs`, `groups`,
//! `secrets`, `users`, `workflows`, `executor_tokens`), each with its handlers and its `routes()`: every
//! route's OpenAPI operation and the access it needs, from which `routes`
//! builds the router and `openapi` the document; `auth` who is calling (`Caller`),
//! `failure` how errors become the error answer (`Failure`), `json` how
//! requests are read, `audit` the audit log every change is written to.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Extension, FromRequest, Path, Request, State};
use axum::handler::Handler;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, on};
use axum::{Json, Router};
use cronbox_api::Role;
use cronbox_protocol::{CallbackBatch, ErrorCode, Failure, Registration, admin_paths};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use subtle::ConstantTimeEq;

use crate::jobs::{JobSpec, schedule_of};
use crate::service::{self, ServiceError};
use crate::store::{JobId, JobRow, RunFilter, RunId, RunRow, RunStatus, StoreError};

mod audit;
mod auth;
mod backfills;
pub mod bodies;
mod calendars;
mod executor_tokens;
mod executors;
mod failure;
mod json;
mod openapi;
pub(crate) mod query;
mod routes;
mod run_events;

mod groups;
mod jobs;
mod modules;
mod observability;
mod runs;
mod schedules;
mod secrets;
mod tenants;
mod triggers;
mod users;
mod workflows;
mod xxl_job;
mod xxl_job_jobs;

use audit::AuditNote;
use auth::*;
use failure::store_failure;
use jobs::*;
use json::*;
pub(crate) use modules::UploadRoom;
use openapi::operation::*;
use query::{AnyCase, Bounded, Day, Integer, Limited, Params, invalid_query, parameters_of};
pub(crate) use routes::router;
use routes::{ADMIN, CALLBACK_BODY_BYTES, DEVELOPER, JOB_BATCH_BODY_BYTES, OPERATOR, VIEWER};
pub(crate) use routes::{Access, Routes, route_table};

pub(crate) struct AdminState {
    /// What the API hands the engine besides changes (results, metrics).
    pub(crate) intake: crate::scheduler::Intake,
    /// What the services use (built from the scheduler, never it).
    pub(crate) services: service::Services,
    /// The operator token.
    pub(crate) api_token: String,
    pub(crate) executor_token: String,
    /// Largest module accepted, bytes.
    pub(crate) max_module_bytes: usize,
    /// Versions kept per module name.
    pub(crate) keep_versions: usize,
    /// Failed logins, to slow password guessing.
    pub(crate) logins: service::users::LoginThrottle,
    /// Room for the module uploads read at once.
    pub(crate) uploads: UploadRoom,
    /// The listener serves TLS itself: session cookies are `Secure`.
    pub(crate) serves_tls: bool,
}

/// Readiness, for orchestrators and tests instead of fixed waits: 200 once
/// the API serves and the database answers, 503 while it does not; no
/// token.
async fn readyz(State(state): State<Arc<AdminState>>) -> Response {
    match service::ready(state.services.store()).await {
        Ok(instance) => Json(bodies::Ready {
            ready: true,
            instance,
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

/// Liveness: 200 while the process serves, whether or not the database
/// answers (an orchestrator restarting admins during a database failover
/// would only slow their return); no token.
async fn livez() -> Json<serde_json::Value> {
    Json(serde_json::json!({ "live": true }))
}

/// The OpenAPI 3.0 document of this API; no token.
async fn openapi() -> impl IntoResponse {
    // The same for the process's life: built and written once.
    static DOCUMENT: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    (
        [(header::CONTENT_TYPE, "application/json")],
        DOCUMENT
            .get_or_init(|| openapi::document().to_string())
            .as_str(),
    )
}

/// The routes open to all but logging in (that is `users`'): metrics,
/// readiness and the document.
fn open_routes(table: &mut Routes) {
    let operation = op(
        "get",
        "/metrics",
        "observability",
        "Prometheus metrics (no token)",
        None,
        "200",
        json!({ "type": "string" }),
    )
    .with_media("application/openmetrics-text");
    table.route(operation, Access::Open, observability::metrics);
    let operation = op(
        "get",
        "/readyz",
        "observability",
        "Readiness: 200 once the API serves and the database answers, 503 otherwise (no token)",
        None,
        "200",
        schema("Ready"),
    );
    table.route(operation, Access::Open, readyz);
    let operation = op(
        "get",
        "/livez",
        "observability",
        "Liveness: 200 while the process serves, database or not (no token)",
        None,
        "200",
        json!({ "type": "object", "properties": { "live": { "type": "boolean" } } }),
    );
    table.route(operation, Access::Open, livez);
    let operation = op(
        "get",
        "/healthz",
        "observability",
        "Liveness under the name many probes use: the same answer as /livez (no token)",
        None,
        "200",
        json!({ "type": "object", "properties": { "live": { "type": "boolean" } } }),
    );
    table.route(operation, Access::Open, livez);
    let operation = op(
        "get",
        "/api/v1/openapi.json",
        "observability",
        "This document (no token)",
        None,
        "200",
        object(),
    );
    table.route(operation, Access::Open, openapi);
}
