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

pub(super) const VIEWER: Access = Access::Role(Role::Viewer);
pub(super) const DEVELOPER: Access = Access::Role(Role::Developer);
pub(super) const ADMIN: Access = Access::Role(Role::Admin);
pub(super) const OPERATOR: Access = Access::Role(Role::Operator);

/// One route as the table holds it: what the document says of it (its
/// method and path among that) and the access it needs.
pub(crate) struct Route {
    pub(crate) operation: Operation,
    pub(crate) access: Access,
}

/// The routes, each in the router of its access, and the table of every
/// route with its document and access.
pub(crate) struct Routes {
    open: Router<Arc<AdminState>>,
    executors: Router<Arc<AdminState>>,
    callers: Router<Arc<AdminState>>,
    users: Router<Arc<AdminState>>,
    table: Vec<Route>,
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

    /// Serves `handler` at the operation's method and path to callers
    /// with `access`, and lists it in the table.
    pub(crate) fn route<H, T>(&mut self, operation: Operation, access: Access, handler: H)
    where
        H: Handler<T, Arc<AdminState>>,
        T: 'static,
    {
        let filter = match operation.method {
            "get" => MethodFilter::GET,
            "post" => MethodFilter::POST,
            "put" => MethodFilter::PUT,
            "delete" => MethodFilter::DELETE,
            other => unreachable!("no route is served by method {other}"),
        };
        let path = operation.path;
        self.table.push(Route { operation, access });
        let route = on(filter, handler);
        match access {
            Access::Open => self.open = std::mem::take(&mut self.open).route(path, route),
            Access::Executor => {
                self.executors = std::mem::take(&mut self.executors).route(path, route)
            }
            Access::Caller => self.callers = std::mem::take(&mut self.callers).route(path, route),
            Access::Role(role) => {
                let route =
                    route.route_layer(middleware::from_fn(move |request: Request, next: Next| {
                        require_role(role, request, next)
                    }));
                self.users = std::mem::take(&mut self.users).route(path, route);
            }
        }
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

/// Every route with its document and the access it needs, each
/// resource's beside its handlers; an upload may be `max_module_bytes`,
/// every other body [`JSON_BODY_BYTES`]. Reads need a viewer, changes at
/// least a developer (`changes_need_a_developer` holds the table to that).
fn routes(max_module_bytes: usize) -> Routes {
    let mut table = Routes::new();
    super::open_routes(&mut table);
    executors::routes(&mut table);
    executor_tokens::routes(&mut table);
    users::routes(&mut table);
    modules::routes(&mut table, max_module_bytes);
    tenants::routes(&mut table);
    secrets::routes(&mut table);
    groups::routes(&mut table);
    jobs::routes(&mut table);
    triggers::routes(&mut table);
    schedules::routes(&mut table);
    backfills::routes(&mut table);
    calendars::routes(&mut table);
    runs::routes(&mut table);
    run_events::routes(&mut table);
    workflows::routes(&mut table);
    super::audit::routes(&mut table);
    table
}

/// Every route the admin serves, with its document and access: what the
/// OpenAPI document lists and states.
pub(crate) fn route_table() -> Vec<Route> {
    routes(0).table
}

pub(crate) fn router(state: Arc<AdminState>, max_module_bytes: usize) -> Router {
    let routes = routes(max_module_bytes);
    let executors = routes
        .executors
        .layer(middleware::from_fn_with_state(state.clone(), executor_auth));
    // Every change a caller makes (and every login) goes to the audit log;
    // inside the authentication, so that it knows who called.
    let audited = || middleware::from_fn_with_state(state.clone(), super::audit::record);
    let users = routes
        .users
        .route_layer(audited())
        .layer(middleware::from_fn_with_state(state.clone(), user_auth));
    let callers = routes
        .callers
        .route_layer(audited())
        .layer(middleware::from_fn_with_state(state.clone(), user_auth));
    routes
        .open
        .route_layer(audited())
        .merge(crate::console::routes())
        .merge(super::xxl_job::routes())
        .merge(super::xxl_job_jobs::routes().route_layer(audited()))
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
        return missing_token().into_response();
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
        for Route { operation, access } in route_table() {
            if let Access::Role(role) = access
                && operation.method != "get"
            {
                assert!(
                    role.includes(Role::Developer),
                    "{} {} lets a {role} change something",
                    operation.method,
                    operation.path
                );
            }
        }
    }
}
