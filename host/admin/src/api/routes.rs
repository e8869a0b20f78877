//! The route table: every route with the access it needs ([`Access`]),
//! from which the router, the role checks and the OpenAPI document's
//! `x-required-role` all come; and the layers every answer passes
//! through (errors as JSON, no `%00` in a URI).

use super::*;

/// What a route needs of its caller. This table is the one place that
/// says who may call what: the router authenticates and checks by it, and
/// the OpenAPI document states it as each operation's `x-required-role`.
/// A handler may refuse more for what a request names (another tenant's
/// object, a user above the caller's role), never less.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Access {
    /// No token: metrics, readiness, the document, logging in.
    Open,
    /// The executor token.
    Executor,
    /// Any user caller, acting on itself: its session, its tokens, its
    /// password.
    Caller,
    /// A user caller (a session, a user's or a tenant's token, the
    /// operator token) whose role includes this one.
    Role(Role),
}

impl Access {
    /// As the document's `x-required-role` states it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Access::Open => "none",
            Access::Executor => "executor",
            Access::Caller => "any",
            Access::Role(role) => role.as_str(),
        }
    }
}

const VIEWER: Access = Access::Role(Role::Viewer);
const DEVELOPER: Access = Access::Role(Role::Developer);
const ADMIN: Access = Access::Role(Role::Admin);
const OPERATOR: Access = Access::Role(Role::Operator);

/// The routes, each in the router of its access, and the table of
/// (method, path, access).
pub(crate) struct Routes {
    open: Router<Arc<AdminState>>,
    executors: Router<Arc<AdminState>>,
    callers: Router<Arc<AdminState>>,
    users: Router<Arc<AdminState>>,
    table: Vec<(&'static str, &'static str, Access)>,
}

impl Routes {
    fn new() -> Routes {
        Routes {
            open: Router::new(),
            executors: Router::new(),
            callers: Router::new(),
            users: Router::new(),
            table: Vec::new(),
        }
    }

    fn add<H, T>(
        mut self,
        method: &'static str,
        filter: MethodFilter,
        path: &'static str,
        access: Access,
        handler: H,
    ) -> Routes
    where
        H: Handler<T, Arc<AdminState>>,
        T: 'static,
    {
        self.table.push((method, path, access));
        let route = on(filter, handler);
        match access {
            Access::Open => self.open = self.open.route(path, route),
            Access::Executor => self.executors = self.executors.route(path, route),
            Access::Caller => self.callers = self.callers.route(path, route),
            Access::Role(role) => {
                let route =
                    route.route_layer(middleware::from_fn(move |request: Request, next: Next| {
                        require_role(role, request, next)
                    }));
                self.users = self.users.route(path, route);
            }
        }
        self
    }

    fn get<H: Handler<T, Arc<AdminState>>, T: 'static>(
        self,
        path: &'static str,
        access: Access,
        h: H,
    ) -> Routes {
        self.add("get", MethodFilter::GET, path, access, h)
    }

    fn post<H: Handler<T, Arc<AdminState>>, T: 'static>(
        self,
        path: &'static str,
        access: Access,
        h: H,
    ) -> Routes {
        self.add("post", MethodFilter::POST, path, access, h)
    }

    fn put<H: Handler<T, Arc<AdminState>>, T: 'static>(
        self,
        path: &'static str,
        access: Access,
        h: H,
    ) -> Routes {
        self.add("put", MethodFilter::PUT, path, access, h)
    }

    fn delete<H: Handler<T, Arc<AdminState>>, T: 'static>(
        self,
        path: &'static str,
        access: Access,
        h: H,
    ) -> Routes {
        self.add("delete", MethodFilter::DELETE, path, access, h)
    }
}

/// Largest body of a JSON request (job definitions, state edits, ...).
pub(crate) const JSON_BODY_BYTES: usize = 1 << 20;

/// Largest body of a batch of jobs (`POST /api/v1/jobs/batch`): room for
/// its most jobs with a few KiB each.
pub(crate) const JOB_BATCH_BODY_BYTES: usize = 16 << 20;

/// Largest callback body: a batch of results (an executor cuts each
/// result to 1.5 MiB and bounds its batches at 1 MiB).
pub(crate) const CALLBACK_BODY_BYTES: usize = 16 << 20;

/// Every route with the access it needs; an upload may be
/// `max_module_bytes`, every other body [`JSON_BODY_BYTES`]. Reads need a
/// viewer, changes at least a developer (`changes_need_a_developer` holds
/// the table to that).
fn routes(max_module_bytes: usize) -> Routes {
    Routes::new()
        // Open.
        .get("/metrics", Access::Open, metrics)
        .get("/readyz", Access::Open, readyz)
        .get("/api/v1/openapi.json", Access::Open, openapi)
        .post("/api/v1/session", Access::Open, login)
        // Executors.
        .post(admin_paths::REGISTRY, Access::Executor, registry)
        .post(
            admin_paths::REGISTRY_REMOVE,
            Access::Executor,
            registry_remove,
        )
        .post(
            admin_paths::CALLBACK,
            Access::Executor,
            callback.layer(DefaultBodyLimit::max(CALLBACK_BODY_BYTES)),
        )
        .get(
            "/api/v1/modules/{digest}/content",
            Access::Executor,
            module_content,
        )
        // A caller on itself.
        .get("/api/v1/session", Access::Caller, session)
        .delete("/api/v1/session", Access::Caller, logout)
        .get("/api/v1/tokens", Access::Caller, list_tokens)
        .post("/api/v1/tokens", Access::Caller, create_user_token)
        .delete("/api/v1/tokens/{id}", Access::Caller, revoke_user_token)
        .put(
            "/api/v1/users/{name}/password",
            Access::Caller,
            set_password,
        )
        // Modules.
        .post(
            "/api/v1/modules",
            DEVELOPER,
            // Room for a multipart envelope around the largest module.
            upload_module.layer(DefaultBodyLimit::max(max_module_bytes + (64 << 10))),
        )
        .get("/api/v1/modules", VIEWER, list_modules)
        .get(
            "/api/v1/modules/{name}/versions",
            VIEWER,
            list_module_versions,
        )
        .post(
            "/api/v1/modules/{name}/rollback",
            DEVELOPER,
            rollback_module,
        )
        .put(
            "/api/v1/modules/{name}/labels/{label}",
            DEVELOPER,
            label_module,
        )
        // Tenants, their settings, secrets and users.
        .post("/api/v1/tenants", OPERATOR, create_tenant)
        .get("/api/v1/tenants", OPERATOR, list_tenants)
        .post("/api/v1/tenants/{name}/tokens", OPERATOR, create_token)
        .delete("/api/v1/tenants/{name}/tokens/{id}", OPERATOR, revoke_token)
        .get("/api/v1/tenants/{name}/quotas", VIEWER, get_quotas)
        .put("/api/v1/tenants/{name}/quotas", OPERATOR, put_quotas)
        .get(
            "/api/v1/tenants/{name}/http-ceiling",
            VIEWER,
            get_http_ceiling,
        )
        .put(
            "/api/v1/tenants/{name}/http-ceiling",
            OPERATOR,
            put_http_ceiling,
        )
        .get("/api/v1/secrets", ADMIN, list_secrets)
        .put("/api/v1/secrets/{name}", ADMIN, put_secret)
        .delete("/api/v1/secrets/{name}", ADMIN, delete_secret)
        .get("/api/v1/users", ADMIN, list_users)
        .post("/api/v1/users", ADMIN, create_user)
        .delete("/api/v1/users/{name}", ADMIN, remove_user)
        // Executor groups.
        .get("/api/v1/groups", VIEWER, list_groups)
        .get("/api/v1/executors", OPERATOR, list_executors)
        .put("/api/v1/groups/{name}", OPERATOR, put_group)
        .put("/api/v1/groups/{name}/tenants", OPERATOR, put_group_tenants)
        // Jobs.
        .post("/api/v1/jobs", DEVELOPER, create_job)
        .post(
            "/api/v1/jobs/batch",
            DEVELOPER,
            create_jobs.layer(DefaultBodyLimit::max(JOB_BATCH_BODY_BYTES)),
        )
        .get("/api/v1/jobs", VIEWER, list_jobs)
        .get("/api/v1/jobs/{id}", VIEWER, get_job)
        .put("/api/v1/jobs/{id}", DEVELOPER, update_job)
        .delete("/api/v1/jobs/{id}", DEVELOPER, delete_job)
        .post("/api/v1/jobs/{id}/start", DEVELOPER, start_job)
        .post("/api/v1/jobs/{id}/stop", DEVELOPER, stop_job)
        .post("/api/v1/jobs/{id}/pause", DEVELOPER, pause_job)
        .post("/api/v1/jobs/{id}/backfill", DEVELOPER, backfill_job)
        .get("/api/v1/backfills", VIEWER, list_backfills)
        .get("/api/v1/backfills/{id}", VIEWER, get_backfill)
        .delete("/api/v1/backfills/{id}", DEVELOPER, cancel_backfill)
        .get("/api/v1/calendars", VIEWER, list_calendars)
        .put("/api/v1/calendars/{name}", DEVELOPER, put_calendar)
        .delete("/api/v1/calendars/{name}", DEVELOPER, delete_calendar)
        .post("/api/v1/jobs/{id}/trigger", DEVELOPER, trigger_job)
        .post("/api/v1/jobs/{id}/kill", DEVELOPER, kill_job)
        .get("/api/v1/jobs/{id}/next-fires", VIEWER, next_fires)
        .get("/api/v1/schedule-preview", VIEWER, schedule_preview)
        .get("/api/v1/jobs/{id}/runs", VIEWER, job_runs)
        .get("/api/v1/jobs/{id}/state", VIEWER, get_state)
        .put("/api/v1/jobs/{id}/state", DEVELOPER, put_state)
        // Runs and reports.
        .get("/api/v1/runs", VIEWER, list_runs)
        .get("/api/v1/runs/{id}", VIEWER, get_run)
        .post("/api/v1/runs/{id}/kill", DEVELOPER, kill_run)
        .get("/api/v1/runs/{id}/log", VIEWER, run_log)
        .get("/api/v1/reports", VIEWER, reports)
        .get("/api/v1/dashboard", VIEWER, dashboard)
}

/// Every route the admin serves, as (method, path, access): what the
/// OpenAPI document lists and states.
pub(crate) fn route_table() -> Vec<(&'static str, &'static str, Access)> {
    routes(0).table
}

pub(crate) fn router(state: Arc<AdminState>, max_module_bytes: usize) -> Router {
    let routes = routes(max_module_bytes);
    let executors = routes
        .executors
        .layer(middleware::from_fn_with_state(state.clone(), executor_auth));
    let users = routes
        .users
        .layer(middleware::from_fn_with_state(state.clone(), user_auth));
    let callers = routes
        .callers
        .layer(middleware::from_fn_with_state(state.clone(), user_auth));
    routes
        .open
        .merge(crate::console::routes())
        .merge(executors)
        .merge(callers)
        .merge(users)
        .fallback(|| async {
            Failure::new(StatusCode::NOT_FOUND, ErrorCode::NotFound, "no such route")
        })
        .layer(DefaultBodyLimit::max(JSON_BODY_BYTES))
        .layer(middleware::from_fn(refuse_nul_in_uri))
        .layer(middleware::from_fn(errors_as_json))
        .with_state(state)
}

/// Refuses (403) a caller whose role does not include `role`, before the
/// handler reads the request.
async fn require_role(role: Role, request: Request, next: Next) -> Response {
    let Some(caller) = request.extensions().get::<Caller>() else {
        return Failure::new(
            StatusCode::UNAUTHORIZED,
            ErrorCode::Unauthorized,
            "missing token: send `Authorization: Bearer <token>`",
        )
        .into_response();
    };
    if caller.role.includes(role) {
        return next.run(request).await;
    }
    let what = format!("{} {}", request.method(), request.uri().path());
    match caller.require(role, &what) {
        Ok(()) => next.run(request).await,
        Err(failure) => failure.into_response(),
    }
}

/// Refuses a request whose path or query holds `%00`: decoded, a name in
/// the path (a secret's, a user's) or a query's text (a search) would hold
/// U+0000, which PostgreSQL's text refuses — a 422 saying where (a query's
/// `field` is the parameter), on either engine, instead of a 500 from the
/// database.
pub(crate) async fn refuse_nul_in_uri(request: Request, next: Next) -> Response {
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

/// Answers every error as JSON, as the document says: axum's own
/// rejections (a path segment or query string that does not parse, a
/// method the route does not serve) are plain text, and become an
/// [`ApiError`] carrying that text. Other headers (`Allow`) are kept.
pub(crate) async fn errors_as_json(request: Request, next: Next) -> Response {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_need_a_developer() {
        for (method, path, access) in route_table() {
            if let Access::Role(role) = access
                && method != "get"
            {
                assert!(
                    role.includes(Role::Developer),
                    "{method} {path} lets a {role} change something"
                );
            }
        }
    }
}
