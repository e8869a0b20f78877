//! Who is calling: the executor token or an enrolled executor's
//! ([`ExecutorIdentity`]), users' and tenants' bearer tokens,
//! the operator token, and session cookies with their CSRF tokens; the
//! [`Caller`] every user route reads, and its role checks.

use super::*;

/// The bearer token of a request.
pub(crate) fn bearer(request: &Request) -> Result<&str, Failure> {
    bearer_in(request.headers())
}

/// The bearer token of a request's headers.
pub(crate) fn bearer_in(headers: &axum::http::HeaderMap) -> Result<&str, Failure> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .ok_or_else(missing_token)
}

/// The answer to a request without a token (nor a session).
pub(crate) fn missing_token() -> Failure {
    Failure::new(
        StatusCode::UNAUTHORIZED,
        ErrorCode::Unauthorized,
        "missing token: send `Authorization: Bearer <token>`",
    )
}

pub(crate) fn wrong_token() -> Failure {
    Failure::new(
        StatusCode::UNAUTHORIZED,
        ErrorCode::Unauthorized,
        "wrong token",
    )
}

pub(crate) fn same_token(presented: &str, expected: &str) -> bool {
    bool::from(presented.as_bytes().ct_eq(expected.as_bytes()))
}

/// Which executor credential a request of the executors' routes came
/// with: the shared executor token (every group), or an enrolled one.
#[derive(Debug, Clone)]
pub(crate) enum ExecutorIdentity {
    Shared,
    Enrolled {
        enrolled: crate::store::EnrolledExecutor,
        /// What admins present to the executor holding this token.
        admin_proof: String,
    },
}

impl ExecutorIdentity {
    /// The groups whose runs' results it may deliver: every group for the
    /// shared token, an enrolled executor's own groups.
    pub(crate) fn result_groups(&self) -> Option<&[String]> {
        match self {
            ExecutorIdentity::Shared => None,
            ExecutorIdentity::Enrolled { enrolled, .. } => Some(&enrolled.groups),
        }
    }

    /// Refuses (403) a group the credential may not register in.
    pub(crate) fn may_serve(&self, group: &str) -> Result<(), Failure> {
        match self {
            ExecutorIdentity::Enrolled { enrolled, .. }
                if !enrolled.groups.iter().any(|allowed| allowed == group) =>
            {
                Err(Failure::new(
                    StatusCode::FORBIDDEN,
                    ErrorCode::Forbidden,
                    format!(
                        "this executor's credential ({}) serves groups {}, not {group:?}",
                        enrolled.id,
                        enrolled.groups.join(", ")
                    ),
                ))
            }
            _ => Ok(()),
        }
    }
}

/// A handler of the executors' routes names the credential by taking an
/// `ExecutorIdentity` ([`executor_auth`] put it in the request).
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for ExecutorIdentity {
    type Rejection = Failure;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<ExecutorIdentity, Failure> {
        parts
            .extensions
            .get::<ExecutorIdentity>()
            .cloned()
            .ok_or_else(missing_token)
    }
}

/// Authenticates the executors' routes: the shared executor token, or an
/// enrolled executor's token that is neither revoked nor past its
/// rotation's overlap (looked up by its hash).
pub(crate) async fn executor_auth(
    State(state): State<Arc<AdminState>>,
    mut request: Request,
    next: Next,
) -> Response {
    use cronbox_protocol::credentials;
    let identity = match bearer(&request) {
        Ok(token) if same_token(token, &state.executor_token) => ExecutorIdentity::Shared,
        Ok(token) if credentials::is_enrolled(token) => {
            let hash = credentials::token_hash(token);
            let now_ms = state.services.now_ms();
            match service::executors::enrolled(state.services.store(), &hash, now_ms).await {
                Ok(Some(enrolled)) => ExecutorIdentity::Enrolled {
                    enrolled,
                    admin_proof: credentials::admin_proof(&hash),
                },
                Ok(None) => return wrong_token().into_response(),
                Err(error) => return Failure::from(error).into_response(),
            }
        }
        Ok(_) => return wrong_token().into_response(),
        Err(failure) => return failure.into_response(),
    };
    request.extensions_mut().insert(identity);
    next.run(request).await
}

pub(crate) use crate::model::DEFAULT_TENANT;

/// Who is calling the user API: a user (through its session or one of
/// its tokens), a tenant's token, or the operator token.
#[derive(Debug, Clone)]
pub(crate) struct Caller {
    /// The tenant whose objects it sees and creates (`default` for the
    /// operator).
    pub(crate) tenant: String,
    /// What it may do; [`Role::Operator`] sees every tenant's objects.
    pub(crate) role: Role,
    /// The user behind the request, if any.
    pub(crate) user: Option<String>,
    /// The CSRF token of the session the request came with, if it came
    /// with one.
    pub(crate) csrf: Option<String>,
    /// The stored API token it presented, if it presented one (its id).
    pub(crate) token_id: Option<i64>,
}

/// A handler names the caller by taking a `Caller`: the router's
/// authentication put it in the request (every route needing a user runs
/// behind it); a route without one answers 401.
impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = Failure;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _state: &S,
    ) -> Result<Caller, Failure> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(missing_token)
    }
}

impl Caller {
    pub(crate) fn operator(&self) -> bool {
        self.role == Role::Operator
    }

    /// Who made a change, as recorded with it: the user's name, else
    /// which kind of token.
    pub(crate) fn who(&self) -> String {
        match &self.user {
            Some(user) => user.clone(),
            None if self.operator() => "operator token".to_owned(),
            None => "tenant token".to_owned(),
        }
    }

    /// Whether the caller may see an object of `tenant`. Objects it may not
    /// see are answered 404, as if they did not exist.
    pub(crate) fn sees(&self, tenant: &str) -> bool {
        self.scope().sees(tenant)
    }

    /// The tenants whose objects the caller sees, as the services scope
    /// them.
    pub(crate) fn scope(&self) -> crate::service::scope::Scope {
        use crate::service::scope::Scope;
        if self.operator() {
            Scope::Everything
        } else {
            Scope::Tenant(self.tenant.clone())
        }
    }

    /// The tenant to restrict listings to (`None` for the operator).
    pub(crate) fn only_tenant(&self) -> Option<String> {
        self.scope().only_tenant().map(str::to_owned)
    }

    /// [`Caller::require_operator`] for one field of a request.
    pub(crate) fn require_operator_for(&self, field: &str, what: &str) -> Result<(), Failure> {
        self.require_operator(what)
            .map_err(|failure| failure.field(field))
    }

    pub(crate) fn require_operator(&self, what: &str) -> Result<(), Failure> {
        self.require(Role::Operator, what)
    }

    /// Refuses (403) a caller whose role does not include `role`.
    pub(crate) fn require(&self, role: Role, what: &str) -> Result<(), Failure> {
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
    pub(crate) fn require_user(&self, what: &str) -> Result<&str, Failure> {
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
/// state-changing requests must carry the session's CSRF token. What the
/// caller's role allows is the route table's to say (`routes::Access`).
pub(crate) async fn user_auth(
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
pub(crate) fn reads(request: &Request) -> bool {
    matches!(
        *request.method(),
        axum::http::Method::GET | axum::http::Method::HEAD
    )
}

/// Who sent a request with these headers (see [`user_auth`]); `reads`:
/// whether the request only reads.
pub(crate) async fn caller_of(
    state: &AdminState,
    headers: &axum::http::HeaderMap,
    reads: bool,
) -> Result<Caller, Failure> {
    let store = state.services.store();
    if headers.contains_key(header::AUTHORIZATION) {
        let token = bearer_in(headers)?;
        if same_token(token, &state.api_token) {
            return Ok(Caller {
                tenant: DEFAULT_TENANT.to_owned(),
                role: Role::Operator,
                user: None,
                csrf: None,
                token_id: None,
            });
        }
        let (principal, token_id) = service::tenants::principal_of(store, token)
            .await?
            .ok_or_else(wrong_token)?;
        return Ok(Caller {
            tenant: principal.tenant,
            role: principal.role,
            user: principal.user,
            csrf: None,
            token_id: Some(token_id),
        });
    }
    let Some(cookie) = cookie(headers, SESSION_COOKIE) else {
        return Err(bearer_in(headers).err().unwrap_or_else(wrong_token));
    };
    let (user, csrf) = service::users::session_of(store, cookie, state.services.now_ms())
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
        token_id: None,
    })
}
