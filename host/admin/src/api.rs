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
use axum::extract::{DefaultBodyLimit, Extension, FromRequest, Path, Query, Request, State};
use axum::handler::Handler;
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, on};
use axum::{Json, Router};
use cronbox_component_check::ComponentError;
use cronbox_protocol::{ApiError, CallbackBatch, Registration, admin_paths};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::jobs::{JobSpec, child_cycle, schedule_of};
use crate::scheduler::{Scheduler, now_ms};
use crate::store::{JobRow, RunFilter, RunRow, StoreError, VersionPush, status};

pub(crate) struct AdminState {
    pub(crate) scheduler: Arc<Scheduler>,
    /// The operator token.
    pub(crate) api_token: String,
    pub(crate) executor_token: String,
    /// Largest module accepted, bytes.
    pub(crate) max_module_bytes: usize,
    /// Versions kept per module name.
    pub(crate) keep_versions: usize,
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
        .get("/api/v1/openapi.json", openapi)
}

/// Routes for executors (executor token).
fn executor_routes() -> Routes {
    Routes::new()
        .post(admin_paths::REGISTRY, registry)
        .post(admin_paths::REGISTRY_REMOVE, registry_remove)
        .post(admin_paths::CALLBACK, callback)
        .get("/api/v1/modules/{digest}/content", module_content)
}

/// Routes for users (a tenant token or the operator token).
fn user_routes() -> Routes {
    Routes::new()
        .post("/api/v1/modules", upload_module)
        .get("/api/v1/modules", list_modules)
        .get("/api/v1/modules/{name}/versions", list_module_versions)
        .post("/api/v1/modules/{name}/rollback", rollback_module)
        .put("/api/v1/modules/{name}/labels/{label}", label_module)
        .post("/api/v1/tenants", create_tenant)
        .get("/api/v1/tenants", list_tenants)
        .post("/api/v1/tenants/{name}/tokens", create_token)
        .delete("/api/v1/tenants/{name}/tokens/{id}", revoke_token)
        .get("/api/v1/groups", list_groups)
        .get("/api/v1/executors", list_executors)
        .put("/api/v1/groups/{name}", put_group)
        .post("/api/v1/jobs", create_job)
        .get("/api/v1/jobs", list_jobs)
        .get("/api/v1/jobs/{id}", get_job)
        .put("/api/v1/jobs/{id}", update_job)
        .delete("/api/v1/jobs/{id}", delete_job)
        .post("/api/v1/jobs/{id}/start", start_job)
        .post("/api/v1/jobs/{id}/stop", stop_job)
        .post("/api/v1/jobs/{id}/trigger", trigger_job)
        .post("/api/v1/jobs/{id}/kill", kill_job)
        .get("/api/v1/jobs/{id}/next-fires", next_fires)
        .get("/api/v1/jobs/{id}/runs", job_runs)
        .get("/api/v1/jobs/{id}/state", get_state)
        .put("/api/v1/jobs/{id}/state", put_state)
        .get("/api/v1/runs", list_runs)
        .get("/api/v1/runs/{id}", get_run)
        .post("/api/v1/runs/{id}/kill", kill_run)
        .get("/api/v1/runs/{id}/log", run_log)
        .get("/api/v1/reports", reports)
}

/// Every route the admin serves, as (method, path): what the OpenAPI
/// document is checked against.
#[cfg(test)]
pub(crate) fn route_table() -> Vec<(&'static str, &'static str)> {
    [open_routes(), executor_routes(), user_routes()]
        .into_iter()
        .flat_map(|routes| routes.table)
        .collect()
}

pub(crate) fn router(state: Arc<AdminState>, max_module_bytes: usize) -> Router {
    let executors = executor_routes()
        .router
        .layer(middleware::from_fn_with_state(state.clone(), executor_auth));
    let users = user_routes()
        .router
        .layer(middleware::from_fn_with_state(state.clone(), user_auth));
    open_routes()
        .router
        .merge(executors)
        .merge(users)
        .fallback(|| async { Failure::new(StatusCode::NOT_FOUND, "not_found", "no such route") })
        // Room for a multipart envelope around the largest module.
        .layer(DefaultBodyLimit::max(max_module_bytes + (64 << 10)))
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

/// A JSON body that may be left out (then `T::default()`).
fn optional_json<T: DeserializeOwned + Default>(body: &[u8]) -> Result<T, Failure> {
    if body.is_empty() {
        return Ok(T::default());
    }
    serde_json::from_slice(body).map_err(|error| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            error.to_string(),
        )
    })
}

/// The bearer token of a request.
fn bearer(request: &Request) -> Result<&str, Failure> {
    request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .ok_or_else(|| {
            Failure::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing token: send `Authorization: Bearer <token>`",
            )
        })
}

fn wrong_token() -> Failure {
    Failure::new(StatusCode::UNAUTHORIZED, "unauthorized", "wrong token")
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

/// Who is calling the user API: a tenant, through one of its tokens, or the
/// operator.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The tenant whose objects it sees and creates (`default` for the
    /// operator).
    tenant: String,
    /// The operator token: every tenant's objects, tenant management,
    /// state edits, executor groups.
    operator: bool,
}

impl Caller {
    /// Whether the caller may see an object of `tenant`. Objects it may not
    /// see are answered 404, as if they did not exist.
    fn sees(&self, tenant: &str) -> bool {
        self.operator || self.tenant == tenant
    }

    /// The tenant to restrict listings to (`None` for the operator).
    fn only_tenant(&self) -> Option<String> {
        (!self.operator).then(|| self.tenant.clone())
    }

    /// [`Caller::require_operator`] for one field of a request.
    fn require_operator_for(&self, field: &str, what: &str) -> Result<(), Failure> {
        self.require_operator(what)
            .map_err(|failure| failure.field(field))
    }

    fn require_operator(&self, what: &str) -> Result<(), Failure> {
        if self.operator {
            Ok(())
        } else {
            Err(Failure::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                format!("{what} needs the operator token"),
            ))
        }
    }
}

/// The sha256 (hex) under which a tenant token is stored.
pub(crate) fn token_hash(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

async fn user_auth(
    State(state): State<Arc<AdminState>>,
    mut request: Request,
    next: Next,
) -> Response {
    let token = match bearer(&request) {
        Ok(token) => token,
        Err(failure) => return failure.into_response(),
    };
    let caller = if same_token(token, &state.api_token) {
        Caller {
            tenant: "default".to_owned(),
            operator: true,
        }
    } else {
        match state
            .scheduler
            .store()
            .tenant_of_token(&token_hash(token))
            .await
        {
            Ok(Some(tenant)) => Caller {
                tenant,
                operator: false,
            },
            Ok(None) => return wrong_token().into_response(),
            Err(error) => return Failure::from(error).into_response(),
        }
    };
    request.extensions_mut().insert(caller);
    next.run(request).await
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

/// Where an upload goes: the module name to add a version to (none: the
/// content is stored by digest only), and labels for the new version.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct UploadQuery {
    name: Option<String>,
    /// Comma-separated.
    labels: Option<String>,
}

/// Labels: the characters of module names.
fn parse_labels(text: Option<&str>) -> Result<Vec<String>, Failure> {
    let labels: Vec<String> = text
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|label| !label.is_empty())
        .map(str::to_owned)
        .collect();
    for label in &labels {
        crate::jobs::check_module_name(label).map_err(|invalid| {
            Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_module",
                invalid.message.replace("module name", "label"),
            )
            .field("labels")
        })?;
    }
    Ok(labels)
}

fn too_large(limit: usize) -> Failure {
    Failure::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "module_too_large",
        format!("the upload is over the limit of {limit} bytes"),
    )
}

/// Uploads a component, as the raw body or as `multipart/form-data` with a
/// `module` file field (and optional `name` and `labels` fields). It is
/// checked like the runtime checks it (a component for world `job`, no
/// import beyond those granted, the size limit) before anything is stored;
/// content is kept by sha256. With a name, it becomes that module's next
/// version, and the jobs that follow the module move to it.
async fn upload_module(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    query: Result<Query<UploadQuery>, axum::extract::rejection::QueryRejection>,
    request: Request,
) -> Result<impl IntoResponse, Failure> {
    let Query(mut query) = query.map_err(|rejection| {
        Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_query",
            rejection.body_text(),
        )
    })?;
    let limit = state.max_module_bytes;
    let multipart = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("multipart/form-data"));
    let bytes: Vec<u8> = if multipart {
        let bad =
            |message: String| Failure::new(StatusCode::BAD_REQUEST, "invalid_upload", message);
        let mut form = axum::extract::Multipart::from_request(request, &())
            .await
            .map_err(|rejection| bad(rejection.body_text()))?;
        let mut module = None;
        while let Some(field) = form.next_field().await.map_err(|error| {
            if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
                too_large(limit)
            } else {
                bad(error.body_text())
            }
        })? {
            let name = field.name().unwrap_or_default().to_owned();
            let read_text = |text: Result<String, axum::extract::multipart::MultipartError>| {
                text.map_err(|error| bad(error.body_text()))
            };
            match name.as_str() {
                "module" => {
                    module = Some(field.bytes().await.map_err(|error| {
                        if error.status() == StatusCode::PAYLOAD_TOO_LARGE {
                            too_large(limit)
                        } else {
                            bad(error.body_text())
                        }
                    })?)
                }
                "name" => query.name = Some(read_text(field.text().await)?),
                "labels" => query.labels = Some(read_text(field.text().await)?),
                other => {
                    return Err(bad(format!(
                        "unknown form field {other:?}: use module, name, labels"
                    )));
                }
            }
        }
        module
            .ok_or_else(|| bad("the form has no `module` file field".to_owned()))?
            .to_vec()
    } else {
        Bytes::from_request(request, &())
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    too_large(limit)
                } else {
                    Failure::new(
                        StatusCode::BAD_REQUEST,
                        "invalid_upload",
                        rejection.body_text(),
                    )
                }
            })?
            .to_vec()
    };
    let labels = parse_labels(query.labels.as_deref())?;
    if let Some(name) = &query.name {
        crate::jobs::check_module_name(name).map_err(|invalid| {
            Failure::new(StatusCode::BAD_REQUEST, "invalid_module", invalid.message).field("name")
        })?;
    } else if !labels.is_empty() {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_module",
            "labels belong to a named version: give a name too",
        )
        .field("labels"));
    }
    cronbox_component_check::check_component(&bytes, limit).map_err(|error| match error {
        ComponentError::TooLarge { .. } => Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "module_too_large",
            error.to_string(),
        ),
        _ => Failure::new(StatusCode::BAD_REQUEST, "invalid_module", error.to_string()),
    })?;
    let digest = hex::encode(Sha256::digest(&bytes));
    let store = state.scheduler.store();
    let now = now_ms();
    store.put_module(&digest, &bytes, now).await?;
    store.own_module(&caller.tenant, &digest).await?;
    let mut answer = serde_json::json!({ "digest": digest, "size": bytes.len() });
    if let Some(name) = &query.name {
        let (version, moved) = store
            .add_module_version(
                &VersionPush {
                    tenant: &caller.tenant,
                    name,
                    digest: &digest,
                    labels: &labels,
                    note: "",
                },
                state.keep_versions,
                now,
            )
            .await?;
        answer["name"] = name.clone().into();
        answer["version"] = version.version.into();
        answer["labels"] = version.labels.into();
        answer["jobs_moved"] = moved.into();
        state.scheduler.wake();
    }
    Ok((StatusCode::CREATED, Json(answer)))
}

async fn list_modules(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
) -> Result<impl IntoResponse, Failure> {
    let modules: Vec<serde_json::Value> = state
        .scheduler
        .store()
        .latest_modules(caller.only_tenant().as_deref())
        .await?
        .into_iter()
        .map(|(tenant, latest)| {
            let mut module = serde_json::to_value(latest).unwrap_or_default();
            module["tenant"] = tenant.into();
            module
        })
        .collect();
    Ok(Json(modules))
}

/// The versions of one of the caller's modules, newest first.
async fn module_versions(
    state: &AdminState,
    caller: &Caller,
    name: &str,
) -> Result<Vec<crate::store::ModuleVersion>, Failure> {
    let versions = state
        .scheduler
        .store()
        .module_versions(&caller.tenant, name)
        .await?;
    if versions.is_empty() {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            "unknown_module",
            format!("no module {name:?}"),
        ));
    }
    Ok(versions)
}

async fn list_module_versions(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<impl IntoResponse, Failure> {
    Ok(Json(module_versions(&state, &caller, &name).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VersionChoice {
    version: i64,
}

/// Makes an earlier version current again: a new version with its
/// content, so history keeps both; the jobs that follow the module move to
/// it.
async fn rollback_module(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    ApiJson(choice): ApiJson<VersionChoice>,
) -> Result<impl IntoResponse, Failure> {
    let versions = module_versions(&state, &caller, &name).await?;
    let Some(target) = versions.iter().find(|v| v.version == choice.version) else {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!(
                "module {name:?} has no version {} (it has {})",
                choice.version,
                versions
                    .iter()
                    .map(|v| v.version.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
        .field("version"));
    };
    let (version, moved) = state
        .scheduler
        .store()
        .add_module_version(
            &VersionPush {
                tenant: &caller.tenant,
                name: &name,
                digest: &target.digest,
                labels: &[],
                note: &format!("rollback to version {}", target.version),
            },
            state.keep_versions,
            now_ms(),
        )
        .await?;
    state.scheduler.wake();
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({ "version": version, "jobs_moved": moved })),
    ))
}

/// Puts a label on one version (taking it off any other).
async fn label_module(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path((name, label)): Path<(String, String)>,
    ApiJson(choice): ApiJson<VersionChoice>,
) -> Result<impl IntoResponse, Failure> {
    parse_labels(Some(&label))?;
    module_versions(&state, &caller, &name).await?;
    let labelled = state
        .scheduler
        .store()
        .set_module_label(&caller.tenant, &name, choice.version, &label)
        .await?;
    if !labelled {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            format!("module {name:?} has no version {}", choice.version),
        )
        .field("version"));
    }
    Ok(Json(module_versions(&state, &caller, &name).await?))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TenantSpec {
    name: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenSpec {
    #[serde(default)]
    label: String,
}

/// A new random API token: shown once, stored as its sha256.
fn new_token() -> String {
    format!("cbx_{}", hex::encode(rand::random::<[u8; 24]>()))
}

/// Creates a tenant and its first token (operator only).
async fn create_tenant(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(spec): ApiJson<TenantSpec>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("creating a tenant")?;
    let valid = !spec.name.is_empty()
        && spec.name.len() <= 63
        && spec
            .name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if !valid {
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_tenant",
            format!(
                "tenant name {:?} must be 1 to 63 lowercase letters, digits or '-'",
                spec.name
            ),
        )
        .field("name"));
    }
    let store = state.scheduler.store();
    if !store.create_tenant(&spec.name, now_ms()).await? {
        return Err(Failure::new(
            StatusCode::CONFLICT,
            "tenant_exists",
            format!("tenant {:?} already exists", spec.name),
        ));
    }
    let token = new_token();
    let id = store
        .add_token(&spec.name, "first", &token_hash(&token), now_ms())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({ "name": spec.name, "token_id": id, "token": token })),
    ))
}

async fn list_tenants(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("listing tenants")?;
    let tenants: Vec<serde_json::Value> = state
        .scheduler
        .store()
        .tenants()
        .await?
        .into_iter()
        .map(|(name, tokens)| serde_json::json!({ "name": name, "tokens": tokens }))
        .collect();
    Ok(Json(tenants))
}

async fn known_tenant(state: &AdminState, name: &str) -> Result<(), Failure> {
    let known = state
        .scheduler
        .store()
        .tenants()
        .await?
        .iter()
        .any(|(tenant, _)| tenant == name);
    if known {
        Ok(())
    } else {
        Err(Failure::new(
            StatusCode::NOT_FOUND,
            "unknown_tenant",
            format!("no tenant {name:?}"),
        ))
    }
}

/// Adds a token to a tenant (operator only); the token is shown once.
async fn create_token(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(tenant): Path<String>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("creating a token")?;
    known_tenant(&state, &tenant).await?;
    let spec: TokenSpec = optional_json(&body)?;
    let token = new_token();
    let id = state
        .scheduler
        .store()
        .add_token(&tenant, &spec.label, &token_hash(&token), now_ms())
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(serde_json::json!({ "tenant": tenant, "token_id": id, "token": token })),
    ))
}

async fn revoke_token(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path((tenant, id)): Path<(String, i64)>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("revoking a token")?;
    if !state.scheduler.store().revoke_token(&tenant, id).await? {
        return Err(Failure::new(
            StatusCode::NOT_FOUND,
            "unknown_token",
            format!("tenant {tenant:?} has no token {id}"),
        ));
    }
    Ok(Json(serde_json::json!({ "tenant": tenant, "revoked": id })))
}

async fn create_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    ApiJson(spec): ApiJson<JobSpec>,
) -> Result<impl IntoResponse, Failure> {
    let (mut row, _) = spec.validate(&caller.tenant).map_err(|invalid| {
        Failure::new(StatusCode::BAD_REQUEST, "invalid_job", invalid.message).field(invalid.field)
    })?;
    let store = state.scheduler.store();
    known_group(&state, &row.group_name).await?;
    resolve_module(&state, &mut row).await?;
    for child in spec.children.iter() {
        if visible_job(&state, &caller, *child).await.is_err() {
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

/// Refuses a job naming an executor group nobody configured or registered
/// in (it would fail at every fire).
async fn known_group(state: &AdminState, group: &str) -> Result<(), Failure> {
    if state.scheduler.store().group_exists(group).await? {
        return Ok(());
    }
    Err(Failure::new(
        StatusCode::BAD_REQUEST,
        "invalid_job",
        format!(
            "unknown executor group {group:?}: a group exists once an executor registers in it \
             or the operator configures it (PUT /api/v1/groups/{group})"
        ),
    )
    .field("group"))
}

/// Replaces a job's definition. Children must exist and must not form a
/// cycle. A running job's next fire is planned again from now only when
/// its schedule (type, expression or time zone) changed, so that an edit of
/// anything else keeps a FIX_RATE job's phase.
async fn update_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    ApiJson(spec): ApiJson<JobSpec>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    let current = visible_job(&state, &caller, id).await?;
    let (mut row, schedule) = spec.validate(&current.tenant).map_err(|invalid| {
        Failure::new(StatusCode::BAD_REQUEST, "invalid_job", invalid.message).field(invalid.field)
    })?;
    known_group(&state, &row.group_name).await?;
    resolve_module(&state, &mut row).await?;
    let all = store.jobs().await?;
    for child in &spec.children {
        if !all
            .iter()
            .any(|job| job.id == *child && job.tenant == current.tenant)
        {
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
    let same_schedule = current.schedule_type == row.schedule_type
        && current.schedule_conf == row.schedule_conf
        && current.time_zone == row.time_zone;
    let next = if !current.enabled {
        None
    } else if same_schedule {
        current.next_fire_at_ms
    } else {
        schedule
            .first_fire(crate::scheduler::now())
            .map(|at| at.timestamp_millis())
    };
    store.update_job(id, &row, next, now_ms()).await?;
    state.scheduler.wake();
    Ok(Json(store.job(id).await?))
}

async fn list_jobs(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
) -> Result<impl IntoResponse, Failure> {
    let mut jobs = state.scheduler.store().jobs().await?;
    jobs.retain(|job| caller.sees(&job.tenant));
    Ok(Json(jobs))
}

async fn get_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    Ok(Json(visible_job(&state, &caller, id).await?))
}

/// Job `id` if the caller may see it; 404 otherwise, whether it exists or
/// belongs to another tenant.
async fn visible_job(state: &AdminState, caller: &Caller, id: i64) -> Result<JobRow, Failure> {
    match state.scheduler.store().job(id).await? {
        Some(job) if caller.sees(&job.tenant) => Ok(job),
        _ => Err(unknown_job(id)),
    }
}

/// Run `id` if the caller may see it; 404 otherwise.
async fn visible_run(state: &AdminState, caller: &Caller, id: i64) -> Result<RunRow, Failure> {
    match state.scheduler.store().run(id).await? {
        Some(run) if caller.sees(&run.tenant) => Ok(run),
        _ => Err(Failure::new(
            StatusCode::NOT_FOUND,
            "unknown_run",
            format!("no run {id}"),
        )),
    }
}

/// Sets the digest of a job that names a module: its pinned version, or
/// the latest; checks that the job's tenant has the module it names.
async fn resolve_module(state: &AdminState, row: &mut JobRow) -> Result<(), Failure> {
    let store = state.scheduler.store();
    let Some(name) = &row.module_name else {
        if !store.owns_module(&row.tenant, &row.module_digest).await? {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_job",
                format!("no module {} was uploaded", row.module_digest),
            )
            .field("module_digest"));
        }
        return Ok(());
    };
    let versions = store.module_versions(&row.tenant, name).await?;
    let chosen = match row.module_version {
        Some(version) => versions.iter().find(|v| v.version == version),
        None => versions.first(),
    };
    let Some(chosen) = chosen else {
        let what = match row.module_version {
            Some(version) => format!("version {version} of module {name:?}"),
            None => format!("module {name:?}"),
        };
        return Err(Failure::new(
            StatusCode::BAD_REQUEST,
            "invalid_job",
            format!("no {what} was pushed (or it was pruned)"),
        )
        .field("module"));
    };
    row.module_digest = chosen.digest.clone();
    Ok(())
}

fn unknown_job(id: i64) -> Failure {
    Failure::new(StatusCode::NOT_FOUND, "unknown_job", format!("no job {id}"))
}

async fn start_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    let job = visible_job(&state, &caller, id).await?;
    let schedule = schedule_of(&job)
        .map_err(|error| Failure::new(StatusCode::BAD_REQUEST, "invalid_job", error.to_string()))?;
    let now = crate::scheduler::now();
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
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    visible_job(&state, &caller, id).await?;
    let Some(cancelled) = store.stop_job(id, now_ms()).await? else {
        return Err(unknown_job(id));
    };
    if !cancelled.is_empty() {
        tracing::info!(
            job = id,
            count = cancelled.len(),
            "stopped: waiting runs cancelled"
        );
    }
    Ok(Json(store.job(id).await?))
}

/// Kills a whole job: its running, queued and held runs on executors, and
/// its runs waiting to be dispatched (pending retries included), which end
/// as cancelled.
async fn kill_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let job = visible_job(&state, &caller, id).await?;
    let outcome = state.scheduler.kill_job(&job).await?;
    Ok(Json(serde_json::json!({
        "job_id": id,
        "cancelled": outcome.cancelled,
        "killed": outcome.killed,
        "unreachable": outcome.unreachable,
    })))
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TriggerRequest {
    #[serde(default)]
    param: Option<String>,
    /// Executor addresses for this run only (route strategy applied).
    /// Operator only, and only addresses of the job's group.
    #[serde(default)]
    addresses: Option<Vec<String>>,
    /// Who starts the run: `api` (a program; the default) or `manual` (a
    /// person, through the CLI or the console). The run's trigger kind.
    #[serde(default)]
    kind: TriggerSource,
}

/// The trigger kinds a trigger request may give.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum TriggerSource {
    #[default]
    Api,
    Manual,
}

async fn trigger_job(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    body: Bytes,
) -> Result<impl IntoResponse, Failure> {
    let request: TriggerRequest = optional_json(&body)?;
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
    let job = visible_job(&state, &caller, id).await?;
    if let Some(addresses) = &request.addresses {
        // The admin sends the executor token with every run: only to
        // executors the operator runs, never to an address a tenant names.
        caller.require_operator_for("addresses", "choosing executor addresses for a run")?;
        let allowed = state.scheduler.group_addresses_now(&job.group_name).await?;
        if addresses.is_empty() {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                "addresses, when given, must name at least one executor",
            )
            .field("addresses"));
        }
        if let Some(outside) = addresses.iter().find(|a| !allowed.contains(a)) {
            return Err(Failure::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                format!(
                    "address {outside:?} is not a live executor of group {:?}; a run may only \
                     go to its job's group (live now: {})",
                    job.group_name,
                    if allowed.is_empty() {
                        "none".to_owned()
                    } else {
                        allowed.join(", ")
                    }
                ),
            )
            .field("addresses"));
        }
    }
    let kind = match request.kind {
        TriggerSource::Api => "api",
        TriggerSource::Manual => "manual",
    };
    let run_id = state
        .scheduler
        .trigger(id, kind, request.param, request.addresses)
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
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    Query(query): Query<CountQuery>,
) -> Result<impl IntoResponse, Failure> {
    let job = visible_job(&state, &caller, id).await?;
    let schedule = schedule_of(&job)
        .map_err(|error| Failure::new(StatusCode::BAD_REQUEST, "invalid_job", error.to_string()))?;
    let fires: Vec<String> = schedule
        .preview(crate::scheduler::now(), query.count.min(100))
        .into_iter()
        .map(|at| at.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .collect();
    Ok(Json(fires))
}

async fn job_runs(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    visible_job(&state, &caller, id).await?;
    Ok(Json(state.scheduler.store().runs_of_job(id).await?))
}

async fn get_run(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    Ok(Json(visible_run(&state, &caller, id).await?))
}

async fn kill_run(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let run = visible_run(&state, &caller, id).await?;
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
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    Query(params): Query<LogParams>,
) -> Result<impl IntoResponse, Failure> {
    let run = visible_run(&state, &caller, id).await?;
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
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    ApiJson(spec): ApiJson<GroupSpec>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("configuring an executor group")?;
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

/// Registered executors and their last heartbeat (operator only: executor
/// addresses are the operator's infrastructure).
async fn list_executors(
    State(state): State<Arc<AdminState>>,
    Extension(caller): Extension<Caller>,
) -> Result<impl IntoResponse, Failure> {
    caller.require_operator("listing executors")?;
    let alive_since = state.scheduler.alive_since_now().await?;
    let executors: Vec<serde_json::Value> = state
        .scheduler
        .store()
        .registered_executors()
        .await?
        .into_iter()
        .map(|(group, address, last_beat_ms)| {
            serde_json::json!({
                "group": group,
                "address": address,
                "last_beat_ms": last_beat_ms,
                "alive": last_beat_ms >= alive_since,
            })
        })
        .collect();
    Ok(Json(executors))
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
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    visible_job(&state, &caller, id).await?;
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
    Extension(caller): Extension<Caller>,
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
        tenant: caller.only_tenant(),
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
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    visible_job(&state, &caller, id).await?;
    let values = store.job_state(id).await?.values;
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
    Extension(caller): Extension<Caller>,
    Path(id): Path<i64>,
    ApiJson(edit): ApiJson<StateEdit>,
) -> Result<impl IntoResponse, Failure> {
    let store = state.scheduler.store();
    visible_job(&state, &caller, id).await?;
    caller.require_operator("editing a job's state")?;
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
    store.replace_job_state(id, &edit.state, now_ms()).await?;
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
    Extension(caller): Extension<Caller>,
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
        None => crate::scheduler::now().date_naive(),
    };
    let from = match &query.from {
        Some(text) => day("from", text)?,
        None => to - chrono::Duration::days(6),
    };
    let days = state
        .scheduler
        .store()
        .daily_reports(
            &caller.tenant,
            &from.format("%Y-%m-%d").to_string(),
            &to.format("%Y-%m-%d").to_string(),
        )
        .await?;
    let total = |count: fn(&crate::store::DailyReport) -> i64| days.iter().map(count).sum::<i64>();
    let totals = serde_json::json!({
        "success": total(|day| day.success),
        "failed": total(|day| day.failed),
        "running": total(|day| day.running),
        "cancelled": total(|day| day.cancelled),
    });
    Ok(Json(serde_json::json!({ "days": days, "totals": totals })))
}

/// Prometheus text format; no token (like the executor's).
async fn metrics(State(state): State<Arc<AdminState>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        state.scheduler.metrics().encode(),
    )
}

/// The OpenAPI 3.0 document of this API; no token.
async fn openapi() -> impl IntoResponse {
    Json(crate::openapi::document())
}
